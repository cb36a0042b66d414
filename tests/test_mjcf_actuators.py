"""Actuators and fixed tendons as MJCF writes them (issue 41 item 2), against MuJoCo itself, float64.

Small models written here. At random states, controls (beyond their ranges) and activations:
fixed tendons' lengths and velocities equal ``ten_length``/``ten_velocity`` and their spring-dampers (with a
dead band) ``qfrc_passive``, and the springs' energy and the dampers' power agree with their force; actuators on
hinges, a slide, a ball (three gear components, position servos whose setpoint MuJoCo wraps), a free joint (six),
the three through ``jointinparent`` too, and fixed tendons (one tendon with a force range shared by two
actuators), with affine gain and bias, ctrl/force/joint-force ranges, equal ``actuator_length``,
``actuator_force`` and ``qfrc_actuator``; activation dynamics (integrator, intvelocity, filter, filterexact,
actrange, actearly) give MuJoCo's ``act_dot``, its ``actuator_force`` and, stepped, its ``act``; rollouts through
the contact step follow ``mj_step`` (semi-implicit Euler) in q, v and act; a limited fixed tendon's rows equal
MuJoCo's tendon-limit rows and hold it in range; a disabled actuator group is left out; what is not read is named
in one warning.
"""
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.pytree import replace
from mrds_jax.validation import ArgumentError

jax.config.update("jax_enable_x64", True)

N_STATES = 6
NO_CONTACT = 'contype="0" conaffinity="0"'

# a free base, a ball shoulder, hinge elbow and wrist, a slide; two fixed tendons
ARM = f"""
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size=".1 .12 .08" mass="3" {NO_CONTACT}/>
      <body name="upper" pos="0.05 0 -0.1">
        <joint name="shoulder" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.02 0 -.3" size=".04" {NO_CONTACT}/>
        <body name="lower" pos="0 0 -0.3">
          <joint name="elbow" type="hinge" axis="0 1 0" actuatorfrcrange="-2.5 3" actuatorfrclimited="true"/>
          <geom type="capsule" fromto="0 0 0 0 0.03 -.25" size=".03" {NO_CONTACT}/>
          <body name="hand" pos="0 0 -0.25">
            <joint name="wrist" type="hinge" axis="1 0.2 0"/>
            <geom type="sphere" size=".05" pos="0.01 0 -0.03" {NO_CONTACT}/>
            <body name="finger" pos="0 0 -0.05">
              <joint name="slide" type="slide" axis="0 0.3 1"/>
              <geom type="box" size=".01 .02 .03" {NO_CONTACT}/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1" stiffness="30" damping="2" springlength="0.1 0.3">
      <joint joint="elbow" coef="1"/><joint joint="wrist" coef="-0.5"/><joint joint="slide" coef="2"/>
    </fixed>
    <fixed name="t2" stiffness="10" damping="1" springlength="0.2" actuatorfrcrange="-3 4" actuatorfrclimited="true">
      <joint joint="elbow" coef="0.7"/><joint joint="wrist" coef="1.3"/>
    </fixed>
  </tendon>
  <actuator>
    <motor name="root_motor" joint="root" gear="1 2 3 0.1 0.2 0.3"/>
    <motor name="shoulder_motor" joint="shoulder" gear="1 -0.5 2" ctrlrange="-1 1"/>
    <position name="shoulder_servo" joint="shoulder" gear="0.3 0.4 0" kp="20" kv="2"/>
    <motor name="t1_motor" tendon="t1" gear="2" ctrlrange="-1 1" forcerange="-1.5 1.5"/>
    <general name="t2_affine" tendon="t2" gaintype="affine" gainprm="5 1 0.5" biastype="affine" biasprm="0.1 -2 -0.3"/>
    <motor name="t2_motor" tendon="t2" gear="1.5"/>
    <general name="elbow_filter" joint="elbow" dyntype="filter" dynprm="0.05" gainprm="30" biastype="affine"
             biasprm="0 -30 -1"/>
    <general name="wrist_exact" joint="wrist" dyntype="filterexact" dynprm="0.03" gainprm="4" gear="1.5"/>
    <intvelocity name="slide_integrator" joint="slide" kp="50" actrange="-0.2 0.2"/>
    <general name="wrist_early" joint="wrist" dyntype="integrator" actearly="true" gainprm="3"/>
    <velocity name="wrist_damper" joint="wrist" kv="4" forcerange="-0.5 0.5"/>
    <motor name="elbow_in_parent" jointinparent="elbow" gear="0.7"/>
    <position name="shoulder_in_parent" jointinparent="shoulder" gear="0.2 -0.3 0.5" kp="3" kv="0.5"/>
    <motor name="root_in_parent" jointinparent="root" gear="0.5 -1 2 0.3 -0.2 0.1"/>
  </actuator>
</mujoco>
"""


