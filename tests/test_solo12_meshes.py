"""ODRI's Solo-12 quadruped (tests/data/solo12.xml, from example-robot-data, BSD licences; see its header and
make_solo12.py), whose every collision geom is a mesh (17 convex hulls of 283-636 vertices: 112 mesh–mesh pairs
and 17 mesh–floor pairs), against MuJoCo running the same file, float64:

* it loads with nothing left out (no warning: no skipped actuator, ignored limit or uncollided geom);
* its mass matrix and bias forces equal MuJoCo's (``mj_fullM``, ``qfrc_bias``) to 1e-9 at three random states
  (ours are in our velocity coordinates v, MuJoCo's in qvel = T v: M = Tᵀ M_mj T, b = Tᵀ (b_mj + M_mj Ṫv));
* full mode: 1 s from its keyframe "standing" on a floor added by ``load_mjcf(..., floor=True)`` (the file has
  none), no torques (it has no actuators): it folds its legs and lies down on its base; finite, no penetration
  beyond 1e-3 m, base height within 2 cm of MuJoCo's run of the same file and floor with stiff contacts
  (``solref`` time constant 2 ms) at every stored state. Measured: base height 0.0292 m (MuJoCo 0.0296 m), largest
  difference 0.59 cm, deepest penetration 9.6e-6 m.
"""
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import compile_mjcf, load_mjcf
from mujoco_states import assert_mass_matrix_and_bias_equal_mujoco, mujoco_base_heights

jax.config.update("jax_enable_x64", True)
PATH = Path(__file__).parent / "data" / "solo12.xml"
DT, N, EVERY = 2e-3, 500, 25


@pytest.fixture(scope="module")
def solo():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # nothing skipped, ignored or left out
        system, mapping, forces = load_mjcf(PATH, return_mapping=True, return_forces=True, floor=True)
    model, _ = compile_mjcf(str(PATH), True)
    return system, mapping, forces, model


def test_solo12_loads_every_mesh_and_pair(solo):
    system, _, _, model = solo
    collision = system.collision
    kinds = {(collision.geoms[i].kind, collision.geoms[j].kind) for i, j in collision.pairs}
    assert kinds == {("plane", "mesh"), ("mesh", "mesh")}
    assert len(collision.geoms) == model.ngeom == 18 and len(collision.pairs) == 129
    assert sum(m.nv for m in system.modules) == model.nv == 18


def test_solo12_mass_matrix_and_bias_forces_equal_mujoco(solo):
    system, mapping, _, model = solo
    (module,) = system.modules
    assert_mass_matrix_and_bias_equal_mujoco(module, mapping, model, np.random.default_rng(12))


@pytest.mark.slow
@pytest.mark.timeout(2400)   # 112 mesh–mesh pairs by GJK/EPA every step: 1590 s for the 500 steps on a 2-core CPU
                             # at load 8 (MuJoCo: 0.05 s)
def test_solo12_lies_down_from_standing_like_mujoco(solo):
    system, mapping, forces, _ = solo
    state = mapping.keyframe_state("standing", system)
    start = time.perf_counter()
    tr = S.simulate(system, state, dt=DT, n_steps=N, forces=forces, checks=S.Checks(enabled=False),
                    output=S.Output(decimation=EVERY))
    z = np.asarray(tr.q[0][:, 2])
    elapsed = time.perf_counter() - start
    z_mj = mujoco_base_heights(compile_mjcf(str(PATH), True)[0], "standing", DT, N, EVERY)
    gaps = np.asarray(tr.gaps)[:, -system.collision.n_slots:]
    print(f"\nSolo-12, 1 s at dt = {DT} s: {elapsed:.1f} s wall (compile included); base height ours {z[-1]:.4f} m, "
          f"MuJoCo {z_mj[-1]:.4f} m; largest difference {np.abs(z - z_mj).max() * 100:.2f} cm; deepest "
          f"penetration {-gaps.min():.2e} m; converged stored states {np.asarray(tr.converged).mean():.0%}")
    assert int(tr.first_nonfinite) < 0 and np.isfinite(z).all()
    assert z[0] - z[-1] > 0.1                              # it lay down (MuJoCo: from 0.235 m to 0.030 m)
    assert np.abs(z - z_mj).max() <= 0.02
    assert gaps.min() >= -1e-3
