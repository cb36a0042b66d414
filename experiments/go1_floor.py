"""Menagerie's Go1 (tests/data/go1.xml: the collision set as shipped, 42 geoms of four kinds; the visual meshes left
out) on a floor added with ``load_mjcf(..., floor=True)``, held by its twelve position servos at the ``home``
keyframe's controls, 1 s at dt = 2 ms from ``home`` made consistent; MuJoCo runs the same file and floor with stiff
contacts (``solref`` 2 ms) beside it. Prints the trunk's height in both, the deepest penetration, the solver's
convergence, and the time to compile and run (our single scenario, float64, after compilation).

    python experiments/go1_floor.py [--steps 500] [--out experiments/out/go1_floor.md] [--save-path base.npy]
                                    [--compare base.npy]
"""
import argparse
import platform
import time
import warnings
from pathlib import Path

import jax
import mujoco
import numpy as np

jax.config.update("jax_enable_x64", True)
from mrds_jax import system as S                                           # noqa: E402
from mrds_jax.loaders.mjcf import Floor, compile_mjcf, load_mjcf           # noqa: E402
from mrds_jax.system.timestepping import collision_model_of                # noqa: E402

PATH = Path(__file__).resolve().parents[1] / "tests" / "data" / "go1.xml"
DT = 2e-3


def mujoco_run(n_steps, every):
    model, _ = compile_mjcf(str(PATH), Floor())
    model.opt.timestep = DT
    model.geom_solref[:] = [0.002, 1.0]
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    z = [data.qpos[2]]
    t0 = time.perf_counter()
    for i in range(n_steps):
        mujoco.mj_step(model, data)
        if (i + 1) % every == 0:
            z.append(data.qpos[2])
    return np.array(z), time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--out", default=None)
    ap.add_argument("--save-path", default=None, help="save the trunk's stored positions and orientations (.npy)")
    ap.add_argument("--compare", default=None, help="a --save-path file of another run (another commit): print "
                                                    "the largest difference of the trunk's position from it")
    args = ap.parse_args()
    z_mj, t_mj = mujoco_run(args.steps, args.every)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        system, mapping, forces = load_mjcf(PATH, floor=True, return_mapping=True, return_forces=True)
    t_load = time.perf_counter() - t0
    model = collision_model_of(system)
    forces = mapping.keyframe_forces("home", forces)                       # the servos at the key's ctrl
    t0 = time.perf_counter()
    state = mapping.keyframe_state("home", system)
    t_key = time.perf_counter() - t0
    run = jax.jit(lambda s: S.simulate(system, s, DT, args.steps, forces=forces, checks=S.Checks(enabled=False),
                                       output=S.Output(decimation=args.every)))
    t0 = time.perf_counter()
    tr = jax.block_until_ready(run(state))
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    tr = jax.block_until_ready(run(state))
    t_run = time.perf_counter() - t0
    z = np.asarray(tr.q[0][:, 2])
    gaps = np.asarray(tr.gaps)[:, -model.n_slots:]
    lines = [f"# Go1 on a floor, 1 s from `home` ({platform.machine()}, {platform.processor() or platform.system()}, "
             f"jax {jax.__version__}, mujoco {mujoco.__version__})", "",
             f"- collision model: {len(model.geoms)} geoms, {len(model.pairs)} pairs, {model.n_slots} slots; "
             f"warnings at load: {len(caught)}",
             f"- trunk height at the end: ours {z[-1]:.4f} m, MuJoCo {z_mj[-1]:.4f} m; largest difference over the "
             f"run {np.abs(z - z_mj).max() * 100:.2f} cm",
             f"- deepest penetration {max(-gaps.min(), 0):.2e} m; stored states whose every step converged "
             f"{np.asarray(tr.converged).mean():.0%}; finite: {int(tr.first_nonfinite) < 0}",
             f"- time: load {t_load:.1f} s, keyframe projection {t_key:.1f} s, compile + first run {t_first:.1f} s, "
             f"a run of "
             f"{args.steps} steps {t_run:.2f} s ({args.steps / t_run:.0f} steps/s, one scenario); MuJoCo "
             f"{t_mj:.3f} s ({args.steps / t_mj:.0f} steps/s)"]
    base = np.asarray(tr.q[0][:, :7])
    if args.save_path:
        np.save(args.save_path, base)
    if args.compare:
        other = np.load(args.compare)
        lines.append(f"- trunk position against {args.compare}: largest difference "
                     f"{np.abs(other[:, :3] - base[:, :3]).max():.3e} m over the {len(base)} stored states")
    print("\n".join(lines))
    for w in caught:
        print("  warning:", str(w.message)[:300])
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
