"""Joint couplings (issue 25, item 4) against MuJoCo, float64.

``data/mjcf_couplings.xml`` (written for these tests) couples joints as MuJoCo's ``<equality joint>`` (a quartic
polycoef between two finger joints; a quadratic one between a pendulum of a second tree and the knee, across
modules) and ``<equality tendon>`` on fixed tendons (a whisker's two hinges against a slide), next to a
``connect`` loop closed through a ball joint, with armature, damping, stiffness about springref and one actuator of
each kind. ``load_mjcf`` turns the couplings into joint-space rows of the general path's solve
(:mod:`mrds_jax.contacts.coupling`). Checked against what MuJoCo computes itself: the couplings' residuals and
Jacobian rows equal its ``efc_pos`` and ``efc_J``; at states that satisfy MuJoCo's equalities, q̈ equals the exact
constrained acceleration from MuJoCo's M (``mj_fullM``), ``qfrc_bias``, ``qfrc_passive``, ``qfrc_actuator`` and
the equality rows' ``efc_J`` with J̇v by a central difference of ``efc_J`` along the motion (the KKT system); a
rollout keeps the couplings closed; gradients through the couplings equal central differences; bad input is named.
"""
import functools
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.integrate import Trajectory
from mrds_jax.contacts.coupling import CouplingError, coupling_row, joint_coupling, make_coupling, polynomial
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.validation import ModelError
from gradient_check import assert_jvp_equals_central_differences
from mujoco_states import consistent_states, mujoco_equalities, mujoco_kkt_acceleration

MODEL = Path(__file__).parent / "data" / "mjcf_couplings.xml"
N_STATES = 10
CTRL = np.array([1.7, -0.3, 0.9, -2.6])      # hip motor and the general actuator beyond their ctrlrange: clamped


def stack(xs):
    return jax.tree.map(lambda *a: jnp.stack(a), *xs)


@functools.lru_cache(maxsize=None)
def robot():
    """(system, mapping, force elements with the constant control, MuJoCo model); the file loads without warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        system, mapping, forces = load_mjcf(MODEL, return_mapping=True, return_forces=True)
    assert isinstance(forces[-1], S.Actuators) and len(forces) == 3       # passive forces of both trees
    forces = forces[:-1] + (S.with_control(forces[-1], jnp.asarray(CTRL)),)
    return system, mapping, forces, mujoco.MjModel.from_xml_path(str(MODEL))


def to_mujoco_v(mapping, state, vs):
    """A per-module velocity-like tuple ``vs`` at ``state`` in MuJoCo's qvel layout."""
    return mapping.to_mujoco(S.SystemState(state.q, tuple(vs)))[1]


@functools.lru_cache(maxsize=None)
def case():
    system, mapping, forces, model = robot()
    rng = np.random.default_rng(25)
    states = consistent_states(model, mapping, rng, N_STATES)
    acc = S.system_acceleration(system, forces)
    rows = jax.jit(jax.vmap(lambda st: [coupling_row(c, d, st.q, st.v) for c, d in
                                        zip(system.couplings, system.connectivity.coupling_dofs)]))
    qdd = jax.jit(jax.vmap(lambda st: acc(st.q, st.v, 0.0)))(stack(states))
    return states, jax.tree.map(np.asarray, qdd), jax.tree.map(np.asarray, rows(stack(states)))


def test_loader_reads_joint_and_tendon_equalities_as_couplings():
    system, _, _, model = robot()
    assert [c.name for c in system.contacts] == ["foot_rod"]
    assert [(c.name, c.kind) for c in system.couplings] == [("finger", "joint"), ("whisker_slide", "tendon"),
                                                            ("pendulum_knee", "joint")]
    finger, tendon, cross = system.couplings
    assert finger.joints == (("base", "f2"),) and finger.joints2 == (("base", "f1"),)
    np.testing.assert_array_equal(finger.polycoef, model.eq_data[1, :5])
    assert tendon.joints == (("base", "w1"), ("base", "w2")) and tendon.joints2 == (("base", "s"),)
    np.testing.assert_array_equal(tendon.coef, [1.0, -0.6])
    np.testing.assert_array_equal(tendon.reference, model.tendon_length0)
    assert cross.joints == (("pendulum", "p"),) and cross.joints2 == (("base", "knee"),)
    assert S.dynamics_path(system) == "general"
    with pytest.raises(S.SystemDescriptionError, match="joint couplings"):
        S.dynamics_path(system, "lilly")


