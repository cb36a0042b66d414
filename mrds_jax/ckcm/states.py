"""System states of the CKCM multibody model (``mechanism``) and payload poses, both ways.

A payload motion (Φ, Φ̇, Φ̈) — the paper's Cartesian coordinates (pose x, y, z, α, β, γ
with Z-Y-X Euler angles, Nguyen & Pooran eq. 19-21) and their rates — gives the consistent system state and
accelerations of all seven modules by leg kinematics (``motion_from_pose``): every leg's joint angles follow from the
direction of B_i → A_i, its prismatic coordinate from the length (Nguyen & Pooran eq. 18), and their rates and
accelerations by forward-mode differentiation along the path.
"""
from __future__ import annotations

import functools

import numpy as np
import jax
import jax.numpy as jnp

from ..spatial import dense
from ..spatial.rotation import quat_to_rotation
from ..system import SystemState
from .errors import CKCMStateError, WorkspaceError
from .kinematics import DEFAULT_MAX_CONDITION, angular_velocity_matrix, check_pose, rotation
from .mechanism import MODULE_NAMES, leg_frames
from .params import CKCMParams, base_points, payload_points


def euler_to_quat(pose):
    """Unit quaternion (w, x, y, z) of R_z(α) R_y(β) R_x(γ) (Nguyen & Pooran eq. 19): q_z(α) ⊗ q_y(β) ⊗ q_x(γ)."""
    ca, sa = jnp.cos(pose[3] / 2), jnp.sin(pose[3] / 2)
    cb, sb = jnp.cos(pose[4] / 2), jnp.sin(pose[4] / 2)
    cg, sg = jnp.cos(pose[5] / 2), jnp.sin(pose[5] / 2)
    return jnp.stack([ca * cb * cg + sa * sb * sg, ca * cb * sg - sa * sb * cg,
                      ca * sb * cg + sa * cb * sg, sa * cb * cg - ca * sb * sg])


def leg_coordinates(params: CKCMParams, pose):
    """Joint coordinates (6, 3) of the six legs that put every tip on its ball joint A_i at ``pose``:
    universal angles (a, b) with R_x(a) R_y(b) e_z = the leg direction in the leg frame, i.e.
    b = asin(n_x), a = atan2(−n_y, n_z), and the prismatic coordinate l_i − L_i (Nguyen & Pooran eq. 9-11)."""
    R, L = leg_frames(params)
    A = payload_points(params) @ rotation(pose).T + pose[:3]
    u = jnp.einsum("ikj,ik->ij", R, A - base_points(params))       # R_iᵀ (A_i − B_i)
    l = jnp.linalg.norm(u, axis=-1)
    n = u / l[:, None]
    return jnp.stack([jnp.arctan2(-n[:, 1], n[:, 2]), jnp.arcsin(n[:, 0]), l - L], axis=-1)


def payload_twist(pose, pose_rate):
    """Body twist [ω; v] (components in {A}) of the payload moving with Euler rates Φ̇: ω = Rᵀ V Φ̇
    (Nguyen & Pooran eq. 32-34), v = Rᵀ (ẋ, ẏ, ż)."""
    Rt = rotation(pose).T
    return jnp.concatenate([Rt @ (angular_velocity_matrix(pose) @ pose_rate), Rt @ pose_rate[:3]])


def _pose_state(params, pose, pose_rate):
    legs_q, legs_v = jax.jvp(lambda x: leg_coordinates(params, x), (pose,), (pose_rate,))
    return legs_q, legs_v, jnp.concatenate([pose[:3], euler_to_quat(pose)]), payload_twist(pose, pose_rate)


def state_from_pose(params: CKCMParams, pose, pose_rate=None) -> SystemState:
    """The consistent ``SystemState`` of the system of ``build_ckcm_system`` with the payload at ``pose`` moving
    at ``pose_rate`` (default rest).  Jittable; use ``check_pose`` first for a clear error outside the
    workspace (``consistent_state`` does both)."""
    pose = jnp.asarray(pose)
    pose_rate = jnp.zeros_like(pose) if pose_rate is None else jnp.asarray(pose_rate, pose.dtype)
    lq, lv, pq, pv = _pose_state(params, pose, pose_rate)
    return SystemState(tuple(lq) + (pq,), tuple(lv) + (pv,))


def motion_from_pose(params: CKCMParams, pose, pose_rate, pose_acc):
    """(``SystemState``, q̈ per module) of the payload motion (Φ, Φ̇, Φ̈): the state of ``state_from_pose`` and
    the accelerations that keep every ball joint closed, by forward-mode differentiation along (Φ̇, Φ̈)."""
    pose, pose_rate, pose_acc = (jnp.asarray(x) for x in (pose, pose_rate, pose_acc))
    (lq, lv, pq, pv), (_, la, _, pa) = jax.jvp(lambda x, xd: _pose_state(params, x, xd), (pose, pose_rate),
                                               (pose_rate, pose_acc))
    return SystemState(tuple(lq) + (pq,), tuple(lv) + (pv,)), tuple(la) + (pa,)


