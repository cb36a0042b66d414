"""Spatial algebra identities (Featherstone ch. 2; Bonaventura eq. 18-21)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import spatial as sp
from robots import random_inertia, random_rotation


@pytest.fixture
def pose(rng):
    return jnp.asarray(random_rotation(rng)), jnp.asarray(rng.normal(size=3))


def test_skew_and_cross(rng):
    a, b = rng.normal(size=(2, 3))
    np.testing.assert_allclose(sp.skew(a) @ b, np.cross(a, b), atol=1e-14)
    np.testing.assert_allclose(sp.unskew(sp.skew(a)), a, atol=1e-14)


def test_quaternion_round_trip_and_integration(rng):
    for _ in range(10):
        R = random_rotation(rng)
        q = sp.rotation_to_quat(jnp.asarray(R))
        np.testing.assert_allclose(sp.quat_to_rotation(q), R, atol=1e-12)
    q = sp.rotation_to_quat(jnp.asarray(random_rotation(rng)))
    w = jnp.asarray(rng.normal(size=3))
    # integrating a constant body rate for dt equals composing with rot(w dt) on the right
    R1 = sp.quat_to_rotation(sp.quat_integrate(q, w, 0.3))
    np.testing.assert_allclose(R1, sp.quat_to_rotation(q) @ sp.axis_angle_rotation(w / jnp.linalg.norm(w),
                                                                                      0.3 * jnp.linalg.norm(w)),
                               atol=1e-12)
    # q̇ = ½ q ⊗ ω is the derivative of that flow
    d = jax.jvp(lambda t: sp.quat_integrate(q, w, t), (0.0,), (1.0,))[1]
    np.testing.assert_allclose(d, sp.quat_derivative(q, w), atol=1e-12)


def test_rpy_matches_urdf_convention():
    r, p, y = 0.1, -0.4, 0.7
    np.testing.assert_allclose(sp.rpy_rotation(jnp.array([r, p, y])), sp.rot_z(y) @ sp.rot_y(p) @ sp.rot_x(r))


def test_transforms_are_consistent(pose, rng):
    R, p = pose
    m, f = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
    X, Xf = sp.motion_transform(R, p), sp.force_transform(R, p)
    np.testing.assert_allclose(X @ m, sp.act_motion(R, p, m), atol=1e-13)
    np.testing.assert_allclose(Xf @ f, sp.act_force(R, p, f), atol=1e-13)
    np.testing.assert_allclose(sp.inv_act_motion(R, p, sp.act_motion(R, p, m)), m, atol=1e-13)
    np.testing.assert_allclose(sp.inv_act_force(R, p, sp.act_force(R, p, f)), f, atol=1e-13)
    # power is frame invariant, and X* = X⁻ᵀ
    np.testing.assert_allclose(sp.act_motion(R, p, m) @ sp.act_force(R, p, f), m @ f, atol=1e-12)
    np.testing.assert_allclose(Xf, np.linalg.inv(X).T, atol=1e-12)
    R2, p2 = jnp.asarray(random_rotation(rng)), jnp.asarray(rng.normal(size=3))
    np.testing.assert_allclose(sp.motion_transform(*sp.compose(R, p, R2, p2)), X @ sp.motion_transform(R2, p2),
                               atol=1e-12)
    np.testing.assert_allclose(sp.motion_transform(*sp.inverse(R, p)), np.linalg.inv(X), atol=1e-12)


def test_cross_products(rng):
    v, m, f = (jnp.asarray(x) for x in rng.normal(size=(3, 6)))
    np.testing.assert_allclose(sp.cross_motion_matrix(v) @ m, sp.cross_motion(v, m), atol=1e-13)
    np.testing.assert_allclose(sp.cross_force_matrix(v) @ f, sp.cross_force(v, f), atol=1e-13)
    # d/dt X(t) for X moving with twist v: X' = X (v×) — checked by finite differences of a screw motion
    np.testing.assert_allclose(sp.cross_force(v, f) @ m, -f @ sp.cross_motion(v, m), atol=1e-12)


def test_spatial_inertia(pose, rng):
    R, p = pose
    mass, com, Ic = 2.5, jnp.asarray(rng.normal(size=3)), jnp.asarray(random_inertia(rng))
    I = sp.spatial_inertia(mass, com, Ic)
    np.testing.assert_allclose(I, I.T, atol=1e-14)
    assert np.linalg.eigvalsh(I).min() > 0
    m2, c2, I2 = sp.inertia_parameters(I)
    np.testing.assert_allclose((m2, *c2), (mass, *com), atol=1e-13)
    np.testing.assert_allclose(I2, Ic, atol=1e-13)
    # kinetic energy is frame invariant: ½ vᵀ I v with v and I both moved to frame A
    v = jnp.asarray(rng.normal(size=6))
    IA = sp.transform_inertia(R, p, I)
    np.testing.assert_allclose(sp.kinetic_energy(IA, sp.act_motion(R, p, v)), sp.kinetic_energy(I, v), atol=1e-12)
    # moving the body moves its centre of mass
    mA, cA, _ = sp.inertia_parameters(IA)
    np.testing.assert_allclose(cA, R @ com + p, atol=1e-12)


def test_transform_inertia_blocks_equal_force_transform_product(pose, rng):
    """The 3x3-block form of transform_inertia equals ᴬX_B* I (ᴬX_B*)ᵀ with the 6x6 matrix, for any symmetric
    6x6 (articulated inertias are not rigid-body inertias)."""
    R, p = pose
    M = rng.normal(size=(6, 6))
    M = jnp.asarray(M + M.T)
    Xf = np.asarray(sp.force_transform(R, p))
    np.testing.assert_allclose(sp.transform_inertia(R, p, M), Xf @ np.asarray(M) @ Xf.T, atol=1e-12)


def test_bonaventura_rigid_body_transform_and_rotation(pose, rng):
    """eq. 20: S maps a twist at j to the twist of the point k = j + r of the same body; Sᵀ moves a force
    at k to j. Equivalent to a pure-translation Plücker transform. eq. 18: diag(R, R)."""
    R, r = pose
    x_j, F_k = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
    S = sp.rigid_body_transform(r)
    np.testing.assert_allclose(S @ x_j, sp.inv_act_motion(jnp.eye(3), r, x_j), atol=1e-13)
    np.testing.assert_allclose((S @ x_j)[3:], x_j[3:] + np.cross(x_j[:3], r), atol=1e-13)
    np.testing.assert_allclose(S.T @ F_k, sp.act_force(jnp.eye(3), r, F_k), atol=1e-13)
    np.testing.assert_allclose(sp.spatial_rotation(R) @ x_j, sp.act_motion(R, jnp.zeros(3), x_j), atol=1e-13)
