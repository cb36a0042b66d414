"""Bonaventura's Table 17: the constraint-space matrix Bᶜ from contact-pair blocks, and the two maps between
contact forces and module point quantities that Steps 3-4 need (Bonaventura eq. 88, 92-96).

A contact i reaches a module k through its *sides*: side E, at operational point (slot) s of module k, with
the d x d operator T = −ℜᵢᵀ Sᵢ, and side P with T = ℜᵢᵀ (ℜᵢ = ᴵℜ_Eᵢ, Sᵢ = ᴵS_EᵢPᵢ of Bonaventura eq. 20, both restricted
to the task rows; :func:`~mrds_jax.system.dynamics.contact_kinematics`). A Type B contact has both sides on
one module. The relative acceleration of contact i is ᴱẍ_EP = Σ_{sides a of i} Tₐ ẍ_{k(a)}[s_a] (+ the bias
of Bonaventura eq. 83), and by duality the force F_EP of contact i acts on point s of module k as Tₐᵀ F_EP (Bonaventura eq. 95-96).
Writing Aₖ for the block operator with Aₖ[i, s] = Σ_{sides of i at (k, s)} Tₐ (the dense form this module
replaces), the three quantities of Steps 3-4 are Aₖᵀ F (:func:`point_forces`), Aₖ x
(:func:`contact_accelerations`) and Bᶜ, block by block (:func:`constraint_space_matrix`):

    Aₖᵀ F:   fₖ[s] = Σ_{sides a at (k, s)} Tₐᵀ F_{i(a)}          (Bonaventura eq. 95-96)
    Aₖ x:    (Aₖ x)ᵢ = Σ_{sides a of i at k} Tₐ x[s_a]
    Bᶜ = ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ  (Table 17, Bonaventura eq. 88):
        Bᶜᵢⱼ = Σ_{a ∈ sides(i), b ∈ sides(j), k(a) = k(b)} Wₐᵀ Λₖ⁻¹[s_a, s_b] W_b,   Wₐ = Tₐᵀ ψᶜᵢ

so only pairs of contacts that share a module get a non-zero block (Table 17's AA, AB, BB cases are the
four sign combinations of Tₐ), and no d·C x d·nₖ operator is ever formed. Wₐ is Lilly & Orin's W_c (the
constrained directions of the contact seen at the module's point; :mod:`.lilly`).

Λₖ⁻¹ = Jₖ Ψₖ (Bonaventura eq. 69-70 with Ψ = H⁻¹Jᵀ of Bonaventura eq. 75) enters only through products with W's and forces, so
where a module's Step 2 terms carry its point Jacobian J the products are associated the other way,
Wₐᵀ Λ⁻¹[s_a, s_b] W_b = (J[s_a]ᵀWₐ)ᵀ (Ψ[:, s_b] W_b), whenever that needs fewer multiplications than forming
the nₖ·d square Λₖ⁻¹ (a free platform with six contact points: 36 x 36 never formed); the choice is static,
per module (:func:`_factored`), and both routes are tested against each other.

Every function is pure, works on one scenario and loops over the static side list at trace time.
"""
from typing import NamedTuple

import jax.numpy as jnp

from ..dynamics.interface import Directions
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
    zero = jnp.zeros((d,) + trailing, dtype=dtype)
    return jnp.concatenate([zero if f is None else f for f in forces_per_point(sides, T, forces, k, n_points)])


def forces_per_point(sides, T, forces, k, n_points):
    """Aₖᵀ F point by point: per operational point of module k, the sum of Tₐᵀ F_{i(a)} over the sides a there, or
    None where no contact acts (:func:`point_forces` stacks them)."""
    per_slot = [None] * n_points
    for a, side in _module_sides(sides, k):
        f = matmul(T[side.contact][a].T, forces[side.contact])
        per_slot[side.slot] = f if per_slot[side.slot] is None else per_slot[side.slot] + f
    return per_slot


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


