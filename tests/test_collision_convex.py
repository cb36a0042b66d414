"""The pairs of the general convex route (GJK + EPA, mrds_jax/collision/convex.py) and plane–ellipsoid against
MuJoCo's own (``mujoco``: mjc_Convex with its native GJK/EPA, mjc_PlaneConvex), float64, on seeded random sizes and
poses, separated and penetrating, as tests/test_collision_mujoco.py does for the analytic pairs.

MuJoCo is tightened for this (``ccd_tolerance`` 1e-15, ``ccd_iterations`` 5000; multiccd off, so its one contact
is the GJK/EPA one; a 0.3 margin so separated pairs are reported). Checked, apart and overlapping:

* the gap to 1e-9 against MuJoCo's (measured ≤ 5e-11);
* normal and point to 1e-9 against a second, independent reference: the first-order optimality conditions of the
  contact on the geoms' own descriptions, written out here in NumPy/SciPy (:func:`_optimality`: the witness
  points point ∓ gap/2·n lie on the two surfaces and ±n is in each geom's normal cone there; measured ≤ 2e-14),
  and the gap equals the separating-axis value −h_A(n) − h_B(−n) of our normal with no direction near it better
  (to 1e-12). At random poses the contact is unique (a smooth surface, a rim or a corner against anything, two
  crossing edges or side lines), so these pin normal and point; where it is a patch (a face on a face) they say
  that our point lies in the patch;
* normal and point against MuJoCo only to 1e-4: MuJoCo's GJK/EPA, even at tolerance 1e-15 and 5000 iterations,
  stops with its normal up to 1.1e-5 and its point up to 1.1e-6 from ours on these seeds (box–ellipsoid apart:
  its GJK stops on the distance, whose error is quadratic in the normal's; its EPA's faces are secants of curved
  surfaces), and its own point then fails the optimality conditions above by as much. Its gap, first-order
  insensitive to the normal, agrees to 5e-11.
"""
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from scipy.optimize import nnls
from scipy.spatial import ConvexHull

from mrds_jax.collision import collide
from test_collision_mujoco import MARGIN, SIZE_MASK, _mjcf as shared_mjcf, _ours, _rotation, _sample

CASES = 10
PAIRS = [("capsule", "cylinder"), ("box", "cylinder"), ("cylinder", "cylinder"), ("cylinder", "box"),
         ("sphere", "ellipsoid"), ("capsule", "ellipsoid"), ("box", "ellipsoid"), ("cylinder", "ellipsoid"),
         ("ellipsoid", "ellipsoid"), ("plane", "ellipsoid")]
# MuJoCo's convex routine as tight as it goes, one contact (no multiccd)
TIGHT = '<option ccd_tolerance="1e-15" ccd_iterations="5000"><flag multiccd="disable"/></option>'


def _mjcf(k1, s1, k2, s2):
    return shared_mjcf(k1, s1, k2, s2, TIGHT)


def _mujoco(k1, s1, k2, s2, pose1, pose2):
    model = mujoco.MjModel.from_xml_string(_mjcf(k1, s1, k2, s2))
    data = mujoco.MjData(model)
    data.qpos[:] = pose2 if k1 == "plane" else np.r_[pose1, pose2]
    mujoco.mj_forward(model, data)
    if data.ncon == 0:
        return None
    c = data.contact[0]
    flip = -1.0 if c.geom1 != model.geom("g1").id else 1.0
    return c.dist, flip * c.frame[:3], c.pos.copy()


