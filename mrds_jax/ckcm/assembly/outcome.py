"""A run's verdict (:func:`outcome_of`): inserted, jammed, wedged (Whitney's wedging condition on the simulated
contact points and normals), blocked or still moving, from an :class:`~.insertion.Insertion`'s motion and its last
contact state.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .insertion import Insertion
from .task import AssemblyTask
from .whitney import Contact as WhitneyContact, TwoPoint, wedged as whitney_wedged


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
