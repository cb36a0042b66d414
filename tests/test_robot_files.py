"""Robots as their files describe them (issue 25), against MuJoCo and Pinocchio, float64.

The MJCF model ``data/mjcf_robot_file.xml`` (written for these tests: free base, hinges with ``ref``, ball
joints, a slide, armature per joint and from a default class, damping, stiffness about ``springref``, joint
ranges, a loop closed by ``connect`` coupling knee and ankle, one actuator of each kind) is read by
``load_mjcf``. At random states its joint-space inertia (armature included) equals MuJoCo's ``qM``
(``mj_fullM``); ABA, the recursive H⁻¹, RNEA and the kinetic energy (each with armature in its own place)
agree with it on both tree recursions; its passive and actuator forces equal ``qfrc_passive`` and
``qfrc_actuator``; the constrained q̈ equals the KKT solution built from MuJoCo's own quantities and Pinocchio's
``constraintDynamics`` on the ``to_pinocchio`` export (``model.armature``). A URDF robot of
example-robot-data loaded with ``armature=`` equals Pinocchio's own URDF model with the same
``model.armature``; Lilly & Orin's path with armature equals Pinocchio; rollout gradients w.r.t. armature,
damping and controls equal central differences; joint limits are kept and reported.
"""
import dataclasses
import functools
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
from mrds_jax.dynamics.crba_parallel import mass_matrix_parallel
from mrds_jax.export import to_pinocchio
from mrds_jax.export.mjcf import to_mjcf
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.loaders.urdf import load_urdf
from conftest import URDFS
from gradient_check import assert_jvp_equals_central_differences
from mujoco_states import consistent_states

MODEL = Path(__file__).parent / "data" / "mjcf_robot_file.xml"
N_STATES = 10
FD = jax.jit(S.forward_dynamics)


def _sym(M):
    return np.triu(M) + np.triu(M, 1).T


def stack(xs):
    return jax.tree.map(lambda *a: jnp.stack(a), *xs)


@functools.lru_cache(maxsize=None)
def robot():
    """(system, mapping, MuJoCo model) of the test file."""
    with pytest.warns(UserWarning):
        system, mapping = load_mjcf(MODEL, return_mapping=True)
    return system, mapping, mujoco.MjModel.from_xml_path(str(MODEL))


def velocity_map(mapping, state):
    """T with our v = T qvel at ``state`` (columns: our v for MuJoCo's unit velocities)."""
    qpos, _ = mapping.to_mujoco(state)
    nv = len(mapping.dof_index[0])
    return np.stack([np.asarray(mapping.state(qpos, e).v[0]) for e in np.eye(nv)], axis=1)


@functools.lru_cache(maxsize=None)
def open_tree_case():
    """Random (not loop-consistent) states and our tree quantities at them, batched and compiled once."""
    system, mapping, model = robot()
    module = system.modules[0]
    rng = np.random.default_rng(3)
    states = []
    for _ in range(N_STATES):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-1.0, 1.0, model.nv), 1.0)
        states.append(mapping.state(qpos, rng.uniform(-1.0, 1.0, model.nv)))
    q = jnp.stack([s.q[0] for s in states])
    v = jnp.stack([s.v[0] for s in states])
    tau = jnp.asarray(rng.uniform(-3, 3, (N_STATES, module.nv)))

    def ours(q, v, tau):
        out = {}
        for rec in ("unrolled", "level_scan"):
            m = module.with_recursion(rec)
            out[rec] = dict(H=mj.mass_matrix(m, q), aba=mj.aba(m, q, v, tau), nle=mj.nonlinear_effects(m, q, v),
                            Minv=mj.inverse_mass_matrix(m, q, method="recursive"),
                            rnea=mj.rnea(m, q, v, tau), T=mj.kinetic_energy(m, q, v))
        out["H_parallel"] = mass_matrix_parallel(module, q)
        return out

    res = jax.tree.map(np.asarray, jax.jit(jax.vmap(ours))(q, v, tau))
    return states, np.asarray(tau), res


def test_armature_is_read_from_the_file_per_degree_of_freedom():
    system, mapping, model = robot()
    # MuJoCo's dof_armature (per joint and from the "drive" class) in our velocity order: the free joint's
    # [v_world; ω_body] is our [ω; v]
    order = np.r_[3:6, 0:3, 6:model.nv]
    np.testing.assert_array_equal(np.asarray(system.modules[0].params.armature), model.dof_armature[order])
    assert float(np.asarray(system.modules[0].params.armature)[6:].min()) > 0


