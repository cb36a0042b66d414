"""Closed-chain step cost: mrds_jax (general MRDS path and Lilly & Orin fast path) next to Pinocchio's
exact ``constraintDynamics`` and MuJoCo's ``mj_step`` on the same mechanisms, in one run.

Mechanisms: the CKCM Stewart platform (Nguyen & Pooran eq. 2-4, 58; six universal-prismatic legs with
spherical contacts to a free payload; MuJoCo model: ../shared/bench/ckcm_stewart_mjx.xml, the model behind
DESIGN.md's MJX figures) and two 6-R arms welded to one free box (``mrds_jax.examples.dual_arm_grasp``;
MuJoCo model exported with ``mrds_jax.export.to_mjcf``).

Reported per mechanism: compile time; µs per forward-dynamics call and per RK4 / semi-implicit Euler step
(a 200-step ``lax.scan`` inside one jit, divided), single scenario and a vmapped batch; Pinocchio's
constraintDynamics µs per call; MuJoCo's mj_step µs per step (``nstep`` in C, no Python loop); and the
loop-closure error after 1 s of passive motion (dt = 1 ms) for mrds_jax (no stabilisation, and Baumgarte)
and MuJoCo (its default soft constraints).

    python experiments/bench_closed_chain.py [--batch 256] [--float32] [--out experiments/out/bench_closed_chain.md]

GPU: run the same script on a CUDA machine; it prints the device. (No GPU was lent to the session that
wrote this script; see the issue notes.)
"""
import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # Pinocchio twins of our systems live with the tests
# tests/conftest.py (imported through tests/robots.py for the URDF paths) lowers XLA's backend optimisation
# level for the test suite's many one-off compilations; a benchmark must run fully optimised (at level 0 the
# Stewart rollout is about 10x slower). Set it before jax initialises its backend.
os.environ.setdefault("XLA_FLAGS", "")

import jax  # noqa: E402


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "out" / "bench_closed_chain.md"))
    return ap.parse_args(argv)


# imported by experiments/bench_gpu.py for its helpers: defaults (float64) then
ARGS = parse() if __name__ == "__main__" else parse([])
if not ARGS.float32:
    jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

from mrds_jax import system as S  # noqa: E402
from mrds_jax.examples import dual_arm_grasp  # noqa: E402
from mrds_jax.export import mujoco_state, to_mjcf  # noqa: E402
from mrds_jax.integrate import rollout  # noqa: E402
from mrds_jax.export import to_pinocchio  # noqa: E402
from system_models import ckcm_leg_q, ckcm_modules, from_se3  # noqa: E402

DT = 1e-3
LINES = []


def out(s=""):
    print(s, flush=True)
    LINES.append(s)


def best_time(f, *args, repeats=5, min_time=0.2):
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            jax.block_until_ready(f(*args))
            n += 1
            if time.perf_counter() - t0 > min_time / repeats:
                break
        times.append((time.perf_counter() - t0) / n)
    return float(np.median(times))


def compile_time(f, *args):
    t0 = time.perf_counter()
    c = jax.jit(f).lower(*args).compile()
    return c, time.perf_counter() - t0


def cast(tree, dtype):
    return jax.tree.map(lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x,
                        tree)


# ----------------------------------------------------------------------------- mechanisms
def stewart():
    legs, payload = ckcm_modules()
    names = [f"leg{i + 1}" for i in range(6)]
    from mrds_jax import contacts as C
    contacts = [C.spherical(f"ball{i + 1}", (names[i], "tip"), ("payload", f"A{i + 1}")) for i in range(6)]
    system = S.build_system(dict(zip(names + ["payload"], legs + [payload])), contacts)
    pose = pin.SE3(np.eye(3), np.array([0.0, 0.0, 1.0]))
    A_world = [pose.act(np.asarray(payload.params.frame_p[i])) for i in range(6)]
    q = [ckcm_leg_q(legs[i], A_world[i]) for i in range(6)] + [from_se3(pose)]
    state = S.SystemState(tuple(jnp.asarray(x) for x in q), tuple(jnp.zeros(m.nv) for m in legs + [payload]))
    merged = to_pinocchio(system)      # six CONTACT_3D (joint1 = payload point, joint2 = leg tip)
    cms = merged.constraints
    mj_model = mujoco.MjModel.from_xml_path(str(ROOT.parent / "shared" / "bench" / "ckcm_stewart_mjx.xml"))
    return system, state, merged, cms, mj_model, None


