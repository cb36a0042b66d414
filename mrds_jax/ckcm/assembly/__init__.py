"""Peg-in-hole assembly with the CKCM end-effector (Whitney 1982; docs/guide/assembly.md): the paper's Stewart
platform carries a capsule peg into a hole under a compliant force controller, with hard frictional contact. One
file per concern:

- ``compliance``  compliant force control: a Cartesian impedance about a remote centre of compliance (RCC) through
                  the six actuators, with a commanded insertion force or speed (Whitney 1982; Hogan 1985)
- ``peg_hole``    the peg (a capsule) and the hole (boxes: a slot or a square hole, floor, chamfer) as collision
                  geoms whose every number is traced (``PegHole``, ``with_peg_hole``)
- ``whitney``     Whitney's quasi-static analysis of a rigid planar peg: two-point contact, jamming, wedging
- ``peg_rig``     a planar test rig for Whitney's analysis: the peg on a chain x, z, θ pushed by a support
- ``task``        one insertion's traced numbers (``AssemblyTask``: peg and hole, RCC, initial errors, target depth),
                  their defaults and checks, and the scene's fixed geometry
- ``scene``       the scene ``ckcm_peg_in_hole`` (``peg_in_hole``: plant, peg and hole, controller)
- ``insertion``   one insertion as a pure batched function (``insertion``) and its record (``Insertion``)
- ``outcome``     a run's verdict from the motion and the contact state (``outcome_of``: inserted, jammed, wedged,
                  blocked, moving)
- ``plot``        depth, contact force and actuator force against time of a batch of insertions
- ``design``      design through contact: the RCC and θA, θB as a design vector in a box, the objective over a batch
                  of misalignments
- ``optimizers``  Adam through the rollouts and CMA-ES on that objective at equal wall time

The scene's public names (``task``, ``scene``, ``insertion``, ``outcome``, ``plot``) are gathered here, so
``from mrds_jax.ckcm import assembly as A; A.peg_in_hole(...)`` reads as before the package.
"""
from .insertion import Insertion, insertion, tip_position
from .outcome import OUTCOMES, Outcome, outcome_of
from .plot import plot_insertion
from .scene import CONTACT, Scene, assembly_system, initial_pose, payload_with_tool, peg_in_hole, reference_of
from .task import (LAYOUT, MOUTH, TOOL, TOOL_DEPTH, AssemblyTask, Misalignment, as_arrays, check_task,
                   default_compliance, default_task)

__all__ = ["TOOL", "TOOL_DEPTH", "MOUTH", "LAYOUT", "Misalignment", "AssemblyTask", "default_compliance",
           "default_task", "as_arrays", "check_task", "payload_with_tool", "assembly_system", "initial_pose",
           "reference_of", "Scene", "CONTACT", "peg_in_hole", "Insertion", "tip_position", "insertion", "OUTCOMES",
           "Outcome", "outcome_of", "plot_insertion"]
