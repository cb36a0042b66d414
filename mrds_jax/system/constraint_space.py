"""Step 3 of Bonaventura's method (Table 19): the constraint-space system Bᶜ Fᶜ = yᶜ of a system at a state
(Bonaventura eq. 81-90, Table 17), in one function, :func:`constraint_system`, that reads top to bottom; its helpers
follow it in the order it calls them, then the two maps :mod:`.inverse` shares (:func:`point_forces`) and the
contact kinematics :mod:`.lilly` shares (:func:`contact_kinematics`). :mod:`.dynamics` (Step 4) only calls it.

**The contacts' kinematics.** For each contact i, Sᵢ = ᴵS_EiPi (Bonaventura eq. 20), the spatial rotation
ℜᵢ = ᴵℜ_Ei, ζᵢ (Bonaventura eq. 81), ᴱẋ_EP (Bonaventura eq. 98) and ᴱẍᵒᵖᵉⁿ_EP (Bonaventura eq. 83), from the placements,
velocities and open-chain (classical) accelerations of the modules' points that Step 2 gives
(:func:`~mrds_jax.dynamics.interface.point_motion`, :func:`~mrds_jax.dynamics.interface.module_terms_along`). All
accelerations are classical (ẍ = J q̈ + J̇ q̇), as ζ of Bonaventura eq. 81 requires (notes §0.3). Everything is
[angular; linear]; planar systems use the 3 task rows [ω_z; v_x; v_y] of the same 6-D formulas (their ζ, S, ℜ
restricted to the plane, notes §3.6). The ground has no module: its Λ⁻¹ and Ψ are 0 (footnote 16) and its
acceleration is 0.

**The sides.** A contact i reaches a module k through its *sides*: side E, at operational point (slot) s of module
k, with the d x d operator T_E = −ℜᵢᵀ Sᵢ, and side P with T_P = ℜᵢᵀ (both restricted to the task rows). A Type B
contact has both sides on one module (the relative Jacobian ᴱJ_EP = ℜᵀ(J_P − S J_E) of Bonaventura eq. 71 through
its O(N) forms Bonaventura eq. 92-94). The relative acceleration of contact i is ᴱẍ_EP = Σ_{sides a of i} Tₐ ẍ_{k(a)}[s_a]
(+ the bias of Bonaventura eq. 83), and by duality the force F_EP of contact i acts on point s of module k as Tₐᵀ F_EP
(Bonaventura eq. 95-96). Writing Aₖ for the block operator with Aₖ[i, s] = Σ_{sides of i at (k, s)} Tₐ (never formed),
the forces on the modules' points are Aₖᵀ F (:func:`point_forces`) and Bᶜ is Table 17's sum:

    Aₖᵀ F:   fₖ[s] = Σ_{sides a at (k, s)} Tₐᵀ F_{i(a)}          (Bonaventura eq. 95-96)
    Bᶜ = ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ  (Table 17, Bonaventura eq. 88)

**Bᶜ along the constraint directions only.** The contacts' constrained directions seen at the modules' points,
Wₐ = Tₐᵀ ψᶜᵢ (Lilly & Orin's W_c; :mod:`.lilly`), are known before Step 2's solve, so each module k is asked for
Ψₖ and Λₖ⁻¹ along its constraint directions Dₖ = Aₖᵀ ψᶜ only (:func:`constraint_directions`: one column block per
contact that touches it, then one column of the known free-direction forces Aₖᵀ ψᵘFᵘ), as Uₖ = Ψₖ Dₖ and
Kₖ = Dₖᵀ Λₖ⁻¹ Dₖ (:func:`~mrds_jax.dynamics.interface.module_terms_along`: the four-loop biped's solve with H takes
12 columns instead of its 8 points' 48 task rows). Then Bᶜᵢⱼ = Σₖ Kₖ[cols(i), cols(j)] over the modules both
contacts touch (:func:`constraint_space_matrix`): only pairs of contacts that share a module get a non-zero block
(Table 17's AA, AB, BB cases are the four sign combinations of Tₐ; AA: ℜᵢᵀ[Λ_PP − Λ_PE Sⱼᵀ − Sᵢ Λ_EP +
Sᵢ Λ_EE Sⱼᵀ]ℜⱼ).

**The right-hand side.** yᶜ = ẍᶜ + ψᶜᵀ [y − B ψᵘ Fᵘ] with yᵢ = φ̇ᵘẋᵘ + φ̇ᶜẋᶜ − ᴱẍᵒᵖᵉⁿ_EP (Bonaventura eq. 89-90;
the φ̇ term is zero for constant modes, and for variable modes (universal joint) it and the bases φ, ψ come from
:func:`~mrds_jax.contacts.variable.contact_modes` at the current relative configuration); ψᶜᵀ B ψᵘFᵘ is the
free-force column of the Kₖ, summed into the contacts' rows (:func:`along_contacts`).

Every function is pure and jit/vmap-able, works on one scenario and loops over the static module, contact and
side lists at trace time.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..contacts.variable import contact_modes
from ..dynamics.interface import Directions, module_terms_along, point_motion
from ..model.tree import task_slice
from ..spatial import cross, skew, spatial_rotation
from ..spatial.linalg import matmul
from ..validation import system_state
from .build import module_taus
from .stabilisation import relative_pose


class ConstraintSystem(NamedTuple):
    """Step 3 quantities (Table 19)."""
    Bc: jnp.ndarray            # (n_C, n_C), Bonaventura eq. 88
    yc: jnp.ndarray            # (n_C,), Bonaventura eq. 89
    xdd_open_EP: tuple         # per contact: ᴱẍᵒᵖᵉⁿ_EP (d,), Bonaventura eq. 83
    xd_EP: tuple               # per contact: ᴱẋ_EP (d,), Bonaventura eq. 98
    F_u: tuple                 # per contact: Fᵘ (d − n_c,)
    T: tuple                   # per contact: the d x d operators Tₐ of its sides on modules (module docstring)
    terms: tuple               # per module: ColumnTerms along its constraint directions (None without contact points)
    modes: tuple = ()          # per contact: ContactModes (bases at the current state, φ̇ term of Bonaventura eq. 90)
    motion: tuple = ()         # per module: PointMotion of its contact points (None without)


def constraint_system(system, state, tau=None, t=0.0, method="direct"):
    """Steps 2-3 up to the linear system: Bᶜ (Bonaventura eq. 88, Table 17's contact-pair blocks),
    yᶜ (Bonaventura eq. 89) and the pieces Step 4 needs afterwards (module docstring).

    The points' placements and velocities come first (:func:`~mrds_jax.dynamics.interface.point_motion`), so the
    contacts' constrained directions Wₐ = Tₐᵀ ψᶜ are known before Step 2's solve: each module is asked for Ψ and
    Λ⁻¹ only along them (:func:`~mrds_jax.dynamics.interface.module_terms_along` with :func:`constraint_directions`),
    and Bᶜ is summed from the modules' Dₖᵀ Λₖ⁻¹ Dₖ (:func:`constraint_space_matrix`)."""
    system_state(system, state, "forward dynamics")
    conn = system.connectivity
    d = conn.dim
    rows = task_slice(d)
    dtype = state.q[0].dtype
    taus = module_taus(system, tau, dtype)
    # the contact points' placements and velocities, per module (Step 2's kinematics)
    motion = _per_module(system, lambda m, pts, q, v: point_motion(m, q, v, pts), state.q, state.v)
    # per contact: its relative motion (Bonaventura eq. 20, 81, 98), bases, operators Tₐ and Wₐ = Tₐᵀ ψᶜ
    sides = contact_sides(conn)
    T, W, rel, xd_EP, F_u, modes = [], [], [], [], [], []
    for c, (mE, sE, mP, sP) in zip(system.contacts, conn.sides):
        side_E, side_P = _side_motion(c, motion, mE, sE, dtype), _side_motion(c, motion, mP, sP, dtype)
        r = relative_motion(side_E, side_P)
        m = _current_modes(c, side_E, side_P, r.xd, t, dtype)
        Ti = tuple(Tx[rows, rows] for Tx, k in ((r.T_E, mE), (r.T_P, mP)) if k >= 0)
        modes.append(m)
        rel.append(r)
        T.append(Ti)
        W.append(tuple(matmul(Tx.T, m.psi_c) for Tx in Ti))                 # Wₐ = Tₐᵀ ψᶜ
        xd_EP.append(r.xd[rows])
        F_u.append(c.free_force(t, dtype))
    # the known free-direction forces ψᵘFᵘ, where a contact applies any
    applied = any(c.applied is not None for c in system.contacts)
    free = ([matmul(m.psi_u, fu) for m, fu in zip(modes, F_u)] if applied else None)    # ψᵘFᵘ
    # Step 2 along each module's constraint directions Dₖ only: Uₖ = Ψₖ Dₖ, Kₖ = Dₖᵀ Λₖ⁻¹ Dₖ
    layouts = constraint_layouts(system)
    D = [constraint_directions(sides, W, layouts[k], k,
                               forces_per_point(sides, T, free, k, len(pts)) if applied else None) if pts else None
         for k, pts in enumerate(conn.points)]
    terms = _per_module(system, lambda mod, pts, q, v, tq, Dk: module_terms_along(mod, q, v, tq, pts, Dk, method),
                        state.q, state.v, taus, D)
    # Bᶜ from the modules' Kₖ (Bonaventura eq. 88, Table 17)
    Bc = constraint_space_matrix(layouts, [None if tk is None else tk.K for tk in terms], conn.n_c, dtype)
    # yᶜ (Bonaventura eq. 89-90) from the sides' open-chain accelerations
    xdd_open_EP = [relative_open_acceleration(r, _side_acceleration(terms, mE, sE, dtype),
                                              _side_acceleration(terms, mP, sP, dtype))[rows]
                   for r, (mE, sE, mP, sP) in zip(rel, conn.sides)]
    y = [m.phidot_term - x for m, x in zip(modes, xdd_open_EP)]             # Bonaventura eq. 90
    xdd_c = [c.constraint_velocity_and_acceleration(t, dtype)[1] for c in system.contacts]
    yc = [xc + matmul(m.psi_c.T, yi) for xc, m, yi in zip(xdd_c, modes, y)]   # Bonaventura eq. 89
    if applied:                                                              # − ψᶜᵀ B ψᵘFᵘ (Bonaventura eq. 89)
        pushed = along_contacts(layouts, [None if tk is None else tk.K[:, lay.free] for tk, lay in zip(terms, layouts)],
                                conn.n_c, 1, dtype)
        yc = [yi - b[:, 0] for yi, b in zip(yc, pushed)]
    yc = jnp.concatenate(yc) if yc else jnp.zeros(0, dtype)
    return ConstraintSystem(Bc, yc, tuple(xdd_open_EP), tuple(xd_EP), tuple(F_u), tuple(T), terms, tuple(modes),
                            motion)


def _per_module(system, fn, *per_module):
    """fn(module, points, *(a[k] for a in per_module)) for every module k with contact points (None for the
    others); identical modules (``Connectivity.groups``) whose arguments have the same shapes are stacked and
    ``vmap``ped, not looped."""
    conn = system.connectivity
    out = [None] * len(system.modules)
    for group in conn.groups:
        pts = conn.points[group[0]]
        if not pts:
            continue
        by_shape = {}
        for k in group:
            args = tuple(a[k] for a in per_module)
            key = (jax.tree.structure(args), tuple(jnp.shape(x) for x in jax.tree.leaves(args)))
            by_shape.setdefault(key, []).append(k)
        for members in by_shape.values():
            if len(members) == 1:
                k = members[0]
                out[k] = fn(system.modules[k], pts, *(a[k] for a in per_module))
                continue
            stacked = jax.vmap(lambda m, *xs: fn(m, pts, *xs))(
                _stack([system.modules[k] for k in members]), *(_stack([a[k] for k in members]) for a in per_module))
            for j, k in enumerate(members):
                out[k] = jax.tree.map(lambda x, j=j: x[j], stacked)
    return tuple(out)


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


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


def _side_motion(contact, motion, m, slot, dtype):
    """(R, p, ẋ) of one side of a contact from its module's :class:`~mrds_jax.dynamics.interface.PointMotion`; the
    ground is fixed."""
    if m < 0:
        return contact.ground_R, contact.ground_p, jnp.zeros(6, dtype=dtype)
    pm = motion[m]
    return pm.R[slot], pm.p[slot], pm.xd[slot]


class RelativeMotion(NamedTuple):
    """A contact's relative kinematics at the velocity level (:func:`relative_motion`)."""
    T_E: jnp.ndarray    # (6, 6) −ℜᵀS, the operator of side E
    T_P: jnp.ndarray    # (6, 6) ℜᵀ, the operator of side P
    xd: jnp.ndarray     # (6,) ᴱẋ_EP (Bonaventura eq. 98)
    zeta: jnp.ndarray   # (6,) ζ (Bonaventura eq. 81)
    RT: jnp.ndarray     # (3, 3) ᴵR_Eᵀ
    r: jnp.ndarray      # (3,) p_P − p_E


def relative_motion(side_E, side_P):
    """T_E = −ℜᵀ S and T_P = ℜᵀ with S = ᴵS_EP (Bonaventura eq. 20, r = p_P − p_E) and ℜ = ᴵℜ_E;
    ᴱẋ_EP = ℜᵀ(ẋ_P − S ẋ_E) (Bonaventura eq. 98); ζ = [ω × ω_rel; ω × (ω × r) + 2 ω × ṙ_rel] (Bonaventura eq. 81 in
    [angular; linear]), ω = ᴵω_IE and [ω_rel; ṙ_rel] = ẋ_P − S ẋ_E = ℜ ᴱẋ_EP. Sides: (R, p, ẋ), world quantities."""
    R_E, p_E, xd_E = side_E
    _, p_P, xd_P = side_P
    r = p_P - p_E
    RT = R_E.T
    T_E = -spatial_rotation(RT).at[3:, :3].set(-matmul(RT, skew(r)))     # −ℜᵀS = −[[Rᵀ, 0], [−Rᵀr̃, Rᵀ]]
    rel = xd_P - rigid_body_motion(r, xd_E)
    w = xd_E[:3]
    zeta = jnp.concatenate([cross(w, rel[:3]), cross(w, cross(w, r)) + 2.0 * cross(w, rel[3:])])
    return RelativeMotion(T_E, spatial_rotation(RT), _rotate6(RT, rel), zeta, RT, r)


def rigid_body_motion(r, x):
    """ᴵS_EP x (Bonaventura eq. 20) without forming S: [ω; v − r̃ω] = [ω; v + ω × r] for x = [ω; v]."""
    return jnp.concatenate([x[:3], x[3:] + cross(x[:3], r)])


def _rotate6(R, x):
    """diag(R, R) x (Bonaventura eq. 18) without forming the 6 x 6 matrix."""
    return jnp.concatenate([matmul(R, x[:3]), matmul(R, x[3:])])


def _current_modes(contact, side_E, side_P, xd6, t, dtype):
    """The contact's bases at the relative configuration ᴱR_P = ᴵR_Eᵀ ᴵR_P (Bonaventura eq. 99), ᴱr_EP (Bonaventura eq. 97) and
    the φ̇ term of Bonaventura eq. 90 (zero, at no cost, for constant modes); ``xd6`` = 6-D ᴱẋ_EP (Bonaventura eq. 98)."""
    xd_c = contact.constraint_velocity_and_acceleration(t, dtype)[0]
    return contact_modes(contact, *relative_pose(side_E, side_P), xd6, xd_c)


def forces_per_point(sides, T, forces, k, n_points):
    """Aₖᵀ F point by point: per operational point of module k, the sum of Tₐᵀ F_{i(a)} over the sides a there, or
    None where no contact acts (:func:`point_forces` stacks them)."""
    per_slot = [None] * n_points
    for a, side in _module_sides(sides, k):
        f = matmul(T[side.contact][a].T, forces[side.contact])
        per_slot[side.slot] = f if per_slot[side.slot] is None else per_slot[side.slot] + f
    return per_slot


def _module_sides(sides, k):
    return [(a, side) for i, per in enumerate(sides) for a, side in enumerate(per) if side.module == k]


def constraint_layouts(system):
    """Per module of ``system``, the static :class:`ModuleColumns` of its constraint directions."""
    conn = system.connectivity
    applied = any(c.applied is not None for c in system.contacts)
    sides = contact_sides(conn)
    return [column_layout(sides, conn.n_c, k, applied) for k in range(len(system.modules))]


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


def constraint_space_matrix(layouts, K, n_c, dtype):
    """Bᶜ (n_C x n_C, Bonaventura eq. 88) from each module's Kₖ = Dₖᵀ Λₖ⁻¹ Dₖ (:func:`constraint_directions`):
    Bᶜᵢⱼ = Σₖ Kₖ[cols(i), cols(j)] over the modules that both contacts touch: Table 17's blocks
    Σ_{a ∈ sides(i), b ∈ sides(j), k(a) = k(b)} Wₐᵀ Λₖ⁻¹[s_a, s_b] W_b with each module's sides gathered into its
    columns."""
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


def _accumulate(blocks, i, j, blk):
    blocks[i][j] = blk if blocks[i][j] is None else blocks[i][j] + blk


def _side_acceleration(terms, m, slot, dtype):
    """ẍᵒᵖᵉⁿ of one side (zero on the ground)."""
    return jnp.zeros(6, dtype=dtype) if m < 0 else terms[m].xdd_open[slot]


def relative_open_acceleration(rel, xdd_E, xdd_P):
    """ᴱẍᵒᵖᵉⁿ_EP = ℜᵀ(ẍ_P − S ẍ_E − ζ) (Bonaventura eq. 83) from the sides' open-chain accelerations."""
    return _rotate6(rel.RT, xdd_P - rigid_body_motion(rel.r, xdd_E) - rel.zeta)


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


def point_forces(sides, T, forces, k, n_points, d):
    """Aₖᵀ F: the forces of every contact moved to the operational points of module k (Bonaventura eq. 95-96), stacked
    (n_points·d,) — or (n_points·d, m) when each contact's force is a (d, m) matrix of force columns.

    ``sides``: :func:`contact_sides`; ``T[i][a]``: the d x d operator of side a of contact i; ``forces[i]``:
    ᴱᴾF_EP of contact i, (d,) or (d, m)."""
    trailing = forces[0].shape[1:] if forces else ()
    dtype = forces[0].dtype if forces else jnp.float32
    zero = jnp.zeros((d,) + trailing, dtype=dtype)
    return jnp.concatenate([zero if f is None else f for f in forces_per_point(sides, T, forces, k, n_points)])


def contact_kinematics(contact, side_E, side_P):
    """Relative kinematics of a contact from its two sides' world quantities (R, p, ẋ, ẍ) (6-D, [angular; linear]):
    (T_E, T_P, ᴱẋ_EP, ᴱẍᵒᵖᵉⁿ_EP) of :func:`relative_motion` (ζ of Bonaventura eq. 81) and
    :func:`relative_open_acceleration` (Bonaventura eq. 83)."""
    rel = relative_motion(side_E[:3], side_P[:3])
    return rel.T_E, rel.T_P, rel.xd, relative_open_acceleration(rel, side_E[3], side_P[3])
