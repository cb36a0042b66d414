"""Design through contact: the CKCM end-effector's RCC (stiffnesses, compliance centre) and θA, θB chosen by gradient
through the peg-in-hole contact rollouts, against CMA-ES at equal wall time, compilation included (issue 42 item 5;
``mrds_jax.ckcm.assembly.design``).

    python experiments/ckcm_assembly_design.py [--quick] --out FILE.md

``design_section(quick)`` returns the Markdown section (``experiments/ckcm_assembly.py`` can append it to its study).
The objective (``assembly_design`` module docstring): over a batch of B initial misalignments (lateral error
uniform in ±2 mm, angular in ±1°, 3 mm above the mouth: clear of the chamfer; the scene's chamfered slot, μ = 0.3),
minus the mean depth reached by the window's end T (saturating at the window's target depth), plus smooth peaks of
the total contact force and of the actuator forces. Three seeds: seed 0 starts from the scene's design (its RCC: k_θ = 200 N m/rad,
k_lat = 2e4 N/m, k_ax = 1e3 N/m, the compliance centre at the tip; the paper's θA = 30°, θB = 94°), seed s from that
design moved by uniform ±10 % of the box per variable; both methods start each seed from the same design.

Equal wall time, compilation included: each method has one clock, started before its program is traced, and the
same budget; its three seeds advance together (``timed_gradient_runs``: one call of the vmapped value-and-gradient
program per Adam step for the three; ``timed_cma_es_runs``: the three populations in one call per generation), so
every seed gets the method's whole budget and each program is compiled once, inside its own clock. The gradient is
forward mode through the rollouts (six directional derivatives, vmapped: ``RunSettings.derivative``); reverse mode
gives the same numbers (tests/test_assembly_design.py) but its program costs several times as much to trace and
compile: it splits the scan over steps into a forward scan that stores every step's residuals (the contact solve's
modes and its Jacobian system among them) and a transposed one; the previous session's first call of it took
1024 s on the loaded CPU, 4 times its 240 s budget, so the comparison then only showed compilation.

Each program is compiled first by a one-step run (one generation) whose first call, compilation and one
evaluation, is charged to that method's clock; the budget, the same for both, is the larger first call + ``work_s``,
at least ``budget_s`` (``config``), so that both methods get time after compiling however loaded the machine is.
Quick mode: B = 4 misalignments, 70 steps of 2 ms (0.14 s: the peg starts 3 mm above the mouth and reaches
the target depth 1.5 mm in it with half the misalignments at the scene's design), at least 180 s per method,
work_s = 90 s.

Measured (2026-11-27 20:25-20:34 UTC, inside ``experiments/ckcm_assembly.py --quick``, the shared 2-core CPU at
load 4-5, no XLA_FLAGS; experiments/out/ckcm_assembly_quick.md): first calls (tracing, compilation, one evaluation)
184 s for the gradient's program (forward mode) and 132 s for CMA-ES's, so each method had 274 s; Adam took 95
steps, CMA-ES 73 generations (584 evaluations per seed). From J = −0.199 / −0.365 / −0.406 (seeds 0/1/2) both
reached every misalignment inserted at T in every seed: Adam −0.9043 / −0.7689 / −0.9041, CMA-ES −0.8976 / −0.9001
/ −0.9085 (the gradient lower in 1 of 3 seeds; Adam's seed 1 stopped at a softer axial spring, k_ax 551 N/m, with a
peak contact force of 175 N against about 50 N). The designs found share the compliance centre near the box's far
end (0.30-0.40 m behind the tip), k_lat ≈ 2.0e3-2.3e3 N/m and k_θ 20-53 N m/rad, and differ in θA, θB. In the
0.14 s window the peg only enters the chamfer, so the objective does not see jamming; a window long enough to reach
two-point contact is the full mode's job. The comparison: 550 s wall, 447 s CPU. At the designs found: penetration
0 (the peg starts clear of the hole: ``misalignment_batch``; the earlier runs from 1 mm above the mouth reported
8.2e-4 m, the end sphere's overlap with the chamfer at t = 0), loop closure ≤ 7.3e-8 m, every contact solve
converged.
"""
import argparse
import os
import time
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from mrds_jax.ckcm.assembly import design as AD, optimizers as AO  # noqa: E402
from mrds_jax.validation import require  # noqa: E402

