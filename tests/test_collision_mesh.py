"""Mesh geoms (collided by their convex hulls) against MuJoCo's own collision (``mujoco``: mjc_PlaneConvex for
plane–mesh, mjc_Convex with its native GJK/EPA for the others), float64, on seeded random poses, separated and
penetrating, as tests/test_collision_convex.py does for the primitives.

Three meshes written into the MJCF as inline ``<mesh vertex="..."/>``: a tetrahedron, a cube-ish hull (a box's
corners jittered) and an irregular hull of 20 random points. Their hulls are read back from the compiled model
(``mesh_hull_vertices``: MuJoCo recentres and rotates a mesh into its inertial frame and moves the offset into
``geom_pos``/``geom_quat``), and our narrow phase runs at MuJoCo's own geom world poses (``geom_xpos``,
``geom_xmat``). MuJoCo is tightened as there (``ccd_tolerance`` 1e-15, ``ccd_iterations`` 5000, multiccd off;
margin 0.3 so separated pairs are reported).

Checked: the gap to 1e-9 against MuJoCo's (measured ≤ 2e-12); normal and point to 1e-9 against an independent
reference, the first-order optimality conditions on the geoms' own descriptions (the hull's faces from scipy's
Qhull; ``_optimality`` of tests/test_collision_convex.py: the witness points lie on both surfaces, ±n in each
normal cone there; measured ≤ 2e-14), with the gap equal to the separating-axis value −h_A(n) − h_B(−n) of our
normal (support functions in NumPy, written out here) to 1e-12 and no direction 1e-3 or 1e-5 off ours separating
more. At random poses the contact is unique (a vertex on a face, crossing edges, a curved surface against
anything): these conditions then pin normal and point; where two faces overlap (a patch) they say our point lies
in it. Against MuJoCo normal and point only to 1e-5: polytope pairs (plane, box, mesh) agree to 1e-14 on the
normal, but MuJoCo's EPA witness point of an overlap is its polytope's barycentric point, off by up to 2e-8 (two
crossing edges, where the point is unique and ours is the edges' closest points in closed form); with a curved
geom MuJoCo's GJK/EPA stop with its normal up to 1.7e-6 from ours (ellipsoids: its termination tests the
distance, whose error is quadratic in the normal's) although tightened to 1e-15 and 5000 iterations.
"""
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax.collision import collide, mesh
from mrds_jax.collision.model import stacked_sizes
from mrds_jax.loaders.mjcf import mesh_hull_vertices
from test_collision_convex import TIGHT, _optimality, _support as primitive_support, _tangents
from test_collision_mujoco import MARGIN, SIZE_MASK, _rotation

jax.config.update("jax_enable_x64", True)
COLLIDE = jax.jit(collide, static_argnums=(0, 1))
CASES = 4                 # poses per mesh, per pair kind and sign (three meshes)
PADDED = 24               # every hull padded to this many vertices: one compilation per pair kind
FAST = [("plane", "mesh"), ("sphere", "mesh"), ("box", "mesh"), ("mesh", "mesh")]
SLOW = [("capsule", "mesh"), ("cylinder", "mesh"), ("ellipsoid", "mesh"), ("mesh", "box")]


OPTIMAL = 1e-9            # the optimality residual (normal and point, m)



def _meshes():
    """The three test meshes' vertex lists (m): tetrahedron, jittered box corners, 20 points on a lumpy sphere."""
    rng = np.random.default_rng(41)
    tetra = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.0, 0.25, 0.0], [0.05, 0.05, 0.35]])
    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * [0.2, 0.15, 0.1]
    cube = cube + rng.uniform(-0.02, 0.02, cube.shape)
    points = rng.normal(size=(20, 3))
    lumpy = points / np.linalg.norm(points, axis=1, keepdims=True) * rng.uniform(0.15, 0.3, (20, 1))
    return {"tetra": tetra, "cube": cube, "lumpy": lumpy}


MESHES = _meshes()


def _geom_xml(n, kind, size, mesh_name=None):
    if kind == "mesh":
        return f'<geom name="g{n}" type="mesh" mesh="{mesh_name}" margin="{MARGIN}"/>'
    used = " ".join(repr(float(x)) for x, m in zip(size, SIZE_MASK[kind]) if m) or "0 0 1"
    return f'<geom name="g{n}" type="{kind}" size="{used}" margin="{MARGIN}"/>'


def _mjcf(k1, s1, k2, mesh1, mesh2):
    assets = "".join(f'<mesh name="{name}" vertex="{" ".join(map(repr, v.ravel().tolist()))}"/>'
                     for name, v in MESHES.items())
    first = _geom_xml(1, k1, s1, mesh1)
    first = first if k1 == "plane" else f"<body><freejoint/>{first}</body>"
    second = f"<body><freejoint/>{_geom_xml(2, k2, s1, mesh2)}</body>"
    return f"<mujoco>{TIGHT}<asset>{assets}</asset><worldbody>{first}{second}</worldbody></mujoco>"


