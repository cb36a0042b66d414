"""Geometric queries under the narrow phase: safe unit vectors, the contact frame of a normal, closest points of
two segments, signed distances of a point to a box and to a cylinder, the vertices and edges of a box.

Every function broadcasts over leading axes (a box's 8 vertices or 12 edges in one call) and is safe under
``jit``/``vmap``/``grad``: no Python branch on a value, and every ``jnp.where`` gets finite operands in both
branches (a square root or a division by a length that may vanish is taken of a safe substitute), so
coincident points, parallel segments and points exactly on a face give finite values and finite gradients.
"""
import jax.numpy as jnp

from ..spatial import cross
from ..spatial.transforms import rotate, rotate_transpose

# The 8 corners of the unit box, x fastest: corner k has sign (-1)^(k>>i & 1 == 0) on axis i.
CORNER_SIGNS = tuple((1.0 if k & 1 else -1.0, 1.0 if k & 2 else -1.0, 1.0 if k & 4 else -1.0) for k in range(8))
# The 12 edges of a box: axis i, and the signs of the two other axes (j, k) = ((i+1)%3, (i+2)%3).
EDGE_SIGNS = tuple((i, sj, sk) for i in range(3) for sj in (-1.0, 1.0) for sk in (-1.0, 1.0))


def dot(a, b):
    """a · b over the last axis (length 3), broadcasting over the others: an unrolled sum, elementwise under
    ``vmap`` (no ``reduce``: DESIGN.md, "Conventions")."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _tiny(x):
    """Lengths below this are "zero" (the dtype's epsilon, in metres): directions through them are undefined."""
    return jnp.finfo(jnp.result_type(x, jnp.float32)).eps


def safe_norm(v):
    """(|v|, ok) with ok = |v| > eps; |v| is 0 where not ok, with a zero gradient (no 1/0 in the derivative)."""
    sq = dot(v, v)
    ok = sq > _tiny(v) ** 2
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0), ok


def unit_or(v, fallback):
    """v / |v|, or ``fallback`` (a unit vector) where |v| ≤ eps; also returns |v|."""
    length, ok = safe_norm(v)
    return jnp.where(ok[..., None], v / jnp.where(ok, length, 1.0)[..., None], fallback), length


def contact_frame(n):
    """The rows [n, t1, t2] of a right-handed orthonormal frame from a unit normal n (..., 3) -> (..., 3, 3).

    Tangents by Duff et al., "Building an Orthonormal Basis, Revisited" (JCGT 6(1), 2017), listing 3: with
    s = sign(n_z) (s = +1 at n_z = 0), a = -1/(s + n_z), b = n_x n_y a,
    t1 = (1 + s n_x² a, s b, -s n_x), t2 = (b, s + n_y² a, -n_y). Deterministic, branch-free, and smooth
    (polynomial over s + n_z ≥ 1) everywhere except across the great circle n_z = 0, where s flips; on the
    poles n = ±z (floors, ceilings) t1 = (1, 0, 0), t2 = (0, ±1, 0). Friction is isotropic (the Coulomb cone
    does not depend on the tangents), so the choice only fixes how tangential impulses are written.
    """
    x, y, z = n[..., 0], n[..., 1], n[..., 2]
    s = jnp.where(z >= 0, 1.0, -1.0).astype(n.dtype)
    a = -1.0 / (s + z)
    b = x * y * a
    t1 = jnp.stack([1 + s * x * x * a, s * b, -s * x], axis=-1)
    t2 = jnp.stack([b, s + y * y * a, -y], axis=-1)
    return jnp.stack([n, t1, t2], axis=-2)


def segment_segment(c1, a1, h1, c2, a2, h2, parallel_tol):
    """Closest points of the segments c1 + s a1 (|s| ≤ h1) and c2 + t a2 (|t| ≤ h2), unit directions a1, a2.

    Ericson, "Real-Time Collision Detection" §5.1.9 (ClosestPtSegmentSegment) in centred parameters: with
    r = c1 - c2, b = a1·a2, c = a1·r, f = a2·r, the lines' closest points are s* = (b f - c)/(1 - b²),
    t = b s + f; the segments' are s₀ = clamp(s*), t = clamp(b s₀ + f), s = clamp(b t - c) (the last
    step is the identity where t was not clamped). Where the directions are parallel (1 - b² ≤
    ``parallel_tol``) every s of the overlap of the projections is a minimiser: s₀ is then its lower end.
    Returns (s, t, parallel, lo, hi) with [lo, hi] the overlap interval in s (empty when lo > hi).
    """
    r = c1 - c2
    b, c, f = dot(a1, a2), dot(a1, r), dot(a2, r)
    denom = 1.0 - b * b
    parallel = denom <= parallel_tol
    # overlap of segment 2's projection onto line 1 with [-h1, h1]: s = b (t - f) for |t| ≤ h2 (b = ±1)
    sign_b = jnp.where(b >= 0, 1.0, -1.0)
    lo = jnp.maximum(-h1, -h2 - sign_b * f)
    hi = jnp.minimum(h1, h2 - sign_b * f)
    s_lines = (b * f - c) / jnp.where(parallel, 1.0, denom)
    s0 = jnp.clip(jnp.where(parallel, lo, s_lines), -h1, h1)
    t = jnp.clip(b * s0 + f, -h2, h2)
    s = jnp.clip(b * t - c, -h1, h1)
    return s, t, parallel, lo, hi


