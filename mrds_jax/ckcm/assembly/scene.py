"""Peg-in-hole assembly with the CKCM end-effector: the paper's Stewart platform (Nguyen & Pooran 1989, the exact
multibody plant of ``mechanism``) carries a capsule peg on its payload above a hole fixed to the base
(``peg_hole``), and the compliant force controller (``compliance``: an impedance about a remote centre of
compliance, RCC) drives the insertion; frictional contact is hard (the velocity-level step of
``mrds_jax.system.timestepping``: Coulomb cone, no penetration beyond the solver's tolerance).

The scene (``peg_in_hole``): the payload carries an operational point ``tool`` at ᴬ(0, 0, −``tool_depth``), the peg's
tip; the peg (radius r, straight part L) rises from it along z_A. The hole's mouth is at ``mouth`` (world), its axis
along +z; its walls face ±x (a slot; ``HoleLayout``). At t = 0 the payload is at rest with the peg tip ``standoff``
above the mouth, offset by the **lateral error** along x and tilted by the **angular error** about y (a rotation of
the payload about the tip) — Whitney's initial errors ε₀ and θ₀ (1982, §3). The controller's reference is that
initial pose: its compliance centre moves down the hole's axis at the insertion speed and/or pushes with the
insertion force; the RCC's compliance lets the peg comply with the contact forces.

Everything a batch varies — the ``PegHole`` (radius, length, clearance, depth, μ, chamfer), the ``Compliance``
(K, D, compliance centre, insertion force and speed), the ``Misalignment`` and the design ``CKCMParams`` (θA, θB,
masses) — is traced: ``insertion`` runs one scenario as a pure function, ``jax.vmap`` runs thousands in one program.
``outcome_of`` decides from the motion and the contact state whether a run inserted, jammed or wedged.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..collision import collision_model
from ..model.tree import Module
from ..pytree import replace
from ..spatial import quat_to_rotation
from ..system import ContactSettings, build_system, contact_rollout, row_layout
from ..system.ncp import NCPSettings
from ..validation import is_traced
from .compliance import (Compliance, ComplianceReference, check_compliance, compliance_actuators, compliance_forces,
                         gravity_forces, rcc)
from .errors import CKCMInputError
from .legs import leg_model
from .mechanism import MODULE_NAMES, PAYLOAD, PAYLOAD_TOPOLOGY, ball_joints, build_ckcm_system
from .params import CKCMParams, nominal
from .peg_hole import HoleLayout, PegHole, peg_hole_geoms, start_clearance, validate_peg_hole, with_peg_hole
from .states import euler_from_rotation, state_from_pose
from .whitney import Contact as WhitneyContact, TwoPoint, wedged as whitney_wedged

TOOL = "tool"
TOOL_DEPTH = 0.12                    # m, the peg tip below the payload's centroid
MOUTH = (0.0, 0.0, 0.89)             # m, the hole's mouth: 1 cm below the tip at the home pose (payload at z = 1 m)
LAYOUT = HoleLayout(shape="slot", floor=True, chamfer=True)


class Misalignment(NamedTuple):
    """The initial errors (traced): ``lateral`` the peg tip's offset from the hole's axis along the hole's x (m),
    ``angular`` the peg's tilt about the hole's y axis, a rotation about the tip (rad; positive turns the peg's
    upper end towards −x... i.e. R_y(angle)), ``standoff`` the tip's height above the mouth (m)."""
    lateral: float = 0.0
    angular: float = 0.0
    standoff: float = 0.005


class AssemblyTask(NamedTuple):
    """One insertion's traced numbers: the peg and hole, the controller, the initial errors, and the depth of the
    tip below the mouth that counts as inserted (m)."""
    peg_hole: PegHole
    compliance: Compliance
    misalignment: Misalignment
    target_depth: float


def default_compliance(centre=0.0, tip_depth=TOOL_DEPTH) -> Compliance:
    """The scene's RCC: lateral 2e4 N/m, axial 1e3 N/m, angular 200 N m/rad (torsion the same), critically damped
    against about 60 kg and 2 kg m² (lateral/axial 2·√(k m), angular 2·√(k I)), the compliance centre ``centre``
    behind the tip, an insertion force of 30 N and a reference speed of 5 cm/s down the hole."""
    k = np.array([200.0, 200.0, 200.0, 2e4, 2e4, 1e3])
    inertia = np.array([2.0, 2.0, 2.0, 60.0, 60.0, 60.0])
    d = 2 * np.sqrt(k * inertia)
    return rcc(k[0], k[3], k[5], torsional=k[2], damping=d, centre=centre, tip=(0.0, 0.0, -tip_depth),
               insertion_force=30.0, insertion_speed=0.05)