def test_mass_matrix_with_armature_equals_mujoco_qM():
    """H (CRBA on both recursions, and Amin-Javaheri & Orin's parallel form) = Tᵀ⁻¹-mapped MuJoCo qM, 1e-10."""
    system, mapping, model = robot()
    data = mujoco.MjData(model)
    states, _, res = open_tree_case()
    worst = 0.0
    for k, state in enumerate(states):
        data.qpos[:] = mapping.to_mujoco(state)[0]
        mujoco.mj_forward(model, data)
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M)
        T = velocity_map(mapping, state)
        for H in (res["unrolled"]["H"][k], res["level_scan"]["H"][k], res["H_parallel"][k]):
            worst = max(worst, np.abs(T.T @ H @ T - M).max())
            np.testing.assert_allclose(T.T @ H @ T, M, atol=1e-10, rtol=0)
    assert worst < 1e-10


def test_armature_routes_agree_crba_aba_minverse_rnea_energy():
    """The same armature through ABA (Dᵢ = SᵢᵀIᴬᵢSᵢ + armature), the O(N) H⁻¹, RNEA (τ += armature q̈) and the
    kinetic energy as through CRBA (H + diag(armature))."""
    states, tau, res = open_tree_case()
    for rec in ("unrolled", "level_scan"):
        r = res[rec]
        for k, state in enumerate(states):
            H, v = r["H"][k], np.asarray(state.v[0])
            qdd = np.linalg.solve(H, tau[k] - r["nle"][k])
            np.testing.assert_allclose(r["aba"][k], qdd, atol=1e-10, rtol=0)
            np.testing.assert_allclose(r["Minv"][k] @ H, np.eye(len(H)), atol=1e-10, rtol=0)
            np.testing.assert_allclose(r["rnea"][k], H @ tau[k] + r["nle"][k], atol=1e-10, rtol=0)
            np.testing.assert_allclose(r["T"][k], 0.5 * v @ H @ v, atol=1e-10, rtol=0)


def test_export_carries_armature_to_pinocchio_and_mjcf():
    """to_pinocchio's model.armature gives Pinocchio's CRBA and ABA our H and q̈; export.mjcf's armature gives
    MuJoCo's qM our H (both independent of our algorithms)."""
    system, mapping, model = robot()
    module = system.modules[0]
    twin = to_pinocchio(module)
    c = twin.conversions[0]
    np.testing.assert_array_equal(twin.model.armature, c.v(module.params.armature))
    d = twin.model.createData()
    states, tau, res = open_tree_case()
    exported = mujoco.MjModel.from_xml_string(to_mjcf({"m": module}))
    np.testing.assert_array_equal(exported.dof_armature, model.dof_armature)
    for k, state in enumerate(states):
        q, v = np.asarray(state.q[0]), np.asarray(state.v[0])
        np.testing.assert_allclose(c.P.T @ _sym(pin.crba(twin.model, d, c.q(q))) @ c.P, res["unrolled"]["H"][k],
                                   atol=1e-10, rtol=0)
        np.testing.assert_allclose(c.v_from_pin(pin.aba(twin.model, d, c.q(q), c.v(v), c.v(tau[k]))),
                                   res["level_scan"]["aba"][k], atol=1e-9, rtol=0)


@functools.lru_cache(maxsize=None)
def loop_case():
    system, mapping, model = robot()
    rng = np.random.default_rng(5)
    states = consistent_states(model, mapping, rng, N_STATES)
    taus = [(jnp.asarray(rng.uniform(-3, 3, system.modules[0].nv)),) for _ in states]
    fd = jax.jit(jax.vmap(lambda st, tau: S.forward_dynamics(system, st, tau)))
    return states, taus, jax.tree.map(np.asarray, fd(stack(states), stack(taus)))


def test_loop_with_armature_equals_pinocchio_constraint_dynamics():
    """q̈ of the connect-closed loop, armature in every joint but the free one, = Pinocchio constraintDynamics on the
    export (1e-8)."""
    system, _, _ = robot()
    assert [c.kind for c in system.contacts] == ["spherical"]
    twin = to_pinocchio(system)
    states, taus, out = loop_case()
    for k, (state, tau) in enumerate(zip(states, taus)):
        qp, vp = twin.q(state.q), twin.v(state.v)
        ddq, lam, J = twin.constraint_dynamics(qp, vp, twin.v(tau))
        assert np.abs(J @ vp).max() < 1e-12
        np.testing.assert_allclose(twin.v([out.qdd[0][k]]), ddq, atol=1e-8 * max(1.0, np.abs(ddq).max()), rtol=0)


