"""Monte Carlo runner: determinism across chunk sizes and device counts, resume after interruption,
failure accounting, sampler ranges."""
import functools
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax.model import ModuleBuilder
from mrds_jax.montecarlo import (CheckpointMismatch, Interrupted, Normal, ToleranceBand, TruncatedNormal, Uniform,
                                 run_monte_carlo, sample)


@functools.lru_cache(maxsize=None)
def arm():
    b = ModuleBuilder()
    b.add_link("upper", None, "revolute", axis=(0, 1, 0), mass=2.0, com=(0.2, 0, 0), inertia=(0.01, 0.05, 0.05))
    b.add_link("fore", "upper", "revolute", axis=(0, 1, 0), position=(0.4, 0, 0), mass=1.0, com=(0.15, 0, 0),
               inertia=(0.005, 0.02, 0.02))
    return b.build()


SPEC = dict(mass=ToleranceBand(jnp.array([2.0, 1.0]), 0.05, relative=True),
            q=Uniform(-1.0, jnp.ones(2)), payload=TruncatedNormal(0.5, 0.3, 0.0, 1.0), offset=Normal(0.0, 1.0))


def task(s):
    """Free-fall acceleration of the arm with sampled link masses and configuration; fails (NaN) when the
    sampled offset is below −2."""
    module = arm()
    m = module.with_params(mass=s["mass"] * jnp.array([1.0, 1.0 + s["payload"]]))
    qdd = mj.aba(m, s["q"], jnp.zeros(2), jnp.zeros(2))
    return dict(peak=jnp.abs(qdd).max() + jnp.where(s["offset"] < -2.0, jnp.nan, 0.0), qdd=qdd,
                ok=s["payload"] < 0.95, reason=jnp.asarray(0))


def test_samplers_respect_their_ranges():
    keys = jax.random.split(jax.random.PRNGKey(0), 4000)
    draws = jax.vmap(lambda k: sample(SPEC, k))(keys)
    assert np.all(np.abs(draws["mass"] / np.array([2.0, 1.0]) - 1) <= 0.05)
    assert draws["payload"].min() >= 0 and draws["payload"].max() <= 1
    assert draws["q"].min() >= -1 and draws["q"].max() <= 1
    assert abs(float(draws["offset"].mean())) < 4 / np.sqrt(4000) and abs(float(draws["offset"].std()) - 1) < 0.05


def test_chunk_size_does_not_change_results():
    a = run_monte_carlo(task, SPEC, 100, seed=3, chunk_size=16, progress=False, keep_trajectories=True)
    b = run_monte_carlo(task, SPEC, 100, seed=3, chunk_size=40, progress=False, keep_trajectories=True)
    np.testing.assert_allclose(a.metrics["peak"], b.metrics["peak"], rtol=1e-13)
    np.testing.assert_allclose(a.trajectories["qdd"], b.trajectories["qdd"], rtol=1e-13)
    np.testing.assert_array_equal(a.reason, b.reason)
    # the per-scenario values are what a plain loop computes
    for i in (0, 57, 99):
        key = jax.random.fold_in(jax.random.PRNGKey(3), i)
        np.testing.assert_allclose(a.trajectories["qdd"][i], task(sample(SPEC, key))["qdd"], rtol=1e-12)
    s = a.summary()
    fails = s["_failed"]
    assert fails["count"] == int(a.failed.sum()) > 0
    assert set(fails["reasons"]) <= {"non-finite output", "reason 2"}  # no names given for task reasons here
    assert s["peak"]["count"] == 100 - fails["count"]
    assert s["peak"]["min"] <= s["peak"]["q0.5"] <= s["peak"]["max"]


def test_failures_are_counted_with_reasons():
    r = run_monte_carlo(task, SPEC, 200, seed=1, chunk_size=50, progress=False, reasons=("payload saturated",))
    counts = r.reason_counts()
    offsets = np.array([float(sample(SPEC, jax.random.fold_in(jax.random.PRNGKey(1), i))["offset"])
                        for i in range(200)])
    assert counts.get("non-finite output", 0) == int((offsets < -2).sum())
    assert counts.get("payload saturated", 0) > 0
    assert np.all(np.isfinite(r.metrics["peak"][~r.failed]))


def test_interrupted_run_resumes_to_the_same_statistics(tmp_path):
    full = run_monte_carlo(task, SPEC, 90, seed=5, chunk_size=20, progress=False)
    ckpt = tmp_path / "run"
    with pytest.raises(Interrupted):
        run_monte_carlo(task, SPEC, 90, seed=5, chunk_size=20, checkpoint_dir=ckpt, progress=False,
                        stop_after_chunks=2)
    done = sorted(p.name for p in ckpt.glob("chunk_*.npz"))
    assert done == ["chunk_000000.npz", "chunk_000001.npz"]
    mtimes = [p.stat().st_mtime_ns for p in sorted(ckpt.glob("chunk_*.npz"))]
    resumed = run_monte_carlo(task, SPEC, 90, seed=5, chunk_size=20, checkpoint_dir=ckpt, progress=False)
    assert [p.stat().st_mtime_ns for p in sorted(ckpt.glob("chunk_*.npz"))][:2] == mtimes  # not recomputed
    np.testing.assert_allclose(resumed.metrics["peak"], full.metrics["peak"], rtol=1e-13)
    assert resumed.summary()["peak"] == pytest.approx(full.summary()["peak"], rel=1e-13)
    assert resumed.summary()["_failed"] == full.summary()["_failed"]
    with pytest.raises(CheckpointMismatch, match="seed"):
        run_monte_carlo(task, SPEC, 90, seed=6, chunk_size=20, checkpoint_dir=ckpt, progress=False)


SHARDED = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4 --xla_backend_optimization_level=0"
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_montecarlo import SPEC, task
    from mrds_jax.montecarlo import run_monte_carlo
    assert len(jax.local_devices()) == 4, jax.local_devices()
    one = run_monte_carlo(task, SPEC, 100, seed=2, chunk_size=32, devices=jax.local_devices()[:1], progress=False)
    four = run_monte_carlo(task, SPEC, 100, seed=2, chunk_size=32, progress=False)
    np.testing.assert_allclose(four.metrics["peak"], one.metrics["peak"], rtol=1e-13)
    np.testing.assert_array_equal(four.reason, one.reason)
    print("sharded OK")
""")


def test_sharded_over_four_host_devices_equals_single_device():
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", SHARDED, tests_dir], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sharded OK" in out.stdout


def test_summary_of_a_boolean_metric_is_the_fraction_that_holds():
    """A metric such as 'converged' (bool) is summarised as 0/1: its mean is the fraction of scenarios where it
    holds (here x > 0.25 for x uniform on [0, 1], counted directly)."""
    from mrds_jax.montecarlo import Uniform
    r = run_monte_carlo(lambda s: dict(x=s["x"], above=s["x"] > 0.25), {"x": Uniform(0.0, 1.0)}, 200, seed=2,
                        chunk_size=100, progress=False)
    s = r.summary()
    assert s["above"]["mean"] == pytest.approx(np.mean(np.asarray(r.metrics["x"]) > 0.25), abs=1e-15)
    assert (s["above"]["min"], s["above"]["max"]) == (0.0, 1.0)
