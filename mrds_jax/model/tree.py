"""A module (Bonaventura Ch. 5): a rigid tree of links with static *topology* and array *parameters*.

``Topology`` is frozen and hashable (it keys the jit cache); ``TreeParams`` is a pytree of arrays, so
``jax.grad``/``jax.vmap`` work over masses, inertias and joint placements. ``Module`` bundles both and is
itself a pytree whose only leaves are the parameters.
"""
import functools
import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, replace, static
from ..validation import ArgumentError, ModelError, UnknownNameError, is_traced, link_inertia, module_arrays
from .joints import JOINT_KINDS, joint_kind

RECURSIONS = ("auto", "unrolled", "level_scan")
ONE_COORDINATE = ("revolute", "prismatic", "screw")   # joints whose q is one number (limits, actuators)
PLANAR_ROWS = (2, 3, 4)  # [ω_z, v_x, v_y] of a 6-D [angular; linear] vector: the planar task space


def task_slice(dim):
    """The task rows of a 6-D [angular; linear] quantity as a slice: all six (dim 6), or the planar
    [ω_z, v_x, v_y] = rows 2:5 (dim 3). A slice, not an index array, so ``x[rows]`` and ``T[rows, rows]``
    lower to slices rather than gathers."""
    if dim not in (3, 6):
        raise ValueError(f"task dimension must be 3 (planar) or 6, got {dim}")
    return slice(0, 6) if dim == 6 else slice(PLANAR_ROWS[0], PLANAR_ROWS[-1] + 1)


@dataclass(frozen=True)
class Topology:
    link_names: tuple
    parents: tuple          # parent link index, -1 for the support (world or moving base)
    joint_names: tuple
    joint_kinds: tuple      # names in JOINT_KINDS
    frame_names: tuple      # operational points
    frame_links: tuple      # link index each operational point is attached to
    planar: bool = False    # task space [ω_z, v_x, v_y] (Bonaventura footnote 19)
    recursion: str = "auto"  # how the dynamics walk the tree: "auto", "unrolled" or "level_scan"
                             # (RECURSIONS; mrds_jax.dynamics.levels). Static: part of the jit cache key.
    joint_limits: tuple = ()  # per joint: (lower, upper) of a one-coordinate joint's q, or None; () when no joint
                              # has limits. Kept from the files, not enforced (inequalities): simulate reports
                              # where a trajectory leaves them (mrds_jax.system.limits)
    cone_limits: tuple = ()   # per joint: the largest rotation angle (rad) of a spherical joint from its reference
                              # (MuJoCo's ball-joint range[1]), or None; () when none. Kept, not enforced

    @property
    def n_links(self):
        return len(self.link_names)

    @property
    def kinds(self):
        return tuple(JOINT_KINDS[k] for k in self.joint_kinds)

    def _slices(self, size):
        ends = np.cumsum([0] + [getattr(k, size) for k in self.kinds])
        return tuple(slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:]))

    @property
    def q_slices(self):
        """Slice of q belonging to each joint."""
        return self._slices("nq")

    @property
    def v_slices(self):
        """Slice of v belonging to each joint."""
        return self._slices("nv")

    @property
    def nq(self):
        return sum(k.nq for k in self.kinds)

    @property
    def nv(self):
        return sum(k.nv for k in self.kinds)

    @property
    def task_dim(self):
        return 3 if self.planar else 6

    def link_index(self, name):
        """Index of a link given by name or index; KeyError/IndexError naming it otherwise."""
        return _lookup(self.link_names, name, "link")

    def frame_index(self, name):
        """Index of an operational point given by name or index."""
        return _lookup(self.frame_names, name, "operational point")

    def ancestors(self, link):
        """Links on the path from ``link`` to the root, ``link`` first."""
        out = []
        while link >= 0:
            out.append(link)
            link = self.parents[link]
        return tuple(out)

    def ancestor_mask(self):
        """M[i, j] = True when link i is link j or an ancestor of it (static numpy array)."""
        n = self.n_links
        m = np.zeros((n, n), dtype=bool)
        for j in range(n):
            for i in self.ancestors(j):
                m[i, j] = True
        return m

    def dof_links(self):
        """Link index owning each velocity coordinate (static numpy array of length nv)."""
        return np.array([i for i, k in enumerate(self.kinds) for _ in range(k.nv)], dtype=int)

    def is_chain(self):
        return all(p == i - 1 for i, p in enumerate(self.parents))