@pytest.mark.parametrize("name", ["ur5"])
def test_urdf_robot_with_armature_equals_pinocchio(name):
    """load_urdf(..., armature=) against Pinocchio's own URDF parser with the same model.armature: ABA and
    constraintDynamics (a 3-D contact holding the tool at its place in the world), 1e-9."""
    rng = np.random.default_rng(11)
    pmodel = pin.buildModelFromUrdf(str(URDFS[name]))
    joints = [pmodel.names[j] for j in range(1, pmodel.njoints)]
    arm = {j: float(rng.uniform(0.05, 0.5)) for j in joints}
    module = load_urdf(URDFS[name], armature=arm)
    pmodel.armature = np.array([arm[j] for j in joints])
    assert module.topology.joint_names == tuple(joints)
    pdata = pmodel.createData()
    tool = "tool0"
    fid = pmodel.getFrameId(tool)
    qs = rng.uniform(-1.5, 1.5, (N_STATES, module.nq))
    vs = rng.uniform(-1, 1, (N_STATES, module.nv))
    taus = rng.uniform(-5, 5, (N_STATES, module.nv))
    qdd = np.asarray(jax.jit(jax.vmap(lambda q, v, t: mj.aba(module, q, v, t)))(qs, vs, taus))
    for k in range(N_STATES):
        np.testing.assert_allclose(qdd[k], pin.aba(pmodel, pdata, qs[k], vs[k], taus[k]), atol=1e-9, rtol=0)
    # constrained: the tool point pinned where it is at each state; a spherical contact to the ground
    from mrds_jax.contacts import spherical
    for k in range(3):
        pin.framesForwardKinematics(pmodel, pdata, qs[k])
        oMf = pdata.oMf[fid]
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pmodel, pmodel.frames[fid].parentJoint,
                                      pmodel.frames[fid].placement, 0, oMf, pin.LOCAL_WORLD_ALIGNED)
        cd = cm.createData()
        pin.initConstraintDynamics(pmodel, pdata, [cm], [cd])
        v0 = vs[k] - np.linalg.pinv(J := pin.getFrameJacobian(pmodel, pdata, fid, pin.LOCAL_WORLD_ALIGNED)[:3]) @ (
            J @ vs[k])
        ddq = pin.constraintDynamics(pmodel, pdata, qs[k], v0, taus[k], [cm], [cd], pin.ProximalSettings()).copy()
        system = S.build_system({"robot": module}, [spherical("pin", None, ("robot", tool),
                                                              ground_rotation=oMf.rotation,
                                                              ground_position=oMf.translation)])
        out = FD(system, S.SystemState((jnp.asarray(qs[k]),), (jnp.asarray(v0),)),
                                 (jnp.asarray(taus[k]),))
        np.testing.assert_allclose(np.asarray(out.qdd[0]), ddq, atol=1e-9 * max(1.0, np.abs(ddq).max()), rtol=0)


# ----------------------------------------------------------------------------- passive forces and actuators
def controller(t, state, p):
    """A control law of (t, state) for the four actuators: u = u₀ + t·s + K q[hip, knee, ankle, slide]."""
    q = state.q[0]
    return p["u0"] + t * p["slope"] + p["K"] @ jnp.stack([q[7], q[8], q[9], q[18]])


def controller_np(t, qpos, p):
    """The same law on MuJoCo's qpos (hinges and slides have the same coordinates there)."""
    return np.asarray(p["u0"]) + t * np.asarray(p["slope"]) + np.asarray(p["K"]) @ qpos[[7, 8, 9, 18]]