def _load(xml, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # everything in these models is read: no warning
        return load_mjcf(xml, return_mapping=True, return_forces=True, collision=False, **kw)


def _random_states(model, mapping, rng, n=N_STATES):
    out = []
    for _ in range(n):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-1.5, 1.5, model.nv), 1.0)
        out.append((qpos, rng.uniform(-2, 2, model.nv)))
    return out


def _ours_in_mujoco(mapping, state, Q):
    return mapping.to_mujoco(S.SystemState(state.q, tuple(Q)))[1]


def _split(forces):
    tendons = tuple(f for f in forces if isinstance(f, S.TendonSpringDamper))
    acts, = [f for f in forces if isinstance(f, S.Actuators)]
    return tendons, acts


def test_fixed_tendon_lengths_and_spring_dampers_equal_mujoco():
    """L, L̇ of both fixed tendons = ten_length, ten_velocity; their spring-dampers (one with a dead band
    [0.1, 0.3], one with a rest length) = MuJoCo's qfrc_passive (the joints have none), 1e-10, at states on both
    sides of the band."""
    system, mapping, forces = _load(ARM)
    tendons, _ = _split(forces)
    assert [t.name for t in tendons] == ["tendon:t1", "tendon:t2"]
    model = mujoco.MjModel.from_xml_string(ARM)
    data = mujoco.MjData(model)
    outside = 0
    for qpos, qvel in _random_states(model, mapping, np.random.default_rng(1)):
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(model, data)
        state = mapping.state(qpos, qvel)
        for k, el in enumerate(tendons):
            L, Ld = S.tendon_length(system, el.tendon, state)
            np.testing.assert_allclose([L, Ld], [data.ten_length[k], data.ten_velocity[k]], atol=1e-12, rtol=0)
        outside += not 0.1 <= data.ten_length[0] <= 0.3
        Q = S.generalized_forces(system, tendons, state, 0.0)
        np.testing.assert_allclose(_ours_in_mujoco(mapping, state, Q), data.qfrc_passive, atol=1e-10, rtol=0)
        assert np.abs(data.qfrc_passive).max() > 0.5
    assert 0 < outside < N_STATES                      # the dead band was met from inside and outside


def test_tendon_spring_energy_and_damper_power_are_consistent_with_its_force():
    """Along a motion of the tendons' joints, d/dt of the stored energy ½k x² (x outside the dead band) is −vᵀQ of
    the springs (damping off), and the dissipated power d L̇² is −vᵀQ of the dampers (stiffness off): the energy
    terms that the work-energy balance uses match the force (analytic, autodiff)."""
    system, mapping, forces = _load(ARM)
    tendons, _ = _split(forces)
    model = mujoco.MjModel.from_xml_string(ARM)
    topology = system.modules[0].topology
    idx = [topology.q_slices[topology.joint_names.index(j)].start for j in ("elbow", "wrist", "slide")]
    vdx = [topology.v_slices[topology.joint_names.index(j)].start for j in ("elbow", "wrist", "slide")]
    springs = tuple(replace(t, damping=jnp.zeros(())) for t in tendons)
    dampers = tuple(replace(t, stiffness=jnp.zeros(())) for t in tendons)
    rng = np.random.default_rng(6)
    for qpos, _ in _random_states(model, mapping, rng, 3):
        state = mapping.state(qpos)
        v = jnp.zeros(system.modules[0].nv).at[np.array(vdx)].set(rng.uniform(-1, 1, 3))
        def moved(s):
            return S.SystemState((state.q[0].at[np.array(idx)].add(s * v[np.array(vdx)]),), state.v)
        _, dV = jax.jvp(lambda s: S.force_potential_energy(system, springs, moved(s)), (0.0,), (1.0,))
        Q = S.generalized_forces(system, springs, state, 0.0)[0]
        np.testing.assert_allclose(dV, -jnp.dot(v, Q), atol=1e-12, rtol=1e-12)
        with_v = S.SystemState(state.q, (v,))
        Qd = S.generalized_forces(system, dampers, with_v, 0.0)[0]
        np.testing.assert_allclose(S.dissipated_power(system, dampers, with_v), -jnp.dot(v, Qd), atol=1e-12, rtol=1e-12)
        assert abs(float(dV)) > 1e-3