def constraint_space_matrix(sides, W, terms, n_c, d, dtype):
    """Bᶜ (n_C x n_C) of Table 17 / Bonaventura eq. 88 from contact-pair blocks (module docstring).

    ``W[i][a]`` = Tₐᵀ ψᶜᵢ (d x n_cᵢ) for side a of contact i; ``terms[k]``: the Step 2
    :class:`~mrds_jax.dynamics.interface.ModuleTerms` of module k (Λₖ⁻¹ of Bonaventura eq. 69-70, or its factors J and
    Ψ), None for modules without points; ``n_c``: constrained directions per contact."""
    C = len(sides)
    blocks = [[None] * C for _ in range(C)]
    for k, t in enumerate(terms):
        if t is None:
            continue
        members = _module_sides(sides, k)
        block = _pair_blocks(t, [(side.slot, W[side.contact][a]) for a, side in members], d)
        for jb, (b, side_b) in enumerate(members):
            for ja, (a, side_a) in enumerate(members[:jb + 1]):
                blk = block(ja, jb)                                         # Wₐᵀ Λₖ⁻¹[s_a, s_b] W_b
                i, j = side_a.contact, side_b.contact
                _accumulate(blocks, i, j, blk)
                if (i, a) != (j, b):
                    _accumulate(blocks, j, i, blk.T)
    rows = []
    for i in range(C):
        rows.append(jnp.concatenate([jnp.zeros((n_c[i], n_c[j]), dtype) if blocks[i][j] is None else blocks[i][j]
                                     for j in range(C)], axis=1))
    return jnp.concatenate(rows, axis=0) if rows else jnp.zeros((0, 0), dtype)


def _factored(t, formed, factored):
    """True when the module's terms ``t`` give J and a product with Λ⁻¹ = J Ψ costs fewer multiplications in
    factored form (``factored``) than with Λ⁻¹ formed (n·d·n·d·nv to form it, plus ``formed``)."""
    if getattr(t, "J", None) is None:
        return False
    nd, nv = t.Psi.shape[1], t.Psi.shape[0]
    return factored < nd * nd * nv + formed


def _pair_blocks(t, sides, d):
    """Wₐᵀ Λ⁻¹[s_a, s_b] W_b for the sides (s_a, Wₐ) of one module, as a function of (a, b).

    Formed route: Y_b = Λ⁻¹[:, s_b] W_b, block = Wₐᵀ Y_b[s_a]. Factored route (Λ⁻¹ = J Ψ, Bonaventura eq. 69-70 with
    Ψ = H⁻¹ Jᵀ of Bonaventura eq. 75): Vₐ = J[s_a]ᵀ Wₐ and U_b = Ψ[:, s_b] W_b (nv x n_c), block = Vₐᵀ U_b — the
    same product, associated the other way; :func:`_factored` picks the cheaper one statically."""
    def point(s):
        return slice(d * s, d * (s + 1))
    nv, nc = t.Psi.shape[0], [w.shape[-1] for _, w in sides]
    pairs = sum(nc[a] * nc[b] for b in range(len(nc)) for a in range(b + 1))
    if _factored(t, formed=t.Psi.shape[1] * d * sum(nc) + d * pairs, factored=2 * nv * d * sum(nc) + nv * pairs):
        V = [matmul(t.J[point(s)].T, w) for s, w in sides]
        U = [matmul(t.Psi[:, point(s)], w) for s, w in sides]
        return lambda a, b: matmul(V[a].T, U[b])
    Y = [matmul(t.Lam_inv[:, point(s)], w) for s, w in sides]
    return lambda a, b: matmul(sides[a][1].T, Y[b][point(sides[a][0])])


def operational_inverse_inertia_times(t, x):
    """Λ⁻¹ x (Bonaventura eq. 69-70) for a module's Step 2 terms ``t`` and a stacked point vector or matrix ``x``
    (n·d leading rows): J (Ψ x) where the factors are given and that is cheaper, else the formed Λ⁻¹."""
    nv, nd, n_cols = t.Psi.shape[0], t.Psi.shape[1], (x.shape[1] if x.ndim > 1 else 1)
    if _factored(t, formed=nd * nd * n_cols, factored=2 * nv * nd * n_cols):
        return matmul(t.J, matmul(t.Psi, x))
    return matmul(t.Lam_inv, x)


def _accumulate(blocks, i, j, blk):
    blocks[i][j] = blk if blocks[i][j] is None else blocks[i][j] + blk


# ------------------------------------------------------------------ Ψ along the constrained directions only
class ModuleColumns(NamedTuple):
    """Static layout of a module's constraint directions D (:func:`constraint_directions`): one column block per
    contact that touches the module (contact order), then one column of known free-direction forces."""
    contacts: tuple     # indices i of the contacts with a side on the module
    slices: tuple       # their column slices in D (n_cᵢ columns each)
    free: object        # slice of the free-force column, or None


