"""The multibody community's benchmark problems (IFToMM / Universidade da Coruña MBS benchmark library,
group A; issue 12), built through mrds_jax's public API and each compared with a reference computed
independently of mrds_jax; MuJoCo beside ours.

Problems (definitions and parameters: tests/mbs_benchmarks.py's docstring):
* A01 simple pendulum — 1 kg point mass (rotational inertia 1e-6 kg m² about itself: a free body needs an
  invertible mass matrix), massless 1 m rod, as a planar free body pinned to the ground by a planar revolute
  contact (a closed loop), released horizontal, g = 9.81. Reference: the 1-DOF pendulum ODE, SciPy DOP853 1e-13.
* A02 N-four-bar — 40 parallelogram four-bars in a row, 1 m / 1 kg rods and couplers, cranks released vertical
  with the couplers at 1 m/s; it turns over and passes its singular all-aligned configuration twice per turn.
  Reference: the 1-DOF reduced model (Pinocchio RNEA/CRBA, SciPy DOP853 1e-13).
  A02r: the same with the solve's relative cut 1e-12 (``SolverSettings(regularization=1e-12)``) instead of the
  default 1e-9: at N = 40 the condition of Bᶜ near the aligned configuration reaches ~1e9, where the default cut
  drops directions (no MuJoCo row: same model as A02).
* A05 flyball governor (our parameters after the library's layout, without its spring/damper): spatial, two
  loops closed by spherical contacts with redundant constraints, mobility 2. Reference: the 2-DOF reduced model.
* Bennett linkage (tests/hard_mechanisms.py): spatial over-constrained 4R loop, Grübler −2, mobility 1.
  Reference: its reduced model (Bennett's closed form).

Ours: ``S.simulate`` with DEFAULT settings (RK4, dt = 1 ms, Baumgarte 1/(50 dt), "pinv" solve), float64, run in
chunks of ``--chunk`` seconds (each a ``simulate`` call from the previous chunk's last state; the default
stabilisation has no memory, so this is the same computation as one call): the first chunk compiles, so
compile ≈ first chunk − median chunk and run = median chunk x number of chunks (CPU wall time).
MuJoCo (3.x): the same tree (mrds_jax.export.to_mjcf, or by hand for A01) with every closure as equality
``connect`` constraints (a spatial revolute as two connects one 0.1 m apart on its axis), RK4, dt = 1 ms, its
default soft-constraint parameters; run = wall time of the mj_step calls.

Columns: trajectory error = max over stored states (every 10 ms) and coordinates of |q − q_ref| (rad or m,
angles wrapped); relative energy drift = max |E − E₀| / max(|E₀|, max kinetic energy); closure = max |Φ_p|
(ours: every constrained direction of every contact, rad or m; MuJoCo: distance between the connected points).

    python experiments/mbs_benchmarks.py [--quick] [--only A01,A05] [--chunk 1.0]
        (writes experiments/out/mbs_benchmarks.md, or mbs_benchmarks_quick.md; per-problem results are kept
         in experiments/out/mbs_benchmarks[_quick]/<id>.json, so that --only reruns one problem and the table
         is rebuilt from all of them)
"""
import argparse
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("XLA_FLAGS", "")          # not the test suite's reduced optimisation level
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax import contacts as C  # noqa: E402
from mrds_jax import system as S  # noqa: E402
from mrds_jax.export import to_mjcf  # noqa: E402
import mbs_benchmarks as B  # noqa: E402
from hard_mechanisms import bennett, bennett_pin, bennett_q, parallelogram_q, reduced_reference  # noqa: E402

DT = 1e-3
DECIMATION = 10


def angle_error(a, b):
    """max |a − b| with differences wrapped to (−π, π] (identity for the small metre-valued differences)."""
    return float(np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b))))).max())


# ----------------------------------------------------------------------------- problems
def _problem(pid, title, system, state, reference, mjcf, notes, **kw):
    """``kw``: ``simulate``'s Integration settings (none: the defaults); ``mjcf`` None: no MuJoCo row."""
    return SimpleNamespace(pid=pid, title=title, system=system, state=state, reference=reference, mjcf=mjcf,
                           notes=notes, kw=kw)


