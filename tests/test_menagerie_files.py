"""Menagerie's H1 and ANYmal C as shipped here (tests/data/h1.xml, tests/data/anymal_c.xml, BSD-3-Clause, notices in
their headers and licences beside them; the visual meshes left out, the collision sets as shipped; issue 52): both
compile in MuJoCo without any mesh file, load with every geom MuJoCo has (the floor added by ``floor=True``
included) and no mesh among them, their actuators named as MuJoCo's, and their keyframes (H1's ``home`` from
Menagerie's scene.xml, ANYmal's ``standing`` from its anymal_c_mjx.xml, with its joint angles as ctrl) read.
``experiments/menagerie_robots.py`` runs them for 1 s against MuJoCo (docs/benchmarks.md)."""
import warnings
from pathlib import Path

import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import compile_mjcf, load_mjcf

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name, key, n_geoms, n_actuators", [("h1", "home", 32, 19),
                                                            ("anymal_c", "standing", 44, 12)])
def test_menagerie_file_loads_with_its_collision_set_and_keyframe(name, key, n_geoms, n_actuators):
    path = DATA / f"{name}.xml"
    assert "BSD-3-Clause" in path.read_text()[:1200] and (DATA / f"{name}_LICENSE.txt").exists()
    model, _ = compile_mjcf(str(path), True)                     # with the floor
    assert model.ngeom == n_geoms + 1 and model.nmesh == 0 and model.nu == n_actuators
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                          # friction loss (ANYmal), named at load
        system, mapping, forces = load_mjcf(path, floor=True, return_mapping=True, return_forces=True)
    collision = system.collision
    assert len(collision.geoms) == model.ngeom and "mesh" not in {g.kind for g in collision.geoms}
    assert len(collision.pairs) > 0
    (actuators,) = [f for f in forces if isinstance(f, S.Actuators)]
    assert list(actuators.actuator_names) == [model.actuator(i).name for i in range(model.nu)]
    qpos, _ = mapping.keyframe(key)
    np.testing.assert_allclose(qpos, model.key(key).qpos)
    np.testing.assert_allclose(mapping.keyframe_ctrl(key), model.key(key).ctrl)
    driven = mapping.keyframe_forces(key, forces)
    assert len(driven) == len(forces)
