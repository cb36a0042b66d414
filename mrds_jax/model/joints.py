"""Joint kinds: the joint model of Featherstone (ch. 4) for every kind the papers need.

A joint connects a link to its parent. Its fixed *placement* (R₀, p₀) puts the joint frame in the parent
link frame; the joint motion ``(R_J(q), p_J(q))`` then puts the child link frame in the joint frame. The
motion subspace ``S(q)`` (6 x nv) maps the joint velocity ``v`` to the child link's twist relative to the
parent, expressed in the child frame, [angular; linear].

Kinds (``nq``/``nv``):
  revolute(axis) 1/1, prismatic(axis) 1/1, screw(axis, pitch ρ) 1/1 (translation ρ·θ along the axis),
  universal(axis, axis2) 2/2 (R = rot(axis, q₁) rot(axis2, q₂)), spherical 4/3 (unit quaternion w,x,y,z;
  v = body angular velocity), fixed 0/0, free 7/6 (position, quaternion; v = body twist [ω; v], the
  base-motion variables of Bonaventura Ch. 6.1), planar_free 3/3 (x, y, θ in the plane; v = q̇).
Revolute and prismatic joints serve planar modules too (axis z, axis in the xy plane respectively).
"""
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp

from ..spatial.rotation import axis_angle_rotation, quat_derivative, quat_integrate, quat_to_rotation, rot_z
from ..spatial.linalg import matmul
from ..validation import ModelError


@dataclass(frozen=True)
class JointKind:
    """A joint kind: sizes and pure functions of (q, axis, axis2, pitch)."""
    name: str
    nq: int
    nv: int
    transform: Callable        # (q, axis, axis2, pitch) -> (R, p) of child frame in joint frame
    motion_subspace: Callable  # (q, axis, axis2, pitch) -> S (6, nv), child frame
    neutral: Callable          # dtype -> q at the reference configuration
    qdot: Callable = None      # (q, v) -> q̇; None means q̇ = v
    integrate: Callable = None  # (q, v, dt) -> q(t + dt) for constant v; None means q + v dt

    def q_derivative(self, q, v):
        return v if self.qdot is None else self.qdot(q, v)

    def integrate_q(self, q, v, dt):
        return q + v * dt if self.integrate is None else self.integrate(q, v, dt)


def _zeros3(dtype):
    return jnp.zeros(3, dtype=dtype)


def _revolute_transform(q, axis, axis2, pitch):
    return axis_angle_rotation(axis, q[0]), _zeros3(axis.dtype)


def _revolute_subspace(q, axis, axis2, pitch):
    return jnp.concatenate([axis, _zeros3(axis.dtype)])[:, None]


def _prismatic_transform(q, axis, axis2, pitch):
    return jnp.eye(3, dtype=axis.dtype), axis * q[0]


def _prismatic_subspace(q, axis, axis2, pitch):
    return jnp.concatenate([_zeros3(axis.dtype), axis])[:, None]


def _screw_transform(q, axis, axis2, pitch):
    return axis_angle_rotation(axis, q[0]), axis * (pitch * q[0])


def _screw_subspace(q, axis, axis2, pitch):
    return jnp.concatenate([axis, pitch * axis])[:, None]


def _universal_transform(q, axis, axis2, pitch):
    return matmul(axis_angle_rotation(axis, q[0]), axis_angle_rotation(axis2, q[1])), _zeros3(axis.dtype)


def _universal_subspace(q, axis, axis2, pitch):
    # ω_child = rot(axis2, q₂)ᵀ axis q̇₁ + axis2 q̇₂
    first = matmul(axis_angle_rotation(axis2, q[1]).T, axis)
    z = _zeros3(axis.dtype)
    return jnp.stack([jnp.concatenate([first, z]), jnp.concatenate([axis2, z])], axis=1)


def _spherical_transform(q, axis, axis2, pitch):
    return quat_to_rotation(q), _zeros3(q.dtype)


def _spherical_subspace(q, axis, axis2, pitch):
    return jnp.concatenate([jnp.eye(3, dtype=q.dtype), jnp.zeros((3, 3), dtype=q.dtype)])


