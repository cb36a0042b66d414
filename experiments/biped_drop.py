"""Loops and contact in one solve (issue 34's must-show): the four-loop biped of ``experiments/biped_timing.py``
(``tests/data/biped_fourbar.xml``: floating pelvis, ball hips, knees and ankles driven through four-bar linkages,
12 loop rows) given box feet that collide, a floor plane, and joint ranges on the knees and ankles, dropped 3 cm and
left passive for 1 s at dt = 5e-4 s. Every step solves the loops (bilateral, exact), the joint limits (one-sided) and
the feet's frictional contacts (Coulomb, exact) as one problem over one Delassus matrix
(:mod:`mrds_jax.system.timestepping`).

Printed and checked against the issue's bounds:

* loop closure, max over the run of the loops' position error: ≤ 1e-6 m (float64), ≤ 1e-4 m (float32);
* penetration, max over the run of −(gap) of the feet's contact slots: ≤ 1e-3 m;
* energy: the total energy (kinetic + gravitational) never above its start by more than 1e-4 of the start's
  potential energy (the contact, its drift correction and the loops add none);
* joint limits: every limited joint inside its range (to 1e-6 rad) at every stored state;
* convergence: every step's solve within ``NCPSettings.tolerance`` with the default settings (steps converged
  100 %, iterations per step mean and max reported), no buffer overflow, and the first 0.15 s the same to 1e-5 m
  (float64; 1e-4 m float32) with 4× tighter settings (tolerance / 4, stages and iterations × 4).

    python experiments/biped_drop.py [--dtype float64 float32] [--duration 1.0] [--dt 5e-4]

Writes ``experiments/out/biped_drop.md``. The test ``tests/test_contact_biped.py`` (full mode) runs the same
function with the float64 bounds.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", "--one" not in sys.argv or "float64" in sys.argv)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax import system as S  # noqa: E402
from mrds_jax.loaders.mjcf import load_mjcf  # noqa: E402
from mrds_jax.system.timestepping import ContactSettings, row_layout  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "biped_fourbar.xml"
OUT = Path(__file__).parent / "out" / "biped_drop.md"
DROP = 0.03


def biped_on_floor_xml():
    """The biped's MJCF with a floor plane, colliding box feet and ranges on the knees and ankles."""
    xml = MODEL.read_text()
    xml = xml.replace("<worldbody>", '<worldbody>\n    <geom name="floor" type="plane" size="5 5 0.1" '
                                     'contype="1" conaffinity="1" friction="0.9"/>', 1)
    xml = xml.replace('<geom type="box" pos="0.05 0 -0.03" size="0.1 0.05 0.02"/>',
                      '<geom type="box" pos="0.05 0 -0.03" size="0.1 0.05 0.02" contype="1" conaffinity="0" '
                      'friction="0.9"/>')
    for side in ("L", "R"):
        xml = xml.replace(f'<joint name="knee_{side}" axis="0 1 0" ref="0.05"',
                          f'<joint name="knee_{side}" axis="0 1 0" ref="0.05" range="-0.05 1.6"')
        xml = xml.replace(f'<joint name="ankle_{side}" axis="0 1 0"',
                          f'<joint name="ankle_{side}" axis="0 1 0" range="-0.6 0.6"')
    return xml


def dropped_state(system, mapping, dtype):
    """MuJoCo's reference pose (loops closed) lifted or lowered so that the lowest foot corner is DROP above the
    floor, at rest."""
    from mrds_jax.system.timestepping import slot_kinematics
    state = mapping.state()
    q = state.q[0]
    gaps = np.asarray(slot_kinematics(system, state).gap)
    q = q.at[2].add(DROP - gaps.min())
    return S.SystemState((jnp.asarray(q, dtype),), (jnp.zeros(system.modules[0].nv, dtype),))


