"""The loader findings of issue 59, each on a file written for it, against MuJoCo or Pinocchio (float64):

* a mocap body (MJCF) is ground, kept where the file puts it: the file loads (it raised a bare IndexError), its
  arm's mass matrix and forward dynamics equal MuJoCo's, the mocap body's geom is a ground geom at its pose;
* ``collision=False`` leaves the geoms' contacts out without a warning telling to read them;
* URDF ``<mimic>`` joints are joint couplings (``return_couplings=True``): the DOF and, in the independent
  coordinates, the mass matrix and forward dynamics of Pinocchio's ``buildModelFromUrdf(path, mimic=True)``;
  without ``return_couplings`` a warning names them;
* a URDF with a massless link between two joints and a point-mass link (zero rotational inertia) loads and equals
  Pinocchio; a point mass on its joint's axis makes the mass matrix singular: an error naming the joint and link;
* a rotational inertia that breaks the triangle inequality is kept and named in a warning, and equals Pinocchio;
* dependent slide axes on one MJCF body (MuJoCo's ``general_dyntype.xml``): a named singular-mass-matrix error;
* reversed joint ranges (MJCF: MuJoCo leaves the joint unlimited) and, in tests/test_bad_input.py, URDF reversed
  limits and negative masses: errors naming the file, element and value;
* example-robot-data files Pinocchio simulates (panda with mimic, human, icub_reduced, romeo_small) agree with it
  to 1e-12 (``experiments/urdf_files.py`` sweeps them all).
"""
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax import system as S
from mrds_jax.loaders.mass import SingularMassMatrixError
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.loaders.urdf import load_urdf
from mrds_jax.validation import ModelError

sys.path.insert(0, str(Path(__file__).parents[1] / "experiments"))
import urdf_files  # noqa: E402

MOCAP = """<mujoco>
  <worldbody>
    <body name="target" mocap="true" pos="0.3 0.2 1"><geom name="marker" type="sphere" size="0.05"/>
      <body name="on_target" pos="0 0 0.1"><geom name="marker2" type="box" size="0.02 0.02 0.02"/></body></body>
    <body name="arm" pos="0 0 0.5"><joint name="j1" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
      <body name="fore" pos="0.5 0 0"><joint name="j2" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/></body></body>
  </worldbody>
</mujoco>"""


def test_mocap_body_is_ground_and_the_arm_equals_mujoco():
    with pytest.warns(UserWarning, match="mocap bodies target are kept fixed where the file puts them"):
        system, mapping = load_mjcf(MOCAP, return_mapping=True)
    (module,) = system.modules
    assert module.topology.joint_names == ("j1", "j2")
    model = mujoco.MjModel.from_xml_string(MOCAP)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    for _ in range(3):
        qpos, qvel, tau = (rng.uniform(-1, 1, 2) for _ in range(3))
        data.qpos[:], data.qvel[:], data.qfrc_applied[:] = qpos, qvel, tau
        mujoco.mj_forward(model, data)
        M = np.zeros((2, 2))
        mujoco.mj_fullM(model, data, M)
        np.testing.assert_allclose(mj.mass_matrix(module, jnp.asarray(qpos)), M, atol=1e-12)
        np.testing.assert_allclose(mj.aba(module, jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(tau)),
                                   data.qacc, rtol=1e-10, atol=1e-10)
    ground = {g.name: g for g in system.collision.geoms if g.module is None}
    assert {"marker", "marker2"} <= set(ground)
    for name in ("marker", "marker2"):
        g = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
        np.testing.assert_allclose(ground[name].position, data.geom_xpos[g], atol=1e-12)


def test_collision_false_says_nothing_about_the_contacts_it_leaves_out():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        load_mjcf(MOCAP, collision=False)
    text = "\n".join(str(w.message) for w in record)
    assert "contacts between geoms" not in text and "collision=True" not in text, text


