"""MJCF import with closed loops: :func:`load_mjcf` turns a MuJoCo model into a :class:`~mrds_jax.system.System`.

MuJoCo's own compiler is the source of truth: the file (or XML string) is compiled by the ``mujoco`` package
and everything is read from the compiled ``MjModel`` — body frames (``body_pos``/``body_quat``), masses and
inertias (``body_mass``/``body_ipos``/``body_iquat``/``body_inertia``, including those MuJoCo computes from
geoms), joint types, axes, positions and reference angles (``jnt_*``, ``qpos0``), armature (``dof_armature``), gravity,
equalities.

Mapping:

* **Modules**: one per kinematic tree of MuJoCo (``body_treeid``: the moving bodies hanging from the world
  through one moving root). Module and link names are MuJoCo body names (``body<id>`` when unnamed).
  Bodies without joints are merged into the moving body they are welded to (inertias summed); bodies
  welded to the world are the fixed ground.
* **Joints**: hinge → revolute, slide → prismatic, ball → spherical (quaternion w, x, y, z, body-frame
  angular velocity, as MuJoCo), free → free (root bodies only). A link frame is the MuJoCo body frame moved to
  the joint's ``pos`` (our joints turn about the link origin); hinge and slide ``ref`` values are folded into the
  joint placement, so our q equals MuJoCo's qpos. **Several joints on one body** (any hinges and slides, at any
  ``pos``, with ``ref``; a ball after them or slides after a ball — MuJoCo refuses a rotation after a ball)
  compose as MuJoCo composes them, in order, each about its own anchor in the body frame (``mj_kinematics``):
  each becomes one of our joints on a chain of massless links named ``<body>:<joint>``, the last link (named as
  the body) carrying the body's mass, so every joint keeps its name, limits, armature and actuators. Two
  hinges through one point without ``ref`` or limits become one universal joint (one link; the native CKCM
  build's legs) — MuJoCo applies them in order, the second about the once-rotated axis, as ours.
* **Operational points**: every body (named as the body; merged bodies on their owner) and every site
  (named as the site, or ``site:<name>`` when a body already has that name in the module).
* **Contacts** from ``<equality>`` (named as the equality, ``equality<k>`` when unnamed): ``connect`` →
  :func:`~mrds_jax.contacts.spherical` (E on body1/site1, P on body2/site2), ``weld`` →
  :func:`~mrds_jax.contacts.weld` (E = body1's frame at the weld point turned by ``relpose``, or site1's
  frame; P = body2's frame at the anchor, or site2's frame); ``joint`` with one hinge or slide joint (joint2
  absent, a lock) → a contact between the joint's two sides that constrains only its axis. A side on the
  fixed ground becomes the contact's ground frame. MuJoCo's constraints are soft (``solref``/``solimp``);
  ours are exact, so those parameters (and a weld's positive ``torquescale``, a weight of the soft residual)
  have no counterpart and are not used.
* **Joint couplings** (``System.couplings``, :mod:`mrds_jax.contacts.coupling`): ``joint`` equalities with two
  hinges or slides and a non-constant ``polycoef`` (q₁ − q₁₀ = P(q₂ − q₂₀), q₀ = ``qpos0``) and ``tendon``
  equalities on fixed tendons (L₁ − L₁₀ = P(L₂ − L₂₀), L = Σ coef·qpos, L₀ = ``tendon_length0``; one tendon:
  L₁ − L₁₀ = polycoef[0]), named as the equality; the joints may lie in different trees. They are joint-space
  rows of the general path's constraint solve (:mod:`mrds_jax.system.couplings`), exact like the contacts.

A joint lock holds the joint's velocity at zero; its position target (``ref + polycoef[0]``, MuJoCo's
``qpos − ref = polycoef[0]``) is where the lock's pose error vanishes (used by projection and stabilisation).

* **Armature** (``dof_armature``, from the joint's ``armature`` or its class default) → the module's
  ``armature`` (rotor inertia on the diagonal of H, as MuJoCo's ``qM``). On a free joint's linear degrees of
  freedom MuJoCo's armature multiplies the world-frame velocity, ours (and Pinocchio's) the body-frame one:
  the same H, but MuJoCo's has no Coriolis term armature·ω×v; a warning says so.

* **Force elements** (``return_forces=True``): joint ``stiffness`` about ``springref`` (``qpos_spring``) and
  ``damping`` → :class:`~mrds_jax.system.JointSpringDamper` per module (MuJoCo's ``qfrc_passive``: spring
  and damper); fixed tendons (joint wraps on hinges and slides) with ``stiffness``/``damping`` →
  :class:`~mrds_jax.system.TendonSpringDamper` (``tendon:<name>``; ``springlength`` a rest length or a dead band);
  actuators (``motor``, ``position``, ``velocity``, ``intvelocity``, ``general`` with fixed or affine gain and bias)
  on a hinge, slide, ball (three gear components) or free joint (six), through ``joint`` or ``jointinparent``, or
  a fixed tendon, with activation dynamics
  none, ``integrator``, ``filter`` or ``filterexact`` (``actrange``, ``actearly``) → one
  :class:`~mrds_jax.system.Actuators` (:mod:`mrds_jax.system.actuation`: ``gear``, ``ctrlrange`` clamping unless
  disabled, ``forcerange``, tendons' and joints' ``actuatorfrcrange``; MuJoCo's ``qfrc_actuator``, its
  activations carried by ``simulate``'s contact step). Actuators of a group disabled by ``actuatorgroupdisable``
  exert no force in MuJoCo and are left out.

* **Tendon limits** of fixed tendons (``tendon_range`` where ``limited``) → ``System.tendon_limits``, two one-sided
  rows each in ``simulate``'s contact step (hard, where MuJoCo's are soft).

* **Collision geometry** (``return_collision=True``: a :class:`~mrds_jax.collision.CollisionModel` comes
  last): geoms of type plane, sphere, capsule, ellipsoid, cylinder, box and mesh (by its convex hull,
  :func:`mesh_hull_vertices`) (``geom_type``, ``geom_size``; ``geom_pos``/
  ``geom_quat`` relative to their body, whose operational point they ride on; on bodies welded to the world they
  are ground geoms at their world pose), ``geom_contype``/``geom_conaffinity``, sliding friction
  ``geom_friction[0]`` and ``geom_priority`` (MuJoCo's mixing), explicit ``<pair>``s (``pair_geom1/2``,
  ``pair_friction[0]``), ``<exclude>``s (``exclude_signature``: MuJoCo's bodies, so an exclude of a body merged
  into a link excludes only that body's geoms), the ``filterparent`` flag, and ``<option><flag
  contact="disable"/>`` (no pairs). Geoms with contype = conaffinity = 0 that no ``<pair>`` names are visual
  only and skipped silently; height fields and SDFs are counted by kind in a
  :class:`~mrds_jax.collision.CollisionWarning` and left out (with the pairs that name them), as are pairs of
  kinds the narrow phase does not collide. MuJoCo's ``margin``/``gap``, ``solref``/``solimp``, torsional and
  rolling friction have no counterpart (the contacts are hard) and are not read. Restitution is 0.

* **Joint limits** of hinges and slides (``jnt_range`` where ``limited``) → ``Topology.joint_limits``, enforced by
  ``simulate``'s contact step; cone limits of ball joints (``jnt_range[1]``, the largest rotation angle) →
  ``Topology.cone_limits``, enforced by the same step (one row per joint,
  :func:`~mrds_jax.system.timestepping.cone_gap_and_row`).

Not modelled, and said so (``UserWarning`` unless stated): in one warning, with what the simulation does without
each, the actuators not read (muscles, site, body and slider-crank transmissions, PID and DC-motor types, several
controls, delays, actuator damping or armature, plugins: left out), spatial tendons' stiffness, damping and limits,
tendon friction loss, armature and nonlinear stiffness or damping (and, without ``return_forces``, the actuators
and tendon spring-dampers themselves, as not applied); joint friction loss, sensors,
gravity compensation, fluid forces (density, viscosity, wind), mocap bodies (kept fixed where the file puts
them: they and the bodies welded to them are ground, their geoms ground geoms), inactive or disabled equalities
(skipped). ``collision=False`` leaves the geoms' contacts out as asked, without a warning. Errors (``ValueError`` naming the element): ``joint``
equalities on joints other than hinges and slides (a universal joint's hinges included), ``tendon`` equalities on
spatial tendons, equality ``flex``/``distance``, flexes, a free joint below a moving body. Not physics, so not
read: visual elements. The time step and integrator come with the mapping (``mapping.timestep``,
``mapping.integrator``: ``simulate`` takes dt as an argument), and an integrator other than what runs is named in a
warning at load (:func:`integrator_note`: MuJoCo's ``implicit`` and ``implicitfast`` treat damping implicitly, ours
explicitly). **Keyframes** (``<key>``: ``qpos``, ``qvel``, ``ctrl``) come with the mapping:
``mapping.keyframe_state("home", system)`` is the key's state made consistent (projected onto the loops,
couplings, joint limits and out of penetration by :func:`~mrds_jax.system.make_consistent`) and
``mapping.keyframe_forces("home", forces)`` the force elements with the key's ``ctrl`` on the actuators; a key's
``act`` and ``time`` are not read.

State conversions (free joints: MuJoCo's qvel is [v_world; ω_body], ours [ω_body; v_body]) come with
``load_mjcf(..., return_mapping=True)`` as an :class:`MjcfMapping`.
"""
import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..validation import ArgumentError, ModelError, UnknownNameError, did_you_mean
from ..model.builder import ModuleBuilder
from .mass import check_mass_matrix


