"""The narrow phase: for two geoms at world poses, a fixed number of contact *slots*, each a signed gap, a world
point and a contact frame.

Conventions (those of MuJoCo's ``mjContact``, engine_collision_primitive.c / mjc_* functions, checked against
``mujoco`` in tests/test_collision_mujoco.py): the normal n points **from geom 1 to geom 2**; the gap is the
signed distance along it (> 0 apart, < 0 penetrating); the point is the midpoint of the two surface points.
``frame`` rows are [n, t1, t2] (:func:`~.closest_points.contact_frame`). A pair kind has a static slot count
(:data:`SLOTS`) whatever the configuration, so shapes never change as contacts come and go; ``valid`` is False
only for a slot that is structurally absent at this configuration (the solver decides activity from the gap).

Pairs are computed in the order of :data:`~.geoms.KINDS` (plane, sphere, capsule, box, cylinder, ellipsoid, mesh); a pair asked
the other way round is computed swapped and its normal flipped (points and gaps are symmetric).

The slots, kind by kind (pair, slot count: what each slot is):

* plane–sphere, 1: the centre's height above the plane, less the radius.
* plane–capsule, 2: the two end spheres against the plane.
* plane–box, 4: the 4 deepest corners against the plane, deepest first.
* plane–cylinder, 8: 4 rim points per cap (cap +z first): the rim point deepest toward the plane, then the rim at
  +90°, +180°, +270° about the axis (an upright cylinder stands on a square).
* sphere–sphere, 1: the centres' distance less the radii.
* sphere–capsule, 1: the sphere against the nearest point of the capsule's axis segment.
* sphere–box, 1: signed distance of the centre to the box (nearest face inside), less the radius.
* sphere–cylinder, 1: signed distance of the centre to the solid cylinder, less the radius.
* capsule–capsule, 2: the axis segments' closest points (Ericson §5.1.9); the second slot is valid only when the
  axes are parallel (sin² of their angle ≤ ``parallel_tolerance``), at the other end of the segments' overlap.
* capsule–box, 4: spheres of the capsule's radius against the box (signed point–box distance) at the two ends of
  the axis, and at the axis points nearest to the two box edges nearest to the axis segment (a capsule lying
  across a face is held at both edges it crosses).
* plane–ellipsoid, 1: the ellipsoid's support point along the plane's inward normal (its deepest point, exact).
* capsule–cylinder, box–cylinder, cylinder–cylinder, and sphere/capsule/box/cylinder/ellipsoid–ellipsoid, 1: the
  general convex route (:mod:`.convex`: GJK apart, EPA overlapping, then Newton on the sphere of normals), which
  is what MuJoCo uses for these pairs (its mjc_Convex). MuJoCo adds up to 4 more contacts for the cylinder pairs
  by re-running with the geoms turned ±1e-3 rad about the contact (its "multiccd"); that is not done here (one
  slot: a cylinder lying on a face touches at one point per step).
* plane–mesh, 5: the hull's lowest vertex (exact, MuJoCo's first contact), and its support vertices along four
  directions leaning 0.2 (tan) off the inward normal, a quarter turn apart, repeated vertices not valid (:func:`plane_mesh`).
* sphere/capsule/box/cylinder/ellipsoid/mesh–mesh, 1: the general convex route on the hull's vertices (the
  support function is the maximum over them), MuJoCo's mjc_Convex for meshes.
* box–box, 17: the 8 corners of box 1 against box 2, the 8 corners of box 2 against box 1 (signed point–box
  distances), and one edge–edge slot: the separating-axis test (Gottschalk et al. 1996; Ericson §4.4.1) over the
  9 edge-cross axes, valid when that axis separates more than every face axis and the two supporting edges'
  closest points lie inside both edges (a true edge–edge contact).

Exactness: every slot's gap is the exact signed distance between the two features it names, so the minimum over
a pair's slots is the exact distance of the two geoms whenever the nearest features are among them: always for
plane–{sphere, capsule, box, cylinder}, sphere–{sphere, capsule, box, cylinder}, capsule–capsule; for
capsule–box while the capsule's axis does not enter the box (penetration less than its radius); for box–box when
separated or touching (checked against bounded least squares), and penetrating while the deepest point is a corner
in a face or an edge across an edge (checked against MuJoCo's separating-axis depth for penetrations up to 5 cm
on boxes of 0.1-0.5 m; a corner inside the other box takes the depth to the face it is nearest, tie-broken toward
the face that looks at the other box's centre, see :func:`box_box`). Deeper interpenetration that no corner or
edge pair measures (two thin boxes crossed through each other) is under-reported: the time stepper keeps
penetration small, and the largest face-axis depth is what such a configuration would need.

Derivatives: every slot is a smooth function of the poses and sizes away from its feature switches (a clamp at a
segment end, a change of the nearest face or edge, the edge slots' top-2 choice, ``valid`` flipping), where the
derivative is that of the active branch; nothing returns NaN there (safe norms, both ``jnp.where`` branches
finite).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .closest_points import (box_edges, box_vertices, contact_frame, dot, point_box, point_cylinder,
                             segment_segment, unit_or)
from .convex import ConvexSettings, Shape, convex_contact, convex_contacts, support
from .geoms import KINDS
from ..spatial import cross
from ..spatial.transforms import rotate, rotate_transpose

PARALLEL_TOL = 1e-10     # capsule axes (and box edges) with sin² of their angle below this are parallel (float64;
                         # at least 16 ulp of the dtype: float32 cannot resolve 1 - cos² below that)
EDGE_TIE = 1e-9          # box–box: an edge axis must out-separate every face axis by this × the sizes' sum
DEEP_OVERLAP = 0.6       # box–box: overlaps deeper than this × the smaller half-extent part along one SAT face axis,
FACE_TOUCH = 1e-3        # and so do corners within this × it of a face of the other box (_corners_against)
FACE_BIAS = 0.1          # box–box: a corner's face choice prefers the face toward the other box by this × min h


def parallel_tolerance(x):
    """sin² of the angle below which two directions count as parallel, for the dtype of ``x``."""
    return max(PARALLEL_TOL, 16 * float(jnp.finfo(jnp.result_type(x, jnp.float32)).eps))


class ContactSlots(NamedTuple):
    """The slots of one pair (S = :data:`SLOTS` of its kinds): gap (S,), point (S, 3), frame (S, 3, 3) with rows
    [n, t1, t2] and n from geom 1 to geom 2, valid (S,) bool."""
    gap: jax.Array
    point: jax.Array
    frame: jax.Array
    valid: jax.Array


def _swept(x, radius, dist, n):
    """Slot of a swept point x (radius ≥ 0) at signed distance ``dist`` from the other geom, whose outward normal
    n points toward x: gap = dist - radius, point = midpoint of x - n·radius and x - n·dist."""
    gap = dist - radius
    return gap, x - n * (radius + 0.5 * gap)[..., None], n


def _plane_height(R, p, x):
    n = R[:, 2]
    return dot(x - p, n), jnp.broadcast_to(n, x.shape)


def plane_sphere(R1, p1, size1, R2, p2, size2):
    """1 slot: the centre's signed height above the plane (its normal: local z of R1) less the radius
    (Ericson §5.2.2)."""
    d, n = _plane_height(R1, p1, p2)
    return _swept(p2[None], size2[0], d[None], n[None])


def capsule_ends(R, p, size):
    """The two end points (2, 3) of a capsule's axis segment, +z end first."""
    axis = R[:, 2]
    return jnp.stack([p + size[1] * axis, p - size[1] * axis])


