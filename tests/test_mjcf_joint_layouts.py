"""Several joints on one MuJoCo body (``load_mjcf``) against MuJoCo itself: mass matrix (``mj_fullM`` of ``qM``) and
bias forces (``qfrc_bias``) to 1e-9 at random states, body and site placements to 1e-12.

MuJoCo composes a body's joints in order, each about its own anchor (``mj_kinematics``); the loader makes each
joint one of ours on a chain of massless links, the last carrying the body. Models: MuJoCo's own humanoid
(``tests/data/humanoid.xml``, Apache-2.0: three hinges through one point at the hips, two at the shoulders and the
abdomen, two at different points at the ankles, every hinge limited, 21 motors), and a test body of every layout:
hinges at different points with ``ref``, hinge + slide, slide + hinge, hinges then a ball, a ball then slides,
a joint lock on a hinge inside a chain.

Our velocities are MuJoCo's but for the free joint (``velocity_map`` T: qvel = T v), so H = Tᵀ M T and
b = Tᵀ (qfrc_bias + M Ṫv), Ṫv from :func:`mujoco_states.qdd_to_mujoco` at zero acceleration.
"""
import warnings
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax.loaders.mjcf import load_mjcf
from mujoco_states import consistent_states, qdd_to_mujoco, random_qpos, velocity_map

DATA = Path(__file__).parent / "data"
TOL = 1e-9


@jax.jit
def mass_matrices_and_bias(modules, q, v):
    """Per module: H(q) and b(q, v) = C(q, v) v + g(q), in one compiled program per system."""
    return ([mj.mass_matrix(m, qk) for m, qk in zip(modules, q)],
            [mj.nonlinear_effects(m, qk, vk) for m, qk, vk in zip(modules, q, v)])


