"""The collision model: the geoms, the static list of candidate pairs (filtered as MuJoCo filters them), per-pair
friction and restitution, and the concatenated contact slots of all pairs at a configuration.

Filtering (MuJoCo's documentation, "Computation → Collision detection", and its ``<pair>``/``<exclude>``
elements), decided once, before anything compiles:

1. Bodies. A geom's body is the link its operational point sits on, merged with its ancestors across ``fixed``
   joints (MuJoCo's *weld body*); a module link welded to its support (the world) by fixed joints all the way is
   the ground. A module type without ``topology`` has one body per operational point.
2. Two geoms on the same body never collide (ground–ground included: MuJoCo collides no two static geoms).
3. Parent–child (``filter_parent=True``, MuJoCo's ``filterparent`` flag, on by default): two bodies of one
   module where one is the other's parent (weld parent, passing massless links: the frames between the joints of
   one MuJoCo body) do not collide; as in MuJoCo this rule never applies
   when one side is the world, so ground geoms collide with the geoms of a module's root link.
4. contype/conaffinity: a pair is a candidate when ``(contype1 & conaffinity2) or (contype2 & conaffinity1)``.
5. ``excludes``: body pairs ((module, link) or None for the ground) that never collide (MuJoCo ``<exclude>``),
   or geom-name pairs (the MJCF loader's translation of an ``<exclude>`` between MuJoCo bodies that were merged
   into one link: MuJoCo excludes by its own body ids, not by welded bodies).
6. ``pairs``: explicit geom pairs added whatever 2-5 say (MuJoCo ``<pair>``), with their own friction and
   restitution when given; an explicit pair replaces the automatic one of the same two geoms.

A pair whose kinds the narrow phase does not handle (:func:`~.narrowphase.supports`) is named in a
:class:`~.geoms.CollisionWarning` and left out.

Friction of a pair (MuJoCo's contact-parameter mixing, "Contact parameters"): the friction of the geom with the
higher ``priority``; at equal priority the larger of the two. Restitution: the larger of the two.
"""
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, static
from .geoms import KINDS, CollisionError, CollisionWarning, Geom, _in_range, geom_world_pose, stacked_sizes
from .broadphase import BroadPhase, gather_near, kind_capacity, pair_bounds
from .closest_points import contact_frame, unit_or
from .convex import ConvexSettings
from .narrowphase import SLOTS, ContactSlots, canonical, collide_many, convex_union, supports


class SlotSet(NamedTuple):
    """Every slot of a collision model at one configuration (S = ``model.n_slots``): the
    :class:`~.narrowphase.ContactSlots` fields (gap, point, frame, valid) and per slot the pair's friction and
    restitution and the pair index (into ``model.pairs``)."""
    gap: jax.Array
    point: jax.Array
    frame: jax.Array
    valid: jax.Array
    friction: jax.Array
    restitution: jax.Array
    pair: jax.Array
    overflow: jax.Array = None    # () bool: more pairs of one kind within reach than the broad phase's buffer holds


@pytree_dataclass
class CollisionModel:
    """``geoms`` (a tuple of :class:`~.geoms.Geom`, leaves), per-pair ``friction`` and ``restitution``
    (n_pairs,), and static ``pairs`` ((i, j) geom indices, i's kind not after j's in KINDS) and ``slots`` (slot
    count per pair).

    ``convex``: the settings of the narrow phase's general convex route (:class:`~.convex.ConvexSettings`,
    MuJoCo's ``ccd_tolerance``/``ccd_iterations`` of its model options: its accuracy by default,
    ``dataclasses.replace(model, convex=PRECISE)`` for round-off).

    ``friction``/``restitution`` are the pairs' values, mixed from the geoms' (or given by an explicit pair) when
    the model was built: they are the leaves to differentiate or batch over (the geoms' own ``friction`` and
    ``restitution`` are not read again). Sizes and poses are read from ``geoms`` at every :func:`contact_slots`."""
    geoms: tuple
    friction: jax.Array
    restitution: jax.Array
    pairs: tuple = static()
    slots: tuple = static()
    convex: ConvexSettings = static(default=ConvexSettings())

    @property
    def n_pairs(self):
        return len(self.pairs)

    @property
    def n_slots(self):
        return sum(self.slots)

    @property
    def slot_pair(self):
        """The pair index of every slot (static tuple of length n_slots)."""
        return tuple(k for k, n in enumerate(self.slots) for _ in range(n))

    @property
    def geom_names(self):
        return tuple(g.name for g in self.geoms)

    @property
    def geom_frames(self):
        """The distinct (module, operational point) the geoms ride on, in geom order (ground geoms have none):
        the placements the caller computes (``point_motion``) before :func:`~.geoms.geom_world_pose`."""
        return tuple(dict.fromkeys((g.module, g.frame) for g in self.geoms if not g.is_ground))

    def pair_names(self):
        return tuple((self.geoms[i].name, self.geoms[j].name) for i, j in self.pairs)