def plane_capsule(R1, p1, size1, R2, p2, size2):
    """2 slots: the end spheres against the plane (a capsule's deepest point is over an end, or both when level)."""
    ends = capsule_ends(R2, p2, size2)
    d, n = _plane_height(R1, p1, ends)
    return _swept(ends, size2[0], d, n)


def plane_box(R1, p1, size1, R2, p2, size2):
    """4 slots: the 4 deepest corners' signed heights above the plane, deepest first (Ericson §5.2.3: a box's
    deepest point is a corner; a box resting on a face touches with 4, MuJoCo's mjc_PlaneBox keeps at most 4)."""
    corners = box_vertices(R2, p2, size2)
    d, n = _plane_height(R1, p1, corners)
    _, deepest = jax.lax.top_k(-jax.lax.stop_gradient(d), 4)
    return _swept(corners[deepest], 0.0, d[deepest], n[deepest])


def plane_cylinder(R1, p1, size1, R2, p2, size2):
    """8 slots: per cap the rim point deepest toward the plane (the cap centre less r·u, u the plane normal's
    component in the cap plane, normalised; the cylinder's local x when upright) and the rim at 90° steps from
    it: the deepest of all is the cylinder's deepest point."""
    n, axis = R1[:, 2], R2[:, 2]
    u, _ = unit_or(n - dot(n, axis) * axis, R2[:, 0])      # in the cap plane, toward the plane's normal
    w = cross(axis, u)
    rim = jnp.stack([-u, -w, u, w]) * size2[0]
    caps = jnp.stack([p2 + size2[1] * axis, p2 - size2[1] * axis])
    points = (caps[:, None, :] + rim[None, :, :]).reshape(8, 3)
    d, normal = _plane_height(R1, p1, points)
    return _swept(points, 0.0, d, normal)


