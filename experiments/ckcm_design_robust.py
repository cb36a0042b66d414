"""Design at scale (issue 26, items 3-4): the robust full-space problem — 37 per-leg variables (38 with the
payload mass free), the smooth 95th
percentile of the peak actuator force over Monte Carlo draws of manufacturing tolerances — optimised by
gradient (Adam, L-BFGS: ``mrds_jax.ckcm.design.optimize``) and, at equal wall time with compilation included,
by CMA-ES (``cmaes``) and random search; then a tolerance study (the Monte Carlo runner, chunked and
resumable) of the best robust design against today's four-variable optimum, with histograms.

    python experiments/ckcm_design_robust.py --quick     # a smoke test (small sizes; minutes on 2 cores)
    python experiments/ckcm_design_robust.py             # the issue's sizes: 256 draws, 64 samples, 10^4 study
    python experiments/ckcm_design_robust.py --model multibody
    python experiments/ckcm_design_robust.py --free-payload    # 38 variables: the payload mass M free too

The multibody model at the issue's sizes (256 draws x 64 path samples per objective evaluation) is a GPU job
(about 5 s per evaluation on 2 CPU cores). Split in two:

    python experiments/ckcm_design_robust.py --model multibody --design-only --design-out DIR   # on the GPU
    python experiments/ckcm_design_robust.py --model multibody --robust-design DIR/design.json  # here: the
        # four-variable optimum, the 10^4 tolerance studies, the independent check and the flight

``--design-only`` runs Adam (seed 0) from the paper's design, checkpointing every block in DIR (``--resume``
continues), and writes DIR/timing.json (device, jax version, compile and per-block wall times).  The design in
experiments/out/ckcm_design_robust_multibody_design.json (and its _timing.json) came from
``XLA_FLAGS= python experiments/ckcm_design_robust.py --model multibody --design-only --design-out DIR
--deadline-s 420`` on an NVIDIA H100 (jax 0.11.2; the deadline was not reached).

Writes experiments/out/ckcm_design_robust{_quick}{_multibody}.md / .json / _hist.png.  Every number is computed here.

Equal wall time: each gradient run's wall time (compilation included) is the budget the gradient-free methods
get, on the same objective (the robust statistic relative to the start design) and the same constraints (a
design counts only when every constraint holds: Deb's rule, as in experiments/ckcm_design.py); their batched
evaluator's compilation counts against their budget too.  Time to a value: the wall time at which each
method's best feasible design first reaches the value the CMA-ES run ends with.
"""
import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

# compile time dominates (few evaluations of big programs): cheaper XLA:CPU code generation, the same
# arithmetic (docs/known_traps.md, "Compile time: XLA:CPU's fusion emitters"); a GPU run sets its own XLA_FLAGS
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax.ckcm import design as D  # noqa: E402
from mrds_jax.validation import require  # noqa: E402
from mrds_jax.ckcm.design import robust as R  # noqa: E402
from mrds_jax.ckcm.design.objectives import actuator_forces, model_description  # noqa: E402
from mrds_jax.montecarlo import Normal, run_monte_carlo  # noqa: E402

OUT = Path(__file__).parent / "out"
BATCH = 8


def config(args):
    if args.quick:
        return dict(samples=8, mc=16, iterations=60, seeds=(0,), study=1024, chunk=256)
    return dict(samples=64, mc=256, iterations=200, seeds=(0, 1, 2), study=10_000, chunk=1024)


def robust_problem(cfg, model, free_payload=False):
    """The robust full-space problem; the payload mass M stays the task's 30 kg unless ``free_payload`` (a
    lighter payload lowers every force: no design merit, and no fair comparison with today's optimum)."""
    task = D.ellipse_task(period=0.5, samples_per_path=cfg["samples"])
    free = D.FULL_FREE if free_payload else tuple(n for n in D.FULL_FREE if n != "M")
    problem, data = D.make_problem(task, space=D.make_space(free, per_leg=True), model=model, robust="quantile",
                                   robust_samples=cfg["mc"], batch_size=cfg.get("batch_size", 16))
    return task, problem, data


