"""Rollouts over ``lax.scan``: decimated outputs, NaN detection with the step where it appeared, and (for
accelerations that report them, :class:`~mrds_jax.integrate.integrators.SolveInfo`) the constraint solve's
residual, condition and rank deficiency along the trajectory."""
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .integrators import INTEGRATORS, SolveInfo, worst_info, zero_info


class SimulationError(RuntimeError):
    pass


class Trajectory(NamedTuple):
    t: jax.Array        # (n_out,) times of the stored states
    q: tuple            # per module (n_out, nq)
    v: tuple            # per module (n_out, nv)
    first_nonfinite: jax.Array  # step index where the state first became non-finite, −1 if never
    solve: Optional[SolveInfo] = None       # (n_out,) each: worst over the steps up to each stored state (0 at t0)
    last_finite: Optional[SolveInfo] = None  # the solve of the last step whose result was still finite
    last_finite_step: Optional[jax.Array] = None  # that step's index (−1: none)


def _finite(q, v):
    leaves = jax.tree.leaves((q, v))
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _zero_as_batched(x):
    """Zeros shaped like ``x`` that depend on it, so that they are batched under ``vmap`` when ``x`` is
    (``zeros_like`` would be an unbatched constant; ``0 * x`` is NaN where x is inf)."""
    return jax.lax.select(jnp.zeros(jnp.shape(x), bool), x, jnp.zeros_like(x))


def rollout(modules, acceleration, q0, v0, dt, n_steps, decimation=1, integrator="rk4", t0=0.0,
            step_transform=None):
    """Integrate ``n_steps`` steps of size ``dt`` and store every ``decimation``-th state (the initial
    state is stored first). Pure and jit/vmap/grad-able; ``n_steps``, ``decimation`` and ``integrator``
    are static. Use :func:`check_trajectory` outside jit to turn a NaN into an error. ``step_transform``: None
    or a function applied to the integrator step before it is scanned (e.g.
    :func:`mrds_jax.spatial.lanewise.lanewise`; tests/test_lanewise.py)."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; use one of {sorted(INTEGRATORS)}")
    if n_steps % decimation:
        raise ValueError(f"n_steps ({n_steps}) must be a multiple of decimation ({decimation})")
    step = INTEGRATORS[integrator] if step_transform is None else step_transform(INTEGRATORS[integrator])
    modules = tuple(modules)
    q0, v0 = tuple(q0), tuple(v0)

    reports = getattr(acceleration, "reports_info", False)
    dtype = jnp.result_type(dt, float)

    def inner(carry, _):
        q, v, k, bad, worst, last, last_k = carry
        out = step(modules, acceleration, q, v, t0 + k * dt, dt)
        q, v = out[0], out[1]
        k = k + 1
        ok = _finite(q, v)
        bad = jnp.where((bad < 0) & ~ok, k, bad)
        if reports:
            info = SolveInfo(*(x.astype(dtype) for x in out[2]))
            worst = worst_info(worst, info)
            good = ok & (bad < 0)
            last = jax.tree.map(lambda new, old: jnp.where(good, new, old), info, last)
            last_k = jnp.where(good, k, last_k)
        return (q, v, k, bad, worst, last, last_k), None

    def outer(carry, _):
        carry = carry[:4] + (jax.tree.map(_zero_as_batched, carry[4]) if reports else None,) + carry[5:]
        carry, _ = jax.lax.scan(inner, carry, None, length=decimation)
        q, v, k, _, worst = carry[:5]
        return carry, (t0 + k * dt, q, v, worst)

    # the flags start from the initial state (a non-finite one is step 0), so that under ``vmap`` they are
    # batched from the first step on, like q and v: with a constant start the scans' batching rule would find
    # them batched only after tracing the step once and trace it again (twice per nested scan)
    bad0 = jnp.where(_finite(q0, v0), -1, 0)
    info0 = jax.tree.map(lambda z: z + _zero_as_batched(bad0).astype(dtype), zero_info(dtype)) if reports else None
    init = (q0, v0, jnp.asarray(0), bad0, info0, info0, jnp.minimum(bad0, -1))
    (_, _, _, bad, _, last, last_k), (t, q, v, worst) = jax.lax.scan(outer, init, None,
                                                                       length=n_steps // decimation)
    stack0 = lambda x0, xs: jnp.concatenate([x0[None], xs])  # noqa: E731
    solve = None if worst is None else SolveInfo(*(stack0(z, w) for z, w in zip(info0, worst)))
    return Trajectory(stack0(jnp.asarray(t0, dtype=dtype), t), tuple(map(stack0, q0, q)),
                      tuple(map(stack0, v0, v)), bad, solve, last, last_k if reports else None)


def nonfinite_description(traj, dt=None):
    """"the state became NaN/inf at step k (t = …)[ in scenario i]" for the first non-finite step of a
    (concrete) trajectory, or None when it stayed finite."""
    bad = np.asarray(traj.first_nonfinite)
    if bad.ndim == 0:
        bad = bad[None]
    hit = np.flatnonzero(bad >= 0)
    if not hit.size:
        return None
    k = int(bad[hit[0]])
    when = f" (t = {k * dt:g} s)" if dt is not None else ""
    where = f" in scenario {int(hit[0])}" if bad.size > 1 else ""
    return f"the state became NaN/inf at step {k}{when}{where}"


def check_trajectory(traj, dt=None):
    """Raise :class:`SimulationError` naming the step (and time) where the state first became non-finite."""
    what = nonfinite_description(traj, dt)
    if what is not None:
        last = ""
        if traj.last_finite is not None and np.ndim(traj.last_finite_step) == 0 and int(traj.last_finite_step) >= 0:
            li = traj.last_finite
            last = (f"; the last finite step ({int(traj.last_finite_step)}) had a constraint solve with condition "
                    f"≈ {float(li.condition):.3g}, {int(round(float(li.rank_deficiency)))} dropped direction(s) and "
                    f"relative residual {float(li.residual):.3g}")
        raise SimulationError(f"{what}{last}")
    return traj
