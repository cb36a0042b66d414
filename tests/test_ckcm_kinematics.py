"""CKCM end-effector (Nguyen & Pooran 1989): parameters (eq. 2-4, 58), inverse kinematics (eq. 18-19),
Jacobians (eq. 26-36) against autodiff, forward kinematics (round trip, implicit gradients vs finite
differences, failure reporting) and bad-input errors."""
import functools

import numpy as np
import pytest
import jax
import jax.numpy as jnp

from mrds_jax import ckcm
from mrds_jax.ckcm import kinematics as K

P = ckcm.nominal()


def random_poses(n, seed=0, scale=(0.03, 0.03, 0.03, 0.1, 0.1, 0.1)):
    rng = np.random.default_rng(seed)
    return np.asarray(K.home_pose(P)) + rng.uniform(-1, 1, (n, 6)) * np.asarray(scale)


@functools.lru_cache(maxsize=None)
def compiled(name):
    v = lambda f: jax.jit(jax.vmap(f, (None, 0)))  # noqa: E731
    return {
        "ik": v(K.inverse_kinematics),
        "norm": v(lambda p, x: jnp.linalg.norm(K.leg_vectors(p, x), axis=-1)),
        "jac": v(lambda p, x: (K.jacobian(p, x), jax.jacfwd(K.inverse_kinematics, 1)(p, x),
                               K.elevation_jacobian(p, x), jax.jacfwd(K.leg_elevation, 1)(p, x))),
        # value and implicit gradient of a scalar of the FK pose, batched (the FD points go in one call)
        "fk_grad": jax.jit(jax.vmap(jax.value_and_grad(_fk_objective, argnums=(0, 1)))),
    }[name]


W = jnp.array([0.3, -1.2, 0.7, 2.0, -0.5, 1.1])


def _fk_objective(lengths, design):
    """A scalar of the forward-kinematics pose, as a function of leg lengths and design (θA, θB, r_A)."""
    p = P.replace(theta_A=design[0], theta_B=design[1], r_A=design[2])
    pose = K.newton_forward_kinematics(p, lengths).pose
    return W @ pose + 0.5 * jnp.sum(pose**2)


# --- parameters, eq. 2-4 and 58 --------------------------------------------------------------------------
def test_attachment_points_eq_2_to_4_and_nominal_values():
    lam, Lam = (np.degrees(np.asarray(a)) for a in ckcm.attachment_angles(P))
    np.testing.assert_allclose(lam, [0, 30, 120, 150, 240, 270], atol=1e-12)
    np.testing.assert_allclose(Lam, [0, 94, 120, 214, 240, 334], atol=1e-12)
    a, b = np.asarray(ckcm.payload_points(P)), np.asarray(ckcm.base_points(P))
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 0.7)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 0.8)
    assert np.all(a[:, 2] == 0) and np.all(b[:, 2] == 0)
    np.testing.assert_allclose(b[1, :2], 0.8 * np.array([np.cos(np.radians(94)), np.sin(np.radians(94))]))
    assert (float(P.m), float(P.m1), float(P.M)) == (20.0, 4.4, 30.0)
    np.testing.assert_allclose([float(P.d0), float(P.d1)], [0.25, 4.4 / 40])   # eq. 41-42 with l_s = 0.5
    np.testing.assert_allclose(P.stroke, [0.9, 1.4])


def test_nominal_leg_lengths_match_bench_model():
    # bench/README.md: at the home pose (z = 1.0, level) legs 1,3,5 are 1.005 m and 2,4,6 are 1.281 m long
    l = np.asarray(compiled("ik")(P, np.array([[0, 0, 1.0, 0, 0, 0]]))[0])
    np.testing.assert_allclose(l[::2], np.sqrt(0.1**2 + 1.0), rtol=1e-14)
    np.testing.assert_allclose(l[1::2], 1.281, atol=1e-3)


def test_params_are_a_pytree_for_vmap_and_grad():
    @jax.jit
    def sweep(thetas):
        leg2 = lambda t: K.inverse_kinematics(P.replace(theta_A=t), K.home_pose(P))[1]  # noqa: E731
        return jax.vmap(leg2)(thetas), jax.vmap(jax.grad(leg2))(thetas)
    thetas = np.radians([20.0, 30.0, 40.0])
    l2, dl2 = sweep(thetas)
    h = 1e-6
    np.testing.assert_allclose(dl2, (sweep(thetas + h)[0] - sweep(thetas - h)[0]) / (2 * h), rtol=1e-7)


# --- inverse kinematics and Jacobians --------------------------------------------------------------------
def test_euler_zyx_eq_19():
    al, be, ga = 0.3, -0.4, 1.1
    Rz = np.array([[np.cos(al), -np.sin(al), 0], [np.sin(al), np.cos(al), 0], [0, 0, 1]])
    Ry = np.array([[np.cos(be), 0, np.sin(be)], [0, 1, 0], [-np.sin(be), 0, np.cos(be)]])
    Rx = np.array([[1, 0, 0], [0, np.cos(ga), -np.sin(ga)], [0, np.sin(ga), np.cos(ga)]])
    np.testing.assert_allclose(K.euler_zyx(al, be, ga), Rz @ Ry @ Rx, atol=1e-15)


