"""Closed-chain inverse dynamics of the CKCM multibody model (``mrds_jax.system.inverse_dynamics``): the six
prismatic forces and the 18 ball-joint forces that produce a prescribed payload motion (``inverse_dynamics_at``),
split like the paper's Tables 1-2 into inertial, velocity-product and gravity parts (``actuator_forces``), along
the ellipse (``actuator_forces_along_path``), and mapped to the Cartesian forces of Nguyen & Pooran eq. 45
(``cartesian_forces``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..system import inverse_dynamics
from .kinematics import jacobian, warn_if_singular
from .lagrangian import ELLIPSE_SEMI_AXES, ForceSplit
from .legs import leg_model
from .mechanism import ACTUATED, build_ckcm_system
from .params import CKCMParams
from .paths import ellipse
from .states import motion_from_pose


def _actuator_total(system, params, pose, pose_rate, pose_acc):
    state, qdd = motion_from_pose(params, pose, pose_rate, pose_acc)
    return inverse_dynamics(system, state, qdd, ACTUATED)


def inverse_dynamics_at(params: CKCMParams, pose, pose_rate, pose_acc, legs="bench"):
    """Closed-chain inverse dynamics (``mrds_jax.system.inverse_dynamics``) of the payload motion (Φ, Φ̇, Φ̈):
    ``InverseDynamics`` with ``tau_actuated`` = the six prismatic forces (N, leg order; positive pushes the
    payload away from the base), ``F_c`` = the ball-joint forces, ``residual`` ≈ 0. Warns
    :class:`SingularPoseWarning` at a (near) singular pose given concrete inputs."""
    warn_if_singular(params, pose, "inverse_dynamics_at")
    return _actuator_total(build_ckcm_system(params, legs), params, pose, pose_rate, pose_acc)


def actuator_forces(params: CKCMParams, pose, pose_rate, pose_acc, legs="bench") -> ForceSplit:
    """Actuator forces of the multibody model split like the paper's Tables 1-2 (``lagrangian.ForceSplit``):
    with τ(Φ, Φ̇, Φ̈) the closed-chain inverse dynamics, gravity = τ(Φ, 0, 0), velocity products =
    τ(Φ, Φ̇, 0) − τ(Φ, 0, 0), inertial = τ(Φ, 0, Φ̈) − τ(Φ, 0, 0); exact split (τ = C⁻ᵀ(D Φ̈ + h + G)).
    Warns :class:`SingularPoseWarning` at a (near) singular pose given concrete inputs."""
    warn_if_singular(params, pose, "actuator_forces")
    system = build_ckcm_system(params, legs)
    rate, acc = jnp.asarray(pose_rate), jnp.asarray(pose_acc)
    z = jnp.zeros_like(rate)
    # the four evaluations in one vmap: the inverse dynamics is traced and compiled once
    g, vp, inertial, total = jax.vmap(lambda v, a: _actuator_total(system, params, pose, v, a).tau_actuated)(
        jnp.stack([z, rate, z, rate]), jnp.stack([z, z, acc, acc]))
    return ForceSplit(inertial - g, vp - g, g, total)


def cartesian_forces(params: CKCMParams, pose, split: ForceSplit) -> ForceSplit:
    """Generalized forces conjugate to Φ, F = Cᵀ τ (virtual work with l̇ = C Φ̇, Nguyen & Pooran eq. 26), of an
    actuator-force split: the quantities of Nguyen & Pooran eq. 45 (F_x, F_y, F_z, M_α, M_β, M_γ)."""
    CT = jacobian(params, pose).T
    return jax.tree_util.tree_map(lambda t: CT @ t, split)


def actuator_forces_along_path(params: CKCMParams, times, period, z=None, semi_axes=ELLIPSE_SEMI_AXES,
                               legs="bench", batch_size=None) -> ForceSplit:
    """``actuator_forces`` along ``EllipsePath`` (Nguyen & Pooran eq. 55) at ``times``: a ``ForceSplit`` of (len(times),
    6) arrays, the multibody counterpart of ``lagrangian.actuator_forces_along_path`` (``jax.lax.map``)."""
    path = ellipse(params, period, z, semi_axes)
    legs = leg_model(params, legs)
    return jax.lax.map(lambda t: actuator_forces(params, *path(t), legs=legs), jnp.asarray(times),
                       batch_size=batch_size)


__all__ = ["inverse_dynamics_at", "actuator_forces", "cartesian_forces", "actuator_forces_along_path"]
