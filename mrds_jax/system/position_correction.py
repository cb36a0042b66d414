"""Position errors of the one-sided rows (contact penetration, joint limits passed) removed on the position level,
after the velocity update, without touching the velocity: post-stabilisation (Cline & Pai, "Post-stabilization for
rigid body simulation with contact and constraints", ICRA 2003, §3), the scheme of Bullet's split impulse and of
Drake's and Pinocchio's position corrections.

The velocity-level step (:mod:`.timestepping`) asks a penetrating row only to stop approaching (σ_n ≥ 0): depth
never becomes velocity, so a body started inside another is not launched. This module then moves q along the
H-metric's directions of the violated rows, at the configuration q⁺ the step reached:

    Δq = H⁻¹ Jᵀ μ,   0 ≤ μ ⊥ (J H⁻¹ Jᵀ μ − c) ≥ 0,   c_i = min(β max(−d_i, 0), c_max),

the least change of q in H's metric (the least kinetic-energy-like displacement) that moves every violated row out
by the fraction β of its depth d_i, at most ``max_step`` per step (a large overlap resolves over several steps),
while rows that are not violated are kept from being pushed in (d_i ≥ 0 is a constraint with target −d_i ≤ 0, so
a resting neighbour is left alone). Loops and joint couplings keep their own Baumgarte term on the velocity (the
bilateral rows take part here only as J_b Δq = 0, free multipliers, so the correction does not open a closed
chain to first order). v is not changed, so no energy is injected.

The problem is a convex QP (a nonnegative least squares in μ), solved by a fixed number of projected Gauss–Seidel
sweeps (Cottle, Pang & Stone, "The Linear Complementarity Problem", 1992, §5.2) started from 0: an unconverged
sweep count only corrects less this step. Fixed shapes, masked rows, no Python branch on a value: jit/vmap/grad-able.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..dynamics.interface import integrate_configuration, mass_matrix, normalize_configuration
from ..spatial.linalg import cho_solve, cholesky, matmul


class PositionCorrection(NamedTuple):
    """Settings of :func:`correct_positions`: ``fraction`` β ∈ [0, 1], the part of a violation removed per step;
    ``max_step`` c_max ≥ 0, the most a row is moved out per step (m for contacts, rad for limits of revolute joints;
    0 switches the correction off); ``sweeps`` the projected Gauss–Seidel sweeps (≥ 1)."""
    fraction: float = 0.2
    max_step: float = 2e-3
    sweeps: int = 10


class PositionRows(NamedTuple):
    """The rows the correction sees at a configuration: ``J`` (u, Σnv) of the one-sided rows (joint limits,
    contact normals), their gaps ``gap`` (u,) and mask ``valid`` (u,); ``J_fixed`` (b, Σnv) rows kept at
    J_b Δq = 0 (loops, couplings) and their mask ``fixed_active`` (b,)."""
    J: jnp.ndarray
    gap: jnp.ndarray
    valid: jnp.ndarray
    J_fixed: jnp.ndarray
    fixed_active: jnp.ndarray


class CorrectionReport(NamedTuple):
    depth: jnp.ndarray        # () the deepest violation before the correction, max(−d, 0) over the valid rows
    moved: jnp.ndarray        # () the largest change J Δq of a row


def correction_targets(gap, valid, settings):
    """c_i = min(β max(−d_i, 0), c_max) on violated rows and −d_i (≤ 0: "do not push in") on the others; 0 on
    invalid rows (module docstring)."""
    push = jnp.minimum(settings.fraction * jnp.maximum(-gap, 0.0), settings.max_step)
    return jnp.where(valid, jnp.where(gap < 0, push, -gap), 0.0)


def projected_gauss_seidel(A, c, bounded, active, sweeps):
    """μ of min ½ μᵀAμ − cᵀμ over μ_i ≥ 0 (``bounded`` rows; the others free), μ_i = 0 on inactive rows: ``sweeps``
    projected Gauss–Seidel sweeps from 0 (Cottle, Pang & Stone 1992, §5.2). Rows with a zero diagonal (nothing
    moves them) stay 0."""
    diag = jnp.diagonal(A)
    scale = jnp.maximum(jnp.max(jnp.abs(diag)) if diag.shape[0] else 0.0, jnp.finfo(A.dtype).tiny)
    usable = active & (diag > 1e-12 * scale)
    inv_diag = jnp.where(usable, 1.0 / jnp.where(usable, diag, 1.0), 0.0)

    def row(i, mu):
        step = mu[i] + (c[i] - jnp.dot(A[i], mu)) * inv_diag[i]
        return mu.at[i].set(jnp.where(usable[i], jnp.where(bounded[i], jnp.maximum(step, 0.0), step), 0.0))

    return jax.lax.fori_loop(0, sweeps, lambda _, mu: jax.lax.fori_loop(0, c.shape[0], row, mu),
                             jnp.zeros_like(c))


def _minv_times(system, factors, X):
    out, s = [], 0
    for m, L in zip(system.modules, factors):
        out.append(cho_solve(L, X[s:s + m.nv]))
        s += m.nv
    return jnp.concatenate(out)


def correct_positions(system, q, rows, settings=PositionCorrection()):
    """(q corrected, :class:`CorrectionReport`): ``q`` (per module) moved by Δq = H(q)⁻¹ Jᵀ μ (module docstring)
    for the :class:`PositionRows` ``rows`` evaluated at ``q``."""
    dtype = q[0].dtype
    J = jnp.concatenate([rows.J_fixed, rows.J]).astype(dtype)
    n_fixed = rows.J_fixed.shape[0]
    c = jnp.concatenate([jnp.zeros(n_fixed, dtype), correction_targets(rows.gap, rows.valid, settings)])
    bounded = jnp.concatenate([jnp.zeros(n_fixed, bool), jnp.ones(rows.gap.shape[0], bool)])
    active = jnp.concatenate([rows.fixed_active, rows.valid])
    factors = [cholesky(mass_matrix(m, qk)) for m, qk in zip(system.modules, q)]
    Psi = _minv_times(system, factors, J.T)
    mu = projected_gauss_seidel(matmul(J, Psi), c, bounded, active, settings.sweeps)
    dq = matmul(Psi, mu)
    out, s = [], 0
    for m, qk in zip(system.modules, q):
        out.append(normalize_configuration(m, integrate_configuration(m, qk, dq[s:s + m.nv], 1.0)))
        s += m.nv
    zero = jnp.zeros((), dtype)
    depth = jnp.max(jnp.concatenate([jnp.where(rows.valid, jnp.maximum(-rows.gap, 0.0), 0.0), zero[None]]))
    moved = jnp.max(jnp.concatenate([jnp.abs(matmul(rows.J, dq)), zero[None]]))
    return tuple(out), CorrectionReport(depth, moved)
