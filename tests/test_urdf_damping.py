"""URDF ``<dynamics damping>`` (issue 25): ``load_urdf(..., return_forces=True)`` returns the joints' dampers, equal to
what Pinocchio's own URDF parser reads (``model.damping``), and their generalized force is −damping·v."""
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

from mrds_jax import system as S
from mrds_jax.loaders.urdf import load_urdf
from conftest import URDFS


def test_urdf_damping_equals_pinocchio_and_acts_as_a_damper(name="panda"):
    module, forces = load_urdf(URDFS[name], return_forces=True, name="robot")
    pmodel = pin.buildModelFromUrdf(str(URDFS[name]))
    assert module.topology.joint_names == tuple(pmodel.names[1:])
    (damper,) = forces
    assert damper.module == "robot" and np.abs(pmodel.damping).max() > 0
    np.testing.assert_array_equal(np.asarray(damper.damping), pmodel.damping)
    np.testing.assert_array_equal(np.asarray(damper.stiffness), 0.0)
    system = S.build_system({"robot": module}, [])
    v = jnp.asarray(np.random.default_rng(1).uniform(-2, 2, module.nv))
    state = S.SystemState((jnp.zeros(module.nq),), (v,))
    (Q,) = S.generalized_forces(system, forces, state, 0.0)
    np.testing.assert_allclose(np.asarray(Q), -pmodel.damping * np.asarray(v), rtol=1e-15, atol=0)


def test_urdf_damping_floating_root_gets_none_and_the_name_defaults_to_the_robot():
    module, (damper,) = load_urdf(URDFS["panda"], floating=True, return_forces=True)
    pmodel = pin.buildModelFromUrdf(str(URDFS["panda"]), pin.JointModelFreeFlyer())
    assert damper.module == pmodel.name and module.nv == pmodel.nv
    np.testing.assert_array_equal(np.asarray(damper.damping), pmodel.damping)     # the free joint: zeros in both


def test_urdf_without_damping_gives_no_element():
    """ur5's <dynamics damping="0.0" friction="0.0"/>: no element, no warning."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_urdf(URDFS["ur5"], return_forces=True)[1] == ()