def _mujoco_at(model, data, qpos, qvel, ctrl, act):
    data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
    stateful = model.actuator_actadr >= 0
    data.act[model.actuator_actadr[stateful]] = act[stateful]
    mujoco.mj_forward(model, data)


def _random_inputs(model, rng):
    ctrl = rng.uniform(-4, 4, model.nu)
    act = rng.uniform(-0.5, 0.5, model.nu) * (model.actuator_actadr >= 0)
    return ctrl, act


def test_transmissions_and_forces_equal_mujoco():
    """Actuators on the free joint (6 gear components), the ball (3; a motor and a position servo with MuJoCo's
    setpoint wrap), hinges, a slide and two fixed tendons (t2's force range shared by an affine general and a
    motor): actuator_length, actuator_force (ctrl and force ranges, tendon force scaling) and qfrc_actuator (the
    elbow's actuatorfrcrange), 1e-10, with activations set."""
    system, mapping, forces = _load(ARM)
    _, acts = _split(forces)
    model = mujoco.MjModel.from_xml_string(ARM)
    data = mujoco.MjData(model)
    assert acts.actuator_names == tuple(model.actuator(u).name for u in range(model.nu))
    assert acts.wrap_setpoint == tuple(u in (2, 12) for u in range(model.nu))
    rng = np.random.default_rng(2)
    scaled = clamped = 0
    for qpos, qvel in _random_states(model, mapping, rng):
        ctrl, act = _random_inputs(model, rng)
        ctrl[2] = rng.uniform(-12, 12)                     # the ball servo's setpoint, beyond a period
        _mujoco_at(model, data, qpos, qvel, ctrl, act)
        state = mapping.state(qpos, qvel)
        el = S.with_activation(S.with_control(acts, ctrl), act)
        force, _ = S.actuator_state(system, el, state, 0.0)
        lengths = [S.actuation.transmission(system, w, m, state)[0] for w, m in zip(el.wraps, el.moment)]
        np.testing.assert_allclose(lengths, data.actuator_length, atol=1e-12, rtol=0)
        np.testing.assert_allclose(force, data.actuator_force, atol=1e-10, rtol=0)
        Q = S.generalized_forces(system, (el,), state, 0.0)
        np.testing.assert_allclose(_ours_in_mujoco(mapping, state, Q), data.qfrc_actuator, atol=1e-10, rtol=0)
        total = data.actuator_force[4] + data.actuator_force[5]
        scaled += np.isclose(total, -3) or np.isclose(total, 4)
        clamped += abs(data.qfrc_actuator[model.jnt_dofadr[model.joint("elbow").id]]) in (2.5, 3.0)
    assert scaled and clamped                              # the tendon and joint force limits were exercised


