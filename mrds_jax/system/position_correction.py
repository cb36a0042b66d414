"""Position errors removed on the position level, after the velocity update, without touching the velocity: the
loops' and couplings' closure error (equalities) and the one-sided rows' violation (contact penetration, joint limits
passed), in one projection. Post-stabilisation (Cline & Pai, "Post-stabilization for rigid body simulation with
contact and constraints", ICRA 2003, §3), the scheme of Bullet's split impulse and of
Drake's and Pinocchio's position corrections.

The velocity-level step (:mod:`.timestepping`) asks a penetrating row only to stop approaching (σ_n ≥ 0): depth
never becomes velocity, so a body started inside another is not launched; it holds the loops (J_b v⁺ = −(β/dt) Φ_b,
velocity-level Baumgarte), so along a curved motion q⁺ = q ⊕ dt v⁺ leaves them open by O(dt² |v|²) per step (6e-6 m
on Cassie dropped 3 cm, through the landing: ``experiments/loop_closure.py``). The step then moves q⁺ by the least
change in H's metric that closes the loops and moves the violated rows of its buffer (the rows that can act,
:func:`~.timestepping.active_rows`) out:

    min ½ Δqᵀ H Δq   subject to   J_b Δq = r_b   (equalities, λ_b free),   J Δq ≥ c   (one-sided, μ ≥ 0),

r_b = −clip(γ Φ_b(q⁺), ±c_max) the loops' and couplings' position error at q⁺ (measured there: one kinematics pass;
what the linearisation leaves is below), γ = ``loops``; c_i = min(β max(−d_i⁺ − s, 0), c_max) on violated rows and
−d_i⁺ ≤ 0 on the others ("do not push in": a resting neighbour is left alone), d_i⁺ = d_i + dt J_i v⁺ the row's gap at
q⁺ to first order. Its KKT point, with the loops' block eliminated as in the velocity step (a Schur complement,
:func:`~.timestepping.eliminate_bilateral`: nothing is factored again):

    Δq = Δq_b + P Jᵀ μ,   Δq_b = Ψ_b G_bb⁻¹ r_b,   0 ≤ μ ⊥ (J P Jᵀ μ − c(d⁺ + J Δq_b)) ≥ 0,

P = H⁻¹ − Ψ_b G_bb⁻¹ Ψ_bᵀ the inverse inertia of the loop-constrained system (so P Jᵀ μ keeps J_b Δq = r_b, and
J P Jᵀ is the step's own reduced Delassus matrix): the loops are closed first, and the one-sided rows see the gaps
they leave. A violated row moves out by the fraction β of its depth beyond the slop s, at most ``max_step`` per step
(a large overlap resolves over several steps; so does a large loop opening, a regrasp). The projection's
Jacobian is the step's, at q, so Φ_b(q⁺ ⊕ Δq) is left at about dt |v| κ |Δq| (κ the loops' curvature): the step
then reduces that by a chord iteration with the same factors (:func:`~.timestepping.close_loops`).
v is not changed, so no energy is injected; the next step measures the true gaps and loop errors again.

The problem is a convex QP (a nonnegative least squares in μ), solved by projected Gauss–Seidel sweeps (Cottle,
Pang & Stone, "The Linear Complementarity Problem", 1992, §5.2) from 0, in a loop that runs only while some row is
violated beyond the slop (under ``vmap``: while some scenario of the batch is) and a sweep still changes the
multipliers, at most ``sweeps`` times: an unconverged sweep count only corrects less this step. Fixed shapes, masked rows: jit/vmap/grad-able.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp


class PositionCorrection(NamedTuple):
    """Settings of :func:`correction_multipliers`: ``fraction`` β ∈ [0, 1], the part of a violation removed per
    step; ``max_step`` c_max ≥ 0, the most a row is moved out per step (m for contacts, rad for limits of revolute
    joints; 0 switches the correction off); ``sweeps`` the most projected Gauss–Seidel sweeps of a step (≥ 1;
    they stop once converged); ``slop`` s ≥ 0, the depth left alone (m or rad, at least 100 ulp of the dtype: a
    resting contact's rounding-level overlap costs no sweep);
    ``loops`` γ ∈ [0, 1], the part of the loops' and couplings' position error at q⁺ removed per step (1: closed
    every step, to the linearisation's error; 0: velocity-level Baumgarte alone, :class:`~.timestepping.ContactSettings`
    ``baumgarte``, the behaviour before issue 58)."""
    fraction: float = 0.5
    max_step: float = 2e-3
    sweeps: int = 100
    slop: float = 1e-10
    loops: float = 1.0


SWEEP_TOL = 1e-6   # the sweeps stop when one changes no multiplier by more than this, relatively
LOOP_ITERATIONS = 1   # the chord iterations that close the loops after the projection (each divides their error
#                       by about 1/(dt |v| κ), 1e-2 to 1e-3 on a four-bar and on Cassie; each one kinematics pass)


def correction_targets(gap, valid, settings):
    """c_i = min(β max(−d_i − s, 0), c_max) on violated rows and −d_i (≤ 0: "do not push in") on the others; 0 on
    invalid rows (module docstring)."""
    slop = jnp.maximum(settings.slop, 100 * jnp.finfo(gap.dtype).eps)     # float32: 1.2e-5
    push = jnp.minimum(settings.fraction * jnp.maximum(-gap - slop, 0.0), settings.max_step)
    return jnp.where(valid, jnp.where(gap < 0, push, -gap), 0.0)


def loop_targets(error, active, settings):
    """r_b = −clip(γ Φ_b, ±c_max) of the loops' and couplings' rows with position error ``error`` at q⁺, 0 on rows
    switched off (``active`` False; module docstring)."""
    return jnp.where(active, -jnp.clip(settings.loops * error, -settings.max_step, settings.max_step), 0.0)


def projected_gauss_seidel(A, c, active, sweeps):
    """μ ≥ 0 of min ½ μᵀAμ − cᵀμ, μ_i = 0 on inactive rows: projected Gauss–Seidel sweeps from 0 (Cottle, Pang &
    Stone 1992, §5.2), while some target is positive and a sweep still changes μ (:data:`SWEEP_TOL`), at most ``sweeps``. Rows with a zero diagonal (nothing moves
    them) stay 0."""
    if c.shape[0] == 0:
        return c
    diag = jnp.diagonal(A)
    scale = jnp.maximum(jnp.max(jnp.abs(diag)), jnp.finfo(A.dtype).tiny)
    usable = active & (diag > 1e-12 * scale)
    inv_diag = jnp.where(usable, 1.0 / jnp.where(usable, diag, 1.0), 0.0)

    def row(i, mu):
        step = mu[i] + (c[i] - jnp.dot(A[i], mu)) * inv_diag[i]
        return mu.at[i].set(jnp.where(usable[i], jnp.maximum(step, 0.0), 0.0))

    def sweep(carry):
        k, mu, _ = carry
        new = jax.lax.fori_loop(0, c.shape[0], row, mu)
        return k + 1, new, jnp.any(jnp.abs(new - mu) > SWEEP_TOL * (jnp.abs(new) + jnp.abs(mu)))

    needed = jnp.any(usable & (c > 0))
    _, mu, _ = jax.lax.while_loop(lambda carry: needed & carry[2] & (carry[0] < sweeps), sweep,
                                  (jnp.zeros((), jnp.int32), jnp.zeros_like(c), jnp.ones((), bool)))
    return mu


def correction_multipliers(G, gap_next, valid, settings=PositionCorrection()):
    """μ of the correction (module docstring) for the rows of Delassus matrix ``G`` (the step's reduced one, on
    its normal rows) with first-order gaps ``gap_next`` at q⁺ and mask ``valid``; the step maps them to
    Δq = P Jᵀ μ."""
    return projected_gauss_seidel(G, correction_targets(gap_next, valid, settings), valid, settings.sweeps)