def test_coupling_residuals_and_rows_equal_mujoco_efc():
    """At random (inconsistent) states: g = MuJoCo's efc_pos and G (mapped to MuJoCo's qvel) = its efc_J rows of
    the three couplings (the connect's three rows come first), 1e-12."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    rng = np.random.default_rng(3)
    for _ in range(N_STATES):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-0.8, 0.8, model.nv), 1.0)
        state = mapping.state(qpos, rng.uniform(-1, 1, model.nv))
        pos, J, _ = mujoco_equalities(model, data, qpos, mapping.to_mujoco(state)[1])
        assert len(pos) == 3 + 3
        for i, (c, dofs) in enumerate(zip(system.couplings, system.connectivity.coupling_dofs)):
            row = coupling_row(c, dofs, state.q, state.v)
            G = [np.zeros(m.nv) for m in system.modules]
            for k, vi, w in row.entries:
                G[k][vi] += float(w)
            # a row acts on velocities: G v = (G T⁻¹)(T v); T is the identity on hinges and slides
            np.testing.assert_allclose(float(row.position), pos[3 + i], atol=1e-12, rtol=0)
            np.testing.assert_allclose(to_mujoco_v(mapping, state, G), J[3 + i], atol=1e-12, rtol=0)
        assert np.abs(pos[3:]).min() > 1e-3


def test_polynomial_derivatives_equal_central_differences():
    a = jnp.array([0.1, 0.8, -0.3, 0.2, 0.05])
    x, h = 0.37, 1e-5
    p, dp, ddp = polynomial(a, jnp.asarray(x))
    P = lambda y: float(polynomial(a, jnp.asarray(y))[0])
    np.testing.assert_allclose(float(p), np.polyval(a[::-1], x), rtol=1e-14)
    np.testing.assert_allclose(float(dp), (P(x + h) - P(x - h)) / (2 * h), rtol=1e-9)
    np.testing.assert_allclose(float(ddp), (P(x + h) - 2 * P(x) + P(x - h)) / h ** 2, rtol=1e-5)


def test_constrained_acceleration_equals_kkt_from_mujoco_quantities():
    """q̈ (general path, passive forces and clamped actuators of the file) = the solution of MuJoCo's KKT system
    [M Jᵀ; J 0] [q̈; −λ] = [qfrc_passive + qfrc_actuator − qfrc_bias; −J̇v] with J the efc_J rows of all four
    equalities (connect, two joint couplings, the tendon coupling), at 10 states satisfying them, 1e-8 relative."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    states, qdd, rows = case()
    worst = 0.0
    for k, state in enumerate(states):
        qpos, qvel = mapping.to_mujoco(state)
        qacc, pos, J = mujoco_kkt_acceleration(model, data, qpos, qvel, CTRL)
        assert np.abs(pos).max() < 1e-12 and np.abs(J @ qvel).max() < 1e-12
        np.testing.assert_allclose([r.position[k] for r in rows], 0, atol=1e-12)
        exact = mapping.acceleration_from_mujoco(state, qacc)
        scale = max(np.abs(np.concatenate(exact)).max(), 1.0)
        for ours, ex in zip(qdd, exact):
            worst = max(worst, np.abs(ours[k] - np.asarray(ex)).max() / scale)
    print(f"q̈ vs MuJoCo KKT: worst relative difference {worst:.1e} over {N_STATES} states")
    assert worst < 1e-8, worst


def coupling_positions(system, q):
    """g of every coupling at per-module positions ``q`` (velocity-free)."""
    zero = tuple(jnp.zeros(m.nv, x.dtype) for m, x in zip(system.modules, q))
    return jnp.stack([coupling_row(c, d, q, zero).position
                      for c, d in zip(system.couplings, system.connectivity.coupling_dofs)])