def _quat_integrate(q, v, dt):
    return quat_integrate(q, v, dt)


def _fixed_transform(q, axis, axis2, pitch):
    return jnp.eye(3, dtype=axis.dtype), _zeros3(axis.dtype)


def _fixed_subspace(q, axis, axis2, pitch):
    return jnp.zeros((6, 0), dtype=axis.dtype)


def _free_transform(q, axis, axis2, pitch):
    return quat_to_rotation(q[3:]), q[:3]


def _free_subspace(q, axis, axis2, pitch):
    return jnp.eye(6, dtype=q.dtype)


def _free_qdot(q, v):
    R = quat_to_rotation(q[3:])
    return jnp.concatenate([matmul(R, v[3:]), quat_derivative(q[3:], v[:3])])


def _free_integrate(q, v, dt):
    # Lie-group step on SO(3) x R³ with the rotation taken at the start of the step (exact for the
    # quaternion part; the position uses the world-frame velocity at the start).
    R = quat_to_rotation(q[3:])
    return jnp.concatenate([q[:3] + matmul(R, v[3:]) * dt, quat_integrate(q[3:], v[:3], dt)])


def _planar_free_transform(q, axis, axis2, pitch):
    return rot_z(q[2]), jnp.stack([q[0], q[1], jnp.zeros_like(q[0])])


def _planar_free_subspace(q, axis, axis2, pitch):
    c, s = jnp.cos(q[2]), jnp.sin(q[2])
    o, one = jnp.zeros_like(c), jnp.ones_like(c)
    # columns: ẋ, ẏ (parent-plane velocity, seen in the child frame), θ̇
    return jnp.array([[o, o, o], [o, o, o], [o, o, one], [c, s, o], [-s, c, o], [o, o, o]])


def _neutral(n, head=()):
    def f(dtype):
        return jnp.concatenate([jnp.array(head, dtype=dtype), jnp.zeros(n - len(head), dtype=dtype)])
    return f


JOINT_KINDS = {
    k.name: k for k in [
        JointKind("revolute", 1, 1, _revolute_transform, _revolute_subspace, _neutral(1)),
        JointKind("prismatic", 1, 1, _prismatic_transform, _prismatic_subspace, _neutral(1)),
        JointKind("screw", 1, 1, _screw_transform, _screw_subspace, _neutral(1)),
        JointKind("universal", 2, 2, _universal_transform, _universal_subspace, _neutral(2)),
        JointKind("spherical", 4, 3, _spherical_transform, _spherical_subspace, _neutral(4, (1.0,)),
                  qdot=quat_derivative, integrate=_quat_integrate),
        JointKind("fixed", 0, 0, _fixed_transform, _fixed_subspace, _neutral(0)),
        JointKind("free", 7, 6, _free_transform, _free_subspace,
                  lambda dtype: jnp.array([0, 0, 0, 1, 0, 0, 0], dtype=dtype),
                  qdot=_free_qdot, integrate=_free_integrate),
        JointKind("planar_free", 3, 3, _planar_free_transform, _planar_free_subspace, _neutral(3)),
    ]
}

QUATERNION_KINDS = ("spherical", "free")


def joint_kind(name, where=""):
    try:
        return JOINT_KINDS[name]
    except KeyError:
        raise ModelError(f"unknown joint kind {name!r}{where}; known kinds: {sorted(JOINT_KINDS)}") from None


def velocity_product(kind, q, v, axis, axis2, pitch):
    """c_J = S̊(q) v, the apparent time derivative of the motion subspace times v (Featherstone eq. 4.38):
    zero for joints whose subspace is constant in the child frame."""
    if kind.name in ("revolute", "prismatic", "screw", "spherical", "free", "fixed"):
        return jnp.zeros(6, dtype=v.dtype)
    _, dS = jax.jvp(lambda qq: kind.motion_subspace(qq, axis, axis2, pitch), (q,), (kind.q_derivative(q, v),))
    return matmul(dS, v)
