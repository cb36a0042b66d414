"""The narrow phase on its own: analytic cases, derivatives against central differences, degenerate
configurations (no NaN in values or derivatives), the contact frame, and batching with static shapes."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax.collision import SLOTS, collide, contact_frame
from mrds_jax.spatial import rot_x, rot_y, rot_z

COLLIDE = jax.jit(collide, static_argnums=(0, 1))
I3 = np.eye(3)


def slots(k1, k2, R1, p1, s1, R2, p2, s2):
    out = COLLIDE(k1, k2, *(jnp.asarray(x, dtype=jnp.float64) for x in (R1, p1, s1, R2, p2, s2)))
    return jax.tree.map(np.asarray, out)


# ----------------------------------------------------------------------------- analytic cases
def test_sphere_on_a_plane_and_on_a_tilted_plane():
    out = slots("plane", "sphere", I3, np.zeros(3), np.zeros(3), I3, [0.3, -0.2, 0.7], [0.5, 0, 0])
    np.testing.assert_allclose(out.gap, [0.2], atol=1e-15)
    np.testing.assert_allclose(out.point, [[0.3, -0.2, 0.1]], atol=1e-15)
    np.testing.assert_allclose(out.frame[0], np.eye(3)[[2, 0, 1]], atol=1e-15)    # rows n = z, t1 = x, t2 = y
    R = np.asarray(rot_x(0.4))                                                     # plane normal R[:, 2]
    centre = np.array([0.1, 0.5, 1.0])
    out = slots("plane", "sphere", R, [0, 0, 0.2], np.zeros(3), I3, centre, [0.25, 0, 0])
    np.testing.assert_allclose(out.gap, [R[:, 2] @ (centre - [0, 0, 0.2]) - 0.25], atol=1e-15)
    np.testing.assert_allclose(out.frame[0, 0], R[:, 2], atol=1e-15)


def test_two_spheres_either_order():
    out = slots("sphere", "sphere", I3, [1, 0, 0], [1.0, 0, 0], I3, [1, 3, 0], [0.5, 0, 0])
    np.testing.assert_allclose(out.gap, [1.5], atol=1e-15)
    np.testing.assert_allclose(out.point, [[1, 1.75, 0]], atol=1e-15)              # midpoint of y = 1 and y = 2.5
    np.testing.assert_allclose(out.frame[0, 0], [0, 1, 0], atol=1e-15)


def test_box_corners_on_a_plane():
    """The 4 deepest of the 8 corners, deepest first: the bottom face of an upright box; for a tilted box the 4
    smallest of the corners' heights computed here from the rotation (x fastest corner order)."""
    out = slots("plane", "box", I3, np.zeros(3), np.zeros(3), I3, [0, 0, 1.0], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(out.gap, [0.7] * 4, atol=1e-15)                     # the bottom face's corners
    R = np.asarray(rot_y(0.3))
    out = slots("plane", "box", I3, np.zeros(3), np.zeros(3), R, [0, 0, 1.0], [0.1, 0.2, 0.3])
    corners = [(sx, sy, sz) for sz in (-1, 1) for sy in (-1, 1) for sx in (-1, 1)]       # x fastest
    expected = sorted(1.0 + R[2] @ (np.array(c) * [0.1, 0.2, 0.3]) for c in corners)[:4]
    np.testing.assert_allclose(out.gap, expected, atol=1e-15)


def test_capsule_lying_on_a_plane_has_two_equal_slots():
    out = slots("plane", "capsule", I3, np.zeros(3), np.zeros(3), np.asarray(rot_y(np.pi / 2)), [0, 0, 0.09],
                [0.1, 0.5, 0])
    np.testing.assert_allclose(out.gap, [-0.01, -0.01], atol=1e-15)
    np.testing.assert_allclose(out.point[:, 0], [0.5, -0.5], atol=1e-15)


def test_upright_cylinder_stands_on_a_square_of_rim_points():
    out = slots("plane", "cylinder", I3, np.zeros(3), np.zeros(3), I3, [0, 0, 0.25], [0.1, 0.2, 0])
    np.testing.assert_allclose(out.gap, [0.45] * 4 + [0.05] * 4, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(out.point[4:, :2], axis=1), 0.1, atol=1e-15)


def test_parallel_capsules_have_two_valid_slots_at_the_overlap_ends():
    R = np.asarray(rot_y(np.pi / 2))                                               # axes along x
    out = slots("capsule", "capsule", R, [0, 0, 0], [0.1, 0.5, 0], R, [0.3, 0, 0.19], [0.1, 0.5, 0])
    assert out.valid.tolist() == [True, True]
    np.testing.assert_allclose(out.gap, [-0.01, -0.01], atol=1e-15)
    np.testing.assert_allclose(sorted(out.point[:, 0]), [-0.2, 0.5], atol=1e-15)   # the overlap [-0.2, 0.5]
    crossed = slots("capsule", "capsule", R, [0, 0, 0], [0.1, 0.5, 0], I3, [0.3, 0, 0.5], [0.1, 0.5, 0])
    assert crossed.valid.tolist() == [True, False]


def test_equal_boxes_stacked_edge_on_edge_push_apart_vertically():
    h = np.array([0.5, 0.5, 0.5])
    out = slots("box", "box", I3, np.zeros(3), h, I3, [0, 0, 0.999], h)
    touching = (out.gap < 0) & out.valid
    assert touching.sum() == 8                                                     # 4 corners each way
    np.testing.assert_allclose(out.gap[touching], -0.001, atol=1e-14)
    np.testing.assert_allclose(out.frame[touching, 0], np.tile([0, 0, 1.0], (8, 1)), atol=1e-14)


def test_capsule_across_a_box_is_held_at_both_edges_it_crosses():
    out = slots("capsule", "box", np.asarray(rot_y(np.pi / 2)), [0.05, 0.1, 0.6], [0.1, 1.0, 0], I3, np.zeros(3),
                [0.3, 0.4, 0.5])
    held = np.isclose(out.gap, 0.0, atol=1e-14)
    assert held.sum() == 2
    np.testing.assert_allclose(sorted(out.point[held, 0]), [-0.3, 0.3], atol=1e-14)
    np.testing.assert_allclose(out.frame[held, 0], [[0, 0, -1.0]] * 2, atol=1e-14)   # from the capsule to the box


def test_contact_frame_is_right_handed_orthonormal_and_smooth_at_the_poles():
    rng = np.random.default_rng(0)
    n = rng.normal(size=(200, 3))
    n = np.concatenate([n / np.linalg.norm(n, axis=1, keepdims=True), [[0, 0, 1], [0, 0, -1], [1, 0, 0], [0, 1, 0]]])
    F = np.asarray(contact_frame(jnp.asarray(n)))
    np.testing.assert_allclose(F @ np.swapaxes(F, 1, 2), np.broadcast_to(np.eye(3), F.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(F), 1.0, atol=1e-14)
    np.testing.assert_allclose(F[:, 0], n, atol=0)
    for pole in ([0, 0, 1.0], [0, 0, -1.0]):
        J = jax.jacfwd(lambda v: contact_frame(v / jnp.linalg.norm(v)))(jnp.asarray(pole))
        assert np.all(np.isfinite(J))


# ----------------------------------------------------------------------------- derivatives and degeneracies
def _flat(k1, k2, R1, R2, x):
    """gap and point (flattened) as functions of x = [size1, p1, size2, p2]."""
    out = collide(k1, k2, R1, x[3:6], x[0:3], R2, x[9:12], x[6:9])
    return jnp.concatenate([out.gap, out.point.ravel(), out.frame[:, 0].ravel()])


@functools.lru_cache(maxsize=None)
def _derivatives(k1, k2):
    f = functools.partial(_flat, k1, k2)
    return jax.jit(f), jax.jit(jax.jacfwd(f, argnums=2)), jax.jit(jax.jacrev(f, argnums=2))


MASK = {"plane": (0, 0, 0), "sphere": (1, 0, 0), "capsule": (1, 1, 0), "cylinder": (1, 1, 0), "box": (1, 1, 1)}
SMOOTH = {  # generic configurations: every slot smooth (separated or penetrating, no tie, no clamp at its switch)
    ("plane", "sphere"): 0.6, ("plane", "capsule"): 0.5, ("plane", "box"): 0.5, ("plane", "cylinder"): 0.5,
    ("sphere", "sphere"): 0.6, ("sphere", "capsule"): 0.5, ("sphere", "box"): 0.5, ("sphere", "cylinder"): 0.55,
    ("capsule", "capsule"): 0.45, ("capsule", "box"): 0.5, ("box", "box"): 0.55, ("box", "sphere"): 0.5,
}


@pytest.mark.parametrize("k1,k2", list(SMOOTH), ids=[f"{a}-{b}" for a, b in SMOOTH])
def test_derivatives_match_central_differences(k1, k2):
    value, forward, reverse = _derivatives(k1, k2)
    R1 = jnp.asarray(rot_x(0.3) @ rot_z(0.2)) if k1 != "plane" else jnp.eye(3)
    R2 = jnp.asarray(rot_y(0.7) @ rot_x(-0.4) @ rot_z(1.1))
    x = jnp.concatenate([jnp.array([0.3, 0.25, 0.2]) * jnp.array(MASK[k1]), jnp.array([0.02, -0.03, 0.0]),
                         jnp.array([0.22, 0.35, 0.27]) * jnp.array(MASK[k2]),
                         jnp.array([0.11, 0.07, SMOOTH[(k1, k2)]])])
    J, Jr = np.asarray(forward(R1, R2, x)), np.asarray(reverse(R1, R2, x))
    eps = 1e-6
    E = np.eye(12)
    fd = np.stack([(np.asarray(value(R1, R2, x + eps * E[i])) - np.asarray(value(R1, R2, x - eps * E[i]))) / (2 * eps)
                   for i in range(12)], axis=1)
    used = np.r_[MASK[k1], 1, 1, 1, MASK[k2], 1, 1, 1].astype(bool)
    np.testing.assert_allclose(J[:, used], fd[:, used], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(Jr, J, rtol=1e-12, atol=1e-12)


DEGENERATE = [  # (k1, k2, R2, p1, p2, size1, size2): coincident, parallel, on a face, on an axis, upright
    ("sphere", "sphere", I3, [0, 0, 0], [0, 0, 0], [0.3, 0, 0], [0.2, 0, 0]),
    ("sphere", "capsule", I3, [0, 0, 0.1], [0, 0, 0], [0.3, 0, 0], [0.2, 0.4, 0]),
    ("capsule", "capsule", I3, [0, 0, 0], [0, 0, 0], [0.1, 0.4, 0], [0.2, 0.4, 0]),
    ("capsule", "capsule", I3, [0, 0, 0], [0.3, 0, 0.2], [0.1, 0.4, 0], [0.2, 0.4, 0]),
    ("sphere", "box", I3, [0.3, 0, 0], [0, 0, 0], [0.1, 0, 0], [0.3, 0.4, 0.5]),
    ("sphere", "box", I3, [0, 0, 0], [0, 0, 0], [0.1, 0, 0], [0.3, 0.4, 0.5]),
    ("sphere", "box", I3, [0.3, 0.4, 0.5], [0, 0, 0], [0.1, 0, 0], [0.3, 0.4, 0.5]),
    ("sphere", "cylinder", I3, [0, 0, 0], [0, 0, 0], [0.1, 0, 0], [0.3, 0.4, 0]),
    ("sphere", "cylinder", I3, [0, 0, 0.4], [0, 0, 0], [0.1, 0, 0], [0.3, 0.4, 0]),
    ("plane", "cylinder", I3, [0, 0, 0], [0, 0, 0.4], [0, 0, 0], [0.3, 0.4, 0]),
    ("capsule", "box", I3, [0, 0, 0], [0, 0, 0], [0.1, 0.4, 0], [0.3, 0.4, 0.5]),
    ("capsule", "box", I3, [0.3, 0.4, 0], [0, 0, 0], [0.1, 0.4, 0], [0.3, 0.4, 0.5]),
    ("box", "box", I3, [0, 0, 0], [0, 0, 0], [0.3, 0.4, 0.5], [0.3, 0.4, 0.5]),
    ("box", "box", I3, [0, 0, 0], [0, 0, 1.0], [0.3, 0.4, 0.5], [0.3, 0.4, 0.5]),
    ("box", "box", I3, [0, 0, 0], [0.6, 0.8, 1.0], [0.3, 0.4, 0.5], [0.3, 0.4, 0.5]),
]


@pytest.mark.parametrize("k1,k2,R2,p1,p2,s1,s2", DEGENERATE)
def test_no_nan_in_values_or_derivatives_at_degenerate_configurations(k1, k2, R2, p1, p2, s1, s2):
    value, forward, reverse = _derivatives(k1, k2)
    x = jnp.asarray(np.r_[s1, p1, s2, p2], dtype=jnp.float64)
    R = jnp.asarray(R2, dtype=jnp.float64)
    for f in (value, forward, reverse):
        assert np.all(np.isfinite(np.asarray(f(jnp.eye(3), R, x)))), f


def test_batched_under_jit_and_vmap_with_static_shapes():
    rng = np.random.default_rng(3)
    batch = 5
    R = jnp.asarray(np.stack([np.asarray(rot_x(a) @ rot_y(b)) for a, b in rng.uniform(-1, 1, (batch, 2))]))
    p = jnp.asarray(rng.normal(size=(batch, 3)))
    h = jnp.asarray(rng.uniform(0.1, 0.5, (batch, 3)))
    batched = jax.jit(jax.vmap(functools.partial(collide, "box", "box")))
    out = batched(R, p, h, jnp.broadcast_to(jnp.eye(3), (batch, 3, 3)), jnp.zeros((batch, 3)), h)
    S = SLOTS[("box", "box")]
    assert out.gap.shape == (batch, S) and out.point.shape == (batch, S, 3)
    assert out.frame.shape == (batch, S, 3, 3) and out.valid.shape == (batch, S) and out.valid.dtype == bool
    one = COLLIDE("box", "box", R[2], p[2], h[2], jnp.eye(3), jnp.zeros(3), h[2])
    np.testing.assert_allclose(out.gap[2], one.gap, atol=1e-14)


def test_swapped_order_flips_only_the_normal():
    R2 = np.asarray(rot_x(0.5))
    a = slots("sphere", "box", I3, [0.1, 0.2, 0.9], [0.2, 0, 0], R2, np.zeros(3), [0.3, 0.4, 0.5])
    b = slots("box", "sphere", R2, np.zeros(3), [0.3, 0.4, 0.5], I3, [0.1, 0.2, 0.9], [0.2, 0, 0])
    np.testing.assert_allclose(b.gap, a.gap, atol=1e-15)
    np.testing.assert_allclose(b.point, a.point, atol=1e-15)
    np.testing.assert_allclose(b.frame[:, 0], -a.frame[:, 0], atol=1e-15)
    with pytest.raises(ValueError, match="plane"):
        collide("plane", "plane", I3, np.zeros(3), np.zeros(3), I3, np.zeros(3), np.zeros(3))

@pytest.mark.parametrize("k1,k2", list(SMOOTH), ids=[f"{a}-{b}" for a, b in SMOOTH])
def test_float32_follows_float64(k1, k2):
    """float32 inputs stay float32 (no constant promotes them) and agree with float64 to float32's precision."""
    R1 = np.asarray(rot_x(0.3) @ rot_z(0.2)) if k1 != "plane" else I3
    R2 = np.asarray(rot_y(0.7) @ rot_x(-0.4) @ rot_z(1.1))
    args = (R1, [0.02, -0.03, 0.0], np.array([0.3, 0.25, 0.2]) * MASK[k1], R2, [0.11, 0.07, SMOOTH[(k1, k2)]],
            np.array([0.22, 0.35, 0.27]) * MASK[k2])
    wide = COLLIDE(k1, k2, *(jnp.asarray(x, dtype=jnp.float64) for x in args))
    narrow = COLLIDE(k1, k2, *(jnp.asarray(x, dtype=jnp.float32) for x in args))
    assert narrow.gap.dtype == narrow.point.dtype == narrow.frame.dtype == jnp.float32
    for a, b in zip(narrow[:3], wide[:3]):
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b), atol=2e-6)
    assert np.array_equal(np.asarray(narrow.valid), np.asarray(wide.valid))
