"""A system of modules and contacts, built once (Bonaventura Step 1, Tables 7-8, 13-14).

The modular connectivity MC(k, j) (Table 13) and global connectivity GC(i, j) (Table 14) are static:
they are computed here, from names only, and stored in a hashable :class:`Connectivity` that keys the
jit cache. Module parameters and contact bases stay pytree leaves, so a ``System`` can be differentiated
and ``vmap``ped over (design optimisation, domain randomisation).
"""
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..console import check_precision
from ..contacts.coupling import COUPLED_KINDS, CouplingError, JointCoupling
from ..contacts.model import Contact, ContactError, validate_contact
from ..dynamics.interface import implements_interface, missing_attributes, with_loop_points
from ..pytree import pytree_dataclass, static
from ..validation import ArgumentError, InputError, per_module


class SystemDescriptionError(InputError):
    """Bad system description; the message names the module or contact. (Formerly ``SystemError``, a name that
    shadowed Python's built-in exception for interpreter faults; ``mrds_jax.system.SystemError`` still works, with
    a DeprecationWarning, for one release.)"""


SystemError = SystemDescriptionError        # noqa: A001  the package's own modules' old name; removed with the alias


@dataclass(frozen=True)
class Connectivity:
    """Static structure of a system.

    ``points[k]``: the operational points of module k that take part in contacts (E or P of some contact),
    in order; their index is the block used in Λ⁻¹ and Ψ of module k.
    ``sides[i] = (m_E, slot_E, m_P, slot_P)``: module index and slot in ``points[m]`` of E_i and P_i, with
    ``m = -1`` for the ground.
    ``MC[k][j]`` ∈ {"E", "P", "EP", "0"} (Table 13); ``GC[i][j]`` ∈ {"AA", "AB", "BA", "BB"} (Table 14).
    ``groups``: module indices grouped by identical (topology, contact points): each group's Step 2 runs
    once, ``vmap``ped over its stacked parameters and states (e.g. the six legs of a Stewart platform).
    """
    module_names: tuple
    points: tuple
    sides: tuple
    n_c: tuple          # constrained directions per contact
    dim: int            # task dimension (6, or 3 for planar systems)
    MC: tuple
    GC: tuple
    groups: tuple = ()
    coupling_dofs: tuple = ()   # per joint coupling: its joints as static (module, q index, v index) triples
                                # (:func:`coupling_dofs`)

    @property
    def n_constraints(self):
        """n_C = Σ n_cᵢ (Bonaventura eq. 72), the size of Bᶜ."""
        return sum(self.n_c)

    def contact_type(self, i):
        """"A" when E_i and P_i are on different modules (or one is the ground), "B" when on one module."""
        mE, _, mP, _ = self.sides[i]
        return "B" if mE == mP else "A"

    def constraint_slices(self):
        out, s = [], 0
        for n in self.n_c:
            out.append(slice(s, s + n))
            s += n
        return tuple(out)


@pytree_dataclass
class System:
    """Modules and contacts (leaves: their parameters and bases) plus the static :class:`Connectivity`, and the
    joint couplings (:mod:`mrds_jax.contacts.coupling`: joint-space rows of the general path's solve)."""
    modules: tuple
    contacts: tuple
    connectivity: Connectivity = static()
    couplings: tuple = ()
    collision: object = None    # None or a mrds_jax.collision.CollisionModel: geoms and candidate pairs, whose
                                # contacts (with the joint limits) the velocity-level step enforces (.timestepping)
    tendon_limits: tuple = static(default=())   # TendonLimit per limited fixed tendon: one-sided rows of that step

    @property
    def module_names(self):
        return self.connectivity.module_names

    def module_index(self, key):
        return _module_index(self.connectivity.module_names, key, "system")

    @property
    def contact_names(self):
        return tuple(c.name for c in self.contacts)


def _module_index(names, key, where):
    if isinstance(key, (int, np.integer)):
        if not 0 <= key < len(names):
            raise SystemDescriptionError(f"{where}: module index {key} out of range (system has {len(names)} modules)")
        return int(key)
    if key in names:
        return names.index(key)
    raise SystemDescriptionError(f"{where}: no module named {key!r}; modules are {list(names)}")


