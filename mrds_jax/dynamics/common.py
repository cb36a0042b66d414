"""Small pieces shared by the tree algorithms."""
import jax
import jax.numpy as jnp

from ..spatial import spatial_inertia


def link_inertias(module):
    """Spatial inertia of every link about its frame origin, link axes, (n, 6, 6)."""
    p = module.params
    return jax.vmap(spatial_inertia)(p.mass, p.com, p.inertia)


def with_armature(module, H):
    """H + diag(armature): the rotor inertia of each degree of freedom on the diagonal of the joint-space
    inertia (the reflected-inertia model of a geared motor whose rotor spins only about its joint axis:
    MuJoCo's ``dof_armature``, Pinocchio's ``model.armature``). Used where an algorithm has formed H
    (CRBA, its parallel form); ABA adds the same term to Dᵢ = SᵢᵀIᴬᵢSᵢ, RNEA to τᵢ."""
    return H + jnp.diag(module.params.armature)


def gravity_acceleration(module, support_acceleration=None):
    """Fictitious support acceleration a_s − [0; g] that puts gravity into a recursion (Featherstone §5.3)."""
    g = module.params.gravity
    a = jnp.concatenate([jnp.zeros(3, dtype=g.dtype), -g])
    return a if support_acceleration is None else support_acceleration + a


def link_external_forces(module, f_ext, dtype):
    """Per-link external forces (n, 6) in link frames; zeros when None."""
    n = module.topology.n_links
    if f_ext is None:
        return jnp.zeros((n, 6), dtype=dtype)
    if jnp.shape(f_ext) != (n, 6):
        raise ValueError(f"f_ext has shape {jnp.shape(f_ext)}, expected ({n}, 6): one [n; f] per link, link frame")
    return f_ext