def default_task(**changes) -> AssemblyTask:
    """The scene's default ``AssemblyTask`` (a chamfered slot: r = 1 cm, c = 0.2 mm, 45° chamfer of 3 mm, μ = 0.3,
    hole 5 cm deep, target depth 3 cm); keyword overrides replace fields."""
    base = AssemblyTask(PegHole(peg_radius=0.01, peg_length=0.06, clearance=2e-4, hole_depth=0.05, friction=0.3,
                                chamfer=0.003),
                        default_compliance(), Misalignment(), 0.03)
    return as_arrays(base._replace(**changes))


def as_arrays(task: AssemblyTask) -> AssemblyTask:
    """``task`` with every leaf a float array (the dtype of ``float``: float64 with x64)."""
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(float)), task)


def check_task(task: AssemblyTask, layout=LAYOUT, where="peg_in_hole") -> AssemblyTask:
    """Named errors before anything compiles: the peg and hole (``validate_peg_hole``: an interference fit, a peg
    wider than the mouth, ...), the controller (``check_compliance``), finite errors and a target depth within the
    hole and a peg that starts clear of the hole's walls (``peg_hole.start_clearance`` ≥ 0: a start inside them is
    pushed out by the position correction over the first steps, an initial penetration of the rollout)
    (``CKCMInputError``). Traced fields pass unchecked."""
    if not isinstance(task, AssemblyTask):
        raise CKCMInputError(f"{where}: expected an AssemblyTask, got {type(task).__name__}")
    validate_peg_hole(PegHole(*task.peg_hole), layout, where)
    check_compliance(task.compliance, where)
    if not is_traced(task.misalignment):
        m = np.asarray(task.misalignment, float)
        if not np.all(np.isfinite(m)):
            raise CKCMInputError(f"{where}: the misalignment (lateral, angular, standoff) must be finite, got {m}")
        if not is_traced(task.peg_hole):
            gap = float(np.min(start_clearance(task.peg_hole, m[0], m[2], layout)))
            if gap < 0:
                lateral, standoff = np.round(1e3 * m[0], 4), np.round(1e3 * m[2], 4)
                raise CKCMInputError(f"{where}: the peg starts inside the hole's walls: its end sphere (the tip "
                                     f"{lateral} mm from the axis, {standoff} mm above the mouth) overlaps them by "
                                     f"{1e3 * -gap:.3g} mm (peg_hole.start_clearance); raise the standoff")
    if not is_traced((task.target_depth, task.peg_hole.hole_depth)):
        if not 0 < float(task.target_depth) < float(task.peg_hole.hole_depth):
            raise CKCMInputError(f"{where}: target_depth = {float(task.target_depth):g} m must lie inside the hole "
                                 f"(0, hole_depth = {float(task.peg_hole.hole_depth):g} m)")
    return task


# ----------------------------------------------------------------------------- the scene
def payload_with_tool(params: CKCMParams, tool_depth=TOOL_DEPTH) -> Module:
    """The payload module of ``mechanism`` with one more operational point, ``tool`` at ᴬ(0, 0, −tool_depth), axes
    those of {A}: where the peg's tip sits."""
    from .mechanism import payload_module
    base = payload_module(params)
    f = base.params.frame_p.dtype
    tp = replace(base.params, frame_R=jnp.concatenate([base.params.frame_R, jnp.eye(3, dtype=f)[None]]),
                 frame_p=jnp.concatenate([base.params.frame_p,
                                          jnp.zeros((1, 3), f).at[0, 2].set(-jnp.asarray(tool_depth, f))]))
    topology = dataclasses.replace(PAYLOAD_TOPOLOGY, frame_names=PAYLOAD_TOPOLOGY.frame_names + (TOOL,),
                                   frame_links=PAYLOAD_TOPOLOGY.frame_links + (0,))
    return Module(params=tp, topology=topology)


@functools.lru_cache(maxsize=None)
def _template_collision(layout, mouth, dtype):
    """The collision model of the default peg and hole (its pairs and filters; sizes are replaced per scenario by
    ``with_peg_hole``), built once per layout with concrete numbers."""
    with jax.ensure_compile_time_eval():
        p = default_task().peg_hole
        p = PegHole(*(jnp.asarray(x, jnp.dtype(dtype)) for x in p))
        if not layout.chamfer:
            p = p._replace(chamfer=jnp.zeros((), jnp.dtype(dtype)))
        geoms = peg_hole_geoms(p, PAYLOAD, TOOL, layout, position=np.asarray(mouth))
        system = build_ckcm_system(nominal(), "bench")
        modules = dict(zip(MODULE_NAMES, system.modules[:-1] + (payload_with_tool(nominal()),)))
        return collision_model(geoms, modules)


