"""The broad phase (mrds_jax/collision/broadphase.py, issue 52) against MuJoCo's own collision detection and against
the narrow phase of every pair, float64:

* on random configurations of Menagerie's Go1 (697 pairs) and MuJoCo's humanoid, with every geom's margin raised so
  that MuJoCo's ``mj_collision`` reports each pair within 2 cm: the bounding capsules' distance of every pair MuJoCo
  reports is never above MuJoCo's distance (a lower bound), and, where the buffer did not overflow, every such pair
  reaches the narrow phase, with MuJoCo's gap to 1e-6 (apart or overlapping);
* a step's slots with the broad phase equal those of every pair's narrow phase on every pair within reach;
* more pairs of one kind within reach than its capacity: the overflow is reported, in the step's report and in
  ``simulate``'s warning, and the nearest pairs are the ones computed; with the default capacities ``simulate``
  doubles them and runs again until nothing overflows, the same motion as a run with room for every pair;
* a second ``simulate`` of the same system and shapes compiles nothing.
"""
import logging
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.collision import BroadPhase, contact_slots, plane, sphere
from mrds_jax.collision.broadphase import pair_bounds
from mrds_jax.loaders.mjcf import compile_mjcf, load_mjcf
from mrds_jax.system.simulate import ContactOverflowWarning
from mrds_jax.system.timestepping import ContactSettings, candidates, geom_world_frames

jax.config.update("jax_enable_x64", True)
DATA = Path(__file__).parent / "data"
REACH = 0.02
CONFIGURATIONS = 12


def _random_qpos(model, rng):
    """MuJoCo qpos with every limited hinge or slide uniform in its range (unlimited hinges in ±π), free joints at a
    random height in [0.05, 0.6] m over the origin with a random orientation."""
    qpos = model.qpos0.copy()
    for j in range(model.njnt):
        a = model.jnt_qposadr[j]
        kind = model.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            q = rng.normal(size=4)
            qpos[a:a + 7] = np.r_[rng.uniform(-0.05, 0.05, 2), rng.uniform(0.05, 0.6), q / np.linalg.norm(q)]
        elif kind in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            lo, hi = model.jnt_range[j] if model.jnt_limited[j] else (-np.pi, np.pi)
            qpos[a] = rng.uniform(lo, hi)
    return qpos


def _mujoco_pairs(model, data, qpos):
    """{frozenset of geom ids: smallest distance} of MuJoCo's contacts at qpos (``mj_fwdPosition``)."""
    data.qpos[:] = qpos
    mujoco.mj_fwdPosition(model, data)
    out = {}
    for c in data.contact[:data.ncon]:
        key = frozenset((int(c.geom1), int(c.geom2)))
        out[key] = min(out.get(key, np.inf), float(c.dist))
    return out


@pytest.mark.filterwarnings("error::FutureWarning", "error::DeprecationWarning")   # no JAX warning on the way
@pytest.mark.parametrize("robot,floor", [("go1", True), ("humanoid", False)])
def test_broad_phase_keeps_every_pair_mujoco_finds_within_reach(robot, floor):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping = load_mjcf(DATA / f"{robot}.xml", return_mapping=True, floor=floor)
    collision = system.collision
    model, _ = compile_mjcf(str(DATA / f"{robot}.xml"), floor)
    assert model.ngeom == len(collision.geoms) and all(
        model.geom(i).name in ("", g.name) for i, g in enumerate(collision.geoms))     # the same geoms, in order
    model.geom_margin[:] = REACH / 2                          # a pair's margin is the sum of its geoms' (no <pair>)
    model.geom_gap[:] = 0.0
    model.opt.ccd_tolerance = 1e-12
    data = mujoco.MjData(model)
    settings = ContactSettings(margin=REACH, broad_phase=BroadPhase(slack=0.0))          # reach = margin exactly

    @jax.jit
    def ours(state):
        poses = tuple(geom_world_frames(system, state))
        return pair_bounds(collision, poses), candidates(system, state, 0.0, settings).slots

    index = {frozenset(p): k for k, p in enumerate(collision.pairs)}
    carriers = [frozenset((collision.geoms[i].module, collision.geoms[i].frame, collision.geoms[j].module,
                           collision.geoms[j].frame)) for i, j in collision.pairs]
    same_carriers = [np.flatnonzero([c == mine for c in carriers]) for mine in carriers]
    rng = np.random.default_rng(52)
    compared, unflowed, matched = 0, 0, 0
    for _ in range(CONFIGURATIONS):
        qpos = _random_qpos(model, rng)
        found = _mujoco_pairs(model, data, qpos)
        bounds, slots = ours(mapping.state(qpos, np.zeros(model.nv)))
        bounds, gap, valid, pair = (np.asarray(x) for x in (bounds, slots.gap, slots.valid, slots.pair))
        overflow = bool(slots.overflow)
        unflowed += not overflow
        for key, dist in found.items():
            assert key in index, f"MuJoCo collides {[model.geom(g).name for g in key]}, which is not a candidate"
            k = index[key]
            compared += 1
            assert bounds[k] <= dist + 1e-9, (robot, [model.geom(g).name for g in key], bounds[k], dist)
            if overflow:
                continue
            mine = valid & (pair == k)
            assert mine.any(), f"{robot}: the broad phase left out {[model.geom(g).name for g in key]} ({dist:.4f} m)"
            # MuJoCo's distance is one of our valid slots' gaps: of this pair's, or of another pair between the same
            # two bodies where that slot is the same contact (chained capsules share an end: the copy is dropped,
            # collision/model.py coincident_slots)
            alike = valid & np.isin(pair, same_carriers[k])
            assert np.min(np.abs(gap[alike] - dist)) < 1e-6, ([model.geom(g).name for g in key], gap[mine], dist)
            matched += 1
    print(f"\n{robot}: {compared} MuJoCo pairs within {REACH} m over {CONFIGURATIONS} configurations, {unflowed} without "
          f"overflow, {matched} gaps compared")
    assert compared >= 5 * CONFIGURATIONS and unflowed >= CONFIGURATIONS // 2 and matched >= 5 * CONFIGURATIONS


