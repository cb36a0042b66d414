"""Weld loops (issue 25) against MuJoCo and Pinocchio, float64: ``data/mjcf_weld_loop_armature.xml`` (written for this test:
two arms of a torso with their hands welded together, a floating box welded to a hand; ball joints, hinges with ref,
armature, damping, stiffness about springref, actuators). At 10 states satisfying MuJoCo's equalities, q̈ equals
the exact constrained acceleration from MuJoCo's own M, bias, passive and actuator forces and the welds' ``efc_J``
(J̇v by a central difference of ``efc_J``; the KKT system), 1e-8 relative; and Pinocchio's ``constraintDynamics``
on the ``to_pinocchio`` export (``CONTACT_6D``, ``model.armature``), without the file's forces, 1e-8."""
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mrds_jax import system as S
from mrds_jax.export import to_pinocchio
from mrds_jax.loaders.mjcf import load_mjcf
from mujoco_states import consistent_states, mujoco_kkt_acceleration

MODEL = Path(__file__).parent / "data" / "mjcf_weld_loop_armature.xml"
N_STATES = 10
CTRL = np.array([1.6, -0.4])


def test_weld_loops_equal_mujoco_kkt_and_pinocchio():
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # nothing in the file is left unread
        system, mapping, forces = load_mjcf(model, return_mapping=True, return_forces=True)
    assert [c.kind for c in system.contacts] == ["weld", "weld"]
    forces = forces[:-1] + (S.with_control(forces[-1], jnp.asarray(CTRL)),)
    rng = np.random.default_rng(4)
    states = consistent_states(model, mapping, rng, N_STATES)
    taus = [tuple(jnp.asarray(rng.uniform(-2, 2, m.nv)) for m in system.modules) for _ in states]
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)      # noqa: E731
    acc = S.system_acceleration(system, forces, path="general")
    both = jax.jit(jax.vmap(lambda st, tau: (acc(st.q, st.v, 0.0), S.forward_dynamics(system, st, tau).qdd)))
    with_forces, with_tau = jax.tree.map(np.asarray, both(stack(states), stack(taus)))
    data = mujoco.MjData(model)
    twin = to_pinocchio(system)
    worst_mj = worst_pin = 0.0
    for k, (state, tau) in enumerate(zip(states, taus)):
        qpos, qvel = mapping.to_mujoco(state)
        qacc, pos, J = mujoco_kkt_acceleration(model, data, qpos, qvel, CTRL)
        assert len(pos) == 12 and np.abs(pos).max() < 1e-12 and np.abs(J @ qvel).max() < 1e-12
        exact = np.concatenate(mapping.acceleration_from_mujoco(state, qacc))
        ours = np.concatenate([x[k] for x in with_forces])
        worst_mj = max(worst_mj, np.abs(ours - exact).max() / max(np.abs(exact).max(), 1.0))
        ddq, _, _ = twin.constraint_dynamics(twin.q(state.q), twin.v(state.v), twin.v(tau))
        worst_pin = max(worst_pin, np.abs(twin.v([x[k] for x in with_tau]) - ddq).max() / max(np.abs(ddq).max(), 1.0))
    print(f"weld loops: q̈ vs MuJoCo KKT {worst_mj:.1e}, vs Pinocchio {worst_pin:.1e} (worst relative)")
    assert worst_mj < 1e-8 and worst_pin < 1e-8, (worst_mj, worst_pin)
