"""Loops closed on the position level through a landing (issue 58 item 4): the loop closure error (the largest
|Φ_p| of the loops and joint couplings, :func:`~mrds_jax.system.trajectory_diagnostics`' ``position_error``) at
every stored state, and the penetration, with the bilateral rows' position error removed by the step's position
projection (``PositionCorrection.loops = 1``, the default) and without it (``loops = 0``: velocity-level Baumgarte
alone, the behaviour before issue 58).

Scenes, float64, passive, every step stored:

* ``cassie``: ``tests/data/cassie.xml`` on a floor colliding with every geom (``experiments/ncp_convergence.py``'s
  ``cassie_on_floor``), its keyframe ``home`` made consistent and lowered so that its lowest slot on the floor is
  3 cm above it, at rest; 0.5 s at dt = 5e-4 s (lands after about 0.08 s);
* ``biped``: the four-loop biped on box feet dropped 3 cm (``experiments/biped_drop.py``), 0.5 s at dt = 5e-4 s.

    python experiments/loop_closure.py [--scenes cassie biped] [--duration 0.5] [--loops 1 0]

Writes ``experiments/out/loop_closure.md``.
"""
import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "experiments"))

from mrds_jax import system as S  # noqa: E402
from mrds_jax.system.timestepping import ContactSettings, contact_rollout, row_layout  # noqa: E402

OUT = Path(__file__).parent / "out" / "loop_closure.md"
DROP = 0.03
DT = 5e-4


def cassie_scene():
    """(system, q0, v0): Cassie on the floor, 3 cm above it at rest (module docstring): ncp_convergence's start
    (its keyframe made consistent, CASSIE_DROP above the floor) raised by the difference (the floor is level)."""
    from ncp_convergence import CASSIE_DROP, cassie_on_floor, cassie_start
    system, _ = cassie_on_floor()
    q = np.asarray(cassie_start())
    q[2] += DROP - CASSIE_DROP
    return system, (jnp.asarray(q),), (jnp.zeros(system.modules[0].nv),)


def biped_scene():
    from biped_drop import biped_on_floor_xml, dropped_state
    from mrds_jax.loaders.mjcf import load_mjcf
    system, mapping = load_mjcf(biped_on_floor_xml(), return_mapping=True)
    state = dropped_state(system, mapping, jnp.float64)
    return system, state.q, state.v


SCENES = {"cassie": cassie_scene, "biped": biped_scene}


def settings_with_loops(loops):
    base = ContactSettings()
    return base._replace(correction=base.correction._replace(loops=loops))


def run(scene, loops, duration):
    system, q0, v0 = SCENES[scene]()
    n = int(round(duration / DT))
    settings = settings_with_loops(loops)
    rollout = jax.jit(lambda system, q0, v0: contact_rollout(system, q0, v0, DT, n, 1, settings=settings))
    t0 = time.perf_counter()
    traj = jax.block_until_ready(rollout(system, q0, v0))
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(rollout(system, q0, v0).q)
    run_s = time.perf_counter() - t0
    diag = S.trajectory_diagnostics(system, traj)
    closure = np.abs(np.asarray(diag.position_error)).max(axis=1)          # per stored state
    layout = row_layout(system)
    gaps = np.asarray(traj.gaps)
    slot_gaps = gaps[:, layout.n_unilateral:]
    limit_gaps = gaps[:, :layout.n_unilateral]
    touch = np.flatnonzero((slot_gaps < 1e-6).any(axis=1))
    return dict(scene=scene, loops=loops, steps=n, closure_start=float(closure[0]),
                closure_max=float(closure.max()), closure_after_touch=float(closure[touch[0]:].max()) if touch.size
                else float("nan"), touch_t=float(touch[0] * DT) if touch.size else float("nan"),
                penetration=float(max(0.0, -slot_gaps[1:].min())),
                limit_violation=float(max(0.0, -limit_gaps[1:].min())) if limit_gaps.size else 0.0,
                converged=float(np.asarray(traj.converged).mean()), finite=int(traj.first_nonfinite) < 0,
                seconds=seconds, run_s=run_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", nargs="+", default=list(SCENES))
    ap.add_argument("--duration", type=float, default=0.5)
    ap.add_argument("--loops", nargs="+", type=float, default=[1.0, 0.0])
    args = ap.parse_args()
    rows = []
    for scene in args.scenes:
        for loops in args.loops:
            r = run(scene, loops, args.duration)
            print(r, flush=True)
            rows.append(r)
    head = (f"# Loop closure through a landing (issue 58 item 4)\n\n{datetime.date.today()}, {platform.machine()} "
            f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}), jax {jax.__version__}, float64, "
            f"dt = {DT:g} s, every step stored, one scenario; `python experiments/loop_closure.py` (times on a busy "
            f"machine run long)\n\n"
            "| scene | PositionCorrection.loops | steps | touch-down (s) | loop closure max (m) | after touch-down (m) "
            "| penetration (m) | limit violation (rad) | steps converged | compile+run (s) | run (s) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['scene']} | {r['loops']:g} | {r['steps']} | {r['touch_t']:.4f} | {r['closure_max']:.2e} | "
                   f"{r['closure_after_touch']:.2e} | {r['penetration']:.2e} | {r['limit_violation']:.1e} | "
                   f"{100 * r['converged']:.1f} % | {r['seconds']:.0f} | {r['run_s']:.1f} |\n" for r in rows)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(head + body)
    print(head + body)


if __name__ == "__main__":
    main()