def dual_arm():
    system, state = dual_arm_grasp()
    merged = to_pinocchio(system)      # two CONTACT_6D (joint1 = box grasp frame, joint2 = arm tip)
    cms = merged.constraints
    mj_model = mujoco.MjModel.from_xml_string(to_mjcf(system))
    return system, state, merged, cms, mj_model, system


def mujoco_initial(mj_model, system, state):
    data = mujoco.MjData(mj_model)
    if system is None:   # the shared Stewart MJCF starts at its nominal pose (qpos0) = our state
        mujoco.mj_forward(mj_model, data)
        return data
    qpos, qvel = zip(*(mujoco_state(m, q, v) for m, q, v in zip(system.modules, state.q, state.v)))
    data.qpos[:], data.qvel[:] = np.concatenate(qpos), np.concatenate(qvel)
    mujoco.mj_forward(mj_model, data)
    return data


def mujoco_violation(mj_model, data):
    """Max equality-constraint residual (positions, m)."""
    mujoco.mj_forward(mj_model, data)
    eq_rows = data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    return float(np.abs(data.efc_pos[eq_rows]).max()) if eq_rows.any() else float("nan")


def pinocchio_time(merged, cms, state, n=2000):
    """(s per ``constraintDynamics`` call at ``state`` with zero velocity and torque, q̈) — a Python loop."""
    qp = merged.q([np.asarray(x, float) for x in state.q])
    vp = np.zeros(merged.model.nv)
    data = merged.model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(merged.model, data, cms, cds)
    prox = pin.ProximalSettings()
    tau = np.zeros(merged.model.nv)
    t0 = time.perf_counter()
    for _ in range(n):
        pin.constraintDynamics(merged.model, data, qp, vp, tau, cms, cds, prox)
    t_pin = (time.perf_counter() - t0) / n
    return t_pin, pin.constraintDynamics(merged.model, data, qp, vp, tau, cms, cds, prox)


def mujoco_step_time(mj_model, mj_system, state, nstep=5000):
    """s per ``mj_step`` from ``state`` (C loop via ``nstep``, after a 10-step warm-up)."""
    d = mujoco_initial(mj_model, mj_system, state)
    mujoco.mj_step(mj_model, d, nstep=10)
    d = mujoco_initial(mj_model, mj_system, state)
    t0 = time.perf_counter()
    mujoco.mj_step(mj_model, d, nstep=nstep)
    return (time.perf_counter() - t0) / nstep


