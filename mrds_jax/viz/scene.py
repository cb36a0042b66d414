"""Stick-figure geometry of a system along a trajectory, for the animation and the browser viewer.

Each module is drawn as sticks: from its root joint's origin (fixed in the world) to each link origin, from
every link origin to its children's, and to its operational points. Contacts are drawn at their P points
(with the world-axes linear constraint force ``F_EP`` when forces are given). Everything is in world
coordinates, one array per quantity with a leading time axis, computed by one ``jit(vmap)`` of forward
kinematics per system.
"""
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

FLOATING = ("free", "planar_free")         # root joints that attach a module to nothing


@dataclass
class Scene:
    """``segments``: (n_t, n_seg, 2, 3) stick end points; ``segment_module``: module index of each stick;
    ``points``: (n_t, n_c, 3) contact points (P side); ``forces``: (n_t, n_c, 3) linear constraint forces by E
    on P, world axes (zeros if not computed); ``t``: (n_t,); ``touching``: (n_t, n_c) whether each point is in
    contact (a loop's joint always; a collision slot when it carries a normal impulse), None for all."""
    t: np.ndarray
    segments: np.ndarray
    segment_module: np.ndarray
    points: np.ndarray
    forces: np.ndarray
    module_names: tuple
    contact_names: tuple
    geoms: tuple = ()          # collision geometry: (name, kind, size (3,) or a mesh's (V, 3) hull vertices,
                               # poses (n_t, 4, 4) world) per geom
    touching: np.ndarray = None

    def subsampled(self, every):
        """The scene at every ``every``-th stored state (all time-indexed fields alike: sticks, points, forces,
        contact flags, geom poses)."""
        return replace(self, t=self.t[::every], segments=self.segments[::every], points=self.points[::every],
                       forces=self.forces[::every],
                       geoms=tuple((n, k, size, poses[::every]) for n, k, size, poses in self.geoms),
                       touching=None if self.touching is None else self.touching[::every])

    def in_contact(self):
        """(n_t, n_c) bool: :attr:`touching`, every point where it was not given."""
        return np.ones(self.points.shape[:2], bool) if self.touching is None else np.asarray(self.touching, bool)

    def extent(self):
        """(centre, half size) of the motion: the sticks and the geoms that are not planes (a plane is unbounded)."""
        xyz = [self.segments.reshape(-1, 3)]
        for _, kind, size, poses in self.geoms:
            if kind != "plane":
                size = np.asarray(size)
                reach = float(np.linalg.norm(size, axis=1).max() if kind == "mesh" else np.abs(size).sum())
                xyz += [poses[:, :3, 3] + reach, poses[:, :3, 3] - reach]
        xyz = np.concatenate(xyz)
        lo, hi = xyz.min(axis=0), xyz.max(axis=0)
        return (lo + hi) / 2, max(float((hi - lo).max()) / 2, 1e-3)

    def bounds(self):
        """(lower, upper) corners of a cube holding every stick."""
        xyz = self.segments.reshape(-1, 3)
        lo, hi = xyz.min(axis=0), xyz.max(axis=0)
        c, r = (lo + hi) / 2, max(float((hi - lo).max()) / 2, 1e-3) * 1.1
        return c - r, c + r


def _module_segments(module, q):
    """(n_seg, 2, 3) sticks of one module at q: root joint origin → link, parent → child, link → frames."""
    from ..dynamics import forward_kinematics
    t, p = module.topology, module.params
    kin = forward_kinematics(module, q)
    segs = []
    for i, parent in enumerate(t.parents):
        # a floating root (a free joint) hangs from nothing: its stick has no length, not one from the world origin
        start = (kin.world_p[i] if t.joint_kinds[i] in FLOATING else p.joint_p[i]) if parent < 0 else kin.world_p[parent]
        segs.append(jnp.stack([start, kin.world_p[i]]))
    for f, link in enumerate(t.frame_links):
        segs.append(jnp.stack([kin.world_p[link], kin.world_p[link] + kin.world_R[link] @ p.frame_p[f]]))
    return jnp.stack(segs)


