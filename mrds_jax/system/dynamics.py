"""Forward dynamics of a system of modules and contacts: Bonaventura's MRDS Steps 2-4 (Tables 18-20).

Step 2 (per module, :func:`~mrds_jax.dynamics.interface.module_terms`, the module interface): q̈ᵒᵖᵉⁿ,
placements, velocities and open-chain (classical) accelerations ᴵẍᵒᵖᵉⁿ_IO of the module's contact points,
Ψ = H⁻¹ Jᵀ (Bonaventura eq. 75) and the multi-point Λ⁻¹_{OiOj} = J_Oi H⁻¹ J_Ojᵀ (Bonaventura eq. 69-70, Table 9). This file never
looks inside a module: a rigid tree, or any module type that implements :mod:`mrds_jax.dynamics.interface`.

Step 3 (global, :func:`constraint_system`): for each contact i, Sᵢ = ᴵS_EiPi (Bonaventura eq. 20), the spatial
rotation ℜᵢ = ᴵℜ_Ei, ζᵢ (Bonaventura eq. 81) and ᴱẍᵒᵖᵉⁿ_EP (Bonaventura eq. 83). The contact reaches the modules through its sides,
with the operators T_E = −ℜᵢᵀ Sᵢ (side E) and T_P = +ℜᵢᵀ (side P): B = Σₖ Aₖ Λₖ⁻¹ Aₖᵀ with Aₖ[i, s] the sum
of the Tₐ of contact i at point s of module k reproduces Table 17 block by block (AA: ℜᵢᵀ[Λ_PP − Λ_PE Sⱼᵀ −
Sᵢ Λ_EP + Sᵢ Λ_EE Sⱼᵀ]ℜⱼ; a Type B contact, whose E and P are on one module, gets both terms, i.e. the
relative Jacobian ᴱJ_EP = ℜᵀ(J_P − S J_E) of Bonaventura eq. 71 through its O(N) forms Bonaventura eq. 92-94). Bᶜ = ψᶜᵀ B ψᶜ
(Bonaventura eq. 88) is built from the blocks of contact pairs that share a module, Aₖ is never formed
(:mod:`.constraint_space`). yᶜ = ẍᶜ + ψᶜᵀ [y − B ψᵘ Fᵘ] with yᵢ = φ̇ᵘẋᵘ + φ̇ᶜẋᶜ − ᴱẍᵒᵖᵉⁿ_EP (Bonaventura eq. 89-90; the
φ̇ term is zero for constant modes, and for variable modes (universal joint) it and the bases φ, ψ come from
:func:`~mrds_jax.contacts.variable.contact_modes` at the current relative configuration); the solve
(Bonaventura eq. 87, :mod:`.solve`), and ᴱᴾF_EP = ψᵘFᵘ + ψᶜFᶜ (Bonaventura eq. 86).

Step 4 (per module): q̈ₖ = q̈ₖᵒᵖᵉⁿ + Ψₖ Aₖᵀ F_EP (Aₖᵀ F_EP: :func:`.constraint_space.point_forces`), which is Bonaventura eq. 74 (q̈ = q̈ᵒᵖᵉⁿ − Ψₖ Fₖ) with the forces
of Bonaventura eq. 95-96 (ᴵᴱF_EP = Sᵀ ℜ F_EP at E, ᴵᴾF_PE = −ℜ F_EP at P) and the sign fix of notes §2.3 for Type B
rows (+ᴱΨ_EP F_EP).

All accelerations are classical (ẍ = J q̈ + J̇ q̇), as ζ of Bonaventura eq. 81 requires (notes §0.3). Everything is
[angular; linear]; planar systems use the 3 task rows [ω_z; v_x; v_y] of the same 6-D formulas (their
ζ, S, ℜ restricted to the plane, notes §3.6). The ground has no module: its Λ⁻¹ and Ψ are 0
(footnote 16) and its acceleration is 0. Every function is pure and jit/vmap-able; the loops run over the
static module and contact lists at trace time.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..contacts.variable import contact_modes
from ..dynamics.interface import (ModuleTerms, module_terms, module_terms_along, open_chain_acceleration,  # noqa: F401
                                  point_motion)
from ..model.tree import task_slice
from ..spatial import cross, skew, spatial_rotation
from .constraint_space import (along_contacts, constraint_directions, constraint_layouts,
                               constraint_space_matrix_from_columns, contact_sides, forces_per_point)
from .solve import SolverSettings, solve_constraint_system
from .couplings import constraint_rows, coupled_constraint_system
from ..validation import constraint_conditioning, is_traced, per_module, system_state
from .stabilisation import stabilisation_terms
from ..spatial.linalg import matmul


class ConstraintSystem(NamedTuple):
    """Step 3 quantities (Table 19)."""
    Bc: jnp.ndarray            # (n_C, n_C), Bonaventura eq. 88
    yc: jnp.ndarray            # (n_C,), Bonaventura eq. 89
    xdd_open_EP: tuple         # per contact: ᴱẍᵒᵖᵉⁿ_EP (d,), Bonaventura eq. 83
    xd_EP: tuple               # per contact: ᴱẋ_EP (d,), Bonaventura eq. 98
    F_u: tuple                 # per contact: Fᵘ (d − n_c,)
    T: tuple                   # per contact: the d x d operators Tₐ of its sides on modules (:mod:`.constraint_space`)
    terms: tuple               # per module: ColumnTerms along its constraint directions (None without contact points)
    modes: tuple = ()          # per contact: ContactModes (bases at the current state, φ̇ term of Bonaventura eq. 90)
    motion: tuple = ()         # per module: PointMotion of its contact points (None without)


class SystemDynamics(NamedTuple):
    """Result of :func:`forward_dynamics`."""
    qdd: tuple        # per module: q̈ₖ (Bonaventura eq. 74)
    F_c: tuple        # per contact: Fᶜ (n_c,), constraint-force components (Bonaventura eq. 87)
    F_EP: tuple       # per contact: ᴱᴾF_EP (d,), force by E on P, frame E, torque reference point P (Bonaventura eq. 86)
    residual: jnp.ndarray     # ‖Bᶜ Fᶜ − yᶜ‖ / ‖yᶜ‖ of the solve
    constraint_velocity: tuple  # per contact: Φ_v = ψᶜᵀ ᴱẋ_EP − ẋᶜ (Bonaventura eq. 105), 0 at a consistent state
    Bc: jnp.ndarray   # the constraint-space matrix of the solve (Bonaventura eq. 88; dropped by jit when unused)
    yc: jnp.ndarray   # its right-hand side (Bonaventura eq. 89)
    rank: jnp.ndarray = None       # rank of the part of Bᶜ the solve used (:class:`.solve.ConstraintSolve`)
    min_pivot: jnp.ndarray = None  # ≈ λ_min/λ_max of that part: the solve's inverse condition number
    coupling_forces: jnp.ndarray = None    # (n_J,) λ of the joint couplings (:mod:`.couplings`), None without
    coupling_errors: tuple = None          # (g, G v) of the couplings: position and velocity errors (n_J,) each


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


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


def _all_module_terms(system, state, taus, method):
    """Step 2 (:func:`~mrds_jax.dynamics.interface.module_terms`: Ψ and Λ⁻¹ over every task row of every point) for
    every module with contact points; the reference the constraint directions' route is tested against
    (``tests/test_constraint_space.py``)."""
    return _per_module(system, lambda m, pts, q, v, tq: module_terms(m, q, v, tq, pts, method), state.q, state.v, taus)


def _side_motion(contact, motion, m, slot, dtype):
    """(R, p, ẋ) of one side of a contact from its module's :class:`~mrds_jax.dynamics.interface.PointMotion`; the
    ground is fixed."""
    if m < 0:
        return contact.ground_R, contact.ground_p, jnp.zeros(6, dtype=dtype)
    pm = motion[m]
    return pm.R[slot], pm.p[slot], pm.xd[slot]


def _side_acceleration(terms, m, slot, dtype):
    """ẍᵒᵖᵉⁿ of one side (zero on the ground)."""
    return jnp.zeros(6, dtype=dtype) if m < 0 else terms[m].xdd_open[slot]


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


def relative_open_acceleration(rel, xdd_E, xdd_P):
    """ᴱẍᵒᵖᵉⁿ_EP = ℜᵀ(ẍ_P − S ẍ_E − ζ) (Bonaventura eq. 83) from the sides' open-chain accelerations."""
    return _rotate6(rel.RT, xdd_P - rigid_body_motion(rel.r, xdd_E) - rel.zeta)