def _mjcf_options(xml):
    """RK4 at dt and energy computation on (MuJoCo's defaults otherwise)."""
    return re.sub(r'<option ([^>]*)/>', r'<option \1 integrator="RK4"><flag energy="enable"/></option>', xml, count=1)


def _insert_sites(xml, body, sites):
    """Add ``sites`` [(name, pos)] to MJCF ``body`` ("world" for the world body)."""
    lines = "".join(f'<site name="{n}" pos="{" ".join(f"{x:.17g}" for x in p)}"/>' for n, p in sites)
    tag = "<worldbody>" if body == "world" else re.search(rf'<body name="{re.escape(body)}"[^>]*>', xml).group(0)
    return xml.replace(tag, tag + lines, 1)


def _with_connects(xml, pairs):
    eq = "".join(f'<connect name="{a}~{b}" site1="{a}" site2="{b}"/>' for a, b in pairs)
    if "<equality>" in xml:
        return xml.replace("<equality>", "<equality>" + eq, 1)
    return xml.replace("</mujoco>", f"<equality>{eq}</equality></mujoco>")


def a01():
    p = B.A01
    th0 = p["theta0"]

    def reference(t):
        th, _ = B.a01_reference(t)
        return np.stack([np.asarray(B.a01_q(x)) for x in th])

    xml = f"""<mujoco model="A01"><option timestep="{DT}" gravity="0 {-B.G} 0"/><worldbody>
      <site name="ground" pos="0 0 0"/>
      <body name="mass"><joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
        <joint name="phi" type="hinge" axis="0 0 1"/>
        <inertial pos="0 0 0" mass="{p['m']}" diaginertia="{p['I_c']} {p['I_c']} {p['I_c']}"/>
        <site name="pivot" pos="{-p['L']} 0 0"/></body></worldbody>
      <equality><connect name="pin" site1="pivot" site2="ground"/></equality></mujoco>"""
    return _problem("A01", "A01 simple pendulum (closed loop: planar free body + pin), 1 DOF", B.a01_pendulum(),
                    B.a01_state(th0), reference, _mjcf_options(xml),
                    f"m = {p['m']} kg, L = {p['L']} m, I_c = {p['I_c']:g} kg m², from horizontal at rest")


def a02(n, **kw):
    """A02; with ``kw`` (simulate settings) a variant row without MuJoCo."""
    p = B.A02
    system = B.a02_nfourbar(n)

    def reference(t):
        th, _, q_of, _ = reduced_reference(B.a02_pin(n), lambda x: parallelogram_q(x, n), p["theta0"],
                                           p["omega0"], t)
        return np.stack([q_of(x) for x in th])

    pairs = [(f"chain/end{i}", f"chain/tip{i + 1}") for i in range(n)]
    xml = _with_connects(to_mjcf({"chain": system.modules[0]}, timestep=DT), pairs)
    if kw:
        return _problem("A02r", f"A02 N-four-bar, N = {n}, solve cut 1e-12 instead of 1e-9", system, B.a02_state(n),
                        reference, None, "`solver=SolverSettings(regularization=1e-12)`", **kw)
    return _problem("A02", f"A02 N-four-bar, N = {n} (passes singular configurations), 1 DOF", system,
                    B.a02_state(n), reference, _mjcf_options(xml),
                    f"rods/couplers {p['length']} m, {p['mass']} kg; θ₀ = π/2, θ̇₀ = {p['omega0']} rad/s")


def a05():
    p = B.A05
    system = B.a05_flyball()

    def reference(t):
        th, _, q_of, _ = reduced_reference(B.a05_pin(), B.a05_q, np.array([0.0, p["phi0"]]),
                                           np.array([p["spin0"], 0.0]), t)
        return np.stack([q_of(x) for x in th.T])

    xml = to_mjcf(system, timestep=DT)           # spherical contacts → connect
    return _problem("A05", "A05 flyball governor (spatial, 2 loops, redundant), 2 DOF", system, B.a05_state(),
                    reference, _mjcf_options(xml),
                    f"φ₀ = {p['phi0']} rad, shaft {p['spin0']:.4g} rad/s; no spring/damper")


