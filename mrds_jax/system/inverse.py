"""Closed-chain inverse dynamics: actuator forces and constraint forces that produce a prescribed motion.

For each module k the equations of motion with contact forces read (Bonaventura eq. 74 multiplied by Hₖ, with the
force mapping of Bonaventura eq. 95-96 written through the point forces Aₖᵀ F of :func:`~.constraint_space.point_forces`):

    Hₖ q̈ₖ + Cₖ vₖ + Gₖ − τₖ = Jₖᵀ Aₖᵀ F_EP,      F_EP = ψᵘ Fᵘ + ψᶜ Fᶜ   (Bonaventura eq. 86),

the contact forces appearing exactly as in q̈ₖ = q̈ₖᵒᵖᵉⁿ + Ψₖ Aₖᵀ F_EP of forward dynamics.

With τₖ = Sₖᵀ τₐ (the actuated joints) and the left side evaluated by RNEA at the prescribed (q, v, q̈),
the unknowns (τₐ, Fᶜ) satisfy one linear system, Σ nvₖ equations in n_a + n_C unknowns:

    [Sᵀ | Jᵀ Aᵀ ψᶜ] [τₐ; Fᶜ] = RNEA(q, v, q̈) − Jᵀ Aᵀ ψᵘ Fᵘ.

For a parallel mechanism with one actuator per independent loop (the CKCM: 24 equations, 6 actuators,
18 spherical-contact force components) the matrix is square and regular away from singularities. A square
matrix is solved by LU with partial pivoting without LAPACK (``spatial.dense.solve``: this function is vmapped
by the CKCM design and Monte Carlo code, and batched LAPACK calls can deadlock jax 0.10.x on 2-core CPUs, see
README); a non-square one in the least-squares sense (``jnp.linalg.lstsq``, LAPACK). The residual is returned
so that a prescribed motion that violates the constraints, or too few actuators, shows up as a non-zero
residual (a singular square matrix gives non-finite forces).
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..dynamics.interface import open_chain_inverse_dynamics as module_inverse_dynamics, task_jacobian
from .constraint_space import constraint_system, contact_sides, point_forces
from ..spatial import dense
from ..spatial.linalg import matmul
from ..validation import ArgumentError, per_module


class InverseDynamics(NamedTuple):
    tau: tuple         # per module: joint forces Sᵀ τₐ (zeros on passive joints)
    tau_actuated: jnp.ndarray  # (n_a,) in the order of ``actuated``
    F_c: tuple         # per contact: constraint-force components Fᶜ
    residual: jnp.ndarray      # ‖M x − b‖ / max(‖b‖, 1): 0 when the motion is reproducible


def _selection(system, actuated):
    """Static list of (module index, dof index) from {module: dof indices}."""
    pairs = []
    for key, dofs in actuated.items():
        k = system.module_index(key)
        nv = system.modules[k].nv
        for d in np.atleast_1d(dofs):
            if not 0 <= int(d) < nv:
                raise ArgumentError(f"inverse_dynamics: actuated dof {int(d)} of module {system.module_names[k]!r} out of range (nv={nv})")
            pairs.append((k, int(d)))
    return pairs


def inverse_dynamics(system, state, qdd, actuated, t=0.0):
    """(τₐ, Fᶜ) reproducing the per-module accelerations ``qdd`` at ``state``.

    ``actuated``: dict module name (or index) -> indices of its actuated velocity coordinates.
    """
    per_module(system, qdd, "qdd", "nv", "inverse_dynamics")
    pairs = _selection(system, actuated)
    conn = system.connectivity
    dtype = state.q[0].dtype
    cs = constraint_system(system, state, None, t)
    d = conn.dim
    n_C = conn.n_constraints
    sides = contact_sides(conn)
    # per contact, the (d, n_C) force columns ψᶜᵢ placed at its constraint slice, and the known force ψᵘFᵘ
    unit = [jnp.zeros((d, n_C), dtype).at[:, sl].set(m.psi_c) for m, sl in zip(cs.modes, conn.constraint_slices())]
    U = [matmul(m.psi_u, fu) for m, fu in zip(cs.modes, cs.F_u)]
    offsets = np.cumsum([0] + [m.nv for m in system.modules])
    n_eq = int(offsets[-1])
    rows_G, rhs = [], []
    for k, module in enumerate(system.modules):
        b = module_inverse_dynamics(module, state.q[k], state.v[k], qdd[k])
        pts = conn.points[k]
        if pts:
            Jt = task_jacobian(module, state.q[k], pts).T
            rows_G.append(matmul(Jt, point_forces(sides, cs.T, unit, k, len(pts), d)))   # Jₖᵀ Aₖᵀ ψᶜ
            b = b - matmul(Jt, point_forces(sides, cs.T, U, k, len(pts), d))           # Jₖᵀ Aₖᵀ ψᵘFᵘ
        else:
            rows_G.append(jnp.zeros((module.nv, n_C), dtype))
        rhs.append(b)
    S = np.zeros((n_eq, len(pairs)))
    for j, (k, dof) in enumerate(pairs):
        S[offsets[k] + dof, j] = 1.0
    M = jnp.concatenate([jnp.asarray(S, dtype), jnp.concatenate(rows_G)], axis=1)
    b = jnp.concatenate(rhs)
    x = dense.solve(M, b) if M.shape[0] == M.shape[1] else jnp.linalg.lstsq(M, b)[0]
    residual = jnp.linalg.norm(matmul(M, x) - b) / jnp.maximum(jnp.linalg.norm(b), 1.0)
    tau_a, F_c = x[:len(pairs)], x[len(pairs):]
    taus = [jnp.zeros(m.nv, dtype) for m in system.modules]
    for j, (k, dof) in enumerate(pairs):
        taus[k] = taus[k].at[dof].set(tau_a[j])
    return InverseDynamics(tuple(taus), tau_a, tuple(F_c[sl] for sl in conn.constraint_slices()), residual)
