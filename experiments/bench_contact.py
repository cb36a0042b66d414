"""Issue 34's speed bar for contact: a batched ``jit(vmap(contact_rollout))`` against MuJoCo × cores, same MJCF,
same dt, one run on this machine.

Scenes (both loaded by ``load_mjcf(..., return_mapping=True, return_forces=True)`` for us and by ``mujoco``):

* quadruped standing: tests/data/quadruped_contact.xml (free trunk, four sprung legs, 4 sphere feet: 4 contact
  slots, 12 rows; nv = 14), dt = 0.5 ms, started from MuJoCo's state after settling 1 s from the file's drop;
* four-loop biped: tests/data/biped_fourbar.xml given a floor plane and its box feet made colliding with the floor
  only (contype/conaffinity: feet 2/1, floor 1/2; 8 corner slots per foot: 16 slots, 48 rows, plus 12 loop rows;
  nv = 28), dropped 3 cm, dt = 1 ms, MuJoCo's default contact
  parameters; timed from 0.1 s (after touch-down) in both engines.

Ours: float32, batch B (default 4096), small random velocities per scenario (1e-3), a ``jit(vmap)`` of a
short ``contact_rollout`` (``--steps``, ``--biped-steps``) returning the last state; compile = lower + compile; kernels = static count of
the compiled rollout's kernels (``bench_gpu.count_kernels``: a while body counted once). MuJoCo: ``mj_step`` on one
thread from the same state (its file's solver settings), × ``os.cpu_count()``. Where the time goes: the same
rollout with the ADMM cut down (1 stage × 0 iterations: free velocity, rows, J, G = J H⁻¹ Jᵀ and one Cholesky;
then 4 stages × 0 iterations: + 3 Cholesky factorisations; the default 4 × 25: + the 100 ADMM iterations).
Times are the minimum of ``--repeats`` calls after compilation.

    python experiments/bench_contact.py [--batch 4096] [--steps 10] [--biped-steps 2] [--no-breakdown]
        [--out experiments/out/bench_contact.md]
"""
import argparse
import datetime
import os
import platform
import re
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import jax  # noqa: E402
jax.config.update("jax_enable_x64", True)      # MuJoCo-side conversions in float64; the rollout is cast to float32
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import bench_gpu as BG  # noqa: E402
from mrds_jax.loaders.mjcf import load_mjcf  # noqa: E402
from mrds_jax.system import SystemState  # noqa: E402
from mrds_jax.system.ncp import NCPSettings  # noqa: E402
from mrds_jax.system.timestepping import ContactSettings, contact_rollout, row_layout  # noqa: E402

QUADRUPED = ROOT / "tests" / "data" / "quadruped_contact.xml"
BIPED = ROOT / "tests" / "data" / "biped_fourbar.xml"
LINES = []


def out(s=""):
    print(s, flush=True)
    LINES.append(s)


def biped_contact_xml(drop=0.03):
    """biped_fourbar.xml with a floor plane, its two box feet colliding with it (mu = 1), dt = 1 ms,
    and the pelvis lowered so that the feet's lowest corners start ``drop`` above the floor."""
    text = BIPED.read_text()
    text = text.replace('<option gravity="0 0 -9.81"/>', '<option gravity="0 0 -9.81" timestep="0.001"/>')
    text = text.replace('<worldbody>', '<worldbody>\n    <geom name="floor" type="plane" size="0 0 1" contype="1" '
                        'conaffinity="2" friction="1 0.005 0.0001"/>', 1)
    text = text.replace('<geom type="box" pos="0.05 0 -0.03" size="0.1 0.05 0.02"/>',
                        '<geom type="box" pos="0.05 0 -0.03" size="0.1 0.05 0.02" contype="2" conaffinity="1" '
                        'friction="1 0.005 0.0001"/>')
    m = mujoco.MjModel.from_xml_string(text)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    boxes = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX and m.geom_contype[g]]
    low = min(float(np.min(d.geom_xpos[g][2] - np.abs(d.geom_xmat[g].reshape(3, 3)) @ m.geom_size[g])) for g in boxes)
    z0 = 1.0 - low + drop
    return text.replace('<body name="pelvis" pos="0 0 1.0">', f'<body name="pelvis" pos="0 0 {z0:.6f}">')


def scene(name):
    """(xml text, MuJoCo (model, data) at the timed start, dt)."""
    if name == "quadruped":
        xml, t_start = QUADRUPED.read_text(), 1.0
    else:
        xml, t_start = biped_contact_xml(), 0.1
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    while d.time < t_start - 1e-12:
        mujoco.mj_step(m, d)
    return xml, m, d


