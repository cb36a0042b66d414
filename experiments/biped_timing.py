"""Compile and call time of a real robot's forward dynamics (issue 25, item 6), against Pinocchio in the same run.

The robot: ``tests/data/biped_fourbar.xml``, a floating biped whose knees and ankles are driven through four-bar
linkages (ball hips, universal joints on the rods, armature): nq = 31, nv = 28, four ``connect`` loops (12
constraint rows), loaded by ``load_mjcf`` into one module. At one state that satisfies the loops (MuJoCo's
equalities solved by Gauss-Newton from a perturbed reference pose, velocities in the nullspace of their Jacobian):

* ours: ``jax.jit`` of ``forward_dynamics`` (general path, float64, one scenario), for each ``--recursion``
  asked (``load_mjcf(..., recursion=)``: "auto" is the level scan for this 15-link looped module, by
  build_system's ``loop_recursion``) and each
  ``--solver`` (``SolverSettings.method``: "pinv", the default, or "cholesky", exact here since the four loops'
  12 rows are independent): the time to trace and lower, to compile (XLA), the compiled program's
  XLA kernel count (``bench_gpu.count_kernels``), then the per-call time (median of ``--calls`` calls of the
  compiled program, each waited on, after a warm-up);
* Pinocchio: ``constraintDynamics`` on the ``to_pinocchio`` export (armature in ``model.armature``, the loops as
  ``CONTACT_3D`` constraints), data and constraint data allocated once and ``initConstraintDynamics`` run once,
  as a user of Pinocchio would: the median per call over the same number of calls;
* the answers agree (max |Δq̈|, printed).

Each time is given as wall time and as this process's CPU time over all its threads (``time.process_time``:
compile, and the mean per call), which other work on a shared machine disturbs less; XLA's runtime uses more than
one thread, so our CPU time per call can exceed the wall time. ``--profile`` adds a table of compile time and
static XLA kernel count stage by stage (ABA, CRBA, Step 2, Steps 2-3, the whole with each solve).

``--runtime`` measures ours under ways of running one scenario per call, each in a fresh interpreter (both must be
chosen before jax starts its CPU client): ``default``; ``sync`` (``jax_cpu_enable_async_dispatch`` off: the call
runs in the calling thread instead of being handed to a dispatch thread); ``one-core`` (the process pinned to one
core before the first computation, the library's ``backend_flags.one_scenario_runtime``: XLA's runtime then has no
other core to wake, where on a virtual machine an idle core is a halted vCPU that takes tens of µs to wake);
``one-core+sync`` (both).
XLA:CPU's runtime runs independent kernels of one program on its thread pool (its ``ThunkExecutor`` goes sequential
only where every buffer is ≤ 512 bytes or the program has ≤ 8 kernels), which for one scenario's ~440 small
kernels is handoffs, not parallel work. Pinocchio is single-threaded, so ``one-core`` is its own setting too.

Prints a table with the date, machine, core count, load average and jax/Pinocchio versions, and writes it to
``experiments/out/biped_timing.md``. Targets of the issue: compile ≤ 10 s, call ≤ 3x Pinocchio. Timings on a
shared machine are noisy: the load average is printed; rerun on an idle machine before quoting.

    python experiments/biped_timing.py [--calls 2000] [--recursion unrolled level_scan] [--solver pinv cholesky]
        [--runtime default sync one-core one-core+sync] [--profile]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

from mrds_jax import backend_flags, system as S  # noqa: E402
from mrds_jax.export import to_pinocchio  # noqa: E402
from mrds_jax.loaders.mjcf import load_mjcf  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_gpu import count_kernels  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "biped_fourbar.xml"
OUT = Path(__file__).parent / "out" / "biped_timing.md"

RUNTIMES = ("default", "sync", "one-core", "one-core+sync")


def apply_runtime(name):
    """Put this process in ``--runtime`` ``name``'s setting before any computation (module docstring): ``one-core``
    is the library's ``backend_flags.one_scenario_runtime``."""
    if "one-core" in name:
        backend_flags.one_scenario_runtime()
    if "sync" in name:
        jax.config.update("jax_cpu_enable_async_dispatch", False)



def consistent_qpos_qvel(model, rng, spread=0.3):
    """(qpos, qvel) satisfying MuJoCo's equalities (Gauss-Newton on efc_pos), qvel in the nullspace of efc_J."""
    data = mujoco.MjData(model)
    qpos = np.array(model.qpos0)
    mujoco.mj_integratePos(model, qpos, rng.uniform(-spread, spread, model.nv), 1.0)
    for _ in range(50):
        data.qpos[:] = qpos
        mujoco.mj_forward(model, data)
        r, J = data.efc_pos.copy(), data.efc_J.reshape(-1, model.nv).copy()
        if np.abs(r).max() < 1e-13:
            break
        mujoco.mj_integratePos(model, qpos, -np.linalg.lstsq(J, r, rcond=1e-10)[0], 1.0)
    qvel = rng.uniform(-1, 1, model.nv)
    return qpos, qvel - np.linalg.pinv(J, rcond=1e-10) @ (J @ qvel)