def mujoco_errors(system, mapping, model, state):
    """(max |H − Tᵀ M T|, max |b − Tᵀ (qfrc_bias + M Ṫv)|, max body position error, max body rotation error) at
    ``state`` against MuJoCo."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
    mujoco.mj_forward(model, data)
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, M)
    T = velocity_map(mapping, state)
    Tdot_v = qdd_to_mujoco(mapping, state, [np.zeros(m.nv) for m in system.modules])
    H, b = mass_matrices_and_bias(system.modules, state.q, state.v)
    H, b = jax.scipy.linalg.block_diag(*H), np.concatenate([np.asarray(x) for x in b])
    pos, rot = 0.0, 0.0
    for k, module in enumerate(system.modules):
        kin = mj.forward_kinematics(module, state.q[k])
        for body in range(1, model.nbody):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body)
            if name in module.topology.frame_names:
                R, p = mj.frame_placement(module, kin, name)
                pos = max(pos, np.abs(np.asarray(p) - data.xpos[body]).max())
                rot = max(rot, np.abs(np.asarray(R) - data.xmat[body].reshape(3, 3)).max())
    return (np.abs(H - T.T @ M @ T).max(), np.abs(b - T.T @ (data.qfrc_bias + M @ Tdot_v)).max(), pos, rot)


# ---------------------------------------------------------------------------------------------- humanoid
@pytest.fixture(scope="module")
def humanoid():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        system, mapping, forces = load_mjcf(DATA / "humanoid.xml", return_mapping=True, return_forces=True)
    return system, mapping, forces, mujoco.MjModel.from_xml_path(str(DATA / "humanoid.xml")), record


def test_humanoid_loads_every_motor_and_hinge_limit(humanoid):
    system, mapping, forces, model, record = humanoid
    text = "\n".join(str(w.message) for w in record)
    assert "skipped" not in text and "joint limits" not in text and "cone" not in text, text
    module, = system.modules
    hinges = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, model.njnt)]
    limits = dict(zip(module.topology.joint_names, module.topology.joint_limits))
    for j, name in enumerate(hinges, start=1):          # every hinge is one of our joints, its range kept
        np.testing.assert_allclose(limits[name], model.jnt_range[j], rtol=1e-15)
    actuators, = [f for f in forces if type(f).__name__ == "Actuators"]
    assert actuators.actuator_names == tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, u)
                                             for u in range(model.nu))
    np.testing.assert_allclose([m[0][0] for m in actuators.moment], model.actuator_gear[:, 0])
    assert module.nq == model.nq and module.nv == model.nv
    # the hips' three hinges through one point: two massless links and the thigh
    assert module.topology.link_names[4:7] == ("thigh_right:hip_x_right", "thigh_right:hip_z_right", "thigh_right")
    assert list(np.asarray(module.params.mass[4:6])) == [0.0, 0.0]


def test_humanoid_mass_matrix_and_bias_equal_mujoco(humanoid):
    system, mapping, _, model, _ = humanoid
    rng = np.random.default_rng(41)
    worst = np.zeros(4)
    for _ in range(3):
        state = mapping.state(random_qpos(model, rng), rng.uniform(-2, 2, model.nv))
        worst = np.maximum(worst, mujoco_errors(system, mapping, model, state))
    print(f"humanoid vs MuJoCo: |ΔM| {worst[0]:.2e}, |Δbias| {worst[1]:.2e}, body position {worst[2]:.2e} m, "
          f"rotation {worst[3]:.2e}")
    assert worst[0] < TOL and worst[1] < TOL and worst[2] < 1e-12 and worst[3] < 1e-12


# ---------------------------------------------------------------------------------------------- every layout
LAYOUTS = """<mujoco model="joint_layouts">
  <compiler angle="radian"/>
  <option gravity="0.2 -0.3 -9.81"/>
  <default><geom contype="0" conaffinity="0" density="800"/><joint armature="0.002"/></default>
  <worldbody>
    <body name="base" pos="0.1 0 1" euler="0.2 0.1 -0.3">
      <joint name="h1" axis="0 0 1" pos="0.02 0.01 0" ref="0.3" range="-2 2" limited="true"/>
      <joint name="h2" axis="1 0.3 0" pos="0 0.05 -0.02" ref="-0.2"/>
      <joint name="s1" type="slide" axis="0.2 0 1" ref="0.05" range="-0.3 0.3" limited="true"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="base_tip" pos="0.3 0 0.02" euler="0.1 0.2 0.3"/>
      <body name="slider" pos="0.3 0 0" euler="0 0.4 0">
        <joint name="s2" type="slide" axis="1 0 0"/>
        <joint name="h3" axis="0 1 0" pos="0.03 0 0.01" ref="0.1"/>
        <geom type="box" size="0.05 0.03 0.02" pos="0.05 0 0"/>
        <body name="wrist" pos="0.12 0 0">
          <joint name="h4" axis="0 0 1" pos="0.01 0 0"/>
          <joint name="h5" axis="0 1 0" pos="0.01 0 0" range="-1 1" limited="true"/>
          <joint name="ball" type="ball" pos="0.02 0.01 0" range="0 1" limited="true"/>
          <geom type="ellipsoid" size="0.05 0.03 0.04" pos="0.06 0 0"/>
          <site name="tool" pos="0.1 0 0"/>
        </body>
      </body>
      <body name="hanger" pos="-0.1 0 0">
        <joint name="b2" type="ball" pos="0 0 0.02"/>
        <joint name="s3" type="slide" axis="0 0 1" ref="0.02"/>
        <joint name="s4" type="slide" axis="0 1 0"/>
        <geom type="cylinder" size="0.03 0.05" pos="0 0 -0.05"/>
      </body>
    </body>
    <body name="drone" pos="0 1 2">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.03"/>
      <body name="gimbal" pos="0 0 -0.05">
        <joint name="g1" axis="1 0 0" pos="0 0 0.01"/>
        <joint name="g2" axis="0 1 0" pos="0 0 0.01"/>
        <geom type="sphere" size="0.03" pos="0 0 -0.03"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="h2" gear="3"/><position joint="h5" kp="10"/></actuator>
