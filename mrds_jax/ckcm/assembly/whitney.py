"""Quasi-static assembly of a rigid planar peg with Coulomb friction: D. E. Whitney, "Quasi-static assembly of
compliantly supported rigid parts", ASME J. Dyn. Sys., Meas., Control 104 (1982) 65-77. Derivations, conventions
and figures: docs/guide/assembly.md (its equation numbers are the (A.n) below).

Conventions (the plane of the motion; docs/guide/assembly.md §1): x lateral, z the hole's axis pointing out of the
hole, the hole's walls at x = ±R (R = r + c, c the radial clearance), its mouth at z = 0. The peg of radius r
(a capsule, or Whitney's sharp peg: they touch the same way, see :func:`two_point_contact`) has its *tip* E — the
lower end of its axis — at (x_E, z_E), and is tilted by θ counter-clockwise (its top toward −x; the axis from E
upward is u = (−sin θ, cos θ)). In **two-point contact** (θ > 0) the tip touches the wall x = +R (contact 2) and the
peg's side touches the mouth edge (−R, 0) (contact 1); in **one-point contact** only the tip touches x = +R.
The wrench the support applies to the peg is referred to E: lateral force F_x, **insertion force** F_z (pushing
the peg in, i.e. its world z component is −F_z) and moment M about E (counter-clockwise). Whitney's jamming diagram
has the axes a = F_x/F_z and b = M/(r F_z).

Every function takes numbers or arrays (jax.numpy; works under ``jit``/``vmap``); geometry in metres.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Contact(NamedTuple):
    """One contact of the peg, in the plane (relative to the tip E): ``point`` (2,) where it touches, ``normal``
    (2,) the direction of the normal force on the peg, ``tangent`` (2,) the direction of the friction force on the
    peg when the peg slides *in* (friction opposes the slip: it points out of the hole)."""
    point: jax.Array
    normal: jax.Array
    tangent: jax.Array


class TwoPoint(NamedTuple):
    """The two-point contact at tilt θ (:func:`two_point_contact`): the tip's position ``tip`` (x_E, z_E), the
    insertion depth ``depth`` ℓ (axial distance from the tip to the mouth-edge contact, Whitney's ℓ), the
    mouth-edge contact ``edge`` (contact 1) and the wall contact ``wall`` (contact 2)."""
    tip: jax.Array
    depth: jax.Array
    edge: Contact
    wall: Contact


def peg_axis(theta):
    """u = (−sin θ, cos θ): the peg's axis from the tip upward (A.1)."""
    return jnp.stack([-jnp.sin(theta), jnp.cos(theta)])


def peg_side_normal(theta):
    """e = (cos θ, sin θ): the peg's lateral direction, u rotated clockwise by 90° (A.1)."""
    return jnp.stack([jnp.cos(theta), jnp.sin(theta)])


def wall_contact(r):
    """The tip on the wall x = +R (one-point contact, and contact 2 of two-point contact) (A.2): it touches at r
    from the tip along +x (the end sphere's equator, or Whitney's corner for small θ), the wall pushes along −x and
    friction points up the wall (+z)."""
    return Contact(jnp.stack([r, 0.0 * r]), jnp.array([-1.0, 0.0]), jnp.array([0.0, 1.0]))


def two_point_contact(r, clearance, theta):
    """The two-point contact of a peg of radius r at tilt θ > 0 in a hole of half-width R = r + c (A.3-A.5): the tip
    on the wall (x_E = R − r) and the peg's side through the mouth edge A = (−R, 0) at distance r from the axis:
    (A − E)·e = −r gives z_E = (r − (2R − r) cos θ)/sin θ, and ℓ = (A − E)·u = (2R − r) sin θ − z_E cos θ.
    Contact 1 acts at A along e, its friction along u; contact 2 at E + (r, 0) along −x, friction +z."""
    R = r + clearance
    s, c = jnp.sin(theta), jnp.cos(theta)
    x_tip = R - r
    z_tip = (r - (2.0 * R - r) * c) / s
    edge_point = jnp.stack([-R - x_tip, -z_tip])                # A − E
    depth = (2.0 * R - r) * s - z_tip * c
    edge = Contact(edge_point, peg_side_normal(theta), peg_axis(theta))
    return TwoPoint(jnp.stack([x_tip, z_tip]), depth, edge, wall_contact(r))


def contact_wrench(contact, friction):
    """(F_x, F_z,world, M_E) of a unit normal force of ``contact`` with friction ``friction`` · its normal force
    along its tangent (friction ∈ [−μ, μ]; +μ: sliding in), as a wrench on the peg about E (A.6)."""
    f = contact.normal + friction * contact.tangent
    p = contact.point
    return jnp.stack([f[0], f[1], p[0] * f[1] - p[1] * f[0]])


class Balance(NamedTuple):
    """Normal forces ``normal`` (one per contact) and the insertion force ``insertion`` F_z of a quasi-static
    sliding balance."""
    normal: jax.Array
    insertion: jax.Array


def one_point_sliding(contact, mu, lateral):
    """One-point contact sliding in (A.7): the applied wrench balances the one contact force, f (n + μ t):
    f = −F_x / (n + μ t)_x, F_z = f (n + μ t)_z, and the moment the support must apply, M = −f w_M. Returns
    (Balance, M)."""
    w = contact_wrench(contact, mu)
    f = -lateral / w[0]
    return Balance(jnp.stack([f]), f * w[1]), -f * w[2]


def two_point_sliding(geometry, mu, lateral, moment):
    """Two-point contact sliding in (A.8): given the applied F_x and M (about E), the normal forces f₁ (mouth
    edge), f₂ (wall) and the insertion force F_z that balance them with both frictions at +μ:
    F_x + f₁w₁ₓ + f₂w₂ₓ = 0, M + f₁w₁ₘ + f₂w₂ₘ = 0 (solved for f₁, f₂), F_z = f₁w₁z + f₂w₂z."""
    w1, w2 = contact_wrench(geometry.edge, mu), contact_wrench(geometry.wall, mu)
    A = jnp.stack([jnp.stack([w1[0], w2[0]]), jnp.stack([w1[2], w2[2]])])
    f = jnp.linalg.solve(A, -jnp.stack([lateral, moment]))
    return Balance(f, f[0] * w1[1] + f[1] * w2[1])


def point_jacobian(point):
    """(2, 3) velocity of the peg's material point at ``point`` (relative to E) per (ẋ_E, ż_E, θ̇): v = v_E + θ̇ (−p_z, p_x)."""
    return jnp.array([[1.0, 0.0, -point[1]], [0.0, 1.0, point[0]]])


def peg_mass_matrix(mass, com, inertia, theta):
    """(3, 3) mass matrix of a rigid planar peg in (x_E, z_E, θ): its centre of mass at ``com`` along the axis from
    the tip, ``inertia`` about it: H = m J_cᵀ J_c + diag(0, 0, I)."""
    J = point_jacobian(com * peg_axis(theta))
    return mass * J.T @ J + jnp.diag(jnp.stack([0.0 * inertia, 0.0 * inertia, inertia]))


def sliding_from_rest(geometry, mu, theta, mass, com, inertia, wrench):
    """The rigid peg at rest in two-point contact, starting to slide in at both contacts (A.19): the normal forces
    (f₁, f₂) and the acceleration s along the unit direction δ that keeps both contacts (J_n δ = 0, δ_z < 0) from
    H s δ = Q + f₁ g₁ + f₂ g₂, with g_i = J_iᵀ (n_i + μ t_i) and Q = ``wrench`` (F_x, F_z,world, M). It is a
    solution of the rigid-body Coulomb problem (besides a static one, when the contacts can hold the load) iff
    f₁, f₂ ≥ 0 and s > 0. Returns (f (2,), s)."""
    contacts = (geometry.edge, geometry.wall)
    Jn = jnp.stack([c.normal @ point_jacobian(c.point) for c in contacts])
    g = [point_jacobian(c.point).T @ (c.normal + mu * c.tangent) for c in contacts]
    d = jnp.cross(Jn[0], Jn[1])
    d = d / jnp.linalg.norm(d) * jnp.where(d[1] < 0, 1.0, -1.0)
    H = peg_mass_matrix(mass, com, inertia, theta)
    x = jnp.linalg.solve(jnp.stack([g[0], g[1], -H @ d], axis=1), -jnp.asarray(wrench))
    return x[:2], x[2]


# ----------------------------------------------------------------------------- jamming (A.9-A.12)
def cone_generators(geometry, mu):
    """The four edges of the two friction cones as wrenches on the peg (4, 3): edge +μ, edge −μ, wall +μ, wall −μ."""
    return jnp.stack([contact_wrench(geometry.edge, mu), contact_wrench(geometry.edge, -mu),
                      contact_wrench(geometry.wall, mu), contact_wrench(geometry.wall, -mu)])


def applied_wrench(a, b, r):
    """The applied wrench (F_x, F_z,world, M) of the diagram's point (a, b) = (F_x/F_z, M/(r F_z)) at F_z = 1."""
    return jnp.stack([a, -jnp.ones_like(a), b * r])


def jammed(geometry, mu, r, a, b, tol=1e-12):
    """Whether the two contacts can hold the peg still against the applied wrench of the diagram's point (a, b)
    (A.9): −w in the cone of the four friction-cone edges, decided by Carathéodory's theorem over the four triples
    of edges (a 3-D cone spanned by four vectors is the union of the cones of its triples): −w = G_T α with α ≥ 0
    for some triple T. One point; ``jax.vmap`` for many."""
    G = cone_generators(geometry, mu)
    target = -applied_wrench(a, b, r)
    inside = jnp.asarray(False)
    for triple in ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)):
        M = G[jnp.array(triple)].T
        det = jnp.linalg.det(M)
        regular = jnp.abs(det) > 1e-12 * jnp.prod(jnp.linalg.norm(M, axis=0))    # three independent edges
        alpha = jnp.linalg.solve(jnp.where(regular, M, jnp.eye(3)), target)
        inside = inside | (regular & jnp.all(alpha >= -tol * (1.0 + jnp.max(jnp.abs(alpha)))))
    return inside


