"""shared/bench's Stewart MJCF imported by load_mjcf, run through our engine, against the native CKCM build.

    python experiments/mjcf_stewart_check.py      # writes experiments/out/mjcf_stewart_check.md

At 10 consistent states (random payload pose and twist, legs by inverse kinematics, random actuator forces):
forward dynamics of the imported system (q̈ per module, constraint forces in world axes) against the native
build of mrds_jax.ckcm.multibody. The suite checks the same through Pinocchio on the imported parameters
(tests/test_system_vs_pinocchio.py::test_stewart_mjcf_import_has_the_native_ckcm_dynamics); this runs our own
engine on the imported system, whose seven-module program is too costly to compile inside the suite.
"""
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax import ckcm  # noqa: E402
from mrds_jax import system as S  # noqa: E402
from mrds_jax.dynamics import forward_kinematics, frame_placement  # noqa: E402
from mrds_jax.loaders.mjcf import load_mjcf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
XML = ROOT.parent / "shared" / "bench" / "ckcm_stewart_mjx.xml"


def world_forces(system, state, tau):
    out = S.forward_dynamics(system, state, tau)
    f = []
    for c, F in zip(system.contacts, out.F_EP):
        k = system.module_index(c.E[0])
        R = frame_placement(system.modules[k], forward_kinematics(system.modules[k], state.q[k]), c.E[1])[0]
        f.append(R @ F[3:])
    return out.qdd, jnp.stack(f)


def main():
    t0 = time.perf_counter()
    params = ckcm.nominal()
    native = ckcm.multibody.build_ckcm_system(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # actuators are named and ignored
        imported = load_mjcf(XML)
    names = [f"leg{i + 1}_lower" for i in range(6)] + ["payload"]
    order = [imported.module_names.index(n) for n in names]
    contact_of_leg = [next(j for j, c in enumerate(imported.contacts) if c.E[0] == names[i]) for i in range(6)]
    rng = np.random.default_rng(0)
    worst_q, worst_f = 0.0, 0.0
    f_native = jax.jit(lambda st, tau: world_forces(native, st, tau))
    f_imported = jax.jit(lambda st, tau: world_forces(imported, st, tau))
    for _ in range(10):
        pose = np.array([0, 0, 1.0, 0, 0, 0]) + rng.uniform(-0.1, 0.1, 6)
        rate = rng.uniform(-0.5, 0.5, 6)
        state = ckcm.multibody.state_from_pose(params, pose, rate)
        tau = tuple(jnp.asarray(np.r_[0.0, 0.0, rng.uniform(-300, 300)]) for _ in range(6)) + (jnp.zeros(6),)
        qdd_n, f_n = f_native(state, tau)
        inv = np.argsort(order)
        st_i = S.SystemState(tuple(state.q[k] for k in inv), tuple(state.v[k] for k in inv))
        qdd_i, f_i = f_imported(st_i, tuple(tau[k] for k in inv))
        worst_q = max(worst_q, max(float(jnp.abs(qdd_i[order[m]] - qdd_n[m]).max()) for m in range(7)))
        worst_f = max(worst_f, max(float(jnp.abs(f_i[contact_of_leg[i]] - f_n[i]).max()) for i in range(6)))
    lines = ["# Stewart MJCF (shared/bench) through load_mjcf vs the native CKCM build, our engine",
             "", f"command: `python experiments/mjcf_stewart_check.py`; jax {jax.__version__}, float64",
             "", "10 consistent states (payload pose ±0.1, twist ±0.5, leg forces ±300 N):",
             f"max |q̈_imported − q̈_native| = {worst_q:.2e}; max |F_imported − F_native| (world, N) = {worst_f:.2e}",
             f"(wall {time.perf_counter() - t0:.0f} s, two compilations)"]
    out = ROOT / "experiments" / "out" / "mjcf_stewart_check.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    assert worst_q < 1e-8 and worst_f < 1e-8


if __name__ == "__main__":
    main()