def test_closed_form_ik_eq_18_equals_leg_vector_norm_eq_11():
    x = random_poses(16)
    np.testing.assert_allclose(compiled("ik")(P, x), compiled("norm")(P, x), atol=1e-13)


def test_jacobians_eq_27_and_31_match_autodiff():
    C, C_ad, T, T_ad = compiled("jac")(P, random_poses(16, seed=1))
    np.testing.assert_allclose(C, C_ad, atol=1e-10)
    np.testing.assert_allclose(T, T_ad, atol=1e-10)
    # the printed eq. 31e has +c_i3 c_i5 instead of −c_i3 c_i5: visibly different from the derivative
    x = random_poses(1, seed=1)[0]
    q = np.asarray(x[:3] + np.asarray(ckcm.payload_points(P)) @ np.asarray(K.euler_zyx(*x[3:])).T
                   - np.asarray(ckcm.base_points(P)))
    qp = np.hypot(q[:, 0], q[:, 1])
    printed_t5 = T[0][:, 4] + 2 * C[0][:, 2] * C[0][:, 4] / qp
    assert np.max(np.abs(printed_t5 - T_ad[0][:, 4])) > 1e-3


def test_angular_velocity_eq_32_to_36():
    """ω = V Φ̇ (eq. 33-34) is the angular velocity of R(Φ(t)) in {B}; ω̇ = V Φ̈ + Φ̇ᵀQΦ̇ (eq. 35-36)."""
    rng = np.random.default_rng(2)
    x0, v0, a0 = (jnp.asarray(r) for r in rng.normal(size=(3, 6)) * 0.4)

    def path(t):
        return x0 + v0 * t + 0.5 * a0 * t**2

    def omega_true(t):  # vee(Ṙ Rᵀ)
        R, Rd = jax.jvp(lambda s: K.rotation(path(s)), (t,), (jnp.ones_like(t),))
        W_ = Rd @ R.T
        return jnp.array([W_[2, 1], W_[0, 2], W_[1, 0]])

    @jax.jit
    def check(t):
        x, v = jax.jvp(path, (t,), (jnp.ones_like(t),))
        omega_dot_true = jax.jvp(omega_true, (t,), (jnp.ones_like(t),))[1]
        V, Q = K.angular_velocity_matrix(x), K.angular_acceleration_matrices(x)
        return omega_true(t), V @ v, omega_dot_true, V @ a0 + jnp.einsum("kij,i,j->k", Q, v, v)

    w, wV, wd, wdQ = check(jnp.asarray(0.37))
    np.testing.assert_allclose(wV, w, atol=1e-13)
    np.testing.assert_allclose(wdQ, wd, atol=1e-12)


# --- forward kinematics ----------------------------------------------------------------------------------
def test_fk_ik_round_trip():
    x = random_poses(8, seed=3)
    lengths = np.asarray(compiled("ik")(P, x))
    for xi, li in zip(x, lengths):
        pose = ckcm.solve_forward_kinematics(P, li)  # checked front door: converged, regular, in workspace
        np.testing.assert_allclose(pose, xi, atol=1e-10)
    poses = np.array([ckcm.solve_forward_kinematics(P, li) for li in lengths])
    np.testing.assert_allclose(compiled("ik")(P, poses), lengths, atol=1e-10)


def test_fk_vmaps_and_its_implicit_gradient_matches_central_differences():
    lengths = np.asarray(compiled("ik")(P, random_poses(1, seed=4))[0])
    design = np.array([float(P.theta_A), float(P.theta_B), float(P.r_A)])
    h = 1e-6
    # row 0: the point; then ± h along each of the 6 lengths, then ± h along each of the 3 design values
    L, D = [lengths], [design]
    for k in range(6):
        for s in (1, -1):
            L.append(lengths + s * h * np.eye(6)[k])
            D.append(design)
    for k in range(3):
        for s in (1, -1):
            L.append(lengths)
            D.append(design + s * h * np.eye(3)[k])
    val, (g_l, g_d) = compiled("fk_grad")(jnp.asarray(np.array(L)), jnp.asarray(np.array(D)))
    val = np.asarray(val)
    fd = (val[1::2] - val[2::2]) / (2 * h)
    fd_l, fd_d = fd[:6], fd[6:]
    np.testing.assert_allclose(g_l[0], fd_l, rtol=1e-6, atol=1e-8 * np.max(np.abs(fd_l)))
    np.testing.assert_allclose(g_d[0], fd_d, rtol=1e-6, atol=1e-8 * np.max(np.abs(fd_d)))
    assert np.max(np.abs(fd_d)) > 1e-2  # the design gradient is not trivially zero


