"""Robots as their users bring them (issue 52): Menagerie's H1 and ANYmal C (``tests/data/h1.xml``,
``tests/data/anymal_c.xml``: the collision sets as shipped, the visual meshes left out), Go1 (``tests/data/go1.xml``)
and ODRI's Solo-12 (``tests/data/solo12.xml``: its collision meshes as their hulls), each on a floor added with
``load_mjcf(..., floor=True)``, 1 s at the file's time step from its keyframe (made consistent by
``mapping.keyframe_state``; the actuators driven by the key's ctrl through ``mapping.keyframe_forces``), float64,
one scenario, the whole collision set with the broad phase's defaults; MuJoCo runs the same file, floor and keyframe
with stiff contacts (``geom_solref`` = [0.002, 1]) beside it. Menagerie's Panda is listed and not run: its collision
geoms are meshes (``assets/link*.stl``, ``hand.stl``, ``link5_collision_*.obj``) that could not be obtained.

Each robot runs in a fresh subprocess (``--one NAME``), so its peak memory (``resource.getrusage(RUSAGE_SELF)
.ru_maxrss`` of that process after the run: the resident high-water mark, XLA's buffers and compiled code included,
which ``tracemalloc`` would not see) is its own. A robot that takes longer than ``--timeout`` seconds is recorded as a
timeout. The table goes to stdout and ``--out``; with ``--docs``, also between the marker comments of its section in
``docs/benchmarks.md``.

    python experiments/menagerie_robots.py [--robots h1 anymal_c go1 solo12] [--timeout 600] [--docs]
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
OUT = ROOT / "experiments" / "out" / "menagerie_robots.md"
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- menagerie_robots: begin -->", "<!-- menagerie_robots: end -->"
ROBOTS = {   # name: (file, keyframe, label)
    "h1": ("h1.xml", "home", "Unitree H1 (Menagerie)"),
    "anymal_c": ("anymal_c.xml", "standing", "ANYmal C (Menagerie)"),
    "go1": ("go1.xml", "home", "Unitree Go1 (Menagerie)"),
    "solo12": ("solo12.xml", "standing", "ODRI Solo-12 (meshes)"),
}
NOT_RUN = {"panda": ("Franka Panda (Menagerie)", "not run: its collision geoms are meshes (assets/link0-7.stl, "
                     "hand.stl, link5_collision_*.obj) that could not be obtained; not replaced by other shapes")}
T_END = 1.0


def machine():
    model = platform.processor() or platform.machine()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{platform.machine()}, {model}, {os.cpu_count()} cores"


def run_one(name, decimation, max_pairs=None, max_contacts=None):
    """One robot, in this process: a dict of the measurements."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import mujoco
    from mrds_jax import system as S
    from mrds_jax.loaders.mjcf import Floor, compile_mjcf, load_mjcf
    from mrds_jax.collision import BroadPhase
    from mrds_jax.system.timestepping import collision_model_of

    fname, key, _ = ROBOTS[name]
    path = DATA / fname
    out = {"name": name}

    # MuJoCo: the same file, floor and keyframe, stiff contacts; the file's time step
    model, _ = compile_mjcf(str(path), Floor())
    dt = float(model.opt.timestep) or 2e-3
    n_steps = int(round(T_END / dt))
    n_steps -= n_steps % decimation
    model.geom_solref[:] = [0.002, 1.0]
    data = mujoco.MjData(model)
    kid = model.key(key).id
    base_mj, t_mj = None, []
    for rep in range(3):
        mujoco.mj_resetDataKeyframe(model, data, kid)
        rows = [data.qpos[:3].copy()]
        t0 = time.perf_counter()
        for i in range(n_steps):
            mujoco.mj_step(model, data)
            if (i + 1) % decimation == 0:
                rows.append(data.qpos[:3].copy())
        t_mj.append(time.perf_counter() - t0)
        base_mj = np.array(rows)
    out.update(dt=dt, n_steps=n_steps, decimation=decimation, mujoco_s=min(t_mj), mujoco_version=mujoco.__version__)
    # diagnostics: the same run with the joints' friction loss off (not modelled here: the loader's warning names
    # it), then also with every geom's solimp at MuJoCo's default (the files' feet have a soft, wide solimp that the
    # stiff solref leaves in place)
    out["frictionloss"] = bool(np.any(model.dof_frictionloss > 0))
    out["solimp_set"] = bool(np.any(np.abs(model.geom_solimp[:, :3] - [0.9, 0.95, 0.001]) > 1e-12))
    variants = {}
    for variant in ("frictionloss_off", "frictionloss_off_solimp_default"):
        model.dof_frictionloss[:] = 0.0
        if variant.endswith("solimp_default"):
            model.geom_solimp[:] = [0.9, 0.95, 0.001, 0.5, 2.0]
        mujoco.mj_resetDataKeyframe(model, data, kid)
        rows = [data.qpos[:3].copy()]
        for i in range(n_steps):
            mujoco.mj_step(model, data)
            if (i + 1) % decimation == 0:
                rows.append(data.qpos[:3].copy())
        variants[variant] = np.array(rows)

    # ours
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        system, mapping, forces = load_mjcf(path, floor=True, return_mapping=True, return_forces=True)
        state = jax.block_until_ready(mapping.keyframe_state(key, system))
        forces = mapping.keyframe_forces(key, forces)
        out["load_s"] = time.perf_counter() - t0
        cm = collision_model_of(system)
        out.update(geoms=len(cm.geoms), pairs=len(cm.pairs), slots=int(cm.n_slots),
                   file_dt=float(mapping.timestep), integrator=mapping.integrator)
        settings = None
        if max_pairs or max_contacts:
            settings = S.ContactSettings(max_contacts=max_contacts, broad_phase=BroadPhase(max_pairs=max_pairs))
        out["settings"] = {"max_pairs": max_pairs, "max_contacts": max_contacts}
        run = jax.jit(lambda s: S.simulate(system, s, dt, n_steps, forces=forces, checks=S.Checks(enabled=False),
                                           output=S.Output(decimation=decimation),
                                           contact=S.ContactStep(settings=settings)))
        t0 = time.perf_counter()
        compiled = run.lower(state).compile()
        out["compile_s"] = time.perf_counter() - t0
        walls = []
        for rep in range(2):
            t0 = time.perf_counter()
            tr = jax.block_until_ready(compiled(state))
            walls.append(time.perf_counter() - t0)
    out["wall_s"] = min(walls)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: kB
    base = np.asarray(tr.q[0])[:, :3]
    out["n_stored"] = [int(base.shape[0]), int(base_mj.shape[0])]
    m = min(base.shape[0], base_mj.shape[0])
    out["base_diff_m"] = float(np.linalg.norm(base[:m] - base_mj[:m], axis=1).max())
    out["base_diff_variants_m"] = {k: float(np.linalg.norm(base[:m] - b[:m], axis=1).max())
                                   for k, b in variants.items()}
    out["base_path"] = base.tolist()
    out["base_path_mujoco"] = base_mj.tolist()
    out["base_end"] = [base[-1].tolist(), base_mj[-1].tolist()]
    out["overflow"] = bool(np.any(np.asarray(tr.overflow)))
    out["converged"] = float(np.mean(np.asarray(tr.converged)))
    out["finite"] = int(tr.first_nonfinite) < 0
    gaps = np.asarray(tr.gaps)[:, -cm.n_slots:] if cm.n_slots else np.zeros((1, 1))
    out["deepest_m"] = float(max(-np.nanmin(gaps), 0.0))
    out["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).replace(str(ROOT) + os.sep, '')[:240]}"
                              for w in caught})
    return out