def contact_kinematics(contact, side_E, side_P):
    """Relative kinematics of a contact from its two sides' world quantities (R, p, ẋ, ẍ) (6-D, [angular; linear]):
    (T_E, T_P, ᴱẋ_EP, ᴱẍᵒᵖᵉⁿ_EP) of :func:`relative_motion` (ζ of Bonaventura eq. 81) and
    :func:`relative_open_acceleration` (Bonaventura eq. 83)."""
    rel = relative_motion(side_E[:3], side_P[:3])
    return rel.T_E, rel.T_P, rel.xd, relative_open_acceleration(rel, side_E[3], side_P[3])


def rigid_body_motion(r, x):
    """ᴵS_EP x (Bonaventura eq. 20) without forming S: [ω; v − r̃ω] = [ω; v + ω × r] for x = [ω; v]."""
    return jnp.concatenate([x[:3], x[3:] + cross(x[:3], r)])


def _rotate6(R, x):
    """diag(R, R) x (Bonaventura eq. 18) without forming the 6 x 6 matrix."""
    return jnp.concatenate([matmul(R, x[:3]), matmul(R, x[3:])])


def _taus(system, tau, dtype):
    per_module(system, tau, "tau", "nv", "joint forces")
    if tau is None:
        return tuple(jnp.zeros(m.nv, dtype=dtype) for m in system.modules)
    if isinstance(tau, dict):
        return tuple(jnp.asarray(tau.get(n, jnp.zeros(m.nv, dtype=dtype)))
                     for n, m in zip(system.module_names, system.modules))
    return tuple(jnp.asarray(x) for x in tau)