def _balls(n, max_pairs=None):
    """n free balls (radius 0.1) resting on a floor, 0.5 m apart: n plane–sphere pairs, no sphere pair near."""
    from mrds_jax.model.builder import ModuleBuilder
    modules, geoms = {}, [plane("floor")]
    for k in range(n):
        b = ModuleBuilder()
        b.add_link("ball", None, "free", mass=1.0, inertia=4e-3 * np.eye(3))
        b.add_frame("centre", "ball")
        modules[f"ball{k}"] = b.build()
        geoms.append(sphere(f"ball{k}", f"ball{k}", "centre", 0.1))
    system = S.build_system(modules, [], collision=geoms)
    q = tuple(jnp.asarray([0.5 * k, 0.0, 0.1 + 5e-4 * k, 1.0, 0.0, 0.0, 0.0]) for k in range(n))
    v = tuple(jnp.zeros(6) for _ in range(n))
    return system, S.SystemState(q, v), ContactSettings(broad_phase=BroadPhase(max_pairs=max_pairs))


def test_overflow_is_reported_and_the_nearest_pairs_are_computed():
    system, state, settings = _balls(3, max_pairs=2)
    collision = system.collision
    slots = candidates(system, state, 1e-3, settings).slots
    assert bool(slots.overflow)
    names = collision.pair_names()
    computed = {names[int(k)] for k in np.asarray(slots.pair)[np.asarray(slots.valid)]}
    # of the three plane–sphere pairs, all within reach, the two nearest (ball2 is 0.5 mm higher than ball1)
    assert {pair for pair in computed if "floor" in pair} == {("floor", "ball0"), ("floor", "ball1")}
    exact = contact_slots(collision, tuple(geom_world_frames(system, state)))     # every pair's narrow phase
    valid = np.asarray(slots.valid)
    np.testing.assert_allclose(np.asarray(slots.gap)[valid], np.asarray(exact.gap)[valid], atol=1e-15)
    with pytest.warns(ContactOverflowWarning, match="broad_phase.max_pairs"):
        S.simulate(system, state, dt=1e-3, n_steps=2, contact=S.ContactStep(settings=settings))
    assert not bool(candidates(system, state, 1e-3, ContactSettings()).slots.overflow)
    traj = S.simulate(system, state, dt=1e-3, n_steps=2, checks=S.Checks(enabled=False),
                      contact=S.ContactStep(settings=settings))
    assert np.all(np.asarray(traj.pair_overflow)[1:]) and not np.any(np.asarray(traj.overflow))


def test_second_simulate_with_the_same_shapes_compiles_nothing():
    system, state, settings = _balls(2)
    S.simulate(system, state, dt=1e-3, n_steps=4, contact=S.ContactStep(settings=settings))
    messages = []

    class Record(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Record()
    moved = S.SystemState(tuple(q + jnp.asarray([0.01, 0, 0, 0, 0, 0, 0]) for q in state.q), state.v)
    logging.getLogger("jax").addHandler(handler)
    try:
        with jax.log_compiles(True):
            S.simulate(system, moved, dt=1e-3, n_steps=4, contact=S.ContactStep(settings=settings))
    finally:
        logging.getLogger("jax").removeHandler(handler)
    compiled = [m for m in messages if m.startswith("Compiling")]
    assert not compiled, compiled


def test_simulate_grows_a_default_capacity_that_overflowed(monkeypatch):
    from mrds_jax.collision import broadphase
    system, state, _ = _balls(3)
    monkeypatch.setattr(broadphase, "CLOSED_FORM_PAIRS", 2)                # 3 plane–sphere pairs, 2 places
    with pytest.warns(ContactOverflowWarning, match=r"capacity_factor=2"):
        grown = S.simulate(system, state, dt=1e-3, n_steps=3, contact=S.ContactStep(settings=ContactSettings()))
    assert not np.any(np.asarray(grown.pair_overflow)) and not np.any(np.asarray(grown.overflow))
    roomy = S.simulate(system, state, dt=1e-3, n_steps=3,
                       contact=S.ContactStep(settings=ContactSettings(broad_phase=BroadPhase(max_pairs=3))))
    for a, b in zip(grown.q, roomy.q):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
