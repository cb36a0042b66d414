"""Bonaventura's six validation systems of flexible robots (Ch. 8.3), reproduced and checked against references
that replace the thesis' Working Model 2D.

    python experiments/bonaventura_systems.py            # everything (about 20-40 min on 2 CPU cores)
    python experiments/bonaventura_systems.py --quick    # Systems 1, 2a only, N <= 8, short (a smoke run)

1. Every system (1, 2a, 2b, 2c, 3, 4, 5a-5c, 6a, 6b) is simulated with the assumed-modes modules
   (mrds_jax.flexible; two modes per flexible link, 5c three on link 1 as in the thesis), RK4, dt = 1 ms,
   and the thesis' outputs are plotted in the style of Appendix C (link angles, tip position, transverse tip
   deflections, angular velocities, constraint violations): experiments/out/bonaventura/system_*.png.
2. Segmented references (Working Model's approach, done right: mrds_jax.flexible.segmented): Systems 1,
   2a, 2c and 6a with N = 4, 8, 16, 32 elements per flexible link in MuJoCo (RK4, 0.1 ms, 20 µs for the
   stiff N = 32 chains of 2a and 2c; its loop and slider equalities are soft), and Systems 1 and 2a with our
   own rigid modules (N = 4, 8, 16, RK4 0.1 ms). The
   table gives the largest differences from the assumed-modes motion (two and three modes) over the whole
   manoeuvre, with the thesis' own MRDS-vs-Working-Model figures beside them.
3. System 6a over its 30 s: constraint violation without and with the PD suppression of Bonaventura eq. 104-105
   (K_p = 0.1, K_v = 0.2, the thesis' gains), and the energy balance: work of the joint torques against the
   change of kinetic + elastic energy (float64, no damping). System 6b at each of Ch. 8.1's three
   contact-kinematics linearisation levels (the thesis needed second order for 6b).

Results are cached per run in experiments/out/bonaventura/cache/ (delete it to recompute; an interrupted run
resumes where it stopped), the summary goes to experiments/out/bonaventura_systems.md.
"""
import argparse
import os
import pathlib
import sys
import time

os.environ.setdefault("XLA_FLAGS", "")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax import system as S  # noqa: E402
from mrds_jax.flexible import TABLE_22, bonaventura_system, link_outputs  # noqa: E402
from mrds_jax.flexible import segmented as SG  # noqa: E402
from mrds_jax.flexible.systems import TORQUES  # noqa: E402
from mrds_jax.integrate import SimulationError  # noqa: E402
from mrds_jax.system.stabilisation import pd_suppression  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "out"
FIG = OUT / "bonaventura"
CACHE = FIG / "cache"
DT, EVERY = 1e-3, 10                 # assumed modes: 1 ms steps, outputs every 10 ms
DT_SEG = 1e-4                        # segmented models
# The N = 32 chains of Systems 2a and 2c (0.5 m links cut into 1.6 cm segments: stiff springs on light
# segments) diverge at DT_SEG in MuJoCo's RK4; they run at a smaller step.
DT_SEG_STIFF = {("2a", 32): 2e-5, ("2c", 32): 2e-5}


def seg_dt(key, n):
    return DT_SEG_STIFF.get((key, n), DT_SEG)


def seg_name(engine, key, n):
    """Cache name of a segmented run (its step is in the name when it is not DT_SEG)."""
    dt = seg_dt(key, n)
    return f"{engine.split()[0]}_{key}_N{n}" + ("" if dt == DT_SEG else f"_dt{dt:g}")
# the thesis' MRDS-vs-Working-Model agreement (Ch. 8.3): max joint-angle error [deg], tip error [m]
THESIS = {"1": (9.61e-2, None), "2a": (0.0874, 4.678e-4)}
# initial absolute link angles of each system's chains (mrds_jax.flexible.systems), for the segmented models
START = {"1": {"a": [0.0]}, "2a": {"a": [0.0, np.pi / 2]},
         "2c": {"a": [np.arcsin(0.6), 0.0]}, "6a": {"a": [np.pi / 2, 0.0], "b": [np.pi / 2, np.pi]}}
LENGTHS = {"1": [1.0], "2a": [1.0, 0.5], "2c": [1.0, 0.5], "6a": [1.0, 1.0]}