def modular_connectivity(sides, n_modules):
    """Table 13: MC(k, j) = "E" (E_j on k only, Type A), "P" (P_j on k only), "EP" (both: Type B), "0"."""
    table = []
    for k in range(n_modules):
        row = []
        for mE, _, mP, _ in sides:
            row.append("EP" if mE == k and mP == k else "E" if mE == k else "P" if mP == k else "0")
        table.append(tuple(row))
    return tuple(table)


def global_connectivity(sides):
    """Table 14: GC(i, j) ∈ {AA, AB, BA, BB} from the contact types of i and j."""
    types = ["B" if mE == mP else "A" for mE, _, mP, _ in sides]
    return tuple(tuple(ti + tj for tj in types) for ti in types)


def identical_module_groups(modules, points):
    """Module indices grouped by equal (pytree structure — for a rigid tree its topology —, contact points,
    parameter shapes), first-seen order."""
    groups = {}
    for k, (m, pts) in enumerate(zip(modules, points)):
        shapes = tuple((np.shape(x), str(jnp.asarray(x).dtype)) for x in jax.tree.leaves(m))
        groups.setdefault((jax.tree.structure(m), pts, shapes), []).append(k)
    return tuple(tuple(g) for g in groups.values())


class TendonLimit(NamedTuple):
    """lower ≤ L ≤ upper for the fixed tendon L = Σ coef[i] q(joints[i]) (MuJoCo's limited fixed tendon, its
    ``range``), over one-coordinate joints ((module, joint) each); static."""
    name: str
    joints: tuple
    coef: tuple
    lower: float
    upper: float


def tendon_limit_dofs(module_names, modules, limit):
    """((k, qi, vi, coef) per joint) of a :class:`TendonLimit`, its joints checked (:func:`joint_dof`)."""
    where = f"tendon limit {limit.name!r}"
    if len(limit.joints) != len(limit.coef) or not limit.lower <= limit.upper:
        raise SystemDescriptionError(f"{where}: needs one coefficient per joint and lower <= upper, got "
                                     f"{len(limit.joints)} joints, {len(limit.coef)} coefficients, range "
                                     f"({limit.lower}, {limit.upper})")
    return tuple((*joint_dof(module_names, modules, m, j, where), float(c)) for (m, j), c in zip(limit.joints,
                                                                                             limit.coef))