def _contact_points(system, state):
    from ..dynamics import forward_kinematics, frame_placement
    pts = []
    for c in system.contacts:
        side = c.P if c.P is not None else c.E
        if side is None:
            pts.append(c.ground_p)
            continue
        k = system.module_index(side[0])
        m = system.modules[k]
        pts.append(frame_placement(m, forward_kinematics(m, state.q[k]), side[1])[1])
    return jnp.stack(pts) if pts else jnp.zeros((0, 3))


def _contact_forces(system, state, tau):
    """Linear part of F_EP in world axes, per contact."""
    from ..dynamics import forward_kinematics, frame_placement
    from ..system import forward_dynamics
    out = forward_dynamics(system, state, tau)
    fs = []
    for c, F in zip(system.contacts, out.F_EP):
        if c.E is None:
            R = c.ground_R
        else:
            k = system.module_index(c.E[0])
            m = system.modules[k]
            R = frame_placement(m, forward_kinematics(m, state.q[k]), c.E[1])[0]
        fs.append(R @ F[-3:] if F.shape[0] == 6 else jnp.zeros(3, F.dtype))
    return jnp.stack(fs) if fs else jnp.zeros((0, 3))


def scene(system, traj, forces=False, tau=None):
    """A :class:`Scene` of ``traj`` (a :class:`~mrds_jax.integrate.Trajectory` of ``system``); ``forces``:
    also the constraint forces at every stored state (one forward-dynamics call each; ``tau``: the constant
    joint forces of the run)."""
    from ..system import SystemState

    def frame(q, v):
        state = SystemState(q, v)
        segs = jnp.concatenate([_module_segments(m, qk) for m, qk in zip(system.modules, q)])
        pts = _contact_points(system, state)
        if forces and system.contacts:
            tt = tau if tau is not None else tuple(jnp.zeros_like(vk) for vk in v)
            f = _contact_forces(system, state, tt)
        else:
            f = jnp.zeros_like(pts)
        return segs, pts, f

    stepped = hasattr(traj, "impulses")          # a velocity-level run (ContactTrajectory): no acceleration-level forces
    if stepped:
        forces = False
    segs, pts, f = jax.jit(jax.vmap(frame))(tuple(traj.q), tuple(traj.v))
    owner = np.concatenate([np.full(m.topology.n_links + len(m.topology.frame_links), k)
                            for k, m in enumerate(system.modules)])
    names = tuple(system.contact_names)
    pts, f = np.asarray(pts), np.asarray(f)
    touching = np.ones(pts.shape[:2], bool)                # the loops' joints always touch
    if stepped and getattr(system, "collision", None) is not None and system.collision.n_slots:
        # the collision slots as contact points, with their mean forces over the step (zero where not touching)
        model = system.collision
        names += tuple(f"{model.geoms[i].name}/{model.geoms[j].name}#{s}"
                       for (i, j), n in zip(model.pairs, model.slots) for s in range(n))
        pts = np.concatenate([pts, np.asarray(traj.points)], axis=1)
        f = np.concatenate([f, np.asarray(traj.contact_forces(system))], axis=1)
        touching = np.concatenate([touching, np.asarray(traj.active_set(system))], axis=1)
    return Scene(np.asarray(traj.t), np.asarray(segs), owner, pts, f, tuple(system.module_names), names,
                 _geom_poses(system, traj), touching)


def _geom_poses(system, traj):
    """The collision geoms of ``system`` with their world poses at every stored state of ``traj`` (4x4)."""
    model = getattr(system, "collision", None)
    if model is None or not model.geoms:
        return ()
    from ..system import SystemState
    from ..system.timestepping import geom_world_frames

    def poses(q):
        frames = geom_world_frames(system, SystemState(q, tuple(jnp.zeros(m.nv, q[0].dtype) for m in system.modules)))
        return jnp.stack([jnp.concatenate([jnp.concatenate([R, p[:, None]], axis=1),
                                           jnp.array([[0.0, 0.0, 0.0, 1.0]], R.dtype)]) for R, p in frames])

    T = np.asarray(jax.jit(jax.vmap(poses))(tuple(traj.q)))
    return tuple((g.name, g.kind, np.asarray(g.size), T[:, i]) for i, g in enumerate(model.geoms))
