"""The contact candidates of Menagerie's Go1 as shipped (tests/data/go1.xml with a floor: the broad phase, then the
narrow phase of the pairs within reach, the geoms' frame Jacobians) under ``jit(vmap)`` at a batch of joint
configurations: compile time, kernel count of the compiled program and evaluations/s after compilation, on one
tree of the library (the one ``import mrds_jax`` finds: run it with PYTHONPATH set to each tree to compare).

Two batches: ``home`` (the keyframe, joints moved by ±0.02 rad: the feet on the floor, every self-collision pair
apart, so that a narrow phase gated batch-wide pays GJK alone) and ``folded`` (±1.2 rad: some legs' geoms overlap
the trunk's in some scenarios, so that EPA runs). Times on a loaded machine are noisy: best of ``--repeat``.

    PYTHONPATH=. taskset -c 1 python experiments/narrowphase_speed.py [--batch 256] [--dtype float32] [--repeat 5]
"""
import argparse
import os
import platform
import re
import time
import warnings
from pathlib import Path

os.environ.setdefault("JAX_ENABLE_X64", "1")
import jax                                                                  # noqa: E402
import jax.numpy as jnp                                                     # noqa: E402
import numpy as np                                                          # noqa: E402

import mrds_jax                                                             # noqa: E402
from mrds_jax.loaders.mjcf import load_mjcf                                 # noqa: E402
from mrds_jax.system import SystemState                                     # noqa: E402
from mrds_jax.system.timestepping import candidates, collision_model_of    # noqa: E402

PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "go1.xml"
DT = 2e-3


def kernel_count(compiled):
    """Operations of the compiled program outside fusions (as ../shared/bench/mjcf_speed.py counts them)."""
    count = 0
    for comp in re.split(r"\n(?=\S)", compiled.as_text()):
        head = comp.split("\n", 1)[0]
        if "fused_computation" in head or head.startswith("HloModule") or "{" not in head:
            continue
        for line in comp.split("\n")[1:]:
            m = re.search(r"=\s*\S+\s+([a-z\-]+)\(", line)
            if m and m.group(1) not in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast"):
                count += 1
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    dtype = jnp.float32 if args.dtype == "float32" else jnp.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping = load_mjcf(PATH, floor=True, return_mapping=True)
    state = mapping.keyframe_state("home", system)
    cast = lambda x: jax.tree.map(lambda y: jnp.asarray(y, dtype) if jnp.issubdtype(jnp.asarray(y).dtype,
                                                                                    jnp.floating) else y, x)
    system, state = cast(system), cast(state)
    model = collision_model_of(system)
    run = jax.jit(jax.vmap(lambda q: candidates(system, SystemState(q, state.v), within=DT).slots))
    print(f"mrds_jax {Path(mrds_jax.__file__).parent}, jax {jax.__version__}, {platform.machine()} "
          f"{platform.processor() or platform.system()}, {os.cpu_count()} cores (affinity "
          f"{len(os.sched_getaffinity(0))}), {args.dtype}, batch {args.batch}, {len(model.geoms)} geoms, "
          f"{model.n_pairs} pairs")
    rng = np.random.default_rng(0)
    compiled = None
    print(f"{'batch':8s} {'compile s':>10s} {'kernels':>8s} {'evals/s':>10s} {'ms/call':>8s} {'slots < 0':>10s}")
    for name, spread in (("home", 0.02), ("folded", 1.2)):
        q = tuple(jnp.broadcast_to(x, (args.batch,) + x.shape) for x in state.q)
        joints = q[-1] + jnp.asarray(rng.uniform(-spread, spread, q[-1].shape), dtype)
        q = q[:-1] + (joints,)
        if compiled is None:
            t0 = time.perf_counter()
            compiled = run.lower(q).compile()
            compile_s = time.perf_counter() - t0
            kernels = kernel_count(compiled)
        slots = jax.block_until_ready(compiled(q))
        best = np.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(q))
            best = min(best, time.perf_counter() - t0)
        self_pairs = np.asarray(slots.valid) & (np.asarray(slots.gap) < 0)
        print(f"{name:8s} {compile_s:10.1f} {kernels:8d} {args.batch / best:10.0f} {1e3 * best:8.2f} "
              f"{int(self_pairs.sum()):10d}")


if __name__ == "__main__":
    main()