def mujoco_steps_per_s(m, d, n, repeats):
    q0, v0, t0_ = d.qpos.copy(), d.qvel.copy(), d.time
    best, ncon = float("inf"), []
    for _ in range(repeats):
        d.qpos[:], d.qvel[:], d.time = q0, v0, t0_
        mujoco.mj_forward(m, d)
        t0 = time.perf_counter()
        for _ in range(n):
            mujoco.mj_step(m, d)
        best = min(best, time.perf_counter() - t0)
        ncon.append(d.ncon)
    d.qpos[:], d.qvel[:], d.time = q0, v0, t0_
    return n / best, ncon[-1]


def cast32(x):
    return jax.tree.map(lambda y: jnp.asarray(y, jnp.float32)
                        if hasattr(y, "dtype") and jnp.issubdtype(jnp.asarray(y).dtype, jnp.floating) else y, x)


def ours(xml, m, d, batch, steps, ncp, repeats):
    """(steps/s, compile s, kernels, finite, layout) of the batched float32 rollout from MuJoCo's state."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = load_mjcf(xml, return_mapping=True, return_forces=True)
    s0 = mapping.state(np.array(d.qpos), np.array(d.qvel))
    system, forces = cast32(system), cast32(forces)
    rng = np.random.default_rng(0)
    qb = tuple(jnp.broadcast_to(jnp.asarray(q, jnp.float32), (batch,) + q.shape) for q in s0.q)
    vb = tuple(jnp.asarray(np.asarray(v) + 1e-3 * rng.standard_normal((batch,) + v.shape), jnp.float32) for v in s0.v)
    dt = float(m.opt.timestep)
    settings = ContactSettings(ncp=ncp)

    def roll(q, v):
        tr = contact_rollout(system, q, v, dt, steps, steps, forces=forces, settings=settings)
        return tuple(x[-1] for x in tr.q), tuple(x[-1] for x in tr.v)

    f = jax.jit(jax.vmap(roll))
    t0 = time.perf_counter()
    c = f.lower(qb, vb).compile()
    compile_s = time.perf_counter() - t0
    kernels = BG.count_kernels(c.as_text())
    res = c(qb, vb)
    jax.block_until_ready(res)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = c(qb, vb)
        jax.block_until_ready(res)
        best = min(best, time.perf_counter() - t0)
    finite = all(bool(np.isfinite(np.asarray(x)).all()) for x in jax.tree.leaves(res))
    return batch * steps / best, compile_s, kernels, finite, row_layout(system), sum(mm.nv for mm in system.modules)


def load_line():
    try:
        return "load average " + " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "load average unknown"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--biped-steps", type=int, default=2, help="the biped's rollout length (its step is ~50x slower)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scenes", default="quadruped,biped")
    ap.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "out" / "bench_contact.md"))
    a = ap.parse_args(argv)
    cores = os.cpu_count()
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out(f"# Contact step: mrds_jax batched vs MuJoCo × cores ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)")
    out()
    out(f"{platform.node()}: {cpu}, {cores} cores; jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else ''}"
        f" mujoco {mujoco.__version__}; {load_line()} at start.")
    out(f"Ours: float32, batch {a.batch}, jit(vmap(contact_rollout)) of {a.steps} steps (biped {a.biped_steps}), best of {a.repeats} after "
        f"compilation. MuJoCo: mj_step, float64, one thread, best of {a.repeats} × 2000 steps, × {cores} cores.")
    out()
    out("| scene | nv | rows (loops, limits, contacts×3) | engine | ADMM stages × iterations | steps/s | "
        "/ (MuJoCo 1 thread × cores) | compile s | kernels (while bodies once) | finite |")
    out("|---|---|---|---|---|---|---|---|---|---|")
    variants = [("4 × 25 (default)", NCPSettings())]
    if a.breakdown:
        variants += [("4 × 0", NCPSettings(stages=4, iterations=0)), ("1 × 0", NCPSettings(stages=1, iterations=0))]
    for name in a.scenes.split(","):
        xml, m, d = scene(name)
        mj, ncon = mujoco_steps_per_s(m, d, 2000, a.repeats)
        out(f"| {name} | {m.nv} | - | MuJoCo ({ncon} contacts, {['pyramidal', 'elliptic'][m.opt.cone]}, "
            f"noslip {m.opt.noslip_iterations}) | - | {mj:.3g} | {1 / cores:.2f} | - | - | - |")
        for label, ncp in variants:
            steps = a.biped_steps if name == "biped" else a.steps
            sps, cs, k, fin, layout, nv = ours(xml, m, d, a.batch, steps, ncp, a.repeats)
            rows = f"{layout.size} ({layout.n_bilateral}, {layout.n_unilateral}, {3 * layout.n_contacts})"
            out(f"| {name} | {nv} | {rows} | mrds_jax float32 | {label} | {sps:.3g} | {sps / (mj * cores):.3f} | "
                f"{cs:.1f} | {k['total']} ({k['while_loops']} while) | {fin} |")
    out()
    out(f"{load_line()} at the end (2 cores shared with other work: timings are noisy, minima of {a.repeats}).")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()