def test_rollout_keeps_the_couplings_closed():
    """0.4 s of RK4 at dt = 1 ms from a consistent moving state, no stabilisation: the couplings' residuals g stay
    below 1e-8 while the coupled joints move by hundredths to tenths (the rows are exact: only the integrator
    drifts)."""
    system, mapping, forces, model = robot()
    state = case()[0][0]
    traj = jax.jit(lambda st: S.simulate(system, st, 1e-3, 400, forces=forces,
                                         integration=S.Integration(stabilisation=None), checks=S.Checks(enabled=False),
                                         output=S.Output(decimation=20)))(state)
    g = np.asarray(jax.vmap(lambda *q: coupling_positions(system, q))(*traj.q))
    print(f"rollout: max |g| of the couplings {np.abs(g).max():.1e}")
    assert np.isfinite(g).all() and np.abs(g).max() < 1e-8, np.abs(g).max()
    dofs = [d for c in system.connectivity.coupling_dofs for side in c for d in side]
    qs = [np.asarray(traj.q[k])[:, qi] for k, qi, _ in dofs]
    assert min(np.abs(x[-1] - x[0]) for x in qs) > 0.02         # every coupled joint moved


def test_gradients_through_the_couplings_equal_central_differences():
    """dq̈/d(the finger coupling's linear and cubic coefficients, the tendon coefficient of w2, the hip motor's
    control) at a consistent moving state, by forward-mode autodiff == central differences, 1e-6 (one compiled
    program: vmap over parameters and tangents of jax.jvp)."""
    system, mapping, forces, model = robot()
    state = case()[0][1]
    finger, tendon, cross = system.couplings

    def final(x):
        fing = finger.__class__(finger.coef, finger.coef2, finger.reference,
                                finger.polycoef.at[1].set(x[0]).at[3].set(x[1]), finger.name, finger.joints,
                                finger.joints2, finger.kind)
        ten = tendon.__class__(tendon.coef.at[1].set(x[2]), tendon.coef2, tendon.reference, tendon.polycoef,
                               tendon.name, tendon.joints, tendon.joints2, tendon.kind)
        sy = S.System(system.modules, system.contacts, system.connectivity, (fing, ten, cross))
        acts = S.with_control(forces[-1], jnp.asarray(CTRL).at[0].set(x[3]))
        return jnp.concatenate(S.system_acceleration(sy, forces[:-1] + (acts,))(state.q, state.v, 0.0))

    x0 = jnp.array([float(finger.polycoef[1]), float(finger.polycoef[3]), float(tendon.coef[1]), 0.4])
    assert_jvp_equals_central_differences(final, x0)


# ----------------------------------------------------------------------------- projection, checks, diagnostics
def perturbed_states(model, mapping, rng, n, spread=0.3):
    """n states near qpos0 that violate MuJoCo's equalities (positions and velocities), as ours."""
    out = []
    for _ in range(n):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-spread, spread, model.nv), 1.0)
        out.append(mapping.state(qpos, rng.uniform(-1, 1, model.nv)))
    return out


def mujoco_residuals(model, data, mapping, state):
    """MuJoCo's efc_pos and efc_J qvel of its equality rows (connect's three, then the couplings) at our state."""
    qpos, qvel = mapping.to_mujoco(state)
    pos, J, _ = mujoco_equalities(model, data, qpos, qvel)
    return pos, J @ qvel