def cached(name, fn):
    path = CACHE / f"{name}.npz"
    if path.exists():
        return dict(np.load(path))
    t0 = time.perf_counter()
    out = fn()
    out["seconds"] = np.asarray(time.perf_counter() - t0)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **out)
    tmp.replace(path)
    return out


# ----------------------------------------------------------------------------- assumed modes
def outputs(system, traj):
    """Concatenated over modules: absolute link angles, angular velocities, transverse tip deflections, and
    the last module's tip position."""
    ang, vel, defl = [], [], []
    for m, q, v in zip(system.modules, traj.q, traj.v):
        f = jax.vmap(lambda q_: link_outputs(m, q_))
        a, tip, d = f(q)
        ang.append(a)
        defl.append(d)
        vel.append(jax.vmap(lambda q_, v_: jax.jvp(lambda x: link_outputs(m, x)[0], (q_,), (v_,))[1])(q, v))
    return dict(t=np.asarray(traj.t), angles=np.concatenate(ang, 1), velocities=np.concatenate(vel, 1),
                deflections=np.concatenate(defl, 1), tip=np.asarray(tip))


def run_assumed_modes(key, duration=None, stabilisation=None, n_modes=None, kinematics=None, dt=DT):
    kw = {} if n_modes is None else dict(n_modes=n_modes)
    if kinematics is not None:
        kw["kinematics"] = kinematics
    sc = bonaventura_system(key, **kw)
    n = int(round((duration or sc.duration) / dt))
    # path="general": Lilly & Orin's path (chosen by "auto" for the serial Systems 4-5) needs each chain's
    # M_k = (ψᶜᵀ Λ_k⁻¹ ψᶜ)⁻¹ (Bonaventura eq. 36), singular when a module is straight (4 and 5c start fully extended)
    traj = S.simulate(sc.system, sc.state, dt, n, forces=sc.forces,
                      integration=S.Integration(stabilisation=stabilisation, path="general"),
                      output=S.Output(decimation=1))
    d = S.trajectory_diagnostics(sc.system, traj, forces=sc.forces, stabilisation=stabilisation)
    out = outputs(sc.system, traj)
    out = {k: v[::EVERY] for k, v in out.items()}
    err = np.asarray(d.position_error)
    cv = [np.linalg.norm(e, axis=1) for e in np.split(err, np.cumsum(d.n_c)[:-1], axis=1)] if err.size else []
    out["cv"] = np.stack(cv, 1)[::EVERY] if cv else np.zeros((len(out["t"]), 0))
    out["energy_balance"] = d.energy_balance[::EVERY]
    out["work"] = d.work_done[::EVERY]
    return out


# ----------------------------------------------------------------------------- segmented references
def layouts(key, n):
    lay = {p: SG.segment_layout(LENGTHS[key], n, TABLE_22["EI"], TABLE_22["rho"],
                                base=(0.0, 0.0) if p == "a" else (2.0, 0.0)) for p in START[key]}
    return lay


def run_mujoco(key, n, duration):
    lay = layouts(key, n)
    dt = seg_dt(key, n)
    xml = SG.segmented_mjcf(lay, slider_y=0.6 if key == "2c" else None, connect_tips=key == "6a",
                            timestep=dt, solref=(1e-3, 1.0))
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    offsets, q0 = {}, []
    for p, layout in lay.items():
        offsets[p] = (len(q0), len(q0) + len(layout.link))
        q0 += list(SG.initial_joint_angles(layout, START[key][p]))
    if key == "2c":
        phi, tip, _ = SG.segmented_outputs(lay["a"], np.array(q0))
        q0.append(tip[0])                                       # the slider starts under the tip
    data.qpos[:] = q0
    mujoco.mj_forward(model, data)
    A, T = map(np.asarray, TORQUES[key])
    every = int(round(DT * EVERY / dt))
    qs = [data.qpos.copy()]
    for i in range(int(round(duration / dt))):
        data.ctrl[:] = A * np.sin(2 * np.pi * (data.time + dt / 2) / T)
        mujoco.mj_step(model, data)
        if (i + 1) % every == 0:
            qs.append(data.qpos.copy())
    qs = np.array(qs)
    return segmented_result(lay, offsets, qs)


def segmented_result(lay, offsets, qs):
    ang, defl, tip = [], [], None
    for p, layout in lay.items():
        a, b = offsets[p]
        phi, tip, d = SG.segmented_outputs(layout, qs[:, a:b])
        ang.append(phi)
        defl.append(d)
    return dict(angles=np.concatenate(ang, 1), deflections=np.concatenate(defl, 1), tip=tip)


