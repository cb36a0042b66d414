"""One insertion as a pure function: the scene (:func:`.scene.peg_in_hole`) then the hard-contact rollout
(``contact_rollout``), recorded at the stored states as an :class:`Insertion` (the tip's depth, lateral offset and
tilt, the contact force on the peg, the actuator forces, loop closure, penetration, convergence): jittable, and
batched with ``jax.vmap`` over the design and the task.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ...spatial import quat_to_rotation
from ...system import SystemState, contact_rollout, row_layout
from ..params import CKCMParams
from ..states import closure_errors
from .compliance import compliance_forces
from .scene import CONTACT, peg_in_hole
from .task import LAYOUT, MOUTH, TOOL_DEPTH, AssemblyTask


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


def _peg_sign(system):
    """(n_slots,) +1 where the peg is a slot's geom 2 (the slot's force is on it), −1 where it is geom 1."""
    model = system.collision
    peg = model.geom_names.index("peg")
    return jnp.asarray([1.0 if j == peg else -1.0 if i == peg else 0.0
                        for (i, j), n in zip(model.pairs, model.slots) for _ in range(n)])
