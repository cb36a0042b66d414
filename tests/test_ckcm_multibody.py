"""The full MRDS multibody model of the CKCM end-effector (``mrds_jax.ckcm.multibody``), float64:

* its instantaneous closed-chain dynamics equal Pinocchio's ``constraintDynamics`` on the same mechanism
  (six U-P legs + spherical loop closures to a free payload) at 6 consistent states, for both leg mass
  models (our inverse dynamics' forces make Pinocchio reproduce the prescribed accelerations);
* gravity terms equal the paper's Lagrangian model (eq. 43, 53) at static poses with the paper's leg mass
  distribution, and differ with the physical (bench) legs by exactly the first-moment term of eq. 40;
* along the ellipse of eq. 55 the two models' actuator forces differ only by inertial/velocity terms that
  scale as 1/T²: they agree to 0.1 % of the force at the paper's slow speed (0.7 cm/s);
* the builder and the leg kinematics are differentiable in the design parameters (vs finite differences);
* the inverse-dynamics forces applied open loop in an RK4 simulation reproduce the ellipse to 1e-8;
  computed torque drives an initial pose error to zero as ë + 2ω ė + ω² e = 0 predicts;
* bad input: poses outside the workspace, inconsistent states, bad leg models.

Compile time dominates: one jitted probe (leg kinematics, inverse dynamics of both models) and one jitted
simulation (every controller) serve all tests.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from mrds_jax import ckcm
from mrds_jax import system as S
from mrds_jax.ckcm import kinematics as K
from mrds_jax.ckcm import lagrangian as L
from mrds_jax.ckcm import multibody as MB
from mrds_jax.ckcm import tracking
from mrds_jax.export import to_pinocchio

P = ckcm.nominal()
HOME = np.array([0, 0, 1.0, 0, 0, 0])
V_SLOW, V_FAST = 0.007, 0.17     # m/s, the paper's Tables 1 and 2


def blend_legs(params, paper):
    """bench legs (paper = 0) or paper legs (paper = 1), as one traced computation (one compile for both)."""
    return jax.tree.map(lambda a, b: jnp.where(paper > 0.5, b, a), MB.bench_legs(params), MB.paper_legs(params))


@functools.lru_cache(maxsize=None)
def probe():
    """One compiled function: the consistent state and accelerations of a payload motion (leg kinematics), the
    actuator-force split of the closed-chain inverse dynamics (multibody), and the Lagrangian model's split."""
    def run(params, paper, pose, rate, acc):
        state, qdd = MB.motion_from_pose(params, pose, rate, acc)
        split = MB.actuator_forces(params, pose, rate, acc, blend_legs(params, paper))
        return dict(state=state, qdd=qdd, split=split, lagrangian=L.actuator_forces(params, pose, rate, acc),
                    closure=MB.closure_errors(params, state))
    return jax.jit(run)


def call(pose, rate=None, acc=None, paper=False, params=P):
    z = jnp.zeros(6)
    return probe()(params, jnp.asarray(float(paper)), jnp.asarray(pose, float),
                   z if rate is None else jnp.asarray(rate, float), z if acc is None else jnp.asarray(acc, float))


def random_motion(rng):
    pose = HOME + rng.uniform(-1, 1, 6) * np.array([0.04, 0.04, 0.04, 0.12, 0.12, 0.12])
    return pose, rng.normal(size=6) * np.array([0.2, 0.2, 0.2, 0.5, 0.5, 0.5]), rng.normal(size=6)


