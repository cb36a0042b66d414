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


def limit_exits(system, traj):
    """:class:`LimitExit` of every limited joint that leaves its range at some stored state of ``traj``
    (the first such state), in order of time (concrete trajectories; numpy, nothing compiled)."""
    out = []
    t = np.asarray(traj.t, dtype=float)
    for k, (name, module) in enumerate(zip(system.module_names, system.modules)):
        topology = getattr(module, "topology", None)
        for j, lim in enumerate(getattr(topology, "joint_limits", ()) or ()):
            if lim is None:
                continue
            q = np.asarray(traj.q[k])[:, topology.q_slices[j].start]
            outside = np.flatnonzero((q < lim[0]) | (q > lim[1]))
            if outside.size:
                i = int(outside[0])
                out.append(LimitExit(name, topology.joint_names[j], float(t[i]), float(q[i]), *lim))
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
                      stacklevel=3)
    return exits
