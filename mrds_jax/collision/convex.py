"""The general convex route of the narrow phase: support functions of the primitives, GJK for the distance of two
separated convex sets, EPA for the penetration of two overlapping ones, on fixed iteration counts and fixed
buffers (no Python branch on a value), so that every pair of convex kinds jits and vmaps as one body.

The two sets A (geom 1) and B (geom 2) meet through their Minkowski difference D = A − B (support
s_D(u) = s_A(u) − s_B(−u)): the geoms are apart by the distance of the origin to D, and overlap by the
distance of the origin to the boundary of D when it lies inside. In both cases, for the unit normal n from A to B,

    gap = max over unit n of [min_{b∈B} n·b − max_{a∈A} n·a] = −h_A(n) − h_B(−n)   at the optimal n,

with h the support function (h(u) = u·s(u)): the separating-axis form of the signed distance. :func:`convex_contact`
finds n by GJK or EPA and returns the gap through this formula at that n (held constant: by Danskin's theorem the
gap's derivative with respect to the poses and sizes is the partial derivative at the optimal n, which is what
the formula then gives; a GJK/EPA tolerance ε on the direction costs ε²·curvature in the gap).

MuJoCo (engine_collision_convex.c, engine_collision_gjk.c) uses the same pair of algorithms ("native CCD") for
every pair of convex kinds that has no analytic routine; this module is ours, written from the papers named in the
docstrings, and checked against ``mujoco`` in tests/test_collision_convex.py.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..spatial import cross
from ..spatial.linalg import matmul, spd_inverse
from ..spatial.transforms import rotate, rotate_transpose
from ..batching import run_if
from .closest_points import contact_frame, dot, segment_segment, unit_or


EPA_CANDIDATES = 8        # EPA: the nearest faces whose normals are refined (the best is taken)
FLOOD_STEPS = 24          # EPA: steps of the flood fill of the faces a new vertex sees (their region's radius)


REFINE_STEPS = 8               # Newton steps of refine_direction on pairs with a curved geom (PRECISE)


class ConvexSettings(NamedTuple):
    """How far :func:`convex_contact` searches (MuJoCo's ``ccd_tolerance`` and ``ccd_iterations``, per pair).

    ``tolerance``: GJK stops when its upper and lower bounds of the distance differ by less than ``tolerance`` × the
    pair's size (:func:`extent` of both), EPA when its new support point lies within that of the nearest face's
    plane; floored at :data:`TOLERANCE_ULPS` ulp of the dtype (:func:`search_tolerance`), so float32 stops too.
    ``gjk_iterations`` and ``epa_iterations`` are caps: the loops exit when every pair (every scenario under
    ``vmap``) has converged. ``refine_steps``: Newton steps of :func:`refine_direction` from GJK's or EPA's normal;
    ``all_starts``: the overlap's refinement also from the 14 directions of :func:`_fixed_directions` (a basin that
    EPA's first faces missed, two elongated geoms crossed), else from EPA's :data:`EPA_CANDIDATES` nearest faces.

    The default is MuJoCo's accuracy (1e-6 of the sizes on the gap, two Newton steps; then the normal is put
    exactly onto the kinks it is near, :func:`snapped_normal`, so that a face's, edge's, side's or cap's contact
    has its exact normal and witness point); :data:`PRECISE` is the route to round-off (gap, normal and point to
    round-off on the pairs of tests/test_collision_convex.py; in float32 to the floor, 32 ulp). Either way the
    search runs under ``stop_gradient`` and one differentiable Newton step at the normal found
    (:func:`settled_normal`) carries the derivatives, and a batch pays for the search only where some pair of some
    scenario needs it (:func:`find_normal`)."""
    gjk_iterations: int = 16
    epa_iterations: int = 40
    tolerance: float = 1e-6
    refine_steps: int = 2
    all_starts: bool = True


TOLERANCE_ULPS = 32            # the search's relative tolerance is never below this many ulp of the dtype
PRECISE = ConvexSettings(tolerance=1e-14, refine_steps=REFINE_STEPS)     # the search to round-off


def search_tolerance(settings, like):
    """``settings.tolerance`` floored at :data:`TOLERANCE_ULPS` ulp of ``like``'s dtype (a Python float)."""
    return max(float(settings.tolerance), TOLERANCE_ULPS * float(jnp.finfo(jnp.result_type(like)).eps))


# ----------------------------------------------------------------------------- support functions
def _local_support(kind, size, u):
    """The support point (…, 3) in the geom's own frame of a primitive of ``kind`` in direction u (local):
    the point of the geom farthest along u (Gilbert, Johnson, Keerthi 1988, §3; van den Bergen 2003, §4.3)."""
    e_z = jnp.zeros_like(u).at[..., 2].set(1.0)
    if kind == "sphere":
        n, _ = unit_or(u, e_z)
        return size[0] * n
    if kind == "capsule":
        n, _ = unit_or(u, e_z)
        return size[0] * n + jnp.where(u[..., 2:3] >= 0, size[1], -size[1]) * e_z
    if kind == "box":
        return jnp.where(u >= 0, size, -size)
    if kind == "cylinder":
        radial = u * jnp.array([1.0, 1.0, 0.0], dtype=u.dtype)
        n, length = unit_or(radial, jnp.zeros_like(u))
        return size[0] * n + jnp.where(u[..., 2:3] >= 0, size[1], -size[1]) * e_z
    if kind == "ellipsoid":                      # x = S² u / |S u|, S = diag(radii)
        scaled = size * u
        n, _ = unit_or(scaled, jnp.zeros_like(u).at[..., 0].set(1.0))
        return size * n
    if kind == "mesh":                           # the hull's vertex farthest along u (size: the (V, 3) vertices)
        return size[jnp.argmax(u @ size.T, axis=-1)]
    raise ValueError(f"no support function for a {kind!r} geom")


def extent(kind, size):
    """A length of the geom's size (the sum of its size entries; a mesh's: of its bounding box's half extents about
    its frame's origin): the scale of the algorithms' relative tolerances."""
    if kind == "mesh":
        return jnp.sum(jnp.max(jnp.abs(size), axis=0))
    return jnp.sum(size)


def support(kind, R, p, size, u):
    """The world support point of a geom (world rotation R, position p, size) in world direction u."""
    return p + rotate(R, _local_support(kind, size, rotate_transpose(R, u)))


def support_height(kind, R, p, size, n):
    """h(n) = n · s(n): how far the geom reaches along the unit direction n (its support function)."""
    return dot(n, support(kind, R, p, size, n))


def per_kind(kind, code, fn):
    """``fn(kind)`` for one static kind. For a tuple of kinds — a geom whose kind is data, ``code`` its index into the
    tuple — every kind's ``fn`` computed and the one of ``code`` selected: one traced body serves pairs of several
    kinds (:func:`convex_contacts` of a group of mixed kinds), whose compile time is then paid once, not per kind."""
    if isinstance(kind, str):
        return fn(kind)
    outs = [fn(k) for k in kind]

    def pick(*xs):
        out = xs[0]
        for i, x in enumerate(xs[1:], 1):
            out = jnp.where(code == i, x, out)
        return out

    return jax.tree.map(pick, *outs)