# ----------------------------------------------------------------------------- bodies
def _weld(topology, link):
    """The link's weld body: the first ancestor (itself included) not attached to its parent by a fixed joint;
    -1 when fixed joints reach the support (the world)."""
    while link >= 0 and topology.joint_kinds[link] == "fixed":
        link = topology.parents[link]
    return link


def _frame_body(module_name, module, frame, where):
    """(body, parent body) of an operational point: body = (module, weld link) or None (welded to the world);
    parent = the body of the weld link's parent (None: the world)."""
    try:
        index = module.frame_index(frame)
    except (KeyError, IndexError) as e:
        raise CollisionError(f"{where}: module {module_name!r} has no operational point {frame!r} "
                             f"({e.args[0] if e.args else e})") from None
    topology = getattr(module, "topology", None)
    if topology is None or not hasattr(topology, "frame_links"):
        return (module_name, ("frame", module.frame_names[index])), None
    link = _weld(topology, topology.frame_links[index])
    if link < 0:
        return None, None
    mass = module.params.mass
    # a system built under a transformation of its masses (jax.grad over a body's mass) has no concrete masses: no
    # link is then taken for a massless joint frame, which only the MJCF loader's multi-joint bodies make
    mass = np.ones(np.shape(mass)) if isinstance(mass, jax.core.Tracer) else np.asarray(mass)
    parent = _parent_body(topology, mass, link)
    return (module_name, link), (None if parent < 0 else (module_name, parent))


def _parent_body(topology, mass, link):
    """The weld body of the link's parent, passing massless links (mass 0: the frames between several joints of
    one MuJoCo body, which the MJCF loader makes a chain of links): MuJoCo's parent body of a body with several
    joints is the body above all of them."""
    parent = _weld(topology, topology.parents[link])
    while parent >= 0 and mass[parent] == 0:
        parent = _weld(topology, topology.parents[parent])
    return parent


def _body_spec(spec, modules, where):
    """An ``excludes`` body: None (the ground) or (module, link name or index) -> (module, link index)."""
    if spec is None:
        return None
    try:
        module_name, link = spec
    except (TypeError, ValueError):
        raise CollisionError(f"{where}: a body is (module, link) or None for the ground, got {spec!r}") from None
    if module_name not in modules:
        raise CollisionError(f"{where}: no module named {module_name!r}; modules are {list(modules)}")
    topology = getattr(modules[module_name], "topology", None)
    if topology is None:
        raise CollisionError(f"{where}: module {module_name!r} has no links to exclude by")
    try:
        index = topology.link_index(link)
    except (KeyError, IndexError) as e:
        raise CollisionError(f"{where}: module {module_name!r} has no link {link!r} "
                             f"({e.args[0] if e.args else e})") from None
    welded = _weld(topology, index)
    return None if welded < 0 else (module_name, welded)


# ----------------------------------------------------------------------------- pair parameters
def _mixed_friction(g1, g2):
    """MuJoCo's mixing: the higher priority's friction, else the larger."""
    if g1.priority != g2.priority:
        return (g1 if g1.priority > g2.priority else g2).friction
    return jnp.maximum(g1.friction, g2.friction)


_PAIR_OPTIONS = ("friction", "restitution")


