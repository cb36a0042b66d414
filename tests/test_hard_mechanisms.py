"""Hard mechanisms (issue 12): redundant constraints solved right by default.

* The LAPACK-free PSD pseudo-inverse solve (``spatial.dense.psd_pinv_solve``): against NumPy's ``pinv`` on
  rank-deficient and full-rank matrices, its custom JVP against central differences of NumPy's ``pinv``,
  never NaN (zero matrix, zero right-hand side, inconsistent right-hand side).
* Its fast path's rank test: a PSD matrix whose near-null vector has a small last entry (the unpivoted
  elimination's last pivot 1e-8, above the cut, λ_min = 1e-13 below it) is solved as rank-deficient, = NumPy's pinv.
* The Bricard linkage (tests/hard_mechanisms.py; line-symmetric 6R, one redundant loop equation, Bᶜ singular
  on its branch): default-settings q̈ within 1e-10 of Pinocchio's ``constraintDynamics`` at 8 states; a 2 s
  (full mode: 10 s) RK4 rollout (dt = 0.5 ms) with DEFAULT settings within 1e-9 rad of Pinocchio's
  ``constraintDynamics`` integrated on θ₁ alone (coordinate partitioning, SciPy DOP853 at 1e-13), and the
  redundant direction dropped at every step (condition < 1e4; the last-pivot rank test had kept it at
  condition ~1e9 from t = 0.2 s and ended 3.6e-2 rad off).
* The Bennett linkage (tests/hard_mechanisms.py; Grübler −2 DOF, real mobility 1, Bᶜ singular everywhere):
  a 2 s RK4 rollout at dt = 1 ms with DEFAULT settings against its reduced-coordinate model (Bennett's
  closed-form closure, Pinocchio's RNEA/CRBA, SciPy DOP853 at 1e-13): joint angles within 1e-8 rad, relative
  energy drift < 1e-8. The 10 s run is experiments/hard_mechanisms.py.
* Constraint forces = the minimum-norm forces computed from Pinocchio's Jacobians (1e-8), on the manifold
  and 1e-7 off it (where an RK4 stage sits, and where the former proximal default was 6e-2 N off).
* Gradient of a default-settings closed-chain rollout (d final angle / d link mass) = central differences.
* Lilly & Orin's path with Baumgarte stabilisation = the general path with it, off the manifold.
* The parallelogram chain turning through its all-aligned singular configuration (1 s, two crossings),
  default settings: no NaN, within 1e-8 rad of its reduced model, one warning whose time windows contain
  exactly the reference's crossings and name the three loops; ``strict=True`` raises instead. A run that
  blows up names the step, the last finite condition number and the contacts.
* Dormand-Prince 5(4) on the Bennett linkage: tolerances 1e-6 and 1e-9 reached against the reduced model
  (accepted/rejected steps printed), a new end time does not recompile, forward-mode derivative = central
  differences.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from mrds_jax import system as S
from mrds_jax.integrate import SimulationError
from mrds_jax.spatial.dense import psd_pinv_solve
from hard_mechanisms import (bennett, bennett_pin, bennett_q, bricard, bricard_pin, bricard_q, parallelogram_chain,
                             parallelogram_pin, parallelogram_q, reduced_reference)

DT = 1e-3
pinv_solve = jax.jit(psd_pinv_solve, static_argnums=2)


# ----------------------------------------------------------------------------- the solve itself
def _np_pinv(B, cut=1e-9):
    return np.linalg.pinv(B, rcond=cut, hermitian=True)


@pytest.mark.parametrize("n,r", [(5, 2), (13, 9)])     # 13 > UNROLL_MAX: the lax.scan variant
def test_pinv_solve_equals_numpy_pinv_and_its_jvp_central_differences(n, r):
    """x = B⁺y (minimum-norm least squares) for B = AAᵀ of rank r, an inconsistent y included; the custom
    JVP along a rank-preserving direction (A + t dA) equals central differences of NumPy's pinv (1e-6)."""
    rng = np.random.default_rng(n + r)
    A, dA = rng.normal(size=(n, r)), rng.normal(size=(n, r))
    y, dy = rng.normal(size=n), rng.normal(size=n)
    x, rank, min_pivot, dropped = pinv_solve(jnp.asarray(A @ A.T), jnp.asarray(y), 1e-9)
    np.testing.assert_allclose(x, _np_pinv(A @ A.T) @ y, rtol=0, atol=1e-9 * np.abs(x).max())
    assert int(rank) == r and 0 < float(min_pivot) <= 1 and float(dropped) < 1e-12

    def f(t):
        At = A + t * dA
        return psd_pinv_solve(At @ At.T, y + t * dy, 1e-9)[0]

    _, jvp = jax.jit(lambda t: jax.jvp(f, (t,), (1.0,)))(0.0)
    h = 1e-5
    fd = [(_np_pinv((A + s * h * dA) @ (A + s * h * dA).T) @ (y + s * h * dy)) for s in (1, -1)]
    fd = (fd[0] - fd[1]) / (2 * h)
    np.testing.assert_allclose(jvp, fd, rtol=0, atol=1e-6 * np.abs(fd).max())
    g = jax.jit(jax.grad(lambda t: jnp.sum(f(t) ** 2)))(0.0)                  # reverse mode through the custom JVP
    np.testing.assert_allclose(g, 2 * np.dot(np.asarray(x), fd), rtol=1e-6)