</mujoco>"""


@pytest.fixture(scope="module")
def layouts():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        system, mapping, forces = load_mjcf(LAYOUTS, return_mapping=True, return_forces=True)
    return system, mapping, forces, mujoco.MjModel.from_xml_string(LAYOUTS), record


def test_every_layout_keeps_its_joints_limits_and_actuators(layouts):
    system, mapping, forces, model, record = layouts
    base, drone = system.modules
    assert base.topology.joint_names == ("h1", "h2", "s1", "s2", "h3", "h4", "h5", "ball", "b2", "s3", "s4")
    assert base.topology.joint_kinds == ("revolute", "revolute", "prismatic", "prismatic", "revolute", "revolute",
                                         "revolute", "spherical", "spherical", "prismatic", "prismatic")
    assert drone.topology.joint_kinds == ("free", "universal")        # two plain hinges through one point
    limits = dict(zip(base.topology.joint_names, base.topology.joint_limits))
    assert limits["h1"] == (-2.0, 2.0) and limits["s1"] == (-0.3, 0.3) and limits["h5"] == (-1.0, 1.0)
    assert dict(zip(base.topology.joint_names, base.topology.cone_limits))["ball"] == 1.0
    assert not [str(w.message) for w in record if "cone" in str(w.message)]   # cones are enforced: no warning
    from mrds_jax.system.timestepping import limit_rows
    assert [c[-1].split(".")[-1] for c in limit_rows(system).cones] == ["ball"]   # one cone row, the ball's 1 rad
    assert not any("skipped" in str(w.message) for w in record)
    actuators, = [f for f in forces if type(f).__name__ == "Actuators"]
    assert actuators.joints == (("base", "h2"), ("base", "h5"))


def test_every_layout_equals_mujoco(layouts):
    system, mapping, _, model, _ = layouts
    rng = np.random.default_rng(7)
    worst = np.zeros(4)
    for _ in range(3):
        state = mapping.state(random_qpos(model, rng), rng.uniform(-2, 2, model.nv))
        worst = np.maximum(worst, mujoco_errors(system, mapping, model, state))
    print(f"layouts vs MuJoCo: |ΔM| {worst[0]:.2e}, |Δbias| {worst[1]:.2e}, body position {worst[2]:.2e} m, "
          f"rotation {worst[3]:.2e}")
    assert worst[0] < TOL and worst[1] < TOL and worst[2] < 1e-12 and worst[3] < 1e-12
    # sites ride on the body, wherever its joints put it
    data = mujoco.MjData(model)
    state = mapping.state(random_qpos(model, rng))
    data.qpos[:] = mapping.to_mujoco(state)[0]
    mujoco.mj_kinematics(model, data)
    kin = mj.forward_kinematics(system.modules[0], state.q[0])
    for s, site in enumerate(("base_tip", "tool")):
        R, p = mj.frame_placement(system.modules[0], kin, site)
        np.testing.assert_allclose(p, data.site_xpos[s], atol=1e-12)
        np.testing.assert_allclose(R, data.site_xmat[s].reshape(3, 3), atol=1e-12)


def test_joint_lock_inside_a_chain_holds_where_mujoco_holds():
    """A ``joint`` equality on the middle hinge of a body with three: MuJoCo's constraint and ours hold together."""
    xml = LAYOUTS.replace("<actuator>", '<equality><joint name="lock" joint1="h2" polycoef="0.1 0 0 0 0"/>'
                                        '</equality><actuator>')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping = load_mjcf(xml, return_mapping=True)
    model = mujoco.MjModel.from_xml_string(xml)
    for state in consistent_states(model, mapping, np.random.default_rng(3), 2):
        errors = mj.system.constraint_errors(system, state)
        assert max(float(np.abs(e).max()) for e in errors.position) < 1e-12
        assert max(float(np.abs(e).max()) for e in errors.velocity) < 1e-12


def test_layout_mujoco_refuses_is_named():
    """A ball joint followed by a hinge on one body: MuJoCo's compiler refuses it (its ball velocity would be taken in
    the body's final frame), and the error says where."""
    xml = """<mujoco><worldbody><body name="arm"><joint name="b" type="ball"/><joint name="h" axis="1 0 0"/>
             <geom size="0.1" contype="0" conaffinity="0"/></body></worldbody></mujoco>"""
    with pytest.raises(ValueError, match=r"MuJoCo could not load the MJCF: .*ball followed by rotation in body 'arm'"):
        load_mjcf(xml)


def test_massless_links_do_not_break_mujocos_parent_filter(humanoid):
    """The thighs' parent body is the pelvis, not the massless hip frames between: no butt–thigh pair, as MuJoCo
    (filterparent). The candidate pairs are those MuJoCo's documented filter gives (weld bodies, parent–child,
    contype/conaffinity, excludes), brute force."""
    system, _, _, model, _ = humanoid
    expected = set()
    for g1 in range(model.ngeom):
        for g2 in range(g1 + 1, model.ngeom):
            b1, b2 = (int(model.body_weldid[model.geom_bodyid[g]]) for g in (g1, g2))
            p1, p2 = (int(model.body_weldid[model.body_parentid[b]]) for b in (b1, b2))
            raw = sorted(int(model.geom_bodyid[g]) for g in (g1, g2))
            if (b1 == b2 or (b1 and b2 and (p1 == b2 or p2 == b1))
                    or not (model.geom_contype[g1] & model.geom_conaffinity[g2]
                            or model.geom_contype[g2] & model.geom_conaffinity[g1])
                    or (raw[0] << 16) + raw[1] in set(int(x) for x in model.exclude_signature)):
                continue
            expected.add(frozenset(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in (g1, g2)))
    assert set(frozenset(p) for p in system.collision.pair_names()) == expected
    assert frozenset(("butt", "thigh_right")) not in expected