def design_only(cfg, task, problem, data, out, deadline_s=None, resume=False):
    """The robust gradient optimisation alone (Adam, seed 0), checkpointed in ``out`` every block; stops after
    the block that passes ``deadline_s`` of wall time.  Writes out/design.json and out/timing.json."""
    out.mkdir(parents=True, exist_ok=True)
    settings = D.Settings(optimizer="adam", iterations=cfg["iterations"], seed=0, starts=1)
    t0 = time.perf_counter()
    blocks, lines = [], []

    def on_block(steps, best):
        blocks.append((steps, time.perf_counter() - t0, best))
        print(f"  {time.perf_counter() - t0:7.1f} s  step {steps}  best feasible {best:.5g}", flush=True)
        return deadline_s is not None and time.perf_counter() - t0 > deadline_s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.DesignWarning)
        result = D.optimize(problem, data, settings, task=task, out_dir=out, resume=resume, progress=False,
                            log=lambda line: (lines.append((time.perf_counter() - t0, line)), print(line, flush=True)),
                            on_block=on_block)
    timing = {"command": " ".join(["python", *sys.argv]), "xla_flags": os.environ.get("XLA_FLAGS", ""),
              "device": str(jax.devices()[0].device_kind), "platform": jax.default_backend(),
              "jax": jax.__version__, "variables": problem.space.size, "path_samples": cfg["samples"],
              "mc_samples": cfg["mc"], "iterations": cfg["iterations"], "wall_s": time.perf_counter() - t0,
              "blocks": blocks, "log": lines, "status": result.status, "objective": result.after["objective"],
              "robust_peak": result.after["robust_peak"], "peak_force": result.after["peak_force"]}
    (out / "timing.json").write_text(json.dumps(timing, indent=1))
    print(json.dumps({k: v for k, v in timing.items() if k not in ("blocks", "log")}), flush=True)
    return result


def four_variable_optimum(cfg, model):
    """Today's optimum: the four-variable nominal problem with the CLI's defaults (Adam, 200 steps), on the
    ellipse at ``cfg['samples']`` samples; saved in experiments/out and taken from there when its model,
    settings and task match these.  Returns (task, DesignResult)."""
    task = D.ellipse_task(period=0.5, samples_per_path=cfg["samples"])
    settings = D.Settings(optimizer="adam", iterations=200, starts=1)
    path = OUT / f"ckcm_design_four_{model}_{cfg['samples']}.json"
    if path.exists():
        saved = D.load_design(path)
        if (saved.problem["model"], saved.settings, saved.task) == (model, asdict(settings), task.to_json()):
            return task, saved
    problem, data = D.make_problem(task, model=model)
    result = D.optimize(problem, data, settings, task=task, progress=False)
    OUT.mkdir(exist_ok=True)
    result.save(path)
    return task, result