def build_system(modules, contacts, names=None, couplings=(), collision=None, tendon_limits=()):
    """Build a :class:`System`.

    ``modules``: a dict ``name -> Module`` or a sequence of modules (then named by ``names`` or by their
    index). ``contacts``: sequence of :class:`~mrds_jax.contacts.Contact` whose sides name
    ``(module, operational point)`` (module by name or index) or ``None`` for the ground. ``couplings``:
    sequence of :class:`~mrds_jax.contacts.coupling.JointCoupling` (joint equalities, fixed-tendon equalities)
    whose joints name ``(module, joint)``; a :class:`~mrds_jax.contacts.coupling.CouplingError` names an unknown
    module or joint. ``collision``: None, a :class:`~mrds_jax.collision.CollisionModel`, or a sequence of
    :class:`~mrds_jax.collision.Geom` (then paired and filtered by :func:`~mrds_jax.collision.collision_model`).
    ``tendon_limits``: :class:`TendonLimit` s, one-sided rows of the velocity-level step like the joint limits.
    Raises :class:`SystemDescriptionError` naming the contact for a missing module or operational point, a task
    dimension that does not match the modules' (planar vs spatial), or bases that are not dual.
    Warns once (:class:`~mrds_jax.console.Float32Warning`) when ``jax_enable_x64`` is off and float32 was not
    asked for (the precision policy, :mod:`mrds_jax.console`).
    """
    check_precision("build_system")
    if isinstance(modules, dict):
        names, modules = tuple(modules), tuple(modules.values())
    else:
        modules = tuple(modules)
        names = tuple(names) if names is not None else tuple(str(i) for i in range(len(modules)))
    if not modules:
        raise SystemDescriptionError("build_system: no modules given; a system needs at least one module")
    if len(names) != len(modules) or len(set(names)) != len(names):
        raise SystemDescriptionError(f"module names must be unique, one per module; got {names}")
    for name, m in zip(names, modules):
        if not implements_interface(m):
            raise SystemDescriptionError(f"module {name!r} is not a module (got {type(m).__name__}: its type implements no "
                              "mrds_jax.dynamics.interface.ModuleContract)")
        if missing_attributes(m):
            raise SystemDescriptionError(f"module {name!r} ({type(m).__name__}) lacks the module attribute(s) "
                              f"{', '.join(missing_attributes(m))} that the module contract asks for")
    dims = {m.task_dim for m in modules}
    if len(dims) > 1:
        raise SystemDescriptionError("all modules of a system must share one task space: mixing planar and spatial modules "
                          f"({dict(zip(names, (m.task_dim for m in modules)))})")
    contacts = tuple(contacts)
    if len({c.name for c in contacts}) != len(contacts):
        raise SystemDescriptionError(f"contact names must be unique: {[c.name for c in contacts]}")
    dim = dims.pop() if dims else (contacts[0].dim if contacts else 6)
    points = [[] for _ in modules]
    sides = []
    for c in contacts:
        if not isinstance(c, Contact):
            raise SystemDescriptionError(f"{c!r} is not a Contact")
        try:
            validate_contact(c)
        except ContactError as e:
            raise SystemDescriptionError(str(e)) from None
        if c.dim != dim:
            raise SystemDescriptionError(f"contact {c.name!r} has task dimension {c.dim} but the modules have {dim} "
                              "(use planar=True contacts with planar modules)")
        side = []
        for label, s in (("E", c.E), ("P", c.P)):
            if s is None:
                side += [-1, -1]
                continue
            k = _module_index(names, s[0], f"contact {c.name!r} side {label}")
            try:
                modules[k].frame_index(s[1])
            except (KeyError, IndexError) as e:
                raise SystemDescriptionError(f"contact {c.name!r} side {label}: module {names[k]!r} has no operational point "
                                  f"{s[1]!r} ({e.args[0]})") from None
            frame = modules[k].frame_names[modules[k].frame_index(s[1])]
            if frame not in points[k]:
                points[k].append(frame)
            side += [k, points[k].index(frame)]
        if side[0] == side[2] and side[1] == side[3]:
            raise SystemDescriptionError(f"contact {c.name!r}: E and P are the same operational point")
        sides.append(tuple(side))
    sides = tuple(sides)
    points = tuple(tuple(p) for p in points)
    modules = tuple(with_loop_points(m, len(p)) for m, p in zip(modules, points))   # e.g. large looped trees: level scan
    conn = Connectivity(module_names=names, points=points, sides=sides,
                        n_c=tuple(c.n_c for c in contacts), dim=dim,
                        MC=modular_connectivity(sides, len(modules)), GC=global_connectivity(sides),
                        groups=identical_module_groups(modules, points),
                        coupling_dofs=_coupling_dofs(names, modules, contacts, couplings))
    if collision is not None and not hasattr(collision, "n_slots"):
        if not isinstance(collision, (list, tuple)):
            raise ArgumentError(f"build_system: collision must be a CollisionModel or a list of geoms, got "
                                           f"one {type(collision).__name__} ({getattr(collision, 'name', '')!r}); "
                                           "wrap it in a list")
        from ..collision import collision_model
        collision = collision_model(tuple(collision), dict(zip(names, modules)))
    tendon_limits = tuple(TendonLimit(*t) for t in tendon_limits)
    for limit in tendon_limits:
        tendon_limit_dofs(names, modules, limit)
    return System(modules=modules, contacts=contacts, connectivity=conn, couplings=tuple(couplings),
                  collision=collision, tendon_limits=tendon_limits)


