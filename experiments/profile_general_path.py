"""Where the general MRDS path's time goes, per robot class (issue 35, item 1): the four-loop biped
(``tests/data/biped_fourbar.xml``, one 15-link module, nv = 28, 8 loop points, 12 constraint rows) and the dual-arm
grasp (``mrds_jax.examples.dual_arm_grasp``: two 6-R arms and a free box, two welds, 12 constraint rows).

Each stage is ``jax.jit(jax.vmap(stage))`` of one scenario's function over a batch of identical states (float32,
the system and forces are arguments, not constants), stage by stage as the general path computes them:

* module stages on the largest looped module: forward kinematics with velocities, CRBA (H), RNEA at q̈ = 0
  (C v + G), the points' task Jacobians, the SPD solve H⁻¹[τ − b | Jᵀ] (all in link coordinates), the whole Step 2
  over every task row (``module_terms``: q̈ᵒᵖᵉⁿ, Ψ, Λ⁻¹, point kinematics), and the ground-coordinate pieces
  (``mrds_jax.dynamics.ground``) that ``constraint_system`` uses on the level-scan route: kinematics, H and C v + G,
  the points;
* ``constraint_system`` asks each module for Step 2 along its constraint directions only
  (``module_terms_along``), so its row contains Step 2 as the rollout computes it;
* system stages: Steps 2-3 (``constraint_system``: Bᶜ, yᶜ), Steps 2-4 (``forward_dynamics`` with the default
  solver), and the acceleration the rollout calls (force elements and the default Baumgarte stabilisation
  included), and one semi-implicit Euler step.

For each stage: lower + compile seconds, static XLA kernel count (``bench_gpu.count_kernels``: a while-loop body
counts once), number of HLO instructions in the optimized module, XLA cost analysis (bytes accessed and flops per
scenario, at the batch; XLA does not count while-loop bodies, so stages holding level scans or fori_loops are
undercounted: the column "loops" says how many while loops the stage holds), and µs per scenario at the batch
(minimum over repetitions, after compilation). Stages are nested (each later stage contains the earlier ones), so
differences between rows say what a stage adds.

    python experiments/profile_general_path.py [--batch 1024] [--repeats 5] [--robots biped dual_arm]
        [--recursion auto]

Writes ``experiments/out/profile_general_path.md``. On a shared machine times are noisy (the load average is
printed); the kernel counts, HLO sizes and bytes are load-independent.
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
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
from bench_gpu import count_kernels  # noqa: E402

import mrds_jax  # noqa: E402
from mrds_jax import system as S  # noqa: E402
from mrds_jax.dynamics import ground  # noqa: E402
from mrds_jax.dynamics.common import gravity_acceleration  # noqa: E402
from mrds_jax.dynamics.crba import mass_matrix_from_kinematics, mass_matrix_solve  # noqa: E402
from mrds_jax.dynamics.interface import module_terms  # noqa: E402
from mrds_jax.dynamics.kinematics import forward_kinematics, task_jacobian  # noqa: E402
from mrds_jax.dynamics.rnea import nonlinear_effects_from_kinematics  # noqa: E402
from mrds_jax.integrate import rollout  # noqa: E402
from mrds_jax.system.constraint_space import constraint_system  # noqa: E402

OUT = ROOT / "experiments" / "out" / "profile_general_path.md"
DTYPE = jnp.float32


def _cast(x):
    return jax.tree.map(lambda y: jnp.asarray(y, DTYPE) if jnp.issubdtype(jnp.asarray(y).dtype, jnp.floating)
                        else y, x)


def biped(recursion):
    """(system, state, forces, dt) of the four-loop biped at its consistent reference pose, float32."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = mrds_jax.load_mjcf(str(ROOT / "tests" / "data" / "biped_fourbar.xml"),
                                                     return_mapping=True, return_forces=True, recursion=recursion)
        import mujoco
        m = mujoco.MjModel.from_xml_path(str(ROOT / "tests" / "data" / "biped_fourbar.xml"))
        rng = np.random.default_rng(0)
        state = S.make_consistent(system, mapping.state(np.array(m.qpos0), 1e-2 * rng.standard_normal(m.nv)))[0]
    return _cast(system), _cast(state), _cast(forces), float(m.opt.timestep)


def dual_arm(recursion):
    from mrds_jax.examples import dual_arm_grasp
    system, state = dual_arm_grasp()
    return _cast(system), _cast(state), (), 1e-3


ROBOTS = {"biped": biped, "dual_arm": dual_arm}


