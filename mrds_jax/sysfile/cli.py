"""``mrds-jax check SYSTEM_FILE`` and ``mrds-jax simulate SYSTEM_FILE --out DIR`` (registered by mrds_jax/cli.py).

Every user error is a :class:`~mrds_jax.sysfile.SystemFileError` or another
:class:`~mrds_jax.validation.InputError`; ``mrds_jax.cli.main`` prints it as one line and exits with status 2."""
import time
from pathlib import Path

READY_MADE_HELP = ("a system file (TOML; docs/system_files.md), or the name of a ready-made one (stewart, fourbar, "
                   "dual_arm_grasp, quadruped, box_incline, quadruped_ground, dual_arm_friction_grasp, "
                   "ckcm_peg_in_hole); a ready-made name always means the shipped file, even where a folder of that "
                   "name exists: write ./NAME for a file of yours without a suffix")


def resolve(name, examples):
    """The file a SYSTEM_FILE argument names. A bare ready-made name (``fourbar``: no folder, no suffix) is the
    shipped file, whatever lies in the current folder (the output folder of an earlier run has that name);
    anything else is a path. A missing file is a :class:`SystemFileError` that suggests the closest name."""
    from mrds_jax.validation import did_you_mean

    from . import SystemFileError
    path = Path(name)
    if name in examples and path.parent == Path(".") and not path.suffix:
        return examples[name]
    if path.is_dir() and path.name in examples:
        raise SystemFileError(name, None, None, f"is a folder, not a system file; for the ready-made one write "
                                                f"{path.name}")
    if not path.exists():
        raise SystemFileError(name, None, None, f"no such system file (ready-made: {', '.join(examples)})"
                                                f"{did_you_mean(path.stem, examples)}")
    return path


def _load(name):
    import jax
    jax.config.update("jax_enable_x64", True)
    from . import example_files, load_system_file
    return load_system_file(resolve(name, example_files()))


def cmd_check(args):
    """Validate a system file and report DOF, constraints, consistency and conditioning (no simulation); an
    inconsistent initial state is reported after the numbers, as a user error (what is wrong, what to change)."""
    import json

    from .run import check_built, format_check, initial_state_error
    built = _load(args.system_file)
    report = check_built(built)
    print(json.dumps(report, indent=2, default=float) if args.json else format_check(report))
    error = initial_state_error(built, report)
    if error is not None:
        raise error
    return 0


def _output_folder(out, built=None):
    """``--out`` (checked before the file is even read), or the system's name once it is built."""
    from mrds_jax.validation import output_dir
    return output_dir(out or str(built.document.spec.name), "--out")


def viewer_available():
    """``--viewer`` needs the viewer script shipped with mrds_jax: say so before anything is compiled."""
    from mrds_jax.validation import ArgumentError
    from mrds_jax.viz.viewer import ViewerError, viewer_script
    try:
        viewer_script()
    except ViewerError as e:
        raise ArgumentError(f"--viewer: {e}") from None


def cmd_simulate_file(args):
    """Simulate a system file; write the trajectory, plots, the animation (and with ``--viewer`` the browser
    viewer page) to ``--out``. Prints the time spent compiling, simulating and writing."""
    from .run import run_simulation, write_outputs
    if args.out:
        _output_folder(args.out)
    if args.viewer:
        viewer_available()
    built = _load(args.system_file)
    out = _output_folder(args.out, built)        # checked before anything is compiled
    timings = {}
    traj = run_simulation(built, progress=not args.no_progress, timings=timings)
    t0 = time.perf_counter()
    written, meta = write_outputs(built, traj, out, animation=args.animation, viewer=args.viewer)
    timings["write"] = time.perf_counter() - t0
    energy = (f"energy drift {meta['energy_drift']:.2e} J" if "energy_drift" in meta else
              f"energy lost to contact, net of applied work {meta['energy_lost']:.3g} J")
    print(f"{built.document.spec.name}: {len(traj.t)} stored states to t = {float(traj.t[-1]):.3f} s; max constraint "
          f"error {meta['max_position_error']:.2e}, {energy}")
    print(f"time: compile {timings['compile']:.1f} s, simulate {timings['simulate']:.1f} s, write "
          f"{timings['write']:.1f} s")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def add_simulate_arguments(p):
    p.add_argument("system_file", nargs="?", help=READY_MADE_HELP)
    p.add_argument("--out", default=None, help="output folder (default: the system's name for a system file, "
                                               "flight/ beside the design file for --design)")
    p.add_argument("--no-progress", action="store_true", help="do not draw the progress bar on stderr")
    p.add_argument("--animation", choices=["gif", "mp4", "none"], default=None,
                   help="the animation's format, or none (default: the system file's [output] animation; gif "
                        "for --design)")
    p.add_argument("--viewer", action="store_true",
                   help="also write viewer.html: the motion in 3-D in any browser, one self-contained file")


def register(sub):
    """Add ``check`` to the subcommands."""
    p = sub.add_parser("check", help="validate a system file: DOF, constraints, consistency, conditioning")
    p.add_argument("system_file", help=READY_MADE_HELP)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_check)
