"""Monte Carlo of peg-in-hole insertions with the CKCM end-effector under RCC force control (mrds_jax.ckcm.assembly).

    python experiments/ckcm_assembly.py [--quick] --out FILE.md [--n N] [--duration S] [--dt S] [--chunk N]
                                        [--checkpoint DIR] [--no-design]

Each scenario draws the initial lateral error (the tip's offset from the hole's axis), the angular error (the peg's
tilt), Coulomb's μ, the clearance and the compliance centre's distance behind the tip, and runs one insertion of the
exact multibody plant with hard frictional contact (``insertion``); its outcome (inserted / jammed / wedged /
blocked / moving, ``outcome_of``: from the motion and the contact state), insertion time, peak contact force and peak
actuator force go in the table. Scenario i always gets the same draws (``mrds_jax.montecarlo.run_monte_carlo``:
key fold_in(seed, i)), chunks are checkpointed (``--checkpoint``) and a rerun resumes. Plots beside FILE.md: the
success map over lateral × angular error, split by the compliance centre (at the tip vs far behind it: Whitney's
RCC guideline), and the force traces of a few insertions.

Quick mode: 1024 insertions of 0.6 s (``--duration``) at dt = 3 ms (``--dt``), 16 per compiled batch on a CPU
(``--chunk``), the tip starting 11 mm above the mouth (clear of the chamfer whatever the lateral error), inserted at
25 mm; full mode: 10⁴ (more with --n on a GPU). The contact solve is the scene's (``assembly.CONTACT``) at a
tolerance of 1e-4 of the step's velocity scale (``CONTACT`` here). The force traces are three of the Monte Carlo's
own insertions (kept trajectories, stored every 30 ms: no second program to compile). The design comparison
(gradient through the contact rollouts vs CMA-ES, three seeds, equal wall time with compilation) is
``design_section(quick)`` of ``experiments/ckcm_assembly_design.py``.

Why the quick mode took 34 min and what changed (profiled 2026-11-27 with ``jax.jit(...).lower(...).compile()`` on
batches of 8 and 16 insertions, the shared 2-core CPU at load 3-7; ``cost_analysis`` is no guide here: it counts a
while loop's body once, 3e6 flops for a batch of 8 insertions of 200 steps):

* The tests' XLA_FLAGS (backend optimisation level 0, no fusion emitters: tests/conftest.py) make the rollouts 4-10
  times slower: 8 insertions of 200 steps of 2 ms ran in 8.4 s with them and 2.1 s without (solver capped at one
  iteration: 2.0 s and 0.2 s); they halve the compilation (20-25 s against 43-56 s; the tracing, ``lower``, 20 s in
  both). The study runs without them, and its report says when they are set.
* Per step, everything but the contact solve's ADMM iterations (dynamics, loops, collision, controller) costs 0.15 ms
  per insertion; the iterations are 90 % of the run. A vmapped batch runs each step's ``while_loop`` until its
  slowest insertion has converged: 8 insertions needed 4748 iterations each on average over 200 steps, and the batch
  ran 19774 (4.2 times the work); the jams (Whitney's two-point contact, a contact on its cone's boundary, where
  the warm start's polish cannot solve it: it handles sticking contacts) take 500-3000 a step. Hence batches of
  16 instead of 128: the first 128 insertions of the quick mode took 96 s of CPU time in batches of 8 and 130 s in
  batches of 32 (compilation included, about 55 s; load 5-8), the 1024 in batches of 16 0.29 s of CPU each.
* Tolerance 1e-4 instead of 1e-5 of max|g| (≤ 5e-6 m/s of velocity error, 400 times below the 2 mm/s that
  ``outcome_of`` calls stuck) halves the iterations (21.9 against 42.7 per insertion and step on 16 draws) with the
  same outcome, final depth (to 0.1 mm) and insertion time for each of the 16.
* dt = 3 ms instead of 2 ms: the same outcome for each of the 16 draws, insertion times equal on the stored grid,
  final depths equal for the stuck runs; loop closure ≤ 6.5e-7 m (dt = 4 ms: the same outcomes, but closure
  1.2e-6 m, above the 1e-6 m the issue allows).
* 0.6 s instead of 0.4 s: at 0.4 s, 608 of the 1024 runs were still descending (``moving``) and the table could not
  show Whitney's guideline; the RCC test (tests/test_assembly_rcc.py) uses 0.6 s too. 200 steps of 3 ms cost what
  200 of 2 ms did.
* One program: the traces used to be a second vmapped program (decimation 1) compiled after the Monte Carlo.
* Polishing sliding contacts does not pay here (tried 2026-11-27, branch asmfast, commit da54c8d, reverted):
  ``ncp.polish_modes`` extended to contacts on the cone's boundary (the friction direction fixed from the guess's
  slip, the mode system G_cc + U Vᵀ solved by Woodbury on G_cc's factor, three direction sweeps, accepted by the
  residuals and the natural map). On scenarios 0-15 of this study (5 jams; the shared CPU at load 6-7) the mean
  ADMM iterations per step fell from 23.6 to 18.6 (ordinary sliding insertions from 6-14 to under 1), but the
  worst step of each jam hardly moved (1422 → 1332, 429 → 693, 376 → 414) and a vmapped batch waits for its
  slowest insertion: 4.1 s of CPU per batch of 16 with main's polish, 4.4 s with the extension, and the program's
  first call (compilation) 61 s → 90 s of CPU. Why, at the worst step of scenario 9 (step 137, 1332 iterations;
  the step's problem rebuilt as contact_step builds it): three slots of the peg active, two touching and both on the
  cone's boundary slipping at 4e-5 m/s (impending slip), the scaled
  Delassus block of rank 6 (one rigid peg) with eigenvalues from 9.8e-4 to 3.0 in its range (condition 3e3: the
  two-point contact's rocking and squeeze), and the normal impulse falling from 22.9 to 0.42 since the previous
  step (the warm start is far). ADMM's iterates stay far from the final modes for hundreds of iterations
  (residual 0.17 after 100, 0.03 after 200, against a tolerance of 3.7e-6), so no polish of them can be a
  solution; and even from the converged solution the slip so slow that its direction is not accurate enough:
  the polished λ misses the natural map by 1.0e-5 against the tolerance 3.7e-6 (further direction sweeps
  diverge: 1.1e-3, 0.1). The cost of the jams is ADMM's conditioning there, not the polish.

Measured (2026-11-27 20:17-20:34 UTC, the shared 2-core CPU at load 3-5 from other sessions, no XLA_FLAGS;
experiments/out/ckcm_assembly_quick.md): ``/usr/bin/time -v python experiments/ckcm_assembly.py --quick --out
FILE`` took 1012 s of wall time (16.9 min) and 794 s of CPU time (user 783 s + system 11 s; the process got 78 % of
one core): the Monte Carlo 459 s wall / 344 s CPU (its first batch, with the compilation, 72 s; then 6-8 s wall and
about 4.5 s of CPU per 16 insertions), the design comparison 550 s wall / 447 s CPU (the gradient's first call 184
s, CMA-ES's 132 s, each method's budget 274 s). Not the few minutes the issue asks for: on an idle machine the CPU
time, about 13 min, is what to expect: three programs traced and compiled (the Monte Carlo's, about 60 s of CPU
with its first batch; the gradient's and CMA-ES's population's first calls, 184 s and 132 s of wall time), about
285 s of CPU for the 1024 insertions, and the design comparison's wall time is its budget (twice the slower first
call + 90 s). All 1024 converged at every stored step, no buffer overflow,
loop closure ≤ 6.9e-7 m, penetration ≤ 2.2e-7 m. Outcomes (the same as the run of 16:37, the contact solve
unchanged): inserted 483, jammed 323, wedged 57, blocked 24, moving 137; jammed or wedged 33 of 274 (12 %) with
the compliance centre < 0.1 m behind the tip against 196 of 380 (52 %) > 0.25 m behind it (Whitney's guideline);
97 of the 274 near the tip were still descending at 0.6 s (the soft axial spring, 1e3 N/m against about 60 kg,
lags the reference by about 0.25 s: starting the payload at the reference's speed, ``states.state_from_pose``'s
``pose_rate``, would remove that lag and let a shorter run decide them; not done). Full mode, projected from
these figures: 625 batches of 16 at about 4.5 s of CPU each, 47 min of CPU for the Monte Carlo (about 1 h of wall
time at this load), plus the full design comparison's budgets (at least 2 × 900 s): about 1.5 h on this CPU.
"""
import argparse
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from mrds_jax import ckcm  # noqa: E402
from mrds_jax.ckcm import assembly as A  # noqa: E402
from mrds_jax.ckcm.assembly.peg_hole import PegHole  # noqa: E402
from mrds_jax.montecarlo import Uniform, run_monte_carlo  # noqa: E402
from mrds_jax.validation import require  # noqa: E402