def constraint_system(system, state, tau=None, t=0.0, method="direct"):
    """Steps 2-3 up to the linear system: Bᶜ (Bonaventura eq. 88, Table 17's contact-pair blocks),
    yᶜ (Bonaventura eq. 89) and the pieces needed afterwards.

    The points' placements and velocities come first (:func:`~mrds_jax.dynamics.interface.point_motion`), so the
    contacts' constrained directions Wₐ = Tₐᵀ ψᶜ are known before Step 2's solve: each module is asked for Ψ and
    Λ⁻¹ only along them (:func:`~mrds_jax.dynamics.interface.module_terms_along` with
    :func:`~mrds_jax.system.constraint_space.constraint_directions`: the four-loop biped's solve with H takes 12
    columns instead of its 8 points' 48 task rows), and Bᶜ is summed from the modules' Dₖᵀ Λₖ⁻¹ Dₖ
    (:func:`~mrds_jax.system.constraint_space.constraint_space_matrix_from_columns`)."""
    system_state(system, state, "forward dynamics")
    conn = system.connectivity
    d = conn.dim
    rows = task_slice(d)
    dtype = state.q[0].dtype
    taus = _taus(system, tau, dtype)
    motion = _per_module(system, lambda m, pts, q, v: point_motion(m, q, v, pts), state.q, state.v)
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
    applied = any(c.applied is not None for c in system.contacts)
    free = ([matmul(m.psi_u, fu) for m, fu in zip(modes, F_u)] if applied else None)    # ψᵘFᵘ
    layouts = constraint_layouts(system)
    D = [constraint_directions(sides, W, layouts[k], k,
                               forces_per_point(sides, T, free, k, len(pts)) if applied else None) if pts else None
         for k, pts in enumerate(conn.points)]
    terms = _per_module(system, lambda mod, pts, q, v, tq, Dk: module_terms_along(mod, q, v, tq, pts, Dk, method),
                        state.q, state.v, taus, D)
    Bc = constraint_space_matrix_from_columns(layouts, [None if tk is None else tk.K for tk in terms], conn.n_c,
                                              dtype)                          # Bonaventura eq. 88, Table 17
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


def response_to_contact_forces(tk, layout, F_c):
    """Ψₖ Aₖᵀ F_EP (Bonaventura eq. 74 with the forces of Bonaventura eq. 95-96 and ᴱᴾF_EP = ψᵘFᵘ + ψᶜFᶜ of
    Bonaventura eq. 86) from the module's responses along its constraint directions: Σᵢ Uₖ[:, cols(i)] Fᶜᵢ, plus the free-force column's."""
    out = sum(matmul(tk.U[:, si], F_c[i]) for i, si in zip(layout.contacts, layout.slices))
    return out + tk.U[:, layout.free.start] if layout.free is not None else out


def _current_modes(contact, side_E, side_P, xd6, t, dtype):
    """The contact's bases at the relative configuration ᴱR_P = ᴵR_Eᵀ ᴵR_P (Bonaventura eq. 99), ᴱr_EP (Bonaventura eq. 97) and
    the φ̇ term of Bonaventura eq. 90 (zero, at no cost, for constant modes); ``xd6`` = 6-D ᴱẋ_EP (Bonaventura eq. 98)."""
    R_E, p_E = side_E[0], side_E[1]
    R_P, p_P = side_P[0], side_P[1]
    xd_c = contact.constraint_velocity_and_acceleration(t, dtype)[0]
    return contact_modes(contact, matmul(R_E.T, R_P), matmul(R_E.T, p_P - p_E), xd6, xd_c)


