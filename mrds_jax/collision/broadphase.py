"""The broad phase: which candidate pairs of a collision model can touch, from bounding volumes, before any narrow
phase runs.

Every geom is enclosed in a **bounding capsule** in its own frame (:func:`bounding_capsule`): a segment along the
local z axis of half-length h, swept by a ball of radius r — a sphere (h = 0) and a capsule exactly, a cylinder by
the capsule of its radius and half-height, a box, an ellipsoid and a mesh by their bounding sphere about the geom's
origin (a box's or mesh's vertex farthest from it, an ellipsoid's largest radius). A plane is not bounded: a pair
with a plane measures the other geom's capsule against the half-space.

The bound of a pair (:func:`pair_bounds`) is the signed distance of the two capsules (the closest points of the two
segments in closed form, Ericson §5.1.9, less the radii), or of the capsule and the plane (the segment's lowest
end's height, less the radius). Each geom lies inside its capsule, so the bound is **never larger than the geoms'
own signed distance** (apart or overlapping): a pair whose bound is at least a reach cannot be nearer than it, and
skipping its narrow phase loses nothing within that reach (tests/test_collision_broadphase.py checks it against
MuJoCo's ``mj_collision`` on random configurations of Go1 and the humanoid).

The pairs within reach are **gathered per pair kind** into a fixed-capacity buffer (:func:`gather_near`), nearest
first, as the step's active rows are (MuJoCo sizes its contact buffer the same way; MJX culls its candidate pairs
by bounding spheres with a fixed count per kind, its ``max_geom_pairs``): only those reach the narrow phase, so a
robot's cost and compiled program grow with the pairs that can touch (the capacity), not with the pairs its file
declares. More pairs within reach than places is an **overflow**, reported (never silent): the farthest are left
out. Shapes are static; the selection is traced, and holds no gradient (the pairs' slots are differentiated
through the narrow phase of the gathered ones).
"""
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .closest_points import dot, segment_segment, unit_or
from .convex import support_height
from .geoms import stacked_sizes
from .narrowphase import CONVEX_ROUTE

CLOSED_FORM_PAIRS = 32    # default capacity of a pair kind with a closed-form narrow phase (cheap: 0.2 µs a pair)
GENERAL_PAIRS = 8         # default capacity of the general convex route on primitives (GJK/EPA) and of box–box
MESH_PAIRS = 32           # default capacity of mesh–mesh and primitive–mesh pairs: a robot of mesh links lying on
                          # the floor with its legs folded (Solo-12) has 16-32 of its 112 mesh pairs within reach


class BroadPhase(NamedTuple):
    """Settings of the broad phase (module docstring).

    ``max_pairs``: the capacity of each pair kind's narrow-phase buffer (pairs of one kind, e.g. capsule–cylinder,
    computed together); None: :data:`CLOSED_FORM_PAIRS` for kinds with a closed-form narrow phase (a plane's
    included), :data:`GENERAL_PAIRS` for the general convex route on primitives (one group for all its kinds) and
    box–box, :data:`MESH_PAIRS` for pairs with a mesh, never more than the kind's pairs (a kind with no more pairs
    than places is computed whole); ``capacity_factor`` multiplies those defaults (``simulate`` doubles it and runs
    again when a run with the default capacities overflowed, as a neighbour list is reallocated: set ``max_pairs`` to
    fix the capacity instead). ``slack`` (m): added to the reach of every pair — the
    contact margin and the distance both geoms can travel within the step (:func:`step_reach`) — to cover the change
    of velocity within the step."""
    max_pairs: Optional[int] = None
    slack: float = 1e-3
    capacity_factor: int = 1


class PairBuffer(NamedTuple):
    """Which pairs of one kind's group reach the narrow phase: ``index`` (c,) positions within the group (nearest
    first; past the pairs within reach, the nearest of the others fill the buffer), ``overflow`` () whether more of
    the group were within reach than fit."""
    index: jax.Array
    overflow: jax.Array