SEEDS = (0, 1, 2)


def config(quick):
    """Sizes of the comparison: the batch B, the rollout window and the per-run budget."""
    if quick:
        return dict(batch=4, objective=AD.ObjectiveSettings(dt=2e-3, n_steps=70, decimation=5, target_depth=1.5e-3),
                    budget_s=180.0, work_s=90.0, population=8)
    return dict(batch=16, objective=AD.ObjectiveSettings(dt=2e-3, n_steps=100, decimation=10, target_depth=3e-3),
                budget_s=900.0, work_s=600.0, population=8)


def seed_start(problem, seed, box=AD.BOX):
    """Seed 0: the scene's design; seed s: moved by uniform ±10 % of the box per variable (kept inside)."""
    x = np.asarray(AD.design_of(problem.base, problem.params), float)
    if seed == 0:
        return x
    lo, hi = np.asarray(box.lower), np.asarray(box.upper)
    rng = np.random.default_rng(1000 + seed)
    return np.clip(x + 0.1 * (hi - lo) * rng.uniform(-1, 1, x.size), lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo))


def compare(quick):
    """Adam and CMA-ES, each from the three seeds' start designs together (``timed_gradient_runs``,
    ``timed_cma_es_runs``: one program call per step or generation for all three), on the same budget (module
    docstring). Each method's program is compiled first by a run of one step (one generation) whose first call,
    compilation plus one evaluation, is charged to its clock (``RunSettings.charge_s``); the budget, the same for
    both, is the larger first call plus the configuration's ``work_s`` (so that both get at least that long after
    compiling, however loaded the machine) and at least its ``budget_s``. Returns (cfg with the budget used, the runs
    as (seed, RunResult, CPU s of the method's run, its warm-up included))."""
    cfg = dict(config(quick))
    problem = AD.design_problem(AD.misalignment_batch(cfg["batch"], seed=0))
    x0s = np.stack([seed_start(problem, seed) for seed in SEEDS])
    methods = (AO.timed_gradient_runs, AO.timed_cma_es_runs)
    settings = AO.RunSettings(budget_s=0.0, seed=SEEDS[0], population=cfg["population"])
    first, cpu = [], []
    for fn in methods:                           # compile: one step / one generation, measured
        c0 = time.process_time()
        first.append(fn(problem, x0s, cfg["objective"], settings)[0].first_s)
        cpu.append(time.process_time() - c0)
        print(f"{fn.__name__}: first call (compilation and one evaluation) {first[-1]:.0f} s", flush=True)
    cfg["budget_s"] = max(cfg["budget_s"], max(first) + cfg["work_s"])
    runs = []
    for fn, charge, c_first in zip(methods, first, cpu):
        c0 = time.process_time()
        results = fn(problem, x0s, cfg["objective"], settings._replace(budget_s=cfg["budget_s"], charge_s=charge))
        c = c_first + time.process_time() - c0
        for seed, r in zip(SEEDS, results):
            runs.append((seed, r, c))
            print(f"seed {seed} {r.method}: J {float(r.metrics.objective):.4f} (start {r.start:.4f}), inserted "
                  f"{float(r.metrics.inserted_fraction):.2f}, {r.evaluations} evaluations, {r.wall_s:.0f} s "
                  f"(first call {r.first_s:.0f} s, CPU {c:.0f} s)", flush=True)
    return cfg, runs


def describe(x):
    x = np.asarray(x, float)
    return (f"k_θ {np.exp(x[0]):.3g} N m/rad, k_lat {np.exp(x[1]):.3g} N/m, k_ax {np.exp(x[2]):.3g} N/m, "
            f"centre {1e3 * x[3]:.0f} mm, θA {np.degrees(x[4]):.1f}°, θB {np.degrees(x[5]):.1f}°")