@functools.lru_cache(maxsize=None)
def robot_forces():
    """The file with its force elements: nothing in it is left unread, so no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        system, mapping, forces = load_mjcf(MODEL, return_mapping=True, return_forces=True)
    return system, mapping, forces


def control_params(rng):
    return dict(u0=jnp.asarray(rng.uniform(-3, 3, 4)), slope=jnp.asarray(rng.uniform(-1, 1, 4)),
                K=jnp.asarray(rng.uniform(-4, 4, (4, 4))))


def test_loader_makes_passive_and_actuator_elements():
    system, _, forces = robot_forces()
    passive, acts = forces
    assert isinstance(passive, S.JointSpringDamper) and isinstance(acts, S.Actuators)
    assert acts.actuator_names == ("hip_motor", "knee_servo", "slide_damper", "ankle_general")
    assert [j for _, j in acts.joints] == ["hip", "knee", "slide", "ankle"]


def test_passive_and_actuator_forces_equal_mujoco():
    """Our joint spring-dampers (stiffness about springref on hinges, a slide, a ball and the free joint;
    damping everywhere) and actuators (motor, position, velocity, general affine; gear, clamped ctrl, force
    range), with a control law u(t, state), = MuJoCo's qfrc_passive and qfrc_actuator at 10 random states,
    1e-10."""
    system, mapping, (passive, acts) = robot_forces()
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(8)
    p = control_params(rng)
    acts = S.with_control(acts, p, controller)
    states, ts = [], rng.uniform(0, 2, N_STATES)
    for _ in range(N_STATES):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-1.0, 1.0, model.nv), 1.0)
        states.append(mapping.state(qpos, rng.uniform(-2, 2, model.nv)))
    Q = jax.jit(jax.vmap(lambda st, t: (S.generalized_forces(system, (passive,), st, t)[0],
                                        S.generalized_forces(system, (acts,), st, t)[0])))(stack(states), ts)
    clamped_ctrl = clamped_force = 0
    for k, state in enumerate(states):
        qpos, qvel = mapping.to_mujoco(state)
        data.qpos[:], data.qvel[:] = qpos, qvel
        data.ctrl[:] = controller_np(ts[k], qpos, p)
        low, high = model.actuator_ctrlrange.T
        clamped_ctrl += np.sum((data.ctrl < low) | (data.ctrl > high))
        mujoco.mj_forward(model, data)
        clamped_force += np.sum(model.actuator_forcelimited & (np.abs(data.actuator_force) >= np.abs(
            model.actuator_forcerange).min(axis=1) - 1e-12))
        ours_p = mapping.to_mujoco(S.SystemState(state.q, (Q[0][k],)))[1]
        ours_a = mapping.to_mujoco(S.SystemState(state.q, (Q[1][k],)))[1]
        np.testing.assert_allclose(ours_p, data.qfrc_passive, atol=1e-10, rtol=0)
        np.testing.assert_allclose(ours_a, data.qfrc_actuator, atol=1e-10, rtol=0)
        assert np.abs(data.qfrc_passive).max() > 1 and np.abs(data.qfrc_actuator).max() > 1
    assert clamped_ctrl > 0 and clamped_force > 0          # the clamping was exercised


def test_constrained_acceleration_equals_kkt_from_mujoco_quantities():
    """q̈ of the loop with the file's passive forces and actuators (control u(t, state)) = the exact constrained
    acceleration from MuJoCo's own M (mj_fullM, armature included), qfrc_bias, qfrc_passive, qfrc_actuator and
    the connect's Jacobian J (efc_J) and J̇v (mj_jacDot at the two anchors): the KKT system
    [M Jᵀ; J 0] [q̈; −λ] = [qfrc_passive + qfrc_actuator − qfrc_bias; −J̇v], 1e-8 relative."""
    system, mapping, (passive, acts) = robot_forces()
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(9)
    p = control_params(rng)
    forces = (passive, S.with_control(acts, p, controller))
    states = consistent_states(model, mapping, rng, N_STATES)
    ts = rng.uniform(0, 2, N_STATES)
    acc = S.system_acceleration(system, forces)
    qdd = np.asarray(jax.jit(jax.vmap(lambda st, t: acc(st.q, st.v, t)[0]))(stack(states), ts))
    b1, b2 = int(model.eq_obj1id[0]), int(model.eq_obj2id[0])
    for k, state in enumerate(states):
        qpos, qvel = mapping.to_mujoco(state)
        data.qpos[:], data.qvel[:] = qpos, qvel
        data.ctrl[:] = controller_np(ts[k], qpos, p)
        mujoco.mj_forward(model, data)
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M)
        rows = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        J = data.efc_J.reshape(-1, model.nv)[rows]
        Jdot = []
        for b, anchor in ((b1, model.eq_data[0, 0:3]), (b2, model.eq_data[0, 3:6])):
            point = data.xpos[b] + data.xmat[b].reshape(3, 3) @ anchor
            jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jacDot(model, data, jacp, jacr, point, b)
            Jdot.append(jacp)
        Jdot_v = (Jdot[0] - Jdot[1]) @ qvel
        np.testing.assert_allclose(J, mujoco_point_jacobian(model, data, b1, b2), atol=1e-12)
        n_c = len(rows)
        K = np.block([[M, J.T], [J, np.zeros((n_c, n_c))]])
        rhs = np.concatenate([data.qfrc_passive + data.qfrc_actuator - data.qfrc_bias, -Jdot_v])
        qacc = np.linalg.solve(K, rhs)[:model.nv]
        exact = np.asarray(mapping.acceleration_from_mujoco(state, qacc)[0])
        np.testing.assert_allclose(qdd[k], exact, atol=1e-8 * np.abs(exact).max(), rtol=0)


def mujoco_point_jacobian(model, data, b1, b2):
    """J of the connect: d(anchor on body1 − anchor on body2)/dq (mj_jac), the rows MuJoCo's efc_J holds."""
    out = []
    for b, anchor in ((b1, model.eq_data[0, 0:3]), (b2, model.eq_data[0, 3:6])):
        point = data.xpos[b] + data.xmat[b].reshape(3, 3) @ anchor
        jacp = np.zeros((3, model.nv))
        mujoco.mj_jac(model, data, jacp, None, point, b)
        out.append(jacp)
    return out[0] - out[1]


