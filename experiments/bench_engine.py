"""The engine issue's CPU bars, measured in one run with the peers beside us.

* Stewart platform (``nominal()``, bench legs, the scenario of ``bench_gpu.stewart_setup``: home pose, payload
  kicked, constant gravity-holding leg forces), a ``jit(vmap)`` of a 20-step rollout at dt = 1 ms and batch B
  (default 4096): scenario-steps/s for float32 semi-implicit Euler on the automatic path (Lilly & Orin), the
  general MRDS path, float64, and RK4; compile time of each; next to MuJoCo's C ``mj_step`` on one thread on
  the same mechanism (``../shared/bench/ckcm_stewart_mjx.xml``, same state and actuator forces) and the bar
  ours ≥ MuJoCo × cores.
* One compiled Euler step of one scenario (float32): XLA kernels (``bench_gpu.count_kernels``) and XLA flops
  beside Lilly & Orin's operation count for m = 6 chains of N = 3 (Tables 2-3, ``bench_gpu.lilly_orin_ops``).
* The opt-in rewritten step (``mrds_jax.spatial.lanewise`` through ``rollout(..., step_transform=...)``) beside
  the same rollout as written, float32 Euler, both paths (issue 23: the form measured and not made the default).
* One scenario: forward dynamics per call (jit, float64) next to Pinocchio's ``constraintDynamics`` per call on
  the same platform (``bench_closed_chain.stewart``).

    python experiments/bench_engine.py [--batch 4096] [--out experiments/out/bench_engine.md]

Timings are the best of 3 after compilation; the machine's load is printed (2-core machines shared with other
work are noisy: rerun on an idle machine before quoting).
"""
import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import bench_closed_chain as BCC  # noqa: E402  (enables x64; every array below has an explicit dtype)
import bench_gpu as BG  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import mrds_jax  # noqa: E402
from mrds_jax import system as S  # noqa: E402
from mrds_jax.integrate import rollout  # noqa: E402
from mrds_jax.spatial.lanewise import lanewise  # noqa: E402

STEPS = 20
LINES = []


def out(s=""):
    print(s, flush=True)
    LINES.append(s)


def best_of(f, *args, repeats=3):
    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def rollout_fn(system, taus, integrator, path):
    """A 20-step rollout through the public ``S.simulate`` (as ``../shared/bench/stewart_speed.py``): the
    system and forces enter its jitted core as arguments. (Closing over them instead, as this script first
    did, bakes every parameter into the program as a constant: about 10x slower on this CPU.)"""
    dt = jnp.asarray(BG.DT, taus[0].dtype)

    def roll(state):
        tr = S.simulate(system, state, dt, STEPS, tau=taus, integration=S.Integration(integrator=integrator, path=path),
                        checks=S.Checks(enabled=False), output=S.Output(decimation=STEPS))
        return tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v)
    return roll


def dual_arm_setup(dtype):
    """Two 6-R arms welded to one free 3 kg box (``mrds_jax.examples.dual_arm_grasp``: a consistent state at
    rest), no joint torques: the grasp sags under gravity. Returns (system, state, None, taus, None) like
    ``bench_gpu.stewart_setup``."""
    from mrds_jax.examples import dual_arm_grasp
    system, state = dual_arm_grasp()
    system, state = jax.tree.map(lambda x: jnp.asarray(x, dtype), (system, state))
    return system, state, None, tuple(jnp.zeros(m.nv, dtype) for m in system.modules), None


SETUPS = {"stewart": BG.stewart_setup, "dual_arm": dual_arm_setup}


def throughput(batch, dtype, integrator, path, mechanism="stewart"):
    system, state, _, taus, _ = SETUPS[mechanism](dtype)
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), state)
    c, compile_s = BG.compile_aot(jax, jax.vmap(rollout_fn(system, taus, integrator, path)), states)
    return batch * STEPS / best_of(c, states), compile_s


def transformed_throughput(batch, dtype, integrator, path, step_transform):
    """``rollout`` of ``system_acceleration`` (no stabilisation) with the integrator step passed through
    ``step_transform`` (None: as written); the system and forces are arguments of the jitted function, as in
    ``simulate``."""
    system, state, _, taus, _ = BG.stewart_setup(dtype)
    dt = jnp.asarray(BG.DT, dtype)

    def roll(system, taus, s):
        acc = S.system_acceleration(system, tau=taus, path=path)
        tr = rollout(system.modules, acc, s.q, s.v, dt, STEPS, STEPS, integrator, step_transform=step_transform)
        return tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v)
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), state)
    c, compile_s = BG.compile_aot(jax, jax.vmap(roll, in_axes=(None, None, 0)), system, taus, states)
    return batch * STEPS / best_of(c, system, taus, states), compile_s


