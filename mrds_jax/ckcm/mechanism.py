"""The CKCM end-effector as an MRDS ``System``, built from ``CKCMParams`` and differentiable with respect to
every parameter (θA, θB, masses, l_s, ...).

Mechanism (the same machine as the benchmarks' MJCF model and ``params.nominal``): seven modules and six
contacts, solved by the project's closed-chain machinery (``mrds_jax.system``, Bonaventura's MRDS):

- ``leg1`` ... ``leg6``: a U-P-S leg from the base: a universal joint at B_i (two revolutes, first about
  the leg frame's x axis, then about the once-rotated y axis), a prismatic joint along the leg (leg frame
  z), and the operational point ``tip`` at the leg's end.  The leg frame sits at B_i with z along the
  nominal leg B_i → A_i (payload at the home pose) and x horizontal (x = normalize(e_z × u)).  The
  prismatic coordinate is 0 at the nominal length L_i (so the leg length is l_i = L_i + q_i[2]).
  The six legs share one topology, so ``build_system`` stacks and ``vmap``s them.
- ``payload``: a free body (q = [x, y, z, w, q_x, q_y, q_z] of frame {A} in {B}, v = body twist
  [ω; v]), mass M, principal inertia diag(I_payload) about its centroid (the origin of {A}), operational
  points ``A1`` ... ``A6`` at ᴬa_i (Nguyen & Pooran eq. 3).
- contacts ``ball1`` ... ``ball6``: spherical (n_c = 3), E = leg tip, P = payload point A_i — the ball
  joints of the paper.  24 coordinates, 18 constraints, 6 degrees of freedom, 6 actuators (the prismatic
  joints, velocity index 2 of every leg: ``ACTUATED``).
- gravity −g e_z in {B} (= the world).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .. import contacts as C
from ..model.tree import Module, Topology, TreeParams
from ..system import build_system
from .kinematics import home_pose
from .legs import LegInertia, check_legs, leg_model, one_leg
from .params import CKCMParams, base_points, payload_points

LEG_NAMES = tuple(f"leg{i + 1}" for i in range(6))
PAYLOAD = "payload"
MODULE_NAMES = LEG_NAMES + (PAYLOAD,)
ACTUATED = {name: (2,) for name in LEG_NAMES}   # the prismatic joint of every leg (velocity index 2)

LEG_TOPOLOGY = Topology(link_names=("lower", "upper"), parents=(-1, 0),
                        joint_names=("universal", "prismatic"), joint_kinds=("universal", "prismatic"),
                        frame_names=("tip",), frame_links=(1,))
PAYLOAD_TOPOLOGY = Topology(link_names=("payload",), parents=(-1,), joint_names=("free",), joint_kinds=("free",),
                            frame_names=tuple(f"A{i + 1}" for i in range(6)), frame_links=(0,) * 6)


def leg_frames(params: CKCMParams):
    """(R_i, L_i): the leg frames at B_i (6, 3, 3; columns x, y, z in {B}) and the nominal leg lengths (6,)
    at the home pose (module docstring).  The prismatic coordinate of leg i is l_i − L_i."""
    A_home = payload_points(params) + home_pose(params)[:3]
    d = A_home - base_points(params)
    L = jnp.linalg.norm(d, axis=-1)
    z = d / L[:, None]
    ez = jnp.zeros_like(z).at[:, 2].set(1.0)
    x = jnp.cross(ez, z)
    x = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    y = jnp.cross(z, x)
    return jnp.stack([x, y, z], axis=-1), L


def leg_module(params: CKCMParams, legs: LegInertia, i: int) -> Module:
    """Module ``leg{i+1}`` (U-P leg with its ``tip``), parameters as arrays built from ``params``/``legs``
    (jittable and differentiable: no numpy on values)."""
    legs = one_leg(legs, i)
    R, L = leg_frames(params)
    B = base_points(params)
    f = R.dtype
    eye, o3 = jnp.eye(3, dtype=f), jnp.zeros(3, f)
    ex, ey, ez = eye
    tp = TreeParams(
        joint_R=jnp.stack([R[i], eye]), joint_p=jnp.stack([B[i], jnp.zeros(3, f).at[2].set(L[i])]),
        axis=jnp.stack([ex, ez]), axis2=jnp.stack([ey, ey]), pitch=jnp.zeros(2, f),
        mass=jnp.stack([legs.m_lower, legs.m_upper]).astype(f),
        com=jnp.stack([o3.at[2].set(legs.s_lower), o3.at[2].set(-legs.c_upper)]),
        inertia=jnp.stack([jnp.diag(legs.I_lower), jnp.diag(legs.I_upper)]).astype(f),
        frame_R=eye[None], frame_p=o3[None], gravity=o3.at[2].set(-params.g), armature=jnp.zeros(LEG_TOPOLOGY.nv, f))
    return Module(params=tp, topology=LEG_TOPOLOGY)


def payload_module(params: CKCMParams) -> Module:
    """Module ``payload``: a free body of mass M, inertia diag(I_payload) at the origin of {A}, points A1..A6."""
    a = payload_points(params)
    f = a.dtype
    eye, o3 = jnp.eye(3, dtype=f), jnp.zeros(3, f)
    tp = TreeParams(
        joint_R=eye[None], joint_p=o3[None], axis=eye[None, 0], axis2=eye[None, 1], pitch=jnp.zeros(1, f),
        mass=jnp.reshape(params.M, (1,)).astype(f), com=o3[None], inertia=jnp.diag(params.I_payload)[None].astype(f),
        frame_R=jnp.broadcast_to(eye, (6, 3, 3)), frame_p=a, gravity=o3.at[2].set(-params.g),
        armature=jnp.zeros(PAYLOAD_TOPOLOGY.nv, f))
    return Module(params=tp, topology=PAYLOAD_TOPOLOGY)


def build_ckcm_system(params: CKCMParams, legs="bench"):
    """The CKCM end-effector as an MRDS ``System`` (module docstring): legs ``leg1..6``, ``payload``,
    spherical contacts ``ball1..6``.  ``legs``: a ``LegInertia`` or "bench" / "paper".  Works inside ``jit``
    and ``grad`` (params traced); concrete leg masses are checked (``check_legs``)."""
    legs = check_legs(leg_model(params, legs))
    modules = [leg_module(params, legs, i) for i in range(6)] + [payload_module(params)]
    return build_system(dict(zip(MODULE_NAMES, modules)), ball_joints(jnp.result_type(params.m).name))


@functools.lru_cache(maxsize=None)
def ball_joints(dtype="float64"):
    """The six spherical contacts ``ball{i}`` (E = ``leg{i}`` tip, P = payload point ``A{i}``): constant
    bases, built once per dtype with concrete arrays (so ``build_ckcm_system`` works inside ``jit``)."""
    with jax.ensure_compile_time_eval():
        return tuple(C.spherical(f"ball{i + 1}", (LEG_NAMES[i], "tip"), (PAYLOAD, f"A{i + 1}"), dtype=jnp.dtype(dtype))
                     for i in range(6))


__all__ = ["LEG_NAMES", "PAYLOAD", "MODULE_NAMES", "ACTUATED", "LEG_TOPOLOGY", "PAYLOAD_TOPOLOGY", "leg_frames",
           "leg_module", "payload_module", "build_ckcm_system", "ball_joints"]
