"""Consistent states: :func:`project_positions` (Gauss-Newton on Φ_p and the couplings' g, a fixed number of
iterations), :func:`project_velocities` (least-norm correction onto J v = ẋᶜ and G v = 0) and :func:`make_consistent`
(both), each returning the residual. Split out of :mod:`.simulate` (one concern per file).
"""

import jax
import jax.numpy as jnp

from ..dynamics.interface import integrate_configuration, normalize_configuration
from .build import SystemState
from .couplings import coupling_jacobian
from .diagnostics import _flat, all_constraint_errors
from .stabilisation import constraint_jacobian
from .timestepping import unilateral_violations_and_jacobian


# ----------------------------------------------------------------------------- consistent initial states
def _retract(system, q, dv_flat):
    out, s = [], 0
    for m, qk in zip(system.modules, q):
        dv = dv_flat[s:s + m.nv]
        s += m.nv
        out.append(normalize_configuration(m, integrate_configuration(m, qk, dv, 1.0)))
    return tuple(out)


def project_positions(system, state, t=0.0, iterations=10, position_targets=(), rcond=1e-10):
    """Gauss-Newton on Φ_p(q) = 0 with a fixed number of ``iterations``, Φ_p the contacts' position errors and
    the joint couplings' residuals g (:func:`all_constraint_errors`), and the penetrations of the collision slots and
    violations of the joint limits, min(d, 0) (:func:`~.timestepping.unilateral_violations`: a penetrating or
    violated row is pushed back to d = 0, the others are left alone): q ← q ⊕ Δ with the least-norm
    Δ = −J⁺ Φ_p, J = ∂Φ_p/∂Δ (the bilateral part exact by forward-mode autodiff through the configuration update,
    so quaternions stay unit; the one-sided part from the contact step's own rows,
    :func:`~.timestepping.unilateral_violations_and_jacobian`, so no narrow phase is differentiated). Returns (state with projected q and the given v, residual max |Φ_p|).
    Pure and jit-able. Redundant constraints are fine (least squares with cut-off ``rcond``, by LAPACK's
    ``jnp.linalg.lstsq``, kept because its rank cut-off has no cheap exact LAPACK-free equivalent): to project
    a large batch of states on jax 0.10.x on a 2-core CPU, where batched LAPACK calls in ``jit(vmap)`` can
    deadlock (docs/known_traps.md), map it in chunks, ``jax.lax.map(f, states, batch_size=64)``."""
    dtype = state.q[0].dtype
    nv = sum(m.nv for m in system.modules)
    zeros_v = tuple(jnp.zeros(m.nv, dtype=dtype) for m in system.modules)

    def bilateral(q):
        return all_constraint_errors(system, SystemState(q, zeros_v), t, position_targets)[0]

    def phi_p(q):                      # the residual and its Jacobian: the bilateral part by forward-mode autodiff,
        r_u, J_u = unilateral_violations_and_jacobian(system, SystemState(q, zeros_v))   # the one-sided from rows
        J_b = jax.jacfwd(lambda dv: bilateral(_retract(system, q, dv)))(jnp.zeros(nv, dtype=dtype))
        return jnp.concatenate([bilateral(q), r_u]), jnp.concatenate([J_b, J_u])

    def body(i, carry):                # iterations + 1 passes, the last one only measuring the residual: Φ_p (and
        q, _ = carry                   # the narrow phase in it) is traced and compiled once, not twice
        r, J = phi_p(q)
        dv = -jnp.linalg.lstsq(J, r, rcond=rcond)[0]
        return _retract(system, q, jnp.where(i < iterations, dv, 0.0)), r

    r0 = jax.eval_shape(lambda q: phi_p(q)[0], tuple(state.q))
    q, r = jax.lax.fori_loop(0, iterations + 1, body, (tuple(state.q), jnp.zeros(r0.shape, r0.dtype)))
    return SystemState(q, tuple(state.v)), (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def project_velocities(system, state, t=0.0, rcond=1e-10):
    """Least-norm change of v that satisfies the velocity constraints J v = ẋᶜ (Bonaventura eq. 105, Φ_v = 0)
    and the joint couplings' G v = 0: v ← v − [J; G]⁺ [Φ_v; G v]. Returns (state, residual max |Φ_v|, |G v|).
    Pure and jit-able. LAPACK ``lstsq`` with cut-off ``rcond``: see :func:`project_positions` about batching it."""
    dtype = state.q[0].dtype
    J = jnp.concatenate([constraint_jacobian(system, state, t), coupling_jacobian(system, state)])
    v = _flat(tuple(state.v), dtype)
    r = all_constraint_errors(system, state, t)[1]
    v = v - jnp.linalg.lstsq(J, r, rcond=rcond)[0] if r.size else v
    out, s = [], 0
    for m in system.modules:
        out.append(v[s:s + m.nv])
        s += m.nv
    new = SystemState(tuple(state.q), tuple(out))
    r = all_constraint_errors(system, new, t)[1]
    return new, (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def make_consistent(system, state, t=0.0, iterations=10, position_targets=()):
    """:func:`project_positions` then :func:`project_velocities`; returns (state, position residual,
    velocity residual)."""
    state, rp = project_positions(system, state, t, iterations, position_targets)
    state, rv = project_velocities(system, state, t)
    return state, rp, rv
