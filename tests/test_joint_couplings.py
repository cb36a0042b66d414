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
    with pytest.raises(S.SystemError, match="joint couplings"):
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
    traj = jax.jit(lambda st: S.simulate(system, st, 1e-3, 400, decimation=20, forces=forces, stabilisation=None,
                                         check=False))(state)
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
    with pytest.raises(S.SystemError, match="coupling 'c'.*no module named 'arm'"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("c", ("arm", "f1"), ("base", "f2"))])
    with pytest.raises(CouplingError, match="coupling 'c'.*'rod_ball' is spherical"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("c", ("base", "rod_ball"),
                                                                           ("base", "f2"))])
    with pytest.raises(S.SystemError, match="'foot_rod' is used twice"):
        S.build_system(modules, system.contacts, couplings=[joint_coupling("foot_rod", ("base", "f1"),
                                                                           ("base", "f2"))])


def test_exports_name_the_couplings_they_cannot_carry():
    """Pinocchio has no joint-coupling constraint and export.mjcf does not write them: refused by name (or, for
    to_pinocchio(contacts="skip"), listed as skipped), never dropped silently."""
    from mrds_jax.export import to_pinocchio
    from mrds_jax.export.mjcf import to_mjcf
    from mrds_jax.export.pinocchio import PinocchioExportError
    system, _, _, _ = robot()
    names = ("finger", "whisker_slide", "pendulum_knee")
    with pytest.raises(PinocchioExportError, match=r"joint couplings \['finger', 'whisker_slide', 'pendulum_knee'\]"):
        to_pinocchio(system)
    twin = to_pinocchio(system, contacts="skip")
    assert twin.skipped == names and twin.constraint_names == ("foot_rod",)
    with pytest.raises(ValueError, match="to_mjcf: the joint couplings"):
        to_mjcf(system)


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


def test_loader_names_a_spatial_tendon_and_warns_about_unused_tendons():
    with pytest.raises(ModelError, match="equality tendon 'e'.*'sp' is a spatial tendon"), pytest.warns(UserWarning):
        load_mjcf(SPATIAL.replace("EQ", '<tendon name="e" tendon1="sp" tendon2="fx"/>'))
    with pytest.warns(UserWarning, match=r"tendons \(sp, unused\) are ignored"):
        system = load_mjcf(SPATIAL.replace("EQ", '<tendon name="e" tendon1="fx" polycoef="0.2 0 0 0 0"/>'))
    assert [(c.name, c.joints, c.joints2) for c in system.couplings] == [("e", (("a", "h1"),), ())]


def test_a_system_file_keeps_the_couplings_of_its_mjcf(tmp_path):
    from mrds_jax.sysfile import load_system_file
    toml = tmp_path / "coupled.toml"
    toml.write_text(f'name = "coupled"\nmjcf = "{MODEL}"\n\n[simulation]\ndt = "1 ms"\nduration = "0.01 s"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the file's damping and actuators: not read by a system file
        built = load_system_file(toml)
    assert [c.name for c in built.system.couplings] == ["finger", "whisker_slide", "pendulum_knee"]