# ----------------------------------------------------------------------------- support functions in NumPy
def _support(kind, R, p, s, u):
    """The primitive's farthest point along u (world), written out here independently of the library."""
    v = R.T @ u
    if kind == "sphere":
        x = s[0] * v / np.linalg.norm(v)
    elif kind == "capsule":
        x = s[0] * v / np.linalg.norm(v) + np.array([0, 0, np.sign(v[2]) * s[1]])
    elif kind == "box":
        x = np.sign(v) * s
    elif kind == "cylinder":
        # along the axis (a cap's normal, which an exact face-on contact gives to the last bit on some CPUs) every
        # point of the cap is a support point: take its centre, whose support value u·x is that of any of them
        radial = np.linalg.norm(v[:2])
        x = np.r_[s[0] * v[:2] / radial if radial > 0 else np.zeros(2), np.sign(v[2]) * s[1]]
    elif kind == "ellipsoid":
        x = s ** 2 * v / np.linalg.norm(s * v)
    return p + R @ x


def _separation(k1, R1, p1, s1, k2, R2, p2, s2, n):
    """−h_A(n) − h_B(−n): how far B lies beyond A along n (the separating-axis value)."""
    if k1 == "plane":
        return n @ _support(k2, R2, p2, s2, -n) - n @ p1
    return -n @ _support(k1, R1, p1, s1, n) + n @ _support(k2, R2, p2, s2, -n)


def _tangents(n):
    t = np.cross(n, [1.0, 0, 0] if abs(n[0]) < 0.9 else [0, 1.0, 0])
    t /= np.linalg.norm(t)
    return t, np.cross(n, t)


def _inside(kind, R, p, s, x):
    """How far x lies outside the primitive (≤ 0 inside), written out here independently of the library."""
    v = R.T @ (x - p)
    if kind == "sphere":
        return np.linalg.norm(v) - s[0]
    if kind == "capsule":
        return np.linalg.norm(v - [0, 0, np.clip(v[2], -s[1], s[1])]) - s[0]
    if kind == "box":
        return np.max(np.abs(v) - s)
    if kind == "cylinder":
        return max(np.linalg.norm(v[:2]) - s[0], abs(v[2]) - s[1])
    if kind == "ellipsoid":
        return (np.linalg.norm(v / s) - 1.0) * np.min(s)
    if kind == "mesh":
        faces = ConvexHull(np.asarray(s)).equations
        return np.max(faces[:, :3] @ v + faces[:, 3])
    return v[2]                                                          # plane: the half-space below z = 0


def _normal_cone(kind, R, p, s, x, tol=1e-8):
    """Unit generators (k, 3), world, of the geom's normal cone at a point x of its surface, from its own
    description (written out here): the gradient of the implicit surface where it is smooth (sphere, ellipsoid,
    capsule, a cylinder's side), the outward normals of the faces within ``tol`` of x where it has flat faces
    (box, a cylinder's caps, a mesh's hull faces from scipy's Qhull, a plane's up)."""
    v = R.T @ (x - p)
    if kind == "sphere":
        local = [v]
    elif kind == "ellipsoid":
        local = [v / s ** 2]
    elif kind == "capsule":
        local = [v - [0, 0, np.clip(v[2], -s[1], s[1])]]
    elif kind == "box":
        local = [np.sign(v[k]) * np.eye(3)[k] for k in range(3) if abs(v[k]) >= s[k] - tol]
    elif kind == "cylinder":
        local = ([np.r_[v[:2], 0.0]] if np.linalg.norm(v[:2]) >= s[0] - tol else []) + \
                ([np.sign(v[2]) * np.eye(3)[2]] if abs(v[2]) >= s[1] - tol else [])
    elif kind == "mesh":
        faces = ConvexHull(np.asarray(s)).equations
        local = list(faces[faces[:, :3] @ v + faces[:, 3] >= -tol, :3])
    else:                                                                # plane
        local = [np.eye(3)[2]]
    return np.array([R @ (g / np.linalg.norm(g)) for g in local]).reshape(-1, 3)


def _cone_distance(n, generators):
    """How far the unit vector n lies from the cone spanned by the generators (nonnegative least squares)."""
    if len(generators) == 0:
        return np.inf
    return nnls(generators.T, n)[1]


