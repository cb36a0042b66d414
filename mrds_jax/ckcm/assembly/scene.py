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
masses) — is traced: :func:`peg_in_hole` builds the scene from them inside ``jit``/``vmap`` as well; :mod:`.insertion` runs one scenario
as a pure function (``jax.vmap`` runs thousands in one program) and :mod:`.outcome` decides from the motion and the
contact state whether a run inserted, jammed or wedged.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...collision import collision_model
from ...model.tree import Module
from ...pytree import replace
from ...system import ContactSettings, build_system
from ...system.ncp import NCPSettings
from ..legs import leg_model
from ..mechanism import MODULE_NAMES, PAYLOAD, PAYLOAD_TOPOLOGY, ball_joints, build_ckcm_system
from ..params import CKCMParams, nominal
from ..states import euler_from_rotation, state_from_pose
from .compliance import ComplianceReference, compliance_actuators, gravity_forces
from .peg_hole import HoleLayout, PegHole, peg_hole_geoms, with_peg_hole
from .task import LAYOUT, MOUTH, TOOL, TOOL_DEPTH, AssemblyTask, check_task, default_task


def payload_with_tool(params: CKCMParams, tool_depth=TOOL_DEPTH) -> Module:
    """The payload module of ``mechanism`` with one more operational point, ``tool`` at ᴬ(0, 0, −tool_depth), axes
    those of {A}: where the peg's tip sits."""
    from ..mechanism import payload_module
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