# --- against Pinocchio ---------------------------------------------------------------------------------
@pytest.mark.parametrize("paper", [False, True], ids=["bench_legs", "paper_legs"])
def test_instantaneous_dynamics_equal_pinocchio_constraint_dynamics(paper):
    """At 6 consistent states (random payload pose, twist and acceleration; legs by leg kinematics), the six
    actuator forces of our closed-chain inverse dynamics, given to Pinocchio's ``constraintDynamics`` on the
    same mechanism, produce exactly our prescribed accelerations of all 24 coordinates.  τ_a ↦ q̈ is a
    bijection on the 6-DOF mechanism, so the two models' instantaneous dynamics are the same map.  (Our
    forward dynamics of this package-built system is checked against Pinocchio directly, at random joint
    forces, by ``test_system_vs_pinocchio.py::test_stewart_platform_ckcm``, and is the exact inverse of the
    inverse dynamics in ``test_open_loop_inverse_dynamics_forces_reproduce_the_ellipse``.)"""
    rng = np.random.default_rng(11 + paper)
    system = MB.build_ckcm_system(P, "paper" if paper else "bench")
    merged = to_pinocchio(system)          # six CONTACT_3D: joint1 = payload point A_i (P), joint2 = leg tip (E)
    assert merged.constraint_names == system.contact_names
    for _ in range(6):
        pose, rate, acc = random_motion(rng)
        r = call(pose, rate, acc, paper)
        assert np.max(r["closure"]) < 1e-14
        qp, vp = merged.q(r["state"].q), merged.v(r["state"].v)
        tau = tracking._taus(r["split"].total, jnp.float64)
        ddq, lam, J = merged.constraint_dynamics(qp, vp, merged.v(tau))
        assert np.abs(J @ vp).max() < 1e-12                     # the state from leg kinematics is consistent
        expected = merged.v(r["qdd"])
        np.testing.assert_allclose(ddq, expected, atol=1e-8 * max(1.0, np.abs(expected).max()), rtol=0)
        # the accelerations are really of the 6-DOF motion: zero constraint acceleration
        assert np.max(np.abs(lam)) > 10.0 and np.max(np.abs(r["split"].total)) > 10.0
        split = r["split"]
        np.testing.assert_allclose(split.inertial + split.velocity_product + split.gravity, split.total, atol=1e-9)


# --- against the paper's Lagrangian model ----------------------------------------------------------------
def static_poses():
    rng = np.random.default_rng(5)
    return [HOME] + [HOME + rng.uniform(-1, 1, 6) * np.array([0.05, 0.05, 0.05, 0.15, 0.15, 0.15]) for _ in range(5)]