def test_pinv_solve_never_nan():
    for B, y in ((np.zeros((4, 4)), np.ones(4)), (np.eye(3) * 1e-300, np.ones(3)), (np.ones((3, 3)), np.zeros(3)),
                 (np.diag([1.0, 1e-12, 0.0]), np.array([1.0, 1.0, 1.0]))):
        x, rank, mp, _ = pinv_solve(jnp.asarray(B), jnp.asarray(y), 1e-9)
        assert np.all(np.isfinite(x)) and np.isfinite(mp)
    x, rank, _, _ = pinv_solve(jnp.diag(jnp.array([2.0, 1e-12, 0.0])), jnp.array([1.0, 1.0, 1.0]), 1e-9)
    np.testing.assert_allclose(x, [0.5, 0.0, 0.0], atol=1e-15)          # the cut drops both tiny directions
    assert int(rank) == 1


def test_pinv_solve_fast_path_reveals_a_null_direction_hidden_from_the_last_pivot():
    """B = V diag(1, 0.5, 0.3, 0.2, 1e-13) Vᵀ whose null vector u has u₅ = 3e-3: the unpivoted elimination meets
    pivots all above the cut 1e-9 (the last ≈ λ_min/u₅² ≈ 1e-8), yet λ_min/λ_max = 1e-13 is below it. The
    solve must drop that direction (rank 4, = NumPy's pinv at rcond 1e-9), not divide by it."""
    rng = np.random.default_rng(7)
    u = np.array([1.0, -0.8, 0.6, 0.9, 3e-3])
    V = np.linalg.qr(np.column_stack([u, rng.normal(size=(5, 4))]))[0]
    B = V @ np.diag([1e-13, 1.0, 0.5, 0.3, 0.2]) @ V.T
    pivots = np.diag(np.linalg.cholesky(B / B.diagonal().max())) ** 2             # the unpivoted elimination's
    assert pivots.min() > 1e-9 and np.linalg.eigvalsh(B).min() / np.abs(B).max() < 1e-12
    y = rng.normal(size=5)
    x, rank, min_pivot, _ = pinv_solve(jnp.asarray(B), jnp.asarray(y), 1e-9)
    np.testing.assert_allclose(x, _np_pinv(B) @ y, rtol=0, atol=1e-9 * np.abs(_np_pinv(B) @ y).max())
    assert int(rank) == 4 and float(min_pivot) > 1e-9


# ----------------------------------------------------------------------------- Bricard linkage
BRICARD_TH0 = 3.7      # released from rest at θ₁ = 3.7 rad: swings between 3.2 and 3.7 rad about its low point