def _explicit_pairs(pairs, index, where="collision_model: pairs"):
    """{(i, j) in KINDS order: options} from the user's (name1, name2[, options]) entries."""
    out = {}
    for entry in pairs:
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
            raise CollisionError(f"{where}: each pair is (geom1, geom2) or (geom1, geom2, {{options}}), got "
                                 f"{entry!r}")
        name1, name2 = entry[0], entry[1]
        options = dict(entry[2]) if len(entry) == 3 and entry[2] is not None else {}
        label = f"{where}: pair ({name1!r}, {name2!r})"
        for name in (name1, name2):
            if name not in index:
                raise CollisionError(f"{label}: no geom named {name!r}; the geoms are {list(index)}")
        if name1 == name2:
            raise CollisionError(f"{label}: a geom cannot collide with itself")
        unknown = sorted(set(options) - set(_PAIR_OPTIONS))
        if unknown:
            raise CollisionError(f"{label}: unknown option(s) {unknown}; use {list(_PAIR_OPTIONS)}")
        if "friction" in options:
            options["friction"] = _in_range(options["friction"], "friction", label, 0.0)
        if "restitution" in options:
            options["restitution"] = _in_range(options["restitution"], "restitution", label, 0.0, 1.0)
        out[_ordered(index[name1], index[name2], None)] = (options, label)
    return out


def _ordered(i, j, geoms):
    """(i, j) with i's kind not after j's in KINDS (ties: lower index first); ``geoms`` None: by index only
    (re-ordered once kinds are known)."""
    if geoms is None:
        return (min(i, j), max(i, j))
    ki, kj = KINDS.index(geoms[i].kind), KINDS.index(geoms[j].kind)
    return (i, j) if (ki, i) <= (kj, j) else (j, i)


# ----------------------------------------------------------------------------- the model
def unsupported_summary(pairs):
    """One sentence for the left-out geom pairs ((geom, geom) tuples), by kind with counts, each kind with its
    first pair as an example: "left out, the narrow phase cannot collide them: 240 sphere–hfield (e.g. 'a' – 'b'),
    7 plane–plane (e.g. ...)" — not one name per pair."""
    kinds = {}
    for a, b in pairs:
        first, second = sorted((a, b), key=lambda g: KINDS.index(g.kind) if g.kind in KINDS else len(KINDS))
        kinds.setdefault(f"{first.kind}–{second.kind}", []).append((first.name, second.name))
    parts = [f"{len(named)} {kind} (e.g. {named[0][0]!r} – {named[0][1]!r})"
             for kind, named in sorted(kinds.items(), key=lambda item: -len(item[1]))]
    return f"{len(pairs)} geom pair(s) left out, the narrow phase cannot collide them: {', '.join(parts)}"