def euler_from_rotation(R):
    """(α, β, γ) of R = R_z(α) R_y(β) R_x(γ) (Nguyen & Pooran eq. 19), |β| < 90°."""
    return jnp.stack([jnp.arctan2(R[1, 0], R[0, 0]), -jnp.arcsin(jnp.clip(R[2, 0], -1.0, 1.0)),
                      jnp.arctan2(R[2, 1], R[2, 2])])


def pose_from_state(state: SystemState):
    """(Φ, Φ̇) of the payload of a system state: position, Z-Y-X Euler angles, and their rates
    (Φ̇_rot = V_rot⁻¹ ω with ω = R ω_body, Nguyen & Pooran eq. 32-34)."""
    q, v = state.q[-1], state.v[-1]
    R = quat_to_rotation(q[3:])
    pose = jnp.concatenate([q[:3], euler_from_rotation(R)])
    Vr = angular_velocity_matrix(pose)[:, 3:]
    return pose, jnp.concatenate([R @ v[3:], dense.solve(Vr, R @ v[:3])])


def leg_lengths(params: CKCMParams, state: SystemState):
    """Leg lengths l_i = L_i + q_i[2] (6,) of a system state."""
    _, L = leg_frames(params)
    return L + jnp.stack([q[2] for q in state.q[:6]])


def closure_errors(params: CKCMParams, state: SystemState):
    """Distance (6,) between every leg tip and its ball joint on the payload, in metres (0 when consistent)."""
    R, L = leg_frames(params)
    B = base_points(params)
    tips = []
    for i in range(6):
        a, b, p = state.q[i]
        ca, sa, cb, sb = jnp.cos(a), jnp.sin(a), jnp.cos(b), jnp.sin(b)
        tips.append(B[i] + R[i] @ (jnp.stack([sb, -sa * cb, ca * cb]) * (L[i] + p)))
    q = state.q[-1]
    A = payload_points(params) @ quat_to_rotation(q[3:]).T + q[:3]
    return jnp.linalg.norm(jnp.stack(tips) - A, axis=-1)


def consistent_state(params: CKCMParams, pose, pose_rate=None, max_condition=DEFAULT_MAX_CONDITION):
    """``state_from_pose`` after ``check_pose`` (eager): raises ``WorkspaceError`` naming the violated
    conditions for a pose outside the workspace (legs beyond their stroke, ...), or
    ``SingularConfigurationError`` at a singular pose, instead of returning a state nobody can build."""
    pose = np.asarray(pose, dtype=float)
    check_pose(params, pose, max_condition=max_condition)
    if pose_rate is not None:
        pose_rate = np.asarray(pose_rate, dtype=float)
        if pose_rate.shape != (6,) or not np.all(np.isfinite(pose_rate)):
            raise WorkspaceError(f"pose_rate must be six finite numbers (ẋ, ẏ, ż, α̇, β̇, γ̇); got {pose_rate}")
    return _jitted_state()(params, jnp.asarray(pose), None if pose_rate is None else jnp.asarray(pose_rate))


@functools.lru_cache(maxsize=None)
def _jitted_state():
    return jax.jit(state_from_pose)


def check_ckcm_state(params: CKCMParams, state: SystemState, tol=1e-6):
    """Raise ``CKCMStateError`` when ``state`` is not a CKCM state: wrong shapes, or a leg tip more than
    ``tol`` metres from its ball joint (naming the legs).  Eager; returns the closure errors."""
    shapes = [(3, 3)] * 6 + [(7, 6)]
    if len(state.q) != 7 or len(state.v) != 7:
        raise CKCMStateError(f"a CKCM state has 7 modules ({', '.join(MODULE_NAMES)}); got {len(state.q)}")
    for name, q, v, (nq, nv) in zip(MODULE_NAMES, state.q, state.v, shapes):
        if np.shape(q) != (nq,) or np.shape(v) != (nv,):
            raise CKCMStateError(f"module {name}: q has shape {np.shape(q)}, v {np.shape(v)}; need ({nq},), ({nv},)")
    err = np.asarray(closure_errors(params, state))
    bad = [f"leg {i + 1}: {e:.3g} m" for i, e in enumerate(err) if not e <= tol]
    if bad:
        raise CKCMStateError(f"inconsistent CKCM state: leg tips away from their ball joints ({', '.join(bad)}; "
                             f"tol {tol:g} m). Build states with consistent_state / state_from_pose.")
    return err


__all__ = ["euler_to_quat", "leg_coordinates", "payload_twist", "state_from_pose", "motion_from_pose",
           "euler_from_rotation", "pose_from_state", "leg_lengths", "closure_errors", "consistent_state",
           "check_ckcm_state"]
