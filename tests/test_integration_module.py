"""Rollouts of single modules: energy and momentum conservation, NaN reporting, rollout gradients."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax.integrate import SimulationError, check_trajectory, rollout
from mrds_jax.model import ModuleBuilder
from robots import random_states, tree_model


def _aba_acceleration(module):
    def acc(q, v, t):
        return (mj.aba(module, q[0], v[0], jnp.zeros_like(v[0])),)
    return acc


@functools.lru_cache(maxsize=None)
def pendulum():
    """A passive three-link spatial pendulum (revolute, universal, screw)."""
    b = ModuleBuilder()
    b.add_link("a", None, "revolute", axis=(1, 0, 0), mass=1.0, com=(0, 0, -0.2), inertia=(0.03, 0.03, 0.02))
    b.add_link("b", "a", "universal", position=(0, 0, -0.4), axis=(1, 0, 0), axis2=(0, 1, 0), mass=0.8,
               com=(0.05, 0, -0.2), inertia=(0.03, 0.03, 0.02))
    b.add_link("c", "b", "screw", position=(0, 0, -0.4), axis=(0, 0, 1), pitch=0.05, mass=0.5,
               com=(0.0, 0.0, -0.1), inertia=(0.02, 0.02, 0.03))
    return b.build()


def test_energy_routes_agree():
    module = tree_model("branching")
    q, v, _, _ = (jnp.asarray(x[0]) for x in random_states(module, np.random.default_rng(1), 1))
    np.testing.assert_allclose(mj.kinetic_energy(module, q, v), 0.5 * v @ mj.mass_matrix(module, q) @ v, rtol=1e-12)
    # −∂V/∂q is the generalized gravity force of RNEA
    np.testing.assert_allclose(jax.grad(lambda q: mj.potential_energy(module, q))(q),
                               mj.generalized_gravity(module, q), atol=1e-10)


def test_passive_pendulum_conserves_energy_rk4():
    module = pendulum()
    q0 = (jnp.array([0.5, -0.3, 0.3, 0.3]),)
    v0 = (jnp.array([0.3, 0.5, -0.4, 1.0]),)
    run = jax.jit(lambda q, v: rollout((module,), _aba_acceleration(module), q, v, 1e-3, 10_000, decimation=100))
    traj = check_trajectory(run(q0, v0), 1e-3)
    E = jax.vmap(lambda q, v: mj.mechanical_energy(module, q, v))(traj.q[0], traj.v[0])
    drift = np.abs(np.asarray(E) - float(E[0])).max() / abs(float(E[0]))
    assert traj.q[0].shape == (101, 4)
    assert drift < 1e-6, drift


def test_free_floating_tree_conserves_momentum_and_energy():
    """No gravity, no torques: spatial momentum (world frame) and kinetic energy are invariants."""
    module = tree_model("free_base")
    module = module.with_params(gravity=jnp.zeros(3))
    q, v, _, _ = (jnp.asarray(x[0]) for x in random_states(module, np.random.default_rng(2), 1))
    run = jax.jit(lambda q, v: rollout((module,), _aba_acceleration(module), q, v, 1e-3, 2000, decimation=200))
    traj = check_trajectory(run((q,), (v * 0.5,)), 1e-3)
    h = jax.vmap(lambda q, v: mj.spatial_momentum(module, q, v))(traj.q[0], traj.v[0])
    T = jax.vmap(lambda q, v: mj.kinetic_energy(module, q, v))(traj.q[0], traj.v[0])
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), atol=1e-9 * np.abs(h[0]).max())
    assert np.abs(T - T[0]).max() / T[0] < 1e-7
    # quaternions stay unit
    quat = traj.q[0][:, 3:7]
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-12)


def test_semi_implicit_euler_is_first_order_and_bounded():
    module = pendulum()
    q0, v0 = (jnp.array([0.8, -0.5, 0.6, 0.3]),), (jnp.zeros(4),)
    acc = _aba_acceleration(module)
    ref = rollout((module,), acc, q0, v0, 1e-4, 2000, decimation=2000)   # RK4, t = 0.2 s
    errs = []
    for dt, n in ((2e-3, 100), (1e-3, 200)):
        traj = rollout((module,), acc, q0, v0, dt, n, decimation=n, integrator="euler")
        errs.append(float(jnp.abs(traj.q[0][-1] - ref.q[0][-1]).max()))
    assert 1.6 < errs[0] / errs[1] < 2.4, errs   # halving dt halves the error


def test_nan_is_reported_with_its_step():
    module = pendulum()

    def acc(q, v, t):
        a = mj.aba(module, q[0], v[0], jnp.zeros_like(v[0]))
        return (jnp.where(t > 0.0125, jnp.nan, a),)

    traj = rollout((module,), acc, (module.neutral_configuration(),), (jnp.zeros(4),), 1e-3, 40, decimation=10,
                   integrator="euler")
    with pytest.raises(SimulationError, match="step 14 .t = 0.014"):
        check_trajectory(traj, 1e-3)


def test_rollout_gradient_matches_finite_differences():
    """d(final state of a 0.5 s RK4 rollout)/d(link masses, joint positions), central differences."""
    module = pendulum()
    q0, v0 = (jnp.array([0.8, -0.5, 0.6, 0.3]),), (jnp.array([0.5, 1.0, -0.7, 2.0]),)
    w = jnp.asarray(np.random.default_rng(3).normal(size=8))

    def final(mass, joint_p):
        m = module.with_params(mass=mass, joint_p=joint_p)
        traj = rollout((m,), _aba_acceleration(m), q0, v0, 1e-2, 50, decimation=50, integrator="rk4_compact")
        return w @ jnp.concatenate([traj.q[0][-1], traj.v[0][-1]])

    f = jax.jit(final)
    g_mass, g_pos = jax.jit(jax.grad(final, argnums=(0, 1)))(module.params.mass, module.params.joint_p)
    eps = 1e-5
    for g, x, which in ((g_mass, module.params.mass, 0), (g_pos, module.params.joint_p, 1)):
        fd = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            args = [module.params.mass, module.params.joint_p]
            args[which] = x.at[idx].add(eps)
            fp = f(*args)
            args[which] = x.at[idx].add(-eps)
            fd[idx] = (fp - f(*args)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())
