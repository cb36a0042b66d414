"""Recursive Newton-Euler inverse dynamics (Featherstone Table 5.1; Lilly & Orin's open-chain terms)."""
import jax
import jax.numpy as jnp

from ..validation import module_arrays
from ..spatial import act_force, cross_force
from .common import gravity_acceleration, link_external_forces, link_inertias
from .kinematics import forward_kinematics, is_stacked, link_accelerations
from .levels import subtree_totals
from .stacked_joints import module_coordinates
from ..spatial.linalg import matmul


def rnea(module, q, v, qdd, f_ext=None, support_velocity=None, support_acceleration=None):
    """τ = H(q) q̈ + C(q, v) v + G(q) − Σ Jᵢᵀ f_ext,i, H with the joints' armature (τᵢ gets armatureᵢ q̈ᵢ).

    ``f_ext`` (n_links, 6): forces applied on each link, link frame, [n; f] about the link origin.
    ``support_velocity``/``support_acceleration``: motion of the support frame (moving base).
    """
    q, v, qdd = module_arrays(module, "rnea", q=q, v=v, qdd=qdd)
    kin = forward_kinematics(module, q, v, support_velocity)
    acc = link_accelerations(module, kin, qdd, gravity_acceleration(module, support_acceleration))
    tau = joint_forces(module, kin, acc, link_external_forces(module, f_ext, q.dtype))
    return tau + module.params.armature * qdd


def joint_forces(module, kin, acc, f_ext):
    """RNEA's force passes (Featherstone Table 5.1, lines 9-15) on given kinematics: body forces
    fᵢᴮ = Iᵢ aᵢ + vᵢ ×* Iᵢ vᵢ − f_ext,i, summed inward over subtrees, τᵢ = Sᵢᵀ fᵢ. ``acc``: link
    accelerations with gravity as a fictitious support acceleration."""
    inertias = link_inertias(module)
    if is_stacked(kin):
        return _joint_forces_levels(module, kin, jax.vmap(_body_force)(inertias, acc, kin.velocity) - f_ext)
    t = module.topology
    forces = [_body_force(inertias[i], acc[i], kin.velocity[i]) - f_ext[i] for i in range(t.n_links)]
    totals = subtree_totals(t, forces, kin.local_R, kin.local_p, act_force)
    return jnp.concatenate([matmul(kin.S[i].T, f) for i, f in enumerate(totals)])


def _body_force(I, a, v):
    """fᵢᴮ = Iᵢ aᵢ + vᵢ ×* Iᵢ vᵢ, the force link i alone needs (Featherstone eq. 5.9)."""
    return matmul(I, a) + cross_force(v, matmul(I, v))


def _joint_forces_levels(module, kin, body_forces):
    """τᵢ = Sᵢᵀ fᵢ with fᵢ the subtree sum of body forces (RNEA's inward pass as one level scan)."""
    f = subtree_totals(module.topology, body_forces, kin.local_R, kin.local_p, act_force)
    return module_coordinates(module.topology, matmul(f[:, None, :], kin.S.padded)[:, 0, :])


def nonlinear_effects(module, q, v, **kw):
    """C(q, v) v + G(q)."""
    return rnea(module, q, v, jnp.zeros_like(v), **kw)


def nonlinear_effects_from_kinematics(module, kin):
    """C(q, v) v + G(q) from kinematics already computed with v (no support motion): RNEA at q̈ = 0."""
    dtype = kin.local_p[0].dtype
    nv = module.nv
    acc = link_accelerations(module, kin, jnp.zeros(nv, dtype), gravity_acceleration(module))
    return joint_forces(module, kin, acc, link_external_forces(module, None, dtype))


def generalized_gravity(module, q):
    """G(q)."""
    return rnea(module, q, jnp.zeros(module.nv, dtype=q.dtype), jnp.zeros(module.nv, dtype=q.dtype))