@dataclass(frozen=True)
class MjcfMapping:
    """Where each module's coordinates sit in MuJoCo's qpos/qvel, and the conversions between the two.

    ``qpos_index[k]``/``dof_index[k]``: integer arrays into MuJoCo's qpos/qvel of module k's q and v (in
    order). ``free[k]``: (q offset, v offset) of module k's free joints. ``qpos0``: MuJoCo's reference
    configuration (where body-based ``connect``/``weld`` anchors were computed: a consistent state).
    ``keyframes``: the file's ``<key>``s as (name, qpos, qvel, ctrl), unnamed ones as ``key<k>``; ``constrained``:
    whether the file closes loops or couples joints (active equalities), so that a keyframe needs projecting onto
    them. ``actuator_names``: MuJoCo's actuators in its ctrl order (unnamed ones ``actuator<u>``), by which a key's
    ctrl reaches the :class:`~mrds_jax.system.Actuators` (:meth:`keyframe_forces`). ``timestep`` and
    ``integrator``: the file's ``<option timestep integrator>`` (MuJoCo's names: "Euler", "RK4", "implicit",
    "implicitfast"), to pass on as ``simulate``'s dt; what runs instead of the integrator is named at load
    (:func:`load_mjcf`)."""
    module_names: tuple
    qpos_index: tuple
    dof_index: tuple
    free: tuple
    qpos0: np.ndarray
    keyframes: tuple = ()
    constrained: bool = False
    actuator_names: tuple = ()
    timestep: float = 0.002
    integrator: str = "Euler"

    def keyframe(self, key):
        """(qpos, qvel) of keyframe ``key`` (its name or index); UnknownNameError listing the keyframes otherwise."""
        names = [k[0] for k in self.keyframes]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -len(names) <= key < len(names):
                raise UnknownNameError(f"keyframe index {key} out of range: the file has {len(names)} keyframes "
                                       f"{names}")
            return self.keyframes[key][1:3]
        if key not in names:
            raise UnknownNameError(f"no keyframe named {key!r}; the file's keyframes are {names}"
                                   f"{did_you_mean(key, names)}")
        return self.keyframes[names.index(key)][1:3]

    def keyframe_ctrl(self, key):
        """MuJoCo's ``key_ctrl`` of keyframe ``key`` (name or index), in MuJoCo's actuator order
        (``actuator_names``)."""
        self.keyframe(key)                                  # the named error for an unknown key
        names = [k[0] for k in self.keyframes]
        return self.keyframes[key if isinstance(key, (int, np.integer)) else names.index(key)][3]

    def keyframe_forces(self, key, forces):
        """``forces`` (``load_mjcf(..., return_forces=True)``'s) with every :class:`~mrds_jax.system.Actuators`
        driven by keyframe ``key``'s ctrl (matched by actuator name; :func:`~mrds_jax.system.with_control`): a
        position-controlled robot then holds the key's pose, as MuJoCo's ``mj_resetDataKeyframe`` sets it. Actuators
        the loader left out (named at load) take no part."""
        from ..system import Actuators, with_control
        ctrl = dict(zip(self.actuator_names, np.asarray(self.keyframe_ctrl(key), dtype=float)))
        out = []
        for f in forces:
            if isinstance(f, Actuators):
                missing = [n for n in f.actuator_names if n not in ctrl]
                if missing:
                    raise UnknownNameError(f"keyframe {key!r}: actuators {missing} are not in the file's ctrl "
                                           f"({list(self.actuator_names)})")
                f = with_control(f, np.array([ctrl[n] for n in f.actuator_names]))
            out.append(f)
        return tuple(out)

    def keyframe_state(self, key, system=None, iterations=20, tol=1e-9):
        """The :class:`~mrds_jax.system.SystemState` of the file's keyframe ``key`` (name or index: MuJoCo's
        ``key_qpos``, ``key_qvel``; its ``ctrl`` through :meth:`keyframe_forces`, its ``act``/``time`` are not
        read), made consistent for ``system``
        when given: :func:`~mrds_jax.system.make_consistent` projects it onto the loops, couplings, joint limits
        and, with collision, out of penetration (MuJoCo starts a key as written and lets its soft constraints pull
        it together; our constraints are exact, so a start must satisfy them). ``system`` is required when the file
        has loops (``constrained``); ModelError when the projection leaves a residual above ``tol``."""
        qpos, qvel = self.keyframe(key)
        state = self.state(qpos, qvel)
        if system is None:
            if self.constrained:
                raise ArgumentError(f"keyframe {key!r}: the model has loops or joint couplings; pass the system, "
                                    f"mapping.keyframe_state({key!r}, system), to project the keyframe onto them")
            return state
        if not (system.contacts or system.couplings or getattr(system, "collision", None)
                or any(getattr(m.topology, "joint_limits", ()) for m in system.modules)):
            return state
        from ..system import make_consistent
        state = jax.tree.map(lambda x: jnp.asarray(x, dtype=system.modules[0].params.mass.dtype), state)
        state, rp, rv = jax.jit(make_consistent, static_argnames="iterations")(system, state, iterations=iterations)
        if not (float(rp) <= tol and float(rv) <= tol):
            raise ModelError(f"keyframe {key!r}: projecting it onto the constraints left residuals {float(rp):.3g} "
                             f"(position) and {float(rv):.3g} (velocity) above {tol:g}; the keyframe is too far from "
                             "a configuration that closes the loops")
        return state

    def state(self, qpos=None, qvel=None):
        """:class:`~mrds_jax.system.SystemState` from MuJoCo's qpos/qvel (default: qpos0, zero velocity)."""
        from ..system import SystemState
        qpos = self.qpos0 if qpos is None else np.asarray(qpos, dtype=float)
        qvel = np.zeros(sum(len(d) for d in self.dof_index)) if qvel is None else np.asarray(qvel, dtype=float)
        qs, vs = [], []
        for qi, di, free in zip(self.qpos_index, self.dof_index, self.free):
            q, v = qpos[qi].copy(), qvel[di].copy()
            for a, b in free:
                R = _quat_to_matrix(q[a + 3:a + 7])
                v[b:b + 6] = np.concatenate([qvel[di][b + 3:b + 6], R.T @ qvel[di][b:b + 3]])
            qs.append(jnp.asarray(q))
            vs.append(jnp.asarray(v))
        return SystemState(tuple(qs), tuple(vs))

    def to_mujoco(self, state, nq=None, nv=None):
        """(qpos, qvel) in MuJoCo's layout from a :class:`~mrds_jax.system.SystemState`. Generalized forces
        map like velocities (pass them as ``state.v``: a free joint's [n_body; f_body] → [f_world; n_body])."""
        nq = sum(len(i) for i in self.qpos_index) if nq is None else nq
        nv = sum(len(i) for i in self.dof_index) if nv is None else nv
        qpos, qvel = np.zeros(nq), np.zeros(nv)
        for qi, di, free, q, v in zip(self.qpos_index, self.dof_index, self.free, state.q, state.v):
            q, v = np.asarray(q, dtype=float), np.array(v, dtype=float)
            for a, b in free:
                R = _quat_to_matrix(q[a + 3:a + 7])
                v[b:b + 6] = np.concatenate([R @ v[b + 3:b + 6], v[b:b + 3]])
            qpos[qi], qvel[di] = q, v
        return qpos, qvel

    def acceleration_from_mujoco(self, state, qacc):
        """Per-module q̈ from MuJoCo's qacc at ``state``: a free joint's [v̇_world; ω̇_body] becomes
        [ω̇_body; v̇_body] with v̇_body = Rᵀ v̇_world − ω × v_body."""
        qacc = np.asarray(qacc, dtype=float)
        out = []
        for di, free, q, v in zip(self.dof_index, self.free, state.q, state.v):
            a_k, q, v = qacc[di].copy(), np.asarray(q), np.asarray(v)
            for a, b in free:
                R = _quat_to_matrix(q[a + 3:a + 7])
                w, v_body = v[b:b + 3], v[b + 3:b + 6]
                a_k[b:b + 6] = np.concatenate([qacc[di][b + 3:b + 6], R.T @ qacc[di][b:b + 3] - np.cross(w, v_body)])
            out.append(jnp.asarray(a_k))
        return tuple(out)


def _mujoco(what="load_mjcf"):
    """The ``mujoco`` package (a dependency of mrds-jax), or an ImportError naming ``what`` needs it."""
    try:
        import mujoco
    except ImportError:
        raise ImportError(f"{what} needs the MuJoCo Python package: pip install mujoco "
                          "(or pip install 'mrds-jax[mjcf]')") from None
    return mujoco


def _quat_to_matrix(quat):
    w, x, y, z = np.asarray(quat, dtype=float) / np.linalg.norm(quat)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _axis_rotation(a, angle):
    a = np.asarray(a, dtype=float) / np.linalg.norm(a)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


class _Pose:
    """A rigid placement (R, p): x ↦ R x + p."""

    def __init__(self, R=None, p=None):
        self.R = np.eye(3) if R is None else np.asarray(R, dtype=float)
        self.p = np.zeros(3) if p is None else np.asarray(p, dtype=float)

    def __mul__(self, other):
        return _Pose(self.R @ other.R, self.R @ other.p + self.p)