def mujoco_steps_per_s(n=4000, mechanism="stewart"):
    if mechanism == "dual_arm":      # the same system exported (welds as MuJoCo equality welds, soft)
        from mrds_jax.export.mjcf import mujoco_state, to_mjcf
        system, state, _, _, _ = dual_arm_setup(jnp.float64)
        m = mujoco.MjModel.from_xml_string(to_mjcf(system))
        qpos, qvel = (np.concatenate(x) for x in zip(*(mujoco_state(mk, q, v) for mk, q, v in
                                                       zip(system.modules, state.q, state.v))))
        tau0 = np.zeros(m.nu)
    else:
        _, state, _, _, tau0 = BG.stewart_setup(jnp.float64)
        m = mujoco.MjModel.from_xml_path(str(ROOT.parent / "shared" / "bench" / "ckcm_stewart_mjx.xml"))
        qpos, qvel = BG.mujoco_state(state)
    d = mujoco.MjData(m)
    best = float("inf")
    for _ in range(3):
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, np.asarray(tau0, float)[: m.nu]
        t0 = time.perf_counter()
        mujoco.mj_step(m, d, nstep=n)
        best = min(best, time.perf_counter() - t0)
    return n / best


def step_costs():
    system, state, _, taus, _ = BG.stewart_setup(jnp.float32)
    c, _ = BG.compile_aot(jax, lambda s: S.simulate(system, s, jnp.asarray(BG.DT, jnp.float32), 1, tau=taus,
                                                    integration=S.Integration(integrator="euler"),
                                                    checks=S.Checks(enabled=False)).q, state)
    return BG.compiled_costs(c)


def step_traffic(batch=64):
    """Per scenario-step of one compiled float32 Euler step under ``vmap`` (no loop: XLA's cost analysis of a
    while loop does not count its body): XLA's bytes accessed (the memory-traffic proxy of a GPU step), flops
    and kernels, for both mechanisms and both paths."""
    rows = []
    for mechanism, paths in (("stewart", ("auto", "general")), ("dual_arm", ("general",))):
        system, state, _, taus, _ = SETUPS[mechanism](jnp.float32)
        states = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), state)
        for path in paths:
            acc = S.system_acceleration(system, tau=taus, path=path)

            def step(s):
                tr = rollout(system.modules, acc, s.q, s.v, jnp.asarray(BG.DT, jnp.float32), 1, 1, "euler")
                return tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v)
            c, _ = BG.compile_aot(jax, jax.vmap(step), states)
            ca = c.cost_analysis()
            ca = ca[0] if isinstance(ca, (list, tuple)) else ca
            rows.append((mechanism, path, ca["bytes accessed"] / batch, ca["flops"] / batch,
                         BG.count_kernels(c.as_text()).get("total")))
    return rows