def bennett_problem():
    system = bennett()
    th0 = 2.0
    module, contact = system.modules[0], system.contacts[0]
    f = list(module.topology.frame_names).index("tip")
    tip_R, tip_p = np.asarray(module.params.frame_R[f]), np.asarray(module.params.frame_p[f])
    g_R, g_p = np.asarray(contact.ground_R), np.asarray(contact.ground_p)
    axis_pt = np.array([0.0, 0.0, 0.1])

    def reference(t):
        th, _, q_of, _ = reduced_reference(bennett_pin(), bennett_q, th0, 0.0, t)
        return np.stack([q_of(x) for x in th])

    xml = to_mjcf({"bennett": module}, timestep=DT)
    xml = _insert_sites(xml, "bennett/l3", [("tip", tip_p), ("tip_axis", tip_p + tip_R @ axis_pt)])
    xml = _insert_sites(xml, "world", [("g4", g_p), ("g4_axis", g_p + g_R @ axis_pt)])
    xml = _with_connects(xml, [("tip", "g4"), ("tip_axis", "g4_axis")])
    return _problem("BEN", "Bennett linkage (spatial 4R, over-constrained: Grübler −2), 1 DOF", system,
                    S.SystemState((bennett_q(th0),), (jnp.zeros(3),)), reference, _mjcf_options(xml),
                    f"a = 0.3 m, α = 0.5, β = 1.1 rad; from rest at θ₁ = {th0} rad; gravity 9.81 along +y")


# ----------------------------------------------------------------------------- runs
def run_ours(problem, T, chunk):
    n = int(round(chunk / DT))
    state, pieces, secs, windows, redundant, messages = problem.state, [], [], 0, False, []
    for k in range(int(round(T / chunk))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            tr = S.simulate(problem.system, state, DT, n, integration=S.Integration(t0=k * chunk, **problem.kw),
                            output=S.Output(decimation=DECIMATION))
            jax.block_until_ready(tr.q)
            secs.append(time.perf_counter() - start)
        for w in caught:
            if issubclass(w.category, S.SingularConfigurationWarning):
                messages.append(f"t0 = {k * chunk:g} s: {str(w.message)[:400]}")
                m = re.search(r"at (\d+) time window\(s\)(?: \(and (\d+) more\))?", str(w.message))
                if m:
                    windows += int(m.group(1)) + int(m.group(2) or 0)
                else:
                    redundant = True
        pieces.append(tr)
        state = S.SystemState(tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v))
        print(f"  ours {problem.pid}: t = {(k + 1) * chunk:g} s ({secs[-1]:.1f} s)", flush=True)
    cat = lambda xs: jnp.concatenate([x[:-1] for x in xs[:-1]] + [xs[-1]])      # noqa: E731
    traj = SimpleNamespace(t=cat([p.t for p in pieces]),
                           q=tuple(cat([p.q[i] for p in pieces]) for i in range(len(pieces[0].q))),
                           v=tuple(cat([p.v[i] for p in pieces]) for i in range(len(pieces[0].v))))
    med = float(np.median(secs[1:])) if len(secs) > 1 else secs[0]
    d = S.trajectory_diagnostics(problem.system, traj)
    t = np.asarray(traj.t)
    q_ref = problem.reference(t)
    finite = all(np.all(np.isfinite(np.asarray(x))) for x in traj.q + traj.v)
    return dict(engine="mrds_jax" if problem.kw else "mrds_jax (defaults)", error=angle_error(traj.q[0], q_ref), energy=d.relative_energy_drift,
                closure=d.constraint_drift, run=med * len(secs), compile=max(secs[0] - med, 0.0), finite=finite,
                windows=windows, redundant=redundant, messages=messages, t=t.tolist(), q_ref=q_ref.tolist())


