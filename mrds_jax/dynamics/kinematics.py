"""Forward kinematics, velocities, accelerations, Jacobians and bias accelerations of a module.

Link quantities are expressed in link frames (body coordinates), [angular; linear]. The module's root
links hang from a *support* frame (the world, or a moving base: Bonaventura Ch. 6) whose twist and
spatial acceleration, expressed in the support frame, can be given; everything "world" here means
"support frame".

Reference frames for operational-point quantities (``reference=``):
  ``"world_aligned"`` (default) — velocity of the point's origin and angular velocity, in support axes:
      Bonaventura's ᴵJ_IO (Pinocchio LOCAL_WORLD_ALIGNED);
  ``"local"`` — the point's twist in its own axes (Pinocchio LOCAL);
  ``"world"`` — Plücker twist at the support origin (Pinocchio WORLD).
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

import jax

from ..model.joints import velocity_product
from ..model.tree import PLANAR_ROWS
from ..spatial import act_motion, compose, cross, cross_motion, inv_act_motion, motion_transform, skew
from ..spatial.linalg import matmul
from .levels import outward, uses_level_scan
from .stacked_joints import joint_motions, joint_velocity_products, link_coordinates

REFERENCES = ("world_aligned", "local", "world")


class TreeKinematics(NamedTuple):
    local_R: list     # per link: placement in parent link frame (support frame for roots)
    local_p: list
    world_R: list     # per link: placement in the support frame
    world_p: list
    S: list           # per link: motion subspace (6, nv_i), link frame
    velocity: list    # per link: twist, link frame (None entries when v is not given)
    velocity_product: list  # per link: c_i = S̊ v + v_i × S v (Featherstone eq. 5.6's c term)


class StackedKinematics(NamedTuple):
    """:class:`TreeKinematics` of the level-scan route: every field stacked over links, (n, ...), so
    ``kin.world_R[link]`` reads the same; ``S`` is a :class:`~.stacked_joints.PaddedSubspaces` (``S[i]`` is
    link i's (6, nvᵢ) subspace); ``velocity``/``velocity_product`` are None when v is not given."""
    local_R: jax.Array
    local_p: jax.Array
    world_R: jax.Array
    world_p: jax.Array
    S: object
    velocity: jax.Array
    velocity_product: jax.Array


def is_stacked(kin):
    """Whether ``kin`` comes from the level-scan route (arrays over links) rather than the unrolled one."""
    return isinstance(kin, StackedKinematics)


def _zero6(dtype):
    return jnp.zeros(6, dtype=dtype)


def on_one_link(module, kin, link, vector):
    """A per-link field of 6-vectors, ``vector`` on ``link`` and zero elsewhere, in ``kin``'s layout (list on
    the unrolled route, (n, 6) on the level-scan route); ``link=None`` gives zeros everywhere."""
    n = module.topology.n_links
    if is_stacked(kin):
        zeros = jnp.zeros((n, 6), dtype=vector.dtype)
        return zeros if link is None else zeros.at[link].set(vector)
    zero = jnp.zeros(6, dtype=vector.dtype)
    return [vector if i == link else zero for i in range(n)]


def joint_placements(module, q):
    """Per link (R, p) of the link frame in its parent frame: joint placement ∘ joint motion."""
    t, par = module.topology, module.params
    out = []
    for i, (kind, qs) in enumerate(zip(t.kinds, t.q_slices)):
        RJ, pJ = kind.transform(q[qs], par.axis[i], par.axis2[i], par.pitch[i])
        out.append(compose(par.joint_R[i], par.joint_p[i], RJ, pJ))
    return out


def forward_kinematics(module, q, v=None, support_velocity=None):
    """Placements of every link (local and in the support frame), motion subspaces, and — when ``v`` is
    given — link twists vᵢ = ᶦX_λ(i) v_λ(i) + Sᵢ q̇ᵢ and velocity products cᵢ = S̊ᵢ q̇ᵢ + vᵢ × Sᵢ q̇ᵢ
    (Featherstone Table 5.1, the RNEA's outward pass). Unrolled link by link (:class:`TreeKinematics`), or
    as one outward level scan (:class:`StackedKinematics`; ``levels.py``), as ``Topology.recursion`` says."""
    if uses_level_scan(module.topology):
        return _forward_kinematics_levels(module, q, v, support_velocity)
    return _forward_kinematics_unrolled(module, q, v, support_velocity)


def _placement_step(parent, local):
    """⁰Tᵢ = ⁰T_λ(i) ∘ ᶦ⁻¹Tᵢ for one link (outward step)."""
    return compose(*parent, *local), None


def _twist_step(parent, link):
    """⁰Tᵢ and vᵢ = ᶦX_λ(i) v_λ(i) + Sᵢ q̇ᵢ for one link (outward step)."""
    (R0, p0, v0), (R, p, vJ) = parent, link
    return compose(R0, p0, R, p) + (inv_act_motion(R, p, v0) + vJ,), None


def _link_velocity_product(c_joint, v, vJ):
    """cᵢ = S̊ᵢ q̇ᵢ + vᵢ × Sᵢ q̇ᵢ (Featherstone Table 5.1) from the joint's own term S̊ᵢ q̇ᵢ, the link twist vᵢ and
    the joint twist vJᵢ = Sᵢ q̇ᵢ."""
    return c_joint + cross_motion(v, vJ)


def _forward_kinematics_levels(module, q, v, support_velocity):
    t = module.topology
    dtype = q.dtype
    local_R, local_p, S = joint_motions(module, q)
    at_support = (jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype=dtype))
    if v is None:
        (world_R, world_p), _ = outward(t, _placement_step, at_support, (local_R, local_p))
        return StackedKinematics(local_R, local_p, world_R, world_p, S, None, None)
    vJ = matmul(S.padded, link_coordinates(t, v)[:, :, None])[:, :, 0]
    v_support = _zero6(dtype) if support_velocity is None else support_velocity
    (world_R, world_p, vel), _ = outward(t, _twist_step, at_support + (v_support,), (local_R, local_p, vJ))
    vprod = jax.vmap(_link_velocity_product)(joint_velocity_products(module, q, v), vel, vJ)
    return StackedKinematics(local_R, local_p, world_R, world_p, S, vel, vprod)