def test_activation_dynamics_equal_mujoco():
    """act_dot of integrator, filter and filterexact actuators (ctrl clamped first) = MuJoCo's act_dot, and one
    step of each activation (Euler; filterexact's exact exponential; actrange clamp) = MuJoCo's act after
    mj_step, 1e-12."""
    system, mapping, forces = _load(ARM)
    _, acts = _split(forces)
    model = mujoco.MjModel.from_xml_string(ARM)
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    data = mujoco.MjData(model)
    rng = np.random.default_rng(3)
    stateful = model.actuator_actadr >= 0
    hit_range = 0
    for qpos, qvel in _random_states(model, mapping, rng):
        ctrl, act = _random_inputs(model, rng)
        _mujoco_at(model, data, qpos, qvel, ctrl, act)
        el = S.with_activation(S.with_control(acts, ctrl), act)
        state = mapping.state(qpos, qvel)
        rate = S.activation_rate(el, jnp.clip(ctrl, el.ctrl_range[:, 0], el.ctrl_range[:, 1]))
        np.testing.assert_allclose(np.asarray(rate)[stateful], data.act_dot[model.actuator_actadr[stateful]],
                                   atol=1e-12, rtol=0)
        mujoco.mj_step(model, data)
        advanced, = S.actuation.advance_activations(system, (el,), state, 0.0, model.opt.timestep)
        np.testing.assert_allclose(np.asarray(advanced.activation)[stateful], data.act[model.actuator_actadr[stateful]],
                                   atol=1e-12, rtol=0)
        hit_range += abs(data.act[model.actuator_actadr[8]]) == 0.2
    assert hit_range                                       # the slide integrator's actrange clamped


LIMITED = ARM.replace('<joint name="slide" type="slide" axis="0 0.3 1"/>',
                      '<joint name="slide" type="slide" axis="0 0.3 1" range="-5 5"/>')
FIXED_BASE = LIMITED.replace('<freejoint name="root"/>', "").replace('timestep="0.002"', 'timestep="0.0002"').replace(
    '<motor name="root_motor" joint="root" gear="1 2 3 0.1 0.2 0.3"/>', "").replace(
    '<motor name="root_in_parent" jointinparent="root" gear="0.5 -1 2 0.3 -0.2 0.1"/>', "")


def test_rollout_with_activations_follows_mj_step():
    """40 steps (dt 0.2 ms: the wrist's velocity servo is explicit in both) of the contact step (the slide's far
    limit makes it the velocity-level path) with constant
    controls from a random state and activations = mj_step with the Euler integrator (semi-implicit, as ours)
    in q, v and act, 1e-9: the activations are carried, used, and advanced after each step as MuJoCo does."""
    system, mapping, forces = _load(FIXED_BASE)
    model = mujoco.MjModel.from_xml_string(FIXED_BASE)
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    data = mujoco.MjData(model)
    rng = np.random.default_rng(4)
    (qpos, qvel), = _random_states(model, mapping, rng, 1)
    ctrl, act = _random_inputs(model, rng)
    _mujoco_at(model, data, qpos, qvel, ctrl, act)
    forces = tuple(S.with_activation(S.with_control(f, ctrl), act) if isinstance(f, S.Actuators) else f
                   for f in forces)
    n = 40
    traj = S.simulate(system, mapping.state(qpos, qvel), model.opt.timestep, n, forces=forces,
                      checks=S.Checks(enabled=False))
    stateful = model.actuator_actadr >= 0
    for _ in range(n):
        mujoco.mj_step(model, data)
    qpos_ours, qvel_ours = mapping.to_mujoco(S.SystemState(tuple(x[-1] for x in traj.q), tuple(x[-1] for x in traj.v)))
    np.testing.assert_allclose(qpos_ours, data.qpos, atol=1e-9, rtol=0)
    np.testing.assert_allclose(qvel_ours, data.qvel, atol=1e-9, rtol=0)
    np.testing.assert_allclose(np.asarray(traj.activations[0][-1])[stateful], data.act[model.actuator_actadr[stateful]],
                               atol=1e-9, rtol=0)
    assert np.abs(data.act[model.actuator_actadr[stateful]] - act[stateful]).max() > 0.05   # the activations moved


