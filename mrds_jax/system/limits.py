"""Joint limits along a trajectory: the loaders keep a file's position limits (``Topology.joint_limits``);
they are inequalities, not enforced by the dynamics, so ``simulate`` reports where a motion leaves them."""
import warnings
from typing import NamedTuple

import numpy as np


class LimitExit(NamedTuple):
    """The first stored state at which joint ``joint`` of module ``module`` is outside its limits."""
    module: str
    joint: str
    t: float
    q: float
    lower: float
    upper: float


class JointLimitWarning(UserWarning):
    """A trajectory leaves the position limits a module's file gives (they are not enforced)."""


def limited_joints(system):
    """(module index, module name, joint name, index in the module's q, lower, upper) of every joint whose module
    keeps position limits (``Topology.joint_limits``), in module and joint order."""
    for k, (name, module) in enumerate(zip(system.module_names, system.modules)):
        topology = getattr(module, "topology", None)
        for j, lim in enumerate(getattr(topology, "joint_limits", ()) or ()):
            if lim is not None:
                yield k, name, topology.joint_names[j], topology.q_slices[j].start, float(lim[0]), float(lim[1])


def joint_limits_at(system, state):
    """The limited joints at one concrete state: ``{"module.joint": dict(lower, upper, q, inside)}`` (what
    ``mrds-jax check`` lists; the limits are kept, not enforced)."""
    out = {}
    for k, name, joint, i, lower, upper in limited_joints(system):
        q = float(np.asarray(state.q[k])[i])
        out[f"{name}.{joint}"] = dict(lower=lower, upper=upper, q=q, inside=bool(lower <= q <= upper))
    return out


def limit_exits(system, traj):
    """:class:`LimitExit` of every limited joint that leaves its range at some stored state of ``traj``
    (the first such state), in order of time (concrete trajectories; numpy, nothing compiled)."""
    out = []
    t = np.asarray(traj.t, dtype=float)
    for k, name, joint, i, lower, upper in limited_joints(system):
        q = np.asarray(traj.q[k])[:, i]
        outside = np.flatnonzero((q < lower) | (q > upper))
        if outside.size:
            first = int(outside[0])
            out.append(LimitExit(name, joint, float(t[first]), float(q[first]), lower, upper))
    return tuple(sorted(out, key=lambda e: e.t))


def report_limits(system, traj, max_listed=10):
    """Warn (:class:`JointLimitWarning`) naming the first time and the joint where the trajectory leaves each
    joint's limits; returns the :func:`limit_exits`."""
    exits = limit_exits(system, traj)
    if exits:
        listed = "; ".join(f"{e.module}/{e.joint} at t = {e.t:g} s (q = {e.q:.6g}, limits [{e.lower:g}, {e.upper:g}])"
                           for e in exits[:max_listed])
        more = f" and {len(exits) - max_listed} more" if len(exits) > max_listed else ""
        warnings.warn(f"the trajectory leaves the joint limits (not enforced): {listed}{more}", JointLimitWarning,
                      stacklevel=4)    # simulate's caller, past simulate and its wrapper (reject_moved_keywords)
    return exits
