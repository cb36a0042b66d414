"""Menagerie's Go1 (tests/data/go1.xml, BSD-3-Clause: its collision set as shipped, 42 geoms of four kinds with
cylinder–capsule, cylinder–cylinder and plane–cylinder pairs among its 697; the visual meshes left out) against
MuJoCo running the same file, float64 (issue 41):

* it loads with its twelve position servos and every joint limit; the one warning names the joints' friction
  loss, which is not modelled (MuJoCo's run below sets it to zero too, so both integrate the same physics);
* its mass matrix and bias forces equal MuJoCo's (``mj_fullM``, ``qfrc_bias``) to 1e-9 at three random states;
* full mode: 1 s from its keyframe ``home`` made consistent, on a floor added by ``load_mjcf(..., floor=True)`` (the
  file has none), its servos holding the keyframe's controls: finite, no penetration beyond 1e-3 m, trunk height
  within 2 cm of MuJoCo's run with stiff contacts (``solref`` time constant 2 ms) at every stored state.
  ``experiments/go1_floor.py`` runs the same with timings (docs/benchmarks.md).
"""
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import compile_mjcf, load_mjcf
from mrds_jax.system.timestepping import limit_rows
from mujoco_states import assert_mass_matrix_and_bias_equal_mujoco, mujoco_base_heights

jax.config.update("jax_enable_x64", True)
PATH = Path(__file__).parent / "data" / "go1.xml"
DT, N, EVERY = 2e-3, 500, 25


@pytest.fixture(scope="module")
def go1():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        system, mapping, forces = load_mjcf(PATH, return_mapping=True, return_forces=True, floor=True)
    model, _ = compile_mjcf(str(PATH), True)
    return system, mapping, forces, model, [str(w.message) for w in caught]


def test_go1_loads_its_servos_limits_and_cylinder_pairs(go1):
    system, _, forces, model, caught = go1
    assert len(caught) == 1 and "friction loss" in caught[0], caught
    actuators = [f for f in forces if isinstance(f, S.Actuators)]
    assert len(actuators) == 1 and len(actuators[0].actuator_names) == model.nu == 12
    assert int(np.sum(model.jnt_limited)) == 12 and len(limit_rows(system).joints) == 12
    collision = system.collision
    kinds = {frozenset((collision.geoms[i].kind, collision.geoms[j].kind)) for i, j in collision.pairs}
    assert {frozenset(("cylinder", "capsule")), frozenset(("cylinder",)), frozenset(("plane", "cylinder"))} <= kinds
    assert len(collision.geoms) == model.ngeom


def test_go1_mass_matrix_and_bias_forces_equal_mujoco(go1):
    system, mapping, _, model, _ = go1
    (module,) = system.modules
    assert_mass_matrix_and_bias_equal_mujoco(module, mapping, model, np.random.default_rng(1))


def mujoco_trunk_heights():
    model, _ = compile_mjcf(str(PATH), True)
    model.dof_frictionloss[:] = 0.0                         # not modelled here (the load warning names it)
    return mujoco_base_heights(model, "home", DT, N, EVERY), model.key("home").ctrl.copy()


@pytest.mark.slow
@pytest.mark.timeout(1800)   # 697 pairs: a ~4-min compile and 40 s of steps on the idle 2-core CPU
def test_go1_stands_from_home_like_mujoco(go1):
    system, mapping, forces, _, _ = go1
    z_mj, ctrl = mujoco_trunk_heights()
    forces = tuple(S.with_control(f, ctrl) if isinstance(f, S.Actuators) else f for f in forces)
    state = mapping.keyframe_state("home", system)
    tr = S.simulate(system, state, dt=DT, n_steps=N, forces=forces, checks=S.Checks(enabled=False),
                    output=S.Output(decimation=EVERY))
    z = np.asarray(tr.q[0][:, 2])
    gaps = np.asarray(tr.gaps)[:, -system.collision.n_slots:]
    print(f"\nGo1, 1 s from home: trunk height ours {z[-1]:.4f} m, MuJoCo {z_mj[-1]:.4f} m; largest difference "
          f"{np.abs(z - z_mj).max() * 100:.2f} cm; deepest penetration {-gaps.min():.2e} m; converged stored "
          f"states {np.asarray(tr.converged).mean():.0%}")
    assert int(tr.first_nonfinite) < 0 and np.isfinite(z).all()
    assert np.abs(z - z_mj).max() <= 0.02
    assert gaps.min() >= -1e-3
