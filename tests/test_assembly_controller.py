"""The compliant force controller of the CKCM end-effector (``mrds_jax.ckcm.assembly.compliance``), float64, in free space:

* its leg (wrench) Jacobian, written from cross products, is the paper's C = ∂l/∂Φ (Nguyen & Pooran eq. 26-27,
  printed formulas) in twist form: C = J_w [V; I 0] (V of eq. 32-34);
* two routes to the actuator forces agree: the law's J_wᵀ⁻¹ map of its wrench (plus the static gravity forces),
  applied to the multibody plant (``mrds_jax.system.forward_dynamics``) together with the opposite wrench as an
  external load at the compliance centre (the system layer's own point force), leaves every module at rest
  (q̈ = 0): the plant's own static force balance;
* the steady state in free space under a known external wrench W at the compliance centre — the configuration
  where the plant, driven by the law, stays at rest, found by Newton's method on the plant's accelerations — has
  the deflection K⁻¹ W (analytic; a full symmetric K with coupling terms), for three settings in one ``vmap``
  batch, each lane its own answer;
* a pure force at the compliance centre causes no rotation (Whitney's RCC), the same force at the payload's
  centroid does;
* bad settings: named errors before anything compiles.

One compiled function (the plant's accelerations under the law and an external wrench, vmapped) serves all tests.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mrds_jax import ckcm
from mrds_jax import system as S
from mrds_jax.ckcm.assembly import compliance as CC
from mrds_jax.ckcm import kinematics as K
from mrds_jax.ckcm import multibody as MB

P = ckcm.nominal()
POSE = np.array([0.012, -0.008, 1.03, 0.04, -0.03, 0.02])


def full_stiffness(seed=0, scale=1.0):
    """A symmetric positive definite 6 × 6 stiffness with coupling between rotation and translation: diag
    (300, 300, 200 N m/rad, 2e4, 2e4, 1e4 N/m) plus a symmetric coupling that keeps it positive definite."""
    rng = np.random.default_rng(seed)
    d = np.sqrt(np.array([300.0, 300.0, 200.0, 2e4, 2e4, 1e4]))
    C = rng.uniform(-0.3, 0.3, (6, 6))
    C = 0.5 * (C + C.T)
    np.fill_diagonal(C, 1.0)
    assert np.linalg.eigvalsh(C)[0] > 0.1
    return scale * d[:, None] * C * d[None, :]


def settings_with(K_, centre=0.08, tip=(0.0, 0.0, -0.25), force=0.0, speed=0.0):
    s = CC.rcc(1.0, 1.0, 1.0, damping=(5.0, 5.0, 5.0, 300.0, 300.0, 300.0), centre=centre, tip=tip,
               insertion_force=force, insertion_speed=speed)
    return CC.check_compliance(s._replace(stiffness=jnp.asarray(K_)), "test")


def reference_at(pose, settings, tilt=(0.0, 0.0, 0.0), shift=(0.0, 0.0, 0.0)):
    """A reference near ``pose``: its compliance centre moved by ``shift`` (m), its frame turned by ``tilt``
    (rotation vector, rad)."""
    R = np.asarray(K.rotation(jnp.asarray(pose)))
    Rt = Rotation.from_rotvec(tilt).as_matrix()
    c = pose[:3] + R @ np.asarray(CC.centre_in_payload(settings))
    return CC.ComplianceReference(jnp.asarray(c + np.asarray(shift)), jnp.asarray(Rt @ R), jnp.array([0.0, 0.0, -1.0]))


def stack(items):
    return jax.tree.map(lambda *x: jnp.stack(x), *items)


@functools.lru_cache(maxsize=None)
def plant():
    """One compiled, vmapped function: at the payload pose Φ at rest, the law's actuator forces τ and its wrench
    W_c, and the plant's accelerations (every module) under τ and an external wrench ``load`` ([n; f], world) at
    the point ``at`` of {A}; the deflection δ of the law at that state."""
    def one(settings, reference, pose, load, at):
        state = MB.state_from_pose(P, pose)
        system = MB.build_ckcm_system(P)
        tau = CC.compliance_forces(system, P, settings, reference, state, 0.0)
        a1 = ckcm.payload_points(P)[0]
        push = S.point_force("load", ("payload", "A1"), lambda t, s, w: w, load, offset=at - a1)
        Q = S.generalized_forces(system, (push,), state, 0.0)
        taus = tuple(Q[i].at[2].add(tau[i]) for i in range(6)) + (Q[6],)
        qdd = S.forward_dynamics(system, state, taus).qdd
        delta, _ = CC.deflection(settings, reference, state, 0.0)
        return dict(tau=tau, wrench=CC.compliance_wrench(settings, reference, state, 0.0),
                    payload=qdd[-1], worst=jnp.max(jnp.abs(jnp.concatenate(qdd))), delta=delta,
                    gravity=CC.gravity_forces(system, state))
    return jax.jit(jax.vmap(one))


LANES = 39          # every call padded to one batch size: one compilation serves every test


def run(settings, reference, pose, load, at):
    """``plant()`` on a batch of up to LANES lanes (padded by repeating the last lane, the padding cut off)."""
    n = len(pose)
    def pad(x):
        return jax.tree.map(lambda a: jnp.concatenate([jnp.asarray(a)] + [jnp.asarray(a)[-1:]] * (LANES - n)), x)
    out = plant()(*(pad(x) for x in (settings, reference, pose, load, at)))
    return jax.tree.map(lambda a: np.asarray(a)[:n], out)


def equilibrium(settings, reference, loads, at, pose0, iterations=12, h=1e-6):
    """Payload poses (B, 6) where the plant stays at rest under the law and the loads: Newton's method on the
    payload's acceleration, its Jacobian by central differences (all 13 evaluations of a lane in one batch)."""
    B = len(pose0)
    pose = np.array(pose0, float)
    E = np.concatenate([np.zeros((1, 6)), h * np.eye(6), -h * np.eye(6)])
    rep = lambda x: jax.tree.map(lambda a: jnp.repeat(jnp.asarray(a), 13, axis=0), x)  # noqa: E731
    for _ in range(iterations):
        poses = (pose[:, None, :] + E[None]).reshape(-1, 6)
        out = run(rep(settings), rep(reference), jnp.asarray(poses), rep(loads), rep(at))
        acc = np.asarray(out["payload"]).reshape(B, 13, 6)
        r = acc[:, 0]
        J = (acc[:, 1:7] - acc[:, 7:13]).transpose(0, 2, 1) / (2 * h)
        pose = pose - np.linalg.solve(J, r[..., None])[..., 0]
    return pose, run(settings, reference, jnp.asarray(pose), loads, at)


