"""Closed-chain inverse dynamics is the exact inverse of the (Pinocchio-verified) forward dynamics."""
import jax.numpy as jnp
import numpy as np

from mrds_jax import system as S
from test_system_vs_pinocchio import stewart_case


def test_stewart_inverse_dynamics_recovers_actuator_and_constraint_forces():
    """Forward dynamics with actuator forces on the six prismatic joints, then inverse dynamics of the
    resulting motion: the same actuator forces and contact forces come back (CKCM: 24 equations,
    6 actuators + 18 spherical-contact components)."""
    system, cases, _ = stewart_case()
    actuated = {f"leg{i + 1}": [2] for i in range(6)}
    state = consistent_state(system, cases[3])
    rng = np.random.default_rng(4)
    tau_a = rng.uniform(-300, 300, 6)
    tau = tuple(jnp.zeros(3).at[2].set(tau_a[i]) for i in range(6)) + (jnp.zeros(6),)
    # one state: run eagerly, compiling these two programs would cost more than running them op by op
    fwd = S.forward_dynamics(system, state, tau)
    inv = S.inverse_dynamics(system, state, fwd.qdd, actuated)
    assert float(inv.residual) < 1e-12
    np.testing.assert_allclose(inv.tau_actuated, tau_a, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(np.concatenate(inv.F_c), np.concatenate(fwd.F_c), rtol=1e-9, atol=1e-8)


def consistent_state(system, case):
    """Our per-module (q, v) from one of ``stewart_case``'s Pinocchio states."""
    merged, _, qp, vp, _ = case
    return S.SystemState(tuple(jnp.asarray(q) for q in merged.split_q(qp)),
                         tuple(jnp.asarray(v) for v in merged.split_v(vp)))