def test_activation_dynamics_run_on_the_contact_step_without_limits():
    """A system without limits or collision geometry but with activation dynamics runs on the velocity-level step
    (which carries the activations): after 10 steps they equal MuJoCo's act (1e-12; these activations depend on
    the controls only); unilateral=False, which turns that step off, raises an ArgumentError naming the element."""
    xml = ARM.replace('timestep="0.002"', 'timestep="0.0002"')     # the wrist's velocity servo is explicit
    system, mapping, forces = _load(xml)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(7)
    ctrl, act = _random_inputs(model, rng)
    _mujoco_at(model, data, model.qpos0, np.zeros(model.nv), ctrl, act)
    forces = tuple(S.with_activation(S.with_control(f, ctrl), act) if isinstance(f, S.Actuators) else f
                   for f in forces)
    traj = S.simulate(system, mapping.state(), model.opt.timestep, 10, forces=forces, checks=S.Checks(enabled=False))
    assert isinstance(traj, S.ContactTrajectory)
    for _ in range(10):
        mujoco.mj_step(model, data)
    stateful = model.actuator_actadr >= 0
    np.testing.assert_allclose(np.asarray(traj.activations[0][-1])[stateful], data.act[model.actuator_actadr[stateful]],
                               atol=1e-12, rtol=0)
    with pytest.raises(ArgumentError, match=r"actuators \['actuators'\] have activation dynamics"):
        S.simulate(system, mapping.state(), 1e-3, 2, forces=forces, contact=S.ContactStep(unilateral=False))


UNREAD = f"""
<mujoco>
  <worldbody>
    <site name="anchor" pos="0 0 0.5"/>
    <body name="a" pos="0 0 0">
      <joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".03" {NO_CONTACT}/>
      <site name="tip" pos="0.3 0 0"/>
      <body name="b" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".03" {NO_CONTACT}/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="rubbing" frictionloss="0.3"><joint joint="j1" coef="1"/></fixed>
    <fixed name="bounded" limited="true" range="-1 1" armature="0.1"><joint joint="j2" coef="1"/></fixed>
    <spatial name="cord" stiffness="5"><site site="anchor"/><site site="tip"/></spatial>
  </tendon>
  <actuator>
    <muscle name="biceps" tendon="cord"/>
    <motor name="pusher" site="tip" gear="1 0 0 0 0 0"/>
    <motor name="fine" joint="j1"/>
  </actuator>
</mujoco>
"""


def test_what_is_not_read_is_named_once_with_its_consequence():
    """A muscle on a spatial tendon, a site transmission, a spatial tendon's stiffness, tendon friction loss and
    tendon armature: one warning names each, and says what the simulation does without it; the readable motor is
    read, and the fixed tendon's limits are kept (not named)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, forces = load_mjcf(UNREAD, return_forces=True, collision=False)
    ours = [str(w.message) for w in caught if "actuators and tendons" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    msg = ours[0]
    for expected in ("biceps", "pusher", "actuators with a site transmission", "cord", "no force along them",
                     "tendon friction loss (rubbing): no friction along the tendon",
                     "tendon armature (bounded): no added inertia along the tendon", "exert no force"):
        assert expected in msg, (expected, msg)
    acts, = [f for f in forces if isinstance(f, S.Actuators)]
    assert acts.actuator_names == ("fine",) and "limits" not in msg


TENDON_LIMIT = f"""
<mujoco>
  <option timestep="0.001" gravity="0 0 0"/>
  <worldbody>
    <body name="a">
      <joint name="j1" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".03" {NO_CONTACT}/>
      <body name="b" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".03" {NO_CONTACT}/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="strap" limited="true" range="-0.4 0.3" margin="10"><joint joint="j1" coef="1"/>
      <joint joint="j2" coef="-0.6"/></fixed>
  </tendon>
  <actuator><motor name="pull" tendon="strap" gear="1"/></actuator>