def test_gravity_terms_equal_the_lagrangian_model_with_the_papers_leg_mass_distribution():
    for pose in static_poses():
        paper = call(pose, paper=True)
        np.testing.assert_allclose(paper["split"].gravity, paper["lagrangian"].gravity, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(paper["split"].total, paper["split"].gravity, atol=1e-10)   # at rest


def test_bench_legs_change_gravity_only_by_the_first_moment_of_eq_40():
    """The physical legs (moving rod centroid c_u below the tip) differ from eq. 40 (centroid at
    l_s/2 + (m1/2m) l) by the first moment (m1/2)(l − l_s − 2 c_u) per leg; the actuator gravity forces
    differ by exactly C⁻ᵀ ∂ΔP/∂Φ with ΔP = g Σ_i (m1/2)(l_i − l_s − 2 c_u) sin θ_i."""
    legs = MB.bench_legs(P)

    def delta_P(pose):
        l, th = K.inverse_kinematics(P, pose), K.leg_elevation(P, pose)
        return P.g * jnp.sum(P.m1 / 2 * (l - P.l_s - 2 * legs.c_upper) * jnp.sin(th))

    dtau = jax.jit(lambda pose: jnp.linalg.solve(K.jacobian(P, pose).T, jax.grad(delta_P)(pose)))
    worst = 0.0
    for pose in static_poses():
        bench, paper = call(pose), call(pose, paper=True)
        d = np.asarray(bench["split"].gravity - paper["split"].gravity)
        np.testing.assert_allclose(d, dtau(jnp.asarray(pose)), atol=1e-9)
        worst = max(worst, np.abs(d).max())
    assert worst > 5.0   # newtons: a real difference, not round-off (legs 2, 4, 6 are 1.28 m long)


def ellipse_samples(v_max, n=6):
    T = float(L.period_for_max_actuator_speed(P, v_max))
    path = MB.ellipse(P, T)
    return T, [path(t) for t in np.linspace(0.0, T, n, endpoint=False) + T / (2 * n)]


def test_slow_motion_agreement_and_where_the_models_differ():
    """Along the ellipse (eq. 55), F = G + (D Φ̈₁ + h₁)/T² for a path of fixed shape: the models share G
    (paper legs), so their difference shrinks as 1/T² ∝ V_max²; at 0.7 cm/s it is below 0.1 % of the force.
    At 17 cm/s the inertial forces differ by tens of percent (eq. 39 misses the moving part's axial kinetic
    energy, the legs' spread and azimuthal swing), while the velocity products stay small in both."""
    diffs, scales, inertial_gap = {}, {}, {}
    for v in (V_SLOW, V_FAST):
        T, samples = ellipse_samples(v)
        d, s, gi, gs = [], [], [], []
        for q, qd, qdd in samples:
            r = call(q, qd, qdd, paper=True)
            mb, lag = r["split"], r["lagrangian"]
            d.append(np.abs(mb.total - lag.total).max())
            s.append(np.abs(lag.total).max())
            gi.append(np.abs(mb.inertial - lag.inertial).max())
            gs.append(np.abs(lag.inertial).max())
            np.testing.assert_allclose(mb.gravity, lag.gravity, atol=1e-9)
        diffs[v], scales[v], inertial_gap[v] = np.array(d), max(s), max(gi) / max(gs)
    assert diffs[V_SLOW].max() < 1e-3 * scales[V_SLOW]
    np.testing.assert_allclose(diffs[V_SLOW], diffs[V_FAST] * (V_SLOW / V_FAST)**2, rtol=1e-6)
    assert 0.05 < inertial_gap[V_FAST] < 2.0


def test_builder_and_leg_kinematics_are_differentiable_in_the_design_parameters():
    """Forward-mode derivatives of the modules' parameters (leg frames, nominal lengths, masses, inertias,
    payload points) and of the consistent state of a payload motion with respect to θA,
    θB, m, m1, l_s, M equal central finite differences.  (Gradients through the closed-chain solve itself:
    ``test_system_vs_pinocchio.py``; of the CKCM's actuator forces: ``experiments/ckcm_reproduction.py``.)"""
    _, samples = ellipse_samples(V_FAST, n=3)
    q, qd, qdd = samples[1]

    def outputs(p):
        legs = MB.bench_legs(p)
        mods = [MB.leg_module(p, legs, i).params for i in range(6)] + [MB.payload_module(p).params]
        return mods, MB.state_from_pose(p, q, qd)

    f = jax.jit(lambda p, dp: jax.jvp(outputs, (p,), (dp,)))
    h = 1e-6
    for name in ("theta_A", "theta_B", "m", "m1", "l_s", "M"):
        _, tangent = f(P, zero_params().replace(**{name: 1.0}))
        plus = f(P.replace(**{name: getattr(P, name) + h}), zero_params())[0]
        minus = f(P.replace(**{name: getattr(P, name) - h}), zero_params())[0]
        fd = jax.tree.map(lambda a, b: (a - b) / (2 * h), plus, minus)
        for t, d in zip(jax.tree.leaves(tangent), jax.tree.leaves(fd)):
            np.testing.assert_allclose(t, d, rtol=1e-6, atol=1e-6)
        assert max(np.abs(x).max() for x in jax.tree.leaves(fd)) > 1e-3, name


def zero_params():
    return jax.tree.map(jnp.zeros_like, P)


@pytest.mark.slow        # full mode (MRDS_SLOW=1): compiles the tangent of the closed-chain inverse dynamics (a minute)
def test_actuator_force_derivatives_equal_finite_differences():
    """d τ / d(θA, θB, m, m1, l_s, M) through the builder, the leg kinematics and the closed-chain inverse
    dynamics (forward mode) against central differences, at a point of the fast ellipse."""
    _, samples = ellipse_samples(V_FAST, n=3)
    q, qd, qdd = samples[1]
    total = lambda p: MB.actuator_forces(p, q, qd, qdd, MB.bench_legs(p)).total  # noqa: E731
    f = jax.jit(lambda p, dp: jax.jvp(total, (p,), (dp,)))
    h = 1e-6
    for name in ("theta_A", "theta_B", "m", "m1", "l_s", "M"):
        _, tangent = f(P, zero_params().replace(**{name: 1.0}))
        fd = (f(P.replace(**{name: getattr(P, name) + h}), zero_params())[0]
              - f(P.replace(**{name: getattr(P, name) - h}), zero_params())[0]) / (2 * h)
        np.testing.assert_allclose(tangent, fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fd).max()))
        assert np.abs(fd).max() > 1e-3, name


# --- forward simulation -------------------------------------------------------------------------------------
N_STEPS, DECIMATION = 160, 16
E0 = np.array([0.01, -0.005, 0.004, 0.02, -0.01, 0.015])      # initial pose error of the computed-torque run
OMEGA = 20.0