def stages(system, forces, dt):
    """[(label, f(system, forces, state))] of one scenario, in the order the general path computes them."""
    conn = system.connectivity
    k = max(range(len(system.modules)), key=lambda i: (len(conn.points[i]), system.modules[i].nv))
    pts = conn.points[k]

    def mod(f):
        return lambda sy, fo, st: f(sy.modules[k], st.q[k], st.v[k], pts)

    def tau0(sy, st):
        return tuple(jnp.zeros(m.nv, st.q[0].dtype) for m in sy.modules)

    def solve(m, q, v, pts):
        kin = forward_kinematics(m, q, v)
        H = mass_matrix_from_kinematics(m, kin)
        b = nonlinear_effects_from_kinematics(m, kin)
        J = task_jacobian(m, q, pts, "world_aligned", kin)
        return mass_matrix_solve(m, H, jnp.concatenate([-b[:, None], J.T], axis=1))

    stabilisation = S.default_stabilisation(dt)
    acc = S.system_acceleration(system, forces, stabilisation)

    def step(sy, fo, st):
        a = S.system_acceleration(sy, fo, stabilisation)
        tr = rollout(sy.modules, a, st.q, st.v, jnp.asarray(dt, DTYPE), 1, 1, "euler")
        return tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v)
    del acc
    name = f"module {k} ({system.modules[k].nv} dof, {len(pts)} points)"

    def ground_h_b(m, q, v, p):
        kin = ground.ground_kinematics(m, q, v)
        inertias = ground.ground_inertias(m, kin)
        acc = ground.link_accelerations(m, kin, jnp.zeros_like(v), gravity_acceleration(m))
        return ground.mass_matrix(m, kin, inertias), ground.nonlinear_effects(m, kin, inertias, acc)
    return [
        (f"{name}: kinematics (FK with v)", mod(lambda m, q, v, p: forward_kinematics(m, q, v)[2:4])),
        (f"{name}: + CRBA (H)", mod(lambda m, q, v, p: mass_matrix_from_kinematics(m, forward_kinematics(m, q, v)))),
        (f"{name}: + RNEA (C v + G)",
         mod(lambda m, q, v, p: nonlinear_effects_from_kinematics(m, forward_kinematics(m, q, v)))),
        (f"{name}: + points' Jacobians", mod(lambda m, q, v, p: task_jacobian(m, q, p))),
        (f"{name}: FK + H + b + J + H⁻¹[τ−b | Jᵀ]", mod(solve)),
        (f"{name}: Step 2 module_terms", mod(lambda m, q, v, p: module_terms(m, q, v, jnp.zeros_like(v), p))),
        (f"{name}: ground coordinates: kinematics", mod(lambda m, q, v, p: ground.ground_kinematics(m, q, v)[3:])),
        (f"{name}: ground coordinates: + H and C v + G", mod(ground_h_b)),
        (f"{name}: ground coordinates: + the points (R, p, ẋ, J, J̇v)",
         mod(lambda m, q, v, p: ground.ground_terms(m, q, v, p)[1:6])),
        ("system: Steps 2-3 constraint_system (Bᶜ, yᶜ)",
         lambda sy, fo, st: constraint_system(sy, st, tau0(sy, st))[:2]),
        ("system: Steps 2-4 forward_dynamics", lambda sy, fo, st: S.forward_dynamics(sy, st, tau0(sy, st)).qdd),
        ("system: + forces + Baumgarte (rollout's q̈)",
         lambda sy, fo, st: S.system_acceleration(sy, fo, stabilisation)(st.q, st.v, 0.0)),
        ("system: one Euler step", step),
    ]


def measure(f, system, forces, states, batch, repeats):
    g = jax.jit(jax.vmap(f, in_axes=(None, None, 0)))
    t0 = time.perf_counter()
    lowered = g.lower(system, forces, states)
    t1 = time.perf_counter()
    c = lowered.compile()
    t2 = time.perf_counter()
    text = c.as_text()
    kern = count_kernels(text)
    n_hlo = sum(1 for ln in text.splitlines() if " = " in ln and not ln.lstrip().startswith("//"))
    ca = c.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    jax.block_until_ready(c(system, forces, states))
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(c(system, forces, states))
        best = min(best, time.perf_counter() - t)
    return dict(lower=t1 - t0, compile=t2 - t1, kernels=kern["total"], loops=kern["while_loops"], hlo=n_hlo,
                bytes=ca.get("bytes accessed", float("nan")) / batch, flops=ca.get("flops", float("nan")) / batch,
                us=best / batch * 1e6)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--robots", nargs="+", default=list(ROBOTS), choices=list(ROBOTS))
    ap.add_argument("--recursion", default="auto", choices=["auto", "unrolled", "level_scan"])
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    load = os.getloadavg()
    lines = [f"# Where the general path's time goes, per robot class ({datetime.date.today()})", "",
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} "
             f"{load[1]:.2f} {load[2]:.2f} at the start, jax {jax.__version__}, float32, batch {a.batch}, "
             f"recursion {a.recursion!r} (``load_mjcf``), XLA_FLAGS {os.environ.get('XLA_FLAGS', '')!r}, "
             f"mrds_jax backend flags {mrds_jax.BACKEND_FLAGS}.", "",
             "Stages are nested: each row contains the rows above it within its group. bytes and flops: XLA cost "
             "analysis per scenario (while-loop bodies not counted: see `loops`). µs: per scenario at the batch, "
             "minimum of the repetitions.", "",
             "| robot | stage | lower s | compile s | kernels | loops | HLO ops | bytes/scen. | flops/scen. | "
             "µs/scen. |", "|---|---|---|---|---|---|---|---|---|---|"]
    for robot in a.robots:
        system, state, forces, dt = ROBOTS[robot](a.recursion)
        states = jax.tree.map(lambda x: jnp.broadcast_to(x, (a.batch,) + x.shape), state)
        for label, f in stages(system, forces, dt):
            r = measure(f, system, forces, states, a.batch, a.repeats)
            row = (f"| {robot} | {label} | {r['lower']:.2f} | {r['compile']:.2f} | {r['kernels']} | {r['loops']} | "
                   f"{r['hlo']} | {r['bytes']:.3g} | {r['flops']:.3g} | {r['us']:.2f} |")
            print(row, flush=True)
            lines.append(row)
    lines += ["", f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}."]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(a.out).parent.mkdir(exist_ok=True)
    Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