def bounding_capsule(kind, size):
    """(h, r): half-length along the geom's local z axis and radius of a capsule that contains the geom (module
    docstring); a plane (unbounded, its pairs measured by :func:`plane_bound`) (0, 0): the point on it whose
    motion :func:`geom_speed_bounds` takes."""
    size = jnp.asarray(size)
    zero = jnp.zeros((), size.dtype)
    if kind == "plane":
        return zero, zero
    if kind == "sphere":
        return zero, size[0]
    if kind in ("capsule", "cylinder"):
        return size[1], size[0]
    if kind == "box":
        return zero, jnp.sqrt(dot(size, size))
    if kind == "ellipsoid":
        return zero, jnp.max(size)
    if kind == "mesh":                                  # size: the hull's (V, 3) vertices in the geom's frame
        return zero, jnp.sqrt(jnp.max(jnp.sum(size * size, axis=-1)))
    raise ValueError(f"bounding_capsule: no bounding capsule for a {kind!r} geom")


def capsule_bound(c1, a1, h1, r1, c2, a2, h2, r2):
    """Signed distance of two capsules (centres c, unit axes a, half-lengths h, radii r): their segments' distance
    less the radii (:func:`~.closest_points.segment_segment`)."""
    s, t, _, _, _ = segment_segment(c1, a1, h1, c2, a2, h2, 1e-12)
    d = c1 + s * a1 - c2 - t * a2
    return jnp.sqrt(dot(d, d)) - r1 - r2


def plane_bound(n, p, c, a, h, r):
    """Signed distance of a capsule (centre c, unit axis a, half-length h, radius r) above the plane through p with
    unit normal n: the lower end of its segment's height less the radius."""
    return dot(n, c - p) - h * jnp.abs(dot(n, a)) - r


def axis_bounds(model, R, centre, i, j):
    """(k,) lower bounds of the signed distances of the geom pairs (i[k], j[k]) (none a plane) at the geoms' world
    rotations R and positions ``centre``: the separating-axis gap along the line n from geom i's origin to geom
    j's, −h_i(n) − h_j(−n) with h the geoms' support functions (:func:`~.convex.support_height`), which bounds the
    signed distance of two convex shapes from below along any unit n, apart or overlapping (the module docstring of
    :mod:`.convex`). Tight where the bounding capsules are not: two short wide cylinders side by side (Go1's hip
    rotors: −0.038 m by their capsules, 0.052 m along this axis, 0.054 m apart). One ``vmap`` per geom kind and
    side."""
    n, _ = unit_or(centre[j] - centre[i], jnp.zeros_like(centre[i]).at[:, 2].set(1.0))
    heights = jnp.zeros(len(i), centre.dtype)
    for side, sign in ((i, 1.0), (j, -1.0)):
        for kind in sorted({model.geoms[g].kind for g in side}):
            chosen = np.flatnonzero([model.geoms[g].kind == kind for g in side])
            geoms, slot = np.unique(side[chosen], return_inverse=True)
            sizes = stacked_sizes([jnp.asarray(model.geoms[g].size, centre.dtype) for g in geoms])[slot]
            heights = heights.at[chosen].add(jax.vmap(lambda R, p, size, u: support_height(kind, R, p, size, u))(
                R[side[chosen]], centre[side[chosen]], sizes, sign * n[chosen]))
    return -heights


def pair_bounds(model, geom_poses):
    """(n_pairs,) lower bounds of the pairs' signed distances at the world poses ``geom_poses`` ((R, p) per geom),
    from the geoms' bounding capsules (module docstring), computed for all pairs at once (one ``vmap`` over the
    pairs with a plane, one over the others), and for pairs without a plane the larger of that and the
    separating-axis bound along the line between the geoms' origins (:func:`axis_bounds`). Not differentiated (a
    selection)."""
    geom_poses = jax.lax.stop_gradient(tuple(tuple(pose) for pose in geom_poses))
    dtype = jnp.result_type(*(p for _, p in geom_poses))
    if not model.pairs:
        return jnp.zeros(0, dtype)
    R = jnp.stack([jnp.asarray(R, dtype) for R, _ in geom_poses])
    centre = jnp.stack([jnp.asarray(p, dtype) for _, p in geom_poses])
    axis = R[:, :, 2]                                   # local z in the world: the capsule's axis, a plane's normal
    capsules = [bounding_capsule(g.kind, g.size) for g in model.geoms]
    h = jnp.stack([jnp.asarray(x, dtype) for x, _ in capsules])
    r = jnp.stack([jnp.asarray(y, dtype) for _, y in capsules])
    i = np.asarray([a for a, _ in model.pairs], dtype=np.int32)
    j = np.asarray([b for _, b in model.pairs], dtype=np.int32)
    plane = np.asarray([model.geoms[a].kind == "plane" for a in i])   # pairs are in KINDS order: a plane is geom 1
    bounds = jnp.zeros(len(i), dtype)
    if plane.any():
        a, b = i[plane], j[plane]
        bounds = bounds.at[np.flatnonzero(plane)].set(
            jax.vmap(plane_bound)(axis[a], centre[a], centre[b], axis[b], h[b], r[b]))
    if (~plane).any():
        a, b = i[~plane], j[~plane]
        bounds = bounds.at[np.flatnonzero(~plane)].set(jnp.maximum(
            jax.vmap(capsule_bound)(centre[a], axis[a], h[a], r[a], centre[b], axis[b], h[b], r[b]),
            axis_bounds(model, R, centre, a, b)))
    return bounds