def _lookup(names, key, what):
    if isinstance(key, (int, np.integer)):
        if not 0 <= key < len(names):
            raise UnknownNameError(f"{what} index {key} out of range ({len(names)} of them: {list(names)})")
        return int(key)
    try:
        return names.index(key)
    except ValueError:
        raise UnknownNameError(f"no {what} named {key!r}; there are {list(names)}") from None


@pytree_dataclass
class TreeParams:
    joint_R: jax.Array     # (n, 3, 3) joint frame in parent link frame
    joint_p: jax.Array     # (n, 3)
    axis: jax.Array        # (n, 3) joint axis in joint frame (unit)
    axis2: jax.Array       # (n, 3) second axis (universal joints)
    pitch: jax.Array       # (n,) screw pitch ρ (m/rad)
    mass: jax.Array        # (n,)
    com: jax.Array         # (n, 3) centre of mass in link frame
    inertia: jax.Array     # (n, 3, 3) rotational inertia about the centre of mass, link axes
    frame_R: jax.Array     # (nf, 3, 3) operational point frames in their link frame
    frame_p: jax.Array     # (nf, 3)
    gravity: jax.Array     # (3,) in the support frame
    armature: jax.Array    # (nv,) rotor inertia per degree of freedom, added to the diagonal of the joint-space
                           # inertia H (MuJoCo's dof_armature, Pinocchio's model.armature); zeros by default


@pytree_dataclass
class Module:
    """One module: ``topology`` (static) and ``params`` (arrays)."""
    params: TreeParams
    topology: Topology = static()

    @property
    def nq(self):
        return self.topology.nq

    @property
    def nv(self):
        return self.topology.nv

    @property
    def task_dim(self):
        """Rows per operational point in the task space: 6, or 3 for planar modules (module interface)."""
        return self.topology.task_dim

    @property
    def frame_names(self):
        """The operational points (module interface)."""
        return self.topology.frame_names

    def frame_index(self, name):
        """Index of an operational point given by name or index; KeyError/IndexError naming it otherwise."""
        return self.topology.frame_index(name)

    def with_params(self, **changes):
        """The same topology with some parameters replaced (``mass=…``, ``joint_p=…``: the fields of
        :class:`TreeParams`). Checked as a built module is: an unknown name raises UnknownNameError, a wrong
        shape a ModelError naming the parameter, and concrete values go through :func:`validate` (positive
        masses, physical inertias, unit axes, rotation matrices, …). Traced values (inside ``jit``/``vmap``/
        ``grad``) are checked for their shape only."""
        known = [f.name for f in dataclasses.fields(self.params)]
        unknown = sorted(set(changes) - set(known))
        if unknown:
            raise UnknownNameError(f"with_params: no parameter named {unknown}; the parameters are {known}")
        changes = {name: jnp.asarray(value, dtype=getattr(self.params, name).dtype)
                   if isinstance(value, (list, tuple)) else value for name, value in changes.items()}
        for name, value in changes.items():
            if jnp.shape(value) != jnp.shape(getattr(self.params, name)):
                raise ModelError(f"with_params: parameter {name!r} has shape {jnp.shape(value)}, the module's is "
                                 f"{jnp.shape(getattr(self.params, name))}")
        module = replace(self, params=replace(self.params, **changes))
        if is_traced(changes):
            return module
        changed = (np.flatnonzero(np.any(np.asarray(module.params.inertia) != np.asarray(self.params.inertia),
                                         axis=(1, 2))) if "inertia" in changes else ())
        return validate(module, triangle=tuple(int(i) for i in changed))

    def with_recursion(self, recursion):
        """The same module with the tree recursions done ``recursion``-wise (one of RECURSIONS)."""
        if recursion not in RECURSIONS:
            raise ArgumentError(f"unknown recursion {recursion!r}; use one of {RECURSIONS}")
        return replace(self, topology=replace(self.topology, recursion=recursion))

    def neutral_configuration(self, dtype=None):
        dtype = dtype or self.params.mass.dtype
        return jnp.concatenate([k.neutral(dtype) for k in self.topology.kinds])