def run(dtype="float64", duration=1.0, dt=5e-4, decimation=10):
    """The drop; returns a dict of the measured quantities (module docstring) and timings. float32 needs a process
    whose ``jax_enable_x64`` is off (``main`` runs each dtype in its own)."""
    if (dtype == "float64") != bool(jax.config.jax_enable_x64):
        raise ValueError(f"run({dtype!r}) in a process with jax_enable_x64={jax.config.jax_enable_x64}")
    if dtype == "float32":
        from mrds_jax.console import allow_float32
        allow_float32()
    system, mapping = load_mjcf(biped_on_floor_xml(), return_mapping=True)
    state = dropped_state(system, mapping, jnp.dtype(dtype))
    n = int(round(duration / dt))
    n -= n % decimation
    t0 = time.perf_counter()
    traj = S.simulate(system, state, dt, n, checks=S.Checks(enabled=False), output=S.Output(decimation=decimation))
    jax.block_until_ready(traj.q)
    first = time.perf_counter() - t0
    # the first 0.15 s again with 4x tighter solver settings (tolerance / 4, caps x 4): the same motion to 1e-5 m
    base = ContactSettings()
    tight = base._replace(ncp=base.ncp._replace(tolerance=base.ncp.tolerance / 4, stages=4 * base.ncp.stages,
                                                iterations=4 * base.ncp.iterations))
    n_short = int(round(0.15 / dt)) // decimation * decimation
    short = S.simulate(system, state, dt, n_short, checks=S.Checks(enabled=False),
                       output=S.Output(decimation=decimation), contact=S.ContactStep(settings=tight))
    k = n_short // decimation + 1
    tight_diff = max(float(np.abs(np.asarray(a)[:k] - np.asarray(b)[:k]).max()) for a, b in zip(traj.q, short.q))
    t0 = time.perf_counter()
    jax.block_until_ready(S.simulate(system, state, dt, n, checks=S.Checks(enabled=False),
                                     output=S.Output(decimation=decimation)).q)
    again = time.perf_counter() - t0
    diag = S.trajectory_diagnostics(system, traj)
    energy = np.asarray(diag.energy.total, float)
    potential0 = float(diag.energy.potential[0])
    layout = row_layout(system)
    slot_gaps = np.asarray(traj.gaps)[1:, layout.n_unilateral:]
    limit_gaps = np.asarray(traj.gaps)[1:, :layout.n_unilateral]
    return dict(
        dtype=dtype, steps=n, dt=dt, rows=tuple(layout),
        closure=float(np.abs(np.asarray(diag.position_error)).max()),
        penetration=float(max(0.0, -slot_gaps.min())),
        energy_gain=float((energy - energy[0]).max() / abs(potential0)),
        energy_lost=float((energy[0] - energy[-1]) / abs(potential0)),
        limit_violation=float(max(0.0, -limit_gaps.min())) if limit_gaps.size else 0.0,
        touched=bool((slot_gaps < 1e-6).any()),
        residual=float(np.maximum(np.asarray(traj.primal), np.asarray(traj.complementarity)).max()),
        converged=float(np.asarray(traj.converged).mean()),
        iterations_mean=float(np.asarray(traj.iterations_mean)[1:].mean()),
        iterations_max=int(np.asarray(traj.iterations_max).max()),
        overflow=bool(np.asarray(traj.overflow).any()),
        tight_difference=tight_diff,
        finite=int(traj.first_nonfinite) < 0,
        compile_and_run_s=first, run_s=again)


BOUNDS = {"float64": dict(closure=1e-6, penetration=1e-3, energy_gain=1e-4, limit_violation=1e-6,
                          tight_difference=1e-5),
          "float32": dict(closure=1e-4, penetration=1e-3, energy_gain=1e-4, limit_violation=1e-4,
                          tight_difference=1e-4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--dt", type=float, default=5e-4)
    ap.add_argument("--one", action="store_true", help="run the one dtype given and print its result as JSON")
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run(args.dtype[0], args.duration, args.dt)))
        return
    rows = []
    for dtype in args.dtype:
        out = subprocess.run([sys.executable, __file__, "--one", "--dtype", dtype, "--duration", str(args.duration),
                              "--dt", str(args.dt)], capture_output=True, text=True, env=os.environ)
        lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
        if out.returncode or not lines:
            raise SystemExit(f"the {dtype} run failed:\n{out.stderr[-3000:]}")
        r = json.loads(lines[-1][len("RESULT "):])
        b = BOUNDS[dtype]
        ok = (all(r[k] <= v for k, v in b.items()) and r["finite"] and r["touched"] and r["converged"] == 1.0
              and not r["overflow"])
        rows.append((r, ok))
        print(r, "ok" if ok else "FAILS a bound")
    head = (f"# Biped drop: loops, limits and contact in one solve\n\n{datetime.date.today()}, {platform.machine()} "
            f"({platform.processor() or 'cpu'}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}: times on a "
            f"busy machine run long), jax {jax.__version__}; `python experiments/biped_drop.py`\n\n"
            "| dtype | steps × dt | loop closure (m) | penetration (m) | energy gain / V₀ | energy lost / V₀ | "
            "limit violation | max residual | steps converged | iterations mean / max | 0.15 s vs 4× tighter (m) | "
            "compile+run (s) | run (s) | bounds |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['dtype']} | {r['steps']} × {r['dt']:g} | {r['closure']:.2e} | {r['penetration']:.2e} | "
                   f"{r['energy_gain']:.2e} | {r['energy_lost']:.2e} | {r['limit_violation']:.2e} | "
                   f"{r['residual']:.1e} | {100 * r['converged']:.0f} % | {r['iterations_mean']:.1f} / "
                   f"{r['iterations_max']} | {r['tight_difference']:.1e} | {r['compile_and_run_s']:.1f} | {r['run_s']:.1f} | "
                   f"{'met' if ok else 'NOT met'} |\n" for r, ok in rows)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(head + body)
    print(head + body)


if __name__ == "__main__":
    main()
