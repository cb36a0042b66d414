"""Design optimisation of the CKCM end-effector (issue 5): the gradient optimiser (augmented Lagrangian around
optax Adam / L-BFGS, ``mrds_jax.ckcm.design``) from the nominal design (eq. 58) on the ellipse task, in both
dynamic models; the optimum against Nguyen & Pooran's guideline (masses fixed, a (θA, θB) scan, the symmetries
behind the two optima); against gradient-free baselines (random search, CMA-ES) at an equal budget of dynamics
evaluations; and the batched multi-start.  Writes ``experiments/out/ckcm_design.md``, ``ckcm_design.json``
(every number of the summary), ``ckcm_design_*.png`` and the optimised designs (``ckcm_design_runs/``).

    python experiments/ckcm_design.py            # 28 minutes on the shared 2-core CPU of ckcm_design.md, mostly
                                                 # compilation (the multibody L-BFGS block alone ~9 minutes)
    python experiments/ckcm_design.py --quick    # fewer iterations and samples (a smoke test)
    python experiments/ckcm_design.py --large    # more iterations, starts up to 16, finer scan
    python experiments/ckcm_design.py --resume   # skip the sections already in ckcm_design.json
    python experiments/ckcm_design.py --render   # rewrite the markdown and the scan plot from the JSON

Gradient against gradient-free at equal wall time on the robust full-space problem (issue 26, item 4):

    python experiments/ckcm_design.py --compare --quick     # tiny sizes, 60 s per run, 2 seeds (a smoke test)
    python experiments/ckcm_design.py --compare             # the issue's sizes: 64 samples, 256 draws, 3 seeds
    python experiments/ckcm_design.py --compare --samples 8 --mc-samples 256 --budget-s 200 --seeds 0,1

Every run (Adam, L-BFGS, CMA-ES, random search) of every seed starts from the same design (seed 0: the paper's;
seed s: the paper's moved by s's random 5 % of the box) with every compiled program dropped first, so each
wall time includes its own compilation.  Every run gets the same wall-time budget (``--budget-s``); the
gradient runs take as many steps as fit (``optimize(on_block=...)`` times their best feasible objective after
every block of steps and stops them), CMA-ES runs ``--free-factor`` budgets so that its time to the gradient's
value is measured.  A design is feasible at max violation ≤ 0 for every method.  Writes
``experiments/out/ckcm_design_compare[_quick][--tag].md`` / ``.json`` after every seed: time to reach the target
(each seed's CMA-ES value at the budget, ``--target``, and the best gradient value), the best value at equal
wall time, compile and per-step / per-evaluation times, with the machine's load.

Each section is written to the JSON and the markdown as soon as it is done (a crash loses only the section
it was in; ``--resume`` continues).  Every number in the summary is computed here; nothing is typed from a
previous run.  Needs ``cmaes`` (``pip install -e .[experiments]``) for the CMA-ES baseline.
"""
import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

# compile time dominates (few evaluations of big programs): cheaper XLA:CPU code generation, the same
# arithmetic (docs/known_traps.md, "Compile time: XLA:CPU's fusion emitters"); a GPU run sets its own XLA_FLAGS
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mrds_jax import ckcm  # noqa: E402
from mrds_jax.ckcm import design as D  # noqa: E402
from mrds_jax.validation import require  # noqa: E402
from mrds_jax.ckcm.design.optimizer import compiled_evaluate  # noqa: E402
from mrds_jax.ckcm.kinematics import home_pose, inverse_kinematics, jacobian  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def set_out(path):
    global OUT, RUNS, JSON, MD
    OUT = Path(path)
    RUNS = OUT / "ckcm_design_runs"
    JSON = OUT / "ckcm_design.json"
    MD = OUT / "ckcm_design.md"


set_out(OUT)
DEG = np.pi / 180
MODELS = ("paper", "multibody")
OPTIMIZERS = ("adam", "lbfgs")

warnings.filterwarnings("ignore", category=D.DesignWarning)   # statuses are reported in the tables


# --- configuration ---------------------------------------------------------------------------------------
def config(args):
    if args.quick:
        return dict(samples=32, adam_iters=100, lbfgs_iters=40, geo_iters=100, geo_starts=4, grid=16,
                    starts=(1, 4), seeds=2, cost_models=("paper",))
    if args.large:
        return dict(samples=64, adam_iters=400, lbfgs_iters=160, geo_iters=300, geo_starts=8, grid=40,
                    starts=(1, 4, 8, 16), seeds=5, cost_models=MODELS)
    return dict(samples=64, adam_iters=200, lbfgs_iters=80, geo_iters=200, geo_starts=4, grid=24,
                starts=(1, 8), seeds=3, cost_models=("paper",))


def settings_for(cfg, optimizer, starts=1, iterations=None):
    it = iterations or cfg["adam_iters" if optimizer == "adam" else "lbfgs_iters"]
    return D.Settings(optimizer=optimizer, iterations=it, starts=starts, update_every=20)


_PROBLEMS = {}
WARM = set()     # (model, optimizer) whose 1-start block this process has compiled


def problem_for(cfg, model, free=D.DEFAULT_FREE):
    """(problem, data, task), built once per (model, free): the compiled blocks are cached per Problem."""
    key = (model, tuple(free))
    if key not in _PROBLEMS:
        task = D.ellipse_task(samples_per_path=cfg["samples"])
        problem, data = D.make_problem(task, free=free, model=model, demand="peak")
        _PROBLEMS[key] = (problem, data, task)
    return _PROBLEMS[key]


# --- bookkeeping -----------------------------------------------------------------------------------------
def load_state(resume):
    if resume and JSON.exists():
        return json.loads(JSON.read_text())
    return {}


def save_state(state):
    tmp = JSON.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=1, default=float))
    os.replace(tmp, JSON)
    MD.write_text(render(state))


def section(state, name, fn, *a):
    if name in state:
        print(f"[{name}] already done (--resume)")
        return state[name]
    t = time.perf_counter()
    print(f"[{name}] ...", flush=True)
    state[name] = fn(*a)
    state.setdefault("_times", {})[name] = time.perf_counter() - t
    save_state(state)
    print(render_section(state, name), flush=True)
    return state[name]


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def g(v, d=4):
    return "–" if v is None else (f"{v:.{d}g}" if isinstance(v, (float, int, np.floating)) else str(v))


# --- (a) optimise from the nominal design ----------------------------------------------------------------
def leg_centroid(params):
    """Centroid distance from the base l_c = l_s/2 + (m1/2m) l (eq. 40-42) at the home pose, mean over legs."""
    l = np.asarray(inverse_kinematics(params, home_pose(params)))
    return float(np.mean(float(params.l_s) / 2 + float(params.m1) / (2 * float(params.m)) * l))


def run_summary(result, wall, problem, data, task):
    rep = D.verify_design(result.params, task, data.limits, model=problem.model, legs=problem.legs)
    RUNS.mkdir(parents=True, exist_ok=True)
    return {"status": result.status, "message": result.message, "wall_s": wall,
            "evaluations": result.evaluations, "x_initial": result.x_initial, "x": result.x,
            "before": result.before, "after": result.after, "peak_reduction": result.peak_reduction,
            "centroid_before": leg_centroid(result.initial_params), "centroid_after": leg_centroid(result.params),
            "starts": [{k: s[k] for k in ("start", "x0", "x", "feasible", "best_objective", "evaluations",
                                          "diverged_at")} for s in result.starts],
            "verification": {"all_ok": bool(rep["all_ok"]), "peak_force_dense": rep["peak_force_dense"],
                             "text": D.format_report(rep)}}


def optimise_nominal(cfg, model, optimizer):
    problem, data, task = problem_for(cfg, model)
    s = settings_for(cfg, optimizer)
    t = time.perf_counter()
    res = D.optimize(problem, data, s, task=task, progress=False)
    wall = time.perf_counter() - t
    WARM.add((model, optimizer))
    out = run_summary(res, wall, problem, data, task)
    res.save(RUNS / f"{model}_{optimizer}.json")
    if model == "paper":
        D.plot_history(res, OUT / f"ckcm_design_history_{optimizer}.png")
        D.plot_forces(res, OUT / f"ckcm_design_forces_{optimizer}.png")
        D.plot_geometry(res, OUT / f"ckcm_design_geometry_{optimizer}.png")
        plt.close("all")
    return out