def validate(module, rtol=1e-9, triangle=()):
    """Check a module's concrete parameters; raise ModelError (a ValueError) naming the offending link or joint.
    Rotational inertias must be symmetric and positive semi-definite; those of the links ``triangle`` (indices: the
    ones :meth:`Module.with_params` changed) must obey the triangle inequality too (``ModuleBuilder.add_link``
    checks it when a link is added, unless told not to, as the URDF loader does for files that break it)."""
    t, p = module.topology, module.params
    n = t.n_links
    shapes = dict(joint_R=(n, 3, 3), joint_p=(n, 3), axis=(n, 3), axis2=(n, 3), pitch=(n,), mass=(n,),
                  com=(n, 3), inertia=(n, 3, 3), frame_R=(len(t.frame_names), 3, 3),
                  frame_p=(len(t.frame_names), 3), gravity=(3,), armature=(t.nv,))
    for name, shape in shapes.items():
        got = np.shape(getattr(p, name))
        if got != shape:
            raise ModelError(f"parameter {name!r} has shape {got}, expected {shape}")
    for i, (parent, kind) in enumerate(zip(t.parents, t.joint_kinds)):
        joint_kind(kind, f" (joint {t.joint_names[i]!r})")
        if not -1 <= parent < i:
            raise ModelError(f"link {t.link_names[i]!r}: parent index {parent} must be in [-1, {i}) "
                             "(links are listed parents first)")
    armature = np.asarray(p.armature)
    dof_joint = [t.joint_names[i] for i in t.dof_links()]
    for d in np.flatnonzero(~(np.isfinite(armature) & (armature >= 0))):
        raise ModelError(f"joint {dof_joint[d]!r}: armature (rotor inertia) must be finite and >= 0, got "
                         f"{armature[d]} for degree of freedom {d}")
    mass = np.asarray(p.mass)
    inertia = np.asarray(p.inertia)
    has_child = np.zeros(n, dtype=bool)
    has_child[[parent for parent in t.parents if parent >= 0]] = True
    for i, name in enumerate(t.link_names):
        if not np.isfinite(mass[i]) or mass[i] < 0:
            raise ModelError(f"link {name!r}: mass must be positive, got {mass[i]} (0 only for a massless link with "
                             "a child)")
        link_inertia(mass[i], inertia[i], f"link {name!r}", rtol, triangle=i in triangle)
        if mass[i] == 0 and not has_child[i]:
            raise ModelError(f"link {name!r}: a massless link (mass 0) must carry a child link; a massless leaf "
                             "makes the mass matrix singular")
    # unit axes and rotation matrices to 1e-9, or to 100 ulp of a float32 module's own arithmetic (parameters
    # computed in float32, e.g. a placement composed by forward kinematics and set by with_params)
    unit_tol = max(1e-9, 100 * float(np.finfo(np.asarray(p.axis).dtype).eps))
    for i, kind in enumerate(t.joint_kinds):
        if kind in ("revolute", "prismatic", "screw", "universal"):
            for nm in (("axis", "axis2") if kind == "universal" else ("axis",)):
                a = np.asarray(getattr(p, nm)[i])
                if not abs(np.linalg.norm(a) - 1.0) <= unit_tol:
                    raise ModelError(f"joint {t.joint_names[i]!r}: {nm} {a} is not a unit vector")
    for nm, R in (("joint", np.asarray(p.joint_R)), ("frame", np.asarray(p.frame_R))):
        for i in range(R.shape[0]):
            if not np.allclose(R[i] @ R[i].T, np.eye(3), atol=unit_tol) or np.linalg.det(R[i]) < 0:
                label = t.joint_names[i] if nm == "joint" else t.frame_names[i]
                raise ModelError(f"{nm} {label!r}: placement rotation is not a rotation matrix")
    if t.joint_limits and len(t.joint_limits) != n:
        raise ModelError(f"joint_limits has {len(t.joint_limits)} entries, expected one per joint ({n}) or none")
    for i, lim in enumerate(t.joint_limits):
        if lim is not None and (t.joint_kinds[i] not in ONE_COORDINATE or not lim[0] <= lim[1]):
            raise ModelError(f"joint {t.joint_names[i]!r}: limits {lim} need lower <= upper on a one-coordinate joint "
                             f"({', '.join(ONE_COORDINATE)}), it is {t.joint_kinds[i]}")
    if t.cone_limits and len(t.cone_limits) != n:
        raise ModelError(f"cone_limits has {len(t.cone_limits)} entries, expected one per joint ({n}) or none")
    for i, lim in enumerate(t.cone_limits):
        if lim is not None and (t.joint_kinds[i] != "spherical" or not 0 < lim):
            raise ModelError(f"joint {t.joint_names[i]!r}: a cone limit {lim} needs a positive angle on a spherical "
                             f"joint, it is {t.joint_kinds[i]}")
    if t.planar:
        _validate_planar(t, p)
    return module