RANGES = dict(lateral=(-6e-3, 6e-3), angular=(np.radians(-3.0), np.radians(3.0)), friction=(0.1, 0.6),
              clearance=(1e-4, 5e-4), centre=(0.0, 0.4))
NEAR_TIP, FAR = 0.1, 0.25        # m: compliance centres counted as "at the tip" and "far behind it"
STANDOFF = 0.011                 # m: the tip above the mouth at t = 0, more than the peg's radius (10 mm): the end
                                 # sphere starts clear of the mouth and the chamfer whatever the lateral error
TARGET = 0.025                   # m: the tip's depth below the mouth that counts as inserted (hole 50 mm deep)
DT, DURATION, DECIMATION = 3e-3, 0.6, 10   # s, s, steps per stored state: see the docstring
CONTACT = A.CONTACT._replace(ncp=A.CONTACT.ncp._replace(tolerance=1e-4))   # the scene's solver, 1e-4 of max|g|
                                 # (≤ 5e-6 m/s of velocity error, 400 times below the 2 mm/s of a stall)


def spec():
    return {k: Uniform(*v) for k, v in RANGES.items()}


def make_task(dt, n_steps, decimation, params):
    base = A.default_task()

    def task(s):
        t = base._replace(
            peg_hole=base.peg_hole._replace(friction=s["friction"], clearance=s["clearance"]),
            compliance=base.compliance._replace(centre=s["centre"], insertion_speed=jnp.asarray(0.1),
                                                insertion_force=jnp.asarray(30.0)),
            misalignment=A.Misalignment(s["lateral"], s["angular"], jnp.asarray(STANDOFF)),
            target_depth=jnp.asarray(TARGET))
        run = A.insertion(params, t, dt, n_steps, decimation, settings=CONTACT)
        o = A.outcome_of(run, t)
        traj = run.trajectory
        return dict(outcome=o.code.astype(jnp.float64), time=o.time, peak_contact=o.peak_contact,
                    peak_actuator=o.peak_actuator, depth=o.depth, closure=o.closure, penetration=o.penetration,
                    converged=o.converged.astype(jnp.float64),
                    unconverged=jnp.sum(~traj.converged).astype(jnp.float64),
                    overflow=jnp.any(traj.overflow).astype(jnp.float64),
                    iterations_max=jnp.max(traj.iterations_max).astype(jnp.float64),
                    iterations_mean=jnp.mean(traj.iterations_mean[1:]),
                    lateral=s["lateral"], angular=s["angular"],
                    friction=s["friction"], clearance=s["clearance"], centre=s["centre"],
                    # the force traces' plot (kept trajectories: no second program to compile)
                    trace_depth=run.depth, trace_contact=jnp.linalg.norm(run.contact_force, axis=-1),
                    trace_actuator=jnp.max(jnp.abs(run.forces), axis=-1))
    return task