def collision_model(geoms, modules, pairs=(), excludes=(), warn=True, filter_parent=True):
    """The :class:`CollisionModel` of ``geoms`` (a sequence of :class:`~.geoms.Geom`, unique names) on
    ``modules`` (dict name -> module; the names geoms' ``module`` fields refer to), filtered as the module
    docstring says. ``pairs``: explicit pairs ``(name1, name2)`` or ``(name1, name2, {"friction": μ,
    "restitution": e})``; ``excludes``: body pairs ``(body_a, body_b)``, a body ``(module, link)`` or None for
    the ground, or geom-name pairs ``(name1, name2)``; ``filter_parent``: MuJoCo's parent–child filter;
    ``warn``: name left-out unsupported pairs in a :class:`~.geoms.CollisionWarning` (with False they are still
    left out, silently: for callers that warned already).

    Raises :class:`~.geoms.CollisionError` naming the geom, pair or body for a non-Geom entry, a duplicate geom
    name, an unknown module or operational point, an unknown geom in ``pairs`` or an unknown module or link in
    ``excludes``."""
    geoms = tuple(geoms)
    modules = dict(modules)
    names = []
    for g in geoms:
        if not isinstance(g, Geom):
            raise CollisionError(f"collision_model: {g!r} is not a Geom (build one with plane, sphere, capsule, "
                                 "box, cylinder, ellipsoid or mesh)")
        if g.name in names:
            raise CollisionError(f"collision_model: two geoms are named {g.name!r}; geom names must be unique")
        names.append(g.name)
    index = {name: i for i, name in enumerate(names)}

    bodies, parents = [], []
    for g in geoms:
        if g.is_ground:
            body, parent = None, None
        else:
            if g.module not in modules:
                raise CollisionError(f"geom {g.name!r}: no module named {g.module!r}; modules are {list(modules)}")
            body, parent = _frame_body(g.module, modules[g.module], g.frame, f"geom {g.name!r}")
        bodies.append(body)
        parents.append(parent)

    excluded, excluded_geoms = set(), set()
    for entry in excludes:
        where = f"collision_model: exclude {entry!r}"
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise CollisionError(f"{where}: each exclude is (body_a, body_b) or (geom_a, geom_b)")
        if all(isinstance(x, str) for x in entry):
            unknown = [x for x in entry if x not in index]
            if unknown:
                raise CollisionError(f"{where}: no geom named {unknown[0]!r}; the geoms are {names}")
            excluded_geoms.add(frozenset(index[x] for x in entry))
        else:
            excluded.add(frozenset([_body_spec(entry[0], modules, where), _body_spec(entry[1], modules, where)]))

    explicit = _explicit_pairs(pairs, index)

    chosen = {}                                        # (i, j) in KINDS order -> (friction, restitution)
    unsupported = []
    for i in range(len(geoms)):
        for j in range(i + 1, len(geoms)):
            g1, g2 = geoms[i], geoms[j]
            if (i, j) in explicit:
                continue
            if bodies[i] == bodies[j]:
                continue
            if filter_parent and bodies[i] is not None and bodies[j] is not None and (
                    parents[i] == bodies[j] or parents[j] == bodies[i]):
                continue
            if not ((g1.contype & g2.conaffinity) or (g2.contype & g1.conaffinity)):
                continue
            if frozenset([bodies[i], bodies[j]]) in excluded or frozenset([i, j]) in excluded_geoms:
                continue
            key = _ordered(i, j, geoms)
            if not supports(g1.kind, g2.kind):
                unsupported.append((g1, g2))
                continue
            chosen[key] = (_mixed_friction(g1, g2), jnp.maximum(g1.restitution, g2.restitution))
    for (i, j), (options, label) in explicit.items():
        g1, g2 = geoms[i], geoms[j]
        if not supports(g1.kind, g2.kind):
            unsupported.append((g1, g2))
            continue
        chosen[_ordered(i, j, geoms)] = (options.get("friction", _mixed_friction(g1, g2)),
                                         options.get("restitution", jnp.maximum(g1.restitution, g2.restitution)))
    if unsupported and warn:
        warnings.warn(f"collision_model: {unsupported_summary(unsupported)}", CollisionWarning, stacklevel=2)

    keys = tuple(sorted(chosen))
    dtype = jnp.zeros(0).dtype
    friction = jnp.stack([jnp.asarray(chosen[k][0], dtype=dtype) for k in keys]) if keys else jnp.zeros(0, dtype)
    restitution = (jnp.stack([jnp.asarray(chosen[k][1], dtype=dtype) for k in keys]) if keys
                   else jnp.zeros(0, dtype))
    slots = tuple(SLOTS[(geoms[i].kind, geoms[j].kind)] for i, j in keys)
    return CollisionModel(geoms=geoms, friction=friction, restitution=restitution, pairs=keys, slots=slots)


def geom_world_poses(model, frame_poses):
    """Every geom's world pose (R, p), in geom order, from ``frame_poses``: a mapping (module, operational point)
    -> (R, p) world placement holding at least ``model.geom_frames`` (e.g. from each module's ``point_motion``);
    ground geoms need none. The argument of :func:`contact_slots`."""
    missing = [key for key in model.geom_frames if key not in frame_poses]
    if missing:
        raise CollisionError(f"geom_world_poses: no placement given for the operational points {missing}")
    return tuple(geom_world_pose(g) if g.is_ground else geom_world_pose(g, *frame_poses[(g.module, g.frame)])
                 for g in model.geoms)


