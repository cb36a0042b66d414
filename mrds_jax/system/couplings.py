"""Joint couplings in the general path's constraint solve: the contacts' Bᶜ, yᶜ (Bonaventura eq. 87-89, Table 17) bordered
by the joint-space rows of the couplings (:mod:`mrds_jax.contacts.coupling`, whose docstring has the equations):

    [ Bᶜ   X ] [Fᶜ]   [ yᶜ                         ]     X = ψᶜᵀ Σₖ Aₖ Ψₖᵀ Gₖᵀ,   D = Σₖ Gₖ Hₖ⁻¹ Gₖᵀ
    [ Xᵀ   D ] [λ ] = [ β − Σₖ Gₖ q̈'ₖ − Baumgarte ]     q̈'ₖ = q̈ₖᵒᵖᵉⁿ + Ψₖ Aₖᵀ ψᵘFᵘ (known free-direction forces)

and afterwards q̈ₖ += Hₖ⁻¹ Gₖᵀ λ. Hₖ⁻¹ Gₖᵀ comes from the module's H (``mass_matrix``, armature included) by a
Cholesky solve, for the modules that a coupling touches only; Ψₖᵀ Gₖᵀ (the points' accelerations under a unit
coupling force) reaches the contacts along the modules' constraint directions, Uₖᵀ Gₖᵀ = Dₖᵀ Ψₖᵀ Gₖᵀ summed into the
contacts' rows by :func:`~.constraint_space.along_contacts`, as the point accelerations of Table 17. A system without couplings never calls this module.

Stabilisation: Baumgarte (scalar gains) acts on the couplings' rows as on the contacts' (β − 2α G v − β_B² g); the
PD suppression of Bonaventura eq. 104 corrects the contacts' Fᶜ only. Not covered yet: Lilly & Orin's path (``dynamics_path``
sends systems with couplings to the general path) and the Pinocchio export (refused by name).

The couplings' residual g and velocity error G v (:func:`coupling_errors`) and their Jacobian G
(:func:`coupling_jacobian`) are what every other place that handles the loops uses for them too: ``project_positions``,
``project_velocities``, ``check_initial_state``, the drift columns of ``trajectory_diagnostics`` and ``mrds-jax check``.
"""
from typing import NamedTuple

import jax.numpy as jnp

from ..contacts.coupling import coupling_matrices, coupling_row
from ..dynamics.interface import mass_matrix, open_chain_acceleration
from ..spatial.linalg import matmul, spd_solve
from .constraint_space import along_contacts, constraint_layouts
from .build import SystemDescriptionError


class CoupledSystem(NamedTuple):
    """The bordered system and what Step 4 needs: Hₖ⁻¹Gₖᵀ per touched module, the couplings' g and G v."""
    Bc: jnp.ndarray        # (n_C + n_J) square
    yc: jnp.ndarray        # (n_C + n_J,)
    Y: dict                # module k -> Hₖ⁻¹ Gₖᵀ (nvₖ x n_J)
    qdd_open: dict         # module k -> q̈ₖᵒᵖᵉⁿ of modules without contact points
    position: jnp.ndarray  # (n_J,) g
    velocity: jnp.ndarray  # (n_J,) G v


