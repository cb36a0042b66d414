"""The contact solve where it has to iterate (issue 51): sliding contacts polished by Newton on their mode conditions
(:func:`mrds_jax.system.ncp.newton_polish`), against analytic mechanics (float64).

* One sliding contact of a point mass: the polish from a rough guess of the modes is Coulomb's exact answer,
  λ_n = −m g_n, λ_t = −μ λ_n ŝ, with σ_t = v_t + λ_t/m parallel to v_t.
* A cube sliding down a 35° incline (μ = 0.3) with the default settings: every step converged, after the first
  steps none iterates (the warm start's modes polished), and the downhill velocity gains exactly
  g (sin θ − μ cos θ) dt every step (before the polish: 13 ADMM iterations a step on average and an error of the
  solver's tolerance, 1e-7 relative; ``experiments/ncp_convergence.py``).
"""
import numpy as np

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.system.ncp import NCPSettings, RowLayout, newton_polish, solve_ncp
from mrds_jax.system.timestepping import contact_rollout

G0 = 9.81


def test_newton_polish_of_a_sliding_point_mass_is_coulombs_answer():
    m, mu = 2.0, 0.4
    G = jnp.eye(3) / m
    g = jnp.array([-0.3, 1.2, -0.5])                         # approaching the plane and sliding fast
    lam_n = 0.3 * m
    shat_free = np.array([1.2, -0.5]) / np.hypot(1.2, -0.5)
    # the slip keeps its direction (G isotropic): σ_t = v_t − μ λ_n ŝ/m, ŝ = v_t/|v_t|
    expected = np.concatenate([[lam_n], -mu * lam_n * shat_free])
    guess = jnp.array([1.0, -0.3, 0.1])
    guess = guess.at[1:].set(-mu * guess[0] * jnp.array([0.8, -0.6]))   # on the cone's boundary, direction rough
    lam = newton_polish(G, g, RowLayout(n_contacts=1), jnp.array([mu]), jnp.ones(3, bool), guess, 1e-9, 1e-12, 4)
    np.testing.assert_allclose(np.asarray(lam), expected, rtol=1e-10)
    # from rest either method solves it to its tolerance, and a warm start that solves it costs no trip; ADMM's
    # warm-start polish makes it exact at once
    warm = {}
    for method in ("admm", "newton"):
        settings = NCPSettings(method=method)
        sol = solve_ncp(G, g, RowLayout(n_contacts=1), jnp.array([mu]), settings=settings)
        assert bool(sol.converged)
        np.testing.assert_allclose(np.asarray(sol.lam), expected, rtol=1e-6)
        warm[method] = solve_ncp(G, g, RowLayout(n_contacts=1), jnp.array([mu]), lam0=sol.lam, settings=settings)
        assert bool(warm[method].converged) and int(warm[method].iterations) == 0
    np.testing.assert_allclose(np.asarray(warm["admm"].lam), expected, rtol=1e-10)


def test_cube_slides_down_an_incline_exactly_with_default_settings():
    theta, mu, dt, n = np.deg2rad(35.0), 0.3, 1e-3, 300
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=1.0, inertia=np.eye(3) * 0.08 / 12)
    b.add_frame("c", "body")
    c, s = np.cos(theta), np.sin(theta)
    R = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    system = S.build_system({"m": b.build()}, [], collision=[C.plane("floor", rotation=R, friction=mu),
                                                             C.box("cube", "m", "c", (0.1, 0.1, 0.1), friction=mu)])
    q0 = jnp.asarray(np.concatenate([0.1 * R[:, 2], [np.cos(theta / 2), np.sin(theta / 2), 0.0, 0.0]]))
    tr = jax.jit(lambda q: contact_rollout(system, (q,), (jnp.zeros(6),), dt, n, 1))(q0)
    its = np.asarray(tr.iterations_max)[1:]
    assert np.all(np.asarray(tr.converged)), np.flatnonzero(~np.asarray(tr.converged))
    assert its[10:].max() == 0 and its.mean() < 1.0, its
    downhill = -np.array([0.0, c, s])
    vel = np.asarray(tr.v[0])[:, 3:] @ R.T                            # body-frame velocity to world (no turning)
    np.testing.assert_allclose(np.diff(vel @ downhill), G0 * (s - mu * c) * dt, atol=1e-9)
    assert np.abs(np.asarray(tr.v[0])[:, :3]).max() < 1e-8            # no spin (2e-6 rad/s before the polish)