def contact_slots(model, geom_poses, reach=None, broad=BroadPhase()):
    """Every pair's :class:`~.narrowphase.ContactSlots` at the world poses ``geom_poses`` (a sequence of (R, p),
    one per geom of ``model``, e.g. from :func:`geom_world_poses`), concatenated in pair order with
    the pairs' friction and restitution per slot: a :class:`SlotSet` of static length ``model.n_slots``. Works
    on one configuration; batch with ``jax.vmap``.

    ``reach`` None: every pair's narrow phase runs (the exact slots of all pairs). A number or an (n_pairs,) array
    (m): the broad phase (:mod:`.broadphase`) first — per pair kind, only the pairs whose bounding capsules come
    nearer than their reach, at most ``broad``'s capacity of them (:func:`~.broadphase.kind_capacity`), nearest
    first, run the narrow phase; the other pairs' slots are not valid, their gap the bounding capsules' distance (a
    lower bound of the pair's, at least the reach where the pair is out of reach), their point the midpoint of the
    geoms' origins. A buffer's places beyond the pairs within reach hold pairs out of reach: their slots are the
    same, and the general convex route does not search them (its GJK, EPA and refinement run only when some pair
    within reach needs them, in this configuration or, under ``vmap``, in any scenario of the batch:
    :func:`~.convex.find_normal`), so a batch whose robots touch nothing but the floor pays nothing for it.
    ``overflow`` says whether a kind had more pairs within reach than places (the farthest were
    left out)."""
    if len(geom_poses) != len(model.geoms):
        raise CollisionError(f"contact_slots: {len(geom_poses)} geom poses for {len(model.geoms)} geoms")
    slot_pair = np.asarray(model.slot_pair, dtype=np.int32)
    if not model.pairs:
        dtype = jnp.zeros(0).dtype
        return SlotSet(jnp.zeros(0, dtype), jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype),
                       jnp.zeros(0, bool), jnp.zeros(0, dtype), jnp.zeros(0, dtype), jnp.asarray(slot_pair),
                       jnp.zeros((), bool))
    groups = pair_groups(model)
    if reach is not None:
        bounds = pair_bounds(model, geom_poses)
        reach = jnp.broadcast_to(jnp.asarray(reach, bounds.dtype), bounds.shape)
    R = jnp.stack([jnp.asarray(R) for R, _ in geom_poses])         # every geom's pose, stacked once
    p = jnp.stack([jnp.asarray(p) for _, p in geom_poses])
    parts, overflow = [], jnp.zeros((), bool)
    for (k1, k2), members in groups.items():
        members = np.asarray(members, dtype=np.int32)
        capacity = len(members) if reach is None else kind_capacity((k1, k2), len(members), broad)
        index, near = None, None
        if capacity < len(members):
            buffer = gather_near(bounds[members], reach[members], capacity)
            overflow = overflow | buffer.overflow
            index = buffer.index
        if reach is not None:
            near = bounds[members] < reach[members]
            near = near if index is None else near[index]
        out = _group_slots(model, R, p, (k1, k2), members, index, near)
        if reach is not None:
            out = _scatter_group(model, p, members, index, near, out, bounds[members])
        parts.append(out)
    order = _slot_order(model, groups)
    gap, point, frame, valid = [jnp.concatenate([getattr(p, f).reshape((-1,) + getattr(p, f).shape[2:])
                                                 for p in parts])[order] for f in ("gap", "point", "frame", "valid")]
    friction = model.friction[slot_pair]
    valid = valid & ~coincident_slots(model, gap, point, frame[:, 0], friction, valid)
    return SlotSet(gap, point, frame, valid, friction=friction, restitution=model.restitution[slot_pair],
                   pair=jnp.asarray(slot_pair), overflow=overflow)


