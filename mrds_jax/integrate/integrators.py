"""One-step integrators for systems of modules (Bonaventura Step 5 integrates q̈ of every module).

A *state* is ``(q, v)``: tuples with one array per module. ``acceleration(q, v, t)`` returns the tuple of
q̈ (for a system: the closed-chain forward dynamics; for one module: ABA). Quaternions are integrated
through q̇ = ½ q ⊗ ω and renormalised after every step.

* :func:`rk4_step` — classical fourth-order Runge-Kutta on (q, v) with q̇ = q̇(q, v): 4 dynamics calls.
* :func:`rk4_compact_step` — the same RK4 with its four stages in a ``lax.scan``: the dynamics is traced
  and compiled once instead of four times (about 4× shorter compile; a little loop overhead per step).
* :func:`semi_implicit_euler_step` — symplectic Euler, v⁺ = v + q̈ dt, q⁺ = q ⊕ v⁺ dt (exact rotation
  step): 1 dynamics call, first order, bounded energy error for passive systems.

Solve diagnostics: an ``acceleration`` function with the attribute ``reports_info = True`` returns
:class:`Accelerations` (q̈ and a :class:`SolveInfo` of scalars); every step then returns ``(q, v, info)``
with the worst (elementwise maximum) ``SolveInfo`` over its stages. Plain accelerations (a tuple of q̈)
give ``(q, v)`` as before.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..dynamics.interface import configuration_derivative, integrate_configuration, normalize_configuration


class SolveInfo(NamedTuple):
    """Per dynamics evaluation, each a scalar where larger is worse (so steps and windows combine by max)."""
    residual: jax.Array          # relative residual of the constraint solve ‖Bᶜ Fᶜ − yᶜ‖ / ‖yᶜ‖
    condition: jax.Array         # ≈ condition number of the part of Bᶜ solved (1 / its smallest pivot ratio)
    rank_deficiency: jax.Array   # n_C − rank kept by the solve (redundant or singular directions dropped)


class Accelerations(NamedTuple):
    """What an info-reporting acceleration function returns."""
    qdd: tuple
    info: SolveInfo


def zero_info(dtype):
    z = jnp.zeros((), dtype=dtype)
    return SolveInfo(z, z, z)


def worst_info(a, b):
    """Elementwise maximum of two :class:`SolveInfo` (None-aware)."""
    if a is None or b is None:
        return a if b is None else b
    return SolveInfo(*(jnp.maximum(x, y) for x, y in zip(a, b)))


def _evaluate(acceleration, q, v, t):
    """(q̈ tuple, SolveInfo or None) from either kind of acceleration function."""
    out = acceleration(q, v, t)
    if isinstance(out, Accelerations):
        return tuple(out.qdd), out.info
    return tuple(out), None


def _result(q, v, info):
    return (q, v) if info is None else (q, v, info)


def _map(f, *trees):
    return tuple(f(*xs) for xs in zip(*trees))


def _axpy(a, x, y):
    return jax.tree.map(lambda xi, yi: yi + a * xi, x, y)


def rk4_step(modules, acceleration, q, v, t, dt):
    infos = []

    def deriv(q, v, t):
        qdot = _map(configuration_derivative, modules, q, v)
        qdd, info = _evaluate(acceleration, q, v, t)
        infos.append(info)
        return qdot, qdd

    k1q, k1v = deriv(q, v, t)
    k2q, k2v = deriv(_axpy(dt / 2, k1q, q), _axpy(dt / 2, k1v, v), t + dt / 2)
    k3q, k3v = deriv(_axpy(dt / 2, k2q, q), _axpy(dt / 2, k2v, v), t + dt / 2)
    k4q, k4v = deriv(_axpy(dt, k3q, q), _axpy(dt, k3v, v), t + dt)
    info = None
    for i in infos:
        info = worst_info(info, i)

    def combine(x, a, b, c, d):
        return x + dt / 6 * (a + 2 * b + 2 * c + d)

    q_new = _map(combine, q, k1q, k2q, k3q, k4q)
    v_new = _map(combine, v, k1v, k2v, k3v, k4v)
    return _result(_map(normalize_configuration, modules, q_new), v_new, info)


def semi_implicit_euler_step(modules, acceleration, q, v, t, dt):
    qdd, info = _evaluate(acceleration, q, v, t)
    v_new = _map(lambda vi, ai: vi + dt * ai, v, qdd)
    q_new = _map(lambda m, qi, vi: integrate_configuration(m, qi, vi, dt), modules, q, v_new)
    return _result(_map(normalize_configuration, modules, q_new), v_new, info)


def rk4_compact_step(modules, acceleration, q, v, t, dt):
    dtype = jnp.result_type(dt, float)
    c = jnp.asarray([0.0, 0.5, 0.5, 1.0], dtype=dtype)        # stage times (Butcher c = a_{i,i−1})
    w = jnp.asarray([1.0, 2.0, 2.0, 1.0], dtype=dtype) / 6.0  # weights b

    reports = getattr(acceleration, "reports_info", False)

    def stage(carry, cw):
        kq, kv, sq, sv, worst = carry
        ci, wi = cw
        qi, vi = _axpy(ci * dt, kq, q), _axpy(ci * dt, kv, v)
        kq = _map(configuration_derivative, modules, qi, vi)
        kv, info = _evaluate(acceleration, qi, vi, t + ci * dt)
        info = None if info is None else SolveInfo(*(x.astype(dtype) for x in info))
        return (kq, kv, _axpy(wi, kq, sq), _axpy(wi, kv, sv), worst_info(worst, info)), None

    zeros = lambda x: jax.tree.map(jnp.zeros_like, x)  # noqa: E731
    init = (zeros(q), zeros(v), zeros(q), zeros(v), zero_info(dtype) if reports else None)
    (_, _, sq, sv, info), _ = jax.lax.scan(stage, init, (c, w))
    q_new, v_new = _axpy(dt, sq, q), _axpy(dt, sv, v)
    return _result(_map(normalize_configuration, modules, q_new), v_new, info)


INTEGRATORS = {"rk4": rk4_step, "rk4_compact": rk4_compact_step, "euler": semi_implicit_euler_step}