def test_bricard_accelerations_equal_pinocchio_constraint_dynamics():
    """8 states on the mobile branch (θ₁ from 3.25 to 4.05 rad, velocity along the branch): default-settings q̈
    = Pinocchio's ``constraintDynamics`` (its proximal solve, the closure as two point contacts) within 1e-10;
    Bᶜ has rank 4 of 5 there (the redundant loop equation)."""
    system, ref = bricard(), bricard_pin()
    rng = np.random.default_rng(4)
    qs = np.array([bricard_q(th) for th in np.linspace(3.25, 4.05, 8)])
    vs = np.array([ref.tangent(q) * rng.uniform(-3, 3) for q in qs])
    assert max(np.abs(ref.closure(q)).max() for q in qs) < 1e-14
    fd = jax.jit(jax.vmap(lambda q, v: S.forward_dynamics(system, S.SystemState((q,), (v,)))))
    out = fd(jnp.asarray(qs), jnp.asarray(vs))
    expected = np.array([ref.constraint_dynamics(q, v) for q, v in zip(qs, vs)])
    err = np.abs(np.asarray(out.qdd[0]) - expected).max()
    print(f"\nBricard q̈ vs Pinocchio constraintDynamics: {err:.2e} (max |q̈| {np.abs(expected).max():.1f})")
    assert err < 1e-10
    assert all(np.linalg.matrix_rank(B, tol=1e-10 * np.abs(B).max()) == 4 for B in np.asarray(out.Bc))


@pytest.mark.parametrize("T", [2.0, pytest.param(10.0, marks=pytest.mark.slow)], ids=["2s", "10s"])
def test_bricard_default_settings_follow_pinocchio(T):
    """RK4 at dt = 0.5 ms with DEFAULT settings from rest at θ₁ = 3.7 rad for 2 s (10 s in the full mode),
    against Pinocchio's ``constraintDynamics`` integrated on θ₁ alone (``BricardPinocchio.rollout``): joint angles
    within 1e-9 rad at every 0.1 s; the solve drops the redundant direction at every step and never keeps it as a
    tiny pivot (largest condition < 1e4). The plain solve's last-pivot rank test kept it from t = 0.2 s at
    condition ~1e9: 1.9e-3 rad off at 2 s, 3.6e-2 rad within 10 s."""
    system, ref = bricard(), bricard_pin()
    dt = 5e-4
    q0 = bricard_q(BRICARD_TH0)
    with pytest.warns(S.SingularConfigurationWarning, match="'joint6'"):        # redundant: said at t0
        traj = S.simulate(system, S.SystemState((jnp.asarray(q0),), (jnp.zeros(5),)), dt, int(round(T / dt)),
                          output=S.Output(decimation=int(round(0.1 / dt))))
    q_ref = ref.rollout(q0, 0.0, np.asarray(traj.t))
    err = np.abs(np.angle(np.exp(1j * (np.asarray(traj.q[0]) - q_ref)))).max()
    cond = np.asarray(traj.solve.condition)[1:]
    print(f"\nBricard {T:g} s, defaults: max joint-angle error {err:.2e} rad (θ₁ in [{q_ref[:, 0].min():.2f}, "
          f"{q_ref[:, 0].max():.2f}]), largest condition {cond.max():.3g}")
    assert np.ptp(q_ref[:, 0]) > 0.3                                            # it really moves
    assert err < 1e-9
    assert cond.max() < 1e4 and np.all(np.asarray(traj.solve.rank_deficiency)[1:] == 1)


# ----------------------------------------------------------------------------- Bennett linkage
TH0 = 2.0          # released from rest at θ₁ = 2 rad: swings between 0.71 and 2.0 rad (the folds are 0 and π)


def test_bennett_closed_form_closes_the_loop_in_pinocchio():
    """The reference's q(θ) is on the loop (checked with Pinocchio, not with our kinematics): the tip frame
    coincides with the ground frame of joint 4 and their z axes agree."""
    model, data = bennett_pin(), bennett_pin().createData()
    contact = bennett().contacts[0]
    R_g, p_g = np.asarray(contact.ground_R), np.asarray(contact.ground_p)
    fid = model.getFrameId("tip")
    for th in (0.3, 1.0, 2.0, 2.9):
        pin.framesForwardKinematics(model, data, np.asarray(bennett_q(th)))
        M = data.oMf[fid]
        assert np.abs(M.translation - p_g).max() < 1e-14
        assert np.abs(M.rotation[:, 2] - R_g[:, 2]).max() < 1e-14


@functools.lru_cache(maxsize=None)
def bennett_run(T=2.0):
    system = bennett()
    q0, dq0 = bennett_q(TH0), jax.jacfwd(bennett_q)(TH0)
    state = S.SystemState((q0,), (0.0 * dq0,))
    with pytest.warns(S.SingularConfigurationWarning, match="'joint4'") as record:   # redundant: said at t0
        traj = S.simulate(system, state, DT, int(round(T / DT)), output=S.Output(decimation=100))
    # ... and only there: the redundant directions' small residual (~1e-6 of ‖yᶜ‖) is not a singular event
    assert [str(w.message)[:40] for w in record] == ["singular or redundant constraints: the c"]
    return system, traj