def biped(seed=0, recursion="auto"):
    """(system, our state, τ, MuJoCo model) of the biped at a consistent state (``load_mjcf``'s ``recursion``)."""
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        system, mapping = load_mjcf(model, return_mapping=True, recursion=recursion)
    rng = np.random.default_rng(seed)
    state = mapping.state(*consistent_qpos_qvel(model, rng))
    tau = (jnp.asarray(rng.uniform(-5, 5, system.modules[0].nv)),)
    return system, state, tau, model


def call_times(f, args, calls):
    """(median wall time, mean process CPU time) in s of ``calls`` calls of f(*args), each waited on (after 20
    warm-up calls). The CPU time counts this process's threads only, so it is less disturbed by other work on a
    shared machine than the wall time."""
    for _ in range(20):
        jax.block_until_ready(f(*args))
    times = np.empty(calls)
    c0 = time.process_time()
    for i in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times[i] = time.perf_counter() - t0
    return float(np.median(times)), (time.process_time() - c0) / calls


def ours(system, state, tau, calls, solver="pinv"):
    """(trace+lower s, compile s, kernels, per-call s, q̈) of jit(forward_dynamics) with ``solver``'s method."""
    settings = S.SolverSettings(method=solver)
    f = jax.jit(lambda sy, st, tq: S.forward_dynamics(sy, st, tq, solver=settings).qdd)
    t0, c0 = time.perf_counter(), time.process_time()
    lowered = f.lower(system, state, tau)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2, c2 = time.perf_counter(), time.process_time()
    kernels = count_kernels(compiled.as_text())
    qdd = np.concatenate([np.asarray(x) for x in compiled(system, state, tau)])
    return t1 - t0, t2 - t1, c2 - c0, kernels, call_times(compiled, (system, state, tau), calls), qdd


def pinocchio(system, state, tau, calls):
    """((median wall, mean CPU) s per call, q̈ in Pinocchio's order, twin) of Pinocchio's constraintDynamics on the
    export."""
    twin = to_pinocchio(system)
    model, cms = twin.model, twin.constraints
    data = model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(model, data, cms, cds)
    prox = pin.ProximalSettings()
    q, v, tq = twin.q(state.q), twin.v(state.v), twin.v(tau)

    def call():
        return pin.constraintDynamics(model, data, q, v, tq, cms, cds, prox)
    return call_times(call, (), calls), np.array(call()), twin


def stage_costs(recursion):
    """Where compile time and kernels go, stage by stage (``--profile``): (label, trace + lower s, compile s,
    kernels, while loops) of jit(f) for ABA of the open tree, CRBA, Step 2 (``module_terms`` for the 8 loop
    points), Steps 2-3 (``constraint_system``: Bᶜ, yᶜ) and the whole forward dynamics with each solve."""
    from mrds_jax import aba, mass_matrix
    from mrds_jax.dynamics.interface import module_terms
    from mrds_jax.system.constraint_space import constraint_system
    system, state, tau, _ = biped(recursion=recursion)
    m, pts = system.modules[0], system.connectivity.points[0]
    q, v, tq = state.q[0], state.v[0], tau[0]
    stages = [("ABA, open tree", lambda m, q, v, t: aba(m, q, v, t), (m, q, v, tq)),
              ("CRBA", lambda m, q: mass_matrix(m, q), (m, q)),
              ("Step 2: module_terms (8 points)", lambda m, q, v, t: module_terms(m, q, v, t, pts), (m, q, v, tq)),
              ("Steps 2-3: constraint_system", lambda sy, st, t: constraint_system(sy, st, t)[:2], (system, state, tau))]
    stages += [(f"forward_dynamics, {sv} solve",
                lambda sy, st, t, sv=sv: S.forward_dynamics(sy, st, t, solver=S.SolverSettings(method=sv)).qdd,
                (system, state, tau)) for sv in ("cholesky", "pinv")]
    out = []
    for label, f, args in stages:
        t0 = time.perf_counter()
        lowered = jax.jit(f).lower(*args)
        t1 = time.perf_counter()
        k = count_kernels(lowered.compile().as_text())
        out.append((label, t1 - t0, time.perf_counter() - t1, k["total"], k["while_loops"]))
    return out