def assembly_system(params: CKCMParams, peg_hole: PegHole, legs="bench", layout=LAYOUT, mouth=MOUTH,
                    tool_depth=TOOL_DEPTH):
    """The CKCM multibody plant (``build_ckcm_system``) with the ``tool`` point on its payload, the peg on it and
    the hole on the ground (``peg_hole``): a ``System`` with a collision model. ``params`` and ``peg_hole`` may be
    traced (one compiled program for every design and every peg and hole)."""
    legs = leg_model(params, legs)
    ckcm = build_ckcm_system(params, legs)
    modules = dict(zip(MODULE_NAMES, ckcm.modules[:-1] + (payload_with_tool(params, tool_depth),)))
    dtype = jnp.result_type(params.m).name
    system = build_system(modules, ball_joints(dtype),
                          collision=_template_collision(layout, tuple(float(x) for x in mouth), dtype))
    return with_peg_hole(system, peg_hole, layout, position=jnp.asarray(mouth, jnp.dtype(dtype)))


def _rot_y(angle):
    c, s = jnp.cos(angle), jnp.sin(angle)
    o, i = jnp.zeros_like(angle), jnp.ones_like(angle)
    return jnp.stack([jnp.stack([c, o, s]), jnp.stack([o, i, o]), jnp.stack([-s, o, c])])


def initial_pose(task: AssemblyTask, mouth=MOUTH, tool_depth=TOOL_DEPTH):
    """(Φ (6,), R (3, 3)) of the payload at t = 0: the tip at mouth + (lateral, 0, standoff), the payload turned by
    R_y(angular) about the tip."""
    m = task.misalignment
    f = jnp.result_type(m.lateral)
    R = _rot_y(m.angular)
    tip = jnp.asarray(mouth, f) + jnp.stack([m.lateral, 0.0 * m.lateral, m.standoff])
    p = tip - R @ jnp.zeros(3, f).at[2].set(-tool_depth)
    return jnp.concatenate([p, euler_from_rotation(R)]), R


def reference_of(params: CKCMParams, task: AssemblyTask, legs="bench", mouth=MOUTH,
                 tool_depth=TOOL_DEPTH) -> ComplianceReference:
    """The controller's reference: the initial pose (``initial_pose``), moving down the hole's axis (−z), with the
    gravity forces at that pose as its feed-forward (``compliance.gravity_forces``: one closed-chain inverse dynamics
    per run; the law then runs without it per step, ``exact_gravity=False``)."""
    pose, R = initial_pose(task, mouth, tool_depth)
    c_A = task.compliance.tip + task.compliance.centre * jnp.zeros(3, R.dtype).at[2].set(1.0)
    ff = gravity_forces(build_ckcm_system(params, leg_model(params, legs)), state_from_pose(params, pose))
    return ComplianceReference(pose[:3] + R @ c_A, R, jnp.zeros(3, R.dtype).at[2].set(-1.0), ff)


class Scene(NamedTuple):
    """``peg_in_hole``'s result: the ``system`` (plant, peg and hole), its initial ``state`` (at rest), ``forces``
    (the controller as an actuator element), the contact ``settings``, and what built them."""
    system: object
    state: object
    forces: tuple
    settings: ContactSettings
    params: CKCMParams
    task: AssemblyTask
    layout: HoleLayout


CONTACT = ContactSettings(ncp=NCPSettings(tolerance=1e-5, stages=40, iterations=200, relaxation=1.0), margin=1e-4,
                          max_contacts=8)
"""The scene's contact step. Rows are taken into a step's problem within 0.1 mm (every slot the peg can reach in a
step at 10 cm/s), at most 8 contact slots at once (the peg in a slot touches at one or two points, the chamfer or
the mouth's edge and the opposite wall; overflow is reported per stored step). ADMM without over-relaxation: in
Whitney's two-point contact the rigid peg's impulses have a null direction (the squeeze along the line between the
two points, the wedging mode) and a contact sits on its cone's boundary, where over-relaxed ADMM (α = 1.6) cycles
without converging (it did on the jammed insertions) and plain ADMM converges. Tolerance 1e-5 of the step's
velocity scale max|g| (about 0.05 m/s here: ≤ 5e-7 m/s of velocity error, 4e3 times below the 2 mm/s that
``outcome_of`` calls stuck, ≤ 2e-7 m of position over a 0.4 s insertion), at most 40 × 200 iterations."""


