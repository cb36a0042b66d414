"""Forward simulation of the CKCM multibody model under a tracking controller (``controllers``):
``simulate_tracking`` integrates ``mrds_jax.system.forward_dynamics`` by ``mrds_jax.integrate.rollout`` under
computed torque, PD plus feedforward, or the open-loop inverse-dynamics forces.

Parameters, leg models, paths and controllers are pytree arguments, so one compilation serves every design:
use ``jitted_simulate`` and jit your own loops with the parameters as arguments (compile times:
docs/history.md)."""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp

from ..integrate import rollout
from ..system import SystemState, forward_dynamics
from .controllers import Controller, computed_torque, payload_pose_error, tracking_forces
from .errors import CKCMStateError
from .mechanism import build_ckcm_system
from .params import CKCMParams
from .states import closure_errors, pose_from_state


class TrackingResult(NamedTuple):
    """Output of ``simulate_tracking``: times (n,), the ``Trajectory`` of module states, payload poses Φ (n, 6) and
    their desired values (n, 6), position and orientation errors (n,) (m: norm of the position error; rad: norm of
    the Euler-angle error), ball-joint closure errors (n, 6) in m, the actuator forces at the stored states
    (n, 6; only with ``record_forces=True``, else None), and the step where the state first became
    non-finite (−1: never)."""
    t: jax.Array
    trajectory: object
    pose: jax.Array
    pose_desired: jax.Array
    position_error: jax.Array
    orientation_error: jax.Array
    closure_error: jax.Array
    forces: object
    first_nonfinite: jax.Array


def _taus(tau_a, dtype):
    z2 = jnp.zeros(2, dtype)
    return tuple(jnp.concatenate([z2, tau_a[i:i + 1]]) for i in range(6)) + (jnp.zeros(6, dtype),)


def default_integrator():
    """"rk4_compact" (RK4 with its stages in a ``lax.scan``: the closed-chain dynamics is traced and compiled
    once instead of four times) when ``mrds_jax.integrate`` has it, else "rk4"."""
    from ..integrate import INTEGRATORS
    return "rk4_compact" if "rk4_compact" in INTEGRATORS else "rk4"


def simulate_tracking(params: CKCMParams, path, state0: SystemState, dt, n_steps,
                      controller: Controller | None = None, legs="bench", decimation=1, integrator=None, t0=0.0,
                      model_params: CKCMParams | None = None, model_legs=None,
                      record_forces=False) -> TrackingResult:
    """Forward simulation of the CKCM under a tracking ``controller`` (default ``computed_torque()``).

    The plant is ``forward_dynamics`` of ``build_ckcm_system(params, legs)``, integrated by
    ``mrds_jax.integrate.rollout`` (``integrator``: default ``default_integrator()``); the actuator forces of
    ``tracking_forces`` are recomputed at every integrator stage (a zero-order hold would spoil RK4's order).
    ``path``: a pytree callable t ↦ (Φ, Φ̇, Φ̈), e.g. ``ellipse(...)``; ``state0``: e.g.
    ``state_from_pose(params, *path(0)[:2])`` (on the path) or any consistent state.  ``model_params`` /
    ``model_legs``: the controller's model when it differs from the plant (robustness studies).
    Pure and jittable (``n_steps``, ``decimation``, ``integrator``, ``record_forces`` static; see
    ``jitted_simulate``); no Python control flow on values, so one compilation serves every controller.
    """
    f = jnp.result_type(params.m)
    controller = computed_torque(dtype=f) if controller is None else controller
    integrator = default_integrator() if integrator is None else integrator
    plant = build_ckcm_system(params, legs)
    mparams = params if model_params is None else model_params
    model = plant if model_params is None and model_legs is None else build_ckcm_system(
        mparams, legs if model_legs is None else model_legs)

    def control(q, v, t):
        return tracking_forces(model, mparams, SystemState(tuple(q), tuple(v)), t, path, controller)

    def acceleration(q, v, t):
        return forward_dynamics(plant, SystemState(tuple(q), tuple(v)), _taus(control(q, v, t), f), t).qdd

    traj = rollout(plant.modules, acceleration, state0.q, state0.v, dt, n_steps, decimation, integrator, t0)

    def observe(q, v, t):
        state = SystemState(tuple(q), tuple(v))
        pose, _ = pose_from_state(state)
        e = payload_pose_error(path(t)[0], pose)
        return pose, path(t)[0], jnp.linalg.norm(e[:3]), jnp.linalg.norm(e[3:]), closure_errors(params, state)

    obs = jax.lax.map(lambda x: observe(*x), (traj.q, traj.v, traj.t))
    forces = jax.lax.map(lambda x: control(*x), (traj.q, traj.v, traj.t)) if record_forces else None
    return TrackingResult(traj.t, traj, *obs, forces, traj.first_nonfinite)


@functools.lru_cache(maxsize=None)
def jitted_simulate(n_steps, decimation=1, integrator=None, record_forces=False):
    """A cached ``jax.jit`` of ``simulate_tracking`` for given static settings, called as
    ``jitted_simulate(n)(params, path, state0, dt, controller, legs)`` with ``legs`` a ``LegInertia``
    (e.g. ``bench_legs(params)``): every controller, path, parameter set and step size reuses it."""
    def run(params, path, state0, dt, controller, legs):
        return simulate_tracking(params, path, state0, dt, n_steps, controller, legs, decimation, integrator,
                        record_forces=record_forces)
    return jax.jit(run)


def check_simulation(result: TrackingResult, dt=None, closure_tol=1e-6):
    """Raise ``SimulationError`` (``mrds_jax.integrate``) naming the step where the state became NaN/inf, or
    ``CKCMStateError`` naming the time and leg where a ball joint opened by more than ``closure_tol`` m
    (the rollout has no constraint stabilisation: reduce dt).  Eager; returns ``result``."""
    from ..integrate import check_trajectory
    check_trajectory(result.trajectory, dt)
    err = np.asarray(result.closure_error)
    if err.ndim == 2 and err.size and not np.nanmax(err) <= closure_tol:
        k, i = np.unravel_index(np.nanargmax(err), err.shape)
        raise CKCMStateError(f"ball joint {i + 1} opened by {err[k, i]:.3g} m at t = {float(result.t[k]):.6g} s "
                             f"(tol {closure_tol:g} m): the step is too large for the motion")
    return result


__all__ = ["TrackingResult", "default_integrator", "simulate_tracking", "jitted_simulate", "check_simulation"]