def _sphere_pair(x1, r1, x2, r2):
    """Swept points x1 (radius r1) and x2 (r2): normal from 1 to 2 (world +z where they coincide)."""
    n, dist = unit_or(x2 - x1, jnp.zeros_like(x1).at[..., 2].set(1.0))
    return _swept(x2, r2, dist - r1, n)


def sphere_sphere(R1, p1, size1, R2, p2, size2):
    """1 slot: centre distance less the radii (Ericson §4.3.1)."""
    return _sphere_pair(p1[None], size1[0], p2[None], size2[0])


def sphere_capsule(R1, p1, size1, R2, p2, size2):
    """1 slot: the sphere against the capsule's axis point nearest to its centre (Ericson §5.1.2)."""
    axis = R2[:, 2]
    t = jnp.clip(dot(p1 - p2, axis), -size2[1], size2[1])
    return _sphere_pair(p1[None], size1[0], (p2 + t * axis)[None], size2[0])


def _flip(gap, point, n):
    return gap, point, -n


def sphere_box(R1, p1, size1, R2, p2, size2):
    """1 slot: the centre's signed distance to the box (Ericson §5.1.3; inside: the nearest face) less the radius."""
    dist, n = point_box(p1[None], R2, p2, size2)
    return _flip(*_swept(p1[None], size1[0], dist, n))


def sphere_cylinder(R1, p1, size1, R2, p2, size2):
    """1 slot: the centre's signed distance to the solid cylinder less the radius."""
    dist, n = point_cylinder(p1[None], R2, p2, size2[0], size2[1])
    return _flip(*_swept(p1[None], size1[0], dist, n))


def capsule_capsule(R1, p1, size1, R2, p2, size2):
    """2 slots: the axes' closest points (Ericson §5.1.9) and, valid when parallel, the other end of their
    overlap."""
    a1, a2 = R1[:, 2], R2[:, 2]
    h1, h2 = size1[1], size2[1]
    s, t, parallel, lo, hi = segment_segment(p1, a1, h1, p2, a2, h2, parallel_tolerance(p1))
    # the second slot: the end of the overlap farther from the first slot's s
    s_other = jnp.clip(jnp.where(jnp.abs(s - lo) > jnp.abs(s - hi), lo, hi), -h1, h1)
    b, f = dot(a1, a2), dot(a2, p1 - p2)
    t_other = jnp.clip(b * s_other + f, -h2, h2)
    s_all, t_all = jnp.stack([s, s_other]), jnp.stack([t, t_other])
    x1 = p1 + s_all[:, None] * a1
    x2 = p2 + t_all[:, None] * a2
    gap, point, n = _sphere_pair(x1, size1[0], x2, size2[0])
    return gap, point, n, jnp.stack([jnp.array(True), parallel & (hi > lo)])