def diagram_point(wrench, r):
    """(a, b) of a wrench (F_x, F_z,world, M) on the peg, negated (the applied wrench a contact wrench balances):
    a = −w_x/w_z, b = −w_M/(r w_z)."""
    return jnp.stack([-wrench[0] / wrench[1], -wrench[2] / (r * wrench[1])])


class JammingRegion(NamedTuple):
    """The jamming region of a two-point contact in Whitney's diagram (A.10-A.11): ``wedged`` (the whole
    half-space F_z > 0 jams; then the rest is meaningless), else the region conv{P₁, P₂} + cone{d_lo, d_hi}:
    ``vertices`` (P_lo, P_hi) (2, 2), where the boundary's rays along ``directions`` (d_lo, d_hi) (2, 2) start; the
    segment P_lo–P_hi is the third piece of the boundary (one point when P_lo = P_hi)."""
    wedged: bool
    vertices: np.ndarray
    directions: np.ndarray


def jamming_region(geometry, mu, r):
    """The :class:`JammingRegion` (numpy, concrete inputs) of ``geometry``: P₁, P₂ the diagram points of the two
    '+μ' edges (the peg sliding in at one contact alone), and the directions at infinity the zero-F_z combinations
    of a '+μ' edge (pushing the peg out, w_z > 0) with a '−μ' edge (w_z < 0) span; wedged when they are not in a
    half-plane (A.11)."""
    G = np.asarray(cone_generators(geometry, mu))
    up, down = [g for g in G if g[1] > 0], [g for g in G if g[1] <= 0]
    points = [np.asarray(diagram_point(g, r)) for g in up]
    directions = []
    for g in up:
        for h in down:
            d = g * (-h[1]) + h * g[1]                    # w_z = 0
            directions.append(np.array([-d[0], -d[2] / r]))
    angles = np.sort(np.mod([np.arctan2(d[1], d[0]) for d in directions], 2 * np.pi))
    gaps = np.diff(np.concatenate([angles, angles[:1] + 2 * np.pi]))
    k = int(np.argmax(gaps))
    if gaps[k] < np.pi or len(points) < 2:
        return JammingRegion(True, np.zeros((2, 2)), np.zeros((2, 2)))
    hi, lo = angles[k], angles[(k + 1) % len(angles)]           # the cone runs ccw from lo to hi
    d_lo, d_hi = np.array([np.cos(lo), np.sin(lo)]), np.array([np.cos(hi), np.sin(hi)])
    cross = lambda u, v: u[0] * v[1] - u[1] * v[0]  # noqa: E731
    p_lo = min(points, key=lambda p: cross(d_lo, p))            # the region is left of the ray along d_lo
    p_hi = max(points, key=lambda p: cross(d_hi, p))            # and right of the ray along d_hi
    return JammingRegion(False, np.stack([p_lo, p_hi]), np.stack([d_lo, d_hi]))


