"""Rotations: skew matrices, axis-angle, unit quaternions (scalar first: w, x, y, z).

Every function works on one item; batch with ``jax.vmap``.
"""
import jax.numpy as jnp
from .linalg import matmul


def skew(v):
    """3x3 skew-symmetric matrix ``ṽ`` with ``ṽ u = v × u`` (Bonaventura eq. 21)."""
    x, y, z = v[0], v[1], v[2]
    o = jnp.zeros_like(x)
    return jnp.array([[o, -z, y], [z, o, -x], [-y, x, o]])


def cross(a, b):
    """a × b over the last axis (length 3), broadcasting over the others (= ``skew(a) @ b``). Plain
    arithmetic rather than ``jnp.cross``, which is a nested ``jit``: under ``vmap`` and ``lax.scan`` every
    call of it is traced and batched as a sub-program (measured on the Stewart rollout: 79 such calls in
    one step)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def unskew(m):
    """Inverse of :func:`skew` (takes the skew-symmetric part)."""
    return 0.5 * jnp.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])


def axis_angle_rotation(axis, angle):
    """Rotation matrix of ``angle`` about unit ``axis`` (Rodrigues)."""
    k = skew(axis)
    return jnp.eye(3, dtype=k.dtype) + jnp.sin(angle) * k + (1.0 - jnp.cos(angle)) * (matmul(k, k))


def rot_x(a):
    return axis_angle_rotation(jnp.array([1.0, 0.0, 0.0], dtype=jnp.result_type(a, 1.0)), a)


def rot_y(a):
    return axis_angle_rotation(jnp.array([0.0, 1.0, 0.0], dtype=jnp.result_type(a, 1.0)), a)


def rot_z(a):
    return axis_angle_rotation(jnp.array([0.0, 0.0, 1.0], dtype=jnp.result_type(a, 1.0)), a)


def rpy_rotation(rpy):
    """URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    return matmul(matmul(rot_z(rpy[2]), rot_y(rpy[1])), rot_x(rpy[0]))


def quat_to_rotation(q):
    """Rotation matrix of a unit quaternion ``q = (w, x, y, z)``.

    The quaternion is normalised first, so slightly denormalised integrator states stay rotations.
    """
    q = q / jnp.linalg.norm(q)
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rotation_to_quat(R):
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (branch-free Shepperd form)."""
    t = jnp.trace(R)
    cands = jnp.array([
        [1.0 + t, R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]],
        [R[2, 1] - R[1, 2], 1.0 + 2 * R[0, 0] - t, R[0, 1] + R[1, 0], R[0, 2] + R[2, 0]],
        [R[0, 2] - R[2, 0], R[0, 1] + R[1, 0], 1.0 + 2 * R[1, 1] - t, R[1, 2] + R[2, 1]],
        [R[1, 0] - R[0, 1], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1.0 + 2 * R[2, 2] - t],
    ])
    diag = jnp.array([1.0 + t, 1.0 + 2 * R[0, 0] - t, 1.0 + 2 * R[1, 1] - t, 1.0 + 2 * R[2, 2] - t])
    i = jnp.argmax(diag)
    q = cands[i] / (2.0 * jnp.sqrt(jnp.maximum(diag[i], 1e-300)))
    return q * jnp.where(q[0] < 0, -1.0, 1.0)


def quat_multiply(a, b):
    """Hamilton product ``a ⊗ b`` of (w, x, y, z) quaternions."""
    aw, av = a[0], a[1:]
    bw, bv = b[0], b[1:]
    return jnp.concatenate([jnp.array([aw * bw - matmul(av, bv)]), aw * bv + bw * av + cross(av, bv)])


def quat_derivative(q, omega_body):
    """q̇ = ½ q ⊗ (0, ω) for a body-frame angular velocity ω."""
    return 0.5 * quat_multiply(q, jnp.concatenate([jnp.zeros(1, dtype=omega_body.dtype), omega_body]))


def quat_exp(omega_dt):
    """Unit quaternion of the rotation vector ``omega_dt`` (smooth at zero)."""
    theta2 = matmul(omega_dt, omega_dt)
    small = theta2 < 1e-12
    theta = jnp.sqrt(jnp.where(small, 1.0, theta2))   # the series below takes over: no 0/0, no ∞ slope (float32 too)
    half_sinc = jnp.where(small, 0.5 - theta2 / 48.0, jnp.sin(0.5 * theta) / theta)
    w = jnp.where(small, 1.0 - theta2 / 8.0, jnp.cos(0.5 * theta))
    return jnp.concatenate([jnp.array([w]), half_sinc * omega_dt])


def quat_integrate(q, omega_body, dt):
    """Exact integration of a constant body angular velocity over ``dt``: q ⊗ exp(ω dt)."""
    return quat_multiply(q, quat_exp(omega_body * dt))
