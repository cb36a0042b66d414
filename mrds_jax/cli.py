"""The ``mrds-jax`` command line.

A user error (a bad option value, a missing or damaged file, an output folder that cannot be written) ends
with one line on stderr naming what is wrong and exit status 2, never a traceback: every subcommand's
checks raise :class:`mrds_jax.validation.InputError` (or a subclass) before anything is compiled, and
:func:`main` turns it into that line."""
import argparse
import os
import sys
import sysconfig
import time
from pathlib import Path

from .sysfile import cli as sysfile_cli
from mrds_jax.validation import ArgumentError, InputError

EXAMPLE_ROBOTS = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "panda": "panda_description/urdf/panda.urdf",
}


def _robot_path(name):
    if name in EXAMPLE_ROBOTS:
        root = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
        path = root / EXAMPLE_ROBOTS[name]
        if not path.exists():
            raise ArgumentError(f"--robot {name!r} needs example-robot-data: pip install example-robot-data")
        return path
    path = Path(name)
    if not path.exists():
        raise ArgumentError(f"--robot: no such URDF file: {path} (or use one of {sorted(EXAMPLE_ROBOTS)})")
    return path


def cmd_dynamics(args):
    """Batched rigid-tree dynamics of a URDF robot, with the project's internal cross-checks."""
    from mrds_jax import validation
    validation.count(args.batch, "--batch", "mrds-jax dynamics")
    import jax
    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from tqdm import tqdm

    import mrds_jax as mj
    from mrds_jax.loaders.urdf import load_urdf

    module = load_urdf(_robot_path(args.robot))
    t = module.topology
    frame = t.frame_names[t.frame_index(args.frame)] if args.frame else t.frame_names[-1]    # checked before compiling
    print(f"{args.robot}: {t.n_links} moving links, nq={t.nq}, nv={t.nv}; operational point {frame!r}")
    rng = np.random.default_rng(args.seed)
    q = jnp.asarray(rng.uniform(-1.5, 1.5, (args.batch, t.nq)))
    v = jnp.asarray(rng.uniform(-1, 1, (args.batch, t.nv)))
    tau = jnp.asarray(rng.uniform(-5, 5, (args.batch, t.nv)))

    def one(q, v, tau):
        qdd = mj.aba(module, q, v, tau)
        H = mj.mass_matrix(module, q)
        return dict(
            qdd=qdd, residual=H @ qdd + mj.nonlinear_effects(module, q, v) - tau,
            crba_routes=H - mj.mass_matrix_parallel(module, q),
            osim_routes=mj.inverse_osim(module, q, [frame]) - mj.inverse_osim(module, q, [frame], method="recursive"))

    steps = [("compile", None), ("run", None)]
    with tqdm(steps, desc="dynamics", unit="phase") as bar:
        f = jax.jit(jax.vmap(one))
        t0 = time.perf_counter()
        compiled = f.lower(q, v, tau).compile()
        t_compile = time.perf_counter() - t0
        bar.update(1)
        out = jax.block_until_ready(compiled(q, v, tau))
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(q, v, tau))
        t_run = time.perf_counter() - t0
        bar.update(1)
    print(f"batch {args.batch}: compile {t_compile:.1f} s, run {t_run * 1e3:.2f} ms "
          f"({t_run / args.batch * 1e6:.2f} µs per state, ABA + CRBA x2 + RNEA + Λ⁻¹ x2)")
    for key, label in (("residual", "H q̈ + C v + G − τ (ABA vs CRBA/RNEA)"),
                       ("crba_routes", "serial CRBA − recursive-doubling CRBA"),
                       ("osim_routes", "Λ⁻¹ direct − Λ⁻¹ recursive")):
        print(f"  max |{label}| = {float(jnp.abs(out[key]).max()):.2e}")
    return 0