</mujoco>
"""


def test_fixed_tendon_limits_are_one_sided_rows_as_mujocos():
    """A limited fixed tendon gives two one-sided rows: their gaps L − lower, upper − L and rows ±(coefficients)
    equal MuJoCo's tendon-limit constraint rows (efc_pos, efc_J; a wide margin instantiates both) at random
    states, 1e-12; pulled by a motor from rest, the hard rows hold L within the range (1e-6) and bring it to the
    upper bound."""
    from mrds_jax.system.timestepping import limit_gaps_and_rows, limit_rows
    system, mapping, forces = _load(TENDON_LIMIT)
    limits = limit_rows(system)
    assert limits.row_names() == ["strap (lower)", "strap (upper)"]
    model = mujoco.MjModel.from_xml_string(TENDON_LIMIT)
    data = mujoco.MjData(model)
    for qpos, qvel in _random_states(model, mapping, np.random.default_rng(5), 3):
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(model, data)
        rows = data.efc_type == mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON
        assert rows.sum() == 2
        gaps, J = limit_gaps_and_rows(system, limits, mapping.state(qpos, qvel))
        np.testing.assert_allclose(gaps, data.efc_pos[rows], atol=1e-12, rtol=0)
        np.testing.assert_allclose(J, data.efc_J.reshape(-1, model.nv)[rows], atol=1e-12, rtol=0)
    acts, = forces
    traj = S.simulate(system, mapping.state(), 1e-3, 300, forces=(S.with_control(acts, [2.0]),),
                      checks=S.Checks(enabled=False))
    tendon = S.fixed_tendon("strap", [("a", "j1"), ("a", "j2")], [1.0, -0.6])
    L = np.array([S.tendon_length(system, tendon, S.SystemState((q,), (v,)))[0] for q, v in zip(traj.q[0], traj.v[0])])
    assert L.max() <= 0.3 + 1e-6 and L[-1] > 0.3 - 1e-6


def test_actuators_of_a_disabled_group_are_left_out_as_mujoco_applies_none():
    """``actuatorgroupdisable``: MuJoCo applies no force from that group's actuators (actuator_force 0); the
    loader leaves them out (no warning: nothing is lost) and the rest equals qfrc_actuator."""
    xml = f"""<mujoco><option actuatorgroupdisable="2"/><worldbody><body><joint name="j" axis="0 1 0"/>
      <geom size=".1" {NO_CONTACT}/></body></worldbody>
      <actuator><motor joint="j" group="2" name="off"/><motor joint="j" name="on" gear="2"/></actuator></mujoco>"""
    system, mapping, (acts,) = _load(xml)
    assert acts.actuator_names == ("on",)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.ctrl[:] = [3.0, 1.5]
    mujoco.mj_forward(model, data)
    Q = S.generalized_forces(system, (S.with_control(acts, [1.5]),), mapping.state(), 0.0)
    np.testing.assert_allclose(_ours_in_mujoco(mapping, mapping.state(), Q), data.qfrc_actuator, atol=1e-14, rtol=0)
    assert data.actuator_force[0] == 0 and data.qfrc_actuator[0] == 3.0


@pytest.mark.slow
def test_rollout_derivatives_through_activations_equal_central_differences():
    """d(final q, v, activations)/d(controls and initial activations of the filter, filterexact and integrator
    actuators) through 20 contact steps by forward mode = central differences (1e-6): the activation path is
    differentiable (it found the tendon force scaling's scatter-multiply, which has no derivative). Full mode:
    ~25 s, mostly compiling the forward-mode rollout."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from gradient_check import assert_jvp_equals_central_differences
    system, mapping, forces = _load(FIXED_BASE)
    model = mujoco.MjModel.from_xml_string(FIXED_BASE)
    rng = np.random.default_rng(8)
    (qpos, qvel), = _random_states(model, mapping, rng, 1)
    ctrl, act = _random_inputs(model, rng)
    ctrl = np.clip(ctrl, -0.9, 0.9)                   # inside the ranges: the map is smooth there
    acts, = [f for f in forces if isinstance(f, S.Actuators)]
    names = list(acts.actuator_names)
    dyn = [names.index(n) for n in ("elbow_filter", "wrist_exact", "slide_integrator")]
    act[dyn[2]] = 0.0                                  # inside actrange
    state0 = mapping.state(qpos, qvel)

    def final(x):
        el = S.with_activation(S.with_control(acts, jnp.asarray(ctrl).at[np.array(dyn)].set(x[:3])),
                               jnp.asarray(act).at[np.array(dyn)].set(x[3:]))
        out = S.contact_rollout(system, state0.q, state0.v, model.opt.timestep, 20,
                                forces=tuple(el if f is acts else f for f in forces))
        return jnp.concatenate([out.q[0][-1], out.v[0][-1], out.activations[0][-1][np.array(dyn)]])

    assert_jvp_equals_central_differences(final, jnp.asarray(np.concatenate([ctrl[dyn], act[dyn]])), h=1e-6)
