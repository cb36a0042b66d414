"""Energies and momentum of a module: the conserved quantities the integration tests check."""
import jax
import jax.numpy as jnp

from ..spatial import act_force
from .common import link_inertias
from .kinematics import forward_kinematics
from ..spatial.linalg import matmul


def _over_links(x):
    """Per-link values as one (n, ...) array, from either recursion's kinematics (list or stacked)."""
    return jnp.stack(x) if isinstance(x, list) else x


def kinetic_energy(module, q, v, support_velocity=None):
    """T = Σ ½ vᵢᵀ Iᵢ vᵢ over links + ½ Σ armature_k v_k² over degrees of freedom (the rotors; equals ½ vᵀ H v
    on a fixed support)."""
    vel = _over_links(forward_kinematics(module, q, v, support_velocity).velocity)
    rotors = 0.5 * jnp.sum(module.params.armature * v * v)
    return 0.5 * jnp.sum(vel * matmul(link_inertias(module), vel[:, :, None])[:, :, 0]) + rotors


def potential_energy(module, q):
    """V = −Σ mᵢ gᵀ cᵢ (centres of mass in the support frame)."""
    kin = forward_kinematics(module, q)
    par = module.params
    com_world = matmul(_over_links(kin.world_R), par.com[:, :, None])[:, :, 0] + _over_links(kin.world_p)
    return -jnp.sum(par.mass * (matmul(com_world, par.gravity)))


def mechanical_energy(module, q, v):
    return kinetic_energy(module, q, v) + potential_energy(module, q)


def spatial_momentum(module, q, v):
    """Total spatial momentum [angular about the support origin; linear], support axes."""
    kin = forward_kinematics(module, q, v)
    vel = _over_links(kin.velocity)
    momenta = matmul(link_inertias(module), vel[:, :, None])[:, :, 0]
    return jnp.sum(jax.vmap(act_force)(_over_links(kin.world_R), _over_links(kin.world_p), momenta), axis=0)