def test_make_consistent_closes_the_couplings_by_mujocos_residuals():
    """project_positions then project_velocities from 4 states violating every equality by 0.01-1: MuJoCo's own
    efc_pos and efc_J qvel of all six equality rows (the connect loop and the three couplings) are below 1e-10 at
    the result, and the reported residuals too."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    project = jax.jit(lambda st: S.make_consistent(system, st))
    for state in perturbed_states(model, mapping, np.random.default_rng(7), 4):
        before, _ = mujoco_residuals(model, data, mapping, state)
        assert np.abs(before[3:]).min() > 1e-3
        new, rp, rv = project(state)
        pos, vel = mujoco_residuals(model, data, mapping, new)
        print(f"make_consistent: max |efc_pos| {np.abs(before).max():.2g} -> {np.abs(pos).max():.1e}, "
              f"max |efc_J v| {np.abs(vel).max():.1e}")
        assert np.abs(pos).max() < 1e-10 and np.abs(vel).max() < 1e-10
        assert float(rp) < 1e-10 and float(rv) < 1e-10


def test_coupling_jacobian_equals_mujoco_efc_j():
    """coupling_jacobian's rows (flat over the modules' velocities) mapped to qvel = MuJoCo's efc_J rows of the
    couplings, and coupling_errors = (efc_pos, efc_J qvel), 1e-12, at 3 random states."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    sizes = np.cumsum([m.nv for m in system.modules])[:-1]
    for state in perturbed_states(model, mapping, np.random.default_rng(11), 3):
        qpos, qvel = mapping.to_mujoco(state)
        pos, J, _ = mujoco_equalities(model, data, qpos, qvel)
        G = np.asarray(S.coupling_jacobian(system, state))
        for row, ref in zip(G, J[3:]):
            np.testing.assert_allclose(to_mujoco_v(mapping, state, np.split(row, sizes)), ref, atol=1e-12, rtol=0)
        g, Gv = S.coupling_errors(system, state)
        np.testing.assert_allclose(g, pos[3:], atol=1e-12, rtol=0)
        np.testing.assert_allclose(Gv, J[3:] @ qvel, atol=1e-12, rtol=0)


def test_check_initial_state_names_an_open_coupling():
    """A consistent state with one finger joint moved by 0.05 rad: only the finger coupling is open (MuJoCo's
    efc_pos: 0.05 on its row, < 1e-12 elsewhere); check_initial_state refuses it naming that coupling and the size,
    and reports every coupling's error equal to |efc_pos|."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    state = case()[0][2]
    k, qi, _ = system.connectivity.coupling_dofs[0][0][0]             # the finger coupling's u joint (f2)
    q = list(state.q)
    q[k] = q[k].at[qi].add(0.05)
    bad = S.SystemState(tuple(q), state.v)
    pos, _ = mujoco_residuals(model, data, mapping, bad)
    assert abs(abs(pos[3]) - 0.05) < 1e-12 and np.abs(np.delete(pos, 3)).max() < 1e-12
    with pytest.raises(S.InconsistentStateError, match=r"joint coupling 'finger': position error 0\.05 \(m or rad\)"):
        S.check_initial_state(system, bad)
    with pytest.raises(S.InconsistentStateError, match="joint coupling 'finger'"):
        S.simulate(system, bad, 1e-3, 2, integration=S.Integration(stabilisation=None))
    report = S.check_initial_state(system, bad, raise_on_violation=False)
    for i, c in enumerate(system.couplings):
        np.testing.assert_allclose(report.position_error[c.name], abs(pos[3 + i]), atol=1e-12, rtol=0)
    assert np.isfinite(report.condition_number) and report.weak_contacts == ()


def test_a_redundant_coupling_is_named_by_the_conditioning_check():
    """The finger coupling twice (as 'finger' and 'finger_again'): the bordered matrix of the solve is singular
    (its last two rows equal), and check_initial_state warns naming both couplings."""
    system, _, _, _ = robot()
    twin = system.couplings[0].__class__(*[getattr(system.couplings[0], f) for f in
                                           ("coef", "coef2", "reference", "polycoef")], name="finger_again",
                                         joints=system.couplings[0].joints, joints2=system.couplings[0].joints2)
    sy = S.build_system(dict(zip(system.module_names, system.modules)), system.contacts,
                        couplings=system.couplings + (twin,))
    with pytest.warns(S.SingularConfigurationWarning, match="finger.*finger_again"):
        report = S.check_initial_state(sy, case()[0][0])
    assert report.condition_number > 1e12 and set(report.weak_contacts) == {"finger", "finger_again"}


def test_trajectory_diagnostics_carry_the_couplings_residuals():
    """trajectory_diagnostics over 3 inconsistent states: after the connect's 3 columns, one column per coupling,
    equal to MuJoCo's efc_pos and efc_J qvel there (1e-12); per_contact and constraint_drift include them."""
    system, mapping, _, model = robot()
    data = mujoco.MjData(model)
    states = perturbed_states(model, mapping, np.random.default_rng(13), 3)
    st = stack(states)
    traj = Trajectory(t=jnp.arange(3.0), q=st.q, v=st.v, first_nonfinite=jnp.asarray(-1))
    diag = S.trajectory_diagnostics(system, traj)
    assert diag.coupling_names == ("finger", "whisker_slide", "pendulum_knee")
    pe, ve = np.asarray(diag.position_error), np.asarray(diag.velocity_error)
    assert pe.shape == (3, 3 + 3) and ve.shape == (3, 6)
    refs = [mujoco_residuals(model, data, mapping, s) for s in states]
    np.testing.assert_allclose(pe[:, 3:], [p[3:] for p, _ in refs], atol=1e-12, rtol=0)
    np.testing.assert_allclose(ve[:, 3:], [v[3:] for _, v in refs], atol=1e-12, rtol=0)
    per = diag.per_contact()
    assert set(per) == {"foot_rod", "finger", "whisker_slide", "pendulum_knee"}
    np.testing.assert_allclose(per["whisker_slide"], max(abs(p[4]) for p, _ in refs), atol=1e-12)
    assert diag.constraint_drift >= max(np.abs(p[3:]).max() for p, _ in refs) - 1e-12