def trace_cases(m):
    """Three insertions of the Monte Carlo for the force traces' plot (their indices and labels): the first one
    inserted with the compliance centre near the tip, the first one jammed and the first one wedged far behind it
    (or the first still moving there)."""
    near, far = m["centre"] < NEAR_TIP, m["centre"] > FAR
    picks = []
    for name, sel in (("inserted", near), ("jammed", far), ("wedged", far), ("moving", far)):
        k = np.flatnonzero(sel & (m["outcome"] == A.OUTCOMES.index(name)))
        if k.size and len(picks) < 3:
            i = int(k[0])
            picks.append((i, f"{name}: {1e3 * m['lateral'][i]:.1f} mm, {np.degrees(m['angular'][i]):.1f} deg, "
                             f"centre {1e3 * m['centre'][i]:.0f} mm behind the tip, mu {m['friction'][i]:.2f}"))
    return picks


def traces_as_insertions(trajectories, t, picks):
    """The picked insertions' kept traces as an ``assembly.Insertion`` batch for ``assembly.plot_insertion``
    (the force norms as one-component vectors; the fields the plot does not read left empty)."""
    idx = [i for i, _ in picks]
    return A.Insertion(np.broadcast_to(t, (len(idx), t.size)), trajectories["trace_depth"][idx], *([None] * 2),
                       trajectories["trace_contact"][idx][..., None], None,
                       trajectories["trace_actuator"][idx][..., None], *([None] * 4))