def joint_dof(module_names, modules, module, joint, where):
    """(module index, q index, v index) of a one-coordinate joint given as (module, joint name); CouplingError
    naming ``where`` for an unknown module or joint, or a joint with more than one coordinate."""
    k = _module_index(module_names, module, where)
    t = getattr(modules[k], "topology", None)
    if t is None:
        raise CouplingError(f"{where}: module {module_names[k]!r} is not a rigid tree; joint couplings need joints")
    if joint not in t.joint_names:
        raise CouplingError(f"{where}: module {module_names[k]!r} has no joint {joint!r}")
    j = t.joint_names.index(joint)
    if t.joint_kinds[j] not in COUPLED_KINDS:
        raise CouplingError(f"{where}: joint {joint!r} is {t.joint_kinds[j]}; couplings relate one-coordinate joints "
                            f"({', '.join(COUPLED_KINDS)})")
    return k, t.q_slices[j].start, t.v_slices[j].start


def coupling_dofs(module_names, modules, coupling):
    """Static ((k, qi, vi) of u's joints, (k, qi, vi) of w's joints) of one coupling (:func:`joint_dof`)."""
    where = f"coupling {coupling.name!r}"
    return (tuple(joint_dof(module_names, modules, m, j, where) for m, j in coupling.joints),
            tuple(joint_dof(module_names, modules, m, j, where) for m, j in coupling.joints2))


def _coupling_dofs(names, modules, contacts, couplings):
    """Static joints of every coupling, checked (names unique among contacts and couplings, joints known)."""
    taken = {c.name for c in contacts}
    for c in couplings:
        if not isinstance(c, JointCoupling):
            raise SystemDescriptionError(f"{c!r} is not a JointCoupling")
        if c.name in taken:
            raise SystemDescriptionError(f"coupling name {c.name!r} is used twice (contact and coupling names must be unique)")
        taken.add(c.name)
    return tuple(coupling_dofs(names, modules, c) for c in couplings)


@pytree_dataclass
class SystemState:
    """Per-module joint positions and velocities (tuples, one array per module)."""
    q: tuple
    v: tuple


def make_state(system, q, v=None):
    """A :class:`SystemState` from per-module sequences (or dicts by module name); v defaults to zeros."""
    names = system.module_names

    def seq(x, label):
        if isinstance(x, dict):
            missing = [n for n in names if n not in x]
            if missing:
                raise SystemDescriptionError(f"state: {label} missing for modules {missing}")
            x = [x[n] for n in names]
        if hasattr(x, "shape") and not isinstance(x, (list, tuple)):
            raise SystemDescriptionError(f"state: {label} is one array of shape {tuple(x.shape)}; give one array per module, "
                              f"in the order {list(names)}: make_state(system, [{', '.join(f'q_{n}' for n in names)}]"
                              f") or a dict {{{', '.join(repr(n) + ': ...' for n in names)}}}")
        x = tuple(jnp.asarray(a) for a in x)
        if len(x) != len(names):
            raise SystemDescriptionError(f"state: {label} has {len(x)} entries, the system has {len(names)} module"
                              f"{'s' if len(names) != 1 else ''} {list(names)}: give one array per module")
        return x

    q = seq(q, "q")
    v = tuple(jnp.zeros(m.nv, dtype=qq.dtype) for m, qq in zip(system.modules, q)) if v is None else seq(v, "v")
    for name, m, qq, vv in zip(names, system.modules, q, v):
        if qq.shape[-1:] != (m.nq,) or vv.shape[-1:] != (m.nv,):
            raise SystemDescriptionError(f"state of module {name!r}: q has shape {qq.shape}, v {vv.shape}; "
                              f"need ({m.nq},) and ({m.nv},)")
    return SystemState(q=q, v=v)


def module_taus(system, tau, dtype):
    """Per module of ``system``, its joint forces from ``tau``: a sequence of one array per module, a dict by module
    name (missing modules get zeros), or None (all zeros); a bad count or shape raises a named error."""
    per_module(system, tau, "tau", "nv", "joint forces")
    if tau is None:
        return tuple(jnp.zeros(m.nv, dtype=dtype) for m in system.modules)
    if isinstance(tau, dict):
        return tuple(jnp.asarray(tau.get(n, jnp.zeros(m.nv, dtype=dtype)))
                     for n, m in zip(system.module_names, system.modules))
    return tuple(jnp.asarray(x) for x in tau)
