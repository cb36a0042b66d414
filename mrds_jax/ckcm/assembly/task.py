"""One peg-in-hole insertion's traced numbers (``AssemblyTask``: the peg and hole, the RCC controller, the initial
errors, the target depth), their defaults and their named checks, and the scene's fixed geometry (the tool point's
depth below the payload, the hole's mouth, the hole's layout) that :mod:`.scene` builds from.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...validation import is_traced
from ..errors import CKCMInputError
from .compliance import Compliance, check_compliance, rcc
from .peg_hole import HoleLayout, PegHole, start_clearance, validate_peg_hole


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