# --- (b) the optimum's direction ----------------------------------------------------------------------------
def geometry_only(cfg):
    """Masses fixed at eq. 58: only θA, θB free (Adam, the start design plus random starts)."""
    problem, data, task = problem_for(cfg, "paper", ("theta_A", "theta_B"))
    s = D.Settings(optimizer="adam", iterations=cfg["geo_iters"], starts=cfg["geo_starts"], update_every=20)
    t = time.perf_counter()
    res = D.optimize(problem, data, s, task=task, progress=False)
    out = run_summary(res, time.perf_counter() - t, problem, data, task)
    res.save(RUNS / "paper_adam_angles_only.json")
    return out


def batched_evaluator(problem):
    """jit(vmap(evaluate)) over designs, data an argument (so a changed base design does not recompile)."""
    def one(data, x):
        ev = D.evaluate(problem, data, x)
        return {"objective": ev.objective, "violation": ev.max_violation, "peak": ev.metrics["peak_force"],
                "rms": ev.metrics["rms_force"], "power": ev.metrics["mean_power"]}
    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


BATCH = 8
_EVAL = {}


def evaluate_many(problem, data, xs):
    """Evaluate designs xs (N, n) in batches of BATCH (one compiled shape); returns dict of (N,) arrays."""
    if problem not in _EVAL:
        _EVAL[problem] = batched_evaluator(problem)
    f = _EVAL[problem]
    xs = np.asarray(xs, float)
    n = len(xs)
    pad = (-n) % BATCH
    xp = np.concatenate([xs, np.repeat(xs[-1:], pad, 0)]) if pad else xs
    outs = [jax.device_get(f(data, jnp.asarray(xp[i:i + BATCH]))) for i in range(0, len(xp), BATCH)]
    return {k: np.concatenate([o[k] for o in outs])[:n] for k in outs[0]}


def grid_scan(cfg, state):
    """Peak force over a (θA, θB) grid, masses at eq. 58 and at the L-BFGS optimum (paper model)."""
    problem, data, _ = problem_for(cfg, "paper")
    n = cfg["grid"]
    th = np.linspace(4, 116, n) * DEG
    TA, TB = np.meshgrid(th, th, indexing="ij")
    out = {"theta_deg": list(np.degrees(th))}
    nominal_m = (float(data.base.m), float(data.base.m1))
    opt = state["a_paper_lbfgs"]["x"]
    for label, (m, m1) in (("nominal masses", nominal_m), ("optimised masses (L-BFGS)", (opt["m"], opt["m1"]))):
        xs = np.stack([TA.ravel(), TB.ravel(), np.full(TA.size, m), np.full(TA.size, m1)], 1)
        t = time.perf_counter()
        r = evaluate_many(problem, data, xs)
        out[label] = {"m": m, "m1": m1, "wall_s": time.perf_counter() - t,
                      **{k: r[k].reshape(n, n).tolist() for k in ("peak", "rms", "violation")}}
    plot_grid(out, state)
    return out