def _forward_kinematics_unrolled(module, q, v, support_velocity):
    """The same outward steps as the level route (:func:`_placement_step`, :func:`_twist_step`), link by link,
    with each joint's exact motion subspace."""
    t, par = module.topology, module.params
    dtype = q.dtype
    local = joint_placements(module, q)
    local_R, local_p = [l[0] for l in local], [l[1] for l in local]
    S = [kind.motion_subspace(q[qs], par.axis[i], par.axis2[i], par.pitch[i])
         for i, (kind, qs) in enumerate(zip(t.kinds, t.q_slices))]
    at_support = (jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype=dtype))
    if v is None:
        world, _ = outward(t, _placement_step, at_support, list(local))
        return TreeKinematics(local_R, local_p, [w[0] for w in world], [w[1] for w in world], S,
                              [None] * t.n_links, [None] * t.n_links)
    vJ = [matmul(S[i], v[vs]) for i, vs in enumerate(t.v_slices)]
    v_support = _zero6(dtype) if support_velocity is None else support_velocity
    world, _ = outward(t, _twist_step, at_support + (v_support,),
                       [(local_R[i], local_p[i], vJ[i]) for i in range(t.n_links)])
    vel = [w[2] for w in world]
    vprod = [_link_velocity_product(velocity_product(kind, q[qs], v[vs], par.axis[i], par.axis2[i], par.pitch[i]),
                                    vel[i], vJ[i])
             for i, (kind, qs, vs) in enumerate(zip(t.kinds, t.q_slices, t.v_slices))]
    return TreeKinematics(local_R, local_p, [w[0] for w in world], [w[1] for w in world], S, vel, vprod)


def link_accelerations(module, kin, qdd, support_acceleration=None):
    """Spatial accelerations of every link (link frames) for joint accelerations ``qdd``; gravity is not
    included (pass ``support_acceleration = [0; -g]`` for the fictitious-base trick):
    aᵢ = ᶦX_λ(i) a_λ(i) + Sᵢ q̈ᵢ + cᵢ (Featherstone Table 5.1), an outward sweep on ``kin``'s route."""
    t = module.topology
    dtype = qdd.dtype
    a_support = _zero6(dtype) if support_acceleration is None else support_acceleration
    if is_stacked(kin):
        own = matmul(kin.S.padded, link_coordinates(t, qdd)[:, :, None])[:, :, 0] + kin.velocity_product
        acc, _ = outward(t, _acceleration_step, a_support, (kin.local_R, kin.local_p, own))
        return acc
    acc, _ = outward(t, _acceleration_step, a_support,
                     [(kin.local_R[i], kin.local_p[i], matmul(kin.S[i], qdd[vs]) + kin.velocity_product[i])
                      for i, vs in enumerate(t.v_slices)])
    return acc


def _acceleration_step(a_parent, link):
    """aᵢ = ᶦX_λ(i) a_λ(i) + (Sᵢ q̈ᵢ + cᵢ) for one link (outward step)."""
    R, p, own = link
    return inv_act_motion(R, p, a_parent) + own, None


def frame_placement(module, kin, frame):
    """(R, p) of an operational point in the support frame."""
    t, par = module.topology, module.params
    f = t.frame_index(frame)
    link = t.frame_links[f]
    return compose(kin.world_R[link], kin.world_p[link], par.frame_R[f], par.frame_p[f])