# ----------------------------------------------------------------------------- gradients of a rollout
ARM = """
<mujoco model="arm">
  <compiler angle="radian"/>
  <default><geom contype="0" conaffinity="0" density="700"/></default>
  <worldbody>
    <body name="upper" euler="0.3 0 0">
      <joint name="shoulder" axis="0 1 0" ref="0.2" armature="0.1" damping="0.4" stiffness="2" springref="0.5"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body name="fore" pos="0.4 0 0">
        <joint name="elbow" axis="0 0.6 0.8" armature="0.05" damping="0.2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0.05" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder" gear="3" ctrlrange="-2 2"/>
    <position joint="elbow" kp="5" kv="0.5" gear="1.2"/>
  </actuator>
</mujoco>"""


def test_rollout_gradient_wrt_armature_damping_and_control_equals_central_differences():
    """d(final state of a 0.5 s RK4 rollout)/d(armature of both joints, their damping, both controls) by
    forward-mode autodiff == central differences (relative 1e-6), every column; one compiled program (vmap over
    parameters and tangents of jax.jvp)."""
    system, (passive, acts) = load_mjcf(ARM, return_forces=True)
    module = system.modules[0]
    q0 = jnp.array([0.7, -0.4])

    def final(x):
        arm, damping, ctrl = x[0:2], x[2:4], x[4:6]
        sy = S.System((module.with_params(armature=arm),), system.contacts, system.connectivity)
        forces = (S.JointSpringDamper(passive.stiffness, damping, passive.springref, passive.name, passive.module),
                  S.with_control(acts, ctrl))
        zero = 0.0 * x[0]
        traj = S.simulate(sy, S.SystemState((q0 + zero,), (jnp.zeros(2) + zero,)), 1e-2, 50, forces=forces,
                          checks=S.Checks(enabled=False), output=S.Output(decimation=50))
        return jnp.concatenate([traj.q[0][-1], traj.v[0][-1]])

    x0 = jnp.concatenate([module.params.armature, passive.damping, jnp.array([0.8, 0.3])])
    assert_jvp_equals_central_differences(final, x0)


def test_monte_carlo_over_a_controller_of_the_file_actuators():
    """The actuators of a file driven by a controller u(t, state) whose gains and target are sampled: the
    Monte Carlo runner's per-scenario outputs are those of a plain call of the same task, and the controller
    acts (the final angles follow the sampled targets)."""
    from mrds_jax.montecarlo import Uniform, run_monte_carlo, sample
    system, (passive, acts) = load_mjcf(ARM, return_forces=True)

    def pd(t, state, p):
        return p["kp"] * (p["target"] - state.q[0]) - 0.5 * state.v[0]

    def task(s):
        forces = (passive, S.with_control(acts, s, pd))
        traj = S.simulate(system, S.SystemState((jnp.array([0.2, 0.0]),), (jnp.zeros(2),)), 1e-2, 200, forces=forces,
                          checks=S.Checks(enabled=False), output=S.Output(decimation=200))
        return {"shoulder": traj.q[0][-1, 0], "elbow": traj.q[0][-1, 1]}

    spec = {"kp": Uniform(jnp.array([4.0, 0.0]), jnp.array([6.0, 0.0])),
            "target": Uniform(jnp.array([-0.3, -0.1]), jnp.array([0.3, 0.1]))}
    r = run_monte_carlo(task, spec, 8, seed=2, chunk_size=4, progress=False)
    key = jax.random.fold_in(jax.random.PRNGKey(2), 5)
    direct = task(sample(spec, key))
    np.testing.assert_allclose(r.metrics["shoulder"][5], direct["shoulder"], rtol=1e-12)
    targets = np.array([float(sample(spec, jax.random.fold_in(jax.random.PRNGKey(2), i))["target"][0])
                        for i in range(8)])
    assert np.corrcoef(targets, r.metrics["shoulder"])[0, 1] > 0.9