def plot_grid(out, state):
    th = np.asarray(out["theta_deg"])
    labels = [k for k in out if isinstance(out[k], dict)]
    fig, axes = plt.subplots(1, len(labels), figsize=(6.2 * len(labels), 5.4))
    for ax, label in zip(np.atleast_1d(axes), labels):
        peak = np.asarray(out[label]["peak"])
        viol = np.asarray(out[label]["violation"])
        z = np.where(np.isfinite(peak), peak, np.nan)
        feas = z[viol <= 0]
        lo = np.nanmin(feas) if feas.size else np.nanmin(z)
        hi = 1.5 * lo                           # resolve the feasible basins; the singular band θA ≈ θB saturates
        cs = ax.contourf(th, th, z.T, levels=np.linspace(lo, hi, 25), extend="both", cmap="viridis")
        fig.colorbar(cs, ax=ax, label="peak actuator force (N)")
        ax.contour(th, th, viol.T, levels=[0.0], colors="w", linewidths=1.5)
        ax.contourf(th, th, viol.T, levels=[0, np.inf], colors="none", hatches=["//"])
        ax.plot([4, 116], [116, 4], "w:", lw=1)   # the mirror line θA + θB = 120°
        ax.plot(30, 94, "k*", ms=12, label="eq. 58 (30°, 94°)")
        ax.plot(90, 26, "k*", ms=12, mfc="none", label="its mirror (90°, 26°)")
        for key, mk, name in (("a_paper_adam", "o", "Adam"), ("a_paper_lbfgs", "s", "L-BFGS")):
            if key in state:
                x = state[key]["x"]
                ax.plot(x["theta_A"], x["theta_B"], mk, color="r", ms=8, mfc="none", mew=2, label=f"{name} (all 4 free)")
        if "b_angles_only" in state:
            for s in state["b_angles_only"]["starts"]:
                ax.plot(s["x"]["theta_A"], s["x"]["theta_B"], "^", color="orange", ms=7,
                        label="masses fixed (Adam starts)" if s["start"] == 0 else None)
        if "d_multistart" in state:
            last = state["d_multistart"][-1]
            pts = np.array([[q["x"]["theta_A"], q["x"]["theta_B"]] for q in last["per_start"] if q["feasible"]])
            if len(pts):
                ax.plot(pts[:, 0], pts[:, 1], "x", color="m", ms=7, mew=1.5,
                        label=f"multi-start optima ({last['starts']} starts, Adam)")
        ax.set(xlabel="θA (deg)", ylabel="θB (deg)", title=f"paper model, {label}: m = {out[label]['m']:.3g} kg, "
               f"m1 = {out[label]['m1']:.3g} kg", aspect="equal")
    handles, names = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=8, loc="lower center", ncol=6)
    fig.suptitle("peak actuator force on the ellipse (white line / hatched: constraints violated; dotted: mirror line "
                 "θA + θB = 120°)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(OUT / "ckcm_design_theta_scan.png", dpi=110)
    plt.close(fig)


def symmetries(cfg):
    """(i) the mirror (θA, θB) → (120° − θA, 120° − θB): both models, random designs; (ii) shifting θA, θB
    together: RMS/peak along the shift, and Σ τ² at the centred pose for a fixed wrench (the C3 argument)."""
    rng = np.random.default_rng(1)
    out = {"mirror": []}
    for model in MODELS:
        problem, data, _ = problem_for(cfg, model)
        ev = compiled_evaluate(problem)
        for _ in range(3):
            x = np.array([rng.uniform(10, 110) * DEG, rng.uniform(10, 110) * DEG, rng.uniform(8, 30),
                          rng.uniform(1.5, 6)])
            xm = x.copy()
            xm[:2] = 120 * DEG - x[:2]
            a, b = ev(data, jnp.asarray(x)).metrics, ev(data, jnp.asarray(xm)).metrics
            out["mirror"].append({"model": model, "theta_deg": list(np.degrees(x[:2])), "m": x[2], "m1": x[3],
                                  **{k: [float(a[k]), float(b[k])] for k in ("peak_force", "rms_force", "mean_power")}})
    problem, data, _ = problem_for(cfg, "paper")
    shifts = np.linspace(-20, 20, 9)
    xs = []
    for d in shifts:
        xs.append([(30 + d) * DEG, (94 + d) * DEG, float(data.base.m), float(data.base.m1)])
    r = evaluate_many(problem, data, np.array(xs))
    out["shift"] = {"delta_deg": list(shifts), "rms": list(r["rms"]), "peak": list(r["peak"]),
                    "power": list(r["power"])}
    # centred pose, fixed random wrench: Σ τ_i² = wᵀ (CᵀC)⁻¹ w for τ = C⁻ᵀ w
    w = rng.normal(size=6)
    sums, off = [], []
    for d in shifts:
        p = ckcm.nominal(theta_A=(30 + d) * DEG, theta_B=(94 + d) * DEG)
        C = np.asarray(jacobian(p, home_pose(p)))
        sums.append(float(np.sum(np.linalg.solve(C.T, w) ** 2)))
        q = np.asarray(home_pose(p)).copy()
        q[0] += 0.05                           # 5 cm off centre (the ellipse's semi-axis)
        C = np.asarray(jacobian(p, q))
        off.append(float(np.sum(np.linalg.solve(C.T, w) ** 2)))
    out["centred_sum_tau2"] = sums
    out["offcentre_sum_tau2"] = off
    return out


# --- (c) against gradient-free baselines ------------------------------------------------------------------
def cost_ratio(cfg):
    """Wall time of one plain evaluation (objective, constraints, metrics) against one value-and-gradient
    evaluation of the augmented-Lagrangian merit, single design (paper model; both models with --large: the
    multibody gradient alone compiles for minutes)."""
    out = {}
    for model in cfg["cost_models"]:
        problem, data, _ = problem_for(cfg, model)
        plain = compiled_evaluate(problem)
        sett = D.Settings()

        def merit(u):
            from mrds_jax.ckcm.design.optimizer import _merit
            n_g = lam_size[0]
            return _merit(problem, sett, data, u, jnp.zeros(n_g), jnp.asarray(10.0))[0]
        x0 = problem.space.from_params(data.base)
        ev0 = plain(data, x0)
        lam_size = [sum(int(np.size(v)) for v in ev0.constraints.values())]
        vg = jax.jit(jax.value_and_grad(merit))
        u0 = problem.space.from_box(x0)
        t = time.perf_counter()
        jax.block_until_ready(vg(u0))
        compile_s = time.perf_counter() - t

        def timeit(f, *a, reps=20):
            jax.block_until_ready(f(*a))
            t = time.perf_counter()
            for _ in range(reps):
                jax.block_until_ready(f(*a))
            return (time.perf_counter() - t) / reps
        tp, tg = timeit(plain, data, x0), timeit(vg, u0)
        out[model] = {"plain_ms": 1e3 * tp, "grad_ms": 1e3 * tg, "ratio": tg / tp, "grad_compile_s": compile_s}
    return out


def rank_key(objective, violation):
    """Feasible designs by objective; infeasible ones after all of them, by violation (Deb's rule)."""
    return np.where(violation <= 0, objective, 1e3 + violation)


def random_search(cfg, budget, seed):
    problem, data, _ = problem_for(cfg, "paper")
    lo, hi = problem.space.bounds()
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    xs = lo + (hi - lo) * rng.uniform(size=(budget, len(lo)))
    r = evaluate_many(problem, data, xs)
    wall = time.perf_counter() - t
    key = rank_key(r["objective"], r["violation"])
    k = int(np.argmin(key))
    feas = r["violation"] <= 0
    return {"method": "random search", "seed": seed, "evaluations": budget, "wall_s": wall,
            "feasible_fraction": float(np.mean(feas)), "feasible": bool(feas[k]),
            "objective": float(r["objective"][k]), "peak": float(r["peak"][k]),
            "x": problem.space.describe(xs[k])}


def cma_es(cfg, budget, seed):
    from cmaes import CMA
    problem, data, _ = problem_for(cfg, "paper")
    lo, hi = problem.space.bounds()
    n = len(lo)
    x0 = (np.asarray(problem.space.from_params(data.base)) - lo) / (hi - lo)
    opt = CMA(mean=x0, sigma=0.25, bounds=np.tile([0.0, 1.0], (n, 1)), seed=seed, population_size=BATCH)
    best = (np.inf, None, None, None)
    used = 0
    t = time.perf_counter()
    while used + BATCH <= budget:
        zs = np.array([opt.ask() for _ in range(BATCH)])
        xs = lo + (hi - lo) * zs
        r = evaluate_many(problem, data, xs)
        used += BATCH
        key = rank_key(r["objective"], r["violation"])
        opt.tell(list(zip(zs, key)))
        k = int(np.argmin(key))
        if key[k] < best[0]:
            best = (key[k], xs[k], r, k)
    wall = time.perf_counter() - t
    _, x, r, k = best
    return {"method": "CMA-ES", "seed": seed, "evaluations": used, "wall_s": wall, "feasible": bool(r["violation"][k] <= 0),
            "objective": float(r["objective"][k]), "peak": float(r["peak"][k]), "x": problem.space.describe(x)}


def baselines(cfg, state):
    """Budget = the evaluations the gradient runs used (a) and that count times the gradient/plain cost ratio."""
    problem, data, task = problem_for(cfg, "paper")
    ratio = state["c_cost"]["paper"]["ratio"]
    rows = []
    for opt in OPTIMIZERS:
        a = state[f"a_paper_{opt}"]
        rows.append({"method": f"gradient ({'Adam' if opt == 'adam' else 'L-BFGS'})", "seed": None,
                     "evaluations": a["evaluations"], "wall_s": a["wall_s"], "feasible": a["status"] == "converged",
                     "objective": a["after"]["objective"], "peak": a["after"]["peak_force"], "x": a["x"],
                     "note": "value+gradient evaluations; wall incl. compile"})
        if "rerun_s" in a:
            rows[-1]["wall_cached_s"] = a["rerun_s"]
    evaluate_many(problem, data, np.asarray(problem.space.from_params(data.base))[None])   # compile first
    budgets = sorted({state[f"a_paper_{o}"]["evaluations"] for o in OPTIMIZERS})
    budgets += [int(round(b * ratio)) for b in budgets]
    for budget in sorted(set(budgets)):
        for seed in range(cfg["seeds"]):
            for fn in (random_search, cma_es):
                r = fn(cfg, budget, seed)
                r["budget"] = budget
                rows.append(r)
                print(f"  {r['method']} budget {budget} seed {seed}: peak {r['peak']:.2f} N, {r['wall_s']:.1f} s",
                      flush=True)
    return {"rows": rows, "ratio": ratio}


def rerun_cached(cfg, state):
    """Second run of the (paper, Adam/L-BFGS, 1 start) optimisations: compiled blocks are cached, so this is
    the optimisation's own wall time."""
    out = {}
    for opt in OPTIMIZERS:
        problem, data, task = problem_for(cfg, "paper")
        if ("paper", opt) not in WARM:          # a resumed process: compile first, then time
            D.optimize(problem, data, settings_for(cfg, opt), task=task, progress=False)
            WARM.add(("paper", opt))
        t = time.perf_counter()
        res = D.optimize(problem, data, settings_for(cfg, opt), task=task, progress=False)
        out[opt] = {"wall_s": time.perf_counter() - t, "evaluations": res.evaluations,
                    "peak": res.after["peak_force"]}
        state[f"a_paper_{opt}"]["rerun_s"] = out[opt]["wall_s"]
    return out


# --- (d) batched multi-start ----------------------------------------------------------------------------------
def multistart(cfg):
    problem, data, task = problem_for(cfg, "paper")
    rows = []
    for S in cfg["starts"]:
        s = settings_for(cfg, "adam", starts=S)
        t = time.perf_counter()
        res = D.optimize(problem, data, s, task=task, progress=False)
        first = time.perf_counter() - t
        t = time.perf_counter()
        D.optimize(problem, data, s, task=task, progress=False)
        second = time.perf_counter() - t
        peaks = []
        for st in res.starts:
            if st["feasible"]:
                x = np.array([st["x"][k] * (DEG if k.startswith("theta") else 1) for k in problem.space.free])
                peaks.append(float(compiled_evaluate(problem)(data, jnp.asarray(x)).metrics["peak_force"]))
            else:
                peaks.append(None)
        rows.append({"starts": S, "wall_first_s": first, "wall_cached_s": second, "evaluations": res.evaluations,
                     "best_peak": res.after["peak_force"], "x": res.x,
                     "per_start": [{"x": st["x"], "feasible": st["feasible"], "peak": p}
                                   for st, p in zip(res.starts, peaks)]})
        print(f"  starts {S}: first {first:.1f} s, cached {second:.1f} s, best {res.after['peak_force']:.2f} N",
              flush=True)
    return rows


# --- report -------------------------------------------------------------------------------------------------
def xrow(x):
    return f"θA {x['theta_A']:.1f}°, θB {x['theta_B']:.1f}°, m {x['m']:.3g} kg, m1 {x['m1']:.3g} kg" if "m" in x \
        else f"θA {x['theta_A']:.1f}°, θB {x['theta_B']:.1f}°"


def render_section(state, name):
    s = state[name]
    L = []
    if name.startswith("a_"):
        _, model, opt = name.split("_")
        b, a = s["before"], s["after"]
        L.append(f"### {model} model, {'Adam' if opt == 'adam' else 'L-BFGS'} from eq. 58\n")
        L.append(table(["", "peak force (N)", "RMS force (N)", "mean power (W)", "max cond(C)", "min separation (m)"],
                       [["eq. 58", g(b["peak_force"]), g(b["rms_force"]), g(b["mean_power"]), g(b["max_condition"]),
                         g(b["min_separation"])],
                        ["optimum", g(a["peak_force"]), g(a["rms_force"]), g(a["mean_power"]), g(a["max_condition"]),
                         g(a["min_separation"])],
                        ["change", f"{-100 * s['peak_reduction']:+.1f} %",
                         f"{100 * (a['rms_force'] / b['rms_force'] - 1):+.1f} %",
                         f"{100 * (a['mean_power'] / b['mean_power'] - 1):+.1f} %", "", ""]]))
        L.append("")
        L.append(table(["variable", "eq. 58", "optimum"],
                       [[k, g(s["x_initial"][k]), g(s["x"][k])] for k in s["x"]]
                       + [["leg centroid l_c at home (m)", g(s["centroid_before"]), g(s["centroid_after"])]]))
        L.append(f"\nstatus {s['status']}, {s['evaluations']} value+gradient evaluations, {s['wall_s']:.1f} s "
                 f"(incl. compilation). {s['message']}\n")
        L.append(f"Independent verification (4x denser samples, off-grid; peak there {s['verification']['peak_force_dense']:.5g} N): "
                 f"**{'all limits met' if s['verification']['all_ok'] else 'VIOLATED'}**\n")
        L.append("```\n" + s["verification"]["text"] + "\n```\n")
        if model == "paper":
            L.append(f"![](ckcm_design_history_{opt}.png)\n![](ckcm_design_forces_{opt}.png)\n"
                     f"![](ckcm_design_geometry_{opt}.png)\n")
    elif name == "b_angles_only":
        L.append("### Masses fixed at eq. 58: only θA, θB free (paper model, Adam)\n")
        L.append(table(["start", "from", "to", "feasible", "objective (soft peak / start)"],
                       [[st["start"], xrow(st["x0"]), xrow(st["x"]), st["feasible"], g(st["best_objective"], 5)]
                        for st in s["starts"]]))
        L.append(f"\nbest: {xrow(s['x'])}, peak {s['before']['peak_force']:.2f} N → {s['after']['peak_force']:.2f} N "
                 f"({-100 * s['peak_reduction']:+.1f} %), RMS {s['before']['rms_force']:.2f} → {s['after']['rms_force']:.2f} N; "
                 f"verification: {'all limits met' if s['verification']['all_ok'] else 'VIOLATED'}\n")
    elif name == "b_grid":
        L.append("### Peak force over (θA, θB) (paper model)\n")
        th = np.asarray(s["theta_deg"])
        rows = []
        for label in (k for k in s if isinstance(s[k], dict)):
            peak, viol = np.asarray(s[label]["peak"]), np.asarray(s[label]["violation"])
            z = np.where(viol <= 0, peak, np.inf)
            i, j = np.unravel_index(np.argmin(z), z.shape)
            zm = np.where(viol <= 0, peak, -np.inf)
            rows.append([label, f"{len(th)}x{len(th)}", f"{100 * np.mean(viol <= 0):.0f} %",
                         f"{z[i, j]:.2f} N at ({th[i]:.1f}°, {th[j]:.1f}°)",
                         f"{np.max(zm):.1f} N", f"{s[label]['wall_s']:.1f} s"])
        L.append(table(["masses", "grid", "feasible", "best feasible grid point", "worst feasible", "wall"], rows))
        L.append("\n![](ckcm_design_theta_scan.png)\n")
    elif name == "b_symmetry":
        L.append("### Symmetries\n")
        L.append("Mirror (θA, θB) → (120° − θA, 120° − θB), random designs:\n")
        L.append(table(["model", "θA, θB (deg)", "m, m1 (kg)", "peak: design / mirror (N)", "rel. diff", "RMS rel. diff",
                        "power rel. diff"],
                       [[r["model"], f"{r['theta_deg'][0]:.1f}, {r['theta_deg'][1]:.1f}", f"{r['m']:.3g}, {r['m1']:.3g}",
                         f"{r['peak_force'][0]:.6f} / {r['peak_force'][1]:.6f}",
                         f"{abs(r['peak_force'][0] / r['peak_force'][1] - 1):.1e}",
                         f"{abs(r['rms_force'][0] / r['rms_force'][1] - 1):.1e}",
                         f"{abs(r['mean_power'][0] / r['mean_power'][1] - 1):.1e}"] for r in s["mirror"]]))
        sh = s["shift"]
        L.append("\nShift (θA, θB) = (30° + δ, 94° + δ), eq. 58 masses (paper model); Σ τ_i² for a fixed random wrench "
                 "at the centred home pose and 5 cm off centre:\n")
        L.append(table(["δ (deg)", "RMS force (N)", "peak force (N)", "mean power (W)", "Σ τ² centred", "Σ τ² 5 cm off centre"],
                       [[f"{d:+.0f}", f"{r:.6f}", f"{p:.4f}", f"{w:.4f}", f"{c:.12g}", f"{o:.8g}"]
                        for d, r, p, w, c, o in zip(sh["delta_deg"], sh["rms"], sh["peak"], sh["power"],
                                                     s["centred_sum_tau2"], s["offcentre_sum_tau2"])]))
        L.append("")
    elif name == "c_cost":
        L.append("### Cost of a gradient evaluation (single design, after compilation)\n")
        L.append(table(["model", "plain evaluation (ms)", "value + gradient of the merit (ms)", "ratio",
                        "gradient compile (s)"],
                       [[m, g(v["plain_ms"]), g(v["grad_ms"]), f"{v['ratio']:.2f}", f"{v['grad_compile_s']:.1f}"]
                        for m, v in s.items()]))
        L.append("")
    elif name == "c_rerun":
        L.append("### Gradient runs again (compiled blocks cached)\n")
        L.append(table(["optimiser", "wall (s)", "evaluations", "peak (N)"],
                       [[k, f"{v['wall_s']:.1f}", v["evaluations"], f"{v['peak']:.2f}"] for k, v in s.items()]))
        L.append("")
    elif name == "c_baselines":
        L.append(f"### Gradient optimiser vs gradient-free baselines (paper model, peak force, same 4 variables, box and "
                 f"limits; gradient/plain cost ratio {s['ratio']:.2f})\n")
        rows = []
        for r in s["rows"]:
            wall = f"{r['wall_s']:.1f}" + (f" ({r['wall_cached_s']:.1f} cached)" if "wall_cached_s" in r else "")
            rows.append([r["method"], g(r.get("seed")), r["evaluations"], wall, r["feasible"], f"{r['objective']:.4f}",
                         f"{r['peak']:.2f}", xrow(r["x"])])
        L.append(table(["method", "seed", "evaluations", "wall (s)", "feasible", "objective", "peak (N)", "design"], rows))
        grid_s = state.get("_times", {}).get("b_grid")
        L.append("\nBudgets: the gradient runs' own evaluation counts (value+gradient evaluations, line-search trials "
                 "included) and those counts × the cost ratio; random search draws uniformly in the box, CMA-ES "
                 "(`cmaes`, population 8, σ₀ = 0.25 of the box, from eq. 58) works in the box scaled to [0, 1]; both "
                 "rank infeasible designs after every feasible one, by violation (the same untightened constraints), and "
                 "evaluate 8 designs per call (vmap). Their wall times exclude the batched evaluator's compilation, "
                 "done once in the scan section" + (f" (that whole section took {grid_s:.0f} s)" if grid_s else "")
                 + "; the gradient rows' first number includes the compilation of the optimiser step.\n")
    elif name == "d_multistart":
        L.append("### Batched multi-start (paper model, Adam, vmapped starts)\n")
        rows = []
        for r in s:
            pk = [p["peak"] for p in r["per_start"] if p["peak"] is not None]
            angles = "; ".join(f"({p['x']['theta_A']:.0f}°, {p['x']['theta_B']:.0f}°)" for p in r["per_start"])
            rows.append([r["starts"], f"{r['wall_first_s']:.1f}", f"{r['wall_cached_s']:.1f}",
                         f"{r['wall_cached_s'] / r['starts']:.2f}", r["evaluations"],
                         f"{len(pk)}/{r['starts']}", f"{r['best_peak']:.2f}",
                         f"{min(pk):.2f} – {max(pk):.2f}" if pk else "–", angles])
        L.append(table(["starts", "wall 1st call (s; compiles unless done earlier)", "wall cached (s)", "cached s / start", "evaluations",
                        "feasible", "best peak (N)", "peak range over starts (N)", "(θA, θB) per start"], rows))
        L.append("")
    return "\n".join(L)


HEADER = """# CKCM design optimisation (issue 5)

Generated by `experiments/ckcm_design.py` ({mode}); ellipse task (eq. 55, one loop in 0.5 s, {samples} samples),
payload 30 kg; demand: smooth peak of |τ| (β = 100, the optimiser's objective is it relative to eq. 58); design
variables θA, θB, m, m1 in the default box; default limits (min separation 0.1 m, cond(C) ≤ 30, stroke margin
0.01 m, legs ≥ 10° above the base, strength rule).  jax {jax} on CPU ({cpus} cores), float64.
"""


def render(state):
    meta = state.get("_meta", {})
    L = [HEADER.format(**meta) if meta else "# CKCM design optimisation\n"]
    order = [k for k in ("a_paper_adam", "a_paper_lbfgs", "a_multibody_adam", "a_multibody_lbfgs", "b_angles_only",
                         "b_symmetry", "b_grid", "c_cost", "c_rerun", "c_baselines", "d_multistart") if k in state]
    if any(k.startswith("a_") for k in order):
        L.append("## (a) From eq. 58, both models\n")
        L.append(summary_a(state))
        L.append(findings(state))
    for k in order:
        if k == "b_angles_only":
            L.append("## (b) The optimum's direction vs Nguyen & Pooran's guideline\n")
        if k == "c_cost":
            L.append("## (c) Gradient vs gradient-free at an equal budget of dynamics evaluations\n")
        if k == "d_multistart":
            L.append("## (d) Batched multi-start\n")
        L.append(render_section(state, k))
    if "_times" in state:
        L.append("Section wall times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in state["_times"].items()) + "\n")
    return "\n".join(L)


def branch_counts(state):
    if "d_multistart" not in state:
        return ""
    last = state["d_multistart"][-1]
    xs = [q["x"] for q in last["per_start"] if q["feasible"]]
    small = sum(x["theta_A"] < x["theta_B"] for x in xs)
    return (f"; of the {last['starts']}-start run's {len(xs)} feasible optima {small} have θA < θB and "
            f"{len(xs) - small} θA > θB")


def findings(state):
    """The interpretation, every number taken from ``state``."""
    L = ["## Findings\n"]
    a = {k[2:]: v for k, v in state.items() if k.startswith("a_")}
    dmean = float(np.mean([abs(v["x"]["theta_B"] - v["x"]["theta_A"]) for v in a.values()])) if a else float("nan")
    if a:
        L.append("- **Reduction.** From eq. 58 the peak actuator force falls by " + "; ".join(
            f"{100 * v['peak_reduction']:.1f} % ({v['before']['peak_force']:.1f} → {v['after']['peak_force']:.1f} N, "
            f"{k.replace('_', ' ')})" for k, v in a.items())
                 + ", every optimum passing the independent check: " + ", ".join(
            f"{k.replace('_', ' ')} {'yes' if v['verification']['all_ok'] else 'NO'}" for k, v in a.items()) + ".")
        lb = a.get("paper_lbfgs") or next(iter(a.values()))
        L.append(f"- **Masses: lighter links, as the guideline says.** m goes {lb['x_initial']['m']:.3g} → "
                 f"{lb['x']['m']:.3g} kg and m1 {lb['x_initial']['m1']:.3g} → {lb['x']['m1']:.3g} kg (paper, L-BFGS): both "
                 "parts of the leg end at (or, for Adam, near) the strength rule's lower bounds, 1 kg + ρ l_m SF F/σ and "
                 "4 kg + ρ l_s SF F/σ (see the `strength` lines of the checks). Six 20-kg legs outweigh the 30-kg "
                 "payload four times, so most of the gain is the legs' own weight and inertia. The centroid l_c = "
                 f"l_s/2 + (m1/2m) l moves only {lb['centroid_before']:.4f} → {lb['centroid_after']:.4f} m: with both parts "
                 "at their bounds m1/m is fixed by the rule's 1 kg : 4 kg hardware (≈ eq. 58's 4.4 : 15.6), so the "
                 "guideline's 'centroid near the base' shows as m1 pinned at its lower bound (less "
                 "moving mass, i.e. the centroid nearer the base, would lower the forces further: Fig. 9's trend, "
                 "reproduced in ckcm_reproduction.md), not as a large shift.")
        L.append("- **Angles: θB − θA grows until the stroke limit stops it.** " + "; ".join(
            f"{k.replace('_', ' ')}: (θA, θB) = ({v['x_initial']['theta_A']:.0f}°, {v['x_initial']['theta_B']:.0f}°) → "
            f"({v['x']['theta_A']:.1f}°, {v['x']['theta_B']:.1f}°), θB − θA = {v['x']['theta_B'] - v['x']['theta_A']:.1f}°"
            for k, v in a.items())
                 + ". The active geometric constraint is the stroke: the checks' worst stroke margin equals the 0.01 m "
                 "limit, on an even leg (the legs joining the points λ = 120k° + θA and Λ = 120k° + θB). At the centred "
                 "pose an even leg's length depends on θB − θA only (chord between the two circles), and so does, to "
                 "leading order, the force distribution (next item): the guideline 'small θA, large θB' is 'large "
                 "θB − θA' — more inclined, better-placed even legs — and the optimiser pushes it to the longest legs "
                 "the stroke allows.")
    if "b_symmetry" in state:
        sy = state["b_symmetry"]
        mdm = {m: max(max(abs(r[k][0] / r[k][1] - 1) for k in ("peak_force", "rms_force", "mean_power"))
                      for r in sy["mirror"] if r["model"] == m) for m in MODELS}
        sh = sy["shift"]
        rms = np.asarray(sh["rms"])
        pk = np.asarray(sh["peak"])
        cs = np.asarray(sy["centred_sum_tau2"])
        of = np.asarray(sy["offcentre_sum_tau2"])
        L.append("- **Why two optima (94°, 19°) and (27°, 103°): a mirror symmetry.** Odd legs sit at 0°, 120°, 240° on "
                 "both platforms, even ones θ further on. (θA, θB) → (120° − θA, 120° − θB) is the reflection φ → −φ "
                 "of the whole machine in the plane y = 0 (it maps {0, 120, 240}° to itself and {θ, θ + 120, θ + 240}° to "
                 "{120 − θ, 240 − θ, 360 − θ}°, same legs paired). The ellipse is symmetric about y = 0 too: the "
                 "mirrored machine runs the same loop backwards, and frictionless inverse dynamics is even in the "
                 "velocities (Coriolis/centrifugal terms quadratic) with gravity vertical and I₁ = I₂, so it needs the "
                 "same forces time-reversed: the same peak, RMS and power. Measured on random designs: largest "
                 f"relative difference {mdm['paper']:.1e} (paper model), {mdm['multibody']:.1e} (multibody). "
                 "The mirror of (94°, 19°) is (26°, 101°): the two optima are the same machine, one reflected, with "
                 f"θB − θA = ∓{dmean:.0f}°; which branch a run reaches depends on its start: from eq. 58 (small-θA branch) every "
                 "run here stays in it, the random starts of the multi-start and masses-fixed runs end in either "
                 "(their tables" + branch_counts(state) + ").")
        L.append(f"- **The flat valley: shifting θA and θB together.** Along (30° + δ, 94° + δ), δ = ±20°, the RMS force "
                 f"changes by {100 * (rms.max() / rms.min() - 1):.3f} % and the peak by {100 * (pk.max() / pk.min() - 1):.2f} % "
                 "(the shift table): nearly flat, but not constant to 8 digits in this measurement. The reason it is "
                 "nearly flat: a common shift δ rotates the even triad of legs rigidly about the vertical axis and leaves "
                 "the odd triad alone. For forces τ = C⁻ᵀ w, Σ τ_i² = wᵀ (CᵀC)⁻¹ w with CᵀC = Σ_odd c_i c_iᵀ + Σ_even "
                 "c_i c_iᵀ (c_i the leg's unit line, moments about the payload centre). Each triad's sum is invariant "
                 "under 120° rotations; its entries are products of two vectors and carry angular frequencies 0 and ±2 "
                 "about the axis, and a 3-fold average kills ±2 (and ±1), so the sum is invariant under every rotation "
                 "about the axis. Hence with the payload on the axis Σ τ² is exactly independent of δ: measured over the "
                 f"shifts, {np.ptp(cs) / cs.mean():.1e} relative spread for a fixed random wrench at the centred pose. Off "
                 f"the axis the symmetry is broken (5 cm off centre: {np.ptp(of) / of.mean():.1e}; averaged round the ellipse "
                 "much less is left, the RMS column above), and the leg "
                 "lengths at the centred pose depend on θB − θA only, so the stroke boundary runs along the valley too. "
                 "The optimisers therefore fix θB − θA sharply and the shift only weakly, which is why the optima "
                 "differ by a few degrees along the valley with nearly equal peak force.")
    if "b_angles_only" in state:
        g_ = state["b_angles_only"]
        L.append(f"- **Masses fixed at eq. 58** (θA, θB only): peak {g_['before']['peak_force']:.1f} → "
                 f"{g_['after']['peak_force']:.1f} N ({-100 * g_['peak_reduction']:+.1f} %) at {xrow(g_['x'])}, against "
                 + ", ".join(f"{-100 * v['peak_reduction']:+.1f} %" for v in a.values())
                 + " with the masses free: the geometric effect alone is the smaller part. The starts end on both "
                 "mirror branches with θB − θA ≈ " + ", ".join(f"{st['x']['theta_B'] - st['x']['theta_A']:+.1f}°"
                 for st in g_["starts"] if st["feasible"]) + " (start table; a start ending well short of that |θB − θA| sits in a poor local optimum, see its "
                 "objective), against "
                 f"|θB − θA| = {dmean:.1f}° in the 4-variable runs. "
                 + ("Its independent check passes." if g_["verification"]["all_ok"] else
                    "Its independent check **fails**, by a hair: " + "; ".join(
                        ln.strip() for ln in g_["verification"]["text"].splitlines() if "VIOLATED" in ln)
                    + " — the design sits on the stroke boundary at the optimiser's 64 samples (scaled violation "
                    f"{g_['after']['violation_stroke']:.2g}, i.e. {-0.1 * g_['after']['violation_stroke'] * 1e6:.0f} µm inside) and the leg "
                    "gets longer between them. The optimiser's bookkeeping of this run accepted a design as feasible at "
                    "g ≤ 0 on its samples, not at the tightened g ≤ −tightening it converges to; counting only designs "
                    "with a margin as feasible avoids this (the package's Settings.feasibility_margin, added after "
                    "this run)."))
    if "b_grid" in state:
        gr = state["b_grid"]
        L.append("- **The (θA, θB) scan** (figure) shows it at a glance: the force contours run parallel to the "
                 "diagonal θA = θB (the force depends on θB − θA and hardly on a common shift), the force falls as "
                 "|θB − θA| grows away from the singular band θA ≈ θB, and the feasible region ends at two edges "
                 f"parallel to the diagonal, |θB − θA| ≈ {dmean:.0f}° (the stroke limit): every optimum sits on one of those "
                 "edges, the two edges mirror images across the dotted line θA + θB = 120°. With "
                 "the optimised masses almost the whole plane is infeasible: those masses are exactly what the "
                 "strength rule allows for the optimum's ~300 N, so any design needing more force breaks the rule "
                 f"({100 * np.mean(np.asarray(gr['optimised masses (L-BFGS)']['violation']) <= 0):.0f} % of the grid "
                 "feasible).")
    if "c_baselines" in state:
        rows = state["c_baselines"]["rows"]
        grad = [r for r in rows if r["method"].startswith("gradient")]
        L.append("- **Gradient vs gradient-free** (paper model, equal budget of evaluations): " + "; ".join(
            f"{r['method']} {r['peak']:.2f} N in {r['evaluations']} evaluations" for r in grad) + "; " + "; ".join(
            f"{m} best/median over seeds at budget {b}: "
            f"{min(r['peak'] for r in rows if r['method'] == m and r.get('budget') == b and r['feasible']):.2f} / "
            f"{np.median([r['peak'] for r in rows if r['method'] == m and r.get('budget') == b and r['feasible']]):.2f} N"
            for b in sorted({r['budget'] for r in rows if 'budget' in r}) for m in ("random search", "CMA-ES")
            if any(r['method'] == m and r.get('budget') == b and r['feasible'] for r in rows)) + ". "
            "On this 4-variable problem CMA-ES is the gradient optimiser's equal once it gets the evaluations a "
            "gradient costs (the budget × the measured cost ratio), and random search is far behind. In wall "
            "time the gradient-free methods win here: their evaluations are batched (vmap over 8 designs) and "
            "compile in seconds, while the gradient step is sequential and its first call compiles the whole "
            "step (tens of seconds to minutes, the 'wall incl. compile' column; the cached re-run is seconds). "
            "Not measured here: with more design variables the gradient's cost per step stays the same while "
            "CMA-ES needs larger populations and more generations, which is where the gradient should pay off.")
    return "\n".join(L) + "\n"


def summary_a(state):
    rows = []
    for model in MODELS:
        for opt in OPTIMIZERS:
            k = f"a_{model}_{opt}"
            if k in state:
                s = state[k]
                rows.append([model, opt, f"{s['before']['peak_force']:.2f}", f"{s['after']['peak_force']:.2f}",
                             f"{-100 * s['peak_reduction']:+.1f} %", f"{s['after']['rms_force']:.2f}",
                             f"{s['after']['mean_power']:.2f}", xrow(s["x"]), s["evaluations"], f"{s['wall_s']:.0f}",
                             "yes" if s["verification"]["all_ok"] else "**no**"])
    return table(["model", "optimiser", "peak eq. 58 (N)", "peak optimum (N)", "change", "RMS (N)", "power (W)",
                  "optimum", "evaluations", "wall (s)", "verified"], rows) + "\n"


# --- gradient against gradient-free at equal wall time (issue 26, item 4) ---------------------------------
def compare_config(args):
    """Sizes of the comparison: --quick's, or the issue's, each overridden by its option.  ``budget_s``: every
    run's wall time, compilation included; CMA-ES runs ``free_factor`` times longer, so that its time to the
    gradient's value is measured rather than bounded."""
    cfg = (dict(samples=4, mc=4, budget_s=60.0, free_factor=2.0, seeds=(0, 1)) if args.quick else
           dict(samples=64, mc=256, budget_s=600.0, free_factor=3.0, seeds=(0, 1, 2)))
    for key, opt in (("samples", "samples"), ("mc", "mc_samples"), ("budget_s", "budget_s"),
                     ("free_factor", "free_factor")):
        if getattr(args, opt) is not None:
            cfg[key] = type(cfg[key])(getattr(args, opt))
    if args.seeds:
        cfg["seeds"] = tuple(int(v) for v in args.seeds.split(","))
    cfg.update(model=args.model, space=args.space, robust=None if args.robust == "none" else args.robust,
               target=args.target, batch_size=args.batch_size)
    return cfg


def compare_problem(cfg):
    """The comparison's problem: the ellipse; the full space with the payload held at the task's 30 kg (a lighter
    payload lowers every force: no design merit) or a named space; the robust statistic over ``mc`` draws."""
    task = D.ellipse_task(period=0.5, samples_per_path=cfg["samples"])
    space = (D.make_space(tuple(n for n in D.FULL_FREE if n != "M"), per_leg=True) if cfg["space"] == "full"
             else D.named_space(cfg["space"]))
    robust = {} if cfg["robust"] is None else dict(robust=cfg["robust"], robust_samples=cfg["mc"])
    problem, data = D.make_problem(task, space=space, model=cfg["model"], batch_size=cfg["batch_size"], **robust)
    return task, problem, data


def seed_start(problem, data, seed):
    """Seed 0: the paper's design; seed s: it moved by uniform ±5 % of the box per variable (inside the box)."""
    x = np.asarray(problem.space.from_params(data.base), float)
    if seed == 0:
        return x
    lo, hi = problem.space.bounds()
    rng = np.random.default_rng(1000 + seed)
    return np.clip(x + 0.05 * (hi - lo) * rng.uniform(-1, 1, x.size), lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo))


def drop_compiled():
    """Forget every compiled program (jax's and the design package's caches): the next run pays its compilation."""
    from mrds_jax.ckcm.design import objectives as O, optimizer as Opt, problem as P
    jax.clear_caches()
    for f in (Opt.compiled_block, Opt.compiled_evaluate, O._jitted_forces_and_speeds, P._scales):
        f.cache_clear()
    _EVAL.clear()


def compare_settings(optimizer):
    """The design package's defaults (Adam's learning rate 0.05 in the box's logit coordinates, ρ, tightening)
    with multiplier updates every 10 steps, steps without end (the budget stops the run) and a design counted
    feasible at max violation ≤ 0, as for CMA-ES and random search."""
    return D.Settings(optimizer=optimizer, iterations=10**7, update_every=10, feasibility_margin=0.0)


def timed_gradient_run(task, problem, data, optimizer, seed, budget_s):
    """One gradient run (one start, ``seed_start``) for ``budget_s`` s of wall time, compilation included (it
    stops at the first block that ends past the budget), with its trace of (wall s, best feasible objective,
    steps) after every block of steps and the block's compile time."""
    drop_compiled()
    trace, compile_s = [], []
    t0 = time.perf_counter()

    def on_block(steps, best):
        trace.append((time.perf_counter() - t0, float(best), int(steps)))
        return trace[-1][0] >= budget_s
    result = D.optimize(problem, data, compare_settings(optimizer), task=task, x0=seed_start(problem, data, seed),
                        progress=False, on_block=on_block,
                        log=lambda line: compile_s.append(float(line.split(" in ")[1].split(" s")[0]))
                        if line.startswith("optimiser block ready") else None)
    return {"method": optimizer, "seed": seed, "budget_s": budget_s, "wall_s": time.perf_counter() - t0,
            "status": result.status, "steps": trace[-1][2], "evaluations": result.evaluations,
            "objective": trace[-1][1], "trace": trace, "compile_s": compile_s[0], "first_block_s": trace[0][0],
            "per_step_s": (trace[-1][0] - trace[0][0]) / max(trace[-1][2] - trace[0][2], 1)}


def timed_gradient_free_run(problem, data, method, seed, budget_s):
    """CMA-ES (population BATCH, σ₀ = 0.15 of the box, mean at ``seed_start``) or random search (uniform in the
    box) for ``budget_s`` s of wall time, compilation of the batched evaluator included; its trace of (wall s,
    best feasible objective, evaluations)."""
    from cmaes import CMA
    drop_compiled()
    lo, hi = problem.space.bounds()
    n = len(lo)
    z0 = (seed_start(problem, data, seed) - lo) / (hi - lo)
    rng = np.random.default_rng(seed)
    opt = CMA(mean=z0, sigma=0.15, bounds=np.tile([0.0, 1.0], (n, 1)), seed=seed, population_size=BATCH)
    t0 = time.perf_counter()
    best, trace, used = np.inf, [], 0
    while time.perf_counter() - t0 < budget_s:
        zs = np.array([opt.ask() for _ in range(BATCH)]) if method == "CMA-ES" else rng.uniform(size=(BATCH, n))
        r = evaluate_many(problem, data, lo + (hi - lo) * zs)
        used += BATCH
        key = rank_key(r["objective"], r["violation"])
        if method == "CMA-ES":
            opt.tell(list(zip(zs, key)))
        best = min(best, float(np.min(np.where(r["violation"] <= 0, r["objective"], np.inf))))
        trace.append((time.perf_counter() - t0, best, used))
    return {"method": method, "seed": seed, "budget_s": budget_s, "wall_s": time.perf_counter() - t0,
            "evaluations": used, "objective": best, "trace": trace, "first_batch_s": trace[0][0],
            "per_evaluation_s": (trace[-1][0] - trace[0][0]) / max(used - BATCH, 1)}


def first_reaching(trace, target):
    """The first entry (wall s, best, count) of ``trace`` with best ≤ target (None: never)."""
    return next((p for p in trace if p[1] <= target), None)


def time_to(trace, target):
    """The first wall time of ``trace`` [(s, best, ...)] at which best ≤ target (None: never)."""
    p = first_reaching(trace, target)
    return None if p is None else p[0]


def best_by(trace, t_budget):
    """The best value of ``trace`` reached by ``t_budget`` s (inf: none feasible by then)."""
    return min([p[1] for p in trace if p[0] <= t_budget], default=np.inf)


def machine_load():
    try:
        return "load average (1, 5, 15 min) " + ", ".join(f"{v:.2f}" for v in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return f"{os.cpu_count()} CPUs, load unknown"


def compare(args):
    cfg = compare_config(args)
    name = f"ckcm_design_compare{'_quick' if args.quick else ''}{args.tag}"
    load_before = machine_load()
    t_all = time.perf_counter()
    task, problem, data = compare_problem(cfg)
    runs, B = [], cfg["budget_s"]
    for seed in cfg["seeds"]:
        runs += [timed_gradient_run(task, problem, data, opt, seed, B) for opt in OPTIMIZERS]
        runs += [timed_gradient_free_run(problem, data, "CMA-ES", seed, cfg["free_factor"] * B),
                 timed_gradient_free_run(problem, data, "random search", seed, B)]
        for r in runs[-4:]:
            print({k: v for k, v in r.items() if k != "trace"}, flush=True)
            r["trace"] = [p for i, p in enumerate(r["trace"]) if i == 0 or p[1] < r["trace"][i - 1][1]]
        # written after every seed (the traces keep their improvements only: CMA-ES logs every batch)
        done = dict(cfg, seeds=tuple(sorted({r["seed"] for r in runs})))
        record = {"cfg": done, "load": [load_before, machine_load()], "total_s": time.perf_counter() - t_all,
                  "command": "python experiments/ckcm_design.py --compare" + "".join(
                      f" {a}" for a in sys.argv[1:] if a != "--compare"), "size": problem.space.size, "runs": runs}
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{name}.json").write_text(json.dumps(record, indent=1, default=float))
        render_compare(name, args.quick)


def seed_summary(cfg, rs):
    """One seed's targets and times: CMA-ES's value at the budget B, the best gradient value at B (and the
    gradient run that reached it, and when), CMA-ES's time and evaluations to that value, and their ratio
    (a lower bound where CMA-ES never reached it: its whole run's time)."""
    B = cfg["budget_s"]
    cma = next(r for r in rs if r["method"] == "CMA-ES")
    grads = [r for r in rs if r["method"] in OPTIMIZERS]
    cma_at_B = best_by(cma["trace"], B) if cfg["target"] is None else float(cfg["target"])
    g_best = min(best_by(r["trace"], B) for r in grads)
    out = {"cma_at_B": cma_at_B, "grad_best": g_best, "grad_method": None, "grad_time": None, "cma_time": None,
           "cma_evaluations": None, "ratio": None, "lower_bound": False}
    if not np.isfinite(g_best):
        return out
    g = min(grads, key=lambda r: (time_to(r["trace"], g_best) or np.inf))
    out.update(grad_method=g["method"], grad_time=time_to(g["trace"], g_best))
    hit = first_reaching(cma["trace"], g_best)
    if hit is None:
        out.update(ratio=cma["wall_s"] / out["grad_time"], lower_bound=True)
    else:
        out.update(cma_time=hit[0], cma_evaluations=hit[2], ratio=hit[0] / out["grad_time"])
    return out


def render_compare(name, quick):
    """The comparison's markdown from its JSON (``--compare --render`` rewrites it without running)."""
    record = json.loads((OUT / f"{name}.json").read_text())
    cfg, runs = record["cfg"], record["runs"]
    B = cfg["budget_s"]
    fmt = (lambda v: "none feasible" if v is None or not np.isfinite(v) else f"{v:.4f}")
    sec = (lambda v: "not reached" if v is None else f"{v:.1f}")
    what = (f"{record['size']} variables ({cfg['space']} space{', payload held at 30 kg' if cfg['space'] == 'full' else ''}), "
            f"model {D.model_description(cfg['model'])}, ellipse of Nguyen & Pooran eq. 55 (0.5 s, {cfg['samples']} samples), "
            + (f"objective the smooth 95th percentile ({cfg['robust']}) of the soft peak force over {cfg['mc']} as-built "
               "machines (1 mm, 2 %)" if cfg["robust"] else "objective the soft peak force")
            + "; objectives relative to the paper's design")
    lines = [f"# Gradient against gradient-free at equal wall time{' — quick' if quick else ''}", "",
             f"{what}. Command: `{record['command']}`. Machine: {record['load'][0]} at the start, {record['load'][1]} "
             "at the end (shared: wall times are this machine's under that load).", "",
             f"Every run has the same wall-time budget B = {B:.0f} s per seed, its own compilation included (every "
             "compiled program dropped before it); CMA-ES runs "
             f"{cfg['free_factor']:g} × B so that its time to the gradient's value is measured, not bounded "
             "(its 'best at B' is its value at B). Adam and L-BFGS are the design package's defaults (Adam's step "
             "0.05 in the box's logit coordinates; L-BFGS with its backtracking line search; the augmented "
             "Lagrangian updating its multipliers every 10 steps), run step after step until the first block of 10 "
             "steps that ends past B; their times are those of block ends (a value reached inside a block counts "
             "at the block's end). A design counts as feasible at max violation ≤ 0 for every method (the "
             "gradient runs' optimiser still aims 2e-3 scaled units inside the constraints).", "",
             "| seed | method | wall (s) | steps or evaluations | compile (s) | per step or evaluation (s) | best "
             "feasible at B | best at the end | time to CMA-ES's value at B (s) | time to the best gradient value (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    summaries = []
    for seed in cfg["seeds"]:
        rs = [r for r in runs if r["seed"] == seed]
        s = seed_summary(cfg, rs)
        summaries.append((seed, s))
        for r in rs:
            grad = r["method"] in OPTIMIZERS
            count = f"{r['steps']} steps ({r['evaluations']} evaluations)" if grad else f"{r['evaluations']}"
            comp = (f"{r['compile_s']:.1f} (block; first block done at {r['first_block_s']:.1f})" if grad
                    else f"first batch of {BATCH} done at {r['first_batch_s']:.1f}")
            per = (("– (one block)" if r["per_step_s"] == 0 else f"{r['per_step_s']:.3f}") if grad
                   else f"{r['per_evaluation_s']:.4f}")
            lines.append(f"| {seed} | {r['method']} | {r['wall_s']:.1f} | {count} | {comp} | {per} | "
                         f"{fmt(best_by(r['trace'], B))} | {fmt(r['objective'])} | "
                         f"{sec(time_to(r['trace'], s['cma_at_B']) if np.isfinite(s['cma_at_B']) else None)} "
                         f"(target {fmt(s['cma_at_B'])}) | "
                         f"{sec(time_to(r['trace'], s['grad_best']) if np.isfinite(s['grad_best']) else None)} "
                         f"(target {fmt(s['grad_best'])}) |")
    lines += ["", "CMA-ES's time to the best gradient value at B over the gradient optimiser's own time to it "
              "(> 1: the gradient was sooner; the aim is ≥ 3):", ""]
    for seed, s in summaries:
        if s["ratio"] is None:
            lines.append(f"- seed {seed}: no feasible gradient value by B.")
        elif s["lower_bound"]:
            lines.append(f"- seed {seed}: > {s['ratio']:.2f}× — {s['grad_method']} reached {s['grad_best']:.4f} at "
                         f"{s['grad_time']:.1f} s; CMA-ES had not reached it when its run ended.")
        else:
            lines.append(f"- seed {seed}: {s['ratio']:.2f}× — {s['grad_method']} reached {s['grad_best']:.4f} at "
                         f"{s['grad_time']:.1f} s; CMA-ES at {s['cma_time']:.1f} s, after {s['cma_evaluations']} "
                         "evaluations.")
    lines += ["", f"Total wall {record['total_s']:.0f} s."]
    (OUT / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {OUT / name}.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--large", action="store_true")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated section prefixes (a,b,c,d); default all")
    ap.add_argument("--render", action="store_true", help="only rewrite the markdown and plots from the JSON")
    ap.add_argument("--out", default=str(OUT), help="output folder (default experiments/out)")
    ap.add_argument("--compare", action="store_true",
                    help="only gradient against gradient-free at equal wall time (issue 26; options below)")
    ap.add_argument("--space", default="full", choices=["paper", "symmetric", "full"], help="--compare: space")
    ap.add_argument("--robust", default="quantile", choices=["quantile", "mean", "none"], help="--compare")
    ap.add_argument("--model", default="paper", choices=list(MODELS), help="--compare: dynamic model")
    ap.add_argument("--samples", type=int, help="--compare: path samples (quick 4, default 64)")
    ap.add_argument("--mc-samples", type=int, help="--compare: Monte Carlo draws (quick 4, default 256)")
    ap.add_argument("--batch-size", type=int, default=16, help="--compare: samples and draws vectorised together "
                    "(16 suits a CPU; on a GPU, the number of draws)")
    ap.add_argument("--budget-s", type=float, help="--compare: every run's wall time per seed, compilation "
                    "included (quick 60, default 600)")
    ap.add_argument("--free-factor", type=float, help="--compare: CMA-ES runs this many budgets (quick 2, default 3)")
    ap.add_argument("--tag", default="", help="--compare: suffix of the output files' names")
    ap.add_argument("--seeds", default="", help="--compare: comma-separated seeds (quick 0,1; default 0,1,2)")
    ap.add_argument("--target", type=float, help="--compare: objective to reach (default: each seed's CMA-ES result)")
    args = ap.parse_args()
    set_out(args.out)
    if args.compare and args.render:
        return render_compare(f"ckcm_design_compare{'_quick' if args.quick else ''}{args.tag}", args.quick)
    if args.compare:
        require("cmaes", "ckcm_design.py --compare (the CMA-ES baseline)")
        return compare(args)
    cfg = config(args)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.render:
        state = load_state(True)
        if "b_grid" in state:
            plot_grid(state["b_grid"], state)
        MD.write_text(render(state))
        print(f"wrote {MD}")
        return
    state = load_state(args.resume)
    state["_meta"] = {"mode": "--quick" if args.quick else "--large" if args.large else "default",
                      "samples": cfg["samples"], "jax": jax.__version__, "cpus": os.cpu_count(), "cfg": cfg}
    want = set(args.only.split(",")) if args.only else {"a", "b", "c", "d"}
    if "c" in want:                     # section c's baselines, checked before sections a and b compute
        require("cmaes", "ckcm_design.py's section c (the CMA-ES baseline; --only a,b,d leaves it out)")
    t0 = time.perf_counter()
    if "a" in want or "b" in want or "c" in want:
        for model in MODELS:
            for opt in OPTIMIZERS:
                if model == "multibody" and "a" not in want:
                    continue
                section(state, f"a_{model}_{opt}", optimise_nominal, cfg, model, opt)
    if "b" in want:
        section(state, "b_angles_only", geometry_only, cfg)
        section(state, "b_symmetry", symmetries, cfg)
        section(state, "b_grid", grid_scan, cfg, state)
    if "c" in want:
        section(state, "c_cost", cost_ratio, cfg)
        section(state, "c_rerun", rerun_cached, cfg, state)
        section(state, "c_baselines", baselines, cfg, state)
    if "d" in want:
        section(state, "d_multistart", multistart, cfg)
    state["_total_s"] = state.get("_total_s", 0.0) * bool(args.resume) + time.perf_counter() - t0
    if "b_grid" in state:
        plot_grid(state["b_grid"], state)   # again, with the multi-start optima
    save_state(state)
    print(f"total {state['_total_s']:.0f} s; wrote {MD}")


if __name__ == "__main__":
    main()