def capsule_box(R1, p1, size1, R2, p2, size2):
    """4 slots: the end spheres and the spheres at the axis points nearest to the two box edges nearest to the
    axis (segment–segment distances, Ericson §5.1.9), each against the box by signed point–box distance."""
    radius, axis, h = size1[0], R1[:, 2], size1[1]
    centres, dirs, halves, _ = box_edges(R2, p2, size2)
    s, t, _, _, _ = segment_segment(p1, axis, h, centres, dirs, halves, parallel_tolerance(p1))
    near_edges = p1 + s[:, None] * axis                 # the axis point nearest to each of the 12 edges
    to_edge = near_edges - centres - t[:, None] * dirs
    _, nearest = jax.lax.top_k(-dot(to_edge, to_edge), 2)
    points = jnp.concatenate([capsule_ends(R1, p1, size1), near_edges[nearest]])
    dist, n = point_box(points, R2, p2, size2)
    return _flip(*_swept(points, radius, dist, n))


def _corners_against(Ra, pa, ha, Rb, pb, hb):
    """Corners of box a against box b: (dist, outward normal of b) with the face-choice bias of :func:`box_box`."""
    toward, _ = unit_or(rotate_transpose(Rb, pa - pb) / hb, jnp.zeros_like(pa))
    bias = FACE_BIAS * jnp.min(hb) * (1.0 - jnp.abs(toward))
    corners = box_vertices(Ra, pa, ha)
    dist, n = point_box(corners, Rb, pb, hb, face_bias=bias)
    inside_depth, inside_n, overlap = _sat_face_depth(corners, Ra, pa, ha, Rb, pb, hb)
    # deep, or a corner on a face of b while the boxes overlap (equal extents: the nearest face is a side face)
    on_face = dist > -FACE_TOUCH * jnp.min(hb)
    inside = (dist <= 0) & ((overlap > DEEP_OVERLAP * jnp.min(hb)) | (on_face & (overlap > FACE_TOUCH * jnp.min(hb))))
    return corners, jnp.where(inside, inside_depth, dist), jnp.where(inside[:, None], inside_n, n)


def _sat_face_depth(corners, Ra, pa, ha, Rb, pb, hb):
    """For a deep overlap (beyond :data:`DEEP_OVERLAP` of box b's smallest half-extent, where corners' nearest
    faces stop telling which way the boxes should part), and for corners on a face of b (within :data:`FACE_TOUCH`)
    while the boxes overlap, corners of box a inside box b measured along one normal
    for the whole pair: box b's face axis of least
    overlap with box a (the separating-axis test's face axes, Gottschalk et al. 1996; Ericson §4.4.1), on the side
    facing a — the signed distance of each corner to that face's plane and its outward normal. A deep overlap (two
    equal cubes 18 cm into each other, whose corners lie on the side faces) then separates along the axis that
    needs the least motion, the same for every corner, instead of each corner's nearest face (0 on a side face)."""
    d = pa - pb
    b = Rb.T                                              # rows: box b's axes in world coordinates
    support_a = dot(ha, jnp.abs(dot(b[:, None, :], Ra.T)))  # box a's support radius along each of b's axes
    overlap = hb + support_a - jnp.abs(dot(b, d))
    k = jnp.argmin(overlap)
    n = b[k] * jnp.where(dot(b[k], d) >= 0, 1.0, -1.0)
    return dot(corners - pb, n) - hb[k], jnp.broadcast_to(n, corners.shape), overlap[k]


