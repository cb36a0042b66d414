"""Error-controlled integration: Dormand-Prince 5(4) with an embedded error estimate (Dormand & Prince 1980;
Hairer, Nørsett & Wanner, *Solving ODEs I*, §II.4-5, Table 5.2, and the step-size controller of §II.4,
Hairer et al. eq. 4.12-4.13), to a requested end time at requested tolerances, outputs at fixed times.

Why not diffrax: it is not installed here and needs equinox; our state is a tuple of per-module (q, v) arrays
with unit quaternions inside q that must be renormalised after each accepted step (as the fixed-step
integrators do), which this short loop does directly.

* :func:`dopri5_step` — one step and its error estimate (stages in a ``lax.scan``).
* :func:`dopri5` — integrates ``acceleration(q, v, t)`` (a tuple of q̈, or
  :class:`~.integrators.Accelerations`) from t₀ to ``t_end`` and returns the state at ``n_out`` + 1 equally
  spaced times t₀ … t_end (``n_out`` static: changing ``t_end``, ``t0``, the tolerances or the initial step
  does not recompile). Steps are shortened to land on every output time exactly (no interpolation error).
  Stages are taken as in the fixed-step RK4: q advances along q̇ = q̇(q, v) in its coordinates (quaternion
  components included) and is renormalised after each accepted step.
* Error norm: RMS over all q and v components of (y₅ − y₄) / (atol + rtol · max(|yₙ|, |yₙ₊₁|)); a step is
  accepted when it is ≤ 1; the next step is h · min(5, max(0.2, 0.9 · err^(−1/5))).
* jit/vmap-able; differentiable in forward mode (``jax.jvp``/``jax.jacfwd``: the loop is a
  ``lax.while_loop``, which reverse mode cannot transpose). Forward-mode derivatives are those of the discrete
  solution including its step-size choices, so they equal finite differences of the same solver.
* Returns :class:`AdaptiveTrajectory`: the output times and states, the number of accepted and rejected
  steps, and whether the end was reached within ``max_steps``.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..dynamics.interface import configuration_derivative, normalize_configuration
from .integrators import _axpy, _evaluate, _map

# Dormand-Prince 5(4) tableau (Hairer-Nørsett-Wanner Table 5.2)
C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
A = ((),
     (1 / 5,),
     (3 / 40, 9 / 40),
     (44 / 45, -56 / 15, 32 / 9),
     (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
     (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
     (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
E = tuple(b5 - b4 for b5, b4 in zip(B5, B4))


class AdaptiveTrajectory(NamedTuple):
    t: jax.Array        # (n_out + 1,) output times t₀ … t_end
    q: tuple            # per module (n_out + 1, nq)
    v: tuple            # per module (n_out + 1, nv)
    accepted: jax.Array  # accepted steps
    rejected: jax.Array  # rejected steps
    reached_end: jax.Array  # False if max_steps ran out first


A_MATRIX = tuple(tuple(row) + (0.0,) * (7 - len(row)) for row in A)


def dopri5_step(modules, acceleration, q, v, t, h):
    """One Dormand-Prince step: (q₅, v₅, e_q, e_v) with e = y₅ − y₄ (per module). The seven stages run in a
    ``lax.scan`` (the dynamics is traced and compiled once, as in ``rk4_compact``); first-same-as-last is not
    exploited (7 evaluations per step: a simpler state)."""
    dtype = jnp.result_type(h, float)
    a = jnp.asarray(A_MATRIX, dtype)
    c = jnp.asarray(C, dtype)
    stack = lambda x: jax.tree.map(lambda y: jnp.zeros((7,) + y.shape, y.dtype), x)  # noqa: E731

    def lincomb(K, w):
        return jax.tree.map(lambda k: jnp.tensordot(w.astype(k.dtype), k, axes=1), K)

    def stage(carry, i):
        Kq, Kv = carry
        qi = _axpy(h, lincomb(Kq, a[i]), q)
        vi = _axpy(h, lincomb(Kv, a[i]), v)
        kq = _map(configuration_derivative, modules, qi, vi)
        kv = _evaluate(acceleration, qi, vi, t + c[i] * h)[0]
        Kq = jax.tree.map(lambda K, k: K.at[i].set(k), Kq, kq)
        Kv = jax.tree.map(lambda K, k: K.at[i].set(k), Kv, kv)
        return (Kq, Kv), None

    (Kq, Kv), _ = jax.lax.scan(stage, (stack(q), stack(v)), jnp.arange(7))
    b5, e = jnp.asarray(B5, dtype), jnp.asarray(E, dtype)
    q5, v5 = _axpy(h, lincomb(Kq, b5), q), _axpy(h, lincomb(Kv, b5), v)
    return q5, v5, jax.tree.map(lambda x: h * x, lincomb(Kq, e)), jax.tree.map(lambda x: h * x, lincomb(Kv, e))


def _error_norm(y0, y1, err, rtol, atol):
    leaves = [(jnp.abs(e) / (atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)))).ravel()
              for a, b, e in zip(jax.tree.leaves(y0), jax.tree.leaves(y1), jax.tree.leaves(err))]
    r = jnp.concatenate(leaves)
    return jnp.sqrt(jnp.mean(r * r))


def dopri5(modules, acceleration, q0, v0, t_end, n_out=1, t0=0.0, rtol=1e-6, atol=1e-9, h0=1e-3,
           max_steps=100_000):
    """Integrate to ``t_end`` with error control (module docstring); ``n_out`` and ``max_steps`` static."""
    modules = tuple(modules)
    q0, v0 = tuple(q0), tuple(v0)
    dtype = jnp.result_type(jnp.asarray(t_end).dtype, jnp.asarray(q0[0]).dtype, float)
    t0, t_end = jnp.asarray(t0, dtype), jnp.asarray(t_end, dtype)
    t_out = t0 + (t_end - t0) * jnp.arange(n_out + 1, dtype=dtype) / n_out
    eps = 10 * jnp.finfo(dtype).eps

    def store(Q, x, j):
        return tuple(X.at[j].set(xi) for X, xi in zip(Q, x))

    Q = tuple(jnp.zeros((n_out + 1,) + x.shape, x.dtype).at[0].set(x) for x in q0)
    V = tuple(jnp.zeros((n_out + 1,) + x.shape, x.dtype).at[0].set(x) for x in v0)

    def cond(c):
        t, q, v, h, j, Q, V, acc, rej = c
        return (j <= n_out) & (acc + rej < max_steps)

    def body(c):
        t, q, v, h, j, Q, V, acc, rej = c
        target = t_out[jnp.minimum(j, n_out)]
        hit = target - t <= h * (1 + eps)
        h_try = jnp.where(hit, target - t, h)
        q5, v5, eq, ev = dopri5_step(modules, acceleration, q, v, t, h_try)
        err = _error_norm((q, v), (q5, v5), (eq, ev), rtol, atol)
        ok = (err <= 1.0) & jnp.isfinite(err)
        factor = jnp.clip(0.9 * jnp.where(err > 0, err, 1e-10) ** -0.2, 0.2, 5.0)
        factor = jnp.where(jnp.isfinite(err), factor, 0.2)
        q5 = _map(normalize_configuration, modules, q5)
        t_new = jnp.where(hit, target, t + h_try)
        q_n = jax.tree.map(lambda a, b: jnp.where(ok, a, b), q5, q)
        v_n = jax.tree.map(lambda a, b: jnp.where(ok, a, b), v5, v)
        t_n = jnp.where(ok, t_new, t)
        landed = ok & hit
        Q_n = jax.tree.map(lambda a, b: jnp.where(landed, a, b), store(Q, q_n, j), Q)
        V_n = jax.tree.map(lambda a, b: jnp.where(landed, a, b), store(V, v_n, j), V)
        # after landing on an output time keep the controller's step, not the shortened one
        h_next = jnp.where(ok & hit, jnp.maximum(h, h_try * factor), h_try * factor)
        return (t_n, q_n, v_n, h_next, j + landed.astype(j.dtype), Q_n, V_n, acc + ok.astype(acc.dtype),
                rej + (~ok).astype(rej.dtype))

    zero = jnp.asarray(0)
    init = (t0, q0, v0, jnp.asarray(h0, dtype), jnp.asarray(1), Q, V, zero, zero)
    t, q, v, h, j, Q, V, acc, rej = jax.lax.while_loop(cond, body, init)
    return AdaptiveTrajectory(t_out, Q, V, acc, rej, j > n_out)