def _parse_bounds(items, free):
    """--bound NAME=LO:HI (degrees for angles, SI otherwise) -> {name: (lo, hi)} in SI/radians."""
    import numpy as np
    from mrds_jax.ckcm.design.space import UNITS
    out = {}
    for item in items or ():
        try:
            name, rng = item.split("=", 1)
            lo, hi = (float(v) for v in rng.split(":", 1))
        except ValueError:
            raise ArgumentError(f"--bound {item!r}: expected NAME=LO:HI, e.g. theta_A=5:60 (degrees) or m=3:30 (kg)")
        if name not in UNITS:
            raise ArgumentError(f"--bound {item!r}: unknown variable {name!r}; known: {sorted(UNITS)}")
        if UNITS[name] == "deg":
            lo, hi = np.radians(lo), np.radians(hi)
        out[name] = (lo, hi)
    return out


TASKS = ("ellipse", "sweep", "payload")


def _numbers(text, option):
    """'1,0.5,2' -> [1.0, 0.5, 2.0] (an empty list for an empty string); ArgumentError naming ``option``."""
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ArgumentError(f"{option} {text!r}: expected comma-separated numbers, e.g. 1,0.5,2") from None


def _design_task(args):
    """The ``Task`` of --task (ellipse, sweep, payload), --combine, --weights and the tasks' options."""
    from mrds_jax.ckcm import design as D
    names = [n.strip() for n in args.task.split(",")]
    unknown = [n for n in names if n not in TASKS]
    if unknown or len(set(names)) != len(names):
        raise ArgumentError(f"--task {args.task!r}: " + (f"unknown task(s) {unknown}; use a comma-separated list "
                            f"of {list(TASKS)}" if unknown else "a task is listed twice"))
    ellipse = {"kind": "ellipse", "period": args.period}
    specs = {"ellipse": ellipse,
             "sweep": D.workspace_sweep(half_width=args.sweep_half_width, points=args.sweep_points),
             "payload": D.payload_range(ellipse, _numbers(args.payload_masses, "--payload-masses"))}
    combine = args.combine or ("worst" if len(names) > 1 else "pooled")
    weights = None if args.weights is None else tuple(_numbers(args.weights, "--weights"))
    return D.Task(paths=tuple(specs[n] for n in names), samples_per_path=args.samples, combine=combine,
                  weights=weights), names


def _print_design_table(result):
    from mrds_jax.ckcm.design.space import UNITS
    print("\n| quantity | start | optimised |\n|---|---|---|")
    for k in result.x:
        print(f"| {k} ({UNITS[k]}) | {result.x_initial[k]:.4f} | {result.x[k]:.4f} |")
    robust = [("robust_peak", "N"), ("mean_peak", "N")] if "robust_peak" in result.after else []
    paths = [(k, "") for k in sorted(result.after) if k.startswith("demand_path_")]
    for k, unit in [("peak_force", "N"), ("rms_force", "N"), ("mean_power", "W"), ("max_condition", ""),
                    ("min_separation", "m")] + robust + paths:
        print(f"| {k} {unit} | {result.before[k]:.4f} | {result.after[k]:.4f} |")


def _compilation_cache(args):
    """Keep XLA's compiled programs on disk between runs (``--cache-dir``; off with ``--no-cache``)."""
    if args.no_cache:
        return
    from .console import enable_compilation_cache
    enable_compilation_cache(args.cache_dir)     # one sub-folder per machine type: no cross-machine loader errors