def plot_success_map(m, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    colours = {0: "tab:green", 1: "tab:red", 2: "tab:purple", 3: "tab:orange", 4: "tab:gray"}
    for ax, (label, sel) in zip(axes, ((f"compliance centre < {NEAR_TIP:g} m behind the tip", m["centre"] < NEAR_TIP),
                                       (f"compliance centre > {FAR:g} m behind the tip", m["centre"] > FAR))):
        for code, name in enumerate(A.OUTCOMES):
            k = sel & (m["outcome"] == code)
            ax.scatter(1e3 * m["lateral"][k], np.degrees(m["angular"][k]), s=8, c=colours[code],
                       label=f"{name} ({int(k.sum())})")
        ax.set_title(label)
        ax.set_xlabel("initial lateral error of the tip (mm)")
        ax.legend(fontsize=7, loc="upper right")
    axes[0].set_ylabel("initial angular error (deg)")
    fig.suptitle("CKCM peg-in-hole: outcome over lateral × angular error (chamfer 3 mm)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def design_section(quick):
    """The design comparison (gradient through the contact rollouts vs CMA-ES at equal wall time) as report lines,
    from ``experiments/ckcm_assembly_design.py``'s ``design_section(quick)`` (written separately); skipped with a
    line saying so while that module is missing."""
    try:
        from ckcm_assembly_design import design_section as section
    except ImportError as e:
        if getattr(e, "name", None) != "ckcm_assembly_design":
            raise
        return ["", "Design comparison: not run (experiments/ckcm_assembly_design.py is missing)."]
    return ["", section(quick).rstrip("\n")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1024 insertions (the default: 1e4)")
    ap.add_argument("--out", required=True, help="the report (Markdown); plots go beside it")
    ap.add_argument("--n", type=int, default=None, help="how many insertions (overrides the mode's)")
    ap.add_argument("--chunk", type=int, default=None, help="insertions per compiled batch (16 on a CPU: a vmapped "
                    "batch runs each step's contact solve until its slowest insertion has converged, see the "
                    "docstring; 1024 on an accelerator, whose lanes run in parallel)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=DURATION, help=f"seconds of each insertion ({DURATION:g}: "
                    "the slow jams stall within it, see the docstring)")
    ap.add_argument("--dt", type=float, default=DT, help=f"time step (s; {DT:g}, see the docstring)")
    ap.add_argument("--checkpoint", default=None, help="folder of the resumable chunks (default: beside --out)")
    ap.add_argument("--no-design", action="store_true", help="leave out the design comparison (the Monte Carlo only)")
    args = ap.parse_args(argv)
    if not args.no_design:          # before the Monte Carlo's minutes, not after them
        require("cmaes", "ckcm_assembly.py's design comparison (CMA-ES; --no-design leaves it out)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = args.n or (1024 if args.quick else 10_000)
    args.chunk = args.chunk or (16 if jax.default_backend() == "cpu" else 1024)
    dt, duration, decimation = args.dt, args.duration, DECIMATION
    n_steps = int(round(duration / dt))
    params = ckcm.nominal()
    checkpoint = args.checkpoint or str(out.with_suffix("")) + "_chunks"
    slow_flags = "--xla_backend_optimization_level=0" in os.environ.get("XLA_FLAGS", "")
    t_start, cpu_start = time.perf_counter(), time.process_time()
    result = run_monte_carlo(make_task(dt, n_steps, decimation, params), spec(), n, seed=args.seed,
                             chunk_size=args.chunk, checkpoint_dir=checkpoint, keep_trajectories=True,
                             tag=f"ckcm_assembly v3 duration={duration} dt={dt}")
    wall, cpu = time.perf_counter() - t_start, time.process_time() - cpu_start
    ok = ~result.failed
    m = {k: np.asarray(v)[ok] for k, v in result.metrics.items()}
    kept = {k: np.asarray(v)[ok] for k, v in result.trajectories.items()}
    plot_success_map(m, out.with_name(out.stem + "_success_map.png"))
    picks = trace_cases(m)
    t_out = dt * decimation * np.arange(n_steps // decimation + 1)
    A.plot_insertion(traces_as_insertions(kept, t_out, picks), [p[1] for p in picks],
                     out.with_name(out.stem + "_traces.png"))
    lines = [f"# CKCM peg-in-hole Monte Carlo ({'quick' if args.quick else 'full'} mode)", "",
             f"`python experiments/ckcm_assembly.py {'--quick ' if args.quick else ''}"
             f"{'--no-design ' if args.no_design else ''}--out {args.out}`: {n} "
             f"insertions of {duration} s at dt = {dt * 1e3:g} ms (hard contact, exact closed-chain plant at the "
             f"paper's design), seed {args.seed}, {args.chunk} insertions per compiled batch; wall time {wall:.0f} s "
             f"including compilation, {cpu:.0f} s of CPU time (this machine: {jax.devices()[0].device_kind}, "
             f"{jax.device_count()} device(s), {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the "
             f"end); {int(result.failed.sum())} scenario(s) failed (non-finite output)."
             + (" XLA_FLAGS chose backend optimisation level 0 (the tests' setting): the rollouts run several times "
                "slower; run the study without it." if slow_flags else ""), "",
             "Draws (uniform): " + ", ".join(f"{k} in [{lo:.4g}, {hi:.4g}]" for k, (lo, hi) in RANGES.items())
             + " (SI units, radians).", "",
             "| outcome | all | centre < 0.1 m | centre > 0.25 m | mean time (s) | "
             "peak contact force (N, mean / max) | "
             "peak actuator force (N, mean / max) |", "|---|---|---|---|---|---|---|"]
    near, far = m["centre"] < NEAR_TIP, m["centre"] > FAR
    for code, name in enumerate(A.OUTCOMES):
        k = m["outcome"] == code
        if not k.any():
            lines.append(f"| {name} | 0 | 0 | 0 | – | – | – |")
            continue
        tm = m["time"][k & (m["time"] >= 0)]
        lines.append(f"| {name} | {int(k.sum())} | {int((k & near).sum())} of {int(near.sum())} | "
                     f"{int((k & far).sum())} of {int(far.sum())} | {f'{tm.mean():.3f}' if tm.size else '–'} | "
                     f"{m['peak_contact'][k].mean():.1f} / {m['peak_contact'][k].max():.1f} | "
                     f"{m['peak_actuator'][k].mean():.1f} / {m['peak_actuator'][k].max():.1f} |")
    stuck = np.isin(m["outcome"], [A.OUTCOMES.index("jammed"), A.OUTCOMES.index("wedged")])
    frac = lambda k, sel: k[sel].mean() if sel.any() else float("nan")          # noqa: E731
    holds = frac(stuck, near) < frac(stuck, far)
    lines += ["", f"Whitney's RCC guideline: jammed or wedged in {int((stuck & near).sum())} of {int(near.sum())} "
              f"({100 * frac(stuck, near):.0f} %) with the compliance centre < {NEAR_TIP:g} m behind the tip against "
              f"{int((stuck & far).sum())} of {int(far.sum())} ({100 * frac(stuck, far):.0f} %) with it > {FAR:g} m "
              f"behind: fewer jams at the tip — {'holds' if holds else 'does NOT hold'}; still moving at the end: "
              f"{int((m['outcome'] == A.OUTCOMES.index('moving')).sum())} of {m['outcome'].size}."]
    lines += ["", f"Worst over all runs: loop closure {m['closure'].max():.2e} m, penetration "
              f"{m['penetration'].max():.2e} m; contact solve converged at every stored step in "
              f"{int(m['converged'].sum())} of {m['converged'].size} runs ({int(m['unconverged'].sum())} stored "
              f"steps with an unconverged step in all); buffer overflow in {int(m['overflow'].sum())} runs; ADMM "
              f"iterations per step: mean {m['iterations_mean'].mean():.1f}, most {int(m['iterations_max'].max())} "
              f"(runs whose worst step took over 1000: {int((m['iterations_max'] > 1000).sum())}).", "",
              f"Plots: {out.stem}_success_map.png (outcome over lateral × angular error, by compliance centre), "
              f"{out.stem}_traces.png (depth, contact force and actuator force of three insertions)."]
    lines += (["", "Design comparison: left out (--no-design)."] if args.no_design else design_section(args.quick))
    lines += ["", f"Whole study: {time.perf_counter() - t_start:.0f} s of wall time, "
              f"{time.process_time() - cpu_start:.0f} s of CPU time (this process), load average "
              f"{os.getloadavg()[0]:.1f} at the end."]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
