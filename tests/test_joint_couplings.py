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
from mrds_jax.model.mjcf import load_mjcf
from mrds_jax.validation import ModelError
from mujoco_states import consistent_states

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


def mujoco_equalities(model, data, qpos, qvel, eps=1e-6):
    """(efc_pos, efc_J, J̇v) of MuJoCo's equality rows at (qpos, qvel); J̇v = (J(q + εv) − J(q − εv)) v / 2ε."""
    def rows(q):
        data.qpos[:], data.qvel[:] = q, qvel
        mujoco.mj_forward(model, data)
        r = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        return data.efc_pos[r].copy(), data.efc_J.reshape(-1, model.nv)[r].copy()
    Js = []
    for s in (1.0, -1.0):
        q = np.array(qpos)
        mujoco.mj_integratePos(model, q, qvel, s * eps)
        Js.append(rows(q)[1])
    pos, J = rows(qpos)
    return pos, J, (Js[0] - Js[1]) @ qvel / (2 * eps)


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
        pos, J, Jdot_v = mujoco_equalities(model, data, qpos, qvel)
        assert np.abs(pos).max() < 1e-12 and np.abs(J @ qvel).max() < 1e-12
        np.testing.assert_allclose([r.position[k] for r in rows], 0, atol=1e-12)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, CTRL
        mujoco.mj_forward(model, data)
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M)
        n = len(J)
        K = np.block([[M, J.T], [J, np.zeros((n, n))]])
        rhs = np.concatenate([data.qfrc_passive + data.qfrc_actuator - data.qfrc_bias, -Jdot_v])
        qacc = np.linalg.solve(K, rhs)[:model.nv]
        exact = mapping.acceleration_from_mujoco(state, qacc)
        scale = max(np.abs(np.concatenate(exact)).max(), 1.0)
        for ours, ex in zip(qdd, exact):
            worst = max(worst, np.abs(ours[k] - np.asarray(ex)).max() / scale)
    assert worst < 1e-8, worst
