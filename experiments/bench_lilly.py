"""Lilly & Orin fast path vs general MRDS path vs Pinocchio: one forward-dynamics evaluation of the CKCM
Stewart platform (six U-P legs, spherical tips), after compilation, on this machine.

Prints a markdown table: compile time, time per call at batch 1 and per scenario at batch B (jit(vmap)),
float64 and float32, and Pinocchio's constraintDynamics per call. Run: python experiments/bench_lilly.py
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import pinocchio as pin  # noqa: E402

from mrds_jax import contacts as C  # noqa: E402
from mrds_jax import system as S  # noqa: E402
from mrds_jax.export import to_pinocchio  # noqa: E402
from system_models import ckcm_leg_q, ckcm_modules, from_se3, null_space_velocity  # noqa: E402

BATCH = 256
REPEAT = 20


def stewart(dtype):
    legs, payload = ckcm_modules()
    names = [f"leg{i + 1}" for i in range(6)]
    contacts = [C.spherical(f"ball{i + 1}", (names[i], "tip"), ("payload", f"A{i + 1}")) for i in range(6)]
    system = S.build_system(dict(zip(names + ["payload"], legs + [payload])), contacts)
    merged = to_pinocchio(system)      # six CONTACT_3D (joint1 = payload point, joint2 = leg tip)
    cms = merged.constraints
    system = jax.tree.map(lambda x: jnp.asarray(x, dtype), system)
    rng = np.random.default_rng(0)
    pose = pin.SE3(pin.exp3(rng.uniform(-0.1, 0.1, 3)), np.array([0, 0, 1.0]))
    A = [pose.act(np.asarray(payload.params.frame_p[i])) for i in range(6)]
    q = [ckcm_leg_q(legs[i], A[i]) for i in range(6)] + [from_se3(pose)]
    qp = merged.q(q)
    _, _, J = merged.constraint_dynamics(qp, np.zeros(24), np.zeros(24))
    vp = null_space_velocity(J, rng, 24)
    tau = [np.array([1.0, -2.0, 300.0])] * 6 + [np.zeros(6)]
    state = S.SystemState(tuple(jnp.asarray(x, dtype) for x in q), tuple(jnp.asarray(x, dtype) for x in merged.split_v(vp)))
    return system, state, tuple(jnp.asarray(x, dtype) for x in tau), (merged, cms, qp, vp, merged.v(tau))


def timed(f, *args):
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(REPEAT):
        jax.block_until_ready(f(*args))
    return compile_s, (time.perf_counter() - t0) / REPEAT


def main():
    rows = []
    for dtype in (jnp.float64, jnp.float32):
        system, state, tau, _ = stewart(dtype)
        batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (BATCH,) + x.shape), (state, tau))
        paths = {"Lilly & Orin (6x6)": lambda s, tq: S.lilly_forward_dynamics(system, s, tq, reference="payload").qdd,
                 "MRDS (18x18)": lambda s, tq: S.forward_dynamics(system, s, tq).qdd}
        for name, fn in paths.items():
            c1, t1 = timed(jax.jit(fn), state, tau)
            cB, tB = timed(jax.jit(jax.vmap(fn)), *batch)
            rows.append((name, jnp.dtype(dtype).name, c1, t1 * 1e6, cB, tB / BATCH * 1e6))
    _, _, _, (merged, cms, qp, vp, taup) = stewart(jnp.float64)
    data = merged.model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(merged.model, data, cms, cds)
    prox = pin.ProximalSettings()
    t0 = time.perf_counter()
    for _ in range(2000):
        pin.constraintDynamics(merged.model, data, qp, vp, taup, cms, cds, prox)
    t_pin = (time.perf_counter() - t0) / 2000 * 1e6
    print(f"| path | dtype | compile 1 [s] | per call, batch 1 [µs] | compile B [s] | per scenario, batch {BATCH} [µs] |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.2f} |")
    print(f"| Pinocchio constraintDynamics | float64 | – | {t_pin:.1f} | – | – |")
    print(f"\n{jax.devices()[0].device_kind}, jax {jax.__version__}")


if __name__ == "__main__":
    main()