class Shape(NamedTuple):
    """A geom as the convex algorithms see it: its kind (static: a name, or a tuple of names with ``code`` the index
    of this geom's, :func:`per_kind`) and world pose and size (padded with zeros to 3 entries in a tuple's case)."""
    kind: object
    R: jax.Array
    p: jax.Array
    size: jax.Array
    code: jax.Array = None

    def one(self, kind):
        """This shape as one of its possible kinds (for a function written per kind)."""
        return self._replace(kind=kind, code=None)

    def support(self, u):
        return per_kind(self.kind, self.code, lambda k: support(k, self.R, self.p, self.size, u))

    def height(self, n):
        return per_kind(self.kind, self.code, lambda k: support_height(k, self.R, self.p, self.size, n))

    @property
    def scale(self):
        return per_kind(self.kind, self.code, lambda k: extent(k, self.size))


def _difference_support(A, B, u):
    """(w, a, b): the support point w = a − b of D = A − B in direction u, and its points on A and B."""
    a, b = A.support(u), B.support(-u)
    return a - b, a, b


# ----------------------------------------------------------------------------- GJK
# the 15 non-empty subsets of 4 simplex points: (first point, the others as a mask over the 3 remaining rows)
_SUBSETS = tuple(s for s in range(1, 16))


def _subset_masks():
    return jnp.asarray([[(s >> i) & 1 for i in range(4)] for s in _SUBSETS], dtype=bool)


def _affine_projection(P, mask):
    """Barycentric λ (4,) of the point of the affine hull of the masked points of P (4, 3) nearest to the origin
    (λ = 0 off the mask), and whether that hull is non-degenerate. Normal equations of min |P₀ + Σ μ_j (P_j − P₀)|
    over the masked j ≠ first, on the Gram matrix padded with the identity (symmetric positive definite where the
    points are affinely independent), inverted by Gauss-Jordan elimination without pivoting
    (:func:`~mrds_jax.spatial.linalg.spd_inverse`, no LAPACK call: docs/known_traps.md), its determinant the
    product of the pivots met (NaN or ≤ 0 where it is singular)."""
    first = jnp.argmax(mask)
    others = mask & (jnp.arange(4) != first)
    P0 = P[first]
    E = jnp.where(others[:, None], P - P0, 0.0)                          # (4, 3): rows j ≠ first, zero elsewhere
    G = E @ E.T + jnp.diag(jnp.where(others, 0.0, 1.0))
    rhs = -E @ P0
    scale = jnp.max(jnp.where(others, dot(E, E), 0.0)) + jnp.finfo(P.dtype).tiny
    det = jnp.prod(spd_inverse(G, pivots=True)[1])
    count = jnp.sum(others)
    ok = det > 1e-20 * scale ** count
    mu = matmul(spd_inverse(jnp.where(ok, G, jnp.eye(4, dtype=P.dtype))), rhs)
    mu = jnp.where(others, mu, 0.0)
    lam = mu.at[first].add(1.0 - jnp.sum(mu))
    return jnp.where(mask, lam, 0.0), ok


def closest_simplex_point(P, active):
    """The point of the convex hull of the active points of P (4, 3) nearest to the origin, by enumerating the
    faces of the simplex (Johnson's distance sub-algorithm, Gilbert, Johnson, Keerthi 1988, §4, written as a
    search over all 15 sub-simplices instead of a recursion): the nearest affine projection whose barycentric
    coordinates are all ≥ 0. Returns (λ (4,), the points it uses (4,) bool)."""
    masks = _subset_masks()
    lam, ok = jax.vmap(_affine_projection, in_axes=(None, 0))(P, masks)
    inside = ok & jnp.all(lam >= 0, axis=1) & jnp.all(~masks | active, axis=1)
    v = lam @ P
    dist = jnp.where(inside, dot(v, v), jnp.inf)
    k = jnp.argmin(dist)
    return lam[k], masks[k] & (lam[k] > 0)


class Simplex(NamedTuple):
    """GJK's state: up to 4 points w = a − b of D with their points on A and B, and which are in use."""
    w: jax.Array
    a: jax.Array
    b: jax.Array
    active: jax.Array


def gjk(A, B, settings=ConvexSettings()):
    """Distance of two convex shapes: Gilbert, Johnson, Keerthi, "A fast procedure for computing the distance
    between complex objects in three-dimensional space", IEEE J. Robotics and Automation 4(2), 1988 (the
    iteration v_{k+1} = point of conv(W_k ∪ {s_D(−v_k)}) nearest to the origin, the paper's (16)-(18)), until the
    simplex encloses the origin or the distance is known to the tolerance: |v| − v·w/|v| (the paper's upper less
    its lower bound, (13)) ≤ :func:`search_tolerance` × the pair's size; at most ``settings.gjk_iterations``. A
    ``while_loop``: under ``vmap`` it runs until the last pair of the batch has converged, the converged ones held.
    Not differentiable (:func:`find_normal` calls it under ``stop_gradient``).

    Returns (v, λ, simplex): v the point of D nearest to the origin (0 when the shapes overlap: the simplex then
    encloses the origin, the start of :func:`epa`), λ its barycentric coordinates over the simplex."""
    w0, a0, b0 = _difference_support(A, B, B.p - A.p + jnp.array([1e-9, 0.0, 0.0], dtype=A.p.dtype))
    start = Simplex(jnp.tile(w0, (4, 1)), jnp.tile(a0, (4, 1)), jnp.tile(b0, (4, 1)),
                    jnp.arange(4) == 0)
    scale = A.scale + B.scale + jnp.sqrt(dot(w0, w0))
    tolerance = search_tolerance(settings, A.p) * (A.scale + B.scale)

    def step(carry):
        simplex, _, i = carry
        lam, used = closest_simplex_point(simplex.w, simplex.active)
        v = lam @ simplex.w
        vv = dot(v, v)
        w, a, b = _difference_support(A, B, -v)
        slot = jnp.argmin(used)                                            # a free place (all used: enclosed)
        enclosed = jnp.all(used) | (vv <= (1e-30 * scale) ** 2)
        converged = vv - dot(v, w) <= tolerance * jnp.sqrt(vv)
        put = jnp.arange(4) == slot
        new = Simplex(jnp.where(put[:, None], w, simplex.w), jnp.where(put[:, None], a, simplex.a),
                      jnp.where(put[:, None], b, simplex.b), used | put)
        stop = enclosed | converged
        keep = Simplex(simplex.w, simplex.a, simplex.b, used)
        return jax.tree.map(lambda x, y: jnp.where(stop, x, y), keep, new), stop, i + 1

    simplex, _, _ = jax.lax.while_loop(lambda c: ~c[1] & (c[2] < settings.gjk_iterations), step,
                                       (start, jnp.zeros((), bool), jnp.zeros((), jnp.int32)))
    lam, used = closest_simplex_point(simplex.w, simplex.active)
    return lam @ simplex.w, lam, simplex


# ----------------------------------------------------------------------------- EPA
class Polytope(NamedTuple):
    """EPA's polytope in fixed buffers: vertices (V, 3) of D with their points on A and B, triangles (F, 3)
    vertex indices (counter-clockwise seen from outside), the face across each edge (F, 3) (edge e joins corners e
    and e+1), which faces are alive, the vertex count."""
    w: jax.Array
    a: jax.Array
    b: jax.Array
    faces: jax.Array
    adjacent: jax.Array
    alive: jax.Array
    count: jax.Array