def _hull(model, geom):
    """Geom ``geom``'s hull vertices as our mesh geom holds them (checked by the constructor), padded."""
    v = mesh_hull_vertices(model, int(model.geom_dataid[geom]))
    return stacked_sizes([mesh("m", None, None, v).size, jnp.zeros((PADDED, 3))])[0]


def _support(kind, R, p, s, u):
    if kind == "mesh":
        v = np.asarray(s)
        return p + R @ v[np.argmax(v @ (R.T @ u))]
    return primitive_support(kind, R, p, s, u)


def _separation(k1, R1, p1, s1, k2, R2, p2, s2, n):
    """−h_A(n) − h_B(−n) (plane: its height), from the NumPy support functions above."""
    lower = n @ _support(k2, R2, p2, s2, -n)
    return lower - (n @ p1 if k1 == "plane" else n @ _support(k1, R1, p1, s1, n))


def _mujoco_and_ours(k1, k2, s1, mesh1, mesh2, qpos):
    """MuJoCo's deepest contact (dist, normal from g1 to g2, point) or None, and ours (gap, normal, point) with
    what the certificate needs, at MuJoCo's geom poses."""
    model = mujoco.MjModel.from_xml_string(_mjcf(k1, s1, k2, mesh1, mesh2))
    data = mujoco.MjData(model)
    data.qpos[:] = qpos[-7:] if k1 == "plane" else qpos
    mujoco.mj_forward(model, data)
    g1, g2 = model.geom("g1").id, model.geom("g2").id
    size1 = _hull(model, g1) if k1 == "mesh" else jnp.asarray(s1)
    size2 = _hull(model, g2) if k2 == "mesh" else jnp.asarray(s1)
    R1, p1 = data.geom_xmat[g1].reshape(3, 3).copy(), data.geom_xpos[g1].copy()
    R2, p2 = data.geom_xmat[g2].reshape(3, 3).copy(), data.geom_xpos[g2].copy()
    out = COLLIDE(k1, k2, jnp.asarray(R1), jnp.asarray(p1), size1, jnp.asarray(R2), jnp.asarray(p2), size2)
    gap = np.where(np.asarray(out.valid), np.asarray(out.gap), np.inf)
    k = int(np.argmin(gap))
    ours = (gap[k], np.asarray(out.frame[k, 0]), np.asarray(out.point[k]))
    geometry = (R1, p1, np.asarray(size1), R2, p2, np.asarray(size2))
    if data.ncon == 0:
        return None, ours, geometry
    contacts = data.contact[:data.ncon]
    j = int(np.argmin([c.dist for c in contacts]))
    flip = -1.0 if contacts[j].geom1 != g1 else 1.0
    return (contacts[j].dist, flip * contacts[j].frame[:3], contacts[j].pos.copy()), ours, geometry


def _compare(k1, k2, penetrating):
    """Worst |Δgap|, |Δnormal|, |Δpoint| against MuJoCo, and our certificate (|sep(n) − gap|, how much a
    direction 1e-3 or 1e-5 off ours separates more, the optimality residual), over the three meshes and seeded
    poses."""
    rng = np.random.default_rng(sum(map(ord, k1 + k2)) + penetrating)
    worst, certificate, optimality, compared = np.zeros(3), 0.0, 0.0, 0
    for name2 in MESHES:
        for _ in range(CASES):
            name1 = rng.choice(list(MESHES))
            s1 = rng.uniform(0.1, 0.3, 3) * SIZE_MASK.get(k1 if k2 == "mesh" else k2, (0, 0, 0))  # the primitive's
            q1, q2 = (q / np.linalg.norm(q) for q in rng.normal(size=(2, 4)))
            direction = rng.normal(size=3)
            p1 = rng.normal(size=3) * 0.1
            if k1 == "plane":
                direction = np.array([0.0, 0.0, 1.0])
            direction /= np.linalg.norm(direction)
            t = rng.uniform(0.0, 0.25) if penetrating else rng.uniform(0.45, 0.9)
            qpos = np.r_[p1, q1, p1 + t * direction, q2]
            reference, (gap, normal, point), (R1, p1w, z1, R2, p2w, z2) = _mujoco_and_ours(
                k1, k2, s1, name1 if k1 == "mesh" else name2, name2, qpos)
            if reference is None:
                assert gap > MARGIN - 1e-9
                continue
            dist, mj_normal, mj_point = reference
            if (dist < 0) != penetrating:
                continue
            compared += 1
            worst = np.maximum(worst, [abs(gap - dist), np.linalg.norm(normal - mj_normal),
                                       np.linalg.norm(point - mj_point)])
            sep = lambda n: _separation(k1, R1, p1w, z1, k2, R2, p2w, z2, n / np.linalg.norm(n))
            value = [abs(sep(normal) - gap)]
            if k1 != "plane":
                value += [sep(normal + s * h * t1) - gap for t1 in _tangents(normal) for h in (1e-3, 1e-5)
                          for s in (1, -1)]
            certificate = max(certificate, max(value))
            optimality = max(optimality, _optimality(k1, R1, p1w, z1, k2, R2, p2w, z2, gap, normal, point))
    print(f"{k1}-{k2} {'penetrating' if penetrating else 'separated'} ({compared} cases): |Δgap| |Δn| |Δpoint| = "
          f"{worst}, certificate {certificate:.1e}, optimality {optimality:.1e}")
    assert compared >= 4
    return worst, certificate, optimality