def gradient_run(cfg, task, problem, data, optimizer, seed):
    """One gradient run from the paper's design (plus ``seed``'s random starts: none, one start), timed."""
    settings = D.Settings(optimizer=optimizer, iterations=cfg["iterations"] if optimizer == "adam"
                          else max(cfg["iterations"] // 4, 10), seed=seed, starts=1)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.DesignWarning)
        result = D.optimize(problem, data, settings, task=task, progress=False)
    wall = time.perf_counter() - t
    return {"method": optimizer, "seed": seed, "wall_s": wall, "status": result.status,
            "objective": result.after["objective"], "robust_peak": result.after["robust_peak"],
            "peak": result.after["peak_force"], "evaluations": result.evaluations, "x": result.x,
            "params": result.params, "result": result}


def batched_evaluator(problem):
    def one(data, x):
        ev = D.evaluate(problem, data, x)
        return ev.objective, ev.max_violation
    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def rank_key(objective, violation):
    return np.where(violation <= 0, objective, 1e3 + violation)


def gradient_free_run(problem, data, method, seed, budget_s):
    """CMA-ES (population BATCH, σ₀ = 0.15 of the box, from the paper's design) or random search, for
    ``budget_s`` seconds of wall time, compilation of the batched evaluator included; the trace of its best
    feasible objective against wall time."""
    from cmaes import CMA
    lo, hi = problem.space.bounds()
    n = len(lo)
    x0 = (np.asarray(problem.space.from_params(data.base)) - lo) / (hi - lo)
    rng = np.random.default_rng(seed)
    opt = CMA(mean=x0, sigma=0.15, bounds=np.tile([0.0, 1.0], (n, 1)), seed=seed, population_size=BATCH)
    t0 = time.perf_counter()
    f = batched_evaluator(problem)
    best, trace, used = (np.inf, None), [], 0
    while time.perf_counter() - t0 < budget_s:
        zs = np.array([opt.ask() for _ in range(BATCH)]) if method == "CMA-ES" else rng.uniform(size=(BATCH, n))
        obj, viol = (np.asarray(v) for v in f(data, jnp.asarray(lo + (hi - lo) * zs)))
        used += BATCH
        key = rank_key(obj, viol)
        if method == "CMA-ES":
            opt.tell(list(zip(zs, key)))
        k = int(np.argmin(key))
        if key[k] < best[0]:
            best = (float(key[k]), lo + (hi - lo) * zs[k])
        trace.append((time.perf_counter() - t0, best[0]))
    return {"method": method, "seed": seed, "wall_s": time.perf_counter() - t0, "evaluations": used,
            "objective": best[0] if best[0] < 1e3 else None, "trace": trace, "x_best": best[1]}


def tolerance_study(cfg, task, params, model, tag):
    """Exact peak |τ| of ``cfg['study']`` as-built machines of ``params`` (the Monte Carlo runner, chunked,
    resumable in experiments/out/ckcm_design_robust_mc/<tag>_<path samples>_<digest of the design>: another
    design or sampling starts its own study instead of meeting the runner's refusal of a foreign checkpoint)."""
    digest = hashlib.sha1(b"".join(np.asarray(v, np.float64).tobytes()
                                   for v in jax.tree_util.tree_leaves(params))).hexdigest()[:10]
    tag = f"{tag}_{task.samples_per_path}_{digest}"
    samples = task.samples(params)
    tol = R.Tolerances()

    def one(scenario):
        tau = actuator_forces(R.perturbed_params(params, scenario["eps"], tol), samples, model)
        return {"peak": jnp.max(jnp.abs(tau))}
    spec = {"eps": Normal(np.zeros(R.NOISE_SIZE), np.ones(R.NOISE_SIZE))}
    res = run_monte_carlo(one, spec, cfg["study"], seed=1, chunk_size=cfg["chunk"], progress=False, tag=tag,
                          checkpoint_dir=OUT / "ckcm_design_robust_mc" / tag)
    return np.asarray(res.metrics["peak"])[~np.asarray(res.failed)]


def independent_check(cfg, result, model, label):
    """The independent check of a robust optimum (a ``DesignResult``), as markdown lines:
    ``verify_design`` (4x denser path sampling, off the optimiser's grid; non-smoothed constraints), and the
    MRDS multibody plant flying the design under computed torque (``simulate_design``, the route of
    `mrds-jax simulate --design`, RK4 with at least 256 steps a period and a whole number, at least 4, per
    task sample, so that the sample instants are plant instants): the forces it applies against the
    closed-chain inverse dynamics (multibody model) at the plant's instants, and its peak at the task's sample
    instants against the optimiser's reported peak (equal for a design optimised with the multibody model)."""
    task = result.task_object()
    limits = D.Limits()                  # the robust problem's (make_problem's defaults), as the design file says
    saved = result.problem["limits"]
    assert jax.tree_util.tree_map(float, asdict(limits)) == saved, ("the design was optimised under other limits", saved)
    report = D.verify_design(result.params, task, limits, model)
    T = task.paths[0]["period"]
    per_sample = max(4, -(-256 // cfg["samples"]))
    run, = D.simulate_design(result, dt=T / (per_sample * cfg["samples"]))
    r = run["result"]
    path, _ = task.path_objects(result.params)[0]
    q, qd, qdd = jax.vmap(path)(r.t)
    at = D.TaskSamples(q, qd, qdd, jnp.ones_like(r.t), jnp.zeros_like(r.t), result.params.M, result.params.I_payload)
    tau_id = np.asarray(actuator_forces(result.params, at, "multibody", result.problem.get("legs", "bench")))
    flown = np.asarray(r.forces)
    rel = float(np.abs(flown - tau_id).max() / np.abs(tau_id).max())
    on_grid = np.isclose(np.asarray(r.t)[:, None], T * np.arange(cfg["samples"])[None] / cfg["samples"],
                         atol=1e-9 * T).any(axis=1)
    peak_grid = float(np.abs(flown[on_grid]).max())
    reported = float(result.after["peak_force"])
    flight_ok = rel < 1e-6 and run["max_closure_error"] < 1e-6 and (
        model != "multibody" or abs(peak_grid - reported) < 1e-6 * reported)
    return [f"\n## Independent check of the robust optimum ({label})\n",
            f"- `verify_design`, {4 * cfg['samples'] + 1} path samples (4x denser, off the optimiser's grid), "
            f"non-smoothed constraints: **{'all ok' if report['all_ok'] else 'VIOLATED'}**; peak force on the dense "
            f"path {report['peak_force_dense']:.3f} N (optimiser: {reported:.3f} N at its {cfg['samples']}).",
            f"- The MRDS multibody plant flying it under computed torque ({run['steps']} RK4 steps of "
            f"{run['dt'] * 1e3:.3f} ms, starting on the path): applied forces against the multibody inverse dynamics "
            f"at the same instants, max |difference| / peak = {rel:.1e}; closure error {run['max_closure_error']:.1e} m, "
            f"position error {run['max_position_error']:.1e} m; its peak at the task's {cfg['samples']} sample "
            f"instants {peak_grid:.6f} N against the optimiser's reported {reported:.6f} N (relative difference "
            f"{abs(peak_grid - reported) / reported:.1e}{'' if model == 'multibody' else '; the paper model is not the plant'}): "
            f"**{'ok' if flight_ok else 'NOT OK'}**.", "", "```", D.format_report(report), "```"]


def time_to(trace, target):
    for t, v in trace:
        if v <= target:
            return t
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model", default="paper", choices=["paper", "multibody"])
    ap.add_argument("--free-payload", action="store_true", help="let the payload mass M vary too (38 variables)")
    ap.add_argument("--design-only", action="store_true",
                    help="only the robust optimisation (Adam, seed 0), checkpointed in --design-out (a GPU job)")
    ap.add_argument("--design-out", type=Path, default=OUT / "ckcm_design_robust_run",
                    help="--design-only: the folder of its checkpoints, design.json and timing.json")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="--design-only: stop after the block that passes this many seconds of wall time")
    ap.add_argument("--resume", action="store_true", help="--design-only: continue from --design-out's checkpoint")
    ap.add_argument("--robust-design", type=Path, default=None,
                    help="take the robust optimum from this saved design (a --design-only run's design.json): "
                         "no optimisation and no comparison here, only the studies and checks")
    ap.add_argument("--four-only", action="store_true", help="only today's four-variable optimum (saved)")
    ap.add_argument("--iterations", type=int, default=None, help="override the size's Adam iterations")
    ap.add_argument("--mc", type=int, default=None, help="override the size's Monte Carlo draws")
    ap.add_argument("--samples", type=int, default=None, help="override the size's path samples")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="samples and draws vectorised together (default 16; the H100 run used 16)")
    args = ap.parse_args()
    if not (args.four_only or args.design_only):     # the comparison's CMA-ES, before the gradient runs
        require("cmaes", "ckcm_design_robust.py's comparison (CMA-ES; --design-only or --four-only leave it out)")
    cfg = config(args)
    cfg.update({k: getattr(args, k) for k in ("iterations", "mc", "samples", "batch_size")
                if getattr(args, k) is not None})
    suffix = ("_quick" if args.quick else "") + ("" if args.model == "paper" else f"_{args.model}")
    if args.four_only:
        return print(four_variable_optimum(cfg, args.model)[1].message)
    if args.design_only:
        task, problem, data = robust_problem(cfg, args.model, args.free_payload)
        return design_only(cfg, task, problem, data, args.design_out, args.deadline_s, args.resume)
    t_all = time.perf_counter()
    task, problem, data = robust_problem(cfg, args.model, args.free_payload)
    four_task, four = four_variable_optimum(cfg, args.model)
    objective = jax.jit(lambda x: D.evaluate(problem, data, x).objective)
    four_robust = float(objective(jnp.asarray(problem.space.from_params(four.params))))
    payload = "payload mass free" if args.free_payload else "the payload fixed at the task's 30 kg"
    command = ("python experiments/ckcm_design_robust.py" + (" --quick" if args.quick else "")
               + ("" if args.model == "paper" else " --model " + args.model))
    lines = [f"# Robust full-space design (issue 26){' — quick' if args.quick else ''}", "",
             f"Model: {model_description(args.model)}; ellipse of Nguyen & Pooran eq. 55, period 0.5 s, {cfg['samples']} samples; "
             f"objective: smooth 95th percentile of the soft peak force over {cfg['mc']} as-built machines "
             f"(attachment points 1 mm, leg part masses 2 %, 1 sd), relative to the paper's design; "
             f"{problem.space.size} variables ({payload}). Today's four-variable optimum (Adam, 200 steps, the "
             f"CLI's defaults, same model) scores {four_robust:.4f} on it (peak {four.after['peak_force']:.2f} N "
             "nominal)."]
    runs = []
    if args.robust_design is not None:
        best = D.load_design(args.robust_design)
        if list(best.problem["free"]) != list(problem.space.free) or best.problem["model"] != args.model:
            raise SystemExit(f"{args.robust_design}: optimised over {best.problem['free']} with the "
                             f"{best.problem['model']} model, not this problem's {list(problem.space.free)} "
                             f"({args.model}); pass the same --model/--free-payload/--quick")
        here = float(objective(jnp.asarray(problem.space.from_params(best.params))))
        lines += ["", f"Command: `{command} --robust-design {args.robust_design.as_posix()}` (the studies and checks "
                  "here; the optimisation was run with `--design-only`, below).", "",
                  "## The robust optimisation", "", *design_run_lines(args.robust_design, best, here)]
    else:
        lines += ["", f"Command: `{command}`.", ""]
        runs = comparison_runs(cfg, task, problem, data)
        lines += comparison_table(runs)
        grads = [r for r in runs if r["method"] in ("adam", "lbfgs") and r["status"] == "converged"]
        best = min(grads, key=lambda r: r["objective"])["result"] if grads else None
        if best is not None:
            best.save(OUT / f"ckcm_design_robust{suffix}_design.json")
    if best is not None:
        lines += tolerance_section(cfg, four_task, four, task, best, args.model, suffix)
        lines += independent_check(cfg, best, args.model, f"{best.settings['optimizer']}, seed {best.settings['seed']}")
    lines.append(f"\nWall {time.perf_counter() - t_all:.0f} s in all (this script, on {jax.devices()[0].device_kind}, "
                 f"jax {jax.__version__}).")
    OUT.mkdir(exist_ok=True)
    (OUT / f"ckcm_design_robust{suffix}.md").write_text("\n".join(lines) + "\n")
    if runs:
        (OUT / f"ckcm_design_robust{suffix}.json").write_text(json.dumps(
            [{k: v for k, v in r.items() if k not in ("params", "x_best", "result")} for r in runs], indent=1,
            default=str))
    print("\n".join(lines))


def design_run_lines(path, result, objective_here):
    """What the saved robust run says of itself (its timing.json beside the design file, if there)."""
    timing_path = path.with_name(path.name.replace("design.json", "timing.json"))
    out = []
    if timing_path.exists():
        t = json.loads(timing_path.read_text())
        compile_line = next((line for _, line in t["log"] if "ready in" in line), "")
        out += [f"Adam, seed 0, {t['iterations']} steps from the paper's design, on {t['device']} ({t['platform']}, "
                f"jax {t['jax']}): {t['wall_s']:.1f} s of wall time in all, of which the block's compilation "
                f"{compile_line.split('ready in ')[-1].split(' s')[0]} s; then "
                f"{(t['blocks'][-1][1] - t['blocks'][0][1]) / max(t['blocks'][-1][0] - t['blocks'][0][0], 1):.3f} s "
                f"per step ({t['mc_samples']} draws x {t['path_samples']} path samples of the multibody inverse "
                "dynamics per evaluation, reverse mode).", "",
                "| step | wall (s) | best feasible objective |", "|---|---|---|"]
        out += [f"| {k} | {w:.1f} | {v:.5f} |" for k, w, v in t["blocks"]]
        out.append("")
    out += [f"Result: {result.message}. Objective {result.after['objective']:.6f} on the device that optimised it, "
            f"{objective_here:.6f} re-evaluated here on {jax.devices()[0].device_kind} (relative difference "
            f"{abs(objective_here / result.after['objective'] - 1):.1e})."]
    return out


def comparison_runs(cfg, task, problem, data):
    """Adam and L-BFGS per seed, each followed by CMA-ES and random search on its wall time."""
    runs = []
    for seed in cfg["seeds"]:
        for optimizer in ("adam", "lbfgs"):
            g = gradient_run(cfg, task, problem, data, optimizer, seed)
            runs.append(g)
            print({k: v for k, v in g.items() if k not in ("x", "params", "result")})
            for method in ("CMA-ES", "random search"):
                r = gradient_free_run(problem, data, method, seed, g["wall_s"])
                r["budget_of"] = f"{optimizer} seed {seed}"
                runs.append(r)
                print({k: v for k, v in r.items() if k not in ("trace", "x_best")})
    return runs


def comparison_table(runs):
    lines = ["## Best value at equal wall time (compilation included)", "",
             "| method | seed | budget of | wall (s) | evaluations | best feasible objective | time to CMA-ES's value (s) |",
             "|---|---|---|---|---|---|---|"]
    for g in [r for r in runs if r["method"] in ("adam", "lbfgs")]:
        cma = next(r for r in runs if r["method"] == "CMA-ES" and r["budget_of"] == f"{g['method']} seed {g['seed']}")
        rnd = next(r for r in runs if r["method"] == "random search" and r["budget_of"] == cma["budget_of"])
        target = cma["objective"]
        lines.append(f"| {g['method']} | {g['seed']} | | {g['wall_s']:.1f} | {g['evaluations']} | "
                     f"{g['objective']:.4f} ({g['status']}) | {'≤ ' + format(g['wall_s'], '.1f') if target is not None and g['objective'] <= target else 'not reached'} |")
        for r in (cma, rnd):
            t = None if target is None else time_to(r["trace"], target)
            lines.append(f"| {r['method']} | {r['seed']} | {r['budget_of']} | {r['wall_s']:.1f} | {r['evaluations']} | "
                         f"{'none feasible' if r['objective'] is None else format(r['objective'], '.4f')} | "
                         f"{'' if t is None else format(t, '.1f')} |")
    return lines + ["", "The gradient runs' 'time to' is an upper bound (their best design is only known at the end "
                    "of the run); `experiments/ckcm_design.py --compare` times them per block."]


def tolerance_section(cfg, four_task, four, task, best, model, suffix):
    """The tolerance study of both designs (exact peak |τ|, the same draws), a table and the histograms."""
    q_four = tolerance_study(cfg, four_task, four.params, model, f"four{suffix}")
    q_best = tolerance_study(cfg, task, best.params, model, f"robust{suffix}")
    p95 = (float(np.quantile(q_four, 0.95)), float(np.quantile(q_best, 0.95)))
    lines = ["", f"## Tolerance study ({cfg['study']} as-built machines each, the same draws, exact peak |τ|)", "",
             "| design | nominal peak (N) | mean (N) | 95th percentile (N) | 99th percentile (N) | max (N) |",
             "|---|---|---|---|---|---|",
             f"| today's four-variable optimum | {four.after['peak_force']:.2f} | {q_four.mean():.2f} | {p95[0]:.2f} | "
             f"{np.quantile(q_four, 0.99):.2f} | {q_four.max():.2f} |",
             f"| robust full-space optimum | {best.after['peak_force']:.2f} | {q_best.mean():.2f} | {p95[1]:.2f} | "
             f"{np.quantile(q_best, 0.99):.2f} | {q_best.max():.2f} |", "",
             f"95th percentile {p95[0]:.2f} N → {p95[1]:.2f} N ({100 * (p95[1] / p95[0] - 1):+.1f} %); "
             f"{len(q_four)} and {len(q_best)} machines counted (a draw outside the workspace would be dropped and "
             "counted here)."]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(q_four, 60, alpha=0.6, label="four-variable optimum")
    ax.hist(q_best, 60, alpha=0.6, label="robust full-space optimum")
    ax.set_xlabel("peak actuator force (N)")
    ax.set_ylabel("as-built machines")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / f"ckcm_design_robust{suffix}_hist.png", dpi=120)
    return lines + [f"\n![histograms](ckcm_design_robust{suffix}_hist.png)"]


if __name__ == "__main__":
    main()
