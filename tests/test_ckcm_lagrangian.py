"""The paper's Lagrangian model of the CKCM end-effector (Nguyen & Pooran eq. 39-56), derived by autodiff
from the energies: mass matrix, Christoffel form of the velocity products, gravity as ∂P/∂Φ, the
(corrected) printed closed forms of eq. 46 and 53, power balance, actuator-force mapping, and the ellipse
path of eq. 55."""
import functools

import numpy as np
import jax
import jax.numpy as jnp

from mrds_jax import ckcm
from mrds_jax.ckcm import kinematics as K
from mrds_jax.ckcm import lagrangian as L

P = ckcm.nominal()
HOME = np.array([0, 0, 1.0, 0, 0, 0])


def random_states(n, seed=0):
    rng = np.random.default_rng(seed)
    q = HOME + rng.uniform(-1, 1, (n, 6)) * np.array([0.04, 0.04, 0.04, 0.15, 0.15, 0.15])
    qd = rng.normal(size=(n, 6)) * np.array([0.1, 0.1, 0.1, 0.3, 0.3, 0.3])
    return q, qd


def closed_forms(p, q):
    """Eq. 46 and eq. 53 as corrected (module docstring of ``lagrangian``), from the eq. 27/31/34 matrices:
    D = Σ_i m (l_ci² t_i t_iᵀ + d1² c_i c_iᵀ) + diag(M, M, M, 0, 0, 0) + Vᵀ diag(I) V,
    G = Σ_i m g (d1 c_i sin θ_i + l_ci t_i cos θ_i) + M g e_3; and eq. 53 exactly as printed (no d1)."""
    C, T, V = K.jacobian(p, q), K.elevation_jacobian(p, q), K.angular_velocity_matrix(q)
    th = K.leg_elevation(p, q)
    lc = p.d0 + p.d1 * K.inverse_kinematics(p, q)
    E = jnp.diag(jnp.array([1.0, 1, 1, 0, 0, 0]) * p.M) + V.T @ jnp.diag(p.I_payload) @ V
    D = p.m * (jnp.einsum("i,ij,ik->jk", lc**2, T, T) + p.d1**2 * C.T @ C) + E
    e3 = jnp.zeros(6).at[2].set(p.M * p.g)
    G = p.m * p.g * (p.d1 * C.T @ jnp.sin(th) + T.T @ (lc * jnp.cos(th))) + e3
    G_printed = p.m * p.g * (C.T @ jnp.sin(th) + T.T @ (lc * jnp.cos(th))) + e3
    return D, G, G_printed


def over(f):
    """jit of f mapped over the leading axis of its array arguments with ``lax.map`` (compiles about twice as
    fast as ``vmap`` for these deep derivative programs)."""
    return jax.jit(lambda p, *xs: jax.lax.map(lambda a: f(p, *a), xs))


@functools.lru_cache(maxsize=None)
def compiled(name):
    if name == "terms":
        def terms(p, q, qd):
            return dict(D=L.mass_matrix(p, q), H=L.velocity_product_coefficients(p, q),
                        h=L.velocity_product(p, q, qd), G=L.gravity(p, q), closed=closed_forms(p, q),
                        K=L.kinetic_energy(p, q, qd))
        return over(terms)
    if name == "potential":
        return jax.jit(jax.vmap(L.potential_energy, (None, 0)))
    if name == "power":
        return over(_power_terms)
    if name == "path":
        def path(p, t_dense, t_coarse, period):
            return _path_terms(p, t_dense, period), L.actuator_forces_along_path(p, t_coarse, period)
        return jax.jit(path)
    if name == "models":
        def models(p, q):
            return [L.mass_matrix(p, q, m) for m in (L.PAPER, L.EnergyModel(payload_rotation="body"),
                                                      L.EnergyModel(leg_azimuth=True))]
        return jax.jit(models)
    raise KeyError(name)


AMP = jnp.array([0.03, 0.02, 0.04, 0.1, 0.08, 0.12])
OMEGA = jnp.array([2.1, 1.3, 2.9, 1.7, 2.3, 1.1])
PHASE = jnp.array([0.2, 1.0, -0.4, 0.7, -1.2, 0.3])