def test_humanoid_written_back_is_the_same_model(humanoid):
    """to_mjcf writes each chain of massless links back as one body with several joints at their anchors:
    MuJoCo compiles it, load_mjcf reads it, and its H and b equal the original's to 1e-12."""
    system, mapping, _, model, _ = humanoid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = load_mjcf(mj.export.to_mjcf(system), collision=False)
    assert back.modules[0].topology.joint_kinds == system.modules[0].topology.joint_kinds
    assert back.modules[0].topology.joint_limits == system.modules[0].topology.joint_limits
    rng = np.random.default_rng(11)
    for _ in range(2):
        state = mapping.state(random_qpos(model, rng), rng.uniform(-2, 2, model.nv))
        (H, b), (H2, b2) = (mass_matrices_and_bias(s.modules, state.q, state.v) for s in (system, back))
        np.testing.assert_allclose(H2[0], H[0], atol=1e-12, rtol=0)
        np.testing.assert_allclose(b2[0], b[0], atol=1e-11, rtol=0)


def test_chain_with_turned_joints_cannot_be_written_back(layouts):
    """A hinge with ``ref`` turns the next joint's placement; MuJoCo has no fixed rotation between the joints of one
    body (only a ref, which this exporter does not write), so to_mjcf says which link it cannot write."""
    with pytest.raises(ValueError, match=r"massless link 'base:h1' cannot be written as part of one MuJoCo body"):
        mj.export.to_mjcf(layouts[0])


# ---------------------------------------------------------------------------------------------- keyframes
def test_keyframe_state_of_the_humanoid():
    """``mapping.keyframe_state``: the file's key as our state (inside its limits, so projecting leaves it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping = load_mjcf(DATA / "humanoid.xml", return_mapping=True, collision=False)
    model = mujoco.MjModel.from_xml_path(str(DATA / "humanoid.xml"))
    state = mapping.keyframe_state("squat", system)
    np.testing.assert_allclose(state.q[0], mapping.state(model.key_qpos[0]).q[0], atol=1e-15)
    assert float(np.abs(state.v[0]).max()) == 0.0
    np.testing.assert_allclose(mapping.keyframe_state(1).q[0], model.key_qpos[1], atol=0)   # by index, no loops
    with pytest.raises(KeyError, match=r"no keyframe named 'sqat'; the file's keyframes are \['squat', "
                                       r"'stand_on_left_leg'\]; did you mean 'squat'\?"):
        mapping.keyframe_state("sqat")
    with pytest.raises(KeyError, match=r"keyframe index 2 out of range: the file has 2 keyframes"):
        mapping.keyframe_state(2)


def test_keyframe_state_is_projected_onto_the_loop():
    """A key written near, not on, the four-bar's loop: projected (make_consistent) so that our exact constraint
    holds; without the system the mapping refuses rather than hand back a state off the loop."""
    path = Path(mj.__file__).parent / "data" / "systems" / "fourbar.xml"
    model = mujoco.MjModel.from_xml_path(str(path))
    qpos = np.array(model.qpos0)
    mujoco.mj_integratePos(model, qpos, np.full(model.nv, 0.02), 1.0)
    key = f'<keyframe><key name="home" qpos="{" ".join(repr(float(x)) for x in qpos)}"/></keyframe></mujoco>'
    system, mapping = load_mjcf(path.read_text().replace("</mujoco>", key), return_mapping=True)
    off = mj.system.constraint_errors(system, mapping.state(qpos)).position
    assert max(float(np.abs(e).max()) for e in off) > 1e-3                          # the key is off the loop
    state = mapping.keyframe_state("home", system)
    errors = mj.system.constraint_errors(system, state)
    assert max(float(np.abs(e).max()) for e in errors.position + errors.velocity) < 1e-10
    assert np.abs(mapping.to_mujoco(state)[0] - qpos).max() < 0.05                   # near the key
    with pytest.raises(ValueError, match=r"keyframe 'home': the model has loops .* pass the system"):
        mapping.keyframe_state("home")


# ---------------------------------------------------------------------------------------------- actuators
def test_humanoid_passive_and_motor_forces_equal_mujoco(humanoid):
    """The 21 motors (gear, ctrlrange clamping) and the joints' springs and dampers act on the right degrees of
    freedom of the chained hinges: our generalized forces = MuJoCo's qfrc_actuator and qfrc_passive, 1e-10."""
    system, mapping, (passive, motors), model, _ = humanoid
    data = mujoco.MjData(model)
    rng = np.random.default_rng(5)
    for _ in range(2):
        state = mapping.state(random_qpos(model, rng), rng.uniform(-2, 2, model.nv))
        ctrl = rng.uniform(-1.5, 1.5, model.nu)                       # some beyond ctrlrange [-1, 1]
        data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
        data.ctrl[:] = ctrl
        mujoco.mj_forward(model, data)
        for element, expected in ((passive, data.qfrc_passive), (mj.system.with_control(motors, ctrl),
                                                                 data.qfrc_actuator)):
            Q = mj.system.generalized_forces(system, (element,), state, 0.0)[0]
            np.testing.assert_allclose(mapping.to_mujoco(mj.system.SystemState(state.q, (Q,)))[1], expected,
                                       atol=1e-10, rtol=0)