# ----------------------------------------------------------------------------- Lilly & Orin's path
def test_lilly_path_with_armature_equals_pinocchio():
    """Two 6-R arms with armature (random, up to the links' own inertia) rigidly grasping a box, Lilly & Orin's
    fast path (armature in each module's H through module_terms and reference_terms): q̈ = Pinocchio's
    constraintDynamics on the export with model.armature, 1e-8, at 3 consistent states."""
    from mrds_jax.system.lilly import lilly_forward_dynamics
    from test_system_vs_pinocchio import grasp_systems
    systems, states, pin_cases = grasp_systems(3, armature=lambda rng: rng.uniform(0.05, 0.5, 6))
    assert S.dynamics_path(systems[0]) == "lilly"
    fd = jax.jit(jax.vmap(lambda sy, q, v, tau: lilly_forward_dynamics(sy, S.SystemState(q, v), tau)))
    out = fd(stack(systems), *(stack([s[i] for s in states]) for i in range(3)))
    for k, (merged, cms, qp, vp, taup) in enumerate(pin_cases):
        assert np.asarray(merged.model.armature)[:12].min() > 0          # both arms' joints (the box's free joint: 0)
        ddq, _, _ = merged.constraint_dynamics(qp, vp, taup)
        ours = merged.v([np.asarray(x[k]) for x in out.qdd])
        np.testing.assert_allclose(ours, ddq, atol=1e-8 * max(1.0, np.abs(ddq).max()), rtol=0)


# ----------------------------------------------------------------------------- joint limits
def test_joint_limits_are_kept_from_mjcf_and_urdf():
    """MJCF ranges of hinges and slides (MuJoCo's jnt_range, on qpos = our q) and URDF revolute limits
    (Pinocchio's own parser's lower/upperPositionLimit) are kept in Topology.joint_limits."""
    system, _, model = robot()
    t = system.modules[0].topology
    for j, name in enumerate(t.joint_names):
        mj_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) if "+" not in name else -1
        expected = tuple(model.jnt_range[mj_id]) if mj_id >= 0 and model.jnt_limited[mj_id] else None
        assert t.joint_limits[j] == expected, name
    assert sum(lim is not None for lim in t.joint_limits) == 2
    module = load_urdf(URDFS["ur5"])
    pmodel = pin.buildModelFromUrdf(str(URDFS["ur5"]))
    np.testing.assert_array_equal([lim[0] for lim in module.topology.joint_limits], pmodel.lowerPositionLimit)
    np.testing.assert_array_equal([lim[1] for lim in module.topology.joint_limits], pmodel.upperPositionLimit)
    # and they go out again: to_pinocchio's position limits, export.mjcf's ranges as MuJoCo compiles them
    twin = to_pinocchio(module)
    np.testing.assert_array_equal(twin.model.lowerPositionLimit, pmodel.lowerPositionLimit)
    np.testing.assert_array_equal(twin.model.upperPositionLimit, pmodel.upperPositionLimit)
    exported = mujoco.MjModel.from_xml_string(to_mjcf({"m": system.modules[0]}))
    for j, lim in enumerate(t.joint_limits):
        jid = mujoco.mj_name2id(exported, mujoco.mjtObj.mjOBJ_JOINT, f"m/{t.joint_names[j]}")
        assert (tuple(exported.jnt_range[jid]) if exported.jnt_limited[jid] else None) == lim