@dataclass(frozen=True)
class _ChainJoint:
    """One of our joints made from MuJoCo joints ``ids`` of one body: its kind, its anchor (MuJoCo's ``jnt_pos``,
    body frame; zero for a slide, whose ``pos`` moves nothing), axes (body frame) and reference value (``ref``,
    MuJoCo's qpos0 of a hinge or slide)."""
    kind: str
    ids: tuple
    anchor: np.ndarray
    axis: np.ndarray
    axis2: np.ndarray = None
    ref: float = 0.0


@dataclass(frozen=True)
class _JointSite:
    """Where a MuJoCo joint sits among our links: module, our joint kind, the link it moves, its parent link (None:
    the world) and its joint frame's placement in the parent link (or the world)."""
    module: str
    kind: str
    link: str
    parent_link: str
    placement: _Pose


def _reference_pose(joint):
    """The joint motion at q = 0 relative to MuJoCo's: a hinge turned by −ref about its axis, a slide moved by
    −ref along it (MuJoCo moves by qpos − qpos0, we by q), so that our q equals MuJoCo's qpos."""
    if joint.kind == "revolute":
        return _Pose(R=_axis_rotation(joint.axis, -joint.ref))
    if joint.kind == "prismatic":
        return _Pose(p=-joint.ref * joint.axis / np.linalg.norm(joint.axis))
    return _Pose()


def _chain_placements(start, chain):
    """Joint placements of a body's chain of joints, each in the previous joint's link frame (the first in
    ``start``'s frame: the body's frame before its joints, in its parent link).

    MuJoCo composes a body's joints in order, each about its own anchor pᵢ in the body frame (``mj_kinematics``):
    T_body = T_start · Π_i Trans(pᵢ) Jᵢ(qᵢ − refᵢ) Trans(−pᵢ), with Jᵢ the joint's rotation or translation. Our
    link i has its origin at pᵢ (a joint turns about its link origin), so its placement is Trans(p_{i−1})⁻¹ ·
    Trans(pᵢ) · J(−refᵢ) (Trans(p₀)·J(−ref₀) after ``start``), and the body frame sits at −p_last in the last
    link: the links between are massless frames, the last carries the body."""
    out, T = [], start
    for joint in chain:
        T = T * _Pose(p=joint.anchor) * _reference_pose(joint)
        out.append(T)
        T = _Pose(p=-joint.anchor)
    return out


class Floor(NamedTuple):
    """A horizontal ground plane added to a model that has none (``load_mjcf(..., floor=Floor(...))`` or
    ``floor=True`` for these defaults): its height (m), its sliding friction μ (MuJoCo's default 1), its geom's
    name, and its ``contype``/``conaffinity`` bits, as a ``<geom type="plane">`` in the file's ``<worldbody>``
    would have them. ``conaffinity`` None: every ``contype`` bit of the file's geoms (and 1), so that every geom that
    collides with anything collides with the floor — a robot whose legs collide only with each other through their
    own bits (Menagerie's Cassie: contype 2 and 4) stands on it, as Menagerie's scenes give their floors
    ``conaffinity="15"``."""
    height: float = 0.0
    friction: float = 1.0
    name: str = "floor"
    contype: int = 1
    conaffinity: Optional[int] = None


def _floor(floor):
    """``floor`` (None, False, True, a height or a :class:`Floor`) as a Floor or None, checked."""
    if floor is None or floor is False:
        return None
    floor = Floor() if floor is True else Floor(float(floor)) if isinstance(floor, (int, float)) else floor
    if not isinstance(floor, Floor):
        raise ArgumentError(f"floor: True, a height (m) or mrds_jax.loaders.mjcf.Floor(...), not {floor!r}")
    if not (np.isfinite(floor.height) and np.isfinite(floor.friction) and floor.friction >= 0):
        raise ArgumentError(f"floor: height and friction must be finite and friction >= 0, got {floor}")
    for bits in ("contype", "conaffinity"):
        value = getattr(floor, bits)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0):
            raise ArgumentError(f"floor: {bits} is a bit mask, an integer >= 0, got {value!r}")
    return floor


def _add_floor(spec, floor, where):
    """Add ``floor`` to an ``mujoco.MjSpec``'s world body (its name must be free); its conaffinity by default every
    contype bit of the compiled file's geoms (:class:`Floor`)."""
    mujoco = _mujoco()
    if floor.name in {g.name for g in spec.geoms}:
        raise ArgumentError(f"{where}: floor: the model already has a geom named {floor.name!r}; "
                            f"give Floor(name=...) another name")
    conaffinity = floor.conaffinity
    if conaffinity is None:
        try:
            bits = np.bitwise_or.reduce(np.asarray(spec.compile().geom_contype, dtype=np.int64), initial=0)
        except ValueError as e:
            raise ModelError(f"{where}: MuJoCo could not load the MJCF: {e}") from None
        conaffinity = int(bits) | 1
    spec.worldbody.add_geom(name=floor.name, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0],
                            pos=[0.0, 0.0, floor.height], friction=[floor.friction, 0.005, 0.0001],
                            contype=int(floor.contype), conaffinity=int(conaffinity))


def compile_mjcf(source, floor=None):
    """A compiled ``mujoco.MjModel`` from a path, an XML string or an ``MjModel``, with a :class:`Floor` added
    when ``floor`` asks for one (not to an already compiled ``MjModel``); errors name the source."""
    mujoco = _mujoco()
    floor = _floor(floor)
    if isinstance(source, mujoco.MjModel):
        if floor is not None:
            raise ArgumentError("floor: a compiled MjModel cannot take a floor; pass the file's path or XML")
        return source, "MjModel"
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("<"):
        where = os.fspath(source)
        if not os.path.isfile(where):
            raise FileNotFoundError(f"MJCF file {where!r} does not exist")
        read = mujoco.MjSpec.from_file
    elif isinstance(source, str):
        where, read = "<MJCF string>", mujoco.MjSpec.from_string
    else:
        raise TypeError(f"load_mjcf takes a path, an MJCF string or a mujoco.MjModel, got {type(source).__name__}")
    try:
        spec = read(where if read is mujoco.MjSpec.from_file else source)
    except ValueError as e:
        raise ModelError(f"{where}: MuJoCo could not load the MJCF: {e}") from None
    if floor is not None:
        _add_floor(spec, floor, where)
    try:
        return spec.compile(), where
    except ValueError as e:
        raise ModelError(f"{where}: MuJoCo could not load the MJCF: {e}") from None


def _name(model, mujoco, obj, i, fallback):
    n = mujoco.mj_id2name(model, obj, i)
    return n if n else f"{fallback}{i}"