# ----------------------------------------------------------------------------- bad input
def test_bad_couplings_are_named_before_anything_compiles():
    system, _, _, _ = robot()
    with pytest.raises(CouplingError, match="'c'.*polycoef must be 1 to 5"):
        joint_coupling("c", ("base", "f1"), ("base", "f2"), polycoef=np.zeros(6))
    with pytest.raises(CouplingError, match="'c'.*no second joint"):
        joint_coupling("c", ("base", "f1"), polycoef=(0.0, 1.0))
    with pytest.raises(CouplingError, match="'c'.*one finite coefficient per joint"):
        make_coupling("c", (("base", "w1"), ("base", "w2")), (1.0,))
    modules = dict(zip(system.module_names, system.modules))
    with pytest.raises(CouplingError, match="coupling 'c'.*no joint 'nope'"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("c", ("base", "nope"), ("base", "f1"))])
    with pytest.raises(S.SystemDescriptionError, match="coupling 'c'.*no module named 'arm'"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("c", ("arm", "f1"), ("base", "f2"))])
    with pytest.raises(CouplingError, match="coupling 'c'.*'rod_ball' is spherical"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("c", ("base", "rod_ball"),
                                                                           ("base", "f2"))])
    with pytest.raises(S.SystemDescriptionError, match="'foot_rod' is used twice"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("foot_rod", ("base", "f1"),
                                                                           ("base", "f2"))])


def test_pinocchio_export_names_the_couplings_it_cannot_carry():
    """Pinocchio has no joint-coupling constraint: refused by name (or, for to_pinocchio(contacts="skip"), listed
    as skipped), never dropped silently."""
    from mrds_jax.export import to_pinocchio
    from mrds_jax.export.pinocchio import PinocchioExportError
    system, _, _, _ = robot()
    names = ("finger", "whisker_slide", "pendulum_knee")
    with pytest.raises(PinocchioExportError, match=r"joint couplings \['finger', 'whisker_slide', 'pendulum_knee'\]"):
        to_pinocchio(system)
    twin = to_pinocchio(system, contacts="skip")
    assert twin.skipped == names and twin.constraint_names == ("foot_rod",)


def with_joint_values(system, state, joint_name, values, rates):
    """``state`` with every coupled joint set to values[name], rates[name], name = joint_name(module, joint)."""
    q, v = [list(x) for x in state.q], [list(x) for x in state.v]
    for c, dofs in zip(system.couplings, system.connectivity.coupling_dofs):
        for (m, j), (k, qi, vi) in zip(c.joints + c.joints2, dofs[0] + dofs[1]):
            q[k][qi], v[k][vi] = values[joint_name(m, j)], rates[joint_name(m, j)]
    return S.SystemState(tuple(jnp.asarray(x) for x in q), tuple(jnp.asarray(x) for x in v))


def coupling_rows_by_joint(system, state, joint_name):
    """[(g, G v, {joint name: G entry})] of every coupling."""
    out = []
    for c, dofs in zip(system.couplings, system.connectivity.coupling_dofs):
        row = coupling_row(c, dofs, state.q, state.v)
        names = {(k, vi): joint_name(m, j) for (m, j), (k, _, vi) in zip(c.joints + c.joints2, dofs[0] + dofs[1])}
        G = {}
        for k, vi, w in row.entries:
            G[names[k, vi]] = G.get(names[k, vi], 0.0) + float(w)
        out.append((float(row.position), float(row.velocity), G))
    return out