def test_simulate_reports_where_a_trajectory_leaves_a_joint_limit():
    """A swinging arm whose elbow has a narrow range, limits not enforced (unilateral=False, the acceleration-level
    path): simulate warns naming the elbow and the first stored time outside; trajectory_diagnostics lists the same
    exit; the shoulder, within its range, is not named. (Enforced by default: test_contact_step.py.)"""
    xml = ARM.replace('armature="0.05" damping="0.2"', 'armature="0.05" damping="0.2" range="-0.05 0.05"').replace(
        'springref="0.5"', 'springref="0.5" range="-3 3"')
    system, forces = load_mjcf(xml, return_forces=True)
    assert system.modules[0].topology.joint_limits == ((-3.0, 3.0), (-0.05, 0.05))
    state = S.SystemState((jnp.array([0.7, 0.0]),), (jnp.array([0.0, 2.0]),))
    with pytest.warns(S.JointLimitWarning, match=r"arm/elbow|upper/elbow") as record:
        traj = S.simulate(system, state, 1e-2, 100, forces=forces, contact=S.ContactStep(unilateral=False))
    elbow = np.asarray(traj.q[0])[:, 1]
    first = int(np.flatnonzero((elbow < -0.05) | (elbow > 0.05))[0])
    assert first > 0
    assert f"t = {float(traj.t[first]):g} s" in str(record[0].message) and "shoulder" not in str(record[0].message)
    exits = S.trajectory_diagnostics(system, traj, forces).limit_exits
    assert [(e.joint, e.t) for e in exits] == [("elbow", float(traj.t[first]))]


def test_work_energy_balance_with_armature_joint_springs_dampers_and_actuators():
    """Along a RK4 motion of the arm (armature, a joint spring about springref, joint dampers, a motor and a
    position servo driven by u(t)), E(t) − E(0) = ∫ (applied − dissipated power) dt: the kinetic energy holds
    the rotors (½ armature v²), the springs' energy ½ k (q − q_spring)², the dampers' power d v², the actuators'
    power vᵀQ; to 1e-7 of the energy exchanged."""
    system, (passive, acts) = load_mjcf(ARM, return_forces=True)
    forces = (passive, S.with_control(acts, jnp.array([1.5, 0.3]), lambda t, state, p: p * jnp.cos(3.0 * t)))
    state = S.SystemState((jnp.array([0.7, -0.4]),), (jnp.array([1.0, -2.0]),))
    traj = S.simulate(system, state, 1e-3, 1000, forces=forces)      # every step stored: Simpson O(dt⁴)
    d = S.trajectory_diagnostics(system, traj, forces)
    exchanged = np.abs(d.work_done).max()
    assert exchanged > 0.1 and np.abs(np.asarray(d.dissipated_power)).max() > 0.1
    assert np.abs(d.energy_balance).max() < 1e-7 * exchanged


def test_check_lists_the_files_joint_limits_as_mujoco_reads_them(tmp_path):
    """``mrds-jax check`` (``check_built``) lists every limited joint with MuJoCo's ``jnt_range`` and says which
    are outside at the initial state (the limits are kept, not enforced)."""
    from mrds_jax.sysfile import load_system_file
    from mrds_jax.sysfile.run import check_built, format_check
    toml = tmp_path / "robot.toml"
    toml.write_text(f'name = "robot"\nmjcf = "{MODEL}"\n\n[simulation]\ndt = "1 ms"\nduration = "0.01 s"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the file's damping and actuators: not read by a system file
        built = load_system_file(toml)
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    limited = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j): tuple(model.jnt_range[j])
               for j in range(model.njnt) if model.jnt_limited[j]}
    assert len(limited) >= 2
    report = check_built(built)["joint_limits"]
    assert {n.split(".", 1)[1]: (r["lower"], r["upper"]) for n, r in report.items()} == limited
    for name, r in report.items():
        assert r["inside"] == (r["lower"] <= r["q"] <= r["upper"])
    # a joint moved outside its range is named at the initial state
    (name, r), = list(report.items())[:1]
    k = built.system.module_names.index(name.split(".")[0])
    joint = name.split(".", 1)[1]
    topology = built.system.modules[k].topology
    i = topology.q_slices[topology.joint_names.index(joint)].start
    q = list(built.state.q)
    q[k] = jnp.asarray(q[k]).at[i].set(r["upper"] + 0.25)
    moved = dataclasses.replace(built, state=S.SystemState(tuple(q), built.state.v))
    text = format_check(check_built(moved))
    assert f"{name} q {r['upper'] + 0.25:.6g} outside [{r['lower']:g}, {r['upper']:g}]" in text, text