def bench(name, build, dtype):
    system, state, merged, cms, mj_model, mj_system = build()
    system, state = cast(system, dtype), cast(state, dtype)
    out(f"\n## {name}\n")
    nv = sum(m.nv for m in system.modules)
    out(f"{len(system.modules)} modules, nv = {nv}, {len(system.contacts)} contacts, "
        f"n_C = {system.connectivity.n_constraints} constrained directions")
    rows = []

    fd = lambda st: S.forward_dynamics(system, st).qdd  # noqa: E731
    lilly = lambda st: S.lilly_forward_dynamics(system, st).qdd  # noqa: E731
    for label, f in (("forward dynamics, general MRDS", fd), ("forward dynamics, Lilly fast path", lilly)):
        c, tc = compile_time(f, state)
        rows.append((label, tc, best_time(c, state) * 1e6, None))

    def steps(integrator, f_acc=None):
        def run(st):
            acc = S.system_acceleration(system) if f_acc is None else f_acc
            tr = rollout(system.modules, acc, st.q, st.v, DT, ARGS.steps, ARGS.steps, integrator)
            return tr.q, tr.v
        return run

    batch_state = jax.tree.map(lambda x: jnp.broadcast_to(x, (ARGS.batch,) + x.shape), state)
    for integ in ("rk4", "euler"):
        run = steps(integ)
        c, tc = compile_time(run, state)
        t1 = best_time(c, state, repeats=3) / ARGS.steps
        cb, tcb = compile_time(jax.vmap(run), batch_state)
        tb = best_time(cb, batch_state, repeats=3) / ARGS.steps / ARGS.batch
        rows.append((f"{integ.upper()} step (scan of {ARGS.steps})", tc, t1 * 1e6, tb * 1e6))

    # Pinocchio: exact constraint dynamics, same mechanism and state
    t_pin, ddq_pin = pinocchio_time(merged, cms, state)
    ours = merged.v([np.asarray(x, float) for x in fd(state)])
    rows.append(("Pinocchio constraintDynamics (per call, Python loop)", None, t_pin * 1e6, None))

    # MuJoCo: mj_step with its default (soft) constraints, C loop via nstep
    t_mj = mujoco_step_time(mj_model, mj_system, state)
    rows.append((f"MuJoCo mj_step (dt = {mj_model.opt.timestep:g} s, {mj_model.opt.integrator=})".replace(
        "mj_model.opt.integrator=", "integrator "), None, t_mj * 1e6, None))

    out("| what | compile s | µs per call/step, 1 scenario | µs per scenario-step, batch "
        f"{ARGS.batch} |")
    out("|---|---|---|---|")
    for label, tc, t1, tb in rows:
        out(f"| {label} | {'' if tc is None else f'{tc:.1f}'} | {t1:.1f} | {'' if tb is None else f'{tb:.2f}'} |")
    out(f"\nmax |q̈ ours − q̈ Pinocchio| at this state: {np.abs(ours - ddq_pin).max():.2e} "
        f"(max |q̈| = {np.abs(ddq_pin).max():.2f})")

    # loop closure after 1 s of passive motion
    n1 = int(round(1.0 / DT))
    viol = []
    for label, stab in (("mrds_jax RK4, no stabilisation", None),
                        ("mrds_jax RK4, Baumgarte β = 20/s", S.baumgarte(20.0))):
        tr = S.simulate(system, state, DT, n1, integration=S.Integration(stabilisation=stab),
                        checks=S.Checks(enabled=False), output=S.Output(decimation=n1))
        last = S.SystemState(tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v))
        errs = S.constraint_errors(system, last)
        viol.append((label, max(float(jnp.abs(e).max()) for e in errs.position)))
    d = mujoco_initial(mj_model, mj_system, state)
    mujoco.mj_step(mj_model, d, nstep=int(round(1.0 / mj_model.opt.timestep)))
    viol.append(("MuJoCo mj_step, default soft constraints", mujoco_violation(mj_model, d)))
    out("\n| loop-closure error after 1 s (passive, from rest) | max position error |")
    out("|---|---|")
    for label, e in viol:
        out(f"| {label} | {e:.2e} |")


def main():
    dtype = jnp.float32 if ARGS.float32 else jnp.float64
    out("# Closed-chain step cost: mrds_jax vs Pinocchio vs MuJoCo\n")
    out(f"- command: `python experiments/bench_closed_chain.py {' '.join(sys.argv[1:])}`")
    out(f"- {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; device {jax.devices()[0].device_kind} "
        f"({jax.default_backend()}); jax {jax.__version__}, pinocchio {pin.__version__}, mujoco {mujoco.__version__}; "
        f"{os.cpu_count()} CPUs ({platform.machine()}); dtype {jnp.dtype(dtype).name}; "
        f"load average {os.getloadavg()[0]:.1f}")
    out("- times are medians after compilation; Pinocchio and MuJoCo run the same mechanism at the same state")
    bench("CKCM Stewart platform", stewart, dtype)
    bench("Two 6-R arms welded to one box", dual_arm, dtype)
    Path(ARGS.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ARGS.out).write_text("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()
