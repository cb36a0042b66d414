"""The full MRDS multibody model of the CKCM end-effector (Nguyen & Pooran 1989; issue 4, items 3b and 4),
built from ``CKCMParams`` and differentiable with respect to every parameter (θA, θB, masses, l_s, ...).

Mechanism (the same machine as ``shared/bench/README.md`` and ``params.nominal``): seven modules and six
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

Leg mass models (``LegInertia``, a pytree, so its numbers can be differentiated or randomised too):

- ``bench_legs`` (default, physical): ``shared/bench/README.md``.  The stationary part, mass m − m1, is a
  solid cylinder of length l_s and radius 0.03 m hinged at B_i, centroid l_s/2 from B_i; the moving part,
  mass m1, a solid cylinder of length 0.5 m and radius 0.02 m ending at the tip, centroid 0.25 m below it.
  Inertia of a solid cylinder about its centroid: I_t = m(3r² + L²)/12 across, I_a = m r²/2 along the axis.
- ``paper_legs``: the mass distribution behind the paper's potential energy (Nguyen & Pooran eq. 40-43).  Nguyen & Pooran eq. 40 puts the
  leg centroid at l_c = l_s/2 + (m1/2m) l_i, i.e. the first moment m l_c = m l_s/2 + (m1/2) l_i; two point
  masses reproduce it for every leg length: m − m1/2 on the stationary part at s = m l_s/(2m − m1) from
  B_i, and m1/2 at the tip.  With it the potential energies of the two models are equal, so their gravity
  terms agree to round-off (``tests/test_ckcm_multibody.py``).  No rigid pair of links reproduces Nguyen & Pooran eq. 40's
  kinetic energy as well: that is what the paper's model leaves out (``lagrangian`` docstring, and
  ``experiments/out/ckcm_reproduction.md`` for the numbers):

  * the leg is a point mass m at l_c: K_leg = ½ m (l_c² θ̇² + l̇_c²) (Nguyen & Pooran eq. 39).  The moving part really
    translates with the full l̇ (½ m1 l̇²: Nguyen & Pooran eq. 39 has ½ m d1² l̇² = ½ (m1²/4m) l̇², 18× less with Nguyen & Pooran eq. 58),
    and the spread of the two parts along the leg adds Σ m_j s_j² − m l_c² to the moment of inertia;
  * the leg's rotational inertia about its own centroid (zero for point masses, I_t for cylinders);
  * the azimuthal swing of the leg about the vertical through B_i (Nguyen & Pooran eq. 39 has only the elevation rate θ̇_i);
  * the payload's rotational energy is ½ Σ I_k ω_k² with the *base-frame* ω (exact only while the payload
    stays level or is spherical).
  On the paper's ellipse (a level translation) the last one vanishes; the first three change the inertial
  forces by tens of percent at 17 cm/s (``experiments/ckcm_reproduction.py``) and not the gravity terms.

State helpers: a payload motion (Φ, Φ̇, Φ̈) — the paper's Cartesian coordinates (pose x, y, z, α, β, γ
with Z-Y-X Euler angles, Nguyen & Pooran eq. 19-21) and their rates — gives the consistent system state and accelerations
of all seven modules by leg kinematics (``motion_from_pose``): every leg's joint angles follow from the
direction of B_i → A_i, its prismatic coordinate from the length (Nguyen & Pooran eq. 18), and their rates and accelerations
by forward-mode differentiation along the path.

Dynamics: ``actuator_forces`` (closed-chain inverse dynamics, ``mrds_jax.system.inverse_dynamics``: the six
prismatic forces and the 18 ball-joint forces that produce a prescribed payload motion, split like the
paper's Tables 1-2 into inertial, velocity-product and gravity parts), ``actuator_forces_along_path``, and
``simulate_tracking`` (forward dynamics, ``mrds_jax.system.forward_dynamics``, integrated by
``mrds_jax.integrate.rollout`` under a computed-torque controller or the open-loop inverse-dynamics forces).

Accuracy, measured (``tests/test_ckcm_multibody.py``, ``experiments/out/ckcm_reproduction.md``): in float64 the
inverse dynamics' actuator forces make Pinocchio's ``constraintDynamics`` reproduce the prescribed
accelerations to < 1e-8 (asserted; round-off level in practice); static forces equal the Lagrangian model's to
~1e-12 N with ``paper_legs``; the open-loop inverse-dynamics forces keep the payload on the 17 cm/s ellipse to
3.8e-9 m over one loop in RK4 with 160 steps (1.6e-9 m with 200; the error is RK4's, ∝ dt⁴).  float32 works:
actuator forces to 7e-7 relative at a random state.

Cost (2-core CPU, float64): tracing and compiling one closed-chain inverse dynamics takes ~15-20 s, a rollout
with a controller in the loop ~40-50 s (``XLA_FLAGS=--xla_backend_optimization_level=0``); evaluations then
take milliseconds.  Parameters, leg models, paths and controllers are pytree arguments, so one compilation
serves every design: use ``jitted_simulate`` and jit your own loops with the parameters as arguments.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import jax
import jax.numpy as jnp

from .. import contacts as C
from ..integrate import rollout
from ..model.tree import Module, Topology, TreeParams
from ..pytree import pytree_dataclass
from ..spatial import dense
from ..spatial.rotation import quat_to_rotation
from ..system import SystemState, build_system, forward_dynamics, inverse_dynamics
from .errors import CKCMInputError, SingularPoseWarning, WorkspaceError  # noqa: F401  (re-exported)
from .kinematics import (DEFAULT_MAX_CONDITION, angular_velocity_matrix, check_pose, home_pose, jacobian, rotation,
                         warn_if_singular)
from .lagrangian import ELLIPSE_SEMI_AXES, ForceSplit
from .params import CKCMParams, base_points, leg_mass_split, payload_points

LEG_NAMES = tuple(f"leg{i + 1}" for i in range(6))
PAYLOAD = "payload"
MODULE_NAMES = LEG_NAMES + (PAYLOAD,)
ACTUATED = {name: (2,) for name in LEG_NAMES}   # the prismatic joint of every leg (velocity index 2)

LEG_TOPOLOGY = Topology(link_names=("lower", "upper"), parents=(-1, 0),
                        joint_names=("universal", "prismatic"), joint_kinds=("universal", "prismatic"),
                        frame_names=("tip",), frame_links=(1,))
PAYLOAD_TOPOLOGY = Topology(link_names=("payload",), parents=(-1,), joint_names=("free",), joint_kinds=("free",),
                            frame_names=tuple(f"A{i + 1}" for i in range(6)), frame_links=(0,) * 6)


class CKCMStateError(CKCMInputError):
    """A system state that is not a CKCM state: wrong shapes, or leg tips away from their ball joints."""


# --- leg mass models -------------------------------------------------------------------------------------
@pytree_dataclass
class LegInertia:
    """Mass model of a leg: two rigid links on the leg axis; all six legs identical, or any leaf per leg with
    a leading axis of 6 (``CKCMParams.leg_masses``; ``one_leg`` picks leg i's).

    m_lower, s_lower   mass of the stationary part and its centroid's distance from B_i along the leg
    I_lower            (I_transverse, I_transverse, I_axial) about that centroid, leg axes
    m_upper, c_upper   mass of the moving part and its centroid's distance *below the tip* A_i
    I_upper            (I_transverse, I_transverse, I_axial) about that centroid
    """
    m_lower: jax.Array
    s_lower: jax.Array
    I_lower: jax.Array
    m_upper: jax.Array
    c_upper: jax.Array
    I_upper: jax.Array


def _cylinder(m, r, L):
    """Principal inertia (I_t, I_t, I_a) of a solid cylinder of mass m, radius r, length L about its
    centroid: I_t = m (3 r² + L²) / 12, I_a = m r² / 2."""
    It = m * (3 * r**2 + L**2) / 12
    return jnp.stack(jnp.broadcast_arrays(It, It, m * r**2 / 2), axis=-1)


def bench_legs(params: CKCMParams, r_lower=0.03, r_upper=0.02, upper_length=0.5) -> LegInertia:
    """The physical legs of ``shared/bench/README.md`` (module docstring): a cylinder of mass m − m1, length
    l_s, radius ``r_lower`` hinged at B_i; a cylinder of mass m1, length ``upper_length``, radius ``r_upper``
    ending at the tip.  Differentiable in ``params`` (m, m1, l_s) and the three numbers."""
    f = jnp.result_type(params.m)
    m, m1 = leg_mass_split(params)
    ml, mu = m - m1, m1
    L = jnp.asarray(upper_length, f)
    return LegInertia(m_lower=ml, s_lower=params.l_s / 2, I_lower=_cylinder(ml, jnp.asarray(r_lower, f), params.l_s),
                      m_upper=mu, c_upper=L / 2, I_upper=_cylinder(mu, jnp.asarray(r_upper, f), L))


def paper_legs(params: CKCMParams) -> LegInertia:
    """Point masses with the first moment of Nguyen & Pooran eq. 40-42 (module docstring): m − m1/2 at m l_s/(2m − m1) from
    B_i and m1/2 at the tip, no rotational inertia.  The potential energy then equals Nguyen & Pooran eq. 43 exactly."""
    m, m1 = leg_mass_split(params)
    z3 = jnp.zeros(jnp.shape(m) + (3,), jnp.result_type(params.m))
    return LegInertia(m_lower=m - m1 / 2, s_lower=m * params.l_s / (2 * m - m1),
                      I_lower=z3, m_upper=m1 / 2, c_upper=jnp.zeros_like(m), I_upper=z3)


LEG_MODELS = {"bench": bench_legs, "paper": paper_legs}


def leg_model(params: CKCMParams, legs="bench") -> LegInertia:
    """``legs`` as a ``LegInertia``: one already, or the name of a model in ``LEG_MODELS``."""
    if isinstance(legs, LegInertia):
        return legs
    if legs not in LEG_MODELS:
        raise CKCMInputError(f"unknown leg model {legs!r}; use a LegInertia or one of {sorted(LEG_MODELS)}")
    return LEG_MODELS[legs](params)


def check_legs(legs: LegInertia):
    """Raise ``CKCMInputError`` for a leg mass model that cannot be built (eager, concrete values only)."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(legs)):
        return legs
    v = {k: np.asarray(getattr(legs, k), float) for k in ("m_lower", "s_lower", "I_lower", "m_upper", "c_upper",
                                                            "I_upper")}
    for k in ("m_lower", "m_upper"):
        if not np.all(np.isfinite(v[k])) or np.any(v[k] <= 0):
            raise CKCMInputError(f"leg mass {k} must be finite and > 0, got {v[k]}")
    for k in ("I_lower", "I_upper"):
        if v[k].shape[-1:] != (3,) or not np.all(np.isfinite(v[k])) or np.any(v[k] < 0):
            raise CKCMInputError(f"leg inertia {k} must be three finite principal moments >= 0, got {v[k]}")
    for k in ("s_lower", "c_upper"):
        if not np.all(np.isfinite(v[k])):
            raise CKCMInputError(f"leg centroid distance {k} must be finite, got {v[k]}")
    if np.any(v["s_lower"] <= 0):
        raise CKCMInputError(f"s_lower = {v['s_lower']} must be > 0: a point mass at the universal joint B_i "
                             "leaves the leg's swing without inertia")
    return legs


# --- geometry --------------------------------------------------------------------------------------------
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


def one_leg(legs: LegInertia, i: int) -> LegInertia:
    """Leg ``i``'s mass model: ``legs`` itself when all six legs share it, else its i-th entry (per-leg
    masses, ``CKCMParams.leg_masses``: every leaf has a leading axis of 6)."""
    def pick(a, ndim):
        return a[i] if jnp.ndim(a) > ndim else a
    return LegInertia(pick(legs.m_lower, 0), pick(legs.s_lower, 0), pick(legs.I_lower, 1), pick(legs.m_upper, 0),
                      pick(legs.c_upper, 0), pick(legs.I_upper, 1))


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


# --- states from payload motion --------------------------------------------------------------------------
def euler_to_quat(pose):
    """Unit quaternion (w, x, y, z) of R_z(α) R_y(β) R_x(γ) (Nguyen & Pooran eq. 19): q_z(α) ⊗ q_y(β) ⊗ q_x(γ)."""
    ca, sa = jnp.cos(pose[3] / 2), jnp.sin(pose[3] / 2)
    cb, sb = jnp.cos(pose[4] / 2), jnp.sin(pose[4] / 2)
    cg, sg = jnp.cos(pose[5] / 2), jnp.sin(pose[5] / 2)
    return jnp.stack([ca * cb * cg + sa * sb * sg, ca * cb * sg - sa * sb * cg,
                      ca * sb * cg + sa * cb * sg, sa * cb * cg - ca * sb * sg])


def leg_coordinates(params: CKCMParams, pose):
    """Joint coordinates (6, 3) of the six legs that put every tip on its ball joint A_i at ``pose``:
    universal angles (a, b) with R_x(a) R_y(b) e_z = the leg direction in the leg frame, i.e.
    b = asin(n_x), a = atan2(−n_y, n_z), and the prismatic coordinate l_i − L_i (Nguyen & Pooran eq. 9-11)."""
    R, L = leg_frames(params)
    A = payload_points(params) @ rotation(pose).T + pose[:3]
    u = jnp.einsum("ikj,ik->ij", R, A - base_points(params))       # R_iᵀ (A_i − B_i)
    l = jnp.linalg.norm(u, axis=-1)
    n = u / l[:, None]
    return jnp.stack([jnp.arctan2(-n[:, 1], n[:, 2]), jnp.arcsin(n[:, 0]), l - L], axis=-1)


def payload_twist(pose, pose_rate):
    """Body twist [ω; v] (components in {A}) of the payload moving with Euler rates Φ̇: ω = Rᵀ V Φ̇ (Nguyen & Pooran eq. 32-34),
    v = Rᵀ (ẋ, ẏ, ż)."""
    Rt = rotation(pose).T
    return jnp.concatenate([Rt @ (angular_velocity_matrix(pose) @ pose_rate), Rt @ pose_rate[:3]])


def _pose_state(params, pose, pose_rate):
    legs_q, legs_v = jax.jvp(lambda x: leg_coordinates(params, x), (pose,), (pose_rate,))
    return legs_q, legs_v, jnp.concatenate([pose[:3], euler_to_quat(pose)]), payload_twist(pose, pose_rate)


def state_from_pose(params: CKCMParams, pose, pose_rate=None) -> SystemState:
    """The consistent ``SystemState`` of the system of ``build_ckcm_system`` with the payload at ``pose`` moving
    at ``pose_rate`` (default rest).  Jittable; use ``check_pose`` first for a clear error outside the
    workspace (``consistent_state`` does both)."""
    pose = jnp.asarray(pose)
    pose_rate = jnp.zeros_like(pose) if pose_rate is None else jnp.asarray(pose_rate, pose.dtype)
    lq, lv, pq, pv = _pose_state(params, pose, pose_rate)
    return SystemState(tuple(lq) + (pq,), tuple(lv) + (pv,))


def motion_from_pose(params: CKCMParams, pose, pose_rate, pose_acc):
    """(``SystemState``, q̈ per module) of the payload motion (Φ, Φ̇, Φ̈): the state of ``state_from_pose`` and
    the accelerations that keep every ball joint closed, by forward-mode differentiation along (Φ̇, Φ̈)."""
    pose, pose_rate, pose_acc = (jnp.asarray(x) for x in (pose, pose_rate, pose_acc))
    (lq, lv, pq, pv), (_, la, _, pa) = jax.jvp(lambda x, xd: _pose_state(params, x, xd), (pose, pose_rate),
                                               (pose_rate, pose_acc))
    return SystemState(tuple(lq) + (pq,), tuple(lv) + (pv,)), tuple(la) + (pa,)


def euler_from_rotation(R):
    """(α, β, γ) of R = R_z(α) R_y(β) R_x(γ) (Nguyen & Pooran eq. 19), |β| < 90°."""
    return jnp.stack([jnp.arctan2(R[1, 0], R[0, 0]), -jnp.arcsin(jnp.clip(R[2, 0], -1.0, 1.0)),
                      jnp.arctan2(R[2, 1], R[2, 2])])


def pose_from_state(state: SystemState):
    """(Φ, Φ̇) of the payload of a system state: position, Z-Y-X Euler angles, and their rates
    (Φ̇_rot = V_rot⁻¹ ω with ω = R ω_body, Nguyen & Pooran eq. 32-34)."""
    q, v = state.q[-1], state.v[-1]
    R = quat_to_rotation(q[3:])
    pose = jnp.concatenate([q[:3], euler_from_rotation(R)])
    Vr = angular_velocity_matrix(pose)[:, 3:]
    return pose, jnp.concatenate([R @ v[3:], dense.solve(Vr, R @ v[:3])])


def leg_lengths(params: CKCMParams, state: SystemState):
    """Leg lengths l_i = L_i + q_i[2] (6,) of a system state."""
    _, L = leg_frames(params)
    return L + jnp.stack([q[2] for q in state.q[:6]])


def closure_errors(params: CKCMParams, state: SystemState):
    """Distance (6,) between every leg tip and its ball joint on the payload, in metres (0 when consistent)."""
    R, L = leg_frames(params)
    B = base_points(params)
    tips = []
    for i in range(6):
        a, b, p = state.q[i]
        ca, sa, cb, sb = jnp.cos(a), jnp.sin(a), jnp.cos(b), jnp.sin(b)
        tips.append(B[i] + R[i] @ (jnp.stack([sb, -sa * cb, ca * cb]) * (L[i] + p)))
    q = state.q[-1]
    A = payload_points(params) @ quat_to_rotation(q[3:]).T + q[:3]
    return jnp.linalg.norm(jnp.stack(tips) - A, axis=-1)


def consistent_state(params: CKCMParams, pose, pose_rate=None, max_condition=DEFAULT_MAX_CONDITION):
    """``state_from_pose`` after ``check_pose`` (eager): raises ``WorkspaceError`` naming the violated
    conditions for a pose outside the workspace (legs beyond their stroke, ...), or
    ``SingularConfigurationError`` at a singular pose, instead of returning a state nobody can build."""
    pose = np.asarray(pose, dtype=float)
    check_pose(params, pose, max_condition=max_condition)
    if pose_rate is not None:
        pose_rate = np.asarray(pose_rate, dtype=float)
        if pose_rate.shape != (6,) or not np.all(np.isfinite(pose_rate)):
            raise WorkspaceError(f"pose_rate must be six finite numbers (ẋ, ẏ, ż, α̇, β̇, γ̇); got {pose_rate}")
    return _jitted_state()(params, jnp.asarray(pose), None if pose_rate is None else jnp.asarray(pose_rate))


@functools.lru_cache(maxsize=None)
def _jitted_state():
    return jax.jit(state_from_pose)


def check_ckcm_state(params: CKCMParams, state: SystemState, tol=1e-6):
    """Raise ``CKCMStateError`` when ``state`` is not a CKCM state: wrong shapes, or a leg tip more than
    ``tol`` metres from its ball joint (naming the legs).  Eager; returns the closure errors."""
    shapes = [(3, 3)] * 6 + [(7, 6)]
    if len(state.q) != 7 or len(state.v) != 7:
        raise CKCMStateError(f"a CKCM state has 7 modules ({', '.join(MODULE_NAMES)}); got {len(state.q)}")
    for name, q, v, (nq, nv) in zip(MODULE_NAMES, state.q, state.v, shapes):
        if np.shape(q) != (nq,) or np.shape(v) != (nv,):
            raise CKCMStateError(f"module {name}: q has shape {np.shape(q)}, v {np.shape(v)}; need ({nq},), ({nv},)")
    err = np.asarray(closure_errors(params, state))
    bad = [f"leg {i + 1}: {e:.3g} m" for i, e in enumerate(err) if not e <= tol]
    if bad:
        raise CKCMStateError(f"inconsistent CKCM state: leg tips away from their ball joints ({', '.join(bad)}; "
                             f"tol {tol:g} m). Build states with consistent_state / state_from_pose.")
    return err


# --- inverse dynamics --------------------------------------------------------------------------------------
def _actuator_total(system, params, pose, pose_rate, pose_acc):
    state, qdd = motion_from_pose(params, pose, pose_rate, pose_acc)
    return inverse_dynamics(system, state, qdd, ACTUATED)


def inverse_dynamics_at(params: CKCMParams, pose, pose_rate, pose_acc, legs="bench"):
    """Closed-chain inverse dynamics (``mrds_jax.system.inverse_dynamics``) of the payload motion (Φ, Φ̇, Φ̈):
    ``InverseDynamics`` with ``tau_actuated`` = the six prismatic forces (N, leg order; positive pushes the
    payload away from the base), ``F_c`` = the ball-joint forces, ``residual`` ≈ 0. Warns
    :class:`SingularPoseWarning` at a (near) singular pose given concrete inputs."""
    warn_if_singular(params, pose, "inverse_dynamics_at")
    return _actuator_total(build_ckcm_system(params, legs), params, pose, pose_rate, pose_acc)


def actuator_forces(params: CKCMParams, pose, pose_rate, pose_acc, legs="bench") -> ForceSplit:
    """Actuator forces of the multibody model split like the paper's Tables 1-2 (``lagrangian.ForceSplit``):
    with τ(Φ, Φ̇, Φ̈) the closed-chain inverse dynamics, gravity = τ(Φ, 0, 0), velocity products =
    τ(Φ, Φ̇, 0) − τ(Φ, 0, 0), inertial = τ(Φ, 0, Φ̈) − τ(Φ, 0, 0); exact split (τ = C⁻ᵀ(D Φ̈ + h + G)).
    Warns :class:`SingularPoseWarning` at a (near) singular pose given concrete inputs."""
    warn_if_singular(params, pose, "actuator_forces")
    system = build_ckcm_system(params, legs)
    rate, acc = jnp.asarray(pose_rate), jnp.asarray(pose_acc)
    z = jnp.zeros_like(rate)
    # the four evaluations in one vmap: the inverse dynamics is traced and compiled once
    g, vp, inertial, total = jax.vmap(lambda v, a: _actuator_total(system, params, pose, v, a).tau_actuated)(
        jnp.stack([z, rate, z, rate]), jnp.stack([z, z, acc, acc]))
    return ForceSplit(inertial - g, vp - g, g, total)


def cartesian_forces(params: CKCMParams, pose, split: ForceSplit) -> ForceSplit:
    """Generalized forces conjugate to Φ, F = Cᵀ τ (virtual work with l̇ = C Φ̇, Nguyen & Pooran eq. 26), of an actuator-force
    split: the quantities of Nguyen & Pooran eq. 45 (F_x, F_y, F_z, M_α, M_β, M_γ)."""
    CT = jacobian(params, pose).T
    return jax.tree_util.tree_map(lambda t: CT @ t, split)


def actuator_forces_along_path(params: CKCMParams, times, period, z=None, semi_axes=ELLIPSE_SEMI_AXES,
                               legs="bench", batch_size=None) -> ForceSplit:
    """``actuator_forces`` along ``EllipsePath`` (Nguyen & Pooran eq. 55) at ``times``: a ``ForceSplit`` of (len(times), 6)
    arrays, the multibody counterpart of ``lagrangian.actuator_forces_along_path`` (``jax.lax.map``)."""
    path = ellipse(params, period, z, semi_axes)
    legs = leg_model(params, legs)
    return jax.lax.map(lambda t: actuator_forces(params, *path(t), legs=legs), jnp.asarray(times),
                       batch_size=batch_size)


# --- paths -----------------------------------------------------------------------------------------------------
@pytree_dataclass
class EllipsePath:
    """The ellipse of Nguyen & Pooran eq. 55 as a pytree path t ↦ (Φ, Φ̇, Φ̈): x = c_x + a cos(2πt/T), y = c_y + b sin(2πt/T)
    at height z, level (constant angular rate; see ``lagrangian.ellipse_path``)."""
    period: jax.Array
    a: jax.Array
    b: jax.Array
    z: jax.Array
    center: jax.Array

    def __call__(self, t):
        w = 2 * jnp.pi / self.period
        s = w * t
        c, sn = jnp.cos(s), jnp.sin(s)
        o = jnp.zeros_like(s)
        q = jnp.stack([self.center[0] + self.a * c, self.center[1] + self.b * sn, o + self.z, o, o, o])
        qd = jnp.stack([-self.a * w * sn, self.b * w * c, o, o, o, o])
        qdd = jnp.stack([-self.a * w**2 * c, -self.b * w**2 * sn, o, o, o, o])
        return q, qd, qdd


def ellipse(params: CKCMParams, period, z=None, semi_axes=ELLIPSE_SEMI_AXES, center=(0.0, 0.0)) -> EllipsePath:
    """``EllipsePath`` of Nguyen & Pooran eq. 55 (semi-axes 5 and 2.5 cm) at height ``z`` (default ``params.z_nominal``)."""
    f = jnp.result_type(params.m)
    z = params.z_nominal if z is None else z
    return EllipsePath(*(jnp.asarray(x, f) for x in (period, semi_axes[0], semi_axes[1], z, center)))


@pytree_dataclass
class PointToPointPath:
    """A rest-to-rest move between two poses in ``duration`` seconds along a straight line in pose space with
    the minimum-jerk (quintic) timing s(τ) = 10τ³ − 15τ⁴ + 6τ⁵, τ = t/T clipped to [0, 1]:
    Φ = Φ₀ + s (Φ₁ − Φ₀), zero rate and acceleration at both ends (a pytree path t ↦ (Φ, Φ̇, Φ̈))."""
    start: jax.Array
    end: jax.Array
    duration: jax.Array

    @property
    def period(self):
        return self.duration

    def __call__(self, t):
        T = self.duration
        tau = jnp.clip(t / T, 0.0, 1.0)
        s = tau**3 * (10 - 15 * tau + 6 * tau**2)
        sd = 30 * tau**2 * (1 - tau)**2 / T
        sdd = 60 * tau * (1 - tau) * (1 - 2 * tau) / T**2
        d = self.end - self.start
        return self.start + s * d, sd * d, sdd * d


def point_to_point(start, end, duration, dtype=None) -> PointToPointPath:
    """``PointToPointPath`` from pose ``start`` to pose ``end`` (x, y, z, α, β, γ) in ``duration`` s."""
    f = jnp.result_type(float) if dtype is None else dtype
    return PointToPointPath(jnp.asarray(start, f), jnp.asarray(end, f), jnp.asarray(duration, f))


# --- forward simulation under tracking control ---------------------------------------------------------------
@pytree_dataclass
class Controller:
    """A payload-pose tracking law (all leaves are arrays, so one compiled simulation serves every law):

    kp, kd               PD gains per coordinate of Φ (1/s², 1/s)
    feedback_linearize   1: computed torque (inverse dynamics at the measured pose with the commanded
                         acceleration Φ̈_d + K_d ė + K_p e); 0: inverse dynamics along the desired path
    pd_force             1: add the Cartesian PD force C⁻ᵀ D₀ (K_p e + K_d ė), D₀ = diag(M, M, M, I_1, I_2, I_3)

    Use ``computed_torque``, ``pd_feedforward`` or ``open_loop`` to make one.
    """
    kp: jax.Array
    kd: jax.Array
    feedback_linearize: jax.Array
    pd_force: jax.Array


def _gains(omega, dtype):
    w = jnp.broadcast_to(jnp.asarray(omega, dtype), (6,))
    return w**2, 2 * w


def computed_torque(omega=20.0, dtype=float) -> Controller:
    """Computed torque: closed-chain inverse dynamics at the measured payload pose and rate with the
    commanded acceleration Φ̈_c = Φ̈_d + K_d ė + K_p e, gains critically damped at bandwidth ``omega`` (rad/s):
    with an exact model every pose error obeys ë + 2ω ė + ω² e = 0."""
    kp, kd = _gains(omega, dtype)
    one = jnp.ones((), kp.dtype)
    return Controller(kp, kd, one, 0 * one)


def pd_feedforward(omega=20.0, dtype=float) -> Controller:
    """Feedforward of the inverse dynamics along the *desired* path plus a Cartesian PD force mapped to the
    actuators, τ = τ_ID(Φ_d, Φ̇_d, Φ̈_d) + C(Φ)⁻ᵀ D₀ (K_p e + K_d ė) (``Controller``)."""
    kp, kd = _gains(omega, dtype)
    one = jnp.ones((), kp.dtype)
    return Controller(kp, kd, 0 * one, one)


def open_loop(dtype=float) -> Controller:
    """The inverse-dynamics forces of the desired path, applied without feedback: τ(t) = τ_ID(Φ_d(t), ...)."""
    z = jnp.zeros(6, jnp.dtype(dtype))
    return Controller(z, z, z[0], z[0])


def payload_pose_error(pose_d, pose):
    """Φ_d − Φ with the Euler-angle differences wrapped to (−π, π]."""
    e = pose_d - pose
    return e.at[3:].set(jnp.arctan2(jnp.sin(e[3:]), jnp.cos(e[3:])))


def tracking_forces(system, params: CKCMParams, state: SystemState, t, path, controller: Controller):
    """Actuator forces (6,) the ``controller`` commands at ``state`` and time ``t`` to follow ``path``
    (a callable t ↦ (Φ_d, Φ̇_d, Φ̈_d)).  One closed-chain inverse dynamics per call (``Controller``): at
    (Φ, Φ̇, Φ̈_c) for computed torque — the legs' joint states are taken from the measured payload pose by leg
    kinematics — or at the desired (Φ_d, Φ̇_d, Φ̈_d)."""
    pose_d, rate_d, acc_d = path(t)
    pose, rate = pose_from_state(state)
    e, ed = payload_pose_error(pose_d, pose), rate_d - rate
    lin = controller.feedback_linearize > 0.5
    pose_c, rate_c = jnp.where(lin, pose, pose_d), jnp.where(lin, rate, rate_d)
    acc_c = acc_d + controller.feedback_linearize * (controller.kd * ed + controller.kp * e)
    tau = _actuator_total(system, params, pose_c, rate_c, acc_c).tau_actuated
    D0 = jnp.concatenate([jnp.broadcast_to(params.M, (3,)), params.I_payload])
    F = D0 * (controller.kp * e + controller.kd * ed)
    return tau + controller.pd_force * dense.solve(jacobian(params, pose).T, F)


class TrackingResult(NamedTuple):
    """Output of ``simulate_tracking``: times (n,), the ``Trajectory`` of module states, payload poses Φ (n, 6) and their
    desired values (n, 6), position and orientation errors (n,) (m: norm of the position error; rad: norm of
    the Euler-angle error), ball-joint closure errors (n, 6) in m, the actuator forces at the stored states
    (n, 6; only with ``record_forces=True``, else None), and the step where the state first became
    non-finite (−1: never)."""
    t: jax.Array
    trajectory: object
    pose: jax.Array
    pose_desired: jax.Array
    position_error: jax.Array
    orientation_error: jax.Array
    closure_error: jax.Array
    forces: object
    first_nonfinite: jax.Array


def _taus(tau_a, dtype):
    z2 = jnp.zeros(2, dtype)
    return tuple(jnp.concatenate([z2, tau_a[i:i + 1]]) for i in range(6)) + (jnp.zeros(6, dtype),)


def default_integrator():
    """"rk4_compact" (RK4 with its stages in a ``lax.scan``: the closed-chain dynamics is traced and compiled
    once instead of four times) when ``mrds_jax.integrate`` has it, else "rk4"."""
    from ..integrate import INTEGRATORS
    return "rk4_compact" if "rk4_compact" in INTEGRATORS else "rk4"


def simulate_tracking(params: CKCMParams, path, state0: SystemState, dt, n_steps,
                      controller: Controller | None = None, legs="bench", decimation=1, integrator=None, t0=0.0,
                      model_params: CKCMParams | None = None, model_legs=None,
                      record_forces=False) -> TrackingResult:
    """Forward simulation of the CKCM under a tracking ``controller`` (default ``computed_torque()``).

    The plant is ``forward_dynamics`` of ``build_ckcm_system(params, legs)``, integrated by
    ``mrds_jax.integrate.rollout`` (``integrator``: default ``default_integrator()``); the actuator forces of
    ``tracking_forces`` are recomputed at every integrator stage (a zero-order hold would spoil RK4's order).
    ``path``: a pytree callable t ↦ (Φ, Φ̇, Φ̈), e.g. ``ellipse(...)``; ``state0``: e.g.
    ``state_from_pose(params, *path(0)[:2])`` (on the path) or any consistent state.  ``model_params`` /
    ``model_legs``: the controller's model when it differs from the plant (robustness studies).
    Pure and jittable (``n_steps``, ``decimation``, ``integrator``, ``record_forces`` static; see
    ``jitted_simulate``); no Python control flow on values, so one compilation serves every controller.
    """
    f = jnp.result_type(params.m)
    controller = computed_torque(dtype=f) if controller is None else controller
    integrator = default_integrator() if integrator is None else integrator
    plant = build_ckcm_system(params, legs)
    mparams = params if model_params is None else model_params
    model = plant if model_params is None and model_legs is None else build_ckcm_system(
        mparams, legs if model_legs is None else model_legs)

    def control(q, v, t):
        return tracking_forces(model, mparams, SystemState(tuple(q), tuple(v)), t, path, controller)

    def acceleration(q, v, t):
        return forward_dynamics(plant, SystemState(tuple(q), tuple(v)), _taus(control(q, v, t), f), t).qdd

    traj = rollout(plant.modules, acceleration, state0.q, state0.v, dt, n_steps, decimation, integrator, t0)

    def observe(q, v, t):
        state = SystemState(tuple(q), tuple(v))
        pose, _ = pose_from_state(state)
        e = payload_pose_error(path(t)[0], pose)
        return pose, path(t)[0], jnp.linalg.norm(e[:3]), jnp.linalg.norm(e[3:]), closure_errors(params, state)

    obs = jax.lax.map(lambda x: observe(*x), (traj.q, traj.v, traj.t))
    forces = jax.lax.map(lambda x: control(*x), (traj.q, traj.v, traj.t)) if record_forces else None
    return TrackingResult(traj.t, traj, *obs, forces, traj.first_nonfinite)


@functools.lru_cache(maxsize=None)
def jitted_simulate(n_steps, decimation=1, integrator=None, record_forces=False):
    """A cached ``jax.jit`` of ``simulate_tracking`` for given static settings, called as
    ``jitted_simulate(n)(params, path, state0, dt, controller, legs)`` with ``legs`` a ``LegInertia``
    (e.g. ``bench_legs(params)``): every controller, path, parameter set and step size reuses it."""
    def run(params, path, state0, dt, controller, legs):
        return simulate_tracking(params, path, state0, dt, n_steps, controller, legs, decimation, integrator,
                        record_forces=record_forces)
    return jax.jit(run)


def check_simulation(result: TrackingResult, dt=None, closure_tol=1e-6):
    """Raise ``SimulationError`` (``mrds_jax.integrate``) naming the step where the state became NaN/inf, or
    ``CKCMStateError`` naming the time and leg where a ball joint opened by more than ``closure_tol`` m
    (the rollout has no constraint stabilisation: reduce dt).  Eager; returns ``result``."""
    from ..integrate import check_trajectory
    check_trajectory(result.trajectory, dt)
    err = np.asarray(result.closure_error)
    if err.ndim == 2 and err.size and not np.nanmax(err) <= closure_tol:
        k, i = np.unravel_index(np.nanargmax(err), err.shape)
        raise CKCMStateError(f"ball joint {i + 1} opened by {err[k, i]:.3g} m at t = {float(result.t[k]):.6g} s "
                             f"(tol {closure_tol:g} m): the step is too large for the motion")
    return result


__all__ = ["LEG_NAMES", "PAYLOAD", "MODULE_NAMES", "ACTUATED", "LegInertia", "bench_legs", "paper_legs",
           "LEG_MODELS", "leg_model", "check_legs", "leg_frames", "leg_module", "payload_module", "ball_joints",
           "build_ckcm_system", "euler_to_quat", "leg_coordinates", "payload_twist", "state_from_pose",
           "motion_from_pose", "euler_from_rotation", "pose_from_state", "leg_lengths", "closure_errors",
           "consistent_state", "check_ckcm_state", "CKCMStateError", "SingularPoseWarning", "warn_if_singular",
           "inverse_dynamics_at", "actuator_forces",
           "cartesian_forces", "actuator_forces_along_path", "EllipsePath", "ellipse", "PointToPointPath",
           "point_to_point", "Controller",
           "computed_torque", "pd_feedforward", "open_loop", "payload_pose_error", "tracking_forces",
           "TrackingResult", "default_integrator", "simulate_tracking", "jitted_simulate", "check_simulation"]
