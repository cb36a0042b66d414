"""Forward dynamics of a system of modules and contacts: Bonaventura's MRDS Steps 2-4 (Tables 18-20), in
:func:`forward_dynamics`.

Step 2 (per module, :func:`~mrds_jax.dynamics.interface.module_terms_along`, the module interface): q̈ᵒᵖᵉⁿ, the
placements, velocities and open-chain (classical) accelerations ᴵẍᵒᵖᵉⁿ_IO of the module's contact points, and
Ψ = H⁻¹ Jᵀ (Bonaventura eq. 75) and Λ⁻¹ = J H⁻¹ Jᵀ (Bonaventura eq. 69-70, Table 9) along the module's constraint
directions. This file never looks inside a module: a rigid tree, or any module type that implements
:mod:`mrds_jax.dynamics.interface`.

Step 3 (global): the constraint-space system Bᶜ Fᶜ = yᶜ (Bonaventura eq. 81-90, Table 17), built by
:func:`~.constraint_space.constraint_system` (which asks the modules for Step 2), bordered by the joint couplings'
rows (:mod:`.couplings`), with the stabilisation terms (:mod:`.stabilisation`), solved by :mod:`.solve`
(Bonaventura eq. 87); ᴱᴾF_EP = ψᵘFᵘ + ψᶜFᶜ (Bonaventura eq. 86).

Step 4 (per module): q̈ₖ = q̈ₖᵒᵖᵉⁿ + Ψₖ Aₖᵀ F_EP (:func:`response_to_contact_forces`: the module's responses Uₖ = Ψₖ Dₖ
along its constraint directions times the contacts' Fᶜ), which is Bonaventura eq. 74 (q̈ = q̈ᵒᵖᵉⁿ − Ψₖ Fₖ) with the
forces of Bonaventura eq. 95-96 (ᴵᴱF_EP = Sᵀ ℜ F_EP at E, ᴵᴾF_PE = −ℜ F_EP at P) and the sign fix of notes §2.3 for
Type B rows (+ᴱΨ_EP F_EP). Every function is pure and jit/vmap-able.
"""
from typing import NamedTuple

import jax.numpy as jnp

from ..dynamics.interface import open_chain_acceleration
from ..spatial.linalg import matmul
from ..validation import constraint_conditioning, is_traced
from .build import module_taus
from .constraint_space import constraint_layouts, constraint_system
from .couplings import constraint_rows, coupled_constraint_system
from .solve import SolverSettings, solve_constraint_system
from .stabilisation import stabilisation_terms


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
        coupled = coupled_constraint_system(system, state, cs, yc, module_taus(system, tau, cs.yc.dtype), stabilisation)
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
    taus = module_taus(system, tau, dtype)
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


def response_to_contact_forces(tk, layout, F_c):
    """Ψₖ Aₖᵀ F_EP (Bonaventura eq. 74 with the forces of Bonaventura eq. 95-96 and ᴱᴾF_EP = ψᵘFᵘ + ψᶜFᶜ of
    Bonaventura eq. 86) from the module's responses along its constraint directions: Σᵢ Uₖ[:, cols(i)] Fᶜᵢ, plus the free-force column's."""
    out = sum(matmul(tk.U[:, si], F_c[i]) for i, si in zip(layout.contacts, layout.slices))
    return out + tk.U[:, layout.free.start] if layout.free is not None else out