def test_exported_couplings_equal_mujocos_equalities_and_survive_a_round_trip():
    """to_mjcf writes the couplings (two <equality joint>, one <equality tendon> on two written fixed tendons,
    polynomials re-expressed about qpos0 = 0). MuJoCo, loading the export, computes for each coupling row at 10 random
    joint values and rates: efc_pos = our g, efc_J = our G (by joint name), 1e-10. load_mjcf of the export gives
    the same couplings (names, kinds, joints, and the same g and G at those values, 1e-12)."""
    from mrds_jax.export.mjcf import polycoef_about_zero, to_mjcf
    system, _, _, _ = robot()
    xml = to_mjcf(system)
    assert xml.count("<fixed ") == 2 and '<tendon name="whisker_slide"' in xml
    exported = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(exported)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again, again_mapping = load_mjcf(xml, return_mapping=True)
    ours = lambda m, j: f"{m}/{j}"            # noqa: E731  (the exported joint of module m's joint j)
    theirs = lambda m, j: j                   # noqa: E731  (the reloaded system names joints as exported)
    assert [(c.name, c.kind, [j for _, j in c.joints], [j for _, j in c.joints2]) for c in again.couplings] == \
        [(c.name, c.kind, [ours(*x) for x in c.joints], [ours(*x) for x in c.joints2]) for c in system.couplings]
    for c, c2 in zip(system.couplings, again.couplings):
        np.testing.assert_allclose(c2.polycoef, polycoef_about_zero(c), rtol=0, atol=1e-15)
        np.testing.assert_array_equal(c2.reference, [0.0, 0.0])
    names = [exported.joint(j).name for j in range(exported.njnt)
             if exported.jnt_type[j] in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
    rng = np.random.default_rng(21)
    state, state2 = case()[0][0], again_mapping.state(exported.qpos0, np.zeros(exported.nv))
    for _ in range(N_STATES):
        values = dict(zip(names, rng.uniform(-1.2, 1.2, len(names))))
        rates = dict(zip(names, rng.uniform(-1, 1, len(names))))
        qpos, qvel = np.array(exported.qpos0), np.zeros(exported.nv)
        for n in names:
            qpos[exported.joint(n).qposadr[0]], qvel[exported.joint(n).dofadr[0]] = values[n], rates[n]
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(exported, data)
        rows = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)[3:]   # after the connect's 3
        efc_pos, efc_J = data.efc_pos[rows], data.efc_J.reshape(-1, exported.nv)[rows]
        mine = coupling_rows_by_joint(system, with_joint_values(system, state, ours, values, rates), ours)
        back = coupling_rows_by_joint(again, with_joint_values(again, state2, theirs, values, rates), theirs)
        for (g, Gv, G), (g2, Gv2, G2), pos, J in zip(mine, back, efc_pos, efc_J):
            np.testing.assert_allclose(g, pos, atol=1e-10, rtol=0)
            dense = np.zeros(exported.nv)
            for n, w in G.items():
                dense[exported.joint(n).dofadr[0]] += w
            np.testing.assert_allclose(dense, J, atol=1e-10, rtol=0)
            np.testing.assert_allclose([g2, Gv2], [g, Gv], atol=1e-12, rtol=0)
            assert G2.keys() == G.keys() and all(abs(G2[n] - G[n]) < 1e-12 for n in G)
        assert np.abs(efc_pos).min() > 1e-3