def _validate_planar(t, p):
    for i, kind in enumerate(t.joint_kinds):
        name = t.joint_names[i]
        if kind not in ("revolute", "prismatic", "planar_free", "fixed"):
            raise ModelError(f"planar module: joint {name!r} of kind {kind!r} is not planar "
                             "(use revolute, prismatic, planar_free or fixed)")
        axis = np.asarray(p.axis[i])
        if kind == "revolute" and not np.allclose(np.abs(axis), [0, 0, 1], atol=1e-12):
            raise ModelError(f"planar module: revolute joint {name!r} must turn about z, axis is {axis}")
        if kind == "prismatic" and abs(axis[2]) > 1e-12:
            raise ModelError(f"planar module: prismatic joint {name!r} must slide in the xy plane, axis {axis}")
        R, pos = np.asarray(p.joint_R[i]), np.asarray(p.joint_p[i])
        if abs(pos[2]) > 1e-12 or not np.allclose(R[2], [0, 0, 1], atol=1e-12):
            raise ModelError(f"planar module: placement of joint {name!r} leaves the xy plane")
    for i, name in enumerate(t.frame_names):
        R, pos = np.asarray(p.frame_R[i]), np.asarray(p.frame_p[i])
        if abs(pos[2]) > 1e-12 or not np.allclose(R[2], [0, 0, 1], atol=1e-12):
            raise ModelError(f"planar module: operational point {name!r} leaves the xy plane")


def check_module_state(module, q=None, v=None, name="state"):
    """Raise an ArgumentError (a ValueError) naming the array when q or v has the wrong shape (trace-time
    check); :func:`mrds_jax.validation.module_arrays` also returns them as arrays."""
    module_arrays(module, name, q=q, v=v)


# ------------------------------------------------------------------------------------ static schedules
# Topology-derived index tables for the level-scan recursions (mrds_jax.dynamics.levels): computed once per
# topology (cached), plain numpy, so they enter a traced program as constants.

