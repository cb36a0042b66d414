"""``load_urdf`` reads the file through MuJoCo's URDF parser (``mujoco.MjSpec``): on a small robot that uses what
the parser translates (joint and inertial origins with rpy, a full inertia tensor, fixed links merged with and
without ``<inertial>``, a prismatic joint on a non-unit axis, a revolute joint without ``<axis>``, limits and
damping), the module equals what Pinocchio's own URDF parser (urdfdom, nobody here wrote it) builds: joint names,
mass matrix, inverse dynamics with gravity, the fixed links' placements, limits and damping; a root link named
``world`` is the support; a ``continuous`` joint has no limits."""
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax.dynamics.kinematics import frame_placement
from mrds_jax.export.pinocchio import PinocchioConversion
from mrds_jax.loaders.urdf import load_urdf
from mrds_jax.validation import ModelError

INERTIA = '<inertia ixx="{0}" iyy="{1}" izz="{2}" ixy="{3}" ixz="{4}" iyz="{5}"/>'
URDF = f"""<robot name="probe">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0.1 0.02 -0.03" rpy="0.3 -0.2 0.5"/><mass value="1.5"/>
    {INERTIA.format(0.05, 0.06, 0.04, 0.004, -0.003, 0.002)}</inertial></link>
  <link name="bracket"><inertial><origin xyz="0 0.05 0" rpy="0 0 0.7"/><mass value="0.3"/>
    {INERTIA.format(0.001, 0.002, 0.0015, 0, 0, 0)}</inertial></link>
  <link name="slider"><inertial><origin xyz="0.01 0 0.02"/><mass value="0.7"/>
    {INERTIA.format(0.003, 0.004, 0.005, 0.0002, 0, -0.0001)}</inertial></link>
  <link name="tip"/>
  <link name="hand"><inertial><mass value="0.4"/>{INERTIA.format(0.002, 0.002, 0.001, 0, 0, 0)}</inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.3" rpy="0.1 0.2 0.3"/><axis xyz="0 1 0"/><limit lower="-1.5" upper="2" effort="1" velocity="1"/>
  </joint>
  <joint name="weld" type="fixed"><parent link="upper"/><child link="bracket"/><origin xyz="0.2 0 0" rpy="0 0.4 0"/>
  </joint>
  <joint name="rail" type="prismatic"><parent link="bracket"/><child link="slider"/>
    <origin xyz="0 0.1 0" rpy="-0.3 0 0.2"/><axis xyz="0.6 0 0.8"/><limit lower="-0.1" upper="0.2" effort="1" velocity="1"/>
    <dynamics damping="0.4"/></joint>
  <joint name="tool" type="fixed"><parent link="slider"/><child link="tip"/><origin xyz="0 0 0.05" rpy="0.2 0 0"/></joint>
  <joint name="wrist" type="revolute"><parent link="tip"/><child link="hand"/><origin xyz="0.03 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/><dynamics damping="0.1"/></joint>
</robot>
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    path = tmp_path_factory.mktemp("urdf") / "probe.urdf"
    path.write_text(URDF)
    return path


def test_module_equals_pinocchios_urdf_parser(probe):
    module, (damper,) = load_urdf(probe, return_forces=True)
    pmodel = pin.buildModelFromUrdf(str(probe))
    assert module.topology.joint_names == tuple(pmodel.names[1:]) == ("shoulder", "rail", "wrist")
    assert set(module.topology.frame_names) >= {"upper", "bracket", "slider", "tip", "hand"}
    np.testing.assert_array_equal([lim[0] for lim in module.topology.joint_limits], pmodel.lowerPositionLimit)
    np.testing.assert_array_equal([lim[1] for lim in module.topology.joint_limits], pmodel.upperPositionLimit)
    np.testing.assert_array_equal(np.asarray(damper.damping), pmodel.damping)
    conv, data = PinocchioConversion.of(module), pmodel.createData()
    rng = np.random.default_rng(3)
    for _ in range(4):
        q, v, a = (rng.uniform(-1, 1, module.nv) for _ in range(3))
        H = np.asarray(mj.mass_matrix(module, jnp.asarray(q)))
        H_pin = pin.crba(pmodel, data, conv.q(q))
        np.testing.assert_allclose(H, conv.P.T @ (np.triu(H_pin) + np.triu(H_pin, 1).T) @ conv.P, atol=1e-12)
        tau = np.asarray(mj.rnea(module, jnp.asarray(q), jnp.asarray(v), jnp.asarray(a)))
        np.testing.assert_allclose(tau, conv.P.T @ pin.rnea(pmodel, data, conv.q(q), conv.v(v), conv.v(a)),
                                   atol=1e-12)
        kin = mj.forward_kinematics(module, jnp.asarray(q), jnp.asarray(v))
        pin.framesForwardKinematics(pmodel, data, conv.q(q))
        for frame in ("bracket", "tip"):
            R, p = (np.asarray(x) for x in frame_placement(module, kin, frame))
            placement = data.oMf[pmodel.getFrameId(frame)]
            np.testing.assert_allclose(R, placement.rotation, atol=1e-12)
            np.testing.assert_allclose(p, placement.translation, atol=1e-12)


def test_a_root_link_named_world_is_the_support(probe, tmp_path):
    """MuJoCo makes a root link named ``world`` its world body: the module is the same as with any root name."""
    world = tmp_path / "world.urdf"
    world.write_text(URDF.replace('"base"', '"world"'))
    ours, renamed = load_urdf(probe), load_urdf(world)
    assert ours.topology.joint_names == renamed.topology.joint_names
    q = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, ours.nv))
    np.testing.assert_array_equal(np.asarray(mj.mass_matrix(ours, q)), np.asarray(mj.mass_matrix(renamed, q)))
    with pytest.raises(ModelError, match=r"world.urdf: the root link is named 'world', the support itself"):
        load_urdf(world, floating=True)


def test_continuous_joint_has_no_limits_even_with_a_limit_tag(tmp_path):
    """``continuous`` (a revolute joint without range): its ``<limit effort velocity>`` sets no position limits."""
    path = tmp_path / "spin.urdf"
    path.write_text(URDF.replace('type="revolute"><parent link="tip"/>', 'type="continuous"><parent link="tip"/>'))
    module = load_urdf(path)
    assert module.topology.joint_limits == ((-1.5, 2.0), (-0.1, 0.2), None)
    assert module.topology.kinds[2].name == "revolute"

