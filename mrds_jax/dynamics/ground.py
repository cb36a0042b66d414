"""A rigid tree's Step 2 quantities in ground coordinates: every spatial vector and inertia expressed once in one
frame fixed in the support (world axes, Plücker coordinates at a reference point o), so that the sweeps of the
link-coordinate algorithms become sums over subtrees and ancestors, i.e. products with the tree's static
ancestor matrix, and no recursion is left but the placements.

The textbook bodies are the link-coordinate steps of ``kinematics.py``, ``crba.py`` and ``rnea.py``
(Featherstone, *Rigid Body Dynamics Algorithms*, Tables 5.1 and 6.2). Their equations are coordinate-free
(Featherstone eq. 5.7-5.9 write the RNEA without a coordinate system, and Featherstone §6.2 derives the CRBA from
Iᶜᵢ = Σ_{j∈ν(i)} Iⱼ); expressed in one fixed frame, every transform between a link and its parent is the identity,
and each recursion unrolls into a sum:

* velocities (Table 5.1 line 5, Featherstone eq. 5.7): vᵢ = v_λ(i) + Sᵢ q̇ᵢ, so vᵢ = Σ_{k⪯i} Sₖ q̇ₖ (k over i and its
  ancestors): :func:`ground_kinematics`;
* accelerations (line 6, Featherstone eq. 5.8): aᵢ = a_λ(i) + Sᵢ q̈ᵢ + Ṡᵢ q̇ᵢ with, in a fixed frame,
  Ṡᵢ q̇ᵢ = vᵢ × Sᵢ q̇ᵢ + ⁰Xᵢ S̊ᵢ q̇ᵢ (the link-coordinate cᵢ = S̊ᵢ q̇ᵢ + vᵢ × Sᵢ q̇ᵢ of Featherstone eq. 5.6 carried to
  the ground frame), so aᵢ = a₀ + Σ_{k⪯i} (Sₖ q̈ₖ + cₖ): :func:`link_accelerations`;
* composite inertias (Table 6.2's backward pass): Iᶜᵢ = Σ_{j⪰i} Iⱼ (j over i and its descendants), with each
  link inertia moved to the ground frame once, Iⱼ = ⁰Xⱼ* Iⱼ ʲX₀ (:func:`~mrds_jax.spatial.transform_inertia`);
  H_ij = Sᵢᵀ Iᶜ_j Sⱼ for i ⪯ j (Featherstone §6.2): :func:`mass_matrix`, the assembly
  :func:`~.crba.assemble_mass_matrix` shares with the level-scan route;
* RNEA's forces (lines 9-15, Featherstone eq. 5.9): fᵢᴮ = Iᵢ aᵢ + vᵢ ×* Iᵢ vᵢ, fᵢ = Σ_{j⪰i} fⱼᴮ, τᵢ = Sᵢᵀ fᵢ:
  :func:`nonlinear_effects`.

Only the placements ⁰Tᵢ = ⁰T_λ(i) ᶦ⁻¹Tᵢ are a true outward recursion (``levels.outward`` on the module's route).

The reference point o is the first link's origin, not the world origin: the moments of the spatial quantities
are then taken about a point on the robot, whatever its distance from the world origin (the float32 reason
MuJoCo takes its ``cinert`` and ``cdof`` about a subtree's centre of mass).

Equality with the link-coordinate routes and with Pinocchio: ``tests/test_ground_coordinates.py``.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model.tree import task_slice
from ..spatial import act_motion, compose, cross, cross_force, cross_motion, transform_inertia
from ..spatial.linalg import matmul
from .common import gravity_acceleration, link_inertias, with_armature
from .crba import assemble_mass_matrix
from .kinematics import _placement_step
from .levels import outward, uses_level_scan
from .stacked_joints import joint_motions, joint_velocity_products, link_coordinates


class GroundKinematics(NamedTuple):
    """A rigid tree's kinematics in ground coordinates (module docstring): world axes, moments about ``origin``."""
    world_R: jax.Array        # (n, 3, 3) link placements in the support frame
    world_p: jax.Array        # (n, 3)
    origin: jax.Array         # (3,) the reference point o (the first link's origin)
    S: jax.Array              # (6, nv) motion subspaces, ⁰Xᵢ Sᵢ about o
    velocity: jax.Array       # (n, 6) link twists vᵢ about o
    velocity_product: jax.Array  # (n, 6) cᵢ = Ṡᵢ q̇ᵢ about o (module docstring)