_GEOM_KINDS = {0: "plane", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box", 7: "mesh"}  # mjtGeom


def mesh_hull_vertices(model, mesh):
    """The vertices (V, 3), float64, of mesh ``mesh``'s convex hull in the mesh's frame, as MuJoCo collides it:
    the hull graph's vertices (``mesh_graph`` at ``mesh_graphadr``: numvert, numface, vert_edgeadr[numvert],
    vert_globalid[numvert], ...; the ids index ``mesh_vert`` from ``mesh_vertadr``), or every vertex where the mesh
    has no graph (the maximum over them is the hull's support function either way). ``mesh_vert`` is MuJoCo's
    float32 array, converted exactly; a geom's ``geom_pos``/``geom_quat`` already hold the mesh's own offset."""
    start, count = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
    vertices = np.asarray(model.mesh_vert[start:start + count], dtype=float)
    graph = int(model.mesh_graphadr[mesh])
    if graph < 0:
        return vertices
    numvert = int(model.mesh_graph[graph])
    return vertices[np.asarray(model.mesh_graph[graph + 2 + numvert:graph + 2 + 2 * numvert], dtype=int)]


def welded_to(model):
    """For each body, the moving body it is welded to (``body_weldid``), or 0 where that is the world or a mocap
    body: a mocap body has no joint and is kept fixed where the file puts it, so it and the bodies welded to it are
    ground (their geoms ground geoms at their world pose)."""
    weld = np.array(model.body_weldid, dtype=int)
    weld[model.body_mocapid[weld] >= 0] = 0
    return weld


class _Importer:
    def __init__(self, model, where, forces=False):
        self.m, self.where, self.forces = model, where, forces
        self.mj = _mujoco()
        m, mj = model, self.mj
        self.body_names = [_name(m, mj, mj.mjtObj.mjOBJ_BODY, b, "body") for b in range(m.nbody)]
        self.joint_names = [_name(m, mj, mj.mjtObj.mjOBJ_JOINT, j, "joint") for j in range(m.njnt)]
        self.weld = welded_to(m)         # the moving body each body is welded to, 0 for the ground (mocap included)
        self.offset = {0: np.zeros(3)}   # link origin in the moving body's frame (its joint position)
        self.joints = {}                 # moving body -> (our joint kinds, its MuJoCo joint ids in order)

    def fail(self, msg):
        raise ModelError(f"{self.where}: {msg}")

    def warn(self, msg):
        warnings.warn(f"{self.where}: {msg}", UserWarning, stacklevel=4)

    # ---------------------------------------------------------------------------------------- frames
    def local(self, b):
        return _Pose(_quat_to_matrix(self.m.body_quat[b]), self.m.body_pos[b])

    def in_owner(self, b):
        """Pose of body b's frame in the frame of the body it is welded to (itself when it moves)."""
        m = self.m
        if b == 0 or self.weld[b] == b:
            return _Pose()
        return self.in_owner(m.body_parentid[b]) * self.local(b)

    def in_link(self, b, pose=None):
        """(owner moving body or 0 for the world, pose of body b's frame (times ``pose``) in the owner's
        link frame, or in the world for the ground)."""
        owner = int(self.weld[b])
        T = _Pose(p=-self.offset[owner]) * self.in_owner(b)
        return owner, (T if pose is None else T * pose)

    # ---------------------------------------------------------------------------------------- joints
    def joint_chain(self, b):
        """Our joints for the joints of moving body b, in MuJoCo's order (:class:`_ChainJoint`): a free joint
        alone; two hinges through one point without ``ref`` or limits as one universal joint (one link, as the
        native CKCM build); any other layout one joint per MuJoCo joint, each on its own link
        (:func:`_chain_placements`), so every joint keeps its name, limits, armature and actuators. (MuJoCo itself
        refuses a ball joint followed by a rotating joint on one body, and a free joint beside others.)"""
        m, J = self.m, self.mj.mjtJoint
        ids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        types = [int(m.jnt_type[j]) for j in ids]
        names = [self.joint_names[j] for j in ids]
        where = f"body {self.body_names[b]!r}"
        if types == [J.mjJNT_FREE]:      # MuJoCo refuses a free joint beside others ("more than 6 dofs")
            if self.weld[m.body_parentid[b]] != 0:   # MuJoCo 3-4 refuse this themselves
                self.fail(f"{where}: free joint {names[0]!r} below a moving body is not supported")
            return (_ChainJoint("free", (ids[0],), np.zeros(3), np.array([0, 0, 1.0])),)
        if self.is_universal(ids):
            a1, a2 = (np.array(m.jnt_axis[j], dtype=float) for j in ids)
            return (_ChainJoint("universal", tuple(ids), np.array(m.jnt_pos[ids[0]], dtype=float), a1, a2),)
        return tuple(self.chain_joint(j) for j in ids)

    def is_universal(self, ids):
        """Two hinges through one point with non-parallel axes, no ``ref`` and no limits: one universal joint."""
        m = self.m
        if len(ids) != 2 or any(int(m.jnt_type[j]) != int(self.mj.mjtJoint.mjJNT_HINGE) for j in ids):
            return False
        a1, a2 = (np.array(m.jnt_axis[j], dtype=float) for j in ids)
        return (np.allclose(m.jnt_pos[ids[0]], m.jnt_pos[ids[1]], atol=1e-12)
                and np.linalg.norm(np.cross(a1, a2)) > 1e-6 * np.linalg.norm(a1) * np.linalg.norm(a2)
                and not any(m.jnt_limited[j] or m.qpos0[m.jnt_qposadr[j]] != 0 for j in ids))

    def chain_joint(self, j):
        """One hinge (revolute about its ``pos``), slide (prismatic; its ``pos`` moves nothing) or ball (spherical
        about its ``pos``) as a :class:`_ChainJoint`, with its ``ref`` (qpos0) for hinges and slides."""
        m, J = self.m, self.mj.mjtJoint
        kind = {J.mjJNT_HINGE: "revolute", J.mjJNT_SLIDE: "prismatic", J.mjJNT_BALL: "spherical"}[int(m.jnt_type[j])]
        anchor = np.zeros(3) if kind == "prismatic" else np.array(m.jnt_pos[j], dtype=float)
        ref = float(m.qpos0[m.jnt_qposadr[j]]) if kind in ("revolute", "prismatic") else 0.0
        return _ChainJoint(kind, (j,), anchor, np.array(m.jnt_axis[j], dtype=float), ref=ref)

    # ---------------------------------------------------------------------------------------- modules
    def build_modules(self):
        m = self.m
        g = np.array(m.opt.gravity, dtype=float)
        if m.opt.disableflags & self.mj.mjtDisableBit.mjDSBL_GRAVITY:
            g = np.zeros(3)
        trees = {}
        for b in range(1, m.nbody):
            if self.weld[b] == b:
                trees.setdefault(int(m.body_treeid[b]), []).append(b)
        self.module_of = {}
        builders, self.links = {}, {}
        self.joint_site = {}   # MuJoCo joint -> _JointSite (where it sits among our links)
        self.names = []
        for bodies in trees.values():
            name = self.body_names[bodies[0]]
            self.names.append(name)
            builder = ModuleBuilder(gravity=g)
            builders[name] = builder
            for b in bodies:
                chain = self.joint_chain(b)
                self.offset[b] = chain[-1].anchor
                self.joints[b] = (tuple(c.kind for c in chain), tuple(j for c in chain for j in c.ids))
                parent = int(self.weld[m.body_parentid[b]])
                start = _Pose() if chain[0].kind == "free" else self.in_link(m.body_parentid[b])[1] * self.local(b)
                mass, com, inertia = self.lumped_inertia(b)
                if not mass > 0:
                    self.fail(f"moving body {self.body_names[b]!r} has no mass")
                parent_link = None if parent == 0 else self.body_names[parent]
                placements = _chain_placements(start, chain)
                for k, (c, T) in enumerate(zip(chain, placements)):
                    last = k == len(chain) - 1
                    joint_name = "+".join(self.joint_names[j] for j in c.ids)
                    link = self.body_names[b] if last else f"{self.body_names[b]}:{joint_name}"
                    builder.add_link(link, parent=parent_link, joint=c.kind, joint_name=joint_name, axis=c.axis,
                                     axis2=(0.0, 1.0, 0.0) if c.axis2 is None else c.axis2, position=T.p, rotation=T.R,
                                     mass=mass if last else 0.0, com=com if last else np.zeros(3),
                                     inertia=inertia if last else None, armature=self.dof_values(m.dof_armature, c.ids),
                                     limits=self.limits(c), cone_limit=self.cone_limit(c))
                    for j in c.ids:
                        self.joint_site[j] = _JointSite(name, c.kind, link, parent_link, T)
                    parent_link = link
                self.module_of[b] = name
                self.links[b] = placements[-1]
        self.frames = {name: [] for name in self.names}
        for b in range(1, m.nbody):
            owner = int(self.weld[b])
            if owner:
                self.add_frame(self.module_of[owner], self.body_names[b], self.body_names[owner], self.in_link(b)[1])
        self.site_frames = {}
        for s in range(m.nsite):
            owner, T = self.in_link(m.site_bodyid[s], _Pose(_quat_to_matrix(m.site_quat[s]), m.site_pos[s]))
            sname = _name(m, self.mj, self.mj.mjtObj.mjOBJ_SITE, s, "site")
            if owner:
                mod = self.module_of[owner]
                taken = {f[0] for f in self.frames[mod]}
                self.site_frames[s] = self.add_frame(mod, sname if sname not in taken else f"site:{sname}",
                                                     self.body_names[owner], T)
        self.builders = builders

    def limits(self, joint):
        """(lower, upper) of a limited hinge or slide (MuJoCo's ``jnt_range``, on qpos = our q), else None."""
        j = joint.ids[0]
        if joint.kind in ("revolute", "prismatic") and self.m.jnt_limited[j]:
            return tuple(float(x) for x in self.m.jnt_range[j])
        return None

    def cone_limit(self, joint):
        """The largest rotation angle of a limited ball joint (MuJoCo's ``jnt_range[1]``; its range[0] is 0:
        the limit is on the angle of the joint's rotation from the identity), else None."""
        j = joint.ids[0]
        if joint.kind == "spherical" and self.m.jnt_limited[j]:
            return float(self.m.jnt_range[j][1])
        return None

    def dof_values(self, per_dof, ids):
        """A per-degree-of-freedom MuJoCo array (``dof_armature``, ``dof_damping``) for the joints ``ids`` of one
        body, in our velocity order (a free joint's [v_world; ω_body] becomes [ω; v])."""
        m = self.m
        out = []
        for j in ids:
            a = np.array(per_dof[m.jnt_dofadr[j]:m.jnt_dofadr[j] + _NV[int(m.jnt_type[j])]], dtype=float)
            out.append(np.concatenate([a[3:], a[:3]]) if m.jnt_type[j] == 0 else a)
        return np.concatenate(out)

    def add_frame(self, module, name, link, T):
        """Operational point ``name`` at placement T of our link ``link`` of ``module``; returns its name."""
        self.frames[module].append((name, link, T))
        return name

    def lumped_inertia(self, b):
        """(mass, centre of mass, inertia about it) of moving body b and the bodies welded to it, link frame
        (numpy: parallel-axis theorem, Featherstone §2.13)."""
        m = self.m
        parts = []
        for c in range(b, m.nbody):
            if self.weld[c] == b and m.body_mass[c] > 0:
                T = self.in_link(c)[1] * _Pose(_quat_to_matrix(m.body_iquat[c]), m.body_ipos[c])
                parts.append((float(m.body_mass[c]), T.p, T.R @ np.diag(m.body_inertia[c]) @ T.R.T))
        if not parts:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        mass = sum(p[0] for p in parts)
        com = sum(p[0] * p[1] for p in parts) / mass
        inertia = sum(I + mi * (np.dot(c - com, c - com) * np.eye(3) - np.outer(c - com, c - com))
                      for mi, c, I in parts)
        return mass, com, 0.5 * (inertia + inertia.T)

    # ---------------------------------------------------------------------------------------- collision
    def build_collision(self, modules):
        """The :class:`~mrds_jax.collision.CollisionModel` of the file's geoms (module docstring)."""
        from .. import collision as C
        m, mj = self.m, self.mj
        names = [_name(m, mj, mj.mjtObj.mjOBJ_GEOM, g, "geom") for g in range(m.ngeom)]
        if m.opt.disableflags & mj.mjtDisableBit.mjDSBL_CONTACT:
            return C.collision_model((), modules)
        paired = set(int(g) for g in np.r_[m.pair_geom1, m.pair_geom2])
        kept, left_out = {}, []
        for g in range(m.ngeom):
            if not (m.geom_contype[g] or m.geom_conaffinity[g] or g in paired):
                continue                                       # visual only
            kind = _GEOM_KINDS.get(int(m.geom_type[g]))
            if kind is None:
                left_out.append(g)
                continue
            b = int(m.geom_bodyid[g])
            owner, local = int(self.weld[b]), _Pose(_quat_to_matrix(m.geom_quat[g]), m.geom_pos[g])
            module, frame, T = ((None, None, self.in_link(b, local)[1]) if owner == 0
                                else (self.module_of[owner], self.body_names[b], local))
            common = dict(position=T.p, rotation=T.R, friction=float(m.geom_friction[g, 0]),
                          contype=int(m.geom_contype[g]), conaffinity=int(m.geom_conaffinity[g]),
                          priority=int(m.geom_priority[g]))
            size = np.array(m.geom_size[g], dtype=float)
            dims = {"plane": (), "sphere": (size[0],), "capsule": (size[0], size[1]),
                    "cylinder": (size[0], size[1]), "box": (size,), "ellipsoid": (size,)}.get(kind)
            if kind == "mesh":
                dims = (mesh_hull_vertices(m, int(m.geom_dataid[g])),)
            kept[g] = getattr(C, kind)(names[g], module, frame, *dims, **common)
        if left_out:
            by_kind = {}
            for g in left_out:
                kind = mj.mjtGeom(int(m.geom_type[g])).name.removeprefix("mjGEOM_").lower()
                by_kind.setdefault(kind, []).append(names[g])
            listed = ", ".join(f"{len(n)} {k} ({', '.join(map(repr, n[:3]))}{', ...' if len(n) > 3 else ''})"
                               for k, n in by_kind.items())
            warnings.warn(f"{self.where}: {len(left_out)} collision geom(s) left out with their pairs, the narrow "
                          f"phase has no such primitive: {listed}", C.CollisionWarning, stacklevel=3)
        pairs, lost = [], []
        for k in range(m.npair):
            g1, g2 = int(m.pair_geom1[k]), int(m.pair_geom2[k])
            if g1 in kept and g2 in kept:
                pairs.append((names[g1], names[g2], {"friction": float(m.pair_friction[k, 0])}))
            else:
                lost.append(f"({names[g1]!r}, {names[g2]!r})")
        if lost:
            warnings.warn(f"{self.where}: contact pairs left out with their geoms: {', '.join(lost)}",
                          C.CollisionWarning, stacklevel=3)
        excludes = []
        for signature in m.exclude_signature:
            b1, b2 = int(signature) >> 16, int(signature) & 0xFFFF
            excludes += [(names[g], names[h]) for g in kept for h in kept
                         if m.geom_bodyid[g] == b1 and m.geom_bodyid[h] == b2]
        filter_parent = not m.opt.disableflags & mj.mjtDisableBit.mjDSBL_FILTERPARENT
        return C.collision_model(tuple(kept.values()), modules, pairs=pairs, excludes=excludes,
                                 filter_parent=filter_parent)

    # ---------------------------------------------------------------------------------------- contacts
    def side(self, eq_name, label, b, T):
        """A contact side for a frame T on body b: (module, frame) with the frame added, or the ground."""
        owner, T = self.in_link(b, T)
        if owner == 0:
            return None, T
        module = self.module_of[owner]
        return (module, self.add_frame(module, f"{eq_name}:{label}", self.body_names[owner], T)), T

    def site_side(self, s):
        b = int(self.m.site_bodyid[s])
        owner, T = self.in_link(b, _Pose(_quat_to_matrix(self.m.site_quat[s]), self.m.site_pos[s]))
        return (None, T) if owner == 0 else ((self.module_of[owner], self.site_frames[s]), T)

    def build_contacts(self):
        from .. import contacts as C
        m, mj = self.m, self.mj
        EQ, OBJ = mj.mjtEq, mj.mjtObj
        out, self.couplings = [], []
        off = m.opt.disableflags & (mj.mjtDisableBit.mjDSBL_EQUALITY | mj.mjtDisableBit.mjDSBL_CONSTRAINT)
        if m.neq and off:
            self.warn(f"equality constraints are disabled (option flag equality or constraint=\"disable\"): "
                      f"{m.neq} equalities skipped")
            return out
        for k in range(m.neq):
            name = _name(m, mj, OBJ.mjOBJ_EQUALITY, k, "equality")
            typ = int(m.eq_type[k])
            label = mj.mjtEq(typ).name.removeprefix("mjEQ_").lower()
            where = f"equality {label} {name!r}"
            if typ not in (EQ.mjEQ_CONNECT, EQ.mjEQ_WELD, EQ.mjEQ_JOINT, EQ.mjEQ_TENDON):
                self.fail(f"{where}: {label} equalities are not supported (connect, weld, joint and fixed-tendon "
                          "equalities are)")
            if not m.eq_active0[k]:
                self.warn(f"{where} is inactive (active=\"false\") and is skipped")
                continue
            data = np.array(m.eq_data[k], dtype=float)
            j1, j2 = int(m.eq_obj1id[k]), int(m.eq_obj2id[k])
            if typ == EQ.mjEQ_TENDON:
                self.couplings.append(self.tendon_coupling(name, where, data, j1, j2))
            elif typ == EQ.mjEQ_JOINT and j2 >= 0 and np.any(data[1:5] != 0):
                self.couplings.append(self.joint_coupling(name, where, data, j1, j2))
            elif typ == EQ.mjEQ_JOINT:
                out.append(self.joint_lock(name, where, data, j1, j2))
            if typ in (EQ.mjEQ_JOINT, EQ.mjEQ_TENDON):
                continue
            if m.eq_objtype[k] == OBJ.mjOBJ_SITE:
                (E, TE), (P, TP) = self.site_side(int(m.eq_obj1id[k])), self.site_side(int(m.eq_obj2id[k]))
            elif typ == EQ.mjEQ_CONNECT:
                (E, TE) = self.side(name, "E", int(m.eq_obj1id[k]), _Pose(p=data[0:3]))
                (P, TP) = self.side(name, "P", int(m.eq_obj2id[k]), _Pose(p=data[3:6]))
            else:
                if data[10] <= 0:
                    self.fail(f"{where}: torquescale {data[10]} leaves the rotation free; use a connect equality")
                (E, TE) = self.side(name, "E", int(m.eq_obj1id[k]), _Pose(_quat_to_matrix(data[6:10]), data[3:6]))
                (P, TP) = self.side(name, "P", int(m.eq_obj2id[k]), _Pose(p=data[0:3]))
            if E is None and P is None:
                self.fail(f"{where}: both sides are fixed to the world")
            ground = TE if E is None else TP if P is None else _Pose()
            make = C.spherical if typ == EQ.mjEQ_CONNECT else C.weld
            out.append(make(name, E, P, ground_rotation=ground.R, ground_position=ground.p))
        return out

    def one_coordinate_joint(self, where, j, use):
        """The :class:`_JointSite` of MuJoCo joint j, a hinge or slide that is one of our joints (every hinge and
        slide but those read as a universal joint); ModelError naming it and what it was for (``use``)
        otherwise."""
        site = self.joint_site.get(j)
        if site is None or site.kind not in ("revolute", "prismatic"):
            self.fail(f"{where}: joint {self.joint_names[j]!r} is not a hinge or slide joint of its own (a ball, free "
                      f"or universal joint); only those can be {use}")
        return site

    def coupled_joint(self, where, j):
        """(module, joint name) of MuJoCo joint j, a hinge or slide (:meth:`one_coordinate_joint`)."""
        return self.one_coordinate_joint(where, j, "coupled").module, self.joint_names[j]

    def joint_coupling(self, name, where, data, j1, j2):
        """``<equality joint>`` with two joints: q₁ − q₁₀ = P(q₂ − q₂₀), P from ``polycoef`` (data[0:5]), the
        references MuJoCo's qpos0 (:func:`~mrds_jax.contacts.coupling.joint_coupling`)."""
        from ..contacts.coupling import joint_coupling
        ref = [self.m.qpos0[self.m.jnt_qposadr[j]] for j in (j1, j2)]
        return joint_coupling(name, self.coupled_joint(where, j1), self.coupled_joint(where, j2), data[:5], ref)

    def fixed_tendon(self, where, t):
        """((module, joint), coef) pairs of fixed tendon t (its length Σ coef·qpos); ModelError for a spatial one."""
        m, W = self.m, self.mj.mjtWrap
        tname = _name(m, self.mj, self.mj.mjtObj.mjOBJ_TENDON, t, "tendon")
        wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
        if any(int(m.wrap_type[w]) != int(W.mjWRAP_JOINT) for w in wraps):
            self.fail(f"{where}: tendon {tname!r} is a spatial tendon; only fixed tendons (joint wraps) can be coupled")
        return tuple((self.coupled_joint(f"{where}, tendon {tname!r}", int(m.wrap_objid[w])), float(m.wrap_prm[w]))
                     for w in wraps)

    def tendon_coupling(self, name, where, data, t1, t2):
        """``<equality tendon>`` on fixed tendons: L₁ − L₁₀ = P(L₂ − L₂₀) (L₂ absent: L₁ − L₁₀ = a₀), references
        MuJoCo's ``tendon_length0`` (:func:`~mrds_jax.contacts.coupling.tendon_coupling`)."""
        from ..contacts.coupling import tendon_coupling
        m = self.m
        if t2 < 0 and np.any(data[1:5] != 0):
            data = np.concatenate([data[:1], np.zeros(4)])   # MuJoCo reads only polycoef[0] for one tendon
        ref = [float(m.tendon_length0[t1]), float(m.tendon_length0[t2]) if t2 >= 0 else 0.0]
        return tendon_coupling(name, self.fixed_tendon(where, t1), self.fixed_tendon(where, t2) if t2 >= 0 else None,
                               data[:5], ref)

    def joint_lock(self, name, where, data, j1, j2):
        """``<equality joint>`` with one hinge or slide: a contact between the joint's two links that locks its
        axis, E on the parent link (or the ground) at the joint frame turned or moved to the target, P the child
        link's frame."""
        from ..contacts import make_contact
        m = self.m
        site = self.one_coordinate_joint(where, j1, "locked")
        axis = np.array(m.jnt_axis[j1], dtype=float)
        axis = axis / np.linalg.norm(axis)
        target = m.qpos0[m.jnt_qposadr[j1]] + data[0]     # MuJoCo: qpos − ref = polycoef[0]
        # E: the joint frame turned (or moved) to the target, so that the pose error vanishes there
        turn = _Pose(R=_axis_rotation(axis, target)) if site.kind == "revolute" else _Pose(p=target * axis)
        T = site.placement * turn
        E = None if site.parent_link is None else (site.module, self.add_frame(site.module, f"{name}:E",
                                                                               site.parent_link, T))
        P = (site.module, self.add_frame(site.module, f"{name}:P", site.link, _Pose()))
        col = np.concatenate([axis, np.zeros(3)] if site.kind == "revolute" else [np.zeros(3), axis])[:, None]
        free = np.linalg.svd(col.T)[2][1:].T   # orthonormal complement of the locked direction
        return make_contact(name, E, P, free, col, kind="joint_lock",
                            ground_rotation=None if E else T.R, ground_position=None if E else T.p)

    # ---------------------------------------------------------------------------------------- force elements
    def module_dofs(self, name):
        """(MuJoCo joint ids, their qpos indices, in our order) of module ``name``."""
        jnts = [j for b in self.links if self.module_of[b] == name for j in self.joints[b][1]]
        q = [np.arange(self.m.jnt_qposadr[j], self.m.jnt_qposadr[j] + _NQ[int(self.m.jnt_type[j])]) for j in jnts]
        return jnts, np.concatenate(q)

    def build_forces(self):
        """Passive joint forces (one :class:`~mrds_jax.system.JointSpringDamper` per module with stiffness or
        damping: MuJoCo's ``jnt_stiffness`` about ``qpos_spring``, ``dof_damping``), one
        :class:`~mrds_jax.system.TendonSpringDamper` per fixed tendon with stiffness or damping (named
        ``tendon:<name>``) and one :class:`~mrds_jax.system.Actuators` element for the actuators (named
        ``actuators``; MuJoCo's ctrl order, those that cannot be read left out and named by
        :meth:`report_actuation`)."""
        from ..system.actuation import actuators, tendon_spring_damper
        from ..system.forces import joint_spring_damper
        m, mj = self.m, self.mj
        D = mj.mjtDisableBit
        out = []
        for name in self.names:
            jnts, qidx = self.module_dofs(name)
            k = np.concatenate([np.full(_NV[int(m.jnt_type[j])], float(m.jnt_stiffness[j])) for j in jnts])
            d = self.dof_values(m.dof_damping, jnts)
            if m.opt.disableflags & D.mjDSBL_SPRING:
                k = np.zeros_like(k)
            if m.opt.disableflags & D.mjDSBL_DAMPER:
                d = np.zeros_like(d)
            if np.any(k) or np.any(d):
                label = "passive" if len(self.names) == 1 else f"passive:{name}"
                out.append(joint_spring_damper(label, name, k, d, np.array(m.qpos_spring[qidx], dtype=float)))
        for t in self.tendon_springs():
            k = 0.0 if m.opt.disableflags & D.mjDSBL_SPRING else float(m.tendon_stiffness[t])
            d = 0.0 if m.opt.disableflags & D.mjDSBL_DAMPER else float(m.tendon_damping[t])
            if k or d:
                tendon = self.tendon(t)
                out.append(tendon_spring_damper(f"tendon:{tendon.name}", tendon, k, d,
                                                np.array(m.tendon_lengthspring[t], dtype=float)))
        rows = [self.actuator(u) for u in self.read_actuators()]
        if rows and not m.opt.disableflags & D.mjDSBL_ACTUATION:
            from ..system.actuation import ActivationDynamics
            cols = {key: [r[key] for r in rows] for key in rows[0]}
            limited = {}
            for j in range(m.njnt):
                site = self.joint_site.get(j)
                if m.jnt_actfrclimited[j] and site is not None and site.kind not in ("universal", "free"):
                    limited[(site.module, self.joint_names[j])] = tuple(float(x) for x in m.jnt_actfrcrange[j])
            dyn = ActivationDynamics(tuple(cols["dynamics"]), np.array(cols["tau"]), np.array(cols["act_range"]),
                                     tuple(cols["act_early"]), 0.0, float(m.opt.timestep))
            out.append(actuators("actuators", cols["target"], gear=cols["gear"], gain=np.array(cols["gain"]),
                                 bias=np.array(cols["bias"]), ctrl_range=np.array(cols["ctrl"]),
                                 force_range=np.array(cols["force"]), actuator_names=cols["name"],
                                 joint_force_range=limited, tendon_force_range=np.array(cols["tendon_force"]),
                                 dynamics=dyn, wrap_setpoint=tuple(cols["wrap"]), in_parent=tuple(cols["in_parent"])))
        return tuple(out)

    # ---------------------------------------------------------------------------------------- tendons, actuators
    def tendon_name(self, t):
        return _name(self.m, self.mj, self.mj.mjtObj.mjOBJ_TENDON, t, "tendon")

    def unread_tendon(self, t):
        """Why tendon t cannot be a :class:`~mrds_jax.system.FixedTendon` (a short phrase), or None."""
        m = self.m
        wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
        if any(int(m.wrap_type[w]) != int(self.mj.mjtWrap.mjWRAP_JOINT) for w in wraps):
            return "spatial tendon"
        if any(getattr(self.joint_site.get(int(m.wrap_objid[w])), "kind", None) not in ("revolute", "prismatic")
               for w in wraps):
            return "fixed tendon on a hinge read into a universal joint"
        return None

    def tendon(self, t):
        """Fixed tendon t as a :class:`~mrds_jax.system.FixedTendon` (``wrap_objid``, ``wrap_prm``)."""
        from ..system.actuation import fixed_tendon
        m = self.m
        wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
        joints = [int(m.wrap_objid[w]) for w in wraps]
        return fixed_tendon(self.tendon_name(t), [(self.joint_site[j].module, self.joint_names[j]) for j in joints],
                            np.array([m.wrap_prm[w] for w in wraps], dtype=float))

    def tendon_limits(self):
        """:class:`~mrds_jax.system.build.TendonLimit` of every readable limited fixed tendon (``tendon_range``)."""
        from ..system.build import TendonLimit
        out = []
        for t in range(self.m.ntendon):
            if self.m.tendon_limited[t] and self.unread_tendon(t) is None:
                tendon = self.tendon(t)
                out.append(TendonLimit(tendon.name, tendon.joints, tuple(float(c) for c in tendon.coef),
                                       *(float(x) for x in self.m.tendon_range[t])))
        return tuple(out)

    def tendon_springs(self):
        """Readable tendons with a stiffness or damping (MuJoCo's tendon spring-dampers)."""
        m = self.m
        return [t for t in range(m.ntendon) if (m.tendon_stiffness[t] or m.tendon_damping[t])
                and self.unread_tendon(t) is None]

    def read_actuators(self):
        """Actuators read (:meth:`unread_actuator` None), MuJoCo's order; those of a group disabled by
        ``<option actuatorgroupdisable>`` exert no force in MuJoCo and are left out."""
        m = self.m
        def disabled(u):
            return 0 <= m.actuator_group[u] <= 30 and m.opt.disableactuator & (1 << int(m.actuator_group[u]))
        return [u for u in range(m.nu) if self.unread_actuator(u) is None and not disabled(u)]

    def actuator(self, u):
        """Actuator u's row for :func:`~mrds_jax.system.actuators` (its target, gear, affine gain and bias,
        clamped ranges, activation dynamics, MuJoCo's ball-servo setpoint rule)."""
        m, mj = self.m, self.mj
        inf = (-np.inf, np.inf)
        trn, obj = int(m.actuator_trntype[u]), int(m.actuator_trnid[u, 0])
        on_tendon = trn == int(mj.mjtTrn.mjTRN_TENDON)
        if on_tendon:
            target, width = self.tendon(obj), 1
        else:
            target, width = (self.joint_site[obj].module, self.joint_names[obj]), _NV[int(m.jnt_type[obj])]
        gain = np.array(m.actuator_gainprm[u, :3], dtype=float)
        if int(m.actuator_gaintype[u]) == int(mj.mjtGain.mjGAIN_FIXED):
            gain[1:] = 0.0
        bias = np.array(m.actuator_biasprm[u, :3], dtype=float)
        if int(m.actuator_biastype[u]) == int(mj.mjtBias.mjBIAS_NONE):
            bias[:] = 0.0
        clamp = not m.opt.disableflags & mj.mjtDisableBit.mjDSBL_CLAMPCTRL
        dyn = mj.mjtDyn(int(m.actuator_dyntype[u])).name.removeprefix("mjDYN_").lower()
        servo = (int(m.actuator_gaintype[u]) == int(mj.mjtGain.mjGAIN_FIXED)
                 and int(m.actuator_biastype[u]) == int(mj.mjtBias.mjBIAS_AFFINE)
                 and m.actuator_gainprm[u, 0] == -m.actuator_biasprm[u, 1] and dyn in ("none", "integrator"))
        return dict(
            target=target, gear=np.array(m.actuator_gear[u, :width], dtype=float) if width > 1
            else float(m.actuator_gear[u, 0]), gain=gain, bias=bias,
            ctrl=m.actuator_ctrlrange[u] if m.actuator_ctrllimited[u] and clamp else inf,
            force=m.actuator_forcerange[u] if m.actuator_forcelimited[u] else inf,
            tendon_force=m.tendon_actfrcrange[obj] if on_tendon and m.tendon_actfrclimited[obj] else inf,
            name=_name(m, mj, mj.mjtObj.mjOBJ_ACTUATOR, u, "actuator"), dynamics=dyn,
            tau=float(m.actuator_dynprm[u, 0]), act_range=m.actuator_actrange[u] if m.actuator_actlimited[u] else inf,
            act_early=bool(m.actuator_actearly[u]), wrap=servo and not on_tendon and width == 3,
            in_parent=trn == int(mj.mjtTrn.mjTRN_JOINTINPARENT))

    def unread_actuator(self, u):
        """Why actuator u is not read (a short phrase, the same for every actuator with that reason), or None: read
        are joint (and ``jointinparent``) transmissions on a hinge, slide, ball or free joint of its own and
        transmissions on readable fixed tendons, without dynamics or with integrator, filter or filterexact dynamics,
        with fixed or affine gain and bias, one control, no delay, no actuator-level damping or armature, no
        plugin."""
        m, mj = self.m, self.mj
        trn = int(m.actuator_trntype[u])
        obj = int(m.actuator_trnid[u, 0])
        if trn == int(mj.mjtTrn.mjTRN_TENDON):
            why = self.unread_tendon(obj)
            if why:
                return f"on a {why}"
        elif trn not in (int(mj.mjtTrn.mjTRN_JOINT), int(mj.mjtTrn.mjTRN_JOINTINPARENT)):
            kind = mj.mjtTrn(trn).name.removeprefix("mjTRN_").lower()
            return f"with a {kind} transmission"
        elif getattr(self.joint_site.get(obj), "kind", None) not in ("revolute", "prismatic", "spherical", "free"):
            return "on a hinge read into a universal joint"
        dyn = mj.mjtDyn(int(m.actuator_dyntype[u])).name.removeprefix("mjDYN_").lower()
        if dyn not in ("none", "integrator", "filter", "filterexact"):
            return f"with activation dynamics '{dyn}'"
        gain, bias = int(m.actuator_gaintype[u]), int(m.actuator_biastype[u])
        if gain not in (int(mj.mjtGain.mjGAIN_FIXED), int(mj.mjtGain.mjGAIN_AFFINE)):
            return f"with gain type '{mj.mjtGain(gain).name.removeprefix('mjGAIN_').lower()}'"
        if bias not in (int(mj.mjtBias.mjBIAS_NONE), int(mj.mjtBias.mjBIAS_AFFINE)):
            return f"with bias type '{mj.mjtBias(bias).name.removeprefix('mjBIAS_').lower()}'"
        if m.actuator_ctrlnum[u] != 1 or m.actuator_outnum[u] != 1 or m.actuator_actnum[u] > (dyn != "none"):
            return "with several controls, outputs or activations"
        if m.actuator_plugin[u] >= 0:
            return "with a plugin"
        if m.actuator_delay[u]:
            return "with a control delay"
        if m.actuator_damping[u] or np.any(m.actuator_dampingpoly[u]) or m.actuator_armature[u]:
            return "with actuator damping or armature"
        return None

    def actuation_gaps(self):
        """[(what, names, what the simulation does without it)] for the actuators and tendons not read."""
        m, mj = self.m, self.mj
        T = mj.mjtObj.mjOBJ_TENDON
        gaps, unread = [], {}
        for u in range(m.nu):
            reason = self.unread_actuator(u)
            if reason:
                unread.setdefault(reason, []).append(u)
        for reason, us in unread.items():
            gaps.append((f"actuators {reason}", self.names_of(mj.mjtObj.mjOBJ_ACTUATOR, us, "actuator"),
                         "they are left out and exert no force"))
        springs = [t for t in range(m.ntendon) if m.tendon_stiffness[t] or m.tendon_damping[t]]
        spatial = [t for t in springs if self.unread_tendon(t)]
        J = (mj.mjtObj.mjOBJ_JOINT, "joint")
        T = (T, "tendon")
        checks = [
            ("stiffness and damping of tendons that are not fixed tendons of hinges and slides", T, spatial,
             "no force along them"),
            ("tendon friction loss", T, np.flatnonzero(m.tendon_frictionloss != 0), "no friction along the tendon"),
            ("limits of tendons that are not fixed tendons of hinges and slides", T,
             [t for t in np.flatnonzero(m.tendon_limited != 0) if self.unread_tendon(t)],
             "not enforced: the tendon may pass its range"),
            ("tendon armature", T, np.flatnonzero(m.tendon_armature != 0), "no added inertia along the tendon"),
            ("nonlinear tendon stiffness or damping (stiffnesspoly, dampingpoly)", T,
             [t for t in range(m.ntendon) if np.any(m.tendon_stiffnesspoly[t]) or np.any(m.tendon_dampingpoly[t])],
             "only the linear stiffness and damping act"),
            ("actuatorfrcrange of free joints and of hinges read into universal joints", J,
             [j for j in np.flatnonzero(m.jnt_actfrclimited != 0)
              if getattr(self.joint_site.get(int(j)), "kind", None) in ("universal", "free")],
             "their summed actuator force is not clamped"),
            ("nonlinear joint stiffness or damping (stiffnesspoly, dampingpoly)", J,
             sorted({j for j in range(m.njnt) if np.any(m.jnt_stiffnesspoly[j])} |
                    {int(m.dof_jntid[d]) for d in range(m.nv) if np.any(m.dof_dampingpoly[d])}),
             "only the linear stiffness and damping act")]
        for what, (obj, fallback), ids, consequence in checks:
            if len(ids):
                gaps.append((what, self.names_of(obj, ids, fallback), consequence))
        return gaps

    def names_of(self, obj, idx, fallback):
        idx = [int(i) for i in idx]
        listed = [_name(self.m, self.mj, obj, i, fallback) for i in idx[:6]]
        return ", ".join(listed) + (f" and {len(idx) - 6} more" if len(idx) > 6 else "")

    def report_actuation(self):
        """One warning naming every actuator and tendon feature not read, each with what the simulation does
        without it; without ``return_forces`` the actuators and tendon spring-dampers themselves are named as not
        applied."""
        m, mj = self.m, self.mj
        gaps = self.actuation_gaps()
        if not self.forces:
            if m.nu:
                gaps.insert(0, ("actuators", self.names_of(mj.mjtObj.mjOBJ_ACTUATOR, range(m.nu), "actuator"),
                                "not applied: load_mjcf(..., return_forces=True) returns them as a force element"))
            springs = [t for t in range(m.ntendon) if (m.tendon_stiffness[t] or m.tendon_damping[t])
                       and self.unread_tendon(t) is None]
            if springs:
                gaps.insert(1 if m.nu else 0, ("tendon stiffness and damping",
                                               self.names_of(mj.mjtObj.mjOBJ_TENDON, springs, "tendon"),
                                               "not applied: load_mjcf(..., return_forces=True) returns them"))
        if gaps:
            self.warn("actuators and tendons not modelled as written — " +
                      "; ".join(f"{what} ({names}): {consequence}" for what, names, consequence in gaps))

    # ---------------------------------------------------------------------------------------- warnings
    def check_values(self):
        """Values of the file the physics cannot use that MuJoCo compiles without a word, each an error naming the
        element and the value: a joint ``range`` with lower > upper (MuJoCo then leaves the joint unlimited)."""
        m = self.m
        for j in range(m.njnt):
            lo, hi = (float(x) for x in m.jnt_range[j])
            if lo > hi:
                self.fail(f"joint {self.joint_names[j]!r}: range ({lo:g}, {hi:g}) has lower > upper (MuJoCo leaves "
                          "such a joint unlimited; no position satisfies the range as written)")

    def report_unmodelled(self):
        m, mj = self.m, self.mj
        names = self.names_of
        J = mj.mjtObj.mjOBJ_JOINT
        self.check_values()
        if m.nflex:
            self.fail(f"{m.nflex} flex (deformable) elements are not supported")
        free_arm = [j for j in range(m.njnt) if int(m.jnt_type[j]) == 0
                    and np.any(m.dof_armature[m.jnt_dofadr[j]:m.jnt_dofadr[j] + 3] != 0)]
        if free_arm:
            self.warn(f"armature of free joints {names(J, free_arm, 'joint')} is read as ours and Pinocchio's (on the "
                      "body-frame velocity); MuJoCo's acts on the world-frame linear velocity, so the accelerations "
                      "differ by armature·ω×v")
        passive = [("stiffness", np.flatnonzero(m.jnt_stiffness != 0)),
                   ("damping", sorted(set(int(m.dof_jntid[d]) for d in np.flatnonzero(m.dof_damping != 0))))]
        for label, joints in passive:
            if len(joints) and not self.forces:
                self.warn(f"joint {label} of {names(J, joints, 'joint')} is not applied: load_mjcf(..., "
                          "return_forces=True) returns it as a force element")
        joints = sorted(set(int(m.dof_jntid[d]) for d in np.flatnonzero(m.dof_frictionloss != 0)))
        if joints:
            self.warn(f"joint friction loss of {names(J, joints, 'joint')} is ignored (non-smooth)")
        if m.nsensor:
            self.warn(f"sensors ({names(mj.mjtObj.mjOBJ_SENSOR, range(m.nsensor), 'sensor')}) are ignored")
        grav = np.flatnonzero(m.body_gravcomp != 0)
        if grav.size:
            self.warn(f"gravity compensation of bodies {names(mj.mjtObj.mjOBJ_BODY, grav, 'body')} is ignored")
        if m.opt.density or m.opt.viscosity or np.any(m.opt.wind != 0):
            self.warn("fluid forces (option density/viscosity/wind) are ignored")
        mocap = np.flatnonzero(m.body_mocapid >= 0)
        if mocap.size:
            self.warn(f"mocap bodies {names(mj.mjtObj.mjOBJ_BODY, mocap, 'body')} are kept fixed where the file "
                      "puts them")
        note = integrator_note(INTEGRATOR_NAMES.get(int(m.opt.integrator), str(m.opt.integrator)))
        if note:
            self.warn(note)


def load_mjcf(source, return_mapping=False, return_forces=False, recursion="auto", return_collision=False,
              collision=True, floor=None):
    """A :class:`~mrds_jax.system.System` from an MJCF file path, an MJCF string or a ``mujoco.MjModel``
    (see the module docstring for the mapping). With ``return_mapping=True``, returns ``(system,
    mapping)`` with an :class:`MjcfMapping` for state conversions (``mapping.state()`` is MuJoCo's
    reference configuration ``qpos0``, where body-based loop anchors were computed; ``mapping.keyframe_state(name,
    system)`` a keyframe's consistent state). With ``return_forces=True``
    the force elements the file describes come last: a tuple with the joints' passive forces
    (:class:`~mrds_jax.system.JointSpringDamper`) and the actuators (:class:`~mrds_jax.system.Actuators`, control
    zero until :func:`~mrds_jax.system.with_control`), for ``simulate(..., forces=...)``.

    ``collision`` (default True): the file's collision geometry (geoms, ``<pair>``, ``<exclude>``, friction) becomes
    the system's :class:`~mrds_jax.collision.CollisionModel` (``System.collision``), so that
    :func:`~mrds_jax.system.simulate` enforces the contacts (and the joint limits the file gives) as MuJoCo would;
    ``collision=False`` leaves it out. ``floor``: True, a height (m) or a :class:`Floor` adds a ground plane to a
    file that has none (to its MJCF before MuJoCo compiles it, so ``mujoco`` sees the same model). With ``return_collision=True`` the collision model also comes last (``(system, collision)``, ``(system, mapping, forces, collision)``, ...); its geoms ride
    on the modules' body operational points (``geom_world_pose`` of the points' placements gives their world
    poses).

    ``recursion``: how the modules' tree recursions run (``Topology.recursion``: "auto", "unrolled" or
    "level_scan"; :mod:`mrds_jax.dynamics.levels`) — e.g. "level_scan" for the four-bar biped of
    ``experiments/biped_timing.py``, whose 15 links are below the automatic threshold but whose forward dynamics
    compiles faster and runs faster that way (the table in ``experiments/out/biped_timing.md``).

    Raises FileNotFoundError for a missing file, ValueError naming the file and passing MuJoCo's message
    for a model MuJoCo rejects, and ValueError naming the element for what cannot be imported; warns
    (``UserWarning``) for each kind of element that is ignored."""
    from ..system import build_system
    model, where = compile_mjcf(source, floor)
    imp = _Importer(model, where, forces=return_forces)
    imp.report_unmodelled()
    if not any(imp.weld[b] == b for b in range(1, model.nbody)):
        imp.fail("the model has no moving body")
    with jax.ensure_compile_time_eval():
        imp.build_modules()
        imp.report_actuation()
        contacts = imp.build_contacts()
        modules = {}
        for name in imp.names:
            builder = imp.builders[name]
            for fname, link, T in imp.frames[name]:
                builder.add_frame(fname, link, position=T.p, rotation=T.R)
            modules[name] = check_mass_matrix(builder.build().with_recursion(recursion), where)
        forces = imp.build_forces() if return_forces else ()
        geometry = imp.build_collision(modules) if (collision or return_collision) else None
    system = build_system(modules, contacts, couplings=imp.couplings,
                          collision=geometry if collision and geometry.n_slots else None,
                          tendon_limits=imp.tendon_limits())
    collision = (geometry,) if return_collision else ()
    if not return_mapping:
        return (system, *((forces,) if return_forces else ()), *collision) if return_forces or collision else system
    qi, di, free = [], [], []
    for name in imp.names:
        bodies = [b for b in imp.links if imp.module_of[b] == name]
        jnts = [j for b in bodies for j in imp.joints[b][1]]
        q_ = [np.arange(model.jnt_qposadr[j], model.jnt_qposadr[j] + _NQ[int(model.jnt_type[j])]) for j in jnts]
        d_ = [np.arange(model.jnt_dofadr[j], model.jnt_dofadr[j] + _NV[int(model.jnt_type[j])]) for j in jnts]
        fq, fv, offs = 0, 0, []
        for j in jnts:
            if model.jnt_type[j] == 0:
                offs.append((fq, fv))
            fq, fv = fq + _NQ[int(model.jnt_type[j])], fv + _NV[int(model.jnt_type[j])]
        qi.append(np.concatenate(q_))
        di.append(np.concatenate(d_))
        free.append(tuple(offs))
    integrator = INTEGRATOR_NAMES.get(int(model.opt.integrator), str(model.opt.integrator))
    mapping = MjcfMapping(tuple(imp.names), tuple(qi), tuple(di), tuple(free), np.array(model.qpos0),
                          keyframes=_keyframes(model, imp.mj), constrained=bool(contacts or imp.couplings),
                          actuator_names=tuple(_name(model, imp.mj, imp.mj.mjtObj.mjOBJ_ACTUATOR, u, "actuator")
                                               for u in range(model.nu)),
                          timestep=float(model.opt.timestep), integrator=integrator)
    return (system, mapping, *((forces,) if return_forces else ()), *collision)


_NQ = {0: 7, 1: 4, 2: 1, 3: 1}   # mjJNT_FREE, BALL, SLIDE, HINGE
_NV = {0: 6, 1: 3, 2: 1, 3: 1}


def _keyframes(model, mujoco):
    """The model's keyframes as (name, qpos, qvel, ctrl) (MuJoCo's ``key_qpos``/``key_qvel``/``key_ctrl``; unnamed
    ones ``key<k>``)."""
    return tuple((_name(model, mujoco, mujoco.mjtObj.mjOBJ_KEY, k, "key"), np.array(model.key_qpos[k]),
                  np.array(model.key_qvel[k]), np.array(model.key_ctrl[k])) for k in range(model.nkey))


INTEGRATOR_NAMES = {0: "Euler", 1: "RK4", 2: "implicit", 3: "implicitfast"}    # mjtIntegrator


def integrator_note(integrator):
    """What runs in place of MuJoCo's ``integrator`` (its name), or None where it is what runs: a system with
    contact or joint limits takes the velocity-level step (semi-implicit Euler, as MuJoCo's Euler: no note); without,
    ``simulate``'s ``integrator`` argument (RK4 by default: no note for MuJoCo's RK4). MuJoCo's implicit
    integrators treat velocity-dependent forces (joint damping, actuator velocity gains and the derivative terms of
    position servos) implicitly; here they are explicit, stable for dt below about 2 × (inertia / damping)."""
    if integrator in ("implicit", "implicitfast"):
        return (f"the file's integrator {integrator!r} is not available: velocity-dependent forces (joint damping, "
                "actuator velocity gains) are integrated explicitly — the velocity-level step (semi-implicit Euler) "
                "with contact or limits, simulate's integrator argument (RK4 by default) without; stiff damping may "
                "need a smaller dt than the file's")
    if integrator == "RK4":
        return ("the file's integrator 'RK4' runs as simulate's default (RK4) without contact or limits; with them "
                "the velocity-level step (semi-implicit Euler) runs")
    return None