def peg_in_hole(params: CKCMParams | None = None, task: AssemblyTask | None = None, legs="bench", layout=LAYOUT,
                settings=CONTACT) -> Scene:
    """The scene ``ckcm_peg_in_hole`` (module docstring): defaults ``nominal()`` (Nguyen & Pooran eq. 58) and
    ``default_task()``. Concrete input is checked first (named errors); traced input builds the same scene inside
    ``jit``/``vmap``."""
    params = nominal() if params is None else params
    task = default_task() if task is None else task
    check_task(task, layout)
    system = assembly_system(params, task.peg_hole, legs, layout)
    pose, _ = initial_pose(task)
    state = state_from_pose(params, pose)
    forces = (compliance_actuators(params, task.compliance, reference_of(params, task, legs), legs,
                                   exact_gravity=False),)
    return Scene(system, state, forces, settings, params, task, layout)


# ----------------------------------------------------------------------------- one insertion
class Insertion(NamedTuple):
    """A run's record at the stored states (n,): times (s), the tip's ``depth`` below the mouth (m), its ``lateral``
    offset along x (m), the peg's ``tilt`` about y (rad), the total ``contact_force`` on the peg (n, 3; N, world),
    the number of touching contact slots, the actuator ``forces`` (n, 6; N), loop-closure and penetration errors
    (m), the contact solve's convergence flags, and the raw ``ContactTrajectory``."""
    t: jax.Array
    depth: jax.Array
    lateral: jax.Array
    tilt: jax.Array
    contact_force: jax.Array
    touching: jax.Array
    forces: jax.Array
    closure: jax.Array
    penetration: jax.Array
    converged: jax.Array
    trajectory: object


def tip_position(state_q, tool_depth=TOOL_DEPTH):
    """The peg tip's world position from the payload's q = [p; quaternion]."""
    R = quat_to_rotation(state_q[3:] / jnp.linalg.norm(state_q[3:]))
    return state_q[:3] - tool_depth * R[:, 2], R


def insertion(params: CKCMParams, task: AssemblyTask, dt, n_steps, decimation=10, legs="bench", layout=LAYOUT,
              settings=CONTACT) -> Insertion:
    """One insertion (``peg_in_hole`` then ``contact_rollout``): pure, jittable (``dt`` traced; ``n_steps``,
    ``decimation``, ``legs`` as a name, ``layout`` and ``settings`` static), batched with ``jax.vmap`` over
    ``params`` and ``task``."""
    from .states import closure_errors
    from ..system import SystemState
    scene = peg_in_hole(params, task, legs, layout, settings)
    traj = contact_rollout(scene.system, scene.state.q, scene.state.v, dt, n_steps, decimation,
                           forces=scene.forces, settings=settings)
    mouth = jnp.asarray(MOUTH, traj.t.dtype)
    tip, R = jax.vmap(tip_position)(traj.q[-1])
    f = traj.contact_forces(scene.system)                        # (n, slots, 3): on geom 2 by geom 1
    sign = _peg_sign(scene.system)
    touching = traj.active_set(scene.system, 0.0)
    gaps = traj.gaps[:, row_layout(scene.system).n_unilateral:]

    reference = scene.forces[0].control.reference

    def record(q, v, t):
        state = SystemState(tuple(q), tuple(v))
        tau = compliance_forces(None, params, task.compliance, reference, state, t, exact_gravity=False)
        return tau, jnp.max(closure_errors(params, state))

    tau, closure = jax.lax.map(lambda x: record(*x), (traj.q, traj.v, traj.t))
    return Insertion(traj.t, mouth[2] - tip[:, 2], tip[:, 0] - mouth[0], jnp.arctan2(R[:, 0, 2], R[:, 2, 2]),
                     jnp.einsum("s,tsk->tk", sign, f), jnp.sum(touching, axis=1), tau, closure,
                     jnp.maximum(-jnp.min(gaps, axis=1), 0.0), traj.converged, traj)


OUTCOMES = ("inserted", "jammed", "wedged", "blocked", "moving")


class Outcome(NamedTuple):
    """A run's verdict (``outcome_of``): ``code`` into ``OUTCOMES``; the insertion ``time`` (s; −1 if never), the
    peak total contact force on the peg and the peak actuator force over the stored states (N), the final depth
    (m), and the run's worst loop closure, penetration (m) and whether every contact solve converged."""
    code: jax.Array
    time: jax.Array
    peak_contact: jax.Array
    peak_actuator: jax.Array
    depth: jax.Array
    closure: jax.Array
    penetration: jax.Array
    converged: jax.Array