def test_fk_reports_non_convergence():
    lengths = compiled("ik")(P, random_poses(1, seed=5, scale=(0.05,) * 3 + (0.2,) * 3))[0]
    with pytest.raises(ckcm.ForwardKinematicsError,
                       match=r"did not converge: after 1 Newton iterations.*residual is .* m.*cond\(C\) = "):
        ckcm.solve_forward_kinematics(P, lengths, iterations=1)
    with pytest.raises(RuntimeError):  # also catchable as a runtime failure
        ckcm.solve_forward_kinematics(P, lengths, iterations=1)


def _singular_yaw(p):
    """Yaw α* in (115°, 125°) where det C = 0 at z = 1 (bisection on the sign of det C)."""
    det = jax.jit(lambda a: jnp.linalg.det(K.jacobian(p, jnp.array([0, 0, 1.0, 0, 0, 0]).at[3].set(a))))
    lo, hi = np.radians(115.0), np.radians(125.0)
    assert np.sign(det(lo)) != np.sign(det(hi))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sign(det(mid)) == np.sign(det(lo)) else (lo, mid)
    return 0.5 * (lo + hi)


def test_singular_configuration_is_reported_with_condition_number():
    p = P.replace(l_s=1.0, l_m=1.0)  # stroke [1, 2] m: reaches the yaw singularity at α ≈ 122°
    pose = np.array([0, 0, 1.0, _singular_yaw(p), 0, 0])
    lengths = compiled("ik")(p, pose[None])[0]
    with pytest.raises(ckcm.SingularConfigurationError, match=r"cond\(C\) = .* > max_condition"):
        ckcm.check_pose(p, pose)
    with pytest.raises(ckcm.SingularConfigurationError, match="singular"):
        ckcm.solve_forward_kinematics(p, lengths, guess=pose)
    ckcm.check_pose(p, pose + np.array([0, 0, 0, 0.3, 0, 0]))  # away from it: fine


# --- bad input -------------------------------------------------------------------------------------------
def test_pose_outside_workspace_raises():
    with pytest.raises(ckcm.WorkspaceError, match=r"leg 1 would be .* beyond l_max = 1.4 m.*"):
        ckcm.check_pose(P, [0, 0, 1.5, 0, 0, 0])
    with pytest.raises(ckcm.WorkspaceError, match=r"short of l_min = 0.9"):
        ckcm.inverse_kinematics_checked(P, [0, 0, 0.7, 0, 0, 0])
    lowered = P.replace(l_s=1.0, l_m=1.0)
    with pytest.raises(ckcm.WorkspaceError, match="does not point up"):
        ckcm.check_pose(lowered, [0, 0, -1.2, 0, 0, 0])
    with pytest.raises(ckcm.WorkspaceError, match="Euler singularity"):
        ckcm.check_pose(P, [0, 0, 1.0, 0, np.pi / 2, 0])
    with pytest.raises(ckcm.WorkspaceError, match="shape"):
        ckcm.check_pose(P, [0, 0, 1.0])
    home = np.array([0, 0, 1.0, 0, 0, 0])
    np.testing.assert_allclose(ckcm.inverse_kinematics_checked(P, home), compiled("ik")(P, home[None])[0])


def test_leg_length_outside_stroke_raises():
    ok = np.asarray(compiled("ik")(P, np.array([[0, 0, 1.0, 0, 0, 0]]))[0])
    with pytest.raises(ckcm.StrokeError, match=r"stroke \[0.9, 1.4\] m .*l_s = 0.5 m, l_m = 0.9 m: leg 2: 1.5 m"):
        ckcm.check_leg_lengths(P, ok + np.array([0, 1.5 - ok[1], 0, 0, 0, 0]))
    with pytest.raises(ckcm.StrokeError, match="leg 5: 0.5 m"):
        ckcm.solve_forward_kinematics(P, np.where(np.arange(6) == 4, 0.5, ok))
    assert issubclass(ckcm.StrokeError, ValueError)


@pytest.mark.parametrize("kw, match", [
    (dict(theta_A=np.radians(120.0)), r"theta_A = 120 deg makes payload attachment points A_2 and A_3 coincide"),
    (dict(theta_B=0.0), r"theta_B = 0 deg makes base attachment points B_1 and B_2 coincide: they are 0 m apart"),
    (dict(theta_A=np.radians(0.05)), r"A_\d and A_\d coincide: they are 0.000611 m apart"),
    (dict(theta_B=np.radians(-240.0)), r"base attachment points"),
])
def test_coincident_attachment_points_raise(kw, match):
    with pytest.raises(ckcm.AttachmentError, match=match):
        ckcm.nominal(**kw)


def test_attachment_validation_tolerance_and_batches():
    ckcm.nominal(theta_A=np.radians(0.05), min_separation=1e-4)  # 0.6 mm apart: allowed at 0.1 mm
    batch = P.replace(theta_A=np.radians([30.0, 45.0, 119.99]))
    with pytest.raises(ckcm.AttachmentError, match=r"scenario \(2,\)"):
        ckcm.validate_params(batch)
    with pytest.raises(ckcm.CKCMInputError, match="m1 = 25"):
        ckcm.nominal(m1=25.0)