def _check(k1, k2, penetrating, optimal=OPTIMAL):
    worst, certificate, optimality = _compare(k1, k2, penetrating)
    assert worst[0] < 1e-9, worst
    assert worst[1] < 1e-5 and worst[2] < 1e-5, worst
    assert certificate < 1e-12, certificate
    assert optimality < optimal, optimality


@pytest.mark.parametrize("penetrating", [False, True], ids=["separated", "penetrating"])
@pytest.mark.parametrize("k1,k2", FAST, ids=[f"{a}-{b}" for a, b in FAST])
def test_mesh_pairs_match_mujoco(k1, k2, penetrating):
    _check(k1, k2, penetrating)


@pytest.mark.slow          # full mode: three more compilations of the convex route
@pytest.mark.parametrize("penetrating", [False, True], ids=["separated", "penetrating"])
@pytest.mark.parametrize("k1,k2", SLOW, ids=[f"{a}-{b}" for a, b in SLOW])
def test_mesh_pairs_with_curved_geoms_match_mujoco(k1, k2, penetrating):
    _check(k1, k2, penetrating)


def test_plane_mesh_slots_hold_a_flat_face_at_its_corners():
    """A box-shaped hull lying on the plane: the lowest vertex and the side slots are the four bottom corners, each
    with gap 0 (exact), and no vertex is held twice (repeated slots are not valid)."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * [0.2, 0.1, 0.05]
    out = COLLIDE("plane", "mesh", jnp.eye(3), jnp.zeros(3), jnp.zeros(3), jnp.eye(3), jnp.array([0.0, 0.0, 0.05]),
                  jnp.asarray(corners))
    valid = np.asarray(out.valid)
    points = np.asarray(out.point)[valid]
    np.testing.assert_allclose(np.asarray(out.gap)[valid], 0.0, atol=1e-15)
    assert len({tuple(np.round(x, 12)) for x in points}) == len(points) == 4
    np.testing.assert_allclose(np.sort(np.abs(points[:, :2]), axis=0), [[0.2, 0.1]] * 4)


def test_padded_copies_of_the_touching_vertex_keep_its_witness_point_exact():
    """A capsule lying across a tetrahedron's apex, the apex being the hull's last vertex and so the one that
    padding copies (stacked_sizes): the contact is that single vertex against the capsule's side line, so the
    witness point on the hull is the apex itself (to round-off, at the default accuracy), the normal the line's
    perpendicular through it and the gap the distance (analytic). The padded copies once counted as a second
    vertex at the same height, the support face was taken for a patch and the point was left where the search
    stopped (1e-7 off the hull at MuJoCo's accuracy)."""
    tetra = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0], [0.0, 0.25, 0.0], [0.05, 0.05, 0.35]])
    hull = stacked_sizes([mesh("m", None, None, tetra).size, jnp.zeros((PADDED, 3))])[0]
    assert np.sum(np.all(np.asarray(hull) == tetra[-1], axis=1)) > 1           # the apex has padded copies
    rng = np.random.default_rng(5)
    for _ in range(4):
        q = rng.normal(size=4)
        R = _rotation(q / np.linalg.norm(q))                                      # the whole scene turned
        radius, half, gap = 0.08, 0.2, rng.uniform(0.05, 0.3)
        along = rng.uniform(-0.15, 0.15)                                          # where on the side it touches
        axis_local = np.array([np.cos(0.3), np.sin(0.3), 0.0])                    # the capsule's axis, horizontal
        centre_local = tetra[-1] + [0.0, 0.0, radius + gap] - along * axis_local
        Rc_local = np.column_stack([np.cross([0.0, 0.0, 1.0], axis_local), [0.0, 0.0, 1.0], axis_local])
        out = COLLIDE("mesh", "capsule", jnp.asarray(R), jnp.zeros(3), hull, jnp.asarray(R @ Rc_local),
                      jnp.asarray(R @ centre_local), jnp.array([radius, half, 0.0]))
        k = int(np.argmin(np.where(np.asarray(out.valid), np.asarray(out.gap), np.inf)))
        normal, point, found = np.asarray(out.frame[k, 0]), np.asarray(out.point[k]), float(out.gap[k])
        apex, up = R @ tetra[-1], R[:, 2]
        assert abs(found - gap) < 1e-12, (found, gap)
        np.testing.assert_allclose(normal, up, atol=1e-12)
        np.testing.assert_allclose(point - 0.5 * found * normal, apex, atol=1e-12)


def test_mesh_bad_input_is_named():
    from mrds_jax.collision import CollisionError
    with pytest.raises(CollisionError, match="'flat'.*one plane"):
        mesh("flat", None, None, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
    with pytest.raises(CollisionError, match="'few'.*V >= 4"):
        mesh("few", None, None, [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    with pytest.raises(CollisionError, match="'nan'.*finite"):
        mesh("nan", None, None, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, np.nan]])