def _edge_edge(R1, p1, h1, R2, p2, h2):
    """The edge–edge slot of two boxes by the separating-axis test over the 9 cross axes a_i × b_j
    (Ericson §4.4.1): the axis of largest separation, its supporting edges and their lines' closest points."""
    d = p2 - p1
    a, b = R1.T, R2.T                                    # rows: the boxes' axes in world coordinates
    ii, jj = [i for i in range(3) for _ in range(3)], [j for _ in range(3) for j in range(3)]
    u, length = unit_or(cross(a[jnp.array(ii)], b[jnp.array(jj)]), jnp.zeros((9, 3), dtype=d.dtype))
    parallel = length ** 2 <= parallel_tolerance(d)
    n = u * jnp.where(dot(u, d) >= 0, 1.0, -1.0)[:, None]

    def radius(axes, half, directions):                 # Σ_k h_k |axis_k · direction|: a box's support radius
        return dot(half, jnp.abs(dot(directions[..., None, :], axes)))

    separation = dot(n, d) - radius(a, h1, n) - radius(b, h2, n)
    face1 = jnp.abs(dot(a, d)) - h1 - radius(b, h2, a)
    face2 = jnp.abs(dot(b, d)) - h2 - radius(a, h1, b)
    lowest = jnp.min(jnp.concatenate([separation, face1, face2])) - 1.0
    candidate = jnp.where(parallel, lowest, separation)
    k = jnp.argmax(candidate)
    i, j = jnp.array(ii)[k], jnp.array(jj)[k]
    nk = n[k]
    sign1 = jnp.where(dot(a, nk) >= 0, 1.0, -1.0) * (jnp.arange(3) != i)
    sign2 = jnp.where(dot(b, nk) >= 0, 1.0, -1.0) * (jnp.arange(3) != j)
    e1 = p1 + rotate(R1, sign1 * h1)                       # supporting edge of box 1 along a_i (toward box 2)
    e2 = p2 - rotate(R2, sign2 * h2)                       # supporting edge of box 2 along b_j (toward box 1)
    ai, bj = a[i], b[j]
    r = e1 - e2
    cosine, c, f = dot(ai, bj), dot(ai, r), dot(bj, r)
    s = (cosine * f - c) / jnp.where(parallel[k], 1.0, 1.0 - cosine ** 2)
    t = cosine * s + f
    point = 0.5 * (e1 + s * ai + e2 + t * bj)
    face_first = EDGE_TIE * (jnp.sum(h1) + jnp.sum(h2))   # a tie goes to the faces (the corner slots hold it)
    valid = (~parallel[k] & (candidate[k] > jnp.maximum(jnp.max(face1), jnp.max(face2)) + face_first)
             & (jnp.abs(s) <= h1[i]) & (jnp.abs(t) <= h2[j]))
    return separation[k], point, nk, valid


def box_box(R1, p1, size1, R2, p2, size2):
    """17 slots: corners of box 1 in box 2, corners of box 2 in box 1, one edge–edge slot.

    A corner inside the other box takes the depth to one of its faces: the nearest, except that each face's depth
    is raised by ``FACE_BIAS`` · min(half-extents) · (1 - |û_i|) before the choice, with û the direction from
    this box's centre to the other's in the other box's half-extent-scaled coordinates. This only decides near-ties
    (a corner on two faces at once, as for equal boxes stacked edge on edge, where the nearest face would be the
    side face) in favour of the face between the two boxes; the gap reported is that face's exact depth."""
    c1, d1, n1 = _corners_against(R1, p1, size1, R2, p2, size2)      # n1: box 2's outward normal, toward box 1
    c2, d2, n2 = _corners_against(R2, p2, size2, R1, p1, size1)      # n2: box 1's outward normal, toward box 2
    g1, q1, _ = _swept(c1, 0.0, d1, n1)
    g2, q2, _ = _swept(c2, 0.0, d2, n2)
    ge, qe, ne, ve = _edge_edge(R1, p1, size1, R2, p2, size2)
    gap = jnp.concatenate([g1, g2, ge[None]])
    point = jnp.concatenate([q1, q2, qe[None]])
    normal = jnp.concatenate([-n1, n2, ne[None]])
    valid = jnp.concatenate([jnp.ones(16, dtype=bool), ve[None]])
    return gap, point, normal, valid


def plane_ellipsoid(R1, p1, size1, R2, p2, size2):
    """1 slot: the ellipsoid's support point along the plane's inward normal −n (its deepest point, exact:
    x = p − R S² Rᵀn / |S Rᵀn|, S = diag(radii)) against the plane (MuJoCo's mjc_PlaneConvex)."""
    n = R1[:, 2]
    x = support("ellipsoid", R2, p2, size2, -n)
    d, normal = _plane_height(R1, p1, x[None])
    return _swept(x[None], 0.0, d, normal)


MESH_TILT = 0.2     # plane–mesh: the side slots' support directions lean this far (tan) off the plane's inward normal,
MESH_TURN = 0.3     # toward the plane's tangent turned by this (rad) and its quarter turns: never one ties the two
                    # corners of an edge of a sole square to the plane's axes