def point_box(x, R, c, half, face_bias=None):
    """Signed distance of points x (..., 3) to a solid box (world rotation R, centre c, half-extents ``half``)
    and the unit outward normal n of the box at the nearest surface point: x = q + dist n with q on the
    surface (Ericson §5.1.3, ClosestPtPointOBB, for a point outside; inside, the face of least depth).

    ``face_bias`` (..., 3) ≥ 0, optional, is added to the depths before the inside face is chosen (not to the
    distance returned): box–box uses it to prefer the face that faces the other box where a vertex lies on
    two faces at once (equal boxes stacked edge on edge). Returns (dist, n) in world coordinates.
    """
    local = rotate_transpose(R, x - c)
    clamped = jnp.clip(local, -half, half)
    outside_vec = local - clamped
    n_out, d_out = unit_or(outside_vec, jnp.zeros_like(local))
    depth = half - jnp.abs(local)
    inside = jnp.all(depth >= 0, axis=-1)
    chooser = depth if face_bias is None else depth + face_bias
    axis = jnp.argmin(chooser, axis=-1)
    one_hot = (jnp.arange(3) == axis[..., None]).astype(local.dtype)
    sign = jnp.where(dot(one_hot, local) >= 0, 1.0, -1.0)
    n_in, d_in = one_hot * sign[..., None], -dot(one_hot, depth)
    n_local = jnp.where(inside[..., None], n_in, n_out)
    return jnp.where(inside, d_in, d_out), rotate(R, n_local)


def point_cylinder(x, R, c, radius, half_length):
    """Signed distance of points x to a solid cylinder (axis local z, |z| ≤ half_length, radius) and the unit
    outward normal at the nearest surface point (x = q + dist n). Outside: the nearest point clamps the radial
    distance to the radius and z to the caps; inside: the cap or the side, whichever is nearer (the cap on a
    tie). On the axis the radial direction is the cylinder's local x. Returns (dist, n) in world coordinates."""
    local = rotate_transpose(R, x - c)
    radial = local * jnp.array([1.0, 1.0, 0.0], dtype=local.dtype)
    e_x = jnp.zeros_like(local).at[..., 0].set(1.0)
    e_z = jnp.zeros_like(local).at[..., 2].set(1.0)
    u, rho = unit_or(radial, e_x)
    z = local[..., 2]
    clamped = jnp.minimum(rho, radius)[..., None] * u + jnp.clip(z, -half_length, half_length)[..., None] * e_z
    n_out, d_out = unit_or(local - clamped, u)
    side_depth, cap_depth = radius - rho, half_length - jnp.abs(z)
    inside = (side_depth >= 0) & (cap_depth >= 0)
    cap = cap_depth <= side_depth
    n_in = jnp.where(cap[..., None], jnp.where(z >= 0, 1.0, -1.0)[..., None] * e_z, u)
    d_in = -jnp.minimum(cap_depth, side_depth)
    n_local = jnp.where(inside[..., None], n_in, n_out)
    return jnp.where(inside, d_in, d_out), rotate(R, n_local)


def box_vertices(R, c, half):
    """The 8 corners (8, 3) in world coordinates, in :data:`CORNER_SIGNS` order."""
    signs = jnp.asarray(CORNER_SIGNS, dtype=half.dtype)
    return c + rotate(R, signs * half)


def box_edges(R, c, half):
    """The 12 edges in :data:`EDGE_SIGNS` order: centres (12, 3), unit directions (12, 3), half-lengths (12,),
    and the unit outward bisectors of their two faces (12, 3) (the normal used where a point sits on the edge)."""
    centres, dirs, halves, bisectors = [], [], [], []
    for i, sj, sk in EDGE_SIGNS:
        j, k = (i + 1) % 3, (i + 2) % 3
        centres.append(c + sj * half[j] * R[:, j] + sk * half[k] * R[:, k])
        dirs.append(R[:, i])
        halves.append(half[i])
        bisectors.append((sj * R[:, j] + sk * R[:, k]) / jnp.sqrt(2.0))
    return jnp.stack(centres), jnp.stack(dirs), jnp.stack(halves), jnp.stack(bisectors)


__all__ = ["dot", "safe_norm", "unit_or", "contact_frame", "segment_segment", "point_box", "point_cylinder",
           "box_vertices", "box_edges"]
