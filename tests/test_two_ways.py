"""One physical system built two ways gives one motion (Bonaventura Ch. 6.6, §8.2 equivalence system (a)).

A planar two-link arm (gravity in the plane, joint torques τᵢ(t) = Aᵢ sin(2πt/Tᵢ) of eq. 134) is built
  1. as one fixed-base two-link module (q = [θ₁, θ₂]), and
  2. as a fixed-base one-link module plus a free one-link module (planar base-motion variables
     q = [x, y, θ], footnote 19) joined by a planar revolute contact whose joint torque τ₂ is the known
     free-direction force Fᵘ of the contact (§6.6), not an open-chain input.
Both give the same q̈ at consistent random states and the same trajectory over an RK4 rollout
(mrds_jax.integrate.rollout, the acceleration function returning the per-module q̈ tuple).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.dynamics import aba
from mrds_jax.integrate import check_trajectory, rollout
from mrds_jax.model import ModuleBuilder

L1, L2 = 1.0, 0.5
RHO = 0.448                       # kg/m (Bonaventura Table 22); links are uniform rods
A, T = (0.105, 0.011), (1.0, 0.7)  # eq. 134 amplitudes (System 2a) with shorter periods, to move within 0.3 s
N_STATES = 10
DT, N_STEPS = 1e-3, 300


def torques(t):
    """eq. 134: τᵢ(t) = Aᵢ sin(2π t / Tᵢ)."""
    return tuple(a * jnp.sin(2 * jnp.pi * t / p) for a, p in zip(A, T))


def elbow_torque(t):
    return jnp.stack([torques(t)[1]])


def _rod(b, name, parent, position, length, joint="revolute"):
    m = RHO * length
    I_c = m * length ** 2 / 12
    b.add_link(name, parent=parent, joint=joint, position=position, mass=m, com=(length / 2, 0, 0),
               inertia=np.diag([1e-4, I_c, I_c]))


@functools.lru_cache(maxsize=None)
def models():
    b = ModuleBuilder(planar=True)
    _rod(b, "link1", None, (0, 0, 0), L1)
    _rod(b, "link2", "link1", (L1, 0, 0), L2)
    two_link = b.build()
    b = ModuleBuilder(planar=True)
    _rod(b, "link1", None, (0, 0, 0), L1)
    b.add_frame("tip", "link1", position=(L1, 0, 0))
    one_link = b.build()
    b = ModuleBuilder(planar=True)
    _rod(b, "link2", None, (0, 0, 0), L2, joint="planar_free")
    b.add_frame("base", "link2")
    free_link = b.build()
    elbow = C.planar_revolute("elbow", ("upper", "tip"), ("lower", "base"), applied=elbow_torque)
    return two_link, S.build_system({"upper": one_link, "lower": free_link}, [elbow])


def split_state(th, thd):
    """Two-link (θ, θ̇) -> (one-link, free-link) coordinates: the free link's base is at the elbow."""
    c, s = np.cos(th[0]), np.sin(th[0])
    q = (th[:1], np.array([L1 * c, L1 * s, th[0] + th[1]]))
    v = (thd[:1], np.array([-L1 * s * thd[0], L1 * c * thd[0], thd[0] + thd[1]]))
    return q, v


def two_link_acceleration(module):
    def acc(q, v, t):
        return (aba(module, q[0], v[0], jnp.stack(torques(t))),)
    return acc


def split_acceleration(system):
    def acc(q, v, t):
        tau = (jnp.stack(torques(t)[:1]), jnp.zeros(3, dtype=v[1].dtype))
        return S.forward_dynamics(system, S.SystemState(q, v), tau, t).qdd
    return acc


def _as_two_link(q_split):
    """Map the split build's coordinates back to [θ₁, θ₂] and the elbow position from θ₁."""
    th1 = q_split[0][..., 0]
    return np.stack([th1, q_split[1][..., 2] - th1], axis=-1), np.stack([L1 * np.cos(th1), L1 * np.sin(th1)], axis=-1)


def test_same_accelerations_at_consistent_states():
    two_link, system = models()
    rng = np.random.default_rng(4)
    th, thd = rng.uniform(-np.pi, np.pi, (N_STATES, 2)), rng.uniform(-2, 2, (N_STATES, 2))
    ts = rng.uniform(0, 1, N_STATES)
    qs, vs = zip(*(split_state(a, b) for a, b in zip(th, thd)))
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    a2 = jax.vmap(lambda q, v, t: two_link_acceleration(two_link)((q,), (v,), t)[0])(th, thd, ts)
    a_split = jax.jit(jax.vmap(split_acceleration(system)))(stack(qs), stack(vs), ts)
    a2, a_split = np.asarray(a2), [np.asarray(x) for x in a_split]
    thdd = a2
    c, s = np.cos(th[:, 0]), np.sin(th[:, 0])
    elbow_acc = np.stack([-L1 * (thdd[:, 0] * s + thd[:, 0] ** 2 * c), L1 * (thdd[:, 0] * c - thd[:, 0] ** 2 * s)], 1)
    np.testing.assert_allclose(a_split[0][:, 0], thdd[:, 0], atol=1e-10, rtol=0)
    np.testing.assert_allclose(a_split[1][:, :2], elbow_acc, atol=1e-10, rtol=0)
    np.testing.assert_allclose(a_split[1][:, 2], thdd[:, 0] + thdd[:, 1], atol=1e-10, rtol=0)


def test_same_trajectory_rk4_rollout():
    two_link, system = models()
    th0, thd0 = np.array([0.4, -0.9]), np.array([1.2, -0.7])
    q0, v0 = split_state(th0, thd0)
    traj2 = jax.jit(lambda q, v: rollout((two_link,), two_link_acceleration(two_link), q, v, DT, N_STEPS,
                                         decimation=10))((jnp.asarray(th0),), (jnp.asarray(thd0),))
    trajs = jax.jit(lambda q, v: rollout(system.modules, split_acceleration(system), q, v, DT, N_STEPS,
                                         decimation=10))(tuple(map(jnp.asarray, q0)), tuple(map(jnp.asarray, v0)))
    check_trajectory(traj2, DT), check_trajectory(trajs, DT)
    th_split, elbow = _as_two_link([np.asarray(x) for x in trajs.q])
    th_two = np.asarray(traj2.q[0])
    assert np.abs(th_two[-1] - th0).max() > 0.05                     # it really moved
    np.testing.assert_allclose(th_split, th_two, atol=1e-9, rtol=0)
    np.testing.assert_allclose(np.asarray(trajs.q[1])[:, :2], elbow, atol=1e-9, rtol=0)   # loop closed
    thd_two = np.asarray(traj2.v[0])
    np.testing.assert_allclose(np.asarray(trajs.v[0])[:, 0], thd_two[:, 0], atol=1e-9, rtol=0)
    np.testing.assert_allclose(np.asarray(trajs.v[1])[:, 2], thd_two.sum(axis=1), atol=1e-9, rtol=0)