def boundary_distance(region, points, scale=(1.0, 1.0)):
    """Distance (n,) of diagram points (n, 2) to the jamming region's boundary, each axis divided by ``scale``
    (the diagram's extent along it, so that 0.05 is 5 % of the diagram's size); inf when wedged."""
    points = np.asarray(points, float) / scale
    if region.wedged:
        return np.full(len(points), np.inf)
    P = region.vertices / scale
    D = region.directions / scale
    D = D / np.linalg.norm(D, axis=1, keepdims=True)

    def to_ray(o, d):
        t = np.clip((points - o) @ d, 0.0, None)
        return np.linalg.norm(points - o - t[:, None] * d, axis=1)

    seg = P[1] - P[0]
    length2 = float(seg @ seg)
    t = np.clip((points - P[0]) @ seg / length2, 0.0, 1.0) if length2 > 0 else np.zeros(len(points))
    to_segment = np.linalg.norm(points - P[0] - t[:, None] * seg, axis=1)
    return np.minimum(np.minimum(to_ray(P[0], D[0]), to_ray(P[1], D[1])), to_segment)


# ----------------------------------------------------------------------------- Whitney's small-angle forms
def whitney_lambda(depth, r, mu):
    """λ = ℓ/(2 μ r): Whitney's dimensionless insertion depth (A.13)."""
    return depth / (2.0 * mu * r)