def _face_planes(poly, tiny):
    """Outward unit normals (F, 3) and plane offsets (F,) of the faces (offset +inf for a dead or degenerate
    face, which is then never the nearest)."""
    x0, x1, x2 = (poly.w[poly.faces[:, i]] for i in range(3))
    n, area = unit_or(cross(x1 - x0, x2 - x0), jnp.zeros_like(x0))
    ok = poly.alive & (area > tiny)
    return n, jnp.where(ok, dot(n, x0), jnp.inf), ok


_TETRA_FACES = ((0, 1, 2), (0, 3, 1), (0, 2, 3), (1, 3, 2))


def _start_polytope(simplex, A, B, capacity):
    """A tetrahedron, faces oriented outward, in buffers of ``capacity`` vertices and 2·capacity faces: GJK's
    enclosing simplex, or where that is flat (GJK met the origin on a face, edge or vertex of D: a touching or
    symmetric configuration) the support points along the four directions of a regular tetrahedron, which are
    four distinct points of D (any two directions are 109° apart; a vertex's normal cone of a box spans at most
    90°). That one need not enclose the origin: faces beyond which the origin lies have negative offsets, are
    the nearest and are expanded first, until the polytope encloses it."""
    dirs = jnp.asarray([[1.0, 1.0, 1.0], [-1.0, -1.0, 1.0], [-1.0, 1.0, -1.0], [1.0, -1.0, -1.0]],
                       dtype=A.p.dtype) / jnp.sqrt(3.0)
    fill = jax.vmap(lambda u: jnp.stack(_difference_support(A, B, u)))(dirs)        # (4, 3 [w a b], 3)

    def volume(w):
        return dot(cross(w[1] - w[0], w[2] - w[0]), w[3] - w[0])

    scale = A.scale + B.scale
    enclosing = jnp.all(simplex.active) & (jnp.abs(volume(simplex.w)) > 1e-9 * scale ** 3)
    w = jnp.where(enclosing, simplex.w, fill[:, 0])
    a = jnp.where(enclosing, simplex.a, fill[:, 1])
    b = jnp.where(enclosing, simplex.b, fill[:, 2])
    volume = volume(w)
    faces = jnp.asarray(_TETRA_FACES, dtype=jnp.int32)
    faces = jnp.where(volume < 0, faces, faces[:, ::-1])                # counter-clockwise seen from outside
    # adjacency of the tetrahedron: the face holding the reversed edge
    edges = jnp.stack([faces, jnp.roll(faces, -1, axis=1)], axis=-1)    # (4, 3, 2)
    flat = edges.reshape(12, 2)
    match = (flat[:, None, 0] == flat[None, :, 1]) & (flat[:, None, 1] == flat[None, :, 0])
    adjacent = (jnp.argmax(match, axis=1) // 3).reshape(4, 3).astype(jnp.int32)
    F = 2 * capacity
    pad = lambda x, n, value=0: jnp.concatenate([x, jnp.full((n - x.shape[0],) + x.shape[1:], value, x.dtype)])
    return Polytope(pad(w, capacity), pad(a, capacity), pad(b, capacity), pad(faces, F), pad(adjacent, F),
                    jnp.arange(F) < 4, jnp.asarray(4, jnp.int32))


def _expand(poly, k, w, a, b, eps):
    """Add the vertex (w, a, b) seen from face k: remove the faces it sees, grown from face k across edges to the
    faces with n·w > offset − eps (a face w only grazes, as a rim point on the plane of a cap's faces, counts as
    seen, and only faces connected to k do: round-off on near-coplanar faces cannot then make the seen region
    disconnected or holed, whose horizon would not be one loop), and
    close the hole with one face per horizon edge (van den Bergen 2001, §4: the silhouette of the visible faces),
    keeping the adjacency."""
    F = poly.faces.shape[0]
    n, offset, _ = _face_planes(poly, 0.0)
    beyond = poly.alive & (dot(n, w) > offset - eps)
    grow = lambda _, seen: seen | (beyond & jnp.any(seen[poly.adjacent], axis=1))
    sees = jax.lax.fori_loop(0, FLOOD_STEPS, grow, jnp.arange(F) == k)
    nbr = poly.adjacent
    horizon = sees[:, None] & ~sees[nbr]                                # (F, 3): edge e of a seen face
    v = poly.count
    start = poly.faces                                                  # edge e runs faces[f, e] -> faces[f, e+1]
    end = jnp.roll(poly.faces, -1, axis=1)
    free = ~poly.alive | sees
    free_slots = jnp.nonzero(free, size=F, fill_value=F)[0]
    rank = jnp.cumsum(horizon.reshape(-1)) - 1
    # the face indices in the polytope's own integer type (jnp.nonzero gives int64 under x64: a scatter of those into
    # the int32 faces is a FutureWarning now and an error in a later JAX)
    slot = jnp.where(horizon.reshape(-1), free_slots[jnp.clip(rank, 0, F - 1)], F).reshape(F, 3).astype(
        poly.faces.dtype)
    V = poly.w.shape[0]
    # the new face of the horizon edge starting (ending) at each vertex: its neighbours across (b, w) and (w, a)
    by_start = jnp.full(V, F, slot.dtype).at[jnp.where(horizon, start, V)].set(slot, mode="drop")
    by_end = jnp.full(V, F, slot.dtype).at[jnp.where(horizon, end, V)].set(slot, mode="drop")
    new_faces = jnp.stack([start, end, jnp.broadcast_to(v, start.shape)], axis=-1)       # (F, 3, 3)
    new_adjacent = jnp.stack([nbr, by_start[end], by_end[start]], axis=-1)
    # the kept neighbour across a horizon edge now faces the new face
    faces_ = jnp.arange(F)[:, None]
    edge_in_nbr = jnp.argmax(poly.adjacent[nbr] == faces_[..., None], axis=-1)          # (F, 3)
    adjacent = poly.adjacent.at[jnp.where(horizon, nbr, F), edge_in_nbr].set(slot, mode="drop")
    flat_slot = slot.reshape(-1)
    faces = poly.faces.at[flat_slot].set(new_faces.reshape(-1, 3), mode="drop")
    adjacent = adjacent.at[flat_slot].set(new_adjacent.reshape(-1, 3), mode="drop")
    alive = (poly.alive & ~sees).at[flat_slot].set(True, mode="drop")
    return Polytope(poly.w.at[v].set(w), poly.a.at[v].set(a), poly.b.at[v].set(b), faces, adjacent, alive, v + 1)


def epa(simplex, A, B, settings=ConvexSettings()):
    """Penetration of two overlapping convex shapes: the expanding polytope algorithm, van den Bergen, "Proximity
    queries and penetration depth computation on 3D game objects", GDC 2001, §4 (after Cameron 1997): from a
    polytope inscribed in D = A − B, repeatedly take the face nearest to the origin and add the support point
    along its normal, until that point is within the tolerance of the face's plane; the nearest face's normal is
    then the direction of least translation and its plane's offset the depth, to :func:`search_tolerance` × the
    pair's size; at most ``settings.epa_iterations`` iterations on buffers of 4 + that many vertices (a
    ``while_loop``: under ``vmap`` until the last pair has converged). Not differentiable (under ``stop_gradient``
    in :func:`find_normal`).

    Returns (n, depth, x_a, x_b, normals): the unit outward normal of D at its boundary point nearest to the
    origin (the normal from A to B), the depth, the witness points on A and B (barycentric on the nearest face),
    and the normals of the :data:`EPA_CANDIDATES` nearest faces (starts for :func:`refine_direction` where the
    iterations ran out on a curved D before one basin was certain)."""
    capacity = 4 + settings.epa_iterations
    poly = _start_polytope(simplex, A, B, capacity)
    scale = A.scale + B.scale
    tiny = 1e-14 * scale ** 2
    tolerance = search_tolerance(settings, A.p) * scale

    def step(carry):
        poly, _ = carry
        n, offset, _ = _face_planes(poly, tiny)
        k = jnp.argmin(offset)
        w, a, b = _difference_support(A, B, n[k])
        stop = (dot(n[k], w) - offset[k] <= tolerance) | ~jnp.isfinite(offset[k])
        grown = _expand(poly, k, w, a, b, 1e-12 * scale)
        return jax.tree.map(lambda x, y: jnp.where(stop, x, y), poly, grown), stop

    poly, _ = jax.lax.while_loop(lambda c: ~c[1] & (c[0].count < capacity), step, (poly, jnp.zeros((), bool)))
    n, offset, _ = _face_planes(poly, tiny)
    k = jnp.argmin(offset)
    corners = poly.faces[k]
    lam = _triangle_barycentric(poly.w[corners], offset[k] * n[k])
    _, nearest = jax.lax.top_k(-offset, EPA_CANDIDATES)
    return n[k], offset[k], lam @ poly.a[corners], lam @ poly.b[corners], n[nearest]


def _triangle_barycentric(T, q):
    """Barycentric coordinates of the point q in the plane of the triangle T (3, 3) (Ericson §3.4)."""
    e0, e1, r = T[1] - T[0], T[2] - T[0], q - T[0]
    d00, d01, d11, d20, d21 = dot(e0, e0), dot(e0, e1), dot(e1, e1), dot(r, e0), dot(r, e1)
    det = d00 * d11 - d01 * d01
    det = jnp.where(det > 0, det, 1.0)
    l1 = (d11 * d20 - d01 * d21) / det
    l2 = (d00 * d21 - d01 * d20) / det
    return jnp.stack([1.0 - l1 - l2, l1, l2])


def _snap(shape, u):
    """u with the local components of the geom that lie within :data:`SNAP` of zero set to zero (a box's face or
    edge normal, a capsule's or cylinder's side, a cylinder's cap axis; a mesh's face or edge,
    :func:`_snap_mesh`), renormalised: the kinks of f, where the
    optimal normal of a flat feature lies exactly and GJK's and EPA's approach it only to their tolerance."""
    if not isinstance(shape.kind, str):
        return per_kind(shape.kind, shape.code, lambda k: _snap(shape.one(k), u))
    local = rotate_transpose(shape.R, u)
    if shape.kind in ("sphere", "ellipsoid"):
        return u
    if shape.kind == "mesh":
        return rotate(shape.R, _snap_mesh(shape.size, local))
    mask = {"box": jnp.abs(local) > SNAP, "capsule": jnp.array([True, True, False]) | (jnp.abs(local) > SNAP),
            "cylinder": jnp.where(jnp.sqrt(local[0] ** 2 + local[1] ** 2) > SNAP, True,
                                  jnp.array([False, False, True])) & ((jnp.arange(3) < 2) | (jnp.abs(local) > SNAP))
            }[shape.kind]
    snapped, _ = unit_or(rotate(shape.R, jnp.where(mask, local, 0.0)), u)
    return snapped


def _mesh_heights(vertices, u):
    """Each hull vertex's height along the local direction u, −inf on the padding (the copies of the last vertex
    that fill a hull to its stacked size), so that a padded vertex never ties with the one it copies."""
    padded = jnp.all(vertices == vertices[-1], axis=1) & (jnp.arange(vertices.shape[0]) < vertices.shape[0] - 1)
    return jnp.where(padded, -jnp.inf, vertices @ u)


def _snap_mesh(vertices, u):
    """A mesh's kinks near the local direction u: the normal of the plane through its three vertices highest
    along u (a face's normal, where they lie on one face) if it is within :data:`SNAP` of u, else u made
    perpendicular to the line through the two highest (an edge's normal cone) if that moves it less than SNAP,
    else u. Padding (copies of the last vertex) is skipped."""
    _, top = jax.lax.top_k(_mesh_heights(vertices, u), 3)
    a, b, c = vertices[top[0]], vertices[top[1]], vertices[top[2]]
    face, _ = unit_or(cross(b - a, c - a), u)
    face = face * jnp.where(dot(face, u) >= 0, 1.0, -1.0)
    edge, _ = unit_or(b - a, u)
    across, _ = unit_or(u - dot(u, edge) * edge, u)
    near = lambda x: dot(x - u, x - u) < SNAP ** 2
    return jnp.where(near(face), face, jnp.where(near(across), across, u))


POLYTOPES = ("box", "mesh")   # kinds whose support functions are piecewise constant
STEP_FRACTIONS = (1.0, 0.5, 0.25)   # refine_direction: the fractions of a Newton step tried, in turn


class _Candidate(NamedTuple):
    """A normal u of :func:`refine_direction` with what its acceptance test and its Newton step need: the support
    point w(u) of D, f(u) = u · w(u), the projector P (2, 2) of u's contact-frame tangents onto the directions
    along the kinks u lies on (:func:`_kink_tangents`), and the stationarity |P T w|² (the squared gradient of
    f along those kinks)."""
    u: jax.Array
    w: jax.Array
    f: jax.Array
    P: jax.Array
    stationarity: jax.Array


def refine_direction(A, B, n, steps=REFINE_STEPS):
    """Newton's method on the unit sphere for the contact normal, from GJK's or EPA's n: minimise
    f(n) = h_A(n) + h_B(−n) (−f(n) ≤ the gap for every unit n, equal at the optimum, apart or overlapping), whose
    Euclidean gradient is the support point w(n) = s_A(n) − s_B(−n) of D and whose Hessian is ∂w/∂n (forward-mode,
    exact for the primitives). On the sphere (Absil, Mahony, Sepulchre, "Optimization Algorithms on Matrix
    Manifolds", 2008, §4.9/§6.2): gradient P w, Hessian P (∂w/∂n) P − (n·w) P in the tangent plane. A step is
    taken only where it lowers f, so the result is never worse than GJK's or EPA's; where D is curved at the
    optimum (spheres, capsules, cylinder sides, ellipsoids) it converges quadratically, which EPA's secant faces do
    not (their normal is good to √tolerance only). The step is taken along the eigendirections of the tangent
    Hessian with positive curvature only (tried at the :data:`STEP_FRACTIONS` of it in turn): across a kink of f
    (a face or an edge of D, where the support point jumps and ∂w/∂n = 0) it is not. Every second step is
    restricted to the kinks the normal lies on (:func:`_kink_normals`: there f is smooth, and the Newton step of
    its restriction converges quadratically where the unrestricted one, seeing a jumping gradient, does not; off
    the kinks the two are the same step); one body (:func:`_newton_step`) serves both, the unrestricted one being
    the restriction to no kink. Each trial is also tried snapped onto the kinks near it (:func:`_snap`; taken
    where f is not larger), which puts the normal of a face or edge exactly and keeps the Newton steps of a normal
    with one kink (a capsule's side against an ellipsoid) on that kink. Near the optimum f changes by less than
    its round-off (it is quadratic in the normal's error, so a normal 1e-8 off changes it by 1e-16): there a trial
    is taken where f is equal to round-off and the gradient along the kinks (the stationarity) is smaller, which
    brings the normal itself to round-off. ``steps`` Newton steps of len(STEP_FRACTIONS) trials each, in loops
    of fixed length (one traced body each), with the 2×2 eigenproblems in closed form
    (:func:`_symmetric_eigen_2x2`: no LAPACK call)."""
    def w_of(u):
        return A.support(u) - B.support(-u)

    round_off = 64 * jnp.finfo(n.dtype).eps * (A.scale + B.scale + jnp.sqrt(dot(A.p, A.p)) + jnp.sqrt(dot(B.p, B.p)))

    def candidate(u):
        w = w_of(u)
        T = contact_frame(u)[1:]                                   # (2, 3) tangents
        P = _kink_tangents(jnp.concatenate([_kink_normals(A, u), _kink_normals(B, -u)]) @ T.T)
        g = P @ (T @ w)
        return _Candidate(u, w, dot(u, w), P, dot(g, g))

    def lower(x, y):                        # f lower, or equal to round-off and nearer stationary
        return (y.f < x.f - round_off) | ((y.f <= x.f + round_off) & (y.stationarity < x.stationarity))

    def pick(take, y, x):
        return jax.tree.map(lambda a, b: jnp.where(take, a, b), y, x)

    def better(x, trial):
        snapped = -_snap(B, -_snap(A, trial))
        both = jax.vmap(candidate)(jnp.stack([trial, snapped]))
        y, z = (jax.tree.map(lambda a, i=i: a[i], both) for i in range(2))
        x = pick(lower(x, y), y, x)
        moved = dot(snapped - trial, snapped - trial) > 1e-24   # onto a kink (not a rotation's round-off): taken
        #                                                            at an equal f too (the kink's exact normal)
        return pick(lower(x, z) | (moved & (z.f <= x.f)), z, x)

    fractions = jnp.asarray(STEP_FRACTIONS, dtype=n.dtype)

    def step(i, x):
        T = contact_frame(x.u)[1:]
        H = T @ jax.jacfwd(w_of)(x.u) @ T.T
        H2 = 0.5 * (H + H.T) - x.f * jnp.eye(2, dtype=n.dtype)
        floor = 1e-6 * jnp.abs(x.f) + 1e-12                      # curvature below this counts as flat
        restriction = jnp.where(i % 2 == 0, jnp.eye(2, dtype=n.dtype), x.P)    # none, then along x's kinks
        delta = _newton_step(H2, T @ x.w, T, restriction, floor)

        def trial(k, y):
            return better(y, unit_or(y.u + fractions[k] * delta, y.u)[0])

        return jax.lax.fori_loop(0, len(STEP_FRACTIONS), trial, x)

    x = better(candidate(n), n)
    if steps:
        x = jax.lax.fori_loop(0, steps, step, x)
    return x.u


def _symmetric_eigen_2x2(M):
    """(λ (2,), V (2, 2)): the eigenvalues and orthonormal eigenvectors (V's columns) of a symmetric 2×2 matrix M,
    in closed form by one Jacobi rotation, which diagonalises a 2×2 exactly (Golub, Van Loan, "Matrix
    Computations", 4th ed., §8.5.2, Algorithm 8.5.1: τ = (M₁₁ − M₀₀)/(2 M₀₁), t = tan θ = sign(τ)/(|τ| + √(1+τ²)),
    c = 1/√(1+t²), s = t c; λ = (M₀₀ − t M₀₁, M₁₁ + t M₀₁)). No LAPACK call: a batched ``eigh`` inside
    ``jit(vmap)`` can deadlock XLA:CPU (docs/known_traps.md)."""
    p, q, r = M[0, 0], 0.5 * (M[0, 1] + M[1, 0]), M[1, 1]
    off = q != 0
    tau = (r - p) / (2.0 * jnp.where(off, q, 1.0))
    t = jnp.where(off, jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.hypot(1.0, tau)), 0.0)
    c = 1.0 / jnp.hypot(1.0, t)
    s = t * c
    return jnp.stack([p - t * q, r + t * q]), jnp.stack([jnp.stack([c, s]), jnp.stack([-s, c])])


