"""``system.total_momentum`` on flexible links (an ``EnergyModule`` with the chain's momentum function): it equals
the generalized momenta H v of the coordinates that translate and rotate the whole chain (∂T/∂ẋ, ∂T/∂ẏ: the
linear momentum; ∂T/∂q̇₁: the angular momentum about the chain's root point), and on a free chain (mobile base,
no gravity, no contact) it is conserved along an RK4 rollout to 1e-9; under gravity the linear momentum changes
by exactly −M g t."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.dynamics import interface as I
from mrds_jax.flexible import flexible_chain

LENGTHS, MODES, RHO, TIP = (0.8, 0.6), (2, 1), (0.45, 0.6), 0.3


def chain_system(gravity=(0.0, 0.0), mobile_base=True, base=(0.0, 0.0, 0.0)):
    module = flexible_chain(LENGTHS, MODES, rho=RHO, tip_mass=TIP, mobile_base=mobile_base, gravity=gravity,
                            base=base)
    return S.build_system({"beam": module}, [])


def random_state(system, rng, modal_q=0.05, modal_v=2.0):
    n_rigid = system.modules[0].nv - sum(MODES)
    q = np.concatenate([rng.uniform(-1, 1, n_rigid), modal_q * rng.normal(size=sum(MODES))])
    v = np.concatenate([rng.normal(size=n_rigid), modal_v * rng.normal(size=sum(MODES))])
    return S.SystemState((jnp.asarray(q),), (jnp.asarray(v),))


@pytest.mark.parametrize("mobile_base", [True, False])
def test_flexible_momentum_equals_the_generalized_momenta(rng, mobile_base):
    system = chain_system(mobile_base=mobile_base, base=(0.2, -0.1, 0.3))
    for _ in range(3):
        state = random_state(system, rng)
        (q,), (v,) = state.q, state.v
        h = np.asarray(S.total_momentum(system, state))
        p = np.asarray(I.mass_matrix(system.modules[0], q) @ v)                    # ∂T/∂v
        root = np.asarray(q[:2]) if mobile_base else np.array([0.2, -0.1])
        angle = 2 if mobile_base else 0                                           # q₁ rotates the whole chain
        if mobile_base:
            np.testing.assert_allclose(h[3:5], p[:2], rtol=0, atol=1e-12)
        about_root = h[2] - (root[0] * h[4] - root[1] * h[3])
        np.testing.assert_allclose(about_root, p[angle], rtol=0, atol=1e-12)
        assert h[0] == h[1] == h[5] == 0.0 and abs(h[2]) > 1e-3


@pytest.fixture(scope="module")
def free_rollouts():
    """The same free chain without and with gravity, 0.5 s of RK4 at dt = 1 ms, from an undeformed chain whose
    modes move slowly (larger modal velocities excite modes that RK4 at 1 ms follows less closely than 1e-9)."""
    state = random_state(chain_system(), np.random.default_rng(7), modal_q=0.0, modal_v=0.02)
    out = {}
    for g in (0.0, 9.81):
        system = chain_system(gravity=(0.0, -g))
        traj = S.simulate(system, state, dt=1e-3, n_steps=500, output=S.Output(decimation=50))
        states = S.SystemState(traj.q, traj.v)
        out[g] = (traj, np.asarray(jax.vmap(lambda s: S.total_momentum(system, s))(states)))
    return out


def test_free_flexible_chain_conserves_momentum(free_rollouts):
    traj, h = free_rollouts[0.0]
    assert np.abs(h - h[0]).max() < 1e-9, np.abs(h - h[0]).max(axis=0)
    modes = np.asarray(traj.q[0])[:, -sum(MODES):]
    assert np.abs(modes - modes[0]).max() > 1e-4 and np.abs(h[0]).max() > 1       # it deformed and moves


def test_under_gravity_the_linear_momentum_changes_by_minus_m_g_t(free_rollouts):
    traj, h = free_rollouts[9.81]
    mass = sum(r * length for r, length in zip(RHO, LENGTHS)) + TIP
    t = np.asarray(traj.t) - float(traj.t[0])
    np.testing.assert_allclose(h[:, 4] - h[0, 4], -mass * 9.81 * t, rtol=0, atol=1e-9)
    np.testing.assert_allclose(h[:, 3], h[0, 3], rtol=0, atol=1e-9)