def _group_slots(model, R, p, kinds, members, chosen, near=None):
    """The narrow phase of a group of pairs of the kind ``kinds`` (a :func:`pair_groups` key; ``members`` its pair
    indices) in one ``vmap`` (one traced body per pair kind, not per pair), at the geoms' stacked world poses R, p:
    every member in order (``chosen`` None) or the positions ``chosen`` within the group (traced: the broad phase's
    buffer). ``near`` (one bool per computed pair, or None): the pairs within reach, the only ones the general
    convex route searches (:func:`~.narrowphase.collide_many`; the others' slots are placeholders, replaced by
    :func:`_scatter_group`). :class:`~.narrowphase.ContactSlots` with a leading axis, one entry per computed
    pair."""
    k1, k2 = kinds
    i = np.asarray([model.pairs[k][0] for k in members], dtype=np.int32)
    j = np.asarray([model.pairs[k][1] for k in members], dtype=np.int32)
    sizes1 = stacked_sizes([model.geoms[k].size for k in i])
    sizes2 = stacked_sizes([model.geoms[k].size for k in j])
    codes = _kind_codes(model, kinds, members)
    if chosen is not None:                              # traced positions within the group
        i, j, sizes1, sizes2 = jnp.asarray(i)[chosen], jnp.asarray(j)[chosen], sizes1[chosen], sizes2[chosen]
        codes = None if codes is None else tuple(jnp.asarray(c)[chosen] for c in codes)
    return collide_many(k1, k2, R[i], p[i], sizes1, R[j], p[j], sizes2,
                        None if codes is None else tuple(jnp.asarray(c) for c in codes), model.convex, near)


def _scatter_group(model, p, members, index, near, computed, bounds):
    """A group's slots (n, S, …) from the narrow phase of its buffer (``index`` into the group, None: the whole
    group, ``computed``): the pairs out of the buffer or out of reach (``near`` false, one per computed pair) not
    valid, at the bounding capsules' distance ``bounds``, at the midpoint of the geoms' origins (``p``, every
    geom's), the normal along the line from geom 1's origin to geom 2's; the others as computed."""
    n, count = len(members), computed.gap.shape[1]
    i = np.asarray([model.pairs[k][0] for k in members], dtype=np.int32)
    j = np.asarray([model.pairs[k][1] for k in members], dtype=np.int32)
    normal, _ = unit_or(p[j] - p[i], jnp.zeros_like(p[i]).at[:, 2].set(1.0))
    far = ContactSlots(jnp.repeat(bounds[:, None], count, axis=1),
                       jnp.repeat((0.5 * (p[i] + p[j]))[:, None], count, axis=1),
                       jnp.repeat(contact_frame(normal)[:, None], count, axis=1),
                       jnp.zeros((n, count), bool))
    at = slice(None) if index is None else index
    kept = jax.tree.map(lambda part, whole: jnp.where(near[(...,) + (None,) * (part.ndim - 1)],
                                                      part.astype(whole.dtype), whole[at]), computed, far)
    return jax.tree.map(lambda whole, part: whole.at[at].set(part), far, kept)


COINCIDENT_TOL = 1e-9    # slots whose points (m, relative to 1 + their distance from the origin), normals (1 − cos)
                         # and gaps (m) agree within this (floored at 64 ulp of the dtype) are one contact


def _slot_bodies(model):
    """(n_slots,) static key of the two rigid carriers of every slot: the (module, operational point) of each of its
    pair's geoms, the ground as None (two geoms on one frame, or both on the ground, move together)."""
    carrier = lambda g: None if g.is_ground else (g.module, g.frame)
    keys = {}
    return np.array([keys.setdefault((carrier(model.geoms[i]), carrier(model.geoms[j])), len(keys))
                     for (i, j), n in zip(model.pairs, model.slots) for _ in range(n)], dtype=np.int32)


