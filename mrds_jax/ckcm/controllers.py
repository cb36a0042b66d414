"""Payload-pose tracking laws for the CKCM multibody model: computed torque, PD plus feedforward of the
inverse dynamics, open loop (``Controller``, a pytree: one compiled simulation serves every law)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass
from ..spatial import dense
from ..system import SystemState
from .inverse import _actuator_total
from .kinematics import jacobian
from .params import CKCMParams
from .states import pose_from_state


@pytree_dataclass
class Controller:
    """A payload-pose tracking law (all leaves are arrays, so one compiled simulation serves every law):

    kp, kd               PD gains per coordinate of Φ (1/s², 1/s)
    feedback_linearize   1: computed torque (inverse dynamics at the measured pose with the commanded
                         acceleration Φ̈_d + K_d ė + K_p e); 0: inverse dynamics along the desired path
    pd_force             1: add the Cartesian PD force C⁻ᵀ D₀ (K_p e + K_d ė), D₀ = diag(M, M, M, I_1, I_2, I_3)

    Use ``computed_torque``, ``pd_feedforward`` or ``open_loop`` to make one.
    """
    kp: jax.Array
    kd: jax.Array
    feedback_linearize: jax.Array
    pd_force: jax.Array


def _gains(omega, dtype):
    w = jnp.broadcast_to(jnp.asarray(omega, dtype), (6,))
    return w**2, 2 * w


def computed_torque(omega=20.0, dtype=float) -> Controller:
    """Computed torque: closed-chain inverse dynamics at the measured payload pose and rate with the
    commanded acceleration Φ̈_c = Φ̈_d + K_d ė + K_p e, gains critically damped at bandwidth ``omega`` (rad/s):
    with an exact model every pose error obeys ë + 2ω ė + ω² e = 0."""
    kp, kd = _gains(omega, dtype)
    one = jnp.ones((), kp.dtype)
    return Controller(kp, kd, one, 0 * one)


def pd_feedforward(omega=20.0, dtype=float) -> Controller:
    """Feedforward of the inverse dynamics along the *desired* path plus a Cartesian PD force mapped to the
    actuators, τ = τ_ID(Φ_d, Φ̇_d, Φ̈_d) + C(Φ)⁻ᵀ D₀ (K_p e + K_d ė) (``Controller``)."""
    kp, kd = _gains(omega, dtype)
    one = jnp.ones((), kp.dtype)
    return Controller(kp, kd, 0 * one, one)


def open_loop(dtype=float) -> Controller:
    """The inverse-dynamics forces of the desired path, applied without feedback: τ(t) = τ_ID(Φ_d(t), ...)."""
    z = jnp.zeros(6, jnp.dtype(dtype))
    return Controller(z, z, z[0], z[0])


def payload_pose_error(pose_d, pose):
    """Φ_d − Φ with the Euler-angle differences wrapped to (−π, π]."""
    e = pose_d - pose
    return e.at[3:].set(jnp.arctan2(jnp.sin(e[3:]), jnp.cos(e[3:])))


def tracking_forces(system, params: CKCMParams, state: SystemState, t, path, controller: Controller):
    """Actuator forces (6,) the ``controller`` commands at ``state`` and time ``t`` to follow ``path``
    (a callable t ↦ (Φ_d, Φ̇_d, Φ̈_d)).  One closed-chain inverse dynamics per call (``Controller``): at
    (Φ, Φ̇, Φ̈_c) for computed torque — the legs' joint states are taken from the measured payload pose by leg
    kinematics — or at the desired (Φ_d, Φ̇_d, Φ̈_d)."""
    pose_d, rate_d, acc_d = path(t)
    pose, rate = pose_from_state(state)
    e, ed = payload_pose_error(pose_d, pose), rate_d - rate
    lin = controller.feedback_linearize > 0.5
    pose_c, rate_c = jnp.where(lin, pose, pose_d), jnp.where(lin, rate, rate_d)
    acc_c = acc_d + controller.feedback_linearize * (controller.kd * ed + controller.kp * e)
    tau = _actuator_total(system, params, pose_c, rate_c, acc_c).tau_actuated
    D0 = jnp.concatenate([jnp.broadcast_to(params.M, (3,)), params.I_payload])
    F = D0 * (controller.kp * e + controller.kd * ed)
    return tau + controller.pd_force * dense.solve(jacobian(params, pose).T, F)


__all__ = ["Controller", "computed_torque", "pd_feedforward", "open_loop", "payload_pose_error", "tracking_forces"]