def run_mujoco(problem, T, t_ref, q_ref):
    import mujoco
    start = time.perf_counter()
    m = mujoco.MjModel.from_xml_string(problem.mjcf)
    compile_s = time.perf_counter() - start
    d = mujoco.MjData(m)
    d.qpos[:] = np.asarray(problem.state.q[0])
    d.qvel[:] = np.asarray(problem.state.v[0])
    mujoco.mj_forward(m, d)
    pairs = [(m.eq_obj1id[i], m.eq_obj2id[i]) for i in range(m.neq)]
    qs, E, K, closure, run = [], [], [], 0.0, 0.0
    for s in range(int(round(T / DT)) // DECIMATION + 1):
        if s:
            start = time.perf_counter()
            for _ in range(DECIMATION):
                mujoco.mj_step(m, d)
            run += time.perf_counter() - start
            mujoco.mj_forward(m, d)
        qs.append(d.qpos.copy())
        E.append(float(d.energy[0] + d.energy[1]))
        K.append(float(d.energy[1]))
        closure = max([closure] + [float(np.linalg.norm(d.site_xpos[a] - d.site_xpos[b])) for a, b in pairs])
    qs, E = np.array(qs), np.array(E)
    finite = bool(np.all(np.isfinite(qs)))
    err = angle_error(qs, q_ref) if finite else float("nan")
    drift = float(np.abs(E - E[0]).max() / max(abs(E[0]), max(K)))
    return dict(engine="MuJoCo (RK4, default solref)", error=err, energy=drift, closure=closure, run=run,
                compile=compile_s, finite=finite)


PROBLEMS = {"A01": a01, "A02": lambda: a02(B.A02["n"]),
            "A02r": lambda: a02(B.A02["n"], solver=S.SolverSettings(regularization=1e-12)),
            "A05": a05, "BEN": bennett_problem}


def table(results, T):
    rows = ["| problem | engine | trajectory error | rel. energy drift | max closure | run (s) | compile (s) | notes |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for pid in PROBLEMS:
        if pid not in results:
            continue
        r = results[pid]
        for k, e in enumerate(r["engines"]):
            notes = r["notes"] if k == 0 else ""
            if k == 0:
                extra = []
                if not e["finite"]:
                    extra.append("NaN")
                if e.get("windows"):
                    extra.append(f"{e['windows']} singular-configuration warning window(s)")
                if e.get("redundant"):
                    extra.append("redundancy warned at t₀")
                notes = "; ".join([notes] + extra)
            rows.append(f"| {r['title'] if k == 0 else ''} | {e['engine']} | {e['error']:.2e} | {e['energy']:.2e} | "
                        f"{e['closure']:.2e} | {e['run']:.2f} | {e['compile']:.2f} | {notes} |")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 s horizons instead of 10 s")
    ap.add_argument("--only", default="", help="comma-separated problem ids (A01, A02, A02r, A05, BEN)")
    ap.add_argument("--chunk", type=float, default=None, help="seconds per simulate call (default 1; quick 0.5)")
    ap.add_argument("--no-mujoco", action="store_true")
    a = ap.parse_args(argv)
    T = 1.0 if a.quick else 10.0
    chunk = a.chunk or (0.5 if a.quick else 1.0)
    suffix = "_quick" if a.quick else ""
    store = ROOT / "experiments" / "out" / f"mbs_benchmarks{suffix}"
    store.mkdir(parents=True, exist_ok=True)
    for pid in (a.only.split(",") if a.only else PROBLEMS):
        problem = PROBLEMS[pid]()
        print(f"{problem.title}: {T:g} s", flush=True)
        ours = run_ours(problem, T, chunk)
        t, q_ref = np.asarray(ours.pop("t")), np.asarray(ours.pop("q_ref"))
        engines = [ours]
        if not a.no_mujoco and problem.mjcf is not None:
            engines.append(run_mujoco(problem, T, t, q_ref))
        res = dict(title=problem.title, notes=problem.notes, T=T, engines=engines)
        (store / f"{pid}.json").write_text(json.dumps(res, indent=1))
        print("\n".join(table({pid: res}, T)[2:]), flush=True)
    results = {p.stem: json.loads(p.read_text()) for p in sorted(store.glob("*.json"))}
    lines = ["# IFToMM MBS benchmark problems, group A (issue 12)", "",
             f"jax {jax.__version__}, float64, CPU ({os.cpu_count()} cores, shared: times are noisy); "
             f"{T:g} s each, RK4 dt = 1 ms; `python experiments/mbs_benchmarks.py{' --quick' if a.quick else ''}`. "
             "Definitions, references and columns: the script's docstring.", ""] + table(results, T)
    lines += ["", "Warnings of our runs (SingularConfigurationWarning, per simulate call, abridged):", ""]
    for pid, r in results.items():
        msgs = r["engines"][0].get("messages", [])
        lines += [f"- {pid}: {len(msgs)} warning(s)" + "".join(f"\n  - {m[:300]}" for m in msgs[:3])]
    out = ROOT / "experiments" / "out" / f"mbs_benchmarks{suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
