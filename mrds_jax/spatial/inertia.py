"""Spatial inertia, [angular; linear] ordering, about a frame origin."""
import jax.numpy as jnp

from .rotation import skew
from .transforms import force_transform
from .linalg import matmul


def spatial_inertia(mass, com, inertia_com):
    """6x6 spatial inertia about the frame origin of a body with ``mass``, centre of mass ``com``
    (in the frame) and rotational inertia ``inertia_com`` about the centre of mass (frame axes):
    [[Ī − m c̃c̃, m c̃], [−m c̃, m 1]] (Featherstone eq. 2.63, reordered)."""
    c = skew(com)
    return jnp.block([[inertia_com - matmul(mass * c, c), mass * c], [-mass * c, mass * jnp.eye(3, dtype=c.dtype)]])


def transform_inertia(R, p, I_B):
    """Spatial inertia given in frame B, expressed in frame A: ᴬX_B* I ᴮX_A = ᴬX_B* I (ᴬX_B*)ᵀ."""
    Xf = force_transform(R, p)
    return matmul(matmul(Xf, I_B), Xf.T)


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