def test_wrench_jacobian_is_the_papers_C_in_twist_form():
    """C (Nguyen & Pooran eq. 26-27, printed) = J_w T with [ω; v] = T Φ̇, ω = V Φ̇ (eq. 32-34), at three poses."""
    for pose in (POSE, np.array([-0.05, 0.03, 1.1, 0.3, 0.1, -0.2]), np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])):
        pose = jnp.asarray(pose)
        T = jnp.concatenate([K.angular_velocity_matrix(pose), jnp.eye(3, 6)])
        Jw = CC.wrench_jacobian(P, K.rotation(pose), pose[:3])
        C = K.jacobian(P, pose)
        np.testing.assert_allclose(Jw @ T, C, rtol=0, atol=1e-12 * np.abs(C).max())


def test_actuator_forces_balance_the_commanded_wrench_in_the_multibody():
    """τ = J_wᵀ⁻¹ W_A + τ_g applied to the plant with −W_c at the compliance centre: every module at rest (q̈ = 0);
    without the load, or with the law's wrench but no gravity forces, it is not."""
    s = settings_with(full_stiffness(), force=25.0, speed=0.01)
    ref = reference_at(POSE, s, tilt=(0.02, -0.01, 0.015), shift=(0.004, -0.003, -0.006))
    at = CC.centre_in_payload(s)
    one = lambda x: jax.tree.map(lambda a: jnp.asarray(a)[None], x)  # noqa: E731
    probe = run(one(s), one(ref), jnp.asarray(POSE)[None], jnp.zeros((1, 6)), one(at))
    W = np.asarray(probe["wrench"])[0]
    assert np.abs(W[3:]).max() > 50 and np.abs(W[:3]).max() > 1        # a real wrench: tens of N, N m
    loaded = run(one(s), one(ref), jnp.asarray(POSE)[None], jnp.asarray(-W)[None], one(at))
    assert float(loaded["worst"][0]) < 1e-9, float(loaded["worst"][0])
    assert float(probe["worst"][0]) > 0.1                               # unloaded, the law's wrench accelerates it
    # J_wᵀ (τ − τ_g) is the law's wrench moved to the payload's origin (the J^T route, explicitly)
    pose = jnp.asarray(POSE)
    R = K.rotation(pose)
    Jw = np.asarray(CC.wrench_jacobian(P, R, pose[:3]))
    tau = np.asarray(probe["tau"])[0] - np.asarray(probe["gravity"])[0]
    r = np.asarray(R) @ np.asarray(at)
    np.testing.assert_allclose(Jw.T @ tau, np.concatenate([W[:3] + np.cross(r, W[3:]), W[3:]]), rtol=1e-10,
                               atol=1e-9)


