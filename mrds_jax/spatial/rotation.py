"""Rotations: skew matrices, axis-angle, unit quaternions (scalar first: w, x, y, z).

Every function works on one item; batch with ``jax.vmap``.
"""
import numpy as np
import jax.numpy as jnp

from .linalg import matmul

# −ε_ijk, so that skew(v)_ij = Σ_k −ε_ijk v_k
_NEG_LEVI_CIVITA = -np.array([[[0, 0, 0], [0, 0, 1], [0, -1, 0]],
                              [[0, 0, -1], [0, 0, 0], [1, 0, 0]],
                              [[0, 1, 0], [-1, 0, 0], [0, 0, 0]]], dtype=float)


def skew(v):
    """3x3 skew-symmetric matrix ``ṽ`` with ``ṽ u = v × u`` (Bonaventura eq. 21), for v of shape (..., 3).

    Written as the contraction ṽ_ij = −ε_ijk v_k with the constant Levi-Civita tensor: a few traced operations
    instead of nine scalar reads and a 3x3 assembly (about 25), which matters for the trace and compile time
    of the recursions that call it per link."""
    v = jnp.asarray(v)
    return jnp.sum(jnp.asarray(_NEG_LEVI_CIVITA, dtype=v.dtype) * v[..., None, None, :], axis=-1)


def _next(x):
    """(x₁, x₂, x₀): the components of the last axis rotated by one."""
    return jnp.concatenate([x[..., 1:], x[..., :1]], axis=-1)


def cross(a, b):
    """a × b over the last axis (length 3), broadcasting over the others (= ``skew(a) @ b``).

    With n(x) = (x₁, x₂, x₀) and d = a ⊙ n(b) − n(a) ⊙ b (dᵢ = aᵢbᵢ₊₁ − aᵢ₊₁bᵢ), a × b = n(d): the six
    multiplications of the textbook formula in about 12 traced operations instead of the 25 of the
    component-wise form (and not ``jnp.cross``, a nested ``jit`` that ``vmap`` and ``lax.scan`` trace and
    batch as a sub-program on every call)."""
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
    theta = jnp.sqrt(jnp.maximum(theta2, 1e-300))
    small = theta2 < 1e-12
    half_sinc = jnp.where(small, 0.5 - theta2 / 48.0, jnp.sin(0.5 * theta) / theta)
    w = jnp.where(small, 1.0 - theta2 / 8.0, jnp.cos(0.5 * theta))
    return jnp.concatenate([jnp.array([w]), half_sinc * omega_dt])


def quat_integrate(q, omega_body, dt):
    """Exact integration of a constant body angular velocity over ``dt``: q ⊗ exp(ω dt)."""
    return quat_multiply(q, quat_exp(omega_body * dt))
