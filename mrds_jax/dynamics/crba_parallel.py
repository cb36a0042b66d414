"""Parallel joint-space inertia matrix by recursive doubling (Amin-Javaheri & Orin, Table 2).

The serial CRBA (``crba.py``) walks the chain twice: outward for link placements, inward for composite
inertias. Both walks are prefix operations with an associative operator, so each can be done in
O(log₂ N) parallel steps:

* link placements in the base frame, ⁰T_i = ⁰T_1 ¹T_2 ⋯ ⁱ⁻¹T_i — a prefix *product* of placements;
* composite inertias in the base frame, ⁰Iᶜ_i = Σ_{k ≥ i} ⁰I_k — a suffix *sum*.

For a serial chain both are ``jax.lax.associative_scan``; for a branching tree the prefix product runs as
pointer jumping along parent links (the same doubling, log₂ depth rounds) and the subtree sum as one
product with the static descendant mask. H is then assembled exactly as in the serial algorithm.
"""
import jax
import jax.numpy as jnp
import numpy as np

from ..validation import module_arrays
from ..spatial import motion_transform, transform_inertia
from .common import link_inertias, with_armature
from .crba import assemble_mass_matrix
from .kinematics import joint_placements
from .levels import uses_level_scan
from .stacked_joints import joint_motions
from ..spatial.linalg import matmul


def _compose_batched(a, b):
    """Associative placement product, batched over the leading axis: (a ∘ b)."""
    Ra, pa = a
    Rb, pb = b
    return matmul(Ra, Rb), matmul(Ra, pb[..., None])[..., 0] + pa


def base_placements_scan(topology, local_R, local_p):
    """⁰T_i for every link by recursive doubling."""
    if topology.is_chain():
        return jax.lax.associative_scan(_compose_batched, (local_R, local_p))
    # pointer jumping: after round r every link holds the product over its 2^r nearest ancestors
    R, p = local_R, local_p
    jump = np.array(topology.parents)
    while (jump >= 0).any():
        has = jump >= 0
        src = np.where(has, jump, 0)
        Rn, pn = _compose_batched((R[src], p[src]), (R, p))
        R = jnp.where(has[:, None, None], Rn, R)
        p = jnp.where(has[:, None], pn, p)
        jump = np.where(has, jump[src], -1)
    return R, p


def composite_inertias_scan(topology, I0):
    """⁰Iᶜ_i = Σ over the subtree of i of ⁰I_k (suffix sum along a chain)."""
    if topology.is_chain():
        return jax.lax.associative_scan(jnp.add, I0, reverse=True)
    n = I0.shape[0]
    return matmul(jnp.asarray(topology.ancestor_mask(), dtype=I0.dtype), I0.reshape(n, 36)).reshape(n, 6, 6)


def mass_matrix_parallel(module, q):
    """H(q) by recursive doubling (Amin-Javaheri & Orin Table 2), armature on the diagonal; equal to
    :func:`crba.mass_matrix`."""
    q = module_arrays(module, "mass_matrix_parallel", q=q)
    t, par = module.topology, module.params
    if uses_level_scan(t):   # joint models evaluated per kind, not per link (levels.py)
        local_R, local_p, S = joint_motions(module, q)
        R, p = base_placements_scan(t, local_R, local_p)
        S0 = S.in_frames(R, p)
    else:
        local = joint_placements(module, q)
        R, p = base_placements_scan(t, jnp.stack([l[0] for l in local]), jnp.stack([l[1] for l in local]))
        S0 = jnp.concatenate([
            matmul(motion_transform(R[i], p[i]), kind.motion_subspace(q[qs], par.axis[i], par.axis2[i], par.pitch[i]))
            for i, (kind, qs) in enumerate(zip(t.kinds, t.q_slices))], axis=1)
    I0 = jax.vmap(transform_inertia)(R, p, link_inertias(module))
    return with_armature(module, assemble_mass_matrix(t, S0, composite_inertias_scan(t, I0)))