def run_ours_segmented(key, n, duration):
    (layout,) = layouts(key, n).values()
    module = SG.segmented_module(layout)
    system = S.build_system({"chain": module}, [])
    A, T = map(np.asarray, TORQUES[key])
    forces = (SG.segmented_torques("motors+springs", "chain", layout, A, T),)
    q0 = jnp.asarray(SG.initial_joint_angles(layout, START[key]["a"]))
    state = S.SystemState((q0,), (jnp.zeros_like(q0),))
    dt = seg_dt(key, n)
    every = int(round(DT * EVERY / dt))
    traj = S.simulate(system, state, dt, int(round(duration / dt)), forces=forces, output=S.Output(decimation=every))
    return segmented_result({"a": layout}, {"a": (0, len(layout.link))}, np.asarray(traj.q[0]))


def differences(ref, seg):
    n = min(len(ref["angles"]), len(seg["angles"]))
    return (np.degrees(np.abs(ref["angles"][:n] - seg["angles"][:n]).max()),
            np.abs(ref["tip"][:n] - seg["tip"][:n]).max(), np.abs(ref["deflections"][:n] - seg["deflections"][:n]).max())


# ----------------------------------------------------------------------------- figures
def figure(key, r, refs=()):
    """Appendix C style: angles [deg], tip x/y [m], deflections [m], angular velocities [rad/s], CV [m]."""
    panels = [("angles", "Angle i [deg]", np.degrees), ("tip", "Tip position [m]", None),
              ("deflections", "Deflection i [m]", None), ("velocities", "Angular velocity i [rad/s]", None)]
    if r["cv"].shape[1]:
        panels.append(("cv", "Constraint violation [m]", None))
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True)
    for ax, (field, label, f) in zip(axes, panels):
        y = r[field] if f is None else f(r[field])
        ax.plot(r["t"], y, lw=1)
        for name, ref in refs:
            if field in ref:
                yr = ref[field] if f is None else f(ref[field])
                ax.plot(r["t"][:len(yr)], yr[:len(r["t"])], "--", lw=0.8, label=name)
        ax.set_ylabel(label, fontsize=8)
        if refs and field == "angles":
            ax.legend(fontsize=7)
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(f"System {key}: assumed modes (solid)" + (" vs segmented (dashed)" if refs else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(FIG / f"system_{key}.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="Systems 1 and 2a, N <= 8, 2 s (smoke run)")
    args = ap.parse_args(argv)
    FIG.mkdir(parents=True, exist_ok=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    tag = "quick_" if quick else ""
    lines = ["# Bonaventura's validation systems (Ch. 8.3) — `experiments/bonaventura_systems.py`" + (" --quick" if quick else ""),
             "", f"jax {jax.__version__}, mujoco {mujoco.__version__}, float64, RK4; assumed modes dt = {DT} s, "
             f"segmented models dt = {DT_SEG} s ({', '.join(f'{k} N = {n}: {v:g} s' for (k, n), v in DT_SEG_STIFF.items())}). CPU times are from a shared 2-core machine (indicative only).", ""]

    # 1. every system
    keys = ["1", "2a"] if quick else ["1", "2a", "2b", "2c", "3", "4", "5a", "5b", "5c", "6a", "6b"]
    results = {}
    lines += ["## 1. The systems (two modes per flexible link; 5c: 3-2-2-2)", "",
              "| system | duration [s] | max angle change [deg] | max tip deflection [m] | max CV [m] | energy balance / max work | CPU [s] |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for key in keys:
        dur = 2.0 if quick else None
        r = cached(f"{tag}am_{key}", lambda: run_assumed_modes(key, dur))
        results[key] = r
        cv = r["cv"].max() if r["cv"].size else float("nan")
        bal = np.abs(r["energy_balance"]).max() / max(np.abs(r["work"]).max(), 1e-300)
        lines.append(f"| {key} | {r['t'][-1]:.0f} | {np.degrees(np.abs(r['angles'] - r['angles'][0]).max()):.1f} | "
                     f"{np.abs(r['deflections']).max():.3e} | {cv:.1e} | {bal:.1e} | {float(r['seconds']):.0f} |")
        print(lines[-1], flush=True)
    lines += ["", "Energy balance: |E(t) − E(0) − W(t)| / max |W|, W the work of all joint torques (module motors "
              "and actuated revolute contacts). System 3's moving base also does work on the robot, not in W, so "
              "its column is not a balance.", ""]

    # 2. segmented references
    Ns = (4, 8) if quick else (4, 8, 16, 32)
    seg_keys = ["1", "2a"] if quick else ["1", "2a", "2c", "6a"]
    lines += ["## 2. Segmented rigid-link references (rigid segments + rotational springs)", "",
              "Largest difference from the assumed-modes motion over the manoeuvre: joint angles [deg] / tip "
              "position [m] / transverse tip deflection [m]. Thesis: MRDS vs Working Model (6-10 segments).", "",
              "| system | engine | N | vs 2 modes | vs 3 modes | vs MuJoCo, same N | CPU [s] |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for key in seg_keys:
        dur = 2.0 if quick else results.get(key, {"t": [0, bonaventura_system(key).duration]})["t"][-1]
        ref2 = results.get(key) or cached(f"{tag}am_{key}", lambda: run_assumed_modes(key, dur))
        ref3 = cached(f"{tag}am3_{key}", lambda: run_assumed_modes(key, dur, n_modes=3))
        refs, mj = [], {}
        for engine, runner, ns in (("MuJoCo", run_mujoco, Ns), ("mrds_jax rigid", run_ours_segmented,
                                                                 Ns[:3] if key in ("1", "2a") else ())):
            for n in ns:
                seg = cached(tag + seg_name(engine, key, n), lambda: runner(key, n, dur))
                d2, d3 = differences(ref2, seg), differences(ref3, seg)
                if engine == "MuJoCo":
                    mj[n] = seg
                dm = differences(mj[n], seg) if engine != "MuJoCo" else None
                same = "—" if dm is None else f"{dm[0]:.1e} / {dm[1]:.1e} / {dm[2]:.1e}"
                lines.append(f"| {key} | {engine} | {n} | {d2[0]:.2e} / {d2[1]:.2e} / {d2[2]:.2e} | "
                             f"{d3[0]:.2e} / {d3[1]:.2e} / {d3[2]:.2e} | {same} | {float(seg['seconds']):.0f} |")
                print(lines[-1], flush=True)
                if n == ns[-1]:
                    refs.append((f"{engine} N={n}", seg))
        if key in THESIS:
            a, tip = THESIS[key]
            lines.append(f"| {key} | thesis (Working Model) | 6-10 | {a:.2e} / {tip if tip else float('nan'):.2e} / — | — | — | — |")
        figure(key, ref2, refs)
    for key in keys:
        if key not in seg_keys:
            figure(key, results[key])

    # 3. System 6a: constraint violation with and without suppression; 6b kinematics levels
    if not quick:
        lines += ["", "## 3. Closed loop (System 6)", "", "| run | max constraint violation [m] | energy balance / max work |",
                  "| --- | --- | --- |"]
        runs = [("6a, no suppression", "am_6a"), ("6a, PD suppression Kp = 0.1, Kv = 0.2", "am_6a_pd"),
                ("6b, second-order contact kinematics (case 3)", "am_6b"),
                ("6b, first-order placements, first-order-consistent Jacobian (case 2)", "am_6b_case2"),
                ("6b, first-order contact kinematics (case 1)", "am_6b_first")]
        extra = {"am_6a_pd": lambda: run_assumed_modes("6a", stabilisation=pd_suppression(0.1, 0.2)),
                 "am_6b_case2": lambda: run_assumed_modes("6b", kinematics="first_order_jacobian"),
                 "am_6b_first": lambda: run_assumed_modes("6b", kinematics="first_order")}
        for label, name in runs:
            try:
                r = results.get(name[3:]) if name in ("am_6a", "am_6b") else cached(name, extra[name])
            except SimulationError as e:           # a blow-up is a result too: say where
                lines.append(f"| {label} | diverged: {str(e).split(';')[0]} | — |")
                print(lines[-1], flush=True)
                continue
            bal = np.abs(r["energy_balance"]).max() / np.abs(r["work"]).max()
            lines.append(f"| {label} | {r['cv'].max():.2e} | {bal:.1e} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    (OUT / f"bonaventura_systems{'_quick' if quick else ''}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
