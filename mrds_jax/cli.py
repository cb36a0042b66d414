"""The ``mrds-jax`` command line."""
import argparse
import sys
import sysconfig
import time
from pathlib import Path

EXAMPLE_ROBOTS = {
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "panda": "panda_description/urdf/panda.urdf",
}


def _robot_path(name):
    if name in EXAMPLE_ROBOTS:
        root = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"
        path = root / EXAMPLE_ROBOTS[name]
        if not path.exists():
            sys.exit(f"robot {name!r} needs example-robot-data: pip install example-robot-data")
        return path
    path = Path(name)
    if not path.exists():
        sys.exit(f"no such URDF file: {path} (or use one of {sorted(EXAMPLE_ROBOTS)})")
    return path


def cmd_dynamics(args):
    """Batched rigid-tree dynamics of a URDF robot, with the project's internal cross-checks."""
    import jax
    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from tqdm import tqdm

    import mrds_jax as mj
    from mrds_jax.model.urdf import load_urdf

    module = load_urdf(_robot_path(args.robot))
    t = module.topology
    frame = args.frame or t.frame_names[-1]
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="mrds-jax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dynamics", help="batched rigid-tree dynamics of a robot, with cross-checks")
    p.add_argument("--robot", default="panda", help="ur5, panda, or a URDF path")
    p.add_argument("--frame", default=None, help="operational point for Λ⁻¹ (default: last frame)")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float32", action="store_true")
    p.set_defaults(func=cmd_dynamics)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
