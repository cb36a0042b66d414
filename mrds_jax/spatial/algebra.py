"""Spatial cross products (Featherstone crm / crf), vectors ordered [angular; linear]."""
import jax.numpy as jnp

from .rotation import cross, skew


def cross_motion(v, m):
    """v ×  m for motion vectors: [ω × mω; ω × mv + v × mω]."""
    w, u = v[:3], v[3:]
    return jnp.concatenate([cross(w, m[:3]), cross(w, m[3:]) + cross(u, m[:3])])


def cross_force(v, f):
    """v ×* f for a force vector: [ω × n + v × f; ω × f]."""
    w, u = v[:3], v[3:]
    return jnp.concatenate([cross(w, f[:3]) + cross(u, f[3:]), cross(w, f[3:])])


def cross_motion_matrix(v):
    """6x6 matrix of ``m ↦ v × m``."""
    w, u = skew(v[:3]), skew(v[3:])
    z = jnp.zeros((3, 3), dtype=w.dtype)
    return jnp.block([[w, z], [u, w]])


def cross_force_matrix(v):
    """6x6 matrix of ``f ↦ v ×* f`` (= −(v×)ᵀ)."""
    return -cross_motion_matrix(v).T
