"""The file's options as ``load_mjcf`` reads them (issue 52): the time step and integrator on the mapping, a warning
that names what runs in place of MuJoCo's implicit integrators and RK4, none for Euler; a keyframe's ``ctrl`` on the
actuators (``mapping.keyframe_forces``), checked against MuJoCo's own ``mj_resetDataKeyframe``."""
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import compile_mjcf, load_mjcf
from mrds_jax.validation import UnknownNameError

ARM = """
<mujoco>
  <option timestep="0.004" integrator="{integrator}"/>
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.5"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="elbow_servo" joint="elbow" kp="50" kv="2"/>
    <position name="shoulder_servo" joint="shoulder" kp="80" kv="3"/>
  </actuator>
  <keyframe><key name="hold" qpos="0.3 -0.5" ctrl="-0.4 0.25"/></keyframe>
</mujoco>
"""


def _load(integrator):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = load_mjcf(ARM.format(integrator=integrator), return_mapping=True, return_forces=True)
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("integrator", ["implicitfast", "implicit", "RK4", "Euler"])
def test_the_files_integrator_is_read_and_named_when_something_else_runs(integrator):
    (_, mapping, _), messages = _load(integrator)
    assert mapping.integrator == integrator and mapping.timestep == pytest.approx(0.004)
    named = [m for m in messages if f"integrator {integrator!r}" in m]
    if integrator == "Euler":
        assert not named and not any("integrator" in m for m in messages), messages
    else:
        assert len(named) == 1, messages
        assert ("explicitly" in named[0]) == integrator.startswith("implicit")


def test_keyframe_ctrl_reaches_the_actuators_by_name_as_mujoco_sets_it():
    (system, mapping, forces), _ = _load("Euler")
    model, _ = compile_mjcf(ARM.format(integrator="Euler"), None)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("hold").id)
    assert mapping.actuator_names == ("elbow_servo", "shoulder_servo")
    np.testing.assert_array_equal(mapping.keyframe_ctrl("hold"), data.ctrl)
    (actuators,) = [f for f in mapping.keyframe_forces("hold", forces) if isinstance(f, S.Actuators)]
    by_name = dict(zip(actuators.actuator_names, np.asarray(actuators.control)))
    assert by_name == {"elbow_servo": data.ctrl[0], "shoulder_servo": data.ctrl[1]}
    with pytest.raises(UnknownNameError, match="no keyframe named 'home'"):
        mapping.keyframe_forces("home", forces)


def test_go1_home_keyframe_forces_equal_its_ctrl():
    path = Path(__file__).parent / "data" / "go1.xml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, mapping, forces = load_mjcf(path, return_mapping=True, return_forces=True, floor=True)
    model, _ = compile_mjcf(str(path), True)
    (actuators,) = [f for f in mapping.keyframe_forces("home", forces) if isinstance(f, S.Actuators)]
    names = [model.actuator(u).name for u in range(model.nu)]
    expected = dict(zip(names, model.key("home").ctrl))
    assert dict(zip(actuators.actuator_names, np.asarray(actuators.control).tolist())) == expected


def test_the_added_floor_meets_every_collidable_geom_as_menageries_scenes_do():
    """Cassie's leg geoms collide through their own bits (contype 2 and 4, conaffinity 4 and 2): a floor of contype 1,
    conaffinity 1 would meet none of them (in MuJoCo too); the added floor's conaffinity is every contype bit of the
    file (Menagerie's scene gives its floor conaffinity 15), so every collidable geom meets it — in both engines."""
    path = str(Path(__file__).parent / "data" / "cassie.xml")
    from mrds_jax.loaders.mjcf import Floor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = load_mjcf(path, floor=True)
        narrow = load_mjcf(path, floor=Floor(conaffinity=1))
    model, _ = compile_mjcf(path, True)
    floor = model.geom("floor").id
    collidable = {g for g in range(model.ngeom) if g != floor and model.geom_contype[g]
                  and (model.geom_contype[g] & model.geom_conaffinity[floor])}
    legs = {g for g in collidable if model.geom_contype[g] & (2 | 4)}
    assert len(collidable) >= 8 and len(legs) >= 8 and model.geom_conaffinity[floor] == 1 | 2 | 4

    def floor_pairs(s):                 # our geoms are MuJoCo's, in its order (the loader keeps them so)
        c = s.collision
        assert len(c.geoms) == model.ngeom
        return {j if i == floor else i for i, j in c.pairs if floor in (i, j)}

    assert floor_pairs(system) == collidable
    assert not floor_pairs(narrow) & legs