def test_export_writes_a_lock_and_a_scaled_joint_as_mujoco_reads_them():
    """A one-joint lock (u − u₀ = a₀) and a joint with coefficient 2 (written as fixed tendons) on the whisker
    joints: MuJoCo's efc_pos of the export equals our g at a random state, 1e-12."""
    from mrds_jax.contacts.coupling import make_coupling
    from mrds_jax.export.mjcf import to_mjcf
    system, _, _, _ = robot()
    couplings = (make_coupling("lock", (("base", "w1"),), (1.0,), polycoef=(0.3,), reference=(0.2, 0.0)),
                 make_coupling("scaled", (("base", "w2"),), (2.0,), (("base", "s"),), (1.0,), (0.1, -0.5, 0.7),
                               reference=(0.4, -0.3), kind="joint"))
    sy = S.build_system(dict(zip(system.module_names, system.modules)), (), couplings=couplings)
    xml = to_mjcf(sy)
    assert '<joint name="lock" joint1="base/w1" polycoef=' in xml and '<tendon name="scaled"' in xml
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(5)
    names = ("base/w1", "base/w2", "base/s")
    values = dict(zip(names, rng.uniform(-1, 1, 3)))
    for n, x in values.items():
        data.qpos[model.joint(n).qposadr[0]] = x
    mujoco.mj_forward(model, data)
    rows = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
    mine = coupling_rows_by_joint(sy, with_joint_values(sy, case()[0][0], lambda m, j: f"{m}/{j}", values,
                                                        dict.fromkeys(names, 0.0)), lambda m, j: f"{m}/{j}")
    np.testing.assert_allclose([g for g, _, _ in mine], data.efc_pos[rows], atol=1e-12, rtol=0)


SPATIAL = """
<mujoco>
  <worldbody>
    <body name="a"><joint name="h1" axis="0 1 0"/><geom size="0.1" contype="0" conaffinity="0"/><site name="s1"/>
      <body name="b" pos="0 0 -0.3"><joint name="h2" axis="0 1 0"/><geom size="0.1" contype="0" conaffinity="0"/>
        <site name="s2"/></body></body>
  </worldbody>
  <tendon>
    <spatial name="sp"><site site="s1"/><site site="s2"/></spatial>
    <fixed name="fx"><joint joint="h1" coef="1"/></fixed>
    <fixed name="unused"><joint joint="h2" coef="1"/></fixed>
  </tendon>
  <equality>EQ</equality>
</mujoco>"""


def test_loader_names_a_spatial_tendon_and_is_silent_about_tendons_without_effect():
    """A spatial tendon in an equality is an error naming it; tendons nothing uses, without stiffness, damping,
    friction, limits or armature, act on nothing in MuJoCo either, so no warning names them."""
    with pytest.raises(ModelError, match="equality tendon 'e'.*'sp' is a spatial tendon"):
        load_mjcf(SPATIAL.replace("EQ", '<tendon name="e" tendon1="sp" tendon2="fx"/>'))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        system = load_mjcf(SPATIAL.replace("EQ", '<tendon name="e" tendon1="fx" polycoef="0.2 0 0 0 0"/>'))
    assert not [str(w.message) for w in record if "tendon" in str(w.message)]
    assert [(c.name, c.joints, c.joints2) for c in system.couplings] == [("e", (("a", "h1"),), ())]


def test_a_system_file_keeps_the_couplings_of_its_mjcf(tmp_path):
    from mrds_jax.sysfile import load_system_file
    toml = tmp_path / "coupled.toml"
    toml.write_text(f'name = "coupled"\nmjcf = "{MODEL}"\n\n[simulation]\ndt = "1 ms"\nduration = "0.01 s"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the file's damping and actuators: not read by a system file
        built = load_system_file(toml)
    assert [c.name for c in built.system.couplings] == ["finger", "whisker_slide", "pendulum_knee"]
    # mrds-jax check lists them with their residual at the initial state (MuJoCo's efc_pos there) and counts them
    from mrds_jax.sysfile.run import check_built, format_check
    _, mapping, _, model = robot()
    report = check_built(built)
    pos, _ = mujoco_residuals(model, mujoco.MjData(model), mapping, built.state)
    assert list(report["couplings"]) == ["finger", "whisker_slide", "pendulum_knee"]
    assert report["couplings"]["whisker_slide"] == dict(kind="tendon", joints=["base.w1", "base.w2"],
                                                        joints2=["base.s"])
    assert report["constraints"] == 3 + 3
    for i, name in enumerate(report["couplings"]):
        np.testing.assert_allclose(report["position_error"][name], abs(pos[3 + i]), atol=1e-12, rtol=0)
    assert "joint couplings: 3 (finger: joint base.f2 ~ base.f1 |g|" in format_check(report)