def fmt_row(label, r):
    if "error" in r:
        return f"| {label} |" + " — |" * 11 + f" {r['error']} |"
    ratio = r["wall_s"] / r["mujoco_s"]
    per_s = 1.0 / (r["n_steps"] * r["dt"])     # per simulated second
    z, z_mj = r["base_end"][0][2], r["base_end"][1][2]
    return (f"| {label} | {r['pairs']} | {r['slots']} | {r['load_s']:.1f} | {r['compile_s']:.1f} | "
            f"{r['peak_rss_mb']:.0f} | {r['wall_s'] * per_s:.3f} | {r['mujoco_s'] * per_s:.4f} | {ratio:.0f}× | "
            f"{r['base_diff_m'] * 100:.2f} | {z:.3f} / {z_mj:.3f} | {'yes' if r['overflow'] else 'no'} | "
            f"{r['converged']:.0%} |")


def table(results, header_lines):
    lines = list(header_lines) + [
        "",
        "| robot | pairs | slots | load + keyframe (s) | compile (s) | peak memory (MB) | ours (s per simulated s) | "
        "MuJoCo (s per simulated s) | ratio | base vs MuJoCo, largest (cm) | base height at 1 s, ours / MuJoCo (m) | "
        "overflow | converged |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        label = ROBOTS[name][2] if name in ROBOTS else NOT_RUN[name][0]
        lines.append(fmt_row(label, r))
    ran = {n: r for n, r in results.items() if "error" not in r}
    if ran:
        lines += ["", "Where the base differs, and from which MuJoCo run (cm; largest over the run unless said): at "
                  "the start (keyframe_state projects the key out of penetration and onto the limits, MuJoCo starts "
                  "it as written), the time of the largest difference, at 1 s; then the largest against MuJoCo with "
                  "the file's joint friction loss (not modelled here) off, and with every geom's solimp also at "
                  "MuJoCo's default (0.9, 0.95, 0.001) in place of the file's (the feet of Go1 and ANYmal C have a "
                  "wide, soft one, 0.015 1 0.031, that the stiff solref leaves in place):", "",
                  "| robot | largest | at the start | largest at t (s) | at 1 s | friction loss off | friction loss "
                  "off, default solimp |",
                  "|---|---|---|---|---|---|---|"]
        for n, r in ran.items():
            d = np.linalg.norm(np.asarray(r["base_path"]) - np.asarray(r["base_path_mujoco"]), axis=1)
            v = r["base_diff_variants_m"]
            fl = f"{v['frictionloss_off'] * 100:.2f}" if r["frictionloss"] else "(none in the file)"
            si = (f"{v['frictionloss_off_solimp_default'] * 100:.2f}" if r["solimp_set"]
                  else "(the file's is the default)")
            t_max = int(np.argmax(d)) * r["decimation"] * r["dt"]
            lines.append(f"| {ROBOTS[n][2]} | {d.max() * 100:.2f} | {d[0] * 100:.2f} | {t_max:.2f} | "
                         f"{d[-1] * 100:.2f} | {fl} | {si} |")
    notes = []
    for name, r in results.items():
        for w in r.get("warnings", []):
            notes.append(f"- {name}, at load: {w}")
        if r.get("finite") is False:
            notes.append(f"- {name}: the state became non-finite")
        if "deepest_m" in r:
            st = r.get("settings") or {}
            st = ", ".join(f"{k} {v}" for k, v in st.items() if v)
            notes.append(f"- {name}: {r['geoms']} geoms with the floor, dt {r['dt']:g} s (the file's: "
                         f"{r['file_dt']:g} s, integrator {r['integrator']}), {r['n_steps']} steps; deepest "
                         f"penetration {r['deepest_m']:.2e} m; finite: {r['finite']}"
                         + (f"; contact settings: {st}" if st else ""))
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="*", default=list(ROBOTS) + list(NOT_RUN))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per robot (its subprocess)")
    ap.add_argument("--decimation", type=int, default=5, help="store every n-th state (the base is compared there)")
    ap.add_argument("--max-pairs", type=int, default=None, help="BroadPhase.max_pairs (default: the library's)")
    ap.add_argument("--max-contacts", type=int, default=None, help="ContactSettings.max_contacts (default: auto)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--docs", action="store_true", help="also write the table into docs/benchmarks.md")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        Path(args.json).write_text(json.dumps(run_one(args.one, args.decimation, args.max_pairs, args.max_contacts)))
        return

    results = {}
    for name in args.robots:
        if name in NOT_RUN:
            results[name] = {"error": NOT_RUN[name][1]}
            continue
        with tempfile.TemporaryDirectory() as tmp:
            js = Path(tmp) / "r.json"
            cmd = [sys.executable, __file__, "--one", name, "--json", str(js), "--decimation", str(args.decimation)]
            cmd += ["--max-pairs", str(args.max_pairs)] if args.max_pairs else []
            cmd += ["--max-contacts", str(args.max_contacts)] if args.max_contacts else []
            t0 = time.perf_counter()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                if p.returncode == 0 and js.exists():
                    results[name] = json.loads(js.read_text())
                else:
                    tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
                    results[name] = {"error": f"failed (exit {p.returncode}): {tail[0][:200]}"}
            except subprocess.TimeoutExpired:
                results[name] = {"error": f"timeout: not done after {args.timeout:.0f} s (load, compile and run)"}
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    import jax
    import mujoco
    settings_text = ("the broad phase's and contact buffer's defaults" if not (args.max_pairs or args.max_contacts)
                     else f"BroadPhase.max_pairs {args.max_pairs or 'default'}, ContactSettings.max_contacts "
                          f"{args.max_contacts or 'auto'}")
    opts = [("--robots", " ".join(args.robots) if args.robots != list(ROBOTS) + list(NOT_RUN) else None),
            ("--timeout", f"{args.timeout:g}" if args.timeout != 600 else None), ("--max-pairs", args.max_pairs),
            ("--max-contacts", args.max_contacts), ("--docs", "" if args.docs else None)]
    command = "python experiments/menagerie_robots.py" + "".join(f" {k} {v}".rstrip() for k, v in opts
                                                                 if v is not None)
    header = [f"`{command}` ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {machine()}; "
              f"load {os.getloadavg()[0]:.1f} at the end; jax {jax.__version__}, mujoco {mujoco.__version__}, "
              f"Python {platform.python_version()}).",
              "",
              f"1 s from each robot's keyframe on an added floor, float64, one scenario (batch 1), the whole "
              f"collision set with {settings_text}; MuJoCo runs the same file, floor and keyframe with stiff contacts "
              "(solref 2 ms) on one core. Times are wall clock per simulated second after compilation (ours the "
              "better of two runs, MuJoCo's the best of three). 'Load + keyframe' is load_mjcf, keyframe_state (its "
              "projection compiled and run) and keyframe_forces. Peak memory is the robot's own subprocess's "
              "`ru_maxrss` after its run (the resident high-water mark, XLA's buffers and code included; "
              "tracemalloc does not see XLA's memory). The base (the free joint's position) is compared with "
              f"MuJoCo's every {args.decimation} steps. Overflow: some step had more rows, contact slots or "
              "broad-phase pairs within reach than its buffers hold (the farthest are left out). Converged: the "
              "fraction of stored states whose every step met the solver's tolerance."]
    text = table(results, header)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("# Menagerie robots, 1 s from their keyframes\n\n" + text)
    Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1))
    if args.docs:
        doc = DOCS.read_text()
        section = f"{BEGIN}\n{text}{END}"
        if BEGIN in doc and END in doc:
            doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, doc, flags=re.S)
        else:
            doc = doc.rstrip("\n") + ("\n\n## Robots as their users bring them: H1, ANYmal C, Go1, Solo-12, the "
                                      "Panda (issue 52)\n\n" + section + "\n")
        DOCS.write_text(doc)


if __name__ == "__main__":
    main()