def column_layout(sides, n_c, k, with_free):
    """The :class:`ModuleColumns` of module k (``with_free``: the system has contacts with applied free-direction
    forces, ψᵘFᵘ)."""
    contacts = tuple(i for i, per in enumerate(sides) if any(side.module == k for side in per))
    ends = [0]
    for i in contacts:
        ends.append(ends[-1] + n_c[i])
    slices = tuple(slice(a, b) for a, b in zip(ends[:-1], ends[1:]))
    return ModuleColumns(contacts, slices, slice(ends[-1], ends[-1] + 1) if with_free else None)


def constraint_layouts(system):
    """Per module of ``system``, the static :class:`ModuleColumns` of its constraint directions."""
    conn = system.connectivity
    applied = any(c.applied is not None for c in system.contacts)
    sides = contact_sides(conn)
    return [column_layout(sides, conn.n_c, k, applied) for k in range(len(system.modules))]


def constraint_directions(sides, W, layout, k, free_forces=None):
    """D of module k (:class:`~mrds_jax.dynamics.interface.Directions`): for each contact i of ``layout``, Aₖᵀ ψᶜᵢ —
    its sides' Wₐ = Tₐᵀ ψᶜᵢ at their points' rows, in the contact's columns (a Type B contact with both sides on the
    module has two entries there, which add) — then, with ``free_forces`` (per point slot, the (d,) force
    Aₖᵀ ψᵘFᵘ there, or None), those as one more column. Then Dᵀ Λₖ⁻¹ D holds every block of Bᶜ that module k adds
    (Table 17, module docstring) and Ψₖ D the module's response to each column."""
    blocks, slots, starts = [], [], []
    for i, cols in zip(layout.contacts, layout.slices):
        for a, side in enumerate(sides[i]):
            if side.module == k:
                blocks.append(W[i][a])
                slots.append(side.slot)
                starts.append(cols.start)
    if layout.free is not None:
        for s, f in enumerate(free_forces):
            if f is not None:
                blocks.append(f[:, None])
                slots.append(s)
                starts.append(layout.free.start)
    width = layout.free.stop if layout.free is not None else (layout.slices[-1].stop if layout.slices else 0)
    return Directions(blocks, slots, starts, width)


def constraint_space_matrix_from_columns(layouts, K, n_c, dtype):
    """Bᶜ (n_C x n_C, Bonaventura eq. 88) from each module's Kₖ = Dₖᵀ Λₖ⁻¹ Dₖ (:func:`constraint_directions`):
    Bᶜᵢⱼ = Σₖ Kₖ[cols(i), cols(j)] over the modules that both contacts touch — Table 17's blocks, the same sum
    as :func:`constraint_space_matrix` with each module's sides gathered into its columns."""
    C = len(n_c)
    blocks = [[None] * C for _ in range(C)]
    for layout, Kk in zip(layouts, K):
        if Kk is None:
            continue
        for i, si in zip(layout.contacts, layout.slices):
            for j, sj in zip(layout.contacts, layout.slices):
                _accumulate(blocks, i, j, Kk[si, sj])
    rows = [jnp.concatenate([jnp.zeros((n_c[i], n_c[j]), dtype) if blocks[i][j] is None else blocks[i][j]
                             for j in range(C)], axis=1) for i in range(C)]
    return jnp.concatenate(rows, axis=0) if rows else jnp.zeros((0, 0), dtype)


def along_contacts(layouts, per_module, n_c, n_cols, dtype):
    """Per contact i, the sum over modules k of ``per_module[k]``'s rows at contact i's columns (n_cᵢ x n_cols): a
    module quantity with one row per column of Dₖ (Kₖ's free-force column, or Uₖᵀ Gₖᵀ) summed into the contacts'
    constrained directions."""
    out = [None] * len(n_c)
    for layout, X in zip(layouts, per_module):
        if X is None:
            continue
        for i, si in zip(layout.contacts, layout.slices):
            out[i] = X[si] if out[i] is None else out[i] + X[si]
    return [jnp.zeros((n, n_cols), dtype) if x is None else x for n, x in zip(n_c, out)]