def _generic_path(t):
    return jnp.asarray(HOME) + AMP * jnp.sin(OMEGA * t + PHASE)


def _power_terms(p, t):
    t = t[0]
    """Along a path moving all six coordinates: F·Φ̇, τ·l̇ and dE/dt (E = K + P, differentiated in t)."""
    one = jnp.ones_like(t)
    q, qd = jax.jvp(_generic_path, (t,), (one,))
    qdd = jax.jvp(lambda s: jax.jvp(_generic_path, (s,), (jnp.ones_like(s),))[1], (t,), (one,))[1]
    F = L.cartesian_forces(p, q, qd, qdd)
    tau = L.actuator_forces(p, q, qd, qdd)
    ld = K.jacobian(p, q) @ qd
    dE = jax.jvp(lambda s: L.total_energy(p, *jax.jvp(_generic_path, (s,), (jnp.ones_like(s),))), (t,), (one,))[1]
    return dict(F_power=F.total @ qd, tau_power=tau.total @ ld, dE=dE, F=F, tau=tau, CT_tau=K.jacobian(p, q).T @ tau.total)


def _path_terms(p, t, period):
    """The ellipse of eq. 55 and its leg speeds l̇ = C Φ̇ at times t (cheap: vmapped)."""
    def one(t):
        q, qd, qdd = L.ellipse_path(t, period, p)
        q_t, qd_t = jax.jvp(lambda s: L.ellipse_path(s, period, p)[0], (t,), (jnp.ones_like(t),))
        qdd_t = jax.jvp(lambda s: L.ellipse_path(s, period, p)[1], (t,), (jnp.ones_like(t),))[1]
        return dict(q=q, qd=qd, qdd=qdd, qd_t=qd_t, qdd_t=qdd_t, ld=K.jacobian(p, q) @ qd)
    return jax.vmap(one)(t)


# --- structure of eq. 45 ---------------------------------------------------------------------------------
def test_mass_matrix_is_symmetric_positive_definite_and_matches_corrected_eq_46():
    q, qd = random_states(6)
    r = compiled("terms")(P, q, qd)
    D = np.asarray(r["D"])
    np.testing.assert_allclose(D, np.swapaxes(D, 1, 2), atol=1e-13)
    assert np.all(np.linalg.eigvalsh(D) > 1.0)  # well above zero: the payload alone gives M = 30 kg
    np.testing.assert_allclose(D, r["closed"][0], atol=1e-11)
    # K = ½ Φ̇ᵀ D Φ̇ (eq. 39 is quadratic in the velocities)
    np.testing.assert_allclose(r["K"], 0.5 * np.einsum("bi,bij,bj->b", qd, D, qd), rtol=1e-13)


def test_velocity_products_equal_christoffel_form_of_D():
    q, qd = random_states(6, seed=1)
    r = compiled("terms")(P, q, qd)
    H = np.asarray(r["H"])
    np.testing.assert_allclose(H, np.swapaxes(H, 2, 3), atol=1e-13)  # symmetric in (m, n)
    np.testing.assert_allclose(r["h"], np.einsum("bjmn,bm,bn->bj", H, qd, qd), atol=1e-11)
    assert np.max(np.abs(r["h"])) > 1e-2  # not trivially zero
    # passivity: Φ̇ᵀ(Ḋ − 2 H(Φ̇)) Φ̇ = 0, i.e. Φ̇ᵀh = ½ Φ̇ᵀ Ḋ Φ̇ with Ḋ = Σ_n ∂D/∂φ_n φ̇_n
    dD = np.einsum("bjmn,bn->bjm", H + np.swapaxes(H, 1, 2), qd)  # ∂D_jm/∂φ_n φ̇_n = (H_jmn + H_mjn) φ̇_n
    np.testing.assert_allclose(np.einsum("bj,bj->b", qd, r["h"]),
                               0.5 * np.einsum("bj,bjm,bm->b", qd, dD, qd), atol=1e-11)