def test_bennett_default_settings_follow_the_reduced_model():
    system, traj = bennett_run()
    t = np.asarray(traj.t)
    th, _, q_of, _ = reduced_reference(bennett_pin(), bennett_q, TH0, 0.0, t)
    q_ref = np.stack([q_of(x) for x in th])
    err = np.abs(np.angle(np.exp(1j * (np.asarray(traj.q[0]) - q_ref)))).max()
    d = S.trajectory_diagnostics(system, traj)
    print(f"\nBennett 2 s, defaults: max joint-angle error {err:.2e} rad, relative energy drift "
          f"{d.relative_energy_drift:.2e}, closure {d.constraint_drift:.2e}")
    assert np.ptp(th) > 1.0                                                   # it really moves
    assert err < 1e-8 and d.relative_energy_drift < 1e-8


def _min_norm_forces_pinocchio(q, v, cut=1e-9):
    """Minimum-norm constraint forces of the Bennett closure from Pinocchio alone: J = ψᶜᵀ [ᴱω; ᴱv] of the tip
    frame in the ground frame's axes (frame E), its drift γ = ψᶜᵀ ᴱa(q̈ = 0), and
    F = (J M⁻¹ Jᵀ)⁺ (−γ − J M⁻¹ (τ − nle)) with NumPy's pinv at a relative cut."""
    model, data = bennett_pin(), bennett_pin().createData()
    contact = bennett().contacts[0]
    R_g, psi_c = np.asarray(contact.ground_R), np.asarray(contact.psi_c)
    fid = model.getFrameId("tip")
    pin.computeJointJacobians(model, data, q)
    pin.forwardKinematics(model, data, q, v, np.zeros(3))
    pin.updateFramePlacements(model, data)
    J6 = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)          # [v; ω], world axes
    a6 = pin.getFrameClassicalAcceleration(model, data, fid, pin.LOCAL_WORLD_ALIGNED).vector
    rot = np.kron(np.eye(2), R_g.T)
    J = psi_c.T @ rot @ np.vstack([J6[3:], J6[:3]])
    gamma = psi_c.T @ rot @ np.concatenate([a6[3:], a6[:3]])
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    nle = pin.rnea(model, data, q, v, np.zeros(3))
    Minv = np.linalg.inv(M)
    B = J @ Minv @ J.T
    return np.linalg.pinv(B, rcond=cut, hermitian=True) @ (-gamma + J @ Minv @ nle)


def test_bennett_constraint_forces_are_the_minimum_norm_forces():
    """On the manifold and 1e-7 off it (an RK4 stage), default solve: Fᶜ = Pinocchio's minimum-norm forces
    (1e-8 relative to max |F|). (The former default, proximal with 4 iterations, is far off there:
    experiments/hard_mechanisms.py.)"""
    system = bennett()
    fd = jax.jit(lambda q, v: S.forward_dynamics(system, S.SystemState((q,), (v,))))
    rng = np.random.default_rng(3)
    worst = 0.0
    for th in (0.8, 1.4, 2.6):
        for off in (0.0, 1e-7):
            q = np.asarray(bennett_q(th)) + off * rng.normal(size=3)
            v = np.asarray(jax.jacfwd(bennett_q)(th)) * rng.uniform(-2, 2)
            ref = _min_norm_forces_pinocchio(q, v)
            F = np.asarray(fd(jnp.asarray(q), jnp.asarray(v)).F_c[0])
            worst = max(worst, np.abs(F - ref).max() / np.abs(ref).max())
    print(f"\nBennett constraint forces vs minimum-norm (relative): {worst:.2e}")
    assert worst < 1e-8