def _newton_step(H, g, T, P, floor):
    """The Newton step (world, in the tangent plane T (2, 3)) of the tangent Hessian H (2, 2) and gradient g (2,)
    restricted to the subspace of the tangent plane that the projector P (2, 2) keeps (P = I: unrestricted), along
    its directions of curvature above ``floor`` only (zero along the others)."""
    lam, V = _symmetric_eigen_2x2(P @ H @ P)
    gv = V.T @ (P @ g)
    curved = lam > floor
    return T.T @ (V @ jnp.where(curved, -gv / jnp.where(curved, lam, 1.0), 0.0))


def _kink_tangents(C):
    """The projector (2, 2) onto the directions of the tangent plane orthogonal to every row of C (k, 2) (the
    tangent-plane components of the kinks' normals, :func:`_kink_normals`): the directions along which the
    normal stays on every kink it lies on."""
    G = C.T @ C
    lam, V = _symmetric_eigen_2x2(G)
    free = lam <= 1e-12 * (jnp.trace(G) + 1e-300)
    return (V * jnp.where(free, 1.0, 0.0).astype(C.dtype)) @ V.T


def _kink_normals(shape, u, free=None):
    """(2, 3) world vectors c with c · u = 0 exactly on the kinks of the geom's support function that the direction
    u lies on (zero rows for none): a box's local axes along which u has no component (an edge or a face), a
    capsule's or cylinder's axis at its side, a cylinder's two cross axes at its cap, a mesh's edges from its
    highest vertex along u to the next two where they tie with it (an edge, or a face). Moving u while keeping
    c · u = 0 keeps the same support feature, on which the support function is smooth: the second-order model
    of :func:`refine_direction` on a kink. ``free``: how near to a kink u counts as on it (default :data:`FREE`)."""
    free = FREE if free is None else free
    if not isinstance(shape.kind, str):
        return per_kind(shape.kind, shape.code, lambda k: _kink_normals(shape.one(k), u, free))
    local = rotate_transpose(shape.R, u)
    axes = jnp.eye(3, dtype=u.dtype)
    none = jnp.zeros((2, 3), u.dtype)
    if shape.kind in ("sphere", "ellipsoid"):
        return none
    if shape.kind == "mesh":
        v = shape.size
        heights, top = jax.lax.top_k(_mesh_heights(v, local), 3)
        tie = heights[0] - heights[1:] <= free * extent(shape.kind, v)
        c = jnp.where(tie[:, None], v[top[1:]] - v[top[0]], 0.0)
    elif shape.kind == "box":
        order = jnp.argsort(jnp.abs(local))[:2]
        c = jnp.where((jnp.abs(local[order]) <= free)[:, None], axes[order], 0.0)
    elif shape.kind == "capsule":
        c = none.at[0].set(jnp.where(jnp.abs(local[2]) <= free, axes[2], 0.0))
    elif shape.kind == "cylinder":
        cap = jnp.sqrt(local[0] ** 2 + local[1] ** 2) <= free
        side = jnp.where(jnp.abs(local[2]) <= free, axes[2], 0.0)
        c = jnp.where(cap, axes[:2], jnp.stack([side, jnp.zeros(3, u.dtype)]))
    else:
        raise ValueError(f"no kinks known for a {shape.kind!r} geom")
    return rotate(shape.R, c)