def test_gravity_is_gradient_of_potential_and_matches_corrected_eq_53():
    q, qd = random_states(6, seed=2)  # same batch shape as the other tests: no recompile
    r = compiled("terms")(P, q, qd)
    h = 1e-6
    V = compiled("potential")
    fd = np.stack([(V(P, q + h * e) - V(P, q - h * e)) / (2 * h) for e in np.eye(6)], axis=-1)
    np.testing.assert_allclose(r["G"], fd, rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(r["G"], r["closed"][1], atol=1e-10)
    # at the home pose the vertical gravity force is the weight of payload + the legs' share
    assert 30 * 9.81 < float(r["G"][0, 2]) < (30 + 6 * 20) * 9.81
    # the printed eq. 53 (m g c_ij sin θ_i, no d1) is a different, much larger force
    assert np.max(np.abs(r["closed"][2] - r["G"])) > 100.0


def test_power_balance_along_a_trajectory():
    """d/dt (K + P) = Fᵀ Φ̇ = τᵀ l̇ (eq. 45 and eq. 56 with τ = C⁻ᵀ F)."""
    t = jnp.linspace(0.0, 3.0, 7)
    r = compiled("power")(P, t[:, None])
    scale = max(1.0, float(np.max(np.abs(r["dE"]))))
    assert scale > 1.0  # the trajectory does work
    np.testing.assert_allclose(r["F_power"], r["dE"], atol=1e-8 * scale)
    np.testing.assert_allclose(r["tau_power"], r["dE"], atol=1e-8 * scale)
    # virtual work: Cᵀ τ = F, and the three contributions add up to the total
    np.testing.assert_allclose(r["CT_tau"], r["F"].total, atol=1e-10)
    for split in (r["F"], r["tau"]):
        np.testing.assert_allclose(split.inertial + split.velocity_product + split.gravity, split.total,
                                   atol=1e-10)


def test_energy_model_switches():
    """With an isotropic payload the base- and body-frame rotational energies agree; the leg azimuth term
    only adds (positive semi-definite) inertia."""
    q = random_states(1, seed=3)[0][0]
    iso = P.replace(I_payload=jnp.array([5.0, 5.0, 5.0]))
    D_paper, D_body, D_az = compiled("models")(iso, q)
    np.testing.assert_allclose(D_body, D_paper, atol=1e-12)
    assert np.min(np.linalg.eigvalsh(np.asarray(D_az - D_paper))) > -1e-12
    assert np.max(np.abs(D_az - D_paper)) > 1e-3
    D_paper, D_body, _ = compiled("models")(P, q)  # the bench's disc (I_1 = I_2 ≠ I_3), tilted payload
    assert np.max(np.abs(D_body - D_paper)) > 1e-3


# --- the path of Section 4 -------------------------------------------------------------------------------
def test_ellipse_path_eq_55_and_period_from_max_actuator_speed():
    v_max = 0.17  # m/s, Table 2
    T = float(L.period_for_max_actuator_speed(P, v_max))
    r, tau = compiled("path")(P, jnp.linspace(0.0, T, 4001), jnp.linspace(0.0, T, 21), T)
    x, y = np.asarray(r["q"][:, 0]), np.asarray(r["q"][:, 1])
    np.testing.assert_allclose((x / 0.05)**2 + (y / 0.025)**2, 1.0, atol=1e-12)
    np.testing.assert_allclose(r["q"][:, 2], 1.0)
    np.testing.assert_allclose(r["qd"], r["qd_t"], atol=1e-12)
    np.testing.assert_allclose(r["qdd"], r["qdd_t"], atol=1e-12)
    np.testing.assert_allclose(np.max(np.abs(r["ld"])), v_max, rtol=1e-5)
    np.testing.assert_allclose(tau.inertial + tau.velocity_product + tau.gravity, tau.total, atol=1e-10)
    np.testing.assert_allclose(tau.total[0], tau.total[-1], atol=1e-9)  # one full loop