def cmd_optimize(args):
    """Design optimisation of the CKCM end-effector (gradients through the closed-chain dynamics)."""
    from mrds_jax import validation
    out = validation.output_dir(args.out, "--out")                  # before any compilation
    import jax
    jax.config.update("jax_enable_x64", True)
    _compilation_cache(args)
    import csv
    import numpy as np
    from mrds_jax.ckcm import design as D
    if args.resume:
        D.checkpoint.saved_run(out)                # a missing or damaged saved run is named before compiling

    free = tuple(args.free.split(","))
    if args.optimize_radii:
        free += ("r_A", "r_B")
    limits = D.Limits(min_separation=args.min_separation, max_condition=args.max_condition,
                      stroke_margin=args.stroke_margin, min_leg_distance=args.min_leg_distance)
    try:
        task, task_names = _design_task(args)
        tolerances = D.Tolerances(point_sd=args.point_tolerance * 1e-3, mass_sd=args.mass_tolerance / 100)
        problem, data = D.make_problem(task, free=free, bounds=_parse_bounds(args.bound, free), limits=limits,
                                       model=args.model, legs=args.legs, demand=args.objective, space=args.space,
                                       robust=args.robust, robust_samples=args.mc_samples, tolerances=tolerances,
                                       seed=args.seed, batch_size=args.batch_size)
        settings = D.Settings(optimizer=args.optimizer, iterations=args.iterations, starts=args.starts,
                              learning_rate=args.lr, seed=args.seed)
    except InputError:
        raise                                       # one line (main)
    except ValueError as e:                        # a bad combination of options: a user error too
        raise ArgumentError(str(e)) from None
    model = D.model_description(args.model, args.legs)
    robust = "" if args.robust is None else (
        f"; robust: {args.robust} of the peak force over {args.mc_samples} as-built machines (points ± "
        f"{args.point_tolerance} mm, part masses ± {args.mass_tolerance} %, 1 sd)")
    described = {"ellipse": f"ellipse of Nguyen & Pooran eq. 55 (period {args.period} s, {args.samples} samples)",
                 "sweep": f"workspace sweep ({args.sweep_points}^3 static poses, ± {args.sweep_half_width} m)",
                 "payload": f"the ellipse at payloads {args.payload_masses} kg"}
    combined = "" if len(task_names) == 1 else (
        f" combined {task.combine}" + ("" if task.weights is None else f" with weights {list(task.weights)}")
        + " (demand_path_<p>: each task's demand, in this order)")
    print(f"task: {' + '.join(described[n] for n in task_names)}{combined}; model: {model}"
          f"; objective {args.objective}{robust}; {problem.space.size} free variables {list(problem.space.free)}; "
          f"{args.optimizer}, {args.iterations} steps x {args.starts} start(s); output {out}/")
    t0 = time.perf_counter()
    result = D.optimize(problem, data, settings, task=task, out_dir=out, resume=args.resume)
    wall = time.perf_counter() - t0
    print(f"\n{result.status}: {result.message}")
    print(f"wall {wall:.1f} s (compilation included), {result.evaluations} objective+gradient evaluations")
    _print_design_table(result)
    print(f"\npeak actuator force {result.before['peak_force']:.2f} N -> {result.after['peak_force']:.2f} N "
          f"({100 * result.peak_reduction:.1f} % less; {model}, at the {args.samples} path samples)")
    if args.robust is not None:
        print(f"robust peak force ({args.robust}) {result.before['robust_peak']:.2f} N -> "
              f"{result.after['robust_peak']:.2f} N ({model})")
    report = D.verify_design(result.params, task, limits, args.model, args.legs)
    result.verification = report
    result.save(out / "design.json")
    print("independent check of the optimum (4x denser path sampling, non-smoothed):")
    print(D.format_report(report))
    with open(out / "history.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        keys = sorted(result.history)
        w.writerow(["step", "start"] + keys)
        h = {k: np.asarray(v) for k, v in result.history.items()}
        for i in range(len(h[keys[0]])):
            for s in range(h[keys[0]].shape[1]):
                w.writerow([i, s] + [f"{h[k][i, s]:.10g}" for k in keys])
    if not args.no_plots:
        import matplotlib
        matplotlib.use("Agg")
        D.plot_history(result, out / "optimisation.png")
        D.plot_forces(result, out / "forces.png")
        D.plot_geometry(result, out / "geometry.png")
        D.plot_geometry_3d(result, out / "geometry3d.png")
        draws = None
        if args.robust is not None:                 # the as-built machines' peak forces, start and optimum
            from mrds_jax.ckcm.design.problem import design_inputs, robust_peaks
            peaks = jax.jit(lambda x: robust_peaks(problem, data, *design_inputs(problem, data, x)))
            draws = [np.asarray(peaks(problem.space.from_params(p))) for p in (result.initial_params, result.params)]
        D.plot_force_distribution(result, out / "force_distribution.png", draws=draws)
    print(f"wrote {out}/design.json (load with mrds_jax.ckcm.design.load_design, or `mrds-jax simulate --design "
          f"{out}/design.json`), history.csv" + ("" if args.no_plots else ", optimisation.png, forces.png, geometry.png, "
                                                 "geometry3d.png, force_distribution.png"))
    return 0 if result.status == "converged" and report["all_ok"] else 1


def cmd_simulate(args):
    """Simulate a system file (``mrds_jax.sysfile``), or fly a saved design on its task under computed torque."""
    if args.system_file:
        _compilation_cache(args)
        return sysfile_cli.cmd_simulate_file(args)
    if not args.design:
        raise ArgumentError("give a SYSTEM_FILE (or a ready-made name: fourbar, stewart, dual_arm_grasp, "
                            "quadruped) or --design design.json")
    from mrds_jax import validation
    if args.viewer:
        raise ArgumentError("--viewer is for system files (mrds-jax simulate SYSTEM_FILE --viewer), not --design")
    validation.positive(args.dt, "--dt", "mrds-jax simulate")
    import jax
    jax.config.update("jax_enable_x64", True)
    _compilation_cache(args)
    from mrds_jax.ckcm.design import load_design
    from mrds_jax.ckcm.design.simulation import simulate_design
    design = load_design(args.design)               # DesignFileError: one line (main)
    from mrds_jax.ckcm.design import model_description
    legs = design.problem.get("legs", "bench")
    designed_with = model_description(design.problem["model"], legs)
    print(f"design {args.design}: {design.x} ({design.status}); optimiser's peak force "
          f"{design.after['peak_force']:.3f} N ({designed_with}, at the task samples)")
    t0 = time.perf_counter()
    runs = simulate_design(design, dt=args.dt)
    for i, r in enumerate(runs):
        print(f"path {i}: {r['steps']} RK4 steps of {r['dt'] * 1e3:.3g} ms under computed torque "
              f"({model_description('multibody', legs)} as the plant): "
              f"peak applied force {r['peak_force']:.3f} N, max position error {r['max_position_error']:.2e} m, "
              f"max ball-joint gap {r['max_closure_error']:.2e} m")
    if design.problem["model"] == "paper":
        print("the paper's model leaves out the legs' azimuthal swing, the moving part's full axial kinetic energy "
              "and the legs' own inertia, which the plant has: its forces are larger (measured term by term: "
              "experiments/out/ckcm_model_gap.md; optimise with --model multibody to design the plant itself)")
    print(f"wall {time.perf_counter() - t0:.1f} s (compilation included)")
    return 0


def _cache_options(p):
    p.add_argument("--cache-dir", default=os.environ.get("MRDS_JAX_CACHE", "~/.cache/mrds_jax/xla"),
                   help="persistent XLA compilation cache (env MRDS_JAX_CACHE)")
    p.add_argument("--no-cache", action="store_true", help="do not keep compiled programs on disk")


DESCRIPTION = """Closed-chain multibody dynamics in JAX from the command line.

  mrds-jax check fourbar                       validate a system file (or a ready-made one) without simulating
  mrds-jax simulate fourbar --out run --viewer  simulate it: trajectory, plots, animation, browser viewer
  mrds-jax optimize --iterations 100            CKCM end-effector design optimisation
  mrds-jax dynamics --robot panda               batched rigid-tree dynamics of a URDF robot

A user error (a bad option, a missing or damaged file, a mistake in a system file) ends with one line on stderr
naming what is wrong, and exit status 2. Documentation: docs/ (mkdocs serve)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``mrds-jax simulate: error: ...; see --help``), status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser():
    """The ``mrds-jax`` argument parser with every subcommand (parsing runs nothing)."""
    parser = OneLineParser(prog="mrds-jax", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    p = sub.add_parser("dynamics", help="batched rigid-tree dynamics of a robot, with cross-checks")
    p.add_argument("--robot", default="panda", help="ur5, panda, or a URDF path")
    p.add_argument("--frame", default=None, help="operational point for Λ⁻¹ (default: last frame)")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float32", action="store_true")
    p.set_defaults(func=cmd_dynamics)

    p = sub.add_parser("optimize", help="CKCM end-effector design optimisation (gradients through the dynamics)")
    p.add_argument("--model", default="paper", choices=["paper", "multibody"])
    p.add_argument("--legs", default="bench", choices=["bench", "paper"], help="multibody leg mass model")
    p.add_argument("--objective", default="peak", choices=["peak", "rms", "power"])
    p.add_argument("--optimizer", default="adam", choices=["adam", "lbfgs"])
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--starts", type=int, default=2, help="designs optimised together (one compiled block)")
    p.add_argument("--lr", type=float, default=0.05, help="Adam step")
    p.add_argument("--task", default="ellipse",
                   help="comma-separated tasks: ellipse (Nguyen & Pooran eq. 55), sweep (static poses over the "
                        "workspace), payload (the ellipse at --payload-masses)")
    p.add_argument("--combine", choices=["pooled", "worst", "weighted"],
                   help="how several tasks combine (default: worst with several, pooled with one)")
    p.add_argument("--weights", help="comma-separated weights, one per task (--combine weighted)")
    p.add_argument("--sweep-half-width", type=float, default=0.05, help="sweep: ± m about home in x, y, z")
    p.add_argument("--sweep-points", type=int, default=3, help="sweep: poses per axis")
    p.add_argument("--payload-masses", default="20,40", help="payload task: comma-separated masses (kg)")
    p.add_argument("--period", type=float, default=0.5, help="ellipse loop period (s)")
    p.add_argument("--samples", type=int, default=64, help="path samples")
    p.add_argument("--free", default="theta_A,theta_B,m,m1", help="comma-separated design variables")
    p.add_argument("--space", choices=["paper", "symmetric", "full"],
                   help="a named design space instead of --free (full: 38 per-leg variables)")
    p.add_argument("--robust", nargs="?", const="quantile", choices=["mean", "quantile"],
                   help="minimise the mean or the smooth 95th percentile (default) of the peak force under "
                        "manufacturing tolerances")
    p.add_argument("--mc-samples", type=int, default=256, help="Monte Carlo draws of the robust objective")
    p.add_argument("--batch-size", type=int, default=16,
                   help="path samples and Monte Carlo draws evaluated as one vectorised batch, the rest in "
                        "sequence: 16 suits a CPU; on a GPU, --mc-samples runs all draws at once (more memory)")
    p.add_argument("--point-tolerance", type=float, default=1.0, help="attachment points, mm (1 sd)")
    p.add_argument("--mass-tolerance", type=float, default=2.0, help="leg part masses, %% (1 sd)")
    p.add_argument("--min-leg-distance", type=float, default=0.08, help="m between legs along the path")
    p.add_argument("--optimize-radii", action="store_true", help="also free r_A, r_B")
    p.add_argument("--bound", action="append", metavar="NAME=LO:HI", help="bounds (deg for angles)")
    p.add_argument("--min-separation", type=float, default=0.10, help="m between attachment points")
    p.add_argument("--max-condition", type=float, default=30.0, help="cond(C) limit along the path")
    p.add_argument("--stroke-margin", type=float, default=0.01, help="m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="ckcm_design", help="output directory")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    p.add_argument("--no-plots", action="store_true")
    _cache_options(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("simulate", help="simulate a system file, or a saved design on its task")
    sysfile_cli.add_simulate_arguments(p)
    p.add_argument("--design", help="design.json written by `mrds-jax optimize`")
    p.add_argument("--dt", type=float, default=1e-3)
    _cache_options(p)
    p.set_defaults(func=cmd_simulate)
    sysfile_cli.register(sub)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:         # a user error: one line, no traceback
        print(f"mrds-jax {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