def kind_capacity(kinds, count, settings=BroadPhase()):
    """The narrow-phase capacity of a group of ``count`` pairs of the pair kind ``kinds`` ((kind1, kind2)) under
    ``settings`` (:class:`BroadPhase`): never more than ``count``."""
    if settings.max_pairs is not None:
        return min(count, int(settings.max_pairs))
    return min(count, int(settings.capacity_factor) * _default_capacity(kinds))


def _default_capacity(kinds):
    if isinstance(kinds[0], tuple):                   # a group of several kinds on the convex route (pair_groups)
        return GENERAL_PAIRS
    if "plane" in kinds:                              # closed forms (a mesh's: its lowest vertices)
        return CLOSED_FORM_PAIRS
    if "mesh" in kinds:
        return MESH_PAIRS
    return GENERAL_PAIRS if kinds in CONVEX_ROUTE or kinds == ("box", "box") else CLOSED_FORM_PAIRS


def gather_near(bound, reach, capacity):
    """:class:`PairBuffer` of a group: the ``capacity`` pairs of smallest ``bound`` among those with bound < reach
    (``bound``, ``reach``: (n,) or broadcastable), nearest first; the rest of the buffer is filled with the nearest
    pairs out of reach (whose slots :func:`~.model.contact_slots` reports as not valid)."""
    n = bound.shape[0]
    near = bound < reach
    if capacity >= n:
        return PairBuffer(jnp.arange(n, dtype=jnp.int32), jnp.zeros((), bool))
    _, index = jax.lax.top_k(jnp.where(near, -bound, -jnp.inf), capacity)
    return PairBuffer(index.astype(jnp.int32), jnp.sum(near) > capacity)


def geom_speed_bounds(model, geom_poses, twists, origins):
    """(n_geoms,) an upper bound of the speed of any point of each geom's bounding capsule: |v_c| + |ω| (h + r), v_c
    the velocity of the geom's centre from the twist (ω, v_o) of the point o it rides on (world-aligned, at
    ``origins``); zero on the ground."""
    out = []
    for g, (R, p), twist, o in zip(model.geoms, geom_poses, twists, origins):
        if g.is_ground:
            out.append(jnp.zeros((), p.dtype))
            continue
        w, vo = twist[:3], twist[3:]
        vc = vo + jnp.cross(w, p - o)
        h, r = bounding_capsule(g.kind, g.size)
        out.append(jnp.sqrt(dot(vc, vc)) + jnp.sqrt(dot(w, w)) * (h + r))
    return jax.lax.stop_gradient(jnp.stack(out))


def step_reach(model, speeds, margin, dt, settings=BroadPhase()):
    """(n_pairs,) the reach of every pair in a step of ``dt``: ``margin`` (the step's contact margin), plus twice
    the distance both geoms' points can travel at ``speeds`` (:func:`geom_speed_bounds`) in the step (twice: the
    free velocity the step judges nearness by may be larger than the start's), plus ``settings.slack``."""
    i = np.asarray([a for a, _ in model.pairs], dtype=np.int32)
    j = np.asarray([b for _, b in model.pairs], dtype=np.int32)
    return margin + 2.0 * dt * (speeds[i] + speeds[j]) + settings.slack


__all__ = ["BroadPhase", "PairBuffer", "bounding_capsule", "capsule_bound", "plane_bound", "pair_bounds",
           "kind_capacity", "gather_near", "geom_speed_bounds", "step_reach"]