def test_bennett_rollout_gradient_equals_central_differences():
    """d(final θ₁ after 0.1 s)/d(mass of link 2) through the default settings (pinv solve with its custom
    JVP, Baumgarte, RK4), forward mode, = central differences (relative 1e-6; reverse mode through the solve
    is checked above)."""
    system = bennett()
    q0 = bennett_q(1.4)
    v0 = jax.jacfwd(bennett_q)(1.4) * 0.7

    def final(mass2):
        mod = system.modules[0]
        mod = mod.with_params(mass=mod.params.mass.at[1].set(mass2))
        sy = S.build_system({"bennett": mod}, list(system.contacts))
        traj = S.simulate(sy, S.SystemState((q0,), (v0,)), DT, 100, checks=S.Checks(enabled=False),
                          output=S.Output(decimation=100))
        return traj.q[0][-1, 0]

    value_and_tangent = jax.jit(lambda m: jax.jvp(final, (m,), (1.0,)))      # one compilation for all three
    m0, h = float(system.modules[0].params.mass[1]), 1e-4
    g = float(value_and_tangent(m0)[1])
    fd = (float(value_and_tangent(m0 + h)[0]) - float(value_and_tangent(m0 - h)[0])) / (2 * h)
    print(f"\nBennett d θ₁(0.1 s)/d m₂: jvp {g:.10e}, central difference {fd:.10e}")
    assert abs(fd) > 1e-4 and abs(g - fd) < 1e-6 * abs(fd)


# ----------------------------------------------------------------------------- Lilly path with Baumgarte
def test_lilly_path_with_baumgarte_equals_general_path_off_the_manifold():
    """The default stabilisation keeps simple closed chains on Lilly & Orin's fast path: its Baumgarte terms
    (α_k −= 2αΦ_v + β²Φ_p) equal the general path's (yᶜ) at a state off the manifold (1e-10)."""
    from mrds_jax.examples import multi_arm_grasp
    from mrds_jax.system.lilly import lilly_forward_dynamics
    system, state = multi_arm_grasp(m=2, n=3)          # two 3-R arms holding a free box by spherical contacts
    rng = np.random.default_rng(5)
    state = S.SystemState(tuple(q + 1e-3 * rng.normal(size=q.shape) * (i < 2) for i, q in enumerate(state.q)),
                          tuple(v + 1e-2 * rng.normal(size=v.shape) for v in state.v))
    stab = S.baumgarte(30.0, alpha=12.0)
    assert S.dynamics_path(system, stabilisation=stab) == "lilly"
    assert S.dynamics_path(system, stabilisation=S.pd_suppression(1.0, 1.0)) == "general"
    errors = S.constraint_errors(system, state)
    assert min(np.abs(np.asarray(e)).max() for e in errors.position) > 1e-4       # the terms do something
    lil = jax.jit(lambda s: lilly_forward_dynamics(system, s, baumgarte=(stab.baumgarte_alpha,
                                                                          stab.baumgarte_beta)))(state)
    gen = jax.jit(lambda s: S.forward_dynamics(system, s, stabilisation=stab))(state)
    for a, b in zip(lil.qdd, gen.qdd):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * max(1.0, np.abs(b).max()))


# ----------------------------------------------------------------------------- singular configurations
def _crossings(theta, t):
    """Times where θ passes 0 or π (mod 2π), linear interpolation between samples."""
    s = np.sin(theta)
    k = np.flatnonzero(np.sign(s[:-1]) != np.sign(s[1:]))
    return t[k] + (t[k + 1] - t[k]) * s[k] / (s[k] - s[k + 1])


@functools.lru_cache(maxsize=None)
def parallelogram_run():
    system = parallelogram_chain()
    th0, w0 = 0.3, 7.0
    state = S.SystemState((parallelogram_q(th0),), (jax.jacfwd(parallelogram_q)(th0) * w0,))
    with pytest.warns(S.SingularConfigurationWarning) as record:
        traj = S.simulate(system, state, DT, 1000, output=S.Output(decimation=10))
    t = np.asarray(traj.t)
    th, _, q_of, _ = reduced_reference(parallelogram_pin(), parallelogram_q, th0, w0, t)
    return system, state, traj, [str(r.message) for r in record], th, np.stack([q_of(x) for x in th])


def test_parallelogram_chain_through_singular_configurations_default_settings():
    system, _, traj, messages, th, q_ref = parallelogram_run()
    t = np.asarray(traj.t)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in traj.q + traj.v)
    err = np.abs(np.angle(np.exp(1j * (np.asarray(traj.q[0]) - q_ref)))).max()
    cross = _crossings(th, t)
    with pytest.warns(S.SingularConfigurationWarning):
        events = S.report_solve(system, traj)
    print(f"\nparallelogram chain 1 s, defaults: max joint-angle error {err:.2e} rad; crossings {np.round(cross, 4)}; "
          f"warned windows {[(a, b) for a, b, *_ in events]}; largest condition "
          f"{float(np.max(np.asarray(traj.solve.condition))):.3g} (median "
          f"{float(np.median(np.asarray(traj.solve.condition)[1:])):.3g})")
    assert err < 1e-8
    assert len(cross) == 2 and len(messages) == 1 and len(events) == len(cross)
    for (a, b, _, _, _, names), c in zip(events, cross):
        assert a <= c <= b and b - a <= 0.03                     # the window of the crossing, nothing else
        assert names == ["loop1", "loop2", "loop3"]
    assert "t in [" in messages[0] and "'loop2'" in messages[0] and "stabilisation" in messages[0]


