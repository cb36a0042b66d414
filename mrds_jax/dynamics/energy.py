"""Energies and momentum of a module: the conserved quantities the integration tests check."""

import jax.numpy as jnp

from ..spatial import act_force
from .common import link_inertias
from .kinematics import forward_kinematics
from ..spatial.linalg import matmul


def kinetic_energy(module, q, v, support_velocity=None):
    """T = Σ ½ vᵢᵀ Iᵢ vᵢ over links (equals ½ vᵀ H v on a fixed support)."""
    kin = forward_kinematics(module, q, v, support_velocity)
    inertias = link_inertias(module)
    return sum(matmul(0.5 * vi, matmul(inertias[i], vi)) for i, vi in enumerate(kin.velocity))


def potential_energy(module, q):
    """V = −Σ mᵢ gᵀ cᵢ (centres of mass in the support frame)."""
    kin = forward_kinematics(module, q)
    par = module.params
    com_world = jnp.stack([matmul(R, c) + p for R, p, c in zip(kin.world_R, kin.world_p, par.com)])
    return -jnp.sum(par.mass * (matmul(com_world, par.gravity)))


def mechanical_energy(module, q, v):
    return kinetic_energy(module, q, v) + potential_energy(module, q)


def spatial_momentum(module, q, v):
    """Total spatial momentum [angular about the support origin; linear], support axes."""
    kin = forward_kinematics(module, q, v)
    inertias = link_inertias(module)
    return sum(act_force(R, p, matmul(inertias[i], vi))
               for i, (R, p, vi) in enumerate(zip(kin.world_R, kin.world_p, kin.velocity)))