# ----------------------------------------------------------------------------- the contact
SNAP = 1e-3     # refinement: a normal this close to a face or edge direction of a geom is tried on it exactly
FREE = 1e-7     # a local component of the normal below this leaves that coordinate free on the support face


def _support_face_point(kind, size, u, x):
    """The point of the geom's support face along u (the face, edge, segment or point of the geom farthest along u)
    nearest to x, in the geom's frame, and whether that face is a single point: where a component of u is below
    :data:`FREE` (a box face or edge, a capsule's or cylinder's side, a cylinder's cap) x's coordinate is kept,
    clamped to the face."""
    free = jnp.abs(u) <= FREE
    e_z = jnp.zeros_like(u).at[2].set(1.0)
    z_end = jnp.where(u[2] >= 0, size[1], -size[1])
    if kind in ("sphere", "ellipsoid"):
        return _local_support(kind, size, u), jnp.array(True)
    if kind == "mesh":                          # a vertex, or x moved onto the support plane of an edge or a face
        heights = _mesh_heights(size, u)                # a padded copy of the top vertex is not a second one
        top = jnp.max(heights)
        single = jnp.sum(heights >= top - FREE * extent(kind, size)) == 1
        return jnp.where(single, _local_support(kind, size, u), x + (top - dot(u, x)) * u), single
    if kind == "box":
        return jnp.where(free, jnp.clip(x, -size, size), _local_support(kind, size, u)), ~jnp.any(free)
    if kind == "capsule":
        rim = _local_support("sphere", size, u)
        z = jnp.where(free[2], jnp.clip(x[2] - rim[2], -size[1], size[1]), z_end)
        return rim + z * e_z, ~free[2]
    if kind == "cylinder":
        flat = jnp.sqrt(u[0] ** 2 + u[1] ** 2) <= FREE                  # along the axis: the cap
        radial = x * jnp.array([1.0, 1.0, 0.0], dtype=x.dtype)
        inside, length = unit_or(radial, jnp.zeros_like(x))
        cap = jnp.minimum(length, size[0]) * inside
        side = _local_support(kind, size, u) * jnp.array([1.0, 1.0, 0.0], dtype=x.dtype)
        z = jnp.where(free[2], jnp.clip(x[2], -size[1], size[1]), z_end)
        return jnp.where(flat, cap, side) + z * e_z, ~flat & ~free[2]
    raise ValueError(f"no support face for a {kind!r} geom")