def whitney_two_point_line(a, lam, mu):
    """The two-point-contact line of Whitney's diagram for the tilt θ > 0 (A.14): b = λ − μ(1 + λ) a, from
    (−1/μ, 1 + 2λ) to (1/μ, −1); the peg jams above it. The tilt θ < 0 mirrors it: b = −λ − μ(1 + λ) a."""
    return lam - mu * (1.0 + lam) * a


def whitney_parallelogram(lam, mu):
    """The vertices (4, 2) of Whitney's parallelogram (A.15), counter-clockwise: inside it the peg neither jams in
    two-point contact (either tilt) nor sticks in one-point contact (|F_x/F_z| < 1/μ)."""
    return np.array([[1.0 / mu, -1.0 - 2.0 * lam], [1.0 / mu, -1.0], [-1.0 / mu, 1.0 + 2.0 * lam], [-1.0 / mu, 1.0]])


# ----------------------------------------------------------------------------- wedging (A.16-A.18)
def wedged(geometry, mu):
    """Whether the two contacts can squeeze the peg with no applied wrench (A.16): the line through the two
    contact points lies inside both friction cones (a two-force member), i.e. the angle between
    p₂ − p₁ and contact 1's normal, and between p₁ − p₂ and contact 2's normal, are both ≤ atan μ."""
    d = geometry.wall.point - geometry.edge.point
    d = d / jnp.linalg.norm(d)
    limit = jnp.cos(jnp.arctan(mu))
    return (d @ geometry.edge.normal >= limit) & (-d @ geometry.wall.normal >= limit)


def wedging_angle(r, clearance, mu, iterations=200):
    """The tilt θ_w above which a two-point contact wedges (A.17), by bisection of :func:`wedged` on
    (0, atan μ); Whitney's small-angle value is θ_w ≈ c/μ with c = clearance/R (A.18)."""
    lo, hi = 1e-9, float(np.arctan(mu))
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if bool(wedged(two_point_contact(r, clearance, mid), mu)):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def whitney_wedging_angle(r, clearance, mu):
    """θ_w = c/μ, c = (R − r)/R (Whitney's small-angle wedging angle, A.18)."""
    return clearance / (r + clearance) / mu


def whitney_wedging_depth(r, clearance, mu):
    """ℓ_w = μ D, D = 2R: a two-point contact shallower than this can wedge (A.18)."""
    return 2.0 * mu * (r + clearance)
