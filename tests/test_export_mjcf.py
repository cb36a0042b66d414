"""MJCF export: open modules have the same forward dynamics in MuJoCo (an independent engine) as here."""
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax.export import from_mujoco_acceleration, mujoco_state, to_mjcf
from robots import random_states, random_tree, robot_model

SPECS = {
    "ur5": None,
    "mixed_tree": [(-1, "free"), (0, "revolute"), (1, "universal"), (0, "spherical"), (3, "prismatic"),
                   (0, "revolute")],
}


@pytest.mark.parametrize("name", list(SPECS))
def test_mujoco_forward_dynamics_equals_aba(name):
    module = robot_model(name) if SPECS[name] is None else random_tree(np.random.default_rng(5), SPECS[name])
    model = mujoco.MjModel.from_xml_string(to_mjcf({"robot": module}))
    data = mujoco.MjData(model)
    assert model.nq == module.nq and model.nv == module.nv
    q, v, _, tau = random_states(module, np.random.default_rng(6), 5)
    for k in range(5):
        data.qpos[:], data.qvel[:] = mujoco_state(module, q[k], v[k])
        # generalized forces transform like velocities' duals: for free joints MuJoCo's [f_world; n_body]
        _, tau_mj = mujoco_state(module, q[k], tau[k])
        data.qfrc_applied[:] = tau_mj
        mujoco.mj_forward(model, data)
        expected = mj.aba(module, jnp.asarray(q[k]), jnp.asarray(v[k]), jnp.asarray(tau[k]))
        qdd = from_mujoco_acceleration(module, q[k], v[k], data.qacc)
        np.testing.assert_allclose(qdd, expected, atol=1e-8, rtol=1e-8)


def test_unsupported_joint_is_named():
    module = random_tree(np.random.default_rng(1), [(-1, "revolute"), (0, "screw")])
    with pytest.raises(ValueError, match="link1_joint.*screw"):
        to_mjcf({"arm": module})
