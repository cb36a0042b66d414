"""A floor for a robot file that has none (issue 41, item 4), float64: ``load_mjcf(..., floor=...)`` adds MuJoCo's own
plane geom to the MJCF before it compiles, so our collision model and MuJoCo's see the same floor."""
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import Floor, compile_mjcf, load_mjcf
from mrds_jax.validation import ArgumentError

jax.config.update("jax_enable_x64", True)

BOX = """<mujoco><worldbody><body name="b" pos="0 0 0.5"><freejoint/>
<geom name="cube" type="box" size="0.1 0.1 0.1" mass="1"/></body></worldbody></mujoco>"""


def test_floor_is_added_where_asked_and_the_box_lands_on_it():
    """Without ``floor`` the file has no plane and no collision pair; with Floor(height −0.2, μ 0.7) MuJoCo's compiled
    model has the plane (at that height, that friction), our collision model pairs it with the cube, the gap at the
    start is 0.5 − 0.1 + 0.2 (analytic) and equals MuJoCo's own distance (mj_geomDistance), and a fall of 0.5 s ends
    with the cube resting on it (centre at −0.2 + 0.1)."""
    assert load_mjcf(BOX).collision is None
    floor = Floor(height=-0.2, friction=0.7)
    model, _ = compile_mjcf(BOX, floor)
    g = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert model.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE and model.geom_pos[g][2] == -0.2
    assert model.geom_friction[g][0] == 0.7
    system, mapping = load_mjcf(BOX, floor=floor, return_mapping=True)
    assert [x.name for x in system.collision.geoms] == ["floor", "cube"]
    state = mapping.state()
    gaps = S.timestepping.contact_gaps(system, state)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    mj_dist = mujoco.mj_geomDistance(model, data, g, 1, 10.0, None)
    np.testing.assert_allclose(gaps["floor/cube"], 0.6, atol=1e-12)
    np.testing.assert_allclose(gaps["floor/cube"], mj_dist, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = S.simulate(system, state, 1e-3, 500, output=S.Output(decimation=50))
    z = np.asarray(tr.q[0][:, 2])
    np.testing.assert_allclose(z[-1], -0.1, atol=1e-6)
    assert z.min() > -0.1 - 1e-4


@pytest.mark.parametrize("floor, source, match", [
    ("high", BOX, r"floor: True, a height"),
    (Floor(height=np.nan), BOX, r"finite"),
    (Floor(friction=-1.0), BOX, r"friction >= 0"),
    (Floor(name="cube"), BOX, r"already has a geom named 'cube'"),
    (True, "MJMODEL", r"compiled MjModel cannot take a floor")])
def test_bad_floor_is_named(floor, source, match):
    source = mujoco.MjModel.from_xml_string(BOX) if source == "MJMODEL" else source
    with pytest.raises(ArgumentError, match=match):
        load_mjcf(source, floor=floor)
