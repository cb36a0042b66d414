"""Monte Carlo checkpoints you can trust (issue 13): a run killed with SIGKILL in the middle of a chunk resumes
to bit-identical statistics; truncated, shortened, swapped, edited and foreign chunk files are named and
recomputed; a different task or spec into the same folder is refused. (The design optimiser's kill-and-resume
tests are in test_ckcm_design.py, beside the run they compare with.)

The kill is real (``SIGKILL`` to a child process) and lands inside a chunk: the child wraps the compiled chunk
function so that, once chunk 2 has been dispatched, it leaves a half-written file, announces it and waits to be
killed before anything of chunk 2 reaches the disk."""
import functools
import shutil
import textwrap

import numpy as np
import pytest

from mrds_jax.montecarlo import CheckpointMismatch, CheckpointWarning, Uniform, run_monte_carlo, task_identity
from processes import TESTS, kill_when_ready

N, CHUNK, SEED = 90, 20, 5          # 5 chunks, the last one short


# ----------------------------------------------------------------------------- Monte Carlo
MC_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import jax
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, sys.argv[1])
    from test_montecarlo import SPEC, task
    import mrds_jax.montecarlo.runner as R
    ckpt = Path(sys.argv[2])
    real = R.make_chunk_runner

    def killable(*args, **kw):
        call = real(*args, **kw)

        def run(indices):
            out = call(indices)
            if int(indices[0]) == 2 * {chunk}:        # chunk 2 dispatched, then a write cut short
                (ckpt / ".chunk_000002.tmp.npz").write_bytes(b"PK\\x03\\x04 cut short")
                print("IN CHUNK 2", flush=True)
                time.sleep(600)
            return out
        return run

    R.make_chunk_runner = killable
    R.run_monte_carlo(task, SPEC, {n}, seed={seed}, chunk_size={chunk}, checkpoint_dir=ckpt, progress=False)
""").format(n=N, chunk=CHUNK, seed=SEED)


@functools.lru_cache(maxsize=None)
def uninterrupted():
    from test_montecarlo import SPEC, task
    return run_monte_carlo(task, SPEC, N, seed=SEED, chunk_size=CHUNK, progress=False, keep_trajectories=True)


def mc(ckpt, **kw):
    from test_montecarlo import SPEC, task
    args = dict(task=task, spec=SPEC, n=N, seed=SEED, chunk_size=CHUNK, checkpoint_dir=ckpt, progress=False)
    args.update(kw)
    return run_monte_carlo(**args)


def assert_identical(a, b):
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        np.testing.assert_array_equal(a.metrics[k], b.metrics[k])
    np.testing.assert_array_equal(a.reason, b.reason)
    assert a.summary() == b.summary()           # bit-identical statistics


@pytest.fixture(scope="module")
def killed_mc(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("mc") / "run"
    kill_when_ready(MC_CHILD, [str(TESTS), str(ckpt)], "IN CHUNK 2")
    return ckpt


def test_monte_carlo_killed_mid_chunk_resumes_bit_identical(killed_mc, tmp_path):
    ckpt = tmp_path / "run"
    shutil.copytree(killed_mc, ckpt)
    assert sorted(p.name for p in ckpt.glob("chunk_*.npz")) == ["chunk_000000.npz", "chunk_000001.npz"]
    assert (ckpt / ".chunk_000002.tmp.npz").exists()          # the write that was cut short
    before = {p.name: p.stat().st_mtime_ns for p in ckpt.glob("chunk_*.npz")}
    resumed = mc(ckpt)
    assert {p.name: p.stat().st_mtime_ns for p in ckpt.glob("chunk_*.npz") if p.name in before} == before
    assert len(list(ckpt.glob("chunk_*.npz"))) == 5
    assert_identical(resumed, uninterrupted())


def _rewrite(path, change):
    with np.load(path) as z:
        arrays = change({k: z[k] for k in z.files})
    np.savez(path, **arrays)


def test_damaged_and_foreign_chunks_are_named_and_recomputed(tmp_path):
    ckpt = tmp_path / "run"
    full = mc(ckpt)
    chunk = lambda c: ckpt / f"chunk_{c:06d}.npz"  # noqa: E731
    data = chunk(1).read_bytes()
    chunk(1).write_bytes(data[: len(data) // 2])                                       # truncated
    _rewrite(chunk(2), lambda a: {k: (v[:8] if not k.startswith("_") else v) for k, v in a.items()})  # shortened
    shutil.copy(chunk(0), chunk(3))                                                    # swapped
    _rewrite(chunk(4), lambda a: {**a, "peak": a["peak"] + 1.0})                        # edited
    _rewrite(chunk(0), lambda a: {**a, "_fingerprint": np.asarray("0" * 32)})           # from another run
    with pytest.warns(CheckpointWarning) as record:
        again = mc(ckpt)
    named = [str(w.message) for w in record if issubclass(w.category, CheckpointWarning)]
    text = "\n".join(named)
    assert "chunk_000000.npz is not trusted (it belongs to another run" in text
    assert "chunk_000001.npz is not trusted (chunk file" in text and "is damaged" in text
    assert "chunk_000002.npz is not trusted (it should hold 20 scenarios" in text
    assert "chunk_000003.npz is not trusted (it holds scenarios from 0, this chunk starts at 60" in text
    assert "chunk_000004.npz is not trusted (its checksum does not match" in text
    assert len(named) == 5 and len(list(ckpt.glob("*.npz.bad"))) == 5, named
    assert_identical(again, full)
    assert_identical(full, uninterrupted())


def scaled_task(s, scale=1.0):
    from test_montecarlo import task
    return {k: v * scale for k, v in task(s).items()}


def test_different_task_or_spec_into_the_same_folder_is_refused(tmp_path):
    from test_montecarlo import SPEC
    ckpt = tmp_path / "run"
    mc(ckpt, n=20)
    with pytest.raises(CheckpointMismatch, match=r"checkpoint .*run belongs to another run \(differs in \{'fingerprint'"):
        mc(ckpt, n=20, task=scaled_task)
    with pytest.raises(CheckpointMismatch, match="fingerprint"):
        mc(ckpt, n=20, spec={**SPEC, "q": Uniform(-2.0, 2.0)})
    # the task's identity sees bound arguments and closure values, not only the function's name
    assert task_identity(functools.partial(scaled_task, scale=2.0)) != task_identity(
        functools.partial(scaled_task, scale=3.0))
    assert task_identity(scaled_task) == task_identity(scaled_task)