def outcome_of(run: Insertion, task: AssemblyTask, stall_speed=2e-3, window=0.1) -> Outcome:
    """The outcome from the motion and the contact state: **inserted** when the tip reached ``target_depth``; else,
    if the tip's descent over the last ``window`` s is slower than ``stall_speed`` (m/s), the peg is stuck: in
    two-point contact in the hole (touching slots whose normals push it towards +x and towards −x) it is
    **wedged** where the line between the two points lies inside both friction cones (Whitney's wedging condition,
    ``whitney.wedged`` on the simulated contact points and normals) and
    **jammed** otherwise; stuck without two-point contact it is **blocked** (on the mouth or the chamfer). A run
    still descending at the end is **moving**. Works on one run (``vmap`` for a batch)."""
    t, depth = run.t, run.depth
    reached = depth >= task.target_depth
    inserted = jnp.any(reached)
    time = jnp.where(inserted, t[jnp.argmax(reached)], -1.0)
    dt_out = t[1] - t[0]
    k = jnp.maximum(jnp.round(window / dt_out).astype(jnp.int32), 1)
    n = t.shape[0]
    back = jnp.take(depth, jnp.maximum(n - 1 - k, 0))
    stuck = (depth[-1] - back) < stall_speed * window
    traj = run.trajectory
    layout_start = traj.impulses.shape[1] - 3 * traj.points.shape[1]
    lam_n = traj.impulses[-1, layout_start::3]
    normal = -traj.frames[-1, :, 0, :]                                 # into the peg (the peg is each pair's geom 1)
    touching = lam_n > 0
    push_px = jnp.where(touching, normal[:, 0], -jnp.inf)
    push_mx = jnp.where(touching, -normal[:, 0], -jnp.inf)
    i, j = jnp.argmax(push_px), jnp.argmax(push_mx)
    two_point = (push_px[i] > 0.5) & (push_mx[j] > 0.5) & (depth[-1] > 0)
    tangent = jnp.zeros(3, normal.dtype)                               # not read by the wedging condition
    pair = TwoPoint(None, None, WhitneyContact(traj.points[-1, i], normal[i], tangent),
                    WhitneyContact(traj.points[-1, j], normal[j], tangent))
    wedged = whitney_wedged(pair, task.peg_hole.friction)
    code = jnp.where(inserted, 0, jnp.where(stuck, jnp.where(two_point, jnp.where(wedged, 2, 1), 3), 4))
    return Outcome(code, time, jnp.max(jnp.linalg.norm(run.contact_force, axis=-1)), jnp.max(jnp.abs(run.forces)),
                   depth[-1], jnp.max(run.closure), jnp.max(run.penetration), jnp.all(run.converged))


def plot_insertion(runs: Insertion, labels, path):
    """Depth (mm), total contact force on the peg (N) and largest actuator force (N) against time (s) of a batch of
    insertions (an ``Insertion`` with a leading batch axis, one label each), as a PNG at ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = jax.tree.map(np.asarray, runs)
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for k, label in enumerate(labels):
        axes[0].plot(runs.t[k], 1e3 * runs.depth[k], label=label)
        axes[1].plot(runs.t[k], np.linalg.norm(runs.contact_force[k], axis=-1), label=label)
        axes[2].plot(runs.t[k], np.abs(runs.forces[k]).max(axis=-1), label=label)
    axes[0].set_ylabel("tip depth below the mouth (mm)")
    axes[1].set_ylabel("total contact force on the peg (N)")
    axes[2].set_ylabel("largest actuator force (N)")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _peg_sign(system):
    """(n_slots,) +1 where the peg is a slot's geom 2 (the slot's force is on it), −1 where it is geom 1."""
    model = system.collision
    peg = model.geom_names.index("peg")
    return jnp.asarray([1.0 if j == peg else -1.0 if i == peg else 0.0
                        for (i, j), n in zip(model.pairs, model.slots) for _ in range(n)])


__all__ = ["TOOL", "TOOL_DEPTH", "MOUTH", "LAYOUT", "Misalignment", "AssemblyTask", "default_compliance",
           "default_task", "as_arrays", "check_task", "payload_with_tool", "assembly_system", "initial_pose",
           "reference_of", "Scene", "CONTACT", "peg_in_hole", "Insertion", "tip_position", "insertion", "OUTCOMES",
           "Outcome", "outcome_of", "plot_insertion"]