def coincident_slots(model, gap, point, normal, friction, valid):
    """(n_slots,) bool: the slots that repeat an earlier valid slot of the same two carriers (:func:`_slot_bodies`)
    with the same point, normal, gap and friction (within :data:`COINCIDENT_TOL`). Such a slot is the same physical
    contact twice — the capsule on the edge shared by two boxes of one fixed part (a chamfered wall's wedge and the
    wall below it), a capsule–box edge slot whose nearest axis point is an end of the axis (where the end slot is) —
    and its rows would be exact copies of the first's: a singular Delassus matrix whose split of the impulse between
    the copies is undetermined, which ADMM resolves only slowly. Dropping the copy changes no motion (two equal
    Coulomb cones at one point and frame add up to the same cone). Static which slots are compared (same carriers),
    traced whether they coincide."""
    bodies = _slot_bodies(model)
    pair = np.repeat(np.arange(len(model.pairs)), model.slots)
    # across different geom pairs, and within a capsule–box pair (its edge slots clamped to an end repeat the end
    # slot); not within other pairs: a deep box–box overlap's corner slots can coincide, and dropping them slowed
    # its position correction (tests/test_contact_hardening.py::test_deep_box_overlaps_separate_without_throwing)
    kinds = [frozenset((model.geoms[i].kind, model.geoms[j].kind)) for i, j in model.pairs]
    repeats_itself = np.array([k == frozenset(("capsule", "box")) for k in kinds] or [False])[pair]
    later, earlier = np.nonzero((bodies[:, None] == bodies[None, :])
                                & ((pair[:, None] != pair[None, :]) | repeats_itself[:, None])
                                & np.tri(len(bodies), k=-1, dtype=bool))
    if not later.size:
        return jnp.zeros(len(bodies), bool)
    tol = jnp.maximum(COINCIDENT_TOL, 64 * jnp.finfo(gap.dtype).eps)
    scale = 1.0 + jnp.maximum(jnp.max(jnp.abs(point[later]), axis=-1), jnp.max(jnp.abs(point[earlier]), axis=-1))
    same = (valid[earlier] & (jnp.max(jnp.abs(point[later] - point[earlier]), axis=-1) <= tol * scale)
            & (1.0 - jnp.sum(normal[later] * normal[earlier], axis=-1) <= tol)
            & (jnp.abs(gap[later] - gap[earlier]) <= tol * scale)
            & (jnp.abs(friction[later] - friction[earlier]) <= tol))
    return jnp.zeros(len(bodies), bool).at[later].max(same)


def pair_groups(model):
    """{(kind1, kind2): pair indices} in first-appearance order: the pairs one ``vmap`` of the narrow phase
    computes together (one traced body per pair kind, not per pair: a robot with hundreds of cylinder–capsule
    pairs compiles one GJK/EPA). The pairs of the general convex route on primitives
    (:func:`~.narrowphase.convex_union`) of two or more kinds form one group, keyed by the tuples of their first
    and second kinds (KINDS order), computed by one traced body whatever the kind (:func:`~.convex.per_kind`):
    GJK, EPA and the refinement compile once, not once per kind."""
    groups = {}
    for k, (i, j) in enumerate(model.pairs):
        kinds = (model.geoms[i].kind, model.geoms[j].kind)
        assert canonical(*kinds)
        groups.setdefault(kinds, []).append(k)
    union = [kinds for kinds in groups if convex_union(*kinds)]
    if len(union) < 2:
        return groups
    key = tuple(tuple(sorted({kinds[side] for kinds in union}, key=KINDS.index)) for side in (0, 1))
    out = {}
    for kinds, members in groups.items():
        if kinds in union:
            out.setdefault(key, []).extend(members)
        else:
            out[kinds] = members
    return {kinds: sorted(members) for kinds, members in out.items()}


def pair_capacities(model, broad=BroadPhase()):
    """{pair kind (a :func:`pair_groups` key): (capacity, pairs)}: how many of each group's pairs the broad phase
    ``broad`` computes at most (:func:`~.broadphase.kind_capacity`), and how many the group has."""
    return {kinds: (kind_capacity(kinds, len(members), broad), len(members))
            for kinds, members in pair_groups(model).items()}


def _kind_codes(model, key, members):
    """Per side, the index of each member pair's geom kind into the group key's tuple of kinds (None for a group of
    one kind)."""
    if not isinstance(key[0], tuple):
        return None
    return tuple(np.asarray([key[side].index(model.geoms[model.pairs[k][side]].kind) for k in members],
                            dtype=np.int32) for side in (0, 1))


def _slot_order(model, groups):
    """Static gather index: slot s of the model (pair order) is entry order[s] of the groups' outputs flattened
    one after the other."""
    start, first = 0, {}
    for members in groups.values():
        count = model.slots[members[0]]
        for r, k in enumerate(members):
            first[k] = start + r * count
        start += count * len(members)
    return np.concatenate([first[k] + np.arange(n) for k, n in enumerate(model.slots)]).astype(np.int32)
