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
from mrds_jax.validation import ArgumentError, InputError, install_hint
from mrds_jax.validation.packages import OPTIONAL_PACKAGES

EXAMPLE_ROBOTS = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "panda": "panda_description/urdf/panda.urdf",
}


SHIPPED_ROBOTS = ("two_link_arm",)        # mrds_jax/data/robots/<name>.urdf


def _robot_path(name):
    if name in SHIPPED_ROBOTS:
        from importlib.resources import files
        return Path(str(files("mrds_jax") / "data" / "robots" / f"{name}.urdf"))
    if name in EXAMPLE_ROBOTS:
        root = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
        path = root / EXAMPLE_ROBOTS[name]
        if not path.exists():
            raise ArgumentError(f"--robot {name!r} needs example-robot-data: pip install example-robot-data (the "
                                f"test extra has it), or use the shipped --robot two_link_arm")
        return path
    path = Path(name)
    if not path.exists():
        raise ArgumentError(f"--robot: no such URDF file: {path} (or use one of "
                            f"{sorted(SHIPPED_ROBOTS + tuple(EXAMPLE_ROBOTS))})")
    return path


def check_options(args, counts=(), positive=(), nonnegative=()):
    """Numeric options checked before anything is compiled, each error naming its flag (``--iterations must be
    an integer >= 1, got -5``): ``counts`` integers >= 1 (or ``(flag, least)``), ``positive`` finite numbers > 0,
    ``nonnegative`` finite numbers >= 0 (flags as typed, e.g. "--batch-size")."""
    import math
    rules = [(flag, lambda v, n=n: v >= n, f"an integer >= {n}")
             for flag, n in (c if isinstance(c, tuple) else (c, 1) for c in counts)]
    rules += [(flag, lambda v: math.isfinite(v) and v > 0, "a finite number > 0") for flag in positive]
    rules += [(flag, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0") for flag in nonnegative]
    for flag, ok, rule in rules:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None and not ok(value):
            raise ArgumentError(f"{flag} must be {rule}, got {value:g}")


def cmd_dynamics(args):
    """Batched rigid-tree dynamics of a URDF robot, with the project's internal cross-checks."""
    check_options(args, counts=("--batch",))
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
    check_options(args, counts=("--iterations", "--starts", ("--samples", 4), "--mc-samples", "--batch-size",
                                "--sweep-points"),
                  positive=("--lr", "--period", "--max-condition"),
                  nonnegative=("--sweep-half-width", "--point-tolerance", "--mass-tolerance", "--min-leg-distance",
                               "--min-separation", "--stroke-margin"))
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
    print(f"independent check of the optimum ({model} at 4x denser path samples, exact peak "
          f"{report['peak_force_dense']:.2f} N; each check: worst value, ≥ or ≤ its limit, margin):")
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
    """Simulate a system file, or fly a saved design on its task under computed torque (``--design``): printed
    figures, and plots, an animation and (``--viewer``) the browser viewer page in ``--out``."""
    if args.system_file and args.design:
        raise ArgumentError("give a SYSTEM_FILE or --design design.json, not both")
    if args.system_file:
        _compilation_cache(args)
        return sysfile_cli.cmd_simulate_file(args)
    if not args.design:
        from mrds_jax.sysfile import example_files
        raise ArgumentError(f"give a SYSTEM_FILE (or a ready-made name: {', '.join(sorted(example_files()))}) or "
                            "--design design.json")
    from mrds_jax import validation
    check_options(args, positive=("--dt",))
    from mrds_jax.ckcm.design import load_design, model_description
    design = load_design(args.design)               # DesignFileError: one line (main)
    beside = Path(args.design) if Path(args.design).is_dir() else Path(args.design).parent   # a run's folder too
    out = validation.output_dir(args.out or str(beside / "flight"), "--out")
    if args.viewer:
        sysfile_cli.viewer_available()
    animation = args.animation or "gif"
    import jax
    jax.config.update("jax_enable_x64", True)
    _compilation_cache(args)
    from mrds_jax.ckcm.design.simulation import simulate_design
    from mrds_jax.viz.flight import write_flight
    legs = design.problem.get("legs", "bench")
    designed_with = model_description(design.problem["model"], legs)
    plant = model_description("multibody", legs)
    from mrds_jax.ckcm.design.space import UNITS
    print(f"design {args.design} ({design.status}): "
          + ", ".join(f"{k} {v:.4g} {UNITS.get(k, '')}".rstrip() for k, v in design.x.items()))
    t0 = time.perf_counter()
    runs = simulate_design(design, dt=args.dt)
    print(f"peak actuator force, one figure per model:\n"
          f"  {design.after['peak_force']:.3f} N: {designed_with}, the optimiser's own, at its task samples")
    for i, r in enumerate(runs):
        print(f"  {r['peak_force']:.3f} N: {plant} as the plant, flying path {i} under computed torque "
              f"({r['steps']} RK4 steps of {r['dt'] * 1e3:.3g} ms; max payload position error "
              f"{r['max_position_error']:.2e} m, max ball-joint gap {r['max_closure_error']:.2e} m)")
    if design.problem["model"] == "paper":
        print("  (they differ because the paper's model leaves out the legs' azimuthal swing, the moving part's full "
              "axial kinetic energy and the legs' own inertia, which the plant has: its forces are larger; "
              "optimise with --model multibody to design the plant itself)")
    t1 = time.perf_counter()
    written = write_flight(design, runs, out, animation=animation, viewer=args.viewer)
    print(f"time: simulate {t1 - t0:.1f} s (compilation included), write {time.perf_counter() - t1:.1f} s")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _cache_options(p):
    p.add_argument("--cache-dir", default=os.environ.get("MRDS_JAX_CACHE", "~/.cache/mrds_jax/xla"),
                   help="the folder of the persistent XLA compilation cache (env MRDS_JAX_CACHE)")
    p.add_argument("--no-cache", action="store_true", help="do not keep compiled programs on disk")


DESCRIPTION = """Closed-chain multibody dynamics in JAX from the command line.

  mrds-jax check fourbar                       validate a system file (or a ready-made one) without simulating
  mrds-jax simulate fourbar --out run --viewer  simulate it: trajectory, plots, animation, browser viewer
  mrds-jax optimize --iterations 100            CKCM end-effector design optimisation
  mrds-jax simulate --design ckcm_design/design.json --viewer
                                                fly the optimised design: plots, animation, 3-D page
  mrds-jax dynamics --robot two_link_arm        batched rigid-tree dynamics of a URDF robot

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
    p.add_argument("--robot", default="two_link_arm",
                   help="the robot: two_link_arm (shipped), ur5 or panda (pip install example-robot-data), or the "
                        "path of a URDF file")
    p.add_argument("--frame", default=None, help="the operational point whose inverse operational-space inertia Λ⁻¹ is computed (default: the last frame)")
    p.add_argument("--batch", type=int, default=1024, help="how many random states are evaluated in one vmapped batch")
    p.add_argument("--seed", type=int, default=0, help="seed of the random states")
    p.add_argument("--float32", action="store_true", help="compute in float32 instead of float64")
    p.set_defaults(func=cmd_dynamics)

    p = sub.add_parser("optimize", help="CKCM end-effector design optimisation (gradients through the dynamics)")
    p.add_argument("--model", default="paper", choices=["paper", "multibody"],
                   help="the dynamics the forces come from: the paper's Lagrangian model (Nguyen & Pooran eq. 39-45) "
                        "or the MRDS multibody model of the whole closed chain")
    p.add_argument("--legs", default="bench", choices=["bench", "paper"],
                   help="the legs' mass model of the multibody model: bench (cylinders) or paper "
                        "(Nguyen & Pooran eq. 40 point masses)")
    p.add_argument("--objective", default="peak", choices=["peak", "rms", "power"],
                   help="what is minimised: the peak actuator force (as a smooth upper bound), the RMS force or "
                        "the mean power")
    p.add_argument("--optimizer", default="adam", choices=["adam", "lbfgs"],
                   help="the gradient method inside the augmented Lagrangian")
    p.add_argument("--iterations", type=int, default=200, help="optimiser steps per start")
    p.add_argument("--starts", type=int, default=2, help="how many start designs are optimised together (one compiled block)")
    p.add_argument("--lr", type=float, default=0.05, help="the Adam step size (in the unit box of the free variables)")
    p.add_argument("--task", default="ellipse",
                   help="comma-separated tasks: ellipse (Nguyen & Pooran eq. 55), sweep (static poses over the "
                        "workspace), payload (the ellipse at --payload-masses)")
    p.add_argument("--combine", choices=["pooled", "worst", "weighted"],
                   help="how several tasks combine (default: worst with several, pooled with one)")
    p.add_argument("--weights", help="comma-separated weights, one per task (--combine weighted)")
    p.add_argument("--sweep-half-width", type=float, default=0.05, help="the sweep task's half width: ± this many metres about home in x, y, z")
    p.add_argument("--sweep-points", type=int, default=3, help="the sweep task's static poses per axis")
    p.add_argument("--payload-masses", default="20,40", help="the payload task's masses, comma-separated (kg)")
    p.add_argument("--period", type=float, default=0.5, help="the time the ellipse takes once round (s)")
    p.add_argument("--samples", type=int, default=64, help="samples per path at which the forces are evaluated")
    p.add_argument("--free", default="theta_A,theta_B,m,m1", help="the design variables that are optimised, comma-separated")
    p.add_argument("--space", choices=["paper", "symmetric", "full"],
                   help="a named design space instead of --free (full: 38 per-leg variables)")
    p.add_argument("--robust", nargs="?", const="quantile", choices=["mean", "quantile"],
                   help="minimise the mean or the smooth 95th percentile (default) of the peak force under "
                        "manufacturing tolerances")
    p.add_argument("--mc-samples", type=int, default=256, help="as-built machines drawn for the robust objective")
    p.add_argument("--batch-size", type=int, default=16,
                   help="path samples and Monte Carlo draws evaluated as one vectorised batch, the rest in "
                        "sequence: 16 suits a CPU; on a GPU, --mc-samples runs all draws at once (more memory)")
    p.add_argument("--point-tolerance", type=float, default=1.0, help="manufacturing tolerance of the attachment points, mm (1 sd)")
    p.add_argument("--mass-tolerance", type=float, default=2.0, help="manufacturing tolerance of the leg part masses, %% (1 sd)")
    p.add_argument("--min-leg-distance", type=float, default=0.08, help="the least distance between two legs along the path (m)")
    p.add_argument("--optimize-radii", action="store_true", help="also optimise the platform radii r_A, r_B")
    p.add_argument("--bound", action="append", metavar="NAME=LO:HI", help="a bound of a design variable (degrees for angles, SI otherwise); repeat "
                        "for several")
    p.add_argument("--min-separation", type=float, default=0.10, help="the least distance between attachment points of a platform (m)")
    p.add_argument("--max-condition", type=float, default=30.0, help="the largest condition number of the Jacobian C along the path")
    p.add_argument("--stroke-margin", type=float, default=0.01,
                   help="the least distance of every leg length from either end of its stroke (m)")
    p.add_argument("--seed", type=int, default=0, help="seed of the extra start designs and Monte Carlo draws")
    p.add_argument("--out", default="ckcm_design", help="the folder the design, its history and plots go to")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out instead of starting afresh")
    p.add_argument("--no-plots", action="store_true", help="write no plots (design.json and history.csv only)")
    _cache_options(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("simulate", help="simulate a system file, or a saved design on its task")
    sysfile_cli.add_simulate_arguments(p)
    p.add_argument("--design", help="fly the design.json written by mrds-jax optimize on its task instead of a "
                                     "system file")
    p.add_argument("--dt", type=float, default=1e-3, help="the time step of the --design flight (s)")
    _cache_options(p)
    p.set_defaults(func=cmd_simulate)
    sysfile_cli.register(sub)
    return parser


def missing_package(error):
    """The one line for an ImportError of an optional package (what is missing, the extra that installs it:
    :data:`~mrds_jax.validation.packages.OPTIONAL_PACKAGES`), or None for any other ImportError (a fault of the
    installation, not of the user: it keeps its traceback)."""
    name = (getattr(error, "name", None) or "").split(".")[0]
    if name in OPTIONAL_PACKAGES:
        return f"needs the package {name!r}, which is not installed: {install_hint(name)}"
    text = str(error).splitlines()[0] if str(error) else ""
    return text if "pip install" in text else None


def _new_folders(args):
    """The folders a run may create (``--out``, or in the current folder the default one), as
    (path, existed before): :func:`main` removes those it created and left empty when the run fails."""
    out, system_file = getattr(args, "out", None), getattr(args, "system_file", None)
    paths = [Path(out)] if out else [Path(Path(system_file).stem)] if system_file else []
    return [(p, p.exists()) for p in paths]


def _remove_empty(folders):
    for path, existed in folders:
        if existed:
            continue
        try:                                            # the folder and the parents this run created, if empty
            for p in [path, *path.parents]:
                if p == Path(".") or p.exists() and any(p.iterdir()):
                    break
                p.rmdir()
        except OSError:
            pass


def main(argv=None):
    args = build_parser().parse_args(argv)
    folders = _new_folders(args)
    try:
        return args.func(args)
    except InputError as e:         # a user error: one line, no traceback
        _remove_empty(folders)
        print(f"mrds-jax {args.command}: {e}", file=sys.stderr)
        return 2
    except ImportError as e:        # an optional package that is not installed: one line naming its extra
        line = missing_package(e)
        if line is None:
            raise
        _remove_empty(folders)
        print(f"mrds-jax {args.command}: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