def _optimality(k1, R1, p1, s1, k2, R2, p2, s2, gap, normal, point):
    """The contact's first-order optimality conditions (Karush-Kuhn-Tucker) checked on the geoms' own descriptions:
    the witness points x1,2 = point ∓ gap/2 · n (x2 − x1 = gap · n) lie on their geoms' surfaces (|outside| of
    :func:`_inside`), n is in geom 1's normal cone at x1 and −n in geom 2's at x2 (:func:`_normal_cone`).
    Returns the largest residual (m). Apart, these are the conditions of the closest points of two convex sets
    (sufficient: a residual ε puts normal and points within O(ε) of the exact ones where they are unique, a
    smooth surface or a vertex against a face, edge against edge); overlapping, those of a stationary depth
    (the value certificate checks it is the least one near). Where the contact is a patch (two parallel faces)
    they hold at every point of it: then they check that our point lies in the patch."""
    x1, x2 = point - 0.5 * gap * normal, point + 0.5 * gap * normal
    return max(abs(_inside(k1, R1, p1, s1, x1)), abs(_inside(k2, R2, p2, s2, x2)),
               _cone_distance(normal, _normal_cone(k1, R1, p1, s1, x1)),
               _cone_distance(-normal, _normal_cone(k2, R2, p2, s2, x2)))


def _compare(k1, k2, penetrating):
    """Worst differences from MuJoCo (gap, normal, point) and our own certificate over seeded poses: (value) the
    largest of |sep(n) − gap| (the separating-axis value at our normal, from the support functions above) and
    how much a direction near ours beats it; (optimality) :func:`_optimality` of our contact."""
    rng = np.random.default_rng(sum(map(ord, k1 + k2)) + penetrating)
    worst, certificate, compared = np.zeros(3), np.zeros(2), 0
    for case in range(CASES):
        s1, s2, q1, q2, p1, direction = _sample(rng, k1, k2)
        R1, R2 = _rotation(q1), _rotation(q2)
        t = rng.uniform(0.0, 0.3) if penetrating else rng.uniform(0.45, 1.2)
        p2 = p1 + t * direction
        reference = _mujoco(k1, s1, k2, s2, np.r_[p1, q1], np.r_[p2, q2])
        gap, normal, point = _ours(k1, k2, R1, p1, s1, R2, p2, s2)
        if reference is None:
            assert gap > MARGIN - 1e-9
            continue
        dist, mj_normal, mj_point = reference
        if (dist < 0) != penetrating:
            continue
        compared += 1
        worst = np.maximum(worst, [abs(gap - dist), np.linalg.norm(normal - mj_normal),
                                   np.linalg.norm(point - mj_point)])
        sep = lambda n: _separation(k1, R1, p1, s1, k2, R2, p2, s2, n / np.linalg.norm(n))
        value = [abs(sep(normal) - gap)]
        if k1 != "plane":
            value += [sep(normal + sign * h * t1) - gap for t1 in _tangents(normal) for h in (1e-3, 1e-5)
                      for sign in (1, -1)]
        geometry = (k1, R1, p1, s1, k2, R2, p2, s2)
        certificate = np.maximum(certificate, [max(value), _optimality(*geometry, gap, normal, point)])
    print(f"{k1}-{k2} {'penetrating' if penetrating else 'separated'} ({compared} cases): |Δgap| |Δn| |Δpoint| = "
          f"{worst}, certificate (value, optimality) {certificate}")
    assert compared >= CASES // 3
    return worst, certificate


def _check(k1, k2, penetrating):
    worst, certificate = _compare(k1, k2, penetrating)
    assert worst[0] < 1e-9 and np.all(worst[1:] < 1e-4), worst
    assert certificate[0] < 1e-12 and certificate[1] < 1e-9, certificate


