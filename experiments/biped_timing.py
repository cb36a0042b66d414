"""Compile and call time of a real robot's forward dynamics (issue 25, item 6), against Pinocchio in the same run.

The robot: ``tests/data/biped_fourbar.xml``, a floating biped whose knees and ankles are driven through four-bar
linkages (ball hips, universal joints on the rods, armature): nq = 31, nv = 28, four ``connect`` loops (12
constraint rows), loaded by ``load_mjcf`` into one module. At one state that satisfies the loops (MuJoCo's
equalities solved by Gauss-Newton from a perturbed reference pose, velocities in the nullspace of their Jacobian):

* ours: ``jax.jit`` of ``forward_dynamics`` (general path, float64, one scenario), for each ``--recursion``
  asked (``load_mjcf(..., recursion=)``: "auto" is the unrolled recursion for this 15-link module) and each
  ``--solver`` (``SolverSettings.method``: "pinv", the default, or "cholesky", exact here since the four loops'
  12 rows are independent): the time to trace and lower, to compile (XLA), the compiled program's
  XLA kernel count (``bench_gpu.count_kernels``), then the per-call time (median of ``--calls`` calls of the
  compiled program, each waited on, after a warm-up);
* Pinocchio: ``constraintDynamics`` on the ``to_pinocchio`` export (armature in ``model.armature``, the loops as
  ``CONTACT_3D`` constraints), data and constraint data allocated once and ``initConstraintDynamics`` run once,
  as a user of Pinocchio would: the median per call over the same number of calls;
* the answers agree (max |Δq̈|, printed).

Prints a table with the date, machine, core count, load average and jax/Pinocchio versions, and writes it to
``experiments/out/biped_timing.md``. Targets of the issue: compile ≤ 10 s, call ≤ 3x Pinocchio. Timings on a
shared machine are noisy: the load average is printed; rerun on an idle machine before quoting.

    python experiments/biped_timing.py [--calls 2000] [--recursion unrolled level_scan] [--solver pinv cholesky]
"""
import argparse
import datetime
import os
import platform
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

from mrds_jax import system as S  # noqa: E402
from mrds_jax.export import to_pinocchio  # noqa: E402
from mrds_jax.model.mjcf import load_mjcf  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_gpu import count_kernels  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "biped_fourbar.xml"
OUT = Path(__file__).parent / "out" / "biped_timing.md"


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


def median_call(f, args, calls):
    """Median wall time (s) of ``calls`` calls of f(*args), each waited on (after 20 warm-up calls)."""
    for _ in range(20):
        jax.block_until_ready(f(*args))
    times = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times[i] = time.perf_counter() - t0
    return float(np.median(times))


def ours(system, state, tau, calls, solver="pinv"):
    """(trace+lower s, compile s, kernels, per-call s, q̈) of jit(forward_dynamics) with ``solver``'s method."""
    settings = S.SolverSettings(method=solver)
    f = jax.jit(lambda sy, st, tq: S.forward_dynamics(sy, st, tq, solver=settings).qdd)
    t0 = time.perf_counter()
    lowered = f.lower(system, state, tau)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    kernels = count_kernels(compiled.as_text())
    qdd = np.concatenate([np.asarray(x) for x in compiled(system, state, tau)])
    return t1 - t0, t2 - t1, kernels, median_call(compiled, (system, state, tau), calls), qdd


def pinocchio(system, state, tau, calls):
    """(per-call s, q̈ in our order) of Pinocchio's constraintDynamics on the export."""
    twin = to_pinocchio(system)
    model, cms = twin.model, twin.constraints
    data = model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(model, data, cms, cds)
    prox = pin.ProximalSettings()
    q, v, tq = twin.q(state.q), twin.v(state.v), twin.v(tau)

    def call():
        return pin.constraintDynamics(model, data, q, v, tq, cms, cds, prox)
    for _ in range(20):
        call()
    times = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        call()
        times[i] = time.perf_counter() - t0
    ddq = np.array(call())
    return float(np.median(times)), ddq, twin


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--solver", nargs="+", default=["pinv", "cholesky"], choices=["pinv", "cholesky"])
    ap.add_argument("--recursion", nargs="+", default=["unrolled", "level_scan"], choices=["auto", "unrolled", "level_scan"])
    a = ap.parse_args(argv)
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
             "| ours: recursion | solve | trace + lower (s) | XLA compile (s) | kernels (fusions) | ours per call (µs) | "
             "Pinocchio per call (µs) | ratio | max abs Δq̈ |",
             "|---|---|---|---|---|---|---|---|---|"]
    t_pin, ddq, twin = pinocchio(system, state, tau, a.calls)
    for rec, solver in ((r, sv) for r in a.recursion for sv in a.solver):
        t_lower, t_compile, kernels, t_call, qdd = ours(biped(recursion=rec)[0], state, tau, a.calls, solver)
        t_pin2 = pinocchio(system, state, tau, a.calls)[0]     # again, next to ours: the machine's load drifts
        t_ref = min(t_pin, t_pin2)
        err = np.abs(twin.v([qdd]) - ddq).max()
        lines.append(f"| {rec} | {solver} | {t_lower:.2f} | {t_compile:.2f} | {kernels['total']} ({kernels['fusion']}) | "
                     f"{t_call * 1e6:.1f} | {t_ref * 1e6:.1f} | {t_call / t_ref:.2f} | {err:.1e} |")
    lines += ["", "Targets (issue 25): compile (trace + lower + XLA compile) ≤ 10 s, per call ≤ 3x Pinocchio."]
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