def test_steady_state_deflection_is_K_inverse_wrench_for_a_batch_of_settings():
    """Three settings (full coupled K, scaled, another compliance centre) and three external wrenches at the
    compliance centre, one vmapped Newton solve: each equilibrium's deflection δ = K⁻¹ Rᵣ⁶ᵀ W to 1e-9 relative."""
    cases = [settings_with(full_stiffness(0)), settings_with(full_stiffness(1, 2.0), centre=0.0),
             settings_with(full_stiffness(2, 0.5), centre=0.3, tip=(0.01, 0.0, -0.2))]
    loads = np.array([[1.5, -2.0, 0.8, 40.0, -25.0, 60.0], [0.0, 3.0, 0.0, -30.0, 10.0, 0.0],
                      [-1.0, 0.0, 2.0, 0.0, 35.0, -45.0]])
    refs = [reference_at(POSE, s) for s in cases]
    pose, out = equilibrium(stack(cases), stack(refs), jnp.asarray(loads),
                            stack([CC.centre_in_payload(s) for s in cases]), np.repeat(POSE[None], 3, axis=0))
    assert np.abs(out["worst"]).max() < 1e-10
    for k, (s, ref) in enumerate(zip(cases, refs)):
        Rr = np.asarray(ref.rotation)
        W_ref = np.concatenate([Rr.T @ loads[k, :3], Rr.T @ loads[k, 3:]])
        expected = np.linalg.solve(np.asarray(s.stiffness), W_ref)
        assert np.abs(expected[:3]).max() > 1e-4 and np.abs(expected[3:]).max() > 1e-4   # deflections of mm and mrad
        np.testing.assert_allclose(out["delta"][k], expected, rtol=1e-9, atol=1e-12)


def test_a_force_at_the_compliance_centre_causes_no_rotation():
    """Whitney's RCC: with K block-diagonal (rcc), a pure force at the compliance centre deflects it by
    K_t⁻¹ f without rotation; the same force at the payload's centroid, 0.3 m above it, rotates the payload."""
    s = CC.rcc(150.0, 1.5e4, 3e4, damping=(5.0,) * 3 + (300.0,) * 3, centre=0.05, tip=(0.0, 0.0, -0.25))
    ref = reference_at(POSE, s)
    f = np.array([0.0, 0.0, 0.0, 45.0, -30.0, 20.0])
    two = lambda x: jax.tree.map(lambda a: jnp.stack([jnp.asarray(a)] * 2), x)  # noqa: E731
    at = jnp.stack([CC.centre_in_payload(s), jnp.zeros(3)])
    pose, out = equilibrium(two(s), two(ref), jnp.asarray([f, f]), at, np.repeat(POSE[None], 2, axis=0))
    assert np.abs(out["worst"]).max() < 1e-10
    Rr = np.asarray(ref.rotation)
    np.testing.assert_allclose(out["delta"][0, :3], 0.0, atol=1e-12)
    np.testing.assert_allclose(out["delta"][0, 3:], (Rr.T @ f[3:]) / np.array([1.5e4, 1.5e4, 3e4]), rtol=1e-9)
    assert np.abs(out["delta"][1, :3]).max() > 0.05          # 0.3 m × 54 N / 150 N m/rad ≈ 0.1 rad


@pytest.mark.parametrize("change, error, words", [
    (dict(stiffness=np.diag([1.0, 1.0, 1.0, 1.0, 1.0, -1.0])), CC.StiffnessError, "positive definite"),
    (dict(stiffness=np.diag([1.0] * 6) + np.eye(6, k=1)), CC.StiffnessError, "symmetric"),
    (dict(stiffness=np.ones((3, 3))), CC.StiffnessError, "(6, 6)"),
    (dict(damping=np.diag([1.0, 1.0, 1.0, 1.0, -0.5, 1.0])), CC.DampingError, "negative"),
    (dict(centre=np.nan), CC.ComplianceCentreError, "finite"),
    (dict(centre=np.inf), CC.ComplianceCentreError, "finite"),
    (dict(tip=np.array([0.0, np.nan, 0.0])), CC.ComplianceError, "tip"),
])
def test_bad_settings_are_named_before_anything_compiles(change, error, words):
    s = CC.rcc(100.0, 1e4, 1e4)._replace(**{k: jnp.asarray(v) for k, v in change.items()})
    with pytest.raises(error) as info:
        CC.compliance_actuators(P, s, reference_at(POSE, s))
    assert words in str(info.value)
    assert issubclass(error, ValueError)


def test_rcc_rejects_a_non_positive_stiffness_and_a_negative_damping():
    with pytest.raises(CC.StiffnessError):
        CC.rcc(100.0, 0.0, 1e4)
    with pytest.raises(CC.DampingError):
        CC.rcc(100.0, 1e4, 1e4, damping=-1.0)
    with pytest.raises(CC.ComplianceCentreError):
        CC.rcc(100.0, 1e4, 1e4, centre=float("nan"))
