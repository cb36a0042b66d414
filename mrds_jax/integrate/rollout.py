"""Rollouts over ``lax.scan``: decimated outputs, NaN detection with the step where it appeared."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .integrators import INTEGRATORS


class SimulationError(RuntimeError):
    pass


class Trajectory(NamedTuple):
    t: jax.Array        # (n_out,) times of the stored states
    q: tuple            # per module (n_out, nq)
    v: tuple            # per module (n_out, nv)
    first_nonfinite: jax.Array  # step index where the state first became non-finite, −1 if never


def _finite(q, v):
    leaves = jax.tree.leaves((q, v))
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def rollout(modules, acceleration, q0, v0, dt, n_steps, decimation=1, integrator="rk4", t0=0.0):
    """Integrate ``n_steps`` steps of size ``dt`` and store every ``decimation``-th state (the initial
    state is stored first). Pure and jit/vmap/grad-able; ``n_steps``, ``decimation`` and ``integrator``
    are static. Use :func:`check_trajectory` outside jit to turn a NaN into an error."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; use one of {sorted(INTEGRATORS)}")
    if n_steps % decimation:
        raise ValueError(f"n_steps ({n_steps}) must be a multiple of decimation ({decimation})")
    step = INTEGRATORS[integrator]
    modules = tuple(modules)
    q0, v0 = tuple(q0), tuple(v0)

    def inner(carry, _):
        q, v, k, bad = carry
        q, v = step(modules, acceleration, q, v, t0 + k * dt, dt)
        k = k + 1
        bad = jnp.where((bad < 0) & ~_finite(q, v), k, bad)
        return (q, v, k, bad), None

    def outer(carry, _):
        carry, _ = jax.lax.scan(inner, carry, None, length=decimation)
        q, v, k, _ = carry
        return carry, (t0 + k * dt, q, v)

    init = (q0, v0, jnp.asarray(0), jnp.asarray(-1))
    (_, _, _, bad), (t, q, v) = jax.lax.scan(outer, init, None, length=n_steps // decimation)
    stack0 = lambda x0, xs: jnp.concatenate([x0[None], xs])  # noqa: E731
    return Trajectory(stack0(jnp.asarray(t0, dtype=jnp.result_type(dt, float)), t),
                      tuple(map(stack0, q0, q)), tuple(map(stack0, v0, v)), bad)


def check_trajectory(traj, dt=None):
    """Raise :class:`SimulationError` naming the step (and time) where the state first became non-finite."""
    bad = np.asarray(traj.first_nonfinite)
    if bad.ndim == 0:
        bad = bad[None]
    hit = np.flatnonzero(bad >= 0)
    if hit.size:
        k = int(bad[hit[0]])
        when = f" (t = {k * dt:g} s)" if dt is not None else ""
        where = f" in scenario {int(hit[0])}" if bad.size > 1 else ""
        raise SimulationError(f"the state became NaN/inf at step {k}{when}{where}")
    return traj