def forward_dynamics(system, state, tau=None, t=0.0, solver=SolverSettings(), method="direct",
                     stabilisation=None, cond_warn=1e8):
    """Closed-chain forward dynamics of a system (Bonaventura MRDS Steps 2-4, Tables 18-20).

    ``state``: :class:`~mrds_jax.system.SystemState` (per-module q, v); ``tau``: per-module joint forces
    (tuple, dict by module name, or None); ``t``: time for excitations and applied forces; ``solver``:
    :class:`~mrds_jax.system.SolverSettings` (static: use ``functools.partial`` before ``jax.jit``);
    ``method``: "direct" or "recursive" route for Ψ and Λ⁻¹; ``stabilisation``: None (off) or a
    :class:`~mrds_jax.system.stabilisation.Stabilisation` (Baumgarte terms enter yᶜ, PD suppression of
    Bonaventura eq. 104-105 corrects Fᶜ after the solve; see :mod:`.stabilisation`).
    Returns :class:`SystemDynamics`: q̈ per module (Bonaventura eq. 74), Fᶜ and ᴱᴾF_EP per contact
    (Bonaventura eq. 86-87), the solve's relative residual, the constraint-velocity error Φ_v
    (Bonaventura eq. 105), Bᶜ, yᶜ, and the rank and inverse condition number of the part of Bᶜ solved (:mod:`.solve`).
    Called on a concrete state (not under ``jit``), it warns :class:`~mrds_jax.system.SingularConfigurationWarning`
    naming the contacts when Bᶜ's condition number exceeds ``cond_warn`` (a singular configuration or redundant
    constraints; None: no check). A system's joint couplings (:mod:`mrds_jax.contacts.coupling`) border Bᶜ and
    yᶜ with their joint-space rows (:mod:`.couplings`); their forces λ and errors (g, G v) come back as
    ``coupling_forces`` and ``coupling_errors``.
    """
    cs = constraint_system(system, state, tau, t, method)
    yc, dF_c = cs.yc, None
    if stabilisation is not None:       # Baumgarte (in yᶜ) and PD suppression (Bonaventura eq. 104, corrected)
        dy_c, dF_c = stabilisation_terms(system, cs, t, stabilisation)
        yc = yc + dy_c
    Bc, coupled = cs.Bc, None
    if system.couplings:                # joint couplings: joint-space rows bordering Bᶜ (:mod:`.couplings`)
        coupled = coupled_constraint_system(system, state, cs, yc, _taus(system, tau, cs.yc.dtype), stabilisation)
        Bc, yc = coupled.Bc, coupled.yc
    if cond_warn is not None and not is_traced(Bc):    # the solve's matrix: contacts' rows, then the couplings'
        constraint_conditioning(Bc, cond_warn, *constraint_rows(system), "forward_dynamics: ")
    sol = solve_constraint_system(Bc, yc, solver)
    F_c = sol.F[:system.connectivity.n_constraints]
    if dF_c is not None:
        F_c = F_c - dF_c                # F* = F − ψᶜ (K_v Φ_v + K_p Φ_p) replaces F in Bonaventura eq. 74, 95-96
    conn = system.connectivity
    F_EP, F_c_split, phi_v = [], [], []
    for c, m, sl, fu, xd in zip(system.contacts, cs.modes, conn.constraint_slices(), cs.F_u, cs.xd_EP):
        fc = F_c[sl]
        F_c_split.append(fc)
        F_EP.append(matmul(m.psi_u, fu) + matmul(m.psi_c, fc))                                   # Bonaventura eq. 86
        phi_v.append(matmul(m.psi_c.T, xd) - c.constraint_velocity_and_acceleration(t, fc.dtype)[0])  # Bonaventura eq. 105
    qdd = [None if tk is None else tk.qdd_open + response_to_contact_forces(tk, layout, F_c_split)
           for tk, layout in zip(cs.terms, constraint_layouts(system))]
    dtype = state.q[0].dtype
    taus = _taus(system, tau, dtype)
    if coupled is not None:
        lam = sol.F[system.connectivity.n_constraints:]
        qdd = [coupled.qdd_open.get(k, a) for k, a in enumerate(qdd)]
        qdd = tuple(a + matmul(coupled.Y[k], lam) if k in coupled.Y else a for k, a in enumerate(qdd))
    qdd = tuple(open_chain_acceleration(m, q, v, tq) if a is None else a
                for a, m, q, v, tq in zip(qdd, system.modules, state.q, state.v, taus))
    if coupled is None:
        return SystemDynamics(qdd, tuple(F_c_split), tuple(F_EP), sol.residual, tuple(phi_v), cs.Bc, cs.yc,
                              sol.rank, sol.min_pivot)
    return SystemDynamics(qdd, tuple(F_c_split), tuple(F_EP), sol.residual, tuple(phi_v), Bc, yc, sol.rank,
                          sol.min_pivot, lam, (coupled.position, coupled.velocity))