def _placements(module, local_R, local_p):
    """⁰Tᵢ of every link, stacked (n, 3, 3), (n, 3): the one outward recursion, on the module's route
    (``levels.outward``: a level scan, or link by link)."""
    t = module.topology
    at_support = (jnp.eye(3, dtype=local_p.dtype), jnp.zeros(3, dtype=local_p.dtype))
    if uses_level_scan(t):
        (R, p), _ = outward(t, _placement_step, at_support, (local_R, local_p))
        return R, p
    world, _ = outward(t, _placement_step, at_support, list(zip(local_R, local_p)))
    return jnp.stack([w[0] for w in world]), jnp.stack([w[1] for w in world])


def _masked_sum(mask, x):
    """Σⱼ mask[i, j] xⱼ for a static 0/1 ``mask`` (n, k) and x (k, ...): written as a broadcast product and a sum
    (fused with its neighbours under ``vmap``), not a batch of small matrix products."""
    m = jnp.asarray(mask, dtype=x.dtype).reshape(mask.shape + (1,) * (x.ndim - 1))
    return jnp.sum(m * x[None], axis=1)


def _sum_over_subtree(topology, x):
    """Σ_{j⪰i} xⱼ for every link i (i and its descendants), (n, ...)."""
    return _masked_sum(topology.ancestor_mask(), x)


def _to_ground(R, r, m):
    """Link-frame motion vectors m (n, 6) about the ground point o, with r = pᵢ − o."""
    return jax.vmap(act_motion)(R, r, m)


def ground_kinematics(module, q, v):
    """Placements, ground-frame subspaces, twists vᵢ = Σ_{k⪯i} Sₖ q̇ₖ and the velocity products
    cᵢ = ⁰Xᵢ S̊ᵢ q̇ᵢ + vᵢ × Sᵢ q̇ᵢ (module docstring; Featherstone eq. 5.6-5.7 in a fixed frame)."""
    t = module.topology
    local_R, local_p, S_link = joint_motions(module, q)
    R, p = _placements(module, local_R, local_p)
    origin = p[0]
    r = p - origin
    S0 = S_link.in_frames(R, r)
    vJ = _to_ground(R, r, matmul(S_link.padded, link_coordinates(t, v)[:, :, None])[:, :, 0])
    vel = _sum_over_ancestors(t, vJ)
    c = _to_ground(R, r, joint_velocity_products(module, q, v)) + jax.vmap(cross_motion)(vel, vJ)
    return GroundKinematics(R, p, origin, S0, vel, c)


def link_accelerations(module, kin, qdd, support_acceleration=None):
    """aᵢ = a₀ + Σ_{k⪯i} (Sₖ q̈ₖ + cₖ) about o (Featherstone eq. 5.8 in a fixed frame); ``support_acceleration``
    a₀ as in :func:`~.kinematics.link_accelerations` (gravity by the fictitious-base trick)."""
    acc = _sum_over_ancestors(module.topology, _joint_accelerations(module.topology, kin.S, qdd) + kin.velocity_product)
    return acc if support_acceleration is None else acc + support_acceleration


def _joint_accelerations(topology, S, qdd):
    """Sᵢ q̈ᵢ of every link (n, 6), from the ground-frame columns S (6, nv)."""
    own = np.eye(topology.n_links, dtype=bool)[:, topology.dof_links()]   # (n, nv): a link's own coordinates
    return _masked_sum(own, (S * qdd).T)


def _sum_over_ancestors(topology, x):
    """Σ_{k⪯i} xₖ for every link i, (n, ...)."""
    return _masked_sum(topology.ancestor_mask().T, x)


def ground_inertias(module, kin):
    """Iᵢ = ⁰Xᵢ* Iᵢ ⁱX₀ of every link about o, (n, 6, 6)."""
    return jax.vmap(transform_inertia)(kin.world_R, kin.world_p - kin.origin, link_inertias(module))


def mass_matrix(module, kin, inertias):
    """H by the CRBA in ground coordinates: Iᶜᵢ = Σ_{j⪰i} Iⱼ (one product with the ancestor matrix), then
    H_ij = Sᵢᵀ Iᶜ_j Sⱼ (:func:`~.crba.assemble_mass_matrix`), armature on the diagonal."""
    t = module.topology
    Ic = _sum_over_subtree(t, inertias)
    return with_armature(module, assemble_mass_matrix(t, kin.S, Ic))


def nonlinear_effects(module, kin, inertias, acc):
    """C v + G by the RNEA's force pass in ground coordinates: fᵢᴮ = Iᵢ aᵢ + vᵢ ×* Iᵢ vᵢ, fᵢ = Σ_{j⪰i} fⱼᴮ,
    τᵢ = Sᵢᵀ fᵢ (Featherstone eq. 5.9, Table 5.1 lines 9-15); ``acc`` the link accelerations at q̈ = 0 with
    gravity as a support acceleration."""
    t = module.topology
    body = matmul(inertias, acc[:, :, None])[:, :, 0] + jax.vmap(cross_force)(kin.velocity,
                                                                              matmul(inertias, kin.velocity[:, :, None])[:, :, 0])
    f = _sum_over_subtree(t, body)
    return jnp.sum(kin.S * f[t.dof_links()].T, axis=0)