def _support_segment(kind, size, u):
    """The geom's support feature along the local direction u where it is a segment: (centre, unit axis, half
    length, whether it is one), local. A box's edge (one component of u within :data:`FREE` of zero), a capsule's
    or cylinder's side line (u across the axis), a mesh's edge (exactly two vertices highest, to FREE)."""
    axes = jnp.eye(3, dtype=u.dtype)
    free = jnp.abs(u) <= FREE
    radial, length = unit_or(u * jnp.array([1.0, 1.0, 0.0], dtype=u.dtype), axes[0])
    if kind == "box":
        k = jnp.argmin(jnp.abs(u))
        centre = jnp.where(axes[k] > 0, 0.0, _local_support(kind, size, u))
        return centre, axes[k], size[k], jnp.sum(free) == 1
    if kind in ("capsule", "cylinder"):
        return size[0] * radial, axes[2], size[1], free[2] & (length > FREE)
    if kind == "mesh":
        heights, top = jax.lax.top_k(_mesh_heights(size, u), 3)
        tie = heights[0] - heights[1:] <= FREE * extent(kind, size)
        a, b = size[top[0]], size[top[1]]
        axis, span = unit_or(b - a, axes[0])
        return 0.5 * (a + b), axis, 0.5 * span, tie[0] & ~tie[1]
    zero = jnp.zeros(3, u.dtype)
    return zero, axes[0], jnp.zeros((), u.dtype), jnp.array(False)


def _edge_edge_witnesses(A, B, n):
    """Where the support features of A along n and of B along −n are both segments (:func:`_support_segment`) and
    not parallel: their closest points (Ericson §5.1.9, :func:`~.closest_points.segment_segment`), which are the
    unique witness points of such a contact (two crossing edges, a box's edge across a cylinder's side); and
    whether they are."""
    def world_segment(shape, u):
        centre, axis, half, is_segment = per_kind(shape.kind, shape.code, lambda k: _support_segment(
            k, shape.size, rotate_transpose(shape.R, u)))
        return shape.p + rotate(shape.R, centre), rotate(shape.R, axis), half, is_segment

    c_a, e_a, h_a, seg_a = world_segment(A, n)
    c_b, e_b, h_b, seg_b = world_segment(B, -n)
    s, t, parallel, _, _ = segment_segment(c_a, e_a, h_a, c_b, e_b, h_b, 1e-10)
    return c_a + s * e_a, c_b + t * e_b, seg_a & seg_b & ~parallel


def witness_points(A, B, n, gap, x_a, x_b):
    """The points of A and B that realise the gap along n (x_b − x_a = gap·n), from the algorithm's approximate
    witnesses x_a, x_b: each moved to the nearest point of its geom's support face along ±n
    (:func:`_support_face_point`); where one face is a single point (a curved surface, a corner, a rim point) it is
    exact for the refined n and the other side's is that point ± gap·n; where both are segments that cross (two
    edges, an edge across a capsule's or cylinder's side) their closest points in closed form
    (:func:`_edge_edge_witnesses`), unique and exact for the refined n."""
    def face(shape, u, x):
        local, single = per_kind(shape.kind, shape.code, lambda k: _support_face_point(
            k, shape.size, rotate_transpose(shape.R, u), rotate_transpose(shape.R, x - shape.p)))
        return shape.p + rotate(shape.R, local), single

    y_a, single_a = face(A, n, x_a)
    y_b, single_b = face(B, -n, x_b)
    e_a, e_b, crossing = _edge_edge_witnesses(A, B, n)
    return (jnp.where(crossing, e_a, jnp.where(single_a | ~single_b, y_a, y_b - gap * n)),
            jnp.where(crossing, e_b, jnp.where(single_b | ~single_a, y_b, y_a + gap * n)))