@dataclass(frozen=True, eq=False)
class LevelSchedule:
    """Links grouped by depth. Level d holds the links d joints away from the support, in W = the widest
    level's number of slots; padding slots repeat the level's first link (finite values, results unused).

    ``slots`` (L, W): link in each slot. ``parent_slot`` (L, W): slot of each link's parent in level d − 1
    (0 at level 0, whose links all hang from the support). ``child_slots`` (L, W, C): slots of each link's
    children in level d + 1, C = the largest number of children, W (an extra zero row) where there is none.
    ``link_position`` (n,): index d·W + slot of each link in a level-major (L·W) array."""
    slots: np.ndarray
    parent_slot: np.ndarray
    child_slots: np.ndarray
    link_position: np.ndarray

    @property
    def n_levels(self):
        return self.slots.shape[0]

    @property
    def width(self):
        return self.slots.shape[1]


@functools.lru_cache(maxsize=64)
def level_schedule(topology):
    """The :class:`LevelSchedule` of a topology (links are listed parents first, so one pass finds depths)."""
    n = topology.n_links
    depth = np.zeros(n, dtype=int)
    for i, parent in enumerate(topology.parents):
        depth[i] = 0 if parent < 0 else depth[parent] + 1
    levels = [np.flatnonzero(depth == d) for d in range(depth.max() + 1)]
    width = max(len(lv) for lv in levels)
    slot_of = np.zeros(n, dtype=int)
    for lv in levels:
        slot_of[lv] = np.arange(len(lv))
    children = [[] for _ in range(n)]
    for i, parent in enumerate(topology.parents):
        if parent >= 0:
            children[parent].append(i)
    n_children = max(1, max(len(c) for c in children))
    slots = np.stack([np.r_[lv, np.full(width - len(lv), lv[0])] for lv in levels])
    parent_slot = np.zeros_like(slots)
    child_slots = np.full(slots.shape + (n_children,), width)
    for d, lv in enumerate(levels):
        for s, link in enumerate(lv):
            parent = topology.parents[link]
            parent_slot[d, s] = 0 if parent < 0 else slot_of[parent]
            child_slots[d, s, :len(children[link])] = slot_of[children[link]]
    return LevelSchedule(slots, parent_slot, child_slots, depth * width + slot_of)


@dataclass(frozen=True, eq=False)
class JointGroups:
    """Links grouped by joint kind, and every joint's velocity coordinates padded to a common width.

    ``kinds``: tuple of (JointKind, links (n_k,), q_index (n_k, nq), v_index (n_k, nv)) per kind present.
    ``order`` (n,): position of each link in the kinds' concatenation. ``width``: the widest joint's nv
    (at least 1). ``v_padded`` (n, width): index into v of each link's coordinates, nv (an appended zero)
    for padding columns; ``column_valid`` (n, width) marks the real columns."""
    kinds: tuple
    order: np.ndarray
    width: int
    v_padded: np.ndarray
    column_valid: np.ndarray


def _index_table(slices, links, size):
    return np.array([np.arange(slices[i].start, slices[i].stop) for i in links], dtype=int).reshape(len(links), size)


@functools.lru_cache(maxsize=64)
def joint_groups(topology):
    """The :class:`JointGroups` of a topology."""
    kinds, qs, vs = topology.kinds, topology.q_slices, topology.v_slices
    groups = []
    for name in dict.fromkeys(topology.joint_kinds):
        kind = JOINT_KINDS[name]
        links = np.array([i for i, k in enumerate(topology.joint_kinds) if k == name], dtype=int)
        groups.append((kind, links, _index_table(qs, links, kind.nq), _index_table(vs, links, kind.nv)))
    order = np.empty(topology.n_links, dtype=int)
    order[np.concatenate([g[1] for g in groups])] = np.arange(topology.n_links)
    width = max(1, max(k.nv for k in kinds))
    v_padded = np.full((topology.n_links, width), topology.nv)
    for i, s in enumerate(vs):
        v_padded[i, :s.stop - s.start] = np.arange(s.start, s.stop)
    return JointGroups(tuple(groups), order, width, v_padded, v_padded < topology.nv)