class GroundPoints(NamedTuple):
    """Operational points' placements and motion from ground-coordinate kinematics (world-aligned, as
    :func:`~.kinematics.frame_velocity` and ``frame_acceleration``)."""
    R: jax.Array      # (m, 3, 3)
    p: jax.Array      # (m, 3)
    xd: jax.Array     # (m, 6) [ω; ṗ]
    J: jax.Array      # (m, 6, nv) world-aligned Jacobians


def point_kinematics(module, kin, points):
    """Placements, velocities [ω; ṗ] and world-aligned Jacobians of the operational points ``points``:
    ṗ = v_o + ω × (p − o) read off the link twist, J = [S_ω; S_v − (p − o)~ S_ω] over the link's ancestors'
    coordinates (``kinematics.frame_jacobian``'s shift of reference point)."""
    t, par = module.topology, module.params
    frames = np.array([t.frame_index(f) for f in points], dtype=int)
    links = np.array(t.frame_links, dtype=int)[frames]
    R, p = jax.vmap(compose)(kin.world_R[links], kin.world_p[links], par.frame_R[frames], par.frame_p[frames])
    r = p - kin.origin
    v = kin.velocity[links]
    xd = jnp.concatenate([v[:, :3], v[:, 3:] + cross(v[:, :3], r)], axis=1)
    mask = jnp.asarray(t.ancestor_mask()[np.ix_(t.dof_links(), links)].T, kin.S.dtype)        # (m, nv)
    S_w, S_v = kin.S[:3], kin.S[3:]
    J_v = S_v[None] + cross(jnp.swapaxes(S_w, 0, 1)[None], r[:, None, :]).swapaxes(1, 2)   # S_ω × r = −r̃ S_ω
    J = jnp.concatenate([jnp.broadcast_to(S_w, J_v.shape), J_v], axis=1) * mask[:, None, :]
    return GroundPoints(R, p, xd, J), links, r


def point_accelerations(acc, xd, links, r):
    """Classical accelerations [ω̇; p̈] of the points from the link accelerations ``acc`` about o:
    p̈ = a_o + ω̇ × (p − o) + ω × ṗ (``kinematics.frame_acceleration``, world-aligned)."""
    a = acc[links]
    return jnp.concatenate([a[:, :3], a[:, 3:] + cross(a[:, :3], r) + cross(xd[:, :3], xd[:, 3:])], axis=1)


def task_rows_of(module, J):
    """(m·d, nv): the points' Jacobians (m, 6, nv) restricted to the module's task rows and stacked."""
    return J[:, task_slice(module.task_dim)].reshape(-1, module.nv)


class GroundTerms(NamedTuple):
    """What a rigid tree's Step 2 needs before its mass-matrix solve, from one ground-coordinate pass
    (:func:`ground_terms`)."""
    kinematics: GroundKinematics
    H: jax.Array              # (nv, nv) joint-space inertia, armature included
    bias: jax.Array           # (nv,) C v + G
    points: GroundPoints
    J: jax.Array              # (m·d, nv) the points' task Jacobians
    point_bias: jax.Array     # (m, 6) the points' classical accelerations at q̈ = 0 (J̇ v), no gravity
    links: np.ndarray         # (m,) the link each point sits on
    r: jax.Array              # (m, 3) the points' positions relative to o


def ground_terms(module, q, v, points):
    """H (CRBA), C v + G (RNEA at q̈ = 0) and the points' placements, velocities, J̇ v and task Jacobians of a rigid
    tree, all in ground coordinates from one kinematics pass (module docstring)."""
    kin = ground_kinematics(module, q, v)
    inertias = ground_inertias(module, kin)
    bias_acc = link_accelerations(module, kin, jnp.zeros_like(v))
    bias = nonlinear_effects(module, kin, inertias, bias_acc + gravity_acceleration(module))
    pts, links, r = point_kinematics(module, kin, points)
    return GroundTerms(kin, mass_matrix(module, kin, inertias), bias, pts, task_rows_of(module, pts.J),
                       point_accelerations(bias_acc, pts.xd, links, r), links, r)


def point_accelerations_at(module, terms, qdd):
    """The points' classical accelerations for joint accelerations ``qdd``: J̇ v + J q̈ with J q̈ read off the
    link accelerations Σ_{k⪯i} Sₖ q̈ₖ (module docstring), no gravity."""
    t = module.topology
    acc = _sum_over_ancestors(t, _joint_accelerations(t, terms.kinematics.S, qdd))[terms.links]
    return terms.point_bias + jnp.concatenate([acc[:, :3], acc[:, 3:] + cross(acc[:, :3], terms.r)], axis=1)