def measure(rec, solver, calls):
    """One row's numbers in this process: (trace+lower s, compile s, compile CPU s, kernels, (call wall, CPU) s,
    Pinocchio's (wall, CPU) s as the least of a run before and after ours, max |Δq̈|)."""
    system, state, tau, _ = biped()
    t_pin, ddq, twin = pinocchio(system, state, tau, calls)
    t_lower, t_compile, cpu_compile, kernels, t_call, qdd = ours(biped(recursion=rec)[0], state, tau, calls, solver)
    t_pin2 = pinocchio(system, state, tau, calls)[0]     # again, next to ours: the machine's load drifts
    t_ref = [min(x, y) for x, y in zip(t_pin, t_pin2)]
    return dict(lower=t_lower, compile=t_compile, cpu_compile=cpu_compile, kernels=kernels, call=t_call, ref=t_ref,
                err=float(np.abs(twin.v([qdd]) - ddq).max()))


def measure_in_child(runtime, rec, solver, calls):
    """:func:`measure` in a fresh interpreter put in ``runtime``'s setting before jax starts."""
    out = subprocess.run([sys.executable, __file__, "--child-runtime", runtime, "--recursion", rec, "--solver", solver,
                          "--calls", str(calls)], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true", help="also compile the stages one by one (slow)")
    ap.add_argument("--solver", nargs="+", default=["pinv", "cholesky"], choices=["pinv", "cholesky"])
    ap.add_argument("--recursion", nargs="+", default=["unrolled", "level_scan"], choices=["auto", "unrolled", "level_scan"])
    ap.add_argument("--runtime", nargs="+", default=["default", "one-core"], choices=RUNTIMES,
                    help="ways of running one scenario per call (module docstring), each in a fresh interpreter")
    ap.add_argument("--child-runtime", choices=RUNTIMES, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child_runtime:
        apply_runtime(a.child_runtime)
        print(json.dumps(measure(a.recursion[0], a.solver[0], a.calls)))
        return
    system, state, tau, model = biped()
    m = system.modules[0]
    load = os.getloadavg()
    lines = [f"# Biped with four-bar knees and ankles: forward dynamics, ours vs Pinocchio ({datetime.date.today()})",
             "",
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} "
             f"{load[1]:.2f} {load[2]:.2f} (a shared machine when > ~0.5), jax {jax.__version__} "
             f"({jax.default_backend()}), Pinocchio {pin.__version__}, MuJoCo {mujoco.__version__}, float64, one "
             "scenario.",
             "",
             f"Robot: `{MODEL.relative_to(ROOT)}`: nq = {m.nq}, nv = {m.nv}, {len(m.topology.link_names)} links, "
             f"{len(system.contacts)} connect loops ({system.connectivity.n_constraints} constraint rows); "
             f"{a.calls} calls, median.",
             "",
             "Wall times, and in parentheses this process's CPU time over all its threads (less disturbed by other "
             "work on a shared machine; XLA's runtime is multi-threaded, so its CPU time per call can exceed the wall "
             "time). Runtime: how the process runs one scenario per call (module docstring; each row in a fresh "
             "interpreter, Pinocchio in the same one).",
             "",
             "| runtime | ours: recursion | solve | trace + lower + XLA compile, s (CPU s) | kernels (fusions) | ours per "
             "call, µs (CPU) | Pinocchio per call, µs (CPU) | ratio (CPU) | max abs Δq̈ |",
             "|---|---|---|---|---|---|---|---|---|"]
    for runtime, rec, solver in ((rt, r, sv) for rt in a.runtime for r in a.recursion for sv in a.solver):
        r = measure_in_child(runtime, rec, solver, a.calls)
        call, ref, k = r["call"], r["ref"], r["kernels"]
        lines.append(f"| {runtime} | {rec} | {solver} | {r['lower']:.2f} + {r['compile']:.2f} ({r['cpu_compile']:.2f}) "
                     f"| {k['total']} ({k['fusion']}) | {call[0] * 1e6:.0f} ({call[1] * 1e6:.0f}) | {ref[0] * 1e6:.1f} "
                     f"({ref[1] * 1e6:.1f}) | {call[0] / ref[0]:.1f} ({call[1] / ref[1]:.1f}) | {r['err']:.1e} |")
    lines += ["", "Targets (issue 25): compile (trace + lower + XLA compile) ≤ 10 s, per call ≤ 3x Pinocchio; issue 43: "
              "per call ≤ 10x Pinocchio, compile ≤ 3 s."]
    if a.profile:
        lines += ["", "## Where compile time and kernels go (static XLA kernel count; a while loop's body counts once)",
                  "", "| recursion | stage | trace + lower (s) | XLA compile (s) | kernels | while loops |",
                  "|---|---|---|---|---|---|"]
        for rec in a.recursion:
            lines += [f"| {rec} | {label} | {tl:.2f} | {tc:.2f} | {k} | {w} |" for label, tl, tc, k, w in stage_costs(rec)]
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