def design_section(quick: bool) -> str:
    """The Markdown section: the comparison's table (objective, inserted fraction, peaks, evaluations, wall and CPU
    time) and the designs found."""
    t_all, cpu_all = time.perf_counter(), time.process_time()
    cfg, runs = compare(quick)
    s = cfg["objective"]
    lines = [f"## Design through contact: gradient vs CMA-ES ({'quick' if quick else 'full'} mode)", "",
             f"Design vector: ln k_θ, ln k_lat, ln k_ax of the RCC, its centre behind the tip, θA, θB "
             f"(`mrds_jax.ckcm.assembly.design`, box `BOX`). Objective over B = {cfg['batch']} misalignments "
             f"(lateral ±2 mm, angular ±1°, 3 mm above the mouth): −mean depth reached at T = "
             f"{s.n_steps * s.dt:.2f} s (saturating at {1e3 * s.target_depth:g} mm, in units of it) + "
             f"{s.contact_weight:g} × smooth peak contact force / {s.contact_scale:g} N + {s.actuator_weight:g} × "
             f"smooth peak actuator force / {s.actuator_scale:g} N; dt = {1e3 * s.dt:g} ms, hard contact, exact "
             f"closed-chain plant. Each method: {cfg['budget_s']:.0f} s of wall time on its own clock, compilation "
             "included (the clock starts before its program is traced; each program is compiled first by a one-step "
             "run whose first call, compilation and one evaluation, is charged to the method's clock; the budget is "
             f"the larger first call + {cfg['work_s']:.0f} s, at least {config(quick)['budget_s']:.0f} s), its three "
             "seeds advancing together (one "
             "program call per Adam step or CMA-ES generation for all three: every seed gets the method's whole "
             "budget). Inserted: the tip ≥ the target depth at T. Adam: learning rate 0.2 in the box's logit "
             "coordinates, the gradient by forward mode through the rollouts (six directional derivatives); "
             f"CMA-ES: population {cfg['population']}, σ₀ = 0.2 of the box. Evaluations count J's per seed, each "
             f"B = {cfg['batch']} insertions.", "",
             "| seed | method | J at start | best J | inserted fraction | mean depth at T (mm) | peak contact (N) | "
             "peak actuator (N) | evaluations | first call (s) | wall (s) | CPU (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for seed, r, cpu in sorted(runs, key=lambda x: x[0]):
        m = r.metrics
        lines.append(f"| {seed} | {r.method} | {'–' if np.isnan(r.start) else f'{r.start:.4f}'} | "
                     f"{float(m.objective):.4f} | {float(m.inserted_fraction):.2f} | {1e3 * float(m.mean_depth):.2f} | "
                     f"{float(m.peak_contact):.1f} | {float(m.peak_actuator):.1f} | {r.evaluations} | "
                     f"{r.first_s:.0f} | {r.wall_s:.0f} | {cpu:.0f} |")
    better = [float(g.metrics.objective) < float(c.metrics.objective)
              for (_, g, _), (_, c, _) in zip(runs[:len(SEEDS)], runs[len(SEEDS):])]
    lines += ["", f"Lower best J by the gradient in {sum(better)} of {len(SEEDS)} seeds. Designs found (best J per "
              "run):", ""]
    lines += [f"- seed {seed}, {r.method}: {describe(r.x)}" for seed, r, _ in runs]
    worst = [(float(r.metrics.closure), float(r.metrics.penetration), bool(r.metrics.converged)) for _, r, _ in runs]
    lines += ["", f"At the designs found: loop closure ≤ {max(w[0] for w in worst):.1e} m, penetration ≤ "
              f"{max(w[1] for w in worst):.1e} m, contact solve converged at every stored step in "
              f"{sum(w[2] for w in worst)} of {len(worst)} runs. Whole comparison: "
              f"{time.perf_counter() - t_all:.0f} s of wall time, {time.process_time() - cpu_all:.0f} s of CPU time "
              f"({jax.devices()[0].device_kind}, load average {os.getloadavg()[0]:.1f} at the end)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="B = 4, 0.14 s windows, 180 s per run (default: B = 16, "
                    "0.2 s, 900 s)")
    ap.add_argument("--out", required=True, help="the section (Markdown)")
    args = ap.parse_args(argv)
    require("cmaes", "ckcm_assembly_design.py (its CMA-ES baseline)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = design_section(args.quick)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
