"""Spatial inertia, [angular; linear] ordering, about a frame origin."""
import jax.numpy as jnp

from .rotation import cross, skew
from .linalg import matmul


def spatial_inertia(mass, com, inertia_com):
    """6x6 spatial inertia about the frame origin of a body with ``mass``, centre of mass ``com``
    (in the frame) and rotational inertia ``inertia_com`` about the centre of mass (frame axes):
    [[Ī − m c̃c̃, m c̃], [−m c̃, m 1]] (Featherstone eq. 2.63, reordered)."""
    c = skew(com)
    return jnp.block([[inertia_com - matmul(mass * c, c), mass * c], [-mass * c, mass * jnp.eye(3, dtype=c.dtype)]])


def transform_inertia(R, p, I_B):
    """Spatial inertia given in frame B, expressed in frame A: ᴬX_B* I ᴮX_A = ᴬX_B* I (ᴬX_B*)ᵀ.

    Any symmetric 6x6 ``I_B`` = [[A, B], [Bᵀ, C]] (rigid-body, composite or articulated inertia). With
    ᴬX_B* = [[1, p̃], [0, 1]] diag(R, R) (:func:`~mrds_jax.spatial.force_transform`) this is, block by block,
    with A' = R A Rᵀ, B' = R B Rᵀ, C' = R C Rᵀ and P = p̃ B'ᵀ:

        [[A' + P + Pᵀ − p̃ C' p̃,  B' + p̃ C'],
         [(B' + p̃ C')ᵀ,          C'       ]]

    — six 3x3 products and cross products with p (about 400 flops instead of the 864 of two 6x6 products:
    the composite and articulated inertias of CRBA and ABA are transformed once per link)."""
    A, B, C = I_B[:3, :3], I_B[:3, 3:], I_B[3:, 3:]
    RT = R.T
    A1, B1, C1 = (matmul(matmul(R, X), RT) for X in (A, B, C))
    pC = _cross_columns(p, C1)                      # p̃ C'
    P = _cross_columns(p, B1.T)                     # p̃ B'ᵀ
    top_right = B1 + pC
    top_left = A1 + P + P.T + _cross_columns(p, pC.T)   # − p̃ C' p̃ = p̃ (p̃ C')ᵀ for a symmetric C'
    return jnp.concatenate([jnp.concatenate([top_left, top_right], axis=1),
                            jnp.concatenate([top_right.T, C1], axis=1)], axis=0)


def _cross_columns(p, X):
    """p̃ X (3 x n): the cross product of p with every column of X, without forming p̃."""
    return cross(p, X.T).T


def inertia_parameters(I):
    """(mass, com, inertia about com) of a 6x6 spatial inertia: inverse of :func:`spatial_inertia`."""
    mass = I[5, 5]
    c = I[:3, 3:] / mass
    com = jnp.array([c[2, 1], c[0, 2], c[1, 0]])
    sc = skew(com)
    return mass, com, I[:3, :3] + matmul(mass * sc, sc)


def kinetic_energy(I, v):
    """½ vᵀ I v."""
    return matmul(0.5 * v, matmul(I, v))