def test_reversed_mjcf_joint_range_is_named():
    xml = MOCAP.replace('<joint name="j2" axis="0 1 0"/>', '<joint name="j2" axis="0 1 0" range="30 -30"/>')
    with pytest.raises(ModelError, match=r"joint 'j2': range \(30, -30\).*lower > upper"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_mjcf(xml)


GENERAL_DYNTYPE = """<mujoco>
  <worldbody>
    <body name="box">
      <joint name="slide1" type="slide" axis="1 0 0"/><joint name="slide2" type="slide" axis="0 1 0"/>
      <joint name="slide3" type="slide" axis="0 0 1"/><joint name="slide4" type="slide" axis="1 1 0"/>
      <geom type="box" size=".05 .05 .05" mass="1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_dependent_slide_axes_are_a_named_singular_mass_matrix():
    """MuJoCo's ``general_dyntype.xml`` (mjx test data) without its actuators: slide4's axis is slide1's + slide2's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # MuJoCo's own compiler warns about the singular inertia
        with pytest.raises(SingularMassMatrixError,
                           match=r"mass matrix is singular.*joints \['slide1', 'slide2', 'slide4'\]"):
            load_mjcf(GENERAL_DYNTYPE)


# ----------------------------------------------------------------------------------------------- URDF
def inertial(mass, ixx=0.01, iyy=0.01, izz=0.01, xyz="0 0 0"):
    return (f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/><inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" '
            'ixy="0" ixz="0" iyz="0"/></inertial>')


def chain(links, joints):
    """A URDF robot: ``links`` (name, inertial XML), ``joints`` (name, type, parent, child, xyz, axis, extra)."""
    body = "".join(f'<link name="{n}">{i}</link>' for n, i in links)
    body += "".join(f'<joint name="{n}" type="{k}"><parent link="{p}"/><child link="{c}"/><origin xyz="{xyz}"/>'
                    f'<axis xyz="{axis}"/><limit lower="-2" upper="2" effort="1" velocity="1"/>{extra}</joint>'
                    for n, k, p, c, xyz, axis, extra in joints)
    return f'<robot name="probe">{body}</robot>'


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_equals_pinocchio(path, floating=False):
    for base in ((False, True) if floating else (False,)):
        row = urdf_files.compare(path, base)
        assert "error" not in row, row
        assert row["nv"] == row["nv_pin"], row
        assert max(row[k] for k in ("H", "b", "qdd", "H_mimic")) < 1e-12, row


GRIPPER = chain(
    [("base", inertial(2.0)), ("arm", inertial(1.0, xyz="0.2 0 0")), ("left", inertial(0.1, 1e-4, 2e-4, 3e-4)),
     ("right", inertial(0.1, 1e-4, 2e-4, 3e-4)), ("wrist", inertial(0.3, xyz="0 0 0.05"))],
    [("shoulder", "revolute", "base", "arm", "0 0 0.1", "0 1 0", ""),
     ("finger_l", "prismatic", "arm", "left", "0.4 0.02 0", "0 1 0", ""),
     ("finger_r", "prismatic", "arm", "right", "0.4 -0.02 0", "0 -1 0",
      '<mimic joint="finger_l" multiplier="1.5" offset="0.01"/>'),
     ("wrist", "revolute", "arm", "wrist", "0.4 0 0", "1 0 0", '<mimic joint="shoulder" multiplier="-0.5"/>')])


def test_mimic_joints_are_couplings_equal_to_pinocchios_mimic_model(tmp_path):
    path = write(tmp_path, "gripper.urdf", GRIPPER)
    module, couplings = load_urdf(path, return_couplings=True)
    assert [c.name for c in couplings] == ["finger_r", "wrist"]
    assert couplings[0].joints == (("probe", "finger_r"),) and couplings[0].joints2 == (("probe", "finger_l"),)
    assert pin.buildModelFromUrdf(str(path), mimic=True).nv == module.nv - len(couplings) == 2
    assert_equals_pinocchio(path, floating=True)
    with pytest.warns(UserWarning, match=r"joints \['finger_r', 'wrist'\] mimic others.*return_couplings=True"):
        load_urdf(path)


def test_massless_and_point_mass_links_equal_pinocchio(tmp_path):
    """A massless link between two hinges (no <inertial>: a frame, as human.urdf's virtual links) and a link with
    mass and zero rotational inertia (a point mass, as icub's) off its joint's axis."""
    text = chain([("base", inertial(1.0)), ("virtual", ""), ("thigh", inertial(2.0, 0.02, 0.03, 0.01, "0 0 -0.2")),
                  ("foot", inertial(0.5, 0, 0, 0, "0.1 0 -0.05"))],
                 [("hip_z", "revolute", "base", "virtual", "0 0 0", "0 0 1", ""),
                  ("hip_x", "revolute", "virtual", "thigh", "0 0 0", "1 0 0", ""),
                  ("ankle", "revolute", "thigh", "foot", "0 0 -0.4", "0 1 0", "")])
    path = write(tmp_path, "leg.urdf", text)
    module = load_urdf(path)
    assert module.topology.link_names == ("virtual", "thigh", "foot")
    assert float(module.params.mass[0]) == 0.0 and not np.any(np.asarray(module.params.inertia[2]))
    assert_equals_pinocchio(path, floating=True)


def test_point_mass_on_its_joint_axis_is_a_named_singular_mass_matrix(tmp_path):
    text = chain([("base", inertial(1.0)), ("arm", inertial(1.0, xyz="0.3 0 0")), ("bead", inertial(0.2, 0, 0, 0))],
                 [("shoulder", "revolute", "base", "arm", "0 0 0", "0 0 1", ""),
                  ("spin", "revolute", "arm", "bead", "0.3 0 0", "1 0 0", "")])
    path = write(tmp_path, "bead.urdf", text)
    with pytest.raises(SingularMassMatrixError, match=r"bead.urdf: the mass matrix is singular.*joints \['spin'\] "
                                                      r"\(links \['bead'\]\)"):
        load_urdf(path)


def test_triangle_inequality_breaking_inertia_is_kept_named_and_equals_pinocchio(tmp_path):
    text = chain([("base", inertial(1.0)), ("arm", inertial(1.0, 0.001, 0.001, 0.005, "0.2 0 0"))],
                 [("shoulder", "revolute", "base", "arm", "0 0 0", "0 1 0", "")])
    path = write(tmp_path, "thin.urdf", text)
    with pytest.warns(UserWarning, match=r"thin.urdf: the rotational inertias of links \['arm'\] break the triangle "
                                         "inequality"):
        load_urdf(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_equals_pinocchio(path, floating=True)


@pytest.mark.parametrize("file", ["panda_description/urdf/panda.urdf", "human_description/robots/human.urdf",
                                  "icub_description/robots/icub_reduced.urdf",
                                  "romeo_description/urdf/romeo_small.urdf"])
def test_example_robot_data_files_pinocchio_simulates_equal_it(file):
    """panda with its mimic finger (8 DOF, as Pinocchio's mimic=True), human's massless links, icub's point masses,
    romeo_small's inertias that break the triangle inequality; fixed base (floating: experiments/urdf_files.py)."""
    assert_equals_pinocchio(urdf_files.ROBOTS / file)


def test_mimic_tags_that_cannot_be_read_are_named_once(tmp_path):
    """A ``<mimic>`` on a fixed joint (MuJoCo's parser drops it): one warning names it; the coupled ones are read."""
    text = GRIPPER.replace('<link name="wrist">', '<link name="tool"/><link name="wrist">').replace(
        "</robot>", '<joint name="weld" type="fixed"><parent link="arm"/><child link="tool"/>'
                    '<mimic joint="shoulder"/></joint></robot>')
    path = write(tmp_path, "dropped.urdf", text)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        module, couplings = load_urdf(path, return_couplings=True)
    texts = [str(w.message) for w in record]
    assert [c.name for c in couplings] == ["finger_r", "wrist"]
    assert sum("'weld' (a fixed joint)" in t for t in texts) == 1 and not any("mimic others" in t for t in texts), texts
