"""Configuration-space operations of a module: q̇ from v, stepping q along v, quaternion normalisation,
random and neutral configurations."""
import jax.numpy as jnp

from .joints import QUATERNION_KINDS


def configuration_derivative(module, q, v):
    """q̇(q, v): equal to v except for quaternion joints (q̇ = ½ q ⊗ ω, ṗ = R v for free joints)."""
    t = module.topology
    parts = [kind.q_derivative(q[qs], v[vs]) for kind, qs, vs in zip(t.kinds, t.q_slices, t.v_slices)]
    return jnp.concatenate(parts) if parts else q


def integrate_configuration(module, q, v, dt):
    """q(t + dt) for a constant v: exact on the rotation group for quaternion joints, q + v dt otherwise."""
    t = module.topology
    parts = [kind.integrate_q(q[qs], v[vs], dt) for kind, qs, vs in zip(t.kinds, t.q_slices, t.v_slices)]
    return jnp.concatenate(parts) if parts else q


def normalize_configuration(module, q):
    """Renormalise every unit quaternion in q (integrators drift off the unit sphere)."""
    t = module.topology
    parts = []
    for kind, qs in zip(t.kinds, t.q_slices):
        qi = q[qs]
        if kind.name == "spherical":
            qi = qi / jnp.linalg.norm(qi)
        elif kind.name == "free":
            qi = jnp.concatenate([qi[:3], qi[3:] / jnp.linalg.norm(qi[3:])])
        parts.append(qi)
    return jnp.concatenate(parts) if parts else q


def has_quaternions(module):
    return any(k in QUATERNION_KINDS for k in module.topology.joint_kinds)