def _express(reference, R_f, p_f, local_vec, world_vec_fn):
    if reference == "local":
        return local_vec
    if reference == "world_aligned":
        return jnp.concatenate([matmul(R_f, local_vec[:3]), matmul(R_f, local_vec[3:])])
    return world_vec_fn()


def _check_reference(reference):
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference frame {reference!r}; use one of {REFERENCES}")


def world_motion_subspaces(kin):
    """Stacked motion subspaces in Plücker coordinates at the support origin, (6, nv)."""
    if is_stacked(kin):
        return kin.S.in_frames(kin.world_R, kin.world_p)
    cols = [matmul(motion_transform(R, p), S) for R, p, S in zip(kin.world_R, kin.world_p, kin.S)]
    return jnp.concatenate(cols, axis=1)


def _ancestor_dofs(t, link):
    anc = set(t.ancestors(link))
    return np.array([d in anc for d in t.dof_links()], dtype=bool)


def frame_jacobian(module, q, frame, reference="world_aligned", kin=None):
    """Jacobian (6, nv) of an operational point: its twist is J v (see module docstring for
    ``reference``). For planar modules use :func:`task_jacobian` for the 3-row task-space form."""
    _check_reference(reference)
    t = module.topology
    kin = forward_kinematics(module, q) if kin is None else kin
    J_world = world_motion_subspaces(kin) * jnp.asarray(_ancestor_dofs(t, t.frame_links[t.frame_index(frame)]))
    if reference == "world":
        return J_world
    R_f, p_f = frame_placement(module, kin, frame)
    # shift the reference point to the frame origin: v_p = v_0 + ω × p = v_0 − p̃ ω
    J_wa = jnp.concatenate([J_world[:3], J_world[3:] - matmul(skew(p_f), J_world[:3])])
    if reference == "world_aligned":
        return J_wa
    return jnp.concatenate([matmul(R_f.T, J_wa[:3]), matmul(R_f.T, J_wa[3:])])


def frame_motion(module, kin, link_motions, frame, reference="world_aligned"):
    """A per-link motion vector field (twists, or accelerations at zero velocity) read at an operational
    point and expressed in ``reference``; ``world_aligned`` gives [ω; ṗ] of the point in support axes."""
    _check_reference(reference)
    t, par = module.topology, module.params
    f = t.frame_index(frame)
    m_local = inv_act_motion(par.frame_R[f], par.frame_p[f], link_motions[t.frame_links[f]])
    R_f, p_f = frame_placement(module, kin, frame)
    return _express(reference, R_f, p_f, m_local, lambda: act_motion(R_f, p_f, m_local))


def frame_velocity(module, kin, frame, reference="world_aligned"):
    """Twist of an operational point (``kin`` computed with v)."""
    return frame_motion(module, kin, kin.velocity, frame, reference)


def frame_acceleration(module, kin, link_acc, frame, reference="world_aligned"):
    """Time derivative of :func:`frame_velocity` in the same reference: the classical acceleration of the
    point for ``world_aligned``, the spatial acceleration for ``local`` and ``world``."""
    _check_reference(reference)
    t, par = module.topology, module.params
    f = t.frame_index(frame)
    link = t.frame_links[f]
    a_local = inv_act_motion(par.frame_R[f], par.frame_p[f], link_acc[link])
    R_f, p_f = frame_placement(module, kin, frame)
    if reference == "world_aligned":
        v_local = inv_act_motion(par.frame_R[f], par.frame_p[f], kin.velocity[link])
        classical = jnp.concatenate([a_local[:3], a_local[3:] + cross(v_local[:3], v_local[3:])])
        return jnp.concatenate([matmul(R_f, classical[:3]), matmul(R_f, classical[3:])])
    return _express(reference, R_f, p_f, a_local, lambda: act_motion(R_f, p_f, a_local))


def frame_bias_acceleration(module, q, v, frame, reference="world_aligned", support_velocity=None,
                            support_acceleration=None):
    """J̇ v of an operational point: its acceleration at zero joint acceleration (no gravity)."""
    kin = forward_kinematics(module, q, v, support_velocity)
    acc = link_accelerations(module, kin, jnp.zeros_like(v), support_acceleration)
    return frame_acceleration(module, kin, acc, frame, reference)


def task_rows(module):
    """Rows of a 6-D operational quantity that form the module's task space (all 6, or [ω_z, v_x, v_y]
    for planar modules, Bonaventura footnote 19)."""
    return np.arange(6) if not module.topology.planar else np.array(PLANAR_ROWS)


def task_jacobian(module, q, frames, reference="world_aligned", kin=None):
    """Stacked task-space Jacobians of several operational points, (len(frames)·d, nv), d = 6 or 3."""
    kin = forward_kinematics(module, q) if kin is None else kin
    rows = task_rows(module)
    return jnp.concatenate([frame_jacobian(module, q, f, reference, kin)[rows] for f in frames], axis=0)
