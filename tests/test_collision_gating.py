"""The general convex route as a batch runs it (issue 59, items 1-3), float64:

* EPA and the overlap's refinement run only when some pair of some scenario overlaps: under ``jit(vmap)`` of a
  batch whose pairs are all apart EPA is entered no time at all (counted by a callback wrapped around it), with
  one overlapping scenario it is entered, and the answers of every scenario are those computed one at a time;
* the whole search runs only for the pairs the broad phase finds within reach (``need``), and not at all when no
  pair of any scenario is: Go1 standing on its feet enters GJK no time at all;
* the default search is MuJoCo's accuracy: the gap of Go1's pair kinds (capsule–cylinder, cylinder–cylinder) and
  of an ellipsoid pair to 1e-6 against MuJoCo's ``mj_collision`` run tight, the normal and the point to 1e-6 by the
  first-order optimality conditions of tests/test_collision_convex.py (an independent check, written from the
  geoms' own descriptions); :data:`~mrds_jax.collision.PRECISE` is checked to 1e-9 in tests/test_collision_mujoco.py;
* the derivatives of gap, normal and point with respect to both poses and sizes, through the search held
  constant (at MuJoCo's accuracy) and the one differentiable Newton step at its normal, equal central differences
  (of the route to round-off), apart, overlapping and deep (a side in the contact: rotations too).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax.collision import PRECISE, ConvexSettings, collide
from mrds_jax.collision import convex
from test_collision_convex import _mujoco, _optimality
from test_collision_mujoco import SIZE_MASK, _place, _rotation, _sample

jax.config.update("jax_enable_x64", True)
PAIRS = [("capsule", "cylinder"), ("cylinder", "cylinder"), ("capsule", "ellipsoid")]


def _pose_batch(rng, k1, k2, overlapping, count):
    """``count`` sampled pairs of one kind pair and size, apart (t ≥ 1.2 of the sampled direction: farther than the
    sizes reach) or, for the scenarios in ``overlapping``, centred on each other."""
    s1, s2, _, _, _, _ = _sample(rng, k1, k2)
    R1, R2, p1, p2 = [], [], [], []
    for i in range(count):
        _, _, q1, q2, c, direction = _sample(rng, k1, k2)
        R1.append(_rotation(q1)), R2.append(_rotation(q2)), p1.append(c)
        p2.append(c + (0.05 if i in overlapping else 2.5) * direction)
    stack = lambda xs: jnp.asarray(np.stack(xs))
    return (stack(R1), stack(p1), jnp.broadcast_to(jnp.asarray(s1), (count, 3)), stack(R2), stack(p2),
            jnp.broadcast_to(jnp.asarray(s2), (count, 3)))


def test_epa_runs_only_when_some_scenario_of_the_batch_overlaps(monkeypatch):
    entered = []
    plain_epa = convex.epa

    def counted_epa(simplex, A, B, settings=ConvexSettings()):
        jax.debug.callback(lambda: entered.append(1))
        return plain_epa(simplex, A, B, settings)

    monkeypatch.setattr(convex, "epa", counted_epa)
    rng = np.random.default_rng(3)
    k1, k2 = "capsule", "cylinder"
    # a batch of scenarios, each a stack of 3 pairs (convex_contacts' leading axis), under jit(vmap)
    batched = jax.jit(jax.vmap(lambda *a: convex.convex_contacts(k1, k2, *a)))
    for overlapping in ((), (5,)):
        poses = _pose_batch(rng, k1, k2, overlapping, 8 * 3)
        args = [x.reshape((8, 3) + x.shape[1:]) for x in poses]
        entered.clear()
        gap, point, normal = jax.block_until_ready(batched(*args))
        assert (len(entered) > 0) == bool(overlapping), (overlapping, len(entered))
        assert (np.asarray(gap) < 0).any() == bool(overlapping)
        one = jax.jit(lambda *a: convex.convex_contact(convex.Shape(k1, *a[:3]), convex.Shape(k2, *a[3:])))
        for s in range(8):
            for k in range(3):
                ref = one(*(x[s, k] for x in args))
                for ours, theirs in zip((gap, point, normal), ref):
                    np.testing.assert_allclose(ours[s, k], theirs, atol=1e-12)


def test_search_runs_only_when_some_pair_of_the_batch_is_needed(monkeypatch):
    """``need`` (the broad phase's pairs within reach): with no pair of any scenario needed, GJK is entered no time
    at all; with one, it is, and the needed pairs' contacts are those computed one at a time."""
    entered = []
    plain_gjk = convex.gjk_stage

    def counted_gjk(A, B, settings=ConvexSettings()):
        jax.debug.callback(lambda: entered.append(1))
        return plain_gjk(A, B, settings)

    monkeypatch.setattr(convex, "gjk_stage", counted_gjk)
    rng = np.random.default_rng(5)
    k1, k2 = "capsule", "cylinder"
    batched = jax.jit(jax.vmap(lambda need, *a: convex.convex_contacts(k1, k2, *a, need=need)))
    one = jax.jit(lambda *a: convex.convex_contact(convex.Shape(k1, *a[:3]), convex.Shape(k2, *a[3:])))
    poses = _pose_batch(rng, k1, k2, (5,), 8 * 3)
    args = [x.reshape((8, 3) + x.shape[1:]) for x in poses]
    for needed in ((), ((1, 2), (6, 0))):
        need = np.zeros((8, 3), bool)
        for s, k in needed:
            need[s, k] = True
        entered.clear()
        gap, point, normal = jax.block_until_ready(batched(jnp.asarray(need), *args))
        jax.effects_barrier()
        assert (len(entered) > 0) == bool(needed), (needed, len(entered))
        for s, k in needed:
            ref = one(*(x[s, k] for x in args))
            for ours, theirs in zip((gap, point, normal), ref):
                np.testing.assert_allclose(ours[s, k], theirs, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("k1,k2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
@pytest.mark.parametrize("penetrating", [False, True], ids=["apart", "overlapping"])
def test_default_search_is_within_mujocos_accuracy(k1, k2, penetrating):
    rng = np.random.default_rng(sum(map(ord, k1 + k2)) + 7 * penetrating)
    run = jax.jit(functools.partial(collide, settings=ConvexSettings()), static_argnums=(0, 1))
    compared = 0
    for _ in range(10):
        s1, s2, q1, q2, p1, direction = _sample(rng, k1, k2)
        R1, R2 = _rotation(q1), _rotation(q2)
        p2 = p1 + (rng.uniform(0.0, 0.2) if penetrating else rng.uniform(0.45, 1.0)) * direction
        reference = _mujoco(k1, s1, k2, s2, np.r_[p1, q1], np.r_[p2, q2])
        if reference is None or (reference[0] < 0) != penetrating:
            continue
        out = run(k1, k2, *(jnp.asarray(x) for x in (R1, p1, s1, R2, p2, s2)))
        gap, normal, point = float(out.gap[0]), np.asarray(out.frame[0, 0]), np.asarray(out.point[0])
        assert abs(gap - reference[0]) < 1e-6, (gap, reference[0])
        assert _optimality(k1, R1, p1, s1, k2, R2, p2, s2, gap, normal, point) < 1e-6
        compared += 1
    assert compared >= 3


def _axis_angle(w):
    """A rotation smooth in w about w = 0 (the unit quaternion (1, w/2) normalised), identity at 0."""
    q = jnp.concatenate([jnp.ones(1), 0.5 * w])
    a, b, c, d = q / jnp.sqrt(jnp.dot(q, q))
    return jnp.array([[a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
                      [2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)],
                      [2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d]])


@pytest.mark.slow
@pytest.mark.parametrize("k1,k2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
@pytest.mark.parametrize("target", [-0.1, -0.01, 0.05], ids=["deep", "overlapping", "apart"])
def test_contact_derivatives_match_central_differences(k1, k2, target):
    """At a generic pose (a unique contact), the geom pair moved along a sampled direction to the gap ``target``:
    deep (a capsule's or cylinder's side in the contact, a kink of the support function, whose end point the
    derivatives must not take for the contact's point), shallow and apart."""
    rng = np.random.default_rng(11)
    s1, s2, q1, q2, p1, direction = _sample(rng, k1, k2)
    R1, R2 = jnp.asarray(_rotation(q1)), jnp.asarray(_rotation(q2))
    m1, m2 = np.asarray(SIZE_MASK[k1], bool), np.asarray(SIZE_MASK[k2], bool)
    run = jax.jit(functools.partial(collide, settings=PRECISE), static_argnums=(0, 1))
    t = _place(lambda t: float(run(k1, k2, R1, jnp.asarray(p1), jnp.asarray(s1), R2, jnp.asarray(p1 + t * direction),
                                   jnp.asarray(s2)).gap[0]), target)

    def contact(x, settings):
        """gap, normal, point of the pair moved by x = (rotation of 1, position of 1, sizes of 1, and of 2)."""
        size1 = jnp.asarray(s1).at[m1].add(x[6:6 + m1.sum()])
        rest = x[6 + m1.sum():]
        size2 = jnp.asarray(s2).at[m2].add(rest[6:6 + m2.sum()])
        out = collide(k1, k2, _axis_angle(x[:3]) @ R1, jnp.asarray(p1) + x[3:6], size1,
                      _axis_angle(rest[:3]) @ R2, jnp.asarray(p1 + t * direction) + rest[3:6], size2, settings)
        return jnp.concatenate([out.gap, out.frame[0, 0], out.point[0]])

    n = 12 + m1.sum() + m2.sum()
    x0 = jnp.zeros(n)
    J = np.asarray(jax.jit(jax.jacrev(lambda x: contact(x, ConvexSettings())))(x0))
    value = jax.jit(lambda x: contact(x, PRECISE))
    h = 1e-6
    fd = np.stack([(np.asarray(value(x0.at[i].set(h))) - np.asarray(value(x0.at[i].set(-h)))) / (2 * h)
                   for i in range(n)], axis=1)
    assert np.isfinite(J).all()
    np.testing.assert_allclose(J, fd, atol=2e-5, rtol=1e-5)


def test_go1_standing_on_its_feet_searches_no_pair_of_the_general_convex_route(monkeypatch):
    """Menagerie's Go1 as shipped, at its keyframe with the joints moved by ±0.02 rad (a batch of 4 under
    ``jit(vmap)``): the feet touch the floor and no self-collision pair is within reach (the separating-axis bound
    of the hip rotors' cylinders, broadphase.axis_bounds, says so where their bounding capsules overlap), so GJK is
    entered no time at all; the slots within reach are those of every pair's narrow phase (``within=None``)."""
    import warnings
    from pathlib import Path
    from mrds_jax.loaders.mjcf import load_mjcf
    from mrds_jax.system import SystemState
    from mrds_jax.system.timestepping import candidates

    entered = []
    plain_gjk = convex.gjk_stage

    def counted_gjk(A, B, settings=ConvexSettings()):
        jax.debug.callback(lambda: entered.append(1))
        return plain_gjk(A, B, settings)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping = load_mjcf(Path(__file__).parent / "data" / "go1.xml", floor=True, return_mapping=True)
    state = mapping.keyframe_state("home", system)
    rng = np.random.default_rng(0)
    q = tuple(jnp.broadcast_to(x, (4,) + x.shape) for x in state.q)
    q = q[:-1] + (q[-1] + jnp.asarray(rng.uniform(-0.02, 0.02, q[-1].shape)),)
    monkeypatch.setattr(convex, "gjk_stage", counted_gjk)
    entered.clear()
    near = jax.block_until_ready(jax.jit(jax.vmap(
        lambda q: candidates(system, SystemState(q, state.v), within=2e-3).slots))(q))
    jax.effects_barrier()
    assert len(entered) == 0, len(entered)
    monkeypatch.setattr(convex, "gjk_stage", plain_gjk)
    every = jax.jit(jax.vmap(lambda q: candidates(system, SystemState(q, state.v)).slots))(q)
    valid = np.asarray(near.valid)
    assert valid.sum() >= 4 * 4                                          # the feet, in every scenario
    np.testing.assert_allclose(np.asarray(near.gap)[valid], np.asarray(every.gap)[valid], atol=1e-12)
    np.testing.assert_allclose(np.asarray(near.point)[valid], np.asarray(every.point)[valid], atol=1e-12)