def single_scenario():
    """Seconds per call of the jitted forward dynamics of one scenario (as written, and through the opt-in
    ``lanewise`` rewrite, which has no batch to be slow on here), and of Pinocchio's ``constraintDynamics``."""
    system, state, merged, cms, _, _ = BCC.stewart()
    acc = S.system_acceleration(system)
    ours = best_of(jax.jit(lambda s: acc(s.q, s.v, 0.0)), state, repeats=200)
    rewritten = best_of(jax.jit(lanewise(lambda s: acc(s.q, s.v, 0.0))), state, repeats=200)
    t_pin, _ = BCC.pinocchio_time(merged, cms, state, n=2000)
    t_pin = min(t_pin, BCC.pinocchio_time(merged, cms, state, n=2000)[0])
    return ours, rewritten, t_pin


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "out" / "bench_engine.md"))
    a = ap.parse_args(argv)
    cores = os.cpu_count()
    out("# Engine bars on the CPU (experiments/bench_engine.py)")
    out()
    out(f"{platform.processor() or platform.machine()}, {cores} cores, jax {jax.__version__}, "
        f"mujoco {mujoco.__version__}; XLA_FLAGS {os.environ.get('XLA_FLAGS', '')!r} (mrds_jax backend flags: "
        f"{mrds_jax.BACKEND_FLAGS}); load average before: {os.getloadavg()[0]:.2f}; date {time.strftime('%Y-%m-%d')}")
    out()
    throughput(a.batch, jnp.float32, "euler", "auto")   # warm-up, not reported: the first large batch
    mj = mujoco_steps_per_s()                                   # of a process ran up to 2x slower (allocator)
    out(f"## Stewart platform, batch {a.batch}, {STEPS}-step rollout, dt = 1 ms")
    out()
    out("| engine | dtype | integrator | path | steps/s | / (MuJoCo 1 thread × cores) | compile s |")
    out("| --- | --- | --- | --- | --- | --- | --- |")
    out(f"| MuJoCo mj_step (soft loops) | float64 | Euler | - | {mj:.3g} | {1 / cores:.2f} | - |")
    for dtype, integrator, path in [(jnp.float32, "euler", "auto"), (jnp.float32, "euler", "general"),
                                    (jnp.float64, "euler", "auto"), (jnp.float64, "euler", "general"),
                                    (jnp.float32, "rk4_compact", "auto"), (jnp.float32, "rk4_compact", "general")]:
        sps, cs = throughput(a.batch, dtype, integrator, path)
        label = S.dynamics_path(BG.stewart_setup(dtype)[0], path)
        out(f"| mrds_jax (exact loops) | {jnp.dtype(dtype).name} | {integrator} | {path} ({label}) | {sps:.3g} | "
            f"{sps / (mj * cores):.2f} | {cs:.1f} |")
    out()
    mj_dual = mujoco_steps_per_s(mechanism="dual_arm")
    out(f"## Dual-arm grasp, batch {a.batch}, {STEPS}-step rollout, dt = 1 ms")
    out()
    out("Two 6-R arms welded to a free box (`mrds_jax.examples.dual_arm_grasp`, two Type A welds: the general path), "
        "no joint torques.")
    out()
    out("| engine | dtype | integrator | path | steps/s | / (MuJoCo 1 thread × cores) | compile s |")
    out("| --- | --- | --- | --- | --- | --- | --- |")
    out(f"| MuJoCo mj_step (soft welds, exported MJCF) | float64 | Euler | - | {mj_dual:.3g} | {1 / cores:.2f} | - |")
    for dtype, integrator in [(jnp.float32, "euler"), (jnp.float64, "euler"), (jnp.float32, "rk4_compact")]:
        sps, cs = throughput(a.batch, dtype, integrator, "general", "dual_arm")
        out(f"| mrds_jax (exact loops) | {jnp.dtype(dtype).name} | {integrator} | general | {sps:.3g} | "
            f"{sps / (mj_dual * cores):.2f} | {cs:.1f} |")
    out()
    out("Opt-in rewritten step (spatial.lanewise: small reductions and products as sums of slices), float32 "
        "Euler, against the same rollout as written (no stabilisation):")
    out()
    out("| path | step | steps/s | / (MuJoCo 1 thread × cores) | compile s |")
    out("| --- | --- | --- | --- | --- |")
    for path in ("auto", "general"):
        for name, transform in (("as written", None), ("lanewise", lanewise)):
            sps, cs = transformed_throughput(a.batch, jnp.float32, "euler", path, transform)
            out(f"| {path} | {name} | {sps:.3g} | {sps / (mj * cores):.2f} | {cs:.1f} |")
    mj_after = mujoco_steps_per_s()
    out()
    out(f"MuJoCo re-measured after our runs: {mj_after:.3g} steps/s (load average {os.getloadavg()[0]:.2f}).")
    out()
    flops, kernels = step_costs()
    mult, add = BG.lilly_orin_ops(6, 3)
    out("## One compiled Euler step, one scenario, float32")
    out()
    out(f"XLA kernels: {kernels.get('total')} (fusions {kernels.get('fusion')}, custom calls "
        f"{kernels.get('custom_call')}, other {kernels.get('other')}, while loops {kernels.get('while_loops')}); "
        f"XLA flops {flops:.4g}; Lilly & Orin (m = 6, N = 3, n_c = 3): {mult} mult + {add} add = {mult + add} "
        f"(XLA / Lilly-Orin = {flops / (mult + add):.2f}).")
    out()
    out("## Memory traffic of one compiled step (float32 Euler, vmap over 64 scenarios, no loop)")
    out()
    out("| mechanism | path | XLA bytes accessed / scenario-step | XLA flops / scenario-step | kernels |")
    out("| --- | --- | --- | --- | --- |")
    for mechanism, path, by, fl, k in step_traffic():
        out(f"| {mechanism} | {path} | {by:.4g} | {fl:.4g} | {k} |")
    out()
    ours, rewritten, t_pin = single_scenario()
    out("## One scenario, forward dynamics per call (float64)")
    out()
    out(f"mrds_jax (auto path, jit) {ours * 1e6:.1f} µs; the same through spatial.lanewise {rewritten * 1e6:.1f} µs; "
        f"Pinocchio constraintDynamics {t_pin * 1e6:.1f} µs; ratios {ours / t_pin:.2f} / {rewritten / t_pin:.2f}.")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(LINES) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