@pytest.mark.parametrize("k1,k2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_separated_pairs_match_mujoco_and_are_optimal(k1, k2):
    """Apart: the gap to 1e-9 against MuJoCo, normal and point to 1e-9 by the optimality conditions (the closest
    points of two convex sets: necessary and sufficient), to 1e-4 against MuJoCo (module docstring)."""
    _check(k1, k2, penetrating=False)


@pytest.mark.parametrize("k1,k2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_penetrating_pairs_match_mujoco_and_are_optimal(k1, k2):
    """Overlapping: the gap to 1e-9 against MuJoCo (its EPA's depth converges), normal and point to 1e-9 by the
    optimality conditions of a stationary depth and no direction near ours giving a smaller one; to 1e-4 against
    MuJoCo (module docstring)."""
    _check(k1, k2, penetrating=True)


@pytest.mark.slow            # full mode: compiling the derivative of the convex route takes ~20 s a pair
@pytest.mark.parametrize("k1,k2", [("box", "cylinder"), ("cylinder", "ellipsoid")], ids=["box-cylinder",
                                                                                         "cylinder-ellipsoid"])
def test_convex_gap_gradient_is_the_normal_and_finite(k1, k2):
    """The gap's derivative with respect to geom 2's position is the normal (translating B along n by δ changes the
    gap by δ: Danskin's theorem, which the gap formula at the held normal implements), apart and overlapping, and
    central differences of the gap in the size agree with its derivative; nothing is NaN."""
    rng = np.random.default_rng(5)

    @jax.jit
    def gap(R1, p1, s1, R2, p2, s2):
        out = collide(k1, k2, R1, p1, s1, R2, p2, s2)
        return out.gap[0], out.frame[0, 0]

    gradient = jax.jit(jax.grad(lambda *a: gap(*a)[0], argnums=(4, 5)))
    for t in (0.05, 0.8):
        s1, s2, q1, q2, p1, direction = _sample(rng, k1, k2)
        args = [jnp.asarray(x) for x in (_rotation(q1), p1, s1, _rotation(q2), p1 + t * direction, s2)]
        g_p, g_s = gradient(*args)
        _, normal = gap(*args)
        assert np.all(np.isfinite(g_p)) and np.all(np.isfinite(g_s))
        np.testing.assert_allclose(g_p, normal, atol=1e-9)
        h, e = 1e-6, np.eye(3)
        fd = [(float(gap(*args[:5], args[5] + h * e[i])[0]) - float(gap(*args[:5], args[5] - h * e[i])[0])) / (2 * h)
              for i in range(3) if SIZE_MASK[k2][i]]
        np.testing.assert_allclose(np.asarray(g_s)[np.asarray(SIZE_MASK[k2], bool)], fd, atol=1e-6)


def test_closed_form_symmetric_eigen_2x2_matches_numpy():
    """The refinement's 2x2 symmetric eigenproblems (one Jacobi rotation, convex._symmetric_eigen_2x2, used instead
    of LAPACK's eigh) against numpy.linalg.eigh: eigenvalues to 1e-14 relative, M V = V diag(λ) and VᵀV = I, on
    random matrices and on the cases the rotation special-cases (diagonal, a multiple of I, an off-diagonal
    entry near underflow, rank one as the kink projector's CᵀC is)."""
    from mrds_jax.collision.convex import _symmetric_eigen_2x2
    rng = np.random.default_rng(3)
    matrices = [a + a.T for a in rng.standard_normal((40, 2, 2))]
    matrices += [np.diag([2.0, -1.0]), 3.0 * np.eye(2), np.array([[1.0, 1e-200], [1e-200, 1.0 + 1e-12]]),
                 np.outer([0.6, 0.8], [0.6, 0.8]), np.zeros((2, 2))]
    eigen = jax.jit(jax.vmap(_symmetric_eigen_2x2))
    lam, V = map(np.asarray, eigen(jnp.asarray(np.stack(matrices))))
    for M, l, v in zip(matrices, lam, V):
        scale = np.abs(M).max() + 1e-300
        np.testing.assert_allclose(np.sort(l), np.linalg.eigh(M)[0], atol=1e-14 * scale)
        np.testing.assert_allclose(M @ v, v * l, atol=1e-14 * scale)
        np.testing.assert_allclose(v.T @ v, np.eye(2), atol=1e-14)
