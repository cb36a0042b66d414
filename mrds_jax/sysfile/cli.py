"""``mrds-jax check SYSTEM_FILE`` and ``mrds-jax simulate SYSTEM_FILE --out DIR`` (registered by mrds_jax/cli.py)."""
import sys
import time


def _resolve(name):
    """A path, or the name of a ready-made file (``stewart``, ``fourbar``, ...)."""
    from pathlib import Path

    from . import example_files
    examples = example_files()
    if not Path(name).exists() and name in examples:
        return examples[name]
    return name


def _load(name, command):
    import jax
    jax.config.update("jax_enable_x64", True)
    from . import SystemFileError, load_system_file
    try:
        return load_system_file(_resolve(name))
    except SystemFileError as e:
        sys.exit(f"mrds-jax {command}: {e}")


def cmd_check(args):
    """Validate a system file and report DOF, constraints, consistency and conditioning (no simulation)."""
    import json

    from .run import check_built, format_check
    built = _load(args.system_file, "check")
    report = check_built(built)
    print(json.dumps(report, indent=2, default=float) if args.json else format_check(report))
    ok = report["max_position_error"] <= 1e-6 and report["max_velocity_error"] <= 1e-6
    return 0 if ok else 1


def cmd_simulate_file(args):
    """Simulate a system file; write the trajectory, plots and the animation to ``--out``."""
    from pathlib import Path

    from .run import run_simulation, write_outputs
    t0 = time.perf_counter()
    built = _load(args.system_file, "simulate")
    out = Path(args.out or Path(str(built.document.spec.name)))
    traj = run_simulation(built, progress=not args.no_progress)
    written, meta = write_outputs(built, traj, out, animation=args.animation)
    print(f"{built.document.spec.name}: {len(traj.t)} stored states to t = {float(traj.t[-1]):.3f} s; max constraint "
          f"error {meta['max_position_error']:.2e}, energy drift {meta['energy_drift']:.2e} J; wall "
          f"{time.perf_counter() - t0:.1f} s")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def add_simulate_arguments(p):
    p.add_argument("system_file", nargs="?", help="a system file (TOML; docs/system_files.md) or the name of a "
                                                  "ready-made one (stewart, fourbar, dual_arm_grasp, quadruped)")
    p.add_argument("--out", default=None, help="output folder for a system file (default: the system's name)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--animation", choices=["gif", "mp4", "none"], default=None,
                   help="override the system file's [output] animation")


def register(sub):
    """Add ``check`` to the subcommands."""
    p = sub.add_parser("check", help="validate a system file: DOF, constraints, consistency, conditioning")
    p.add_argument("system_file", help="a system file (TOML) or the name of a ready-made one")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_check)