def coupled_constraint_system(system, state, cs, yc, taus, stabilisation=None):
    """The contacts' (Bᶜ, yᶜ) of ``cs`` (:func:`~.constraint_space.constraint_system`; ``yc`` with its stabilisation terms)
    bordered by the couplings' rows (module docstring). Baumgarte gains of ``stabilisation`` (scalars) act on the
    couplings as on the contacts: β − 2α G v − β_B² g."""
    conn = system.connectivity
    d, dtype = conn.dim, state.q[0].dtype
    rows = coupling_rows(system, state)
    touched = sorted({k for row in rows for k, _, _ in row.entries})
    G = coupling_matrices(rows, [m.nv for m in system.modules], touched, dtype)
    n_J = len(rows)
    Y, qdd_open, D = {}, {}, jnp.zeros((n_J, n_J), dtype)
    rhs = jnp.stack([r.bias for r in rows])
    layouts = constraint_layouts(system)
    x = []
    for k, module in enumerate(system.modules):
        tk = cs.terms[k]
        if k not in G:
            x.append(None)
            continue
        Y[k] = spd_solve(mass_matrix(module, state.q[k]), G[k].T)                   # Hₖ⁻¹ Gₖᵀ
        D = D + matmul(G[k], Y[k])
        if tk is None:
            qdd_open[k] = open_chain_acceleration(module, state.q[k], state.v[k], taus[k])
            rhs = rhs - matmul(G[k], qdd_open[k])
            x.append(None)
            continue
        free = layouts[k].free
        qdd = tk.qdd_open if free is None else tk.qdd_open + tk.U[:, free.start]  # + Ψₖ Aₖᵀ ψᵘFᵘ
        rhs = rhs - matmul(G[k], qdd)
        x.append(matmul(tk.U.T, G[k].T))                 # Uₖᵀ Gₖᵀ = Dₖᵀ Jₖ Hₖ⁻¹ Gₖᵀ: ψᶜᵀ Aₖ Ψₖᵀ Gₖᵀ by columns
    position = jnp.stack([r.position for r in rows])
    velocity = jnp.stack([r.velocity for r in rows])
    if stabilisation is not None:
        rhs = rhs - _scalar_gain(stabilisation.baumgarte_alpha, 2.0) * velocity \
            - _scalar_gain(stabilisation.baumgarte_beta, 1.0) ** 2 * position
    n_C = conn.n_constraints
    X = (jnp.concatenate(along_contacts(layouts, x, conn.n_c, n_J, dtype)) if n_C else jnp.zeros((0, n_J), dtype))
    B = jnp.concatenate([jnp.concatenate([cs.Bc, X], axis=1), jnp.concatenate([X.T, D], axis=1)], axis=0)
    return CoupledSystem(B, jnp.concatenate([yc, rhs]), Y, qdd_open, position, velocity)


def coupling_rows(system, state):
    """:class:`~mrds_jax.contacts.coupling.CouplingRow` of every coupling of ``system`` at ``state`` (coupling order)."""
    return [coupling_row(c, dofs, state.q, state.v)
            for c, dofs in zip(system.couplings, system.connectivity.coupling_dofs)]


def coupling_errors(system, state):
    """(g, G v) of the couplings at ``state``, (n_J,) each (empty without couplings): the position residual
    g = (u − u₀) − P(w − w₀) and its rate (:mod:`mrds_jax.contacts.coupling`). Pure, jit/vmap/grad-able."""
    rows = coupling_rows(system, state)
    if not rows:
        empty = jnp.zeros(0, state.q[0].dtype)
        return empty, empty
    return jnp.stack([r.position for r in rows]), jnp.stack([r.velocity for r in rows])


def coupling_jacobian(system, state):
    """G (n_J, Σ nv): the couplings' rows in the system's velocity coordinates (modules in order), G v = ġ;
    the coupled joints are one-coordinate, so G = ∂g/∂q on their coordinates."""
    rows = coupling_rows(system, state)
    nvs = [m.nv for m in system.modules]
    dtype = state.q[0].dtype
    G = coupling_matrices(rows, nvs, range(len(nvs)), dtype)
    return jnp.concatenate([G[k] for k in range(len(nvs))], axis=1) if rows else jnp.zeros((0, sum(nvs)), dtype)


def constraint_rows(system):
    """(names, slices) of the rows of the solve's matrix (:func:`constraint_matrix`): each contact's
    constrained directions, then one row per joint coupling."""
    n_C = system.connectivity.n_constraints
    names = tuple(c.name for c in system.contacts) + tuple(c.name for c in system.couplings)
    slices = system.connectivity.constraint_slices() + tuple(slice(n_C + i, n_C + i + 1)
                                                             for i in range(len(system.couplings)))
    return names, slices


def _scalar_gain(gain, factor):
    if jnp.ndim(gain) != 0:
        raise SystemDescriptionError("per-direction Baumgarte gains (arrays over the contacts' constrained directions) do not "
                          "cover joint couplings; use scalar gains")
    return factor * gain