@functools.lru_cache(maxsize=None)
def simulations():
    """One loop of the ellipse at V_max = 17 cm/s in RK4 (N_STEPS steps), two runs in one batched call (one
    compilation): the open-loop inverse-dynamics forces from the consistent state on the path, and computed
    torque from a state E0 off the path."""
    T = float(L.period_for_max_actuator_speed(P, V_FAST))
    path = MB.ellipse(P, T)
    q0, qd0, _ = path(0.0)
    starts = [MB.state_from_pose(P, q0, qd0), MB.consistent_state(P, np.asarray(q0) - E0, qd0)]
    controllers = [MB.open_loop(), MB.computed_torque(OMEGA)]
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)  # noqa: E731

    def run(state0, controller):
        return MB.simulate_tracking(P, path, state0, T / N_STEPS, N_STEPS, controller, MB.bench_legs(P), DECIMATION)
    r = jax.jit(jax.vmap(run))(stack(starts), stack(controllers))
    runs = [jax.tree.map(lambda x, k=k: np.asarray(x)[k], r) for k in range(2)]
    return T, [MB.check_simulation(x, T / N_STEPS) for x in runs]


def test_open_loop_inverse_dynamics_forces_reproduce_the_ellipse():
    """τ(t) of the closed-chain inverse dynamics along the path, applied without feedback from the consistent
    initial state, in RK4 over one full loop at V_max = 17 cm/s: the payload stays on the path to 1e-8."""
    T, (r, _) = simulations()
    np.testing.assert_allclose(r.t[-1], T)
    print(f"open-loop path error: {np.max(r.position_error):.2e} m, {np.max(r.orientation_error):.2e} rad")
    assert np.max(r.position_error) < 1e-8 and np.max(r.orientation_error) < 1e-8
    assert np.max(r.closure_error) < 1e-8
    # the path really is the ellipse of eq. 55, all the way round
    x, y = r.pose[:, 0], r.pose[:, 1]
    np.testing.assert_allclose((x / 0.05)**2 + (y / 0.025)**2, 1.0, atol=1e-6)
    assert np.ptp(x) > 0.09 and np.ptp(y) > 0.045


def test_computed_torque_removes_an_initial_error_as_the_linear_error_dynamics_predict():
    _, (_, r) = simulations()
    t = r.t
    expected = np.exp(-OMEGA * t) * (1 + OMEGA * t)        # ë + 2ω ė + ω² e = 0, e(0) = E0, ė(0) = 0
    np.testing.assert_allclose(r.position_error, np.linalg.norm(E0[:3]) * expected, rtol=1e-3, atol=3e-8)
    np.testing.assert_allclose(r.orientation_error, np.linalg.norm(E0[3:]) * expected, rtol=1e-3, atol=3e-8)
    assert r.position_error[-1] < 1e-6 and np.max(r.closure_error) < 1e-6


# --- bad input ---------------------------------------------------------------------------------------------------
def test_bad_input_raises_clear_errors():
    with pytest.raises(ckcm.WorkspaceError, match="leg .* beyond l_max"):
        MB.consistent_state(P, [0, 0, 1.6, 0, 0, 0])          # legs longer than their stroke
    with pytest.raises(ckcm.WorkspaceError, match="does not point up"):
        MB.consistent_state(P, [0, 0, -1.0, 0, 0, 0])
    with pytest.raises(ckcm.WorkspaceError, match="pose_rate"):
        MB.consistent_state(P, HOME, [0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ckcm.CKCMInputError, match="unknown leg model"):
        MB.build_ckcm_system(P, "steel")
    with pytest.raises(ckcm.CKCMInputError, match="m_upper"):
        MB.build_ckcm_system(P, MB.bench_legs(P.replace(m1=0.0)))
    with pytest.raises(ckcm.CKCMInputError, match="s_lower"):
        MB.build_ckcm_system(P, MB.LegInertia(**{**vars(MB.paper_legs(P)), "s_lower": jnp.asarray(0.0)}))
    state = MB.consistent_state(P, HOME)
    MB.check_ckcm_state(P, state)
    bad = S.SystemState(state.q[:2] + (state.q[2].at[2].add(0.01),) + state.q[3:], state.v)
    with pytest.raises(MB.CKCMStateError, match="leg 3"):
        MB.check_ckcm_state(P, bad)
    with pytest.raises(MB.CKCMStateError, match="7 modules"):
        MB.check_ckcm_state(P, S.SystemState(state.q[:6], state.v[:6]))
