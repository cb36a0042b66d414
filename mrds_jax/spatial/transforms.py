"""Rigid placements and Plücker transforms, spatial vectors ordered [angular; linear].

A *placement* ``(R, p)`` of frame B in frame A (Pinocchio's ``SE3``) maps B coordinates to A coordinates:
``x_A = R x_B + p``; ``R`` = ᴬR_B and ``p`` the origin of B expressed in A.

Motion vectors ``m = [ω; v]`` and force vectors ``f = [n; f]``. ``act`` maps B-frame quantities to A,
``inv_act`` maps A-frame quantities to B.
"""
import jax.numpy as jnp

from .rotation import cross, skew
from .linalg import matmul


def rotate(R, v):
    """R v for a 3x3 R, written as a broadcast product and a sum rather than a ``dot``: XLA fuses it with its
    neighbours instead of launching a matrix-vector kernel of nine multiplications (the recursions issue
    hundreds of these per step; see experiments/out/bench_gpu_*.md for the kernel counts)."""
    return jnp.sum(R * v[..., None, :], axis=-1)


def rotate_transpose(R, v):
    """Rᵀ v, fused like :func:`rotate`."""
    return jnp.sum(R * v[..., :, None], axis=-2)


def compose(R1, p1, R2, p2):
    """Placement ``M1 * M2`` (C in A, from B in A and C in B)."""
    return matmul(R1, R2), rotate(R1, p2) + p1


def inverse(R, p):
    """Inverse placement: A in B."""
    return R.T, -rotate_transpose(R, p)


def act_motion(R, p, m):
    """Motion vector given in B, expressed in A (Featherstone ᴬX_B m)."""
    w = rotate(R, m[:3])
    return jnp.concatenate([w, rotate(R, m[3:]) + cross(p, w)])


def inv_act_motion(R, p, m):
    """Motion vector given in A, expressed in B (ᴮX_A m)."""
    w = m[:3]
    return jnp.concatenate([rotate_transpose(R, w), rotate_transpose(R, m[3:] - cross(p, w))])


def act_force(R, p, f):
    """Force vector given in B, expressed in A (ᴬX_B* f)."""
    lin = rotate(R, f[3:])
    return jnp.concatenate([rotate(R, f[:3]) + cross(p, lin), lin])


def inv_act_force(R, p, f):
    """Force vector given in A, expressed in B (ᴮX_A* f)."""
    return jnp.concatenate([rotate_transpose(R, f[:3] - cross(p, f[3:])), rotate_transpose(R, f[3:])])


def motion_transform(R, p):
    """6x6 matrix ᴬX_B of :func:`act_motion`: [[R, 0], [p̃R, R]]."""
    z = jnp.zeros((3, 3), dtype=R.dtype)
    return jnp.block([[R, z], [matmul(skew(p), R), R]])


def force_transform(R, p):
    """6x6 matrix ᴬX_B* = ᴮX_Aᵀ of :func:`act_force`: [[R, p̃R], [0, R]]."""
    z = jnp.zeros((3, 3), dtype=R.dtype)
    return jnp.block([[R, matmul(skew(p), R)], [z, R]])


def spatial_rotation(R):
    """Bonaventura's 6x6 direction-cosine matrix ᴱℜ_P = diag(R, R) (Bonaventura eq. 18): re-expresses a spatial
    vector in another frame without moving its reference point."""
    z = jnp.zeros((3, 3), dtype=R.dtype)
    return jnp.block([[R, z], [z, R]])


def rigid_body_transform(r):
    """Bonaventura's rigid-body transform ⁱS_jk (Bonaventura eq. 20) in [angular; linear] ordering.

    With r = r_jk the vector from point j to point k, ``S @ xdot_j`` is the velocity of a point at k
    on the same rigid body (ω_k = ω_j, v_k = v_j − r̃ ω_j), and ``S.T @ F_k`` moves a force acting at k
    to the torque reference point j (n_j = n_k + r̃ f_k). The thesis orders vectors [linear; angular]
    and writes S = [[1, −r̃], [0, 1]]; this is the same operator with the blocks swapped.
    """
    one = jnp.eye(3, dtype=r.dtype)
    z = jnp.zeros((3, 3), dtype=r.dtype)
    return jnp.block([[one, z], [-skew(r), one]])
