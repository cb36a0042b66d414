"""Bonaventura's Table 17: the constraint-space matrix Bᶜ from contact-pair blocks, and the two maps between
contact forces and module point quantities that Steps 3-4 need (MRDS Bonaventura eq. 88, 92-96).

A contact i reaches a module k through its *sides*: side E, at operational point (slot) s of module k, with
the d x d operator T = −ℜᵢᵀ Sᵢ, and side P with T = ℜᵢᵀ (ℜᵢ = ᴵℜ_Eᵢ, Sᵢ = ᴵS_EᵢPᵢ of Bonaventura eq. 20, both restricted
to the task rows; :func:`~mrds_jax.system.dynamics.contact_kinematics`). A Type B contact has both sides on
one module. The relative acceleration of contact i is ᴱẍ_EP = Σ_{sides a of i} Tₐ ẍ_{k(a)}[s_a] (+ the bias
of Bonaventura eq. 83), and by duality the force F_EP of contact i acts on point s of module k as Tₐᵀ F_EP (Bonaventura eq. 95-96).
Writing Aₖ for the block operator with Aₖ[i, s] = Σ_{sides of i at (k, s)} Tₐ (the dense form this module
replaces), the three quantities of Steps 3-4 are

    Aₖᵀ F            :func:`point_forces`:  fₖ[s] = Σ_{sides a at (k, s)} Tₐᵀ F_{i(a)}          (Bonaventura eq. 95-96)
    Aₖ x             :func:`contact_accelerations`:  (Aₖ x)ᵢ = Σ_{sides a of i at k} Tₐ x[s_a]
    Bᶜ = ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ   :func:`constraint_space_matrix`, block by block (Table 17, Bonaventura eq. 88):
        Bᶜᵢⱼ = Σ_{a ∈ sides(i), b ∈ sides(j), k(a) = k(b)} Wₐᵀ Λₖ⁻¹[s_a, s_b] W_b,   Wₐ = Tₐᵀ ψᶜᵢ

so only pairs of contacts that share a module get a non-zero block (Table 17's AA, AB, BB cases are the
four sign combinations of Tₐ), and no d·C x d·nₖ operator is ever formed. Wₐ is Lilly & Orin's W_c (the
constrained directions of the contact seen at the module's point; :mod:`.lilly`).

Every function is pure, works on one scenario and loops over the static side list at trace time.
"""
from typing import NamedTuple

import jax.numpy as jnp

from ..spatial.linalg import matmul


class Side(NamedTuple):
    """One side of a contact that lies on a module (the ground has no sides): static structure."""
    contact: int    # index i of the contact
    module: int     # index k of the module
    slot: int       # index s of the operational point in ``Connectivity.points[k]``


def contact_sides(connectivity):
    """Per contact, the tuple of its :class:`Side` s on modules (E first, then P; the ground is left out)."""
    out = []
    for i, (mE, sE, mP, sP) in enumerate(connectivity.sides):
        out.append(tuple(Side(i, m, s) for m, s in ((mE, sE), (mP, sP)) if m >= 0))
    return tuple(out)


def _module_sides(sides, k):
    return [(a, side) for i, per in enumerate(sides) for a, side in enumerate(per) if side.module == k]


def point_forces(sides, T, forces, k, n_points, d):
    """Aₖᵀ F: the forces of every contact moved to the operational points of module k (Bonaventura eq. 95-96), stacked
    (n_points·d,) — or (n_points·d, m) when each contact's force is a (d, m) matrix of force columns.

    ``sides``: :func:`contact_sides`; ``T[i][a]``: the d x d operator of side a of contact i; ``forces[i]``:
    ᴱᴾF_EP of contact i, (d,) or (d, m)."""
    trailing = forces[0].shape[1:] if forces else ()
    dtype = forces[0].dtype if forces else jnp.float32
    per_slot = [None] * n_points
    for a, side in _module_sides(sides, k):
        f = matmul(T[side.contact][a].T, forces[side.contact])
        per_slot[side.slot] = f if per_slot[side.slot] is None else per_slot[side.slot] + f
    zero = jnp.zeros((d,) + trailing, dtype=dtype)
    return jnp.concatenate([zero if f is None else f for f in per_slot])


def contact_accelerations(sides, T, point_accelerations, d):
    """Σₖ Aₖ xₖ: per contact, the relative acceleration (d,) that the point accelerations ``xₖ`` of the modules
    produce (``point_accelerations[k]``: stacked (nₖ·d,), or None for a module without points)."""
    out = []
    for i, per in enumerate(sides):
        acc = None
        for a, side in enumerate(per):
            x = point_accelerations[side.module][d * side.slot:d * (side.slot + 1)]
            term = matmul(T[i][a], x)
            acc = term if acc is None else acc + term
        out.append(acc)
    return out


def constraint_space_matrix(sides, W, Lam_inv, n_c, d, dtype):
    """Bᶜ (n_C x n_C) of Table 17 / Bonaventura eq. 88 from contact-pair blocks (module docstring).

    ``W[i][a]`` = Tₐᵀ ψᶜᵢ (d x n_cᵢ) for side a of contact i; ``Lam_inv[k]``: Λₖ⁻¹ of module k (nₖ·d square,
    Bonaventura eq. 69-70), None for modules without points; ``n_c``: constrained directions per contact."""
    C = len(sides)
    blocks = [[None] * C for _ in range(C)]
    for k, L in enumerate(Lam_inv):
        members = _module_sides(sides, k)
        for jb, (b, side_b) in enumerate(members):
            j, sb = side_b.contact, side_b.slot
            Y = matmul(L[:, d * sb:d * (sb + 1)], W[j][b])          # Λₖ⁻¹[:, s_b] W_b  (nₖ·d x n_cⱼ)
            for a, side_a in members[:jb + 1]:
                i, sa = side_a.contact, side_a.slot
                blk = matmul(W[i][a].T, Y[d * sa:d * (sa + 1)])      # Wₐᵀ Λₖ⁻¹[s_a, s_b] W_b
                _accumulate(blocks, i, j, blk)
                if (i, a) != (j, b):
                    _accumulate(blocks, j, i, blk.T)
    rows = []
    for i in range(C):
        rows.append(jnp.concatenate([jnp.zeros((n_c[i], n_c[j]), dtype) if blocks[i][j] is None else blocks[i][j]
                                     for j in range(C)], axis=1))
    return jnp.concatenate(rows, axis=0) if rows else jnp.zeros((0, 0), dtype)


def _accumulate(blocks, i, j, blk):
    blocks[i][j] = blk if blocks[i][j] is None else blocks[i][j] + blk
