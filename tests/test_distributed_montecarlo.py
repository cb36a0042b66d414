"""Monte Carlo across two processes on JAX's own distributed runtime (issue 13): ``jax.distributed`` with a
local coordinator on 127.0.0.1, two CPU processes sharing one checkpoint folder, each running its share of the
chunks (c % 2 == process index). Process 1 is killed with SIGKILL in the middle of its second chunk while
process 0 finishes; the job is restarted (both processes, a new coordinator): process 0 computes nothing,
process 1 only its missing chunk, nothing finished is rewritten; the result assembled from the folder equals
the single-process run bit for bit."""
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np

from processes import TESTS
from test_checkpoints import CHUNK, N, SEED, assert_identical, mc, uninterrupted

WORKER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import jax
    jax.config.update("jax_enable_x64", True)
    tests, pid, port, ckpt, kill_at, n, chunk, seed = sys.argv[1:]
    pid, kill_at, n, chunk, seed, ckpt = int(pid), int(kill_at), int(n), int(chunk), int(seed), Path(ckpt)
    jax.distributed.initialize(coordinator_address="127.0.0.1:" + port, num_processes=2, process_id=pid,
                               initialization_timeout=120)
    assert jax.process_count() == 2 and jax.process_index() == pid and len(jax.local_devices()) == 1
    sys.path.insert(0, tests)
    from test_montecarlo import SPEC, task
    import mrds_jax.montecarlo.runner as R
    real = R.make_chunk_runner

    def killable(*args, **kw):
        call = real(*args, **kw)

        def run(indices):
            out = call(indices)
            if int(indices[0]) == kill_at * chunk:
                print(f"process {pid} in chunk {kill_at}", flush=True)
                time.sleep(600)
            return out
        return run

    R.make_chunk_runner = killable
    try:
        R.run_monte_carlo(task, SPEC, n, seed=seed, chunk_size=chunk, checkpoint_dir=ckpt, progress=False)
        print(f"process {pid}: all chunks present", flush=True)
    except R.Interrupted as e:
        print(f"process {pid}: {e}", flush=True)
    sys.stdin.readline()     # the test says when: process 0 hosts the coordinator, the other must not outlive it
    os._exit(0)              # no shutdown barrier: the other process may be gone
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(pid, port, ckpt, kill_at=-1):
    args = [str(TESTS), str(pid), str(port), str(ckpt), str(kill_at), str(N), str(CHUNK), str(SEED)]
    return subprocess.Popen([sys.executable, "-c", WORKER, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(TESTS.parent)})


def wait_for(proc, marker, timeout=300):
    """Lines of ``proc``'s output up to the one containing ``marker``."""
    t0, lines = time.monotonic(), []
    while not lines or marker not in lines[-1]:
        lines.append(proc.stdout.readline())
        assert lines[-1] or proc.poll() is None, f"the process ended before {marker!r}:\n" + "".join(lines)[-3000:]
        assert time.monotonic() - t0 < timeout, "".join(lines)[-3000:]
    return "".join(lines)


def release(proc):
    """Let a worker that has printed its result exit (status 0)."""
    out, _ = proc.communicate("\n", timeout=60)
    assert proc.returncode == 0, out[-3000:]


def chunk_times(ckpt):
    return {p.name: p.stat().st_mtime_ns for p in ckpt.glob("chunk_*.npz")}


def test_two_processes_killed_and_restarted_equal_one_process(tmp_path):
    ckpt = tmp_path / "shared"
    # the job: process 1 is killed in the middle of chunk 3 (its second), process 0 runs chunks 0, 2, 4
    port = free_port()
    p0, p1 = start(0, port, ckpt), start(1, port, ckpt, kill_at=3)
    wait_for(p1, "process 1 in chunk 3")
    p1.send_signal(signal.SIGKILL)
    p1.communicate()
    assert p1.returncode == -signal.SIGKILL
    assert re.search(r"chunks \[(1, )?3\] are not finished yet", wait_for(p0, "process 0:"))   # 1: not yet seen
    release(p0)
    before = chunk_times(ckpt)
    assert sorted(before) == [f"chunk_{c:06d}.npz" for c in (0, 1, 2, 4)]
    # the job restarted: only chunk 3 is computed, by process 1
    port = free_port()
    p0, p1 = start(0, port, ckpt), start(1, port, ckpt)
    out1 = wait_for(p1, "process 1:")
    out0 = wait_for(p0, "process 0:")
    release(p1)
    release(p0)
    after = chunk_times(ckpt)
    assert sorted(after) == [f"chunk_{c:06d}.npz" for c in range(5)]
    assert {k: after[k] for k in before} == before, "a finished chunk was rewritten"
    assert "process 1: all chunks present" in out1
    assert "process 0: all chunks present" in out0 or "chunks [3] are not finished yet" in out0, out0
    # any process assembles the result from the folder, computing nothing: equal to one process
    assembled = mc(ckpt, stop_after_chunks=0)
    assert_identical(assembled, uninterrupted())
    np.testing.assert_array_equal(assembled.reason, uninterrupted().reason)