def test_strict_setting_raises_and_blow_up_names_condition_and_contacts():
    system, state, traj, _, _, _ = parallelogram_run()
    with pytest.raises(S.SingularConfigurationError, match=r"t in \[0\.4"):
        S.report_solve(system, traj, strict=True)
    # RK4 at dt = 0.4 s (the same compiled program: dt is traced) diverges within a few steps
    with pytest.raises(SimulationError, match=r"NaN/inf at step \d+.*condition ≈ .*contacts spanning .*'loop"):
        S.simulate(system, state, 0.4, 1000, output=S.Output(decimation=10))


# ----------------------------------------------------------------------------- error-controlled integration
def test_dopri5_reaches_tolerance_without_recompiling_and_its_derivative():
    """Bennett linkage, 1 s, default stabilisation: rtol = atol = 1e-6 and 1e-9 give max joint-angle errors
    below 1e-6 and 1e-9 against the reduced model; a new end time or tolerance reuses the compiled program;
    d θ₁(0.3 s)/d m₂ by forward mode through the adaptive loop = central differences of the same solver."""
    from mrds_jax.system.simulate import _simulate_adaptive_core
    system = bennett()
    state = S.SystemState((bennett_q(TH0),), (jnp.zeros(3),))
    t = np.linspace(0.0, 1.0, 11)
    th, _, q_of, _ = reduced_reference(bennett_pin(), bennett_q, TH0, 0.0, t)
    q_ref = np.stack([q_of(x) for x in th])
    with pytest.warns(S.SingularConfigurationWarning):          # Bennett: redundant, said at t0
        runs = {tol: S.simulate(system, state, DT,
                                integration=S.Integration(integrator="dopri5", t_end=1.0, rtol=tol, atol=tol),
                                output=S.Output(n_out=10))
                for tol in (1e-6, 1e-9)}
    size = _simulate_adaptive_core._cache_size()
    for tol, tr in runs.items():
        err = np.abs(np.angle(np.exp(1j * (np.asarray(tr.q[0]) - q_ref)))).max()
        print(f"\ndopri5 tol {tol:g}: max joint-angle error {err:.2e} rad, {int(tr.accepted)} accepted and "
              f"{int(tr.rejected)} rejected steps")
        assert err < tol and bool(tr.reached_end)
    short = S.simulate(system, state, DT,
                       integration=S.Integration(integrator="dopri5", t_end=0.3, rtol=1e-8, atol=1e-8),
                       checks=S.Checks(enabled=False), output=S.Output(n_out=10))
    assert _simulate_adaptive_core._cache_size() == size and abs(float(short.t[-1]) - 0.3) < 1e-15

    def final(mass2):
        mod = system.modules[0]
        sy = S.build_system({"bennett": mod.with_params(mass=mod.params.mass.at[1].set(mass2))},
                            list(system.contacts))
        tr = S.simulate(sy, state, DT,
                        integration=S.Integration(integrator="dopri5", t_end=0.3, rtol=1e-10, atol=1e-10),
                        checks=S.Checks(enabled=False), output=S.Output(n_out=1))
        return tr.q[0][-1, 0]

    value_and_tangent = jax.jit(lambda m: jax.jvp(final, (m,), (1.0,)))
    m0, h = float(system.modules[0].params.mass[1]), 1e-4
    g = float(value_and_tangent(m0)[1])
    fd = (float(value_and_tangent(m0 + h)[0]) - float(value_and_tangent(m0 - h)[0])) / (2 * h)
    print(f"dopri5 d θ₁(0.3 s)/d m₂: jvp {g:.10e}, central difference {fd:.10e}")
    assert abs(fd) > 1e-4 and abs(g - fd) < 1e-6 * abs(fd)