def test_unread_actuators_are_named_once_with_what_the_simulation_does():
    """A filtered servo, a motor on a ball joint and one on a fixed tendon are read (tests/test_mjcf_actuators.py
    checks them against MuJoCo); the muscle is not, and one warning names it and says it exerts no force."""
    xml = LAYOUTS.replace("<actuator>", """<actuator>
        <position name="slow_servo" joint="h1" kp="5" timeconst="0.1"/>
        <motor name="on_ball" joint="b2" gear="1 0 0 0 0 0"/>
        <muscle name="biceps" joint="h4" lengthrange="-1 1"/>
        <motor name="through_tendon" tendon="t"/>""").replace(
        "<actuator>", '<tendon><fixed name="t"><joint joint="h3" coef="1"/></fixed></tendon><actuator>', 1)
    with pytest.warns(UserWarning) as record:
        _, forces = load_mjcf(xml, return_forces=True, collision=False)
    text = [str(w.message) for w in record if "actuator" in str(w.message)]
    assert len(text) == 1, text
    for expected in ("actuators and tendons not modelled as written", "actuators with activation dynamics 'muscle' (biceps)",
                     "left out and exert no force"):
        assert expected in text[0], (expected, text[0])
    for unexpected in ("slow_servo", "on_ball", "through_tendon"):
        assert unexpected not in text[0], (unexpected, text[0])
    actuators, = [f for f in forces if type(f).__name__ == "Actuators"]
    assert actuators.actuator_names == ("slow_servo", "on_ball", "through_tendon", "actuator4", "actuator5")


def test_joint_actuator_force_range_clamps_the_summed_force_as_mujoco():
    """``actuatorfrcrange`` on a hinge driven by two actuators (and on a slide by one): MuJoCo clamps qfrc_actuator
    per joint, after each actuator's own forcerange; ours the same, 1e-12, the clamp active at some states."""
    xml = LAYOUTS.replace('name="h2" axis="1 0.3 0"', 'name="h2" axis="1 0.3 0" actuatorfrcrange="-2 1.5"').replace(
        'name="s1" type="slide"', 'name="s1" type="slide" actuatorfrcrange="-0.5 0.5"').replace(
        "</actuator>", '<velocity joint="h2" kv="4" forcerange="-3 3"/><motor joint="s1" gear="2"/></actuator>')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = load_mjcf(xml, return_mapping=True, return_forces=True, collision=False)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    actuators, = [f for f in forces if type(f).__name__ == "Actuators"]
    rng = np.random.default_rng(9)
    clamped = 0
    for _ in range(6):
        state = mapping.state(random_qpos(model, rng), rng.uniform(-2, 2, model.nv))
        ctrl = rng.uniform(-2, 2, model.nu)
        data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
        data.ctrl[:] = ctrl
        mujoco.mj_forward(model, data)
        Q = mj.system.generalized_forces(system, (mj.system.with_control(actuators, ctrl),), state, 0.0)
        ours = mapping.to_mujoco(mj.system.SystemState(state.q, Q))[1]
        np.testing.assert_allclose(ours, data.qfrc_actuator, atol=1e-12, rtol=0)
        clamped += int(np.isclose(abs(data.qfrc_actuator[1]), 2.0) or np.isclose(data.qfrc_actuator[1], 1.5)
                       or np.isclose(abs(data.qfrc_actuator[2]), 0.5))
    assert clamped > 0