def plane_mesh(R1, p1, size1, R2, p2, size2):
    """5 slots: the hull's lowest vertex along the plane's inward normal −n (the mesh's deepest point, exact: MuJoCo's
    mjc_PlaneConvex), then its support vertices along −n + ``MESH_TILT``·t_k, t_k the plane's tangent t1 turned
    by ``MESH_TURN`` + k·90° toward t2: a flat sole lying on the plane is held at its outermost vertices in four directions
    (MuJoCo adds up to two neighbours of the lowest vertex in the hull's graph within the margin instead). A slot
    whose vertex an earlier slot already holds is not valid (no repeated contact)."""
    n, t1, t2 = R1[:, 2], R1[:, 0], R1[:, 1]
    angles = MESH_TURN + 0.5 * jnp.pi * jnp.arange(4)
    lean = MESH_TILT * (jnp.cos(angles)[:, None] * t1 + jnp.sin(angles)[:, None] * t2)
    directions = jnp.concatenate([-n[None], -n + lean])
    local = directions @ R2                                        # (5, 3): Rᵀ u per row
    index = jnp.argmax(local @ size2.T, axis=-1)
    x = p2 + size2[index] @ R2.T
    d, normal = _plane_height(R1, p1, x)
    repeated = jnp.any((index[:, None] == index[None, :]) & (jnp.arange(5)[:, None] > jnp.arange(5)[None, :]), axis=1)
    gap, point, normal = _swept(x, 0.0, d, normal)
    return gap, point, normal, ~repeated


CONVEX_ROUTE = (("capsule", "cylinder"), ("box", "cylinder"), ("cylinder", "cylinder"), ("sphere", "ellipsoid"),
                ("capsule", "ellipsoid"), ("box", "ellipsoid"), ("cylinder", "ellipsoid"), ("ellipsoid", "ellipsoid"),
                *((kind, "mesh") for kind in ("sphere", "capsule", "box", "cylinder", "ellipsoid", "mesh")))
# the pairs (in KINDS order) on the general convex route: GJK, EPA and the Newton refinement (.convex)


def convex_union(kind1, kind2):
    """Whether pairs of the kinds (kind1, kind2) (KINDS order) may share one traced body with pairs of other kinds
    (:func:`~.convex.per_kind`): the general convex route on primitives (sizes of at most 3 entries; a mesh's
    vertex arrays are not padded to a primitive's)."""
    return (kind1, kind2) in CONVEX_ROUTE and "mesh" not in (kind1, kind2)


def convex_pair(kind1, kind2, settings=ConvexSettings()):
    """1 slot of two convex primitives by GJK and EPA (:func:`~.convex.convex_contact` with ``settings``, MuJoCo's
    mjc_Convex for the pairs it has no analytic routine for)."""
    def pair(R1, p1, size1, R2, p2, size2):
        gap, point, n = convex_contact(Shape(kind1, R1, p1, size1), Shape(kind2, R2, p2, size2), settings)
        return gap[None], point[None], n[None]
    pair.__name__ = f"{kind1}_{kind2}"
    return pair


_PAIRS = {
    ("plane", "sphere"): (plane_sphere, 1), ("plane", "capsule"): (plane_capsule, 2),
    ("plane", "box"): (plane_box, 4), ("plane", "cylinder"): (plane_cylinder, 8),
    ("sphere", "sphere"): (sphere_sphere, 1), ("sphere", "capsule"): (sphere_capsule, 1),
    ("sphere", "box"): (sphere_box, 1), ("sphere", "cylinder"): (sphere_cylinder, 1),
    ("capsule", "capsule"): (capsule_capsule, 2), ("capsule", "box"): (capsule_box, 4),
    ("box", "box"): (box_box, 17),
    ("plane", "ellipsoid"): (plane_ellipsoid, 1), ("plane", "mesh"): (plane_mesh, 5),
    **{pair: (convex_pair(*pair), 1) for pair in CONVEX_ROUTE},
}
# static slot count of every supported ordered pair (both orders)
SLOTS = {**{k: n for k, (_, n) in _PAIRS.items()}, **{k[::-1]: n for k, (_, n) in _PAIRS.items()}}


