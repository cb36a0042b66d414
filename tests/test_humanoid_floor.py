"""MuJoCo's humanoid (tests/data/humanoid.xml, Apache-2.0) on its own floor from its keyframe (issue 41), float64,
full mode: the file as written (three hinges per hip, 159 collision pairs, its joint springs and dampers,
its limited hamstring tendons), loaded with no warning, started
from ``squat`` made consistent, 1 s at dt = 2 ms with the motors idle. It sinks from the squat and settles; its
base height follows MuJoCo's run of the same file with stiff contacts (``solref`` time constant 2 ms) within 2 cm at
every stored state, finite, no penetration beyond 1e-3 m."""
import warnings
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import load_mjcf
from mujoco_states import mujoco_base_heights

jax.config.update("jax_enable_x64", True)
PATH = Path(__file__).parent / "data" / "humanoid.xml"
DT, N, EVERY = 2e-3, 500, 25


@pytest.mark.slow
def test_humanoid_settles_from_its_squat_like_mujoco():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # nothing skipped or ignored: the hamstring tendons'
                                                           # limits are one-sided rows, every motor is read
        system, mapping, forces = load_mjcf(PATH, return_mapping=True, return_forces=True)
    assert system.collision.n_slots == 273 and len(system.collision.pairs) == 159
    state = mapping.keyframe_state("squat", system)
    tr = S.simulate(system, state, dt=DT, n_steps=N, forces=forces, checks=S.Checks(enabled=False),
                    output=S.Output(decimation=EVERY))
    z = np.asarray(tr.q[0][:, 2])
    z_mj = mujoco_base_heights(mujoco.MjModel.from_xml_path(str(PATH)), "squat", DT, N, EVERY)
    gaps = np.asarray(tr.gaps)[:, -system.collision.n_slots:]
    print(f"\nbase height: ours {z[-1]:.4f} m, MuJoCo {z_mj[-1]:.4f} m; largest difference "
          f"{np.abs(z - z_mj).max() * 100:.2f} cm; deepest penetration {-gaps.min():.2e} m; "
          f"converged stored states {np.asarray(tr.converged).mean():.0%}")
    assert int(tr.first_nonfinite) < 0 and np.isfinite(z).all()
    assert z[0] - z[-1] > 0.1                              # it sank from the squat (MuJoCo: 0.21 m)
    assert np.abs(z - z_mj).max() <= 0.02
    assert gaps.min() >= -1e-3