def _fixed_directions(like):
    """The 14 directions of a cube's faces and corners: further starts of the overlap's refinement, so that a
    basin of f that EPA's early faces missed (two elongated geoms crossed) is still searched."""
    faces = jnp.concatenate([jnp.eye(3, dtype=like.dtype), -jnp.eye(3, dtype=like.dtype)])
    corners = jnp.asarray([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=like.dtype)
    return jnp.concatenate([faces, corners / jnp.sqrt(3.0)])


class GJKStage(NamedTuple):
    """What :func:`find_normal` takes from GJK: the point v of D nearest to the origin, its barycentric λ over the
    simplex, the simplex, the unit normal from A to B where apart, and whether the shapes are apart."""
    v: jax.Array
    lam: jax.Array
    simplex: Simplex
    normal: jax.Array
    apart: jax.Array


def gjk_stage(A, B, settings=ConvexSettings()):
    """:class:`GJKStage` of two convex shapes (:func:`gjk`; apart when the distance exceeds 1e-12 of their sizes)."""
    v, lam, simplex = gjk(A, B, settings)
    n_sep, dist = unit_or(-v, jnp.zeros_like(v).at[2].set(1.0))
    return GJKStage(v, lam, simplex, n_sep, dist > 1e-12 * (A.scale + B.scale))


class Found(NamedTuple):
    """What the search (:func:`find_normal`) finds for a pair: the unit normal n from A to B, and approximate
    witness points x_a, x_b on A and B (the hints of :func:`witness_points` on flat support faces)."""
    normal: jax.Array
    x_a: jax.Array
    x_b: jax.Array


def _best_refined(A, B, starts, steps, x_a, x_b):
    """:class:`Found` from :func:`refine_direction` at each of ``starts``, the one of least f(n) = h_A(n) + h_B(−n)
    (the largest gap) taken."""
    refined = jax.vmap(lambda u: refine_direction(A, B, u, steps))(starts)
    f = jax.vmap(lambda u: A.height(u) + B.height(-u))(refined)
    return Found(refined[jnp.argmin(f)], x_a, x_b)


def _polytopes(A, B):
    """Both shapes polytopes whatever their kind's code (:data:`POLYTOPES`)."""
    kinds = lambda shape: (shape.kind,) if isinstance(shape.kind, str) else shape.kind
    return all(k in POLYTOPES for k in kinds(A) + kinds(B))


def _newton_steps(A, B, settings):
    """The search's Newton steps: ``settings.refine_steps``, none for two polytopes (whose D's nearest feature GJK
    and EPA reach exactly: only the snap onto their faces and edges)."""
    return 0 if _polytopes(A, B) else settings.refine_steps


def found_apart(A, B, stage, settings=ConvexSettings()):
    """:class:`Found` of two shapes GJK found apart: the Newton refinement from GJK's normal, GJK's witnesses."""
    return _best_refined(A, B, stage.normal[None], _newton_steps(A, B, settings), stage.lam @ stage.simplex.a,
                         stage.lam @ stage.simplex.b)


def found_overlap(A, B, stage, settings=ConvexSettings()):
    """:class:`Found` of two overlapping shapes: EPA from GJK's simplex, then the Newton refinement from the normals
    of EPA's nearest faces (and the 14 fixed directions of :func:`_fixed_directions` with ``settings.all_starts``),
    the best taken (two polytopes: EPA's nearest face only, snapped)."""
    _, _, y_a, y_b, normals = epa(stage.simplex, A, B, settings)
    # fewer live faces than candidates (a polytope's EPA converges in a few steps): the dead ones' zero normals
    # would win the minimum of f (f(0) = 0 < the depth) — they start from the nearest face's normal instead
    normals = jnp.where(dot(normals, normals)[:, None] > 0.5, normals, normals[0])
    if _polytopes(A, B):
        return _best_refined(A, B, normals[:1], 0, y_a, y_b)
    starts = jnp.concatenate([normals, _fixed_directions(A.p)]) if settings.all_starts else normals
    return _best_refined(A, B, starts, settings.refine_steps, y_a, y_b)


def _held(shape):
    """The shape with its pose and size under ``stop_gradient`` (the search's inputs)."""
    hold = jax.lax.stop_gradient
    return shape._replace(R=hold(shape.R), p=hold(shape.p), size=hold(shape.size))


def _arrays(shape):
    """The shape's arrays (pose, size, kind code), as :func:`~mrds_jax.batching.run_if` carries them."""
    return shape.R, shape.p, shape.size, shape.code


def _with_arrays(shape, arrays):
    R, p, size, code = arrays
    return shape._replace(R=R, p=p, size=size, code=code)


def unsearched(A, B):
    """The :class:`Found` of a pair that was not searched (:func:`find_normal` with ``need`` false): the direction
    from A's origin to B's, the origins as witnesses. Only a placeholder: the gap at any unit normal bounds the
    pair's from below, but it is not the pair's (the caller marks such slots not valid)."""
    n, _ = unit_or(B.p - A.p, jnp.zeros_like(A.p).at[2].set(1.0))
    return Found(n, A.p, B.p)


def find_normal(A, B, settings=ConvexSettings(), need=None):
    """The search for the contact normal of two convex shapes, under ``stop_gradient``: GJK (:func:`gjk_stage`),
    then :func:`found_apart` where GJK finds them apart and EPA and the overlap's refinement
    (:func:`found_overlap`) where it finds them overlapping. A :class:`Found`. Both gates are batch-wide
    (:func:`~mrds_jax.batching.run_if`): under ``vmap`` EPA runs only when some pair of some scenario overlaps,
    and with ``need`` (a bool: the broad phase's pair within reach) the whole search only when some needed pair
    does, :func:`unsearched`'s placeholder elsewhere."""
    A, B = _held(A), _held(B)

    def search(_, a, b):
        A_, B_ = _with_arrays(A, a), _with_arrays(B, b)
        stage = gjk_stage(A_, B_, settings)
        return run_if(~stage.apart, lambda _, a, b, stage: found_overlap(
            _with_arrays(A, a), _with_arrays(B, b), stage, settings), found_apart(A_, B_, stage, settings),
            a, b, stage)

    if need is None:
        return search(None, _arrays(A), _arrays(B))
    return run_if(need, search, unsearched(A, B), _arrays(A), _arrays(B))


def _orthonormal_rows(C, tol=1e-6):
    """The rows of C (k, d) orthonormalised in turn (modified Gram-Schmidt: Golub, Van Loan, "Matrix Computations",
    4th ed., §5.2.8), a row whose part left after the earlier ones is below ``tol`` × its length (none, or parallel
    to them) zero: an orthonormal basis of their span, smooth in C where the kept rows stay independent (no
    eigenproblem, whose eigenvectors' derivatives a tie would break)."""
    def inner(a, b):                   # over the rows' length (2 or 3), unrolled (closest_points.dot is for 3)
        return sum(a[..., k] * b[..., k] for k in range(C.shape[-1]))

    rows = []
    for c in C:
        left = c
        for e in rows:
            left = left - inner(e, left) * e
        squared = inner(left, left)
        kept = squared > tol ** 2 * inner(c, c)
        rows.append(jnp.where(kept, left / jnp.sqrt(jnp.where(kept, squared, 1.0)), 0.0))
    return jnp.stack(rows)


def _without(E, x):
    """x less its components along the orthonormal (or zero) rows of E."""
    return x - jnp.sum(E * (E @ x)[:, None], axis=0)


def settled_normal(A, B, u, slack):
    """The normal n of the contact from the search's n* = ``u`` (held constant), as a function of the poses and
    sizes: n* put onto the kinks it lies on (:func:`_kink_normals` to :data:`FREE`: n ⊥ every kink normal c(θ), by
    projection onto their orthogonal complement, :func:`_orthonormal_rows`: a face's or an edge's normal, and a
    side's, follows its geom's rotation, two crossed edges' or sides' n ∝ c_A × c_B), then one Newton step of
    f(n) = h_A(n) + h_B(−n) restricted to those kinks (the projector Q(θ) onto the tangent directions that keep
    n ⊥ c(θ), itself a function of θ), then onto the kinks again; the step kept where it raises f by at most
    ``slack`` (else n* on its kinks: a search that stopped just off a kink, whose step would jump across it).

    Its value is n* to the search's accuracy. Its derivative, where n* is stationary on its kinks (the tangent
    gradient Q g(n*, θ) = 0), is the implicit function theorem's derivative of the optimal normal of f restricted
    to the kinks (Griewank, Walther, "Evaluating Derivatives", 2008, §15.1: one Newton step at the solution gives
    the implicit derivative): the restriction is smooth where f is not, and Q(θ) removes exactly the part of the
    support point along a kink's normal (a capsule's side returns an end of its segment there, w = p ± l a: the
    arbitrary choice within the subgradient that a Q held at θ₀ would let through, l Q₀ ∂a/∂θ). Two polytopes take
    the projection alone (their f is flat between kinks: H = 0)."""
    u = jax.lax.stop_gradient(u)
    E = _orthonormal_rows(jnp.concatenate([_kink_normals(A, u), _kink_normals(B, -u)]))

    def onto_kinks(x):
        return unit_or(_without(E, x), x)[0]

    def w_of(x):
        return A.support(x) - B.support(-x)

    start = onto_kinks(u)
    if _polytopes(A, B):
        return start
    w = w_of(start)
    T = contact_frame(u)[1:]
    f = dot(start, w)
    tangent_kinks = _orthonormal_rows(E @ T.T)
    Q = jnp.eye(2, dtype=u.dtype) - tangent_kinks.T @ tangent_kinks
    H = T @ jax.jacfwd(w_of)(start) @ T.T
    H2 = 0.5 * (H + H.T) - f * jnp.eye(2, dtype=u.dtype)
    floor = 1e-6 * jnp.abs(jax.lax.stop_gradient(f)) + 1e-12
    delta = _newton_step(H2, T @ (w - f * start), T, Q, floor)     # the gradient on the sphere at start
    n = onto_kinks(unit_or(start + delta, start)[0])
    held = jax.lax.stop_gradient(n)
    kept = A.height(held) + B.height(-held) <= jax.lax.stop_gradient(f) + slack
    return jnp.where(kept, n, start)


def _contact_height(shape, n, x):
    """h(n) = max over the geom of n · y (n held constant), valued as :func:`support_height` but differentiated at
    the contact's own point x (world, held: the witness point on the support face along n): ∂h/∂(p, R) = n · (δp +
    δR x_local) (Danskin's theorem on the maximum over the geom's points, whose maximiser on a face, an edge or a
    side is the witness point, not the vertex or end that the support function returns there), ∂h/∂size that of
    the local support function at n (smooth in the size)."""
    hold = jax.lax.stop_gradient
    x_local = hold(rotate_transpose(shape.R, x - shape.p))
    u = rotate_transpose(shape.R, n)
    u0 = hold(u)
    local = per_kind(shape.kind, shape.code, lambda k: dot(u0, _local_support(k, shape.size, u0)))
    return dot(n, shape.p) + local + dot(x_local, u - u0)


def snapped_normal(A, B, u, slack):
    """The search's normal u put exactly onto the kinks of both geoms near it (:func:`_kink_normals` within
    :data:`SNAP`: a face's, an edge's, a side's or a cap's; onto all of them at once, by projection onto the
    orthogonal complement of their normals: two crossed sides' n ∝ c_A × c_B) where f(n) = h_A(n) + h_B(−n) rises by at most ``slack`` there
    (the search's tolerance: a search that stopped short of a kink), else u. Held constant (the search's)."""
    u = jax.lax.stop_gradient(u)
    E = _orthonormal_rows(jnp.concatenate([_kink_normals(A, u, SNAP), _kink_normals(B, -u, SNAP)]))
    snapped = unit_or(_without(E, u), u)[0]
    return jnp.where(A.height(snapped) + B.height(-snapped) <= A.height(u) + B.height(-u) + slack, snapped, u)


def contact_at(A, B, found, settings=ConvexSettings()):
    """(gap, point, n) at the search's :class:`Found`: n by :func:`settled_normal`, the gap by the separating-axis
    formula at n held constant (module docstring: Danskin), differentiated at the witness points
    (:func:`_contact_height`: gap' = n · (δx_B − δx_A) of the material points in contact), the point the midpoint
    of the witness points (:func:`witness_points`, from the search's x_a, x_b); ``settings``' tolerance bounds the
    settling step's rise of f (:func:`settled_normal`) and of the snap onto kinks (:func:`snapped_normal`)."""
    hold = jax.lax.stop_gradient
    slack = hold(search_tolerance(settings, A.p) * (A.scale + B.scale))
    n = settled_normal(A, B, snapped_normal(_held(A), _held(B), found.normal, slack), slack)
    fixed = hold(n)
    x_a, x_b = hold(found.x_a), hold(found.x_b)
    at_a, at_b = hold(witness_points(A, B, fixed, -A.height(fixed) - B.height(-fixed), x_a, x_b))
    gap = -_contact_height(A, fixed, at_a) - _contact_height(B, -fixed, at_b)
    w_a, w_b = witness_points(A, B, n, gap, x_a, x_b)
    return gap, 0.5 * (w_a + w_b), n


def convex_contact(A, B, settings=ConvexSettings(), need=None):
    """(gap, point, n) of two convex shapes: the search under ``stop_gradient`` (:func:`find_normal`: GJK, then the
    Newton refinement apart or EPA and the refinement overlapping, gated across the batch; ``need``: search only
    where true), then the contact
    at the normal found (:func:`contact_at`: one differentiable Newton step); n the unit normal from A to B, point
    the midpoint of the witness points, gap = −h_A(n) − h_B(−n) at n held constant (module docstring). Two
    polytopes (boxes, meshes: :data:`POLYTOPES`) skip the Newton steps: their Minkowski difference is a polytope,
    whose nearest face GJK and EPA reach exactly in finitely many steps (only the snap onto the geoms' faces and
    edges is tried), the cost that matters for a robot of mesh links."""
    return contact_at(A, B, find_normal(A, B, settings, need), settings)


def convex_contacts(kind1, kind2, R1, p1, size1, R2, p2, size2, codes=None, settings=ConvexSettings(), need=None):
    """:func:`convex_contact` of a stack of pairs of the kinds (kind1, kind2) (leading axis on the poses and sizes),
    one ``vmap``: GJK and the apart refinement for every pair, EPA and the overlap refinement for every pair when
    one of them overlaps, in this stack or (under an outer ``vmap``) in any scenario of the batch, and not at all
    when none does (:func:`find_normal`). ``need`` (n,) bool: search only these pairs (the broad phase's pairs within
    reach; the others' results are placeholders, :func:`unsearched`), none at all when no pair of the batch is
    needed. ``kind1``/``kind2`` may be tuples of kinds with ``codes`` = (c1, c2), each pair's indices into them
    (:func:`per_kind`): a group of pairs of mixed kinds in one traced body."""
    n = jnp.shape(p1)[0]
    codes = (jnp.zeros(n, jnp.int32), jnp.zeros(n, jnp.int32)) if codes is None else codes
    if need is None:
        return jax.vmap(lambda R1, p1, size1, R2, p2, size2, c1, c2: convex_contact(
            Shape(kind1, R1, p1, size1, c1), Shape(kind2, R2, p2, size2, c2), settings))(
            R1, p1, size1, R2, p2, size2, *codes)
    return jax.vmap(lambda R1, p1, size1, R2, p2, size2, c1, c2, need: convex_contact(
        Shape(kind1, R1, p1, size1, c1), Shape(kind2, R2, p2, size2, c2), settings, need))(
        R1, p1, size1, R2, p2, size2, *codes, need)


__all__ = ["ConvexSettings", "PRECISE", "search_tolerance", "Shape", "support", "support_height",
           "closest_simplex_point", "gjk", "epa", "GJKStage", "gjk_stage", "Found", "found_apart", "found_overlap",
           "unsearched", "find_normal", "snapped_normal", "settled_normal", "contact_at", "convex_contact",
           "convex_contacts", "per_kind"]