def supports(kind1, kind2):
    """True when the narrow phase handles the pair of kinds (in either order)."""
    return (kind1, kind2) in SLOTS


def canonical(kind1, kind2):
    """True when (kind1, kind2) is in :data:`~.geoms.KINDS` order (computed as given, not swapped)."""
    return KINDS.index(kind1) <= KINDS.index(kind2)


def collide_many(kind1, kind2, R1, p1, size1, R2, p2, size2, codes=None, settings=ConvexSettings(), need=None):
    """:func:`collide` of a stack of pairs of one kind (a leading axis on every pose and size): one ``vmap``, and on
    the general convex route :func:`~.convex.convex_contacts`, which runs EPA only when one of the pairs overlaps.
    The same slots as :func:`collide` pair by pair. On the convex route ``kind1`` and ``kind2`` may be tuples of
    kinds (each pair in KINDS order, sizes padded to 3) with ``codes`` = (c1, c2) each pair's indices into them
    (:func:`~.convex.per_kind`): pairs of mixed kinds in one traced body (:func:`convex_union`). ``settings``: the
    convex route's (:class:`~.convex.ConvexSettings`). ``need`` (n,) bool: on the convex route, search only these
    pairs (the broad phase's within reach; :func:`~.convex.convex_contacts`): the others' slots are placeholders
    for the caller to replace; the closed forms compute every pair (they cost little)."""
    if isinstance(kind1, tuple) or isinstance(kind2, tuple):
        gap, point, n = convex_contacts(kind1, kind2, R1, p1, size1, R2, p2, size2, codes, settings, need)
        return ContactSlots(gap[:, None], point[:, None], contact_frame(n)[:, None],
                            jnp.ones((gap.shape[0], 1), dtype=bool))
    if not canonical(kind1, kind2) and supports(kind1, kind2):
        slots = collide_many(kind2, kind1, R2, p2, size2, R1, p1, size1, settings=settings, need=need)
        return ContactSlots(slots.gap, slots.point, contact_frame(-slots.frame[..., 0, :]), slots.valid)
    if (kind1, kind2) in CONVEX_ROUTE:
        gap, point, n = convex_contacts(kind1, kind2, R1, p1, size1, R2, p2, size2, settings=settings, need=need)
        return ContactSlots(gap[:, None], point[:, None], contact_frame(n)[:, None],
                            jnp.ones((gap.shape[0], 1), dtype=bool))
    return jax.vmap(lambda *a: collide(kind1, kind2, *a))(R1, p1, size1, R2, p2, size2)


def collide(kind1, kind2, R1, p1, size1, R2, p2, size2, settings=ConvexSettings()):
    """The :class:`ContactSlots` of geom 1 (``kind1``, world rotation R1, position p1, size1) against geom 2;
    ``settings`` those of the general convex route (:class:`~.convex.ConvexSettings`: MuJoCo's accuracy by default,
    :data:`~.convex.PRECISE` for round-off).

    Kinds are static strings; a pair outside :data:`SLOTS` raises a ValueError naming it (the collision model
    warns about such pairs before anything compiles). Works on one pair; batch with ``jax.vmap``."""
    if not supports(kind1, kind2):
        raise ValueError(f"collide: the pair ({kind1!r}, {kind2!r}) is not supported; supported pairs: "
                         f"{sorted(_PAIRS)}")
    if not canonical(kind1, kind2):
        slots = collide(kind2, kind1, R2, p2, size2, R1, p1, size1, settings)
        return ContactSlots(slots.gap, slots.point, contact_frame(-slots.frame[:, 0]), slots.valid)
    function, count = _PAIRS[(kind1, kind2)]
    if (kind1, kind2) in CONVEX_ROUTE:
        function = convex_pair(kind1, kind2, settings)
    out = function(R1, p1, size1, R2, p2, size2)
    gap, point, normal = out[:3]
    valid = out[3] if len(out) == 4 else jnp.ones(count, dtype=bool)
    return ContactSlots(gap, point, contact_frame(normal), valid)
