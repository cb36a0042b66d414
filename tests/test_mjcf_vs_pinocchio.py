"""MJCF loops imported by ``load_mjcf`` against Pinocchio's ``constraintDynamics``, float64, 10 states each.

The ready-made MJCF files of ``mrds_jax/data/systems``: a spatial RSSR four-bar closed by a ``connect``
equality (two trees: crank + ball-jointed coupler, rocker) and two 6-R arms holding a free box by two
``weld`` equalities. States satisfy MuJoCo's own equality constraints (Gauss-Newton on its residual), so they
are consistent for whatever MuJoCo means by the equalities; at each, our q̈ and constraint forces equal
Pinocchio's on two Pinocchio models:

* ``to_pinocchio`` of the imported system (our parameters, Pinocchio's algorithms): q̈ and λ (the force by E
  on P in world axes, ``LOCAL_WORLD_ALIGNED``) to 1e-8;
* for the four-bar also Pinocchio's own MJCF parser with its own constraint models
  (``buildModelAndLegacyConstraintsFromMJCF``: neither MuJoCo's compiler nor ours): q̈ to 1e-8. (Pinocchio
  4.1's parser reads only the first top-level body, so the four-bar's two trees hang from one jointless base;
  the dual arm's free box must be a top-level body for MuJoCo, so its three trees cannot be read by it.)
"""
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax
from mrds_jax import system as S
from mrds_jax.export import to_pinocchio
from mrds_jax.loaders.mjcf import load_mjcf
from mujoco_states import consistent_states

EXAMPLES = Path(mrds_jax.__file__).parent / "data" / "systems"     # the ready-made MJCF files
N_STATES = 10
TOL = 1e-8


@functools.lru_cache(maxsize=None)
def case(name, seed):
    """(system, mapping, MuJoCo model, states, joint forces, our batched forward dynamics)."""
    path = EXAMPLES / f"{name}.xml"
    system, mapping = load_mjcf(path, return_mapping=True)
    model = mujoco.MjModel.from_xml_path(str(path))
    rng = np.random.default_rng(seed)
    states = consistent_states(model, mapping, rng, N_STATES)
    taus = [tuple(jnp.asarray(rng.uniform(-3, 3, m.nv)) for m in system.modules) for _ in states]
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
    fd = jax.jit(jax.vmap(lambda st, tau: S.forward_dynamics(system, st, tau)))
    out = jax.tree.map(np.asarray, fd(stack(states), stack(taus)))
    return system, mapping, path, states, taus, out


def world_force(twin, state_q, contact, F):
    """F_EP (frame E, [angular; linear], at P) → Pinocchio's λ layout: world axes, [linear(; angular)]."""
    d = twin.model.createData()
    pin.forwardKinematics(twin.model, d, twin.q(state_q))
    jid, M = twin.frame(*contact.E)
    R = (d.oMi[jid] * M).rotation
    return R @ F[3:] if contact.kind == "spherical" else np.concatenate([R @ F[3:], R @ F[:3]])


def pin_own_parse(path):
    """Pinocchio's MJCF parser: (model, constraint models)."""
    model, cms = pin.buildModelAndLegacyConstraintsFromMJCF(str(path))
    return model, list(cms)


def mujoco_to_pin(pmodel, mj_model, qpos, qvel, qfrc):
    """MuJoCo (qpos, qvel, generalized force) → Pinocchio's, joint by joint (same tree order): quaternions
    (w, x, y, z) → (x, y, z, w); a free joint's [v_world; ω_body] → [v_body; ω_body]."""
    q, v, f = [], [], []
    for j in range(mj_model.njnt):
        a, b, t = mj_model.jnt_qposadr[j], mj_model.jnt_dofadr[j], mj_model.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            quat = qpos[a + 3:a + 7]
            R = pin.Quaternion(*quat).toRotationMatrix()      # pin.Quaternion(w, x, y, z)
            q.append(np.concatenate([qpos[a:a + 3], quat[1:], quat[:1]]))
            v.append(np.concatenate([R.T @ qvel[b:b + 3], qvel[b + 3:b + 6]]))
            f.append(np.concatenate([R.T @ qfrc[b:b + 3], qfrc[b + 3:b + 6]]))
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            q.append(np.concatenate([qpos[a + 1:a + 4], qpos[a:a + 1]]))
            v.append(qvel[b:b + 3]), f.append(qfrc[b:b + 3])
        else:
            q.append(qpos[a:a + 1]), v.append(qvel[b:b + 1]), f.append(qfrc[b:b + 1])
    return np.concatenate(q), np.concatenate(v), np.concatenate(f)


@pytest.mark.parametrize("name, seed, kinds, own_parser", [("fourbar", 1, ["spherical"], True),
                                                          ("dual_arm_grasp", 2, ["weld", "weld"], False)])
def test_mjcf_loop_equals_pinocchio_constraint_dynamics(name, seed, kinds, own_parser):
    system, mapping, path, states, taus, out = case(name, seed)
    assert [c.kind for c in system.contacts] == kinds
    twin = to_pinocchio(system)
    assert twin.constraint_names == system.contact_names
    if own_parser:
        own_model, own_cms = pin_own_parse(path)
        mj_model = mujoco.MjModel.from_xml_path(str(path))
        assert own_model.nv == twin.model.nv and len(own_cms) == len(kinds)
    for k, (state, tau) in enumerate(zip(states, taus)):
        qp, vp, taup = twin.q(state.q), twin.v(state.v), twin.v(tau)
        ddq, lam, J = twin.constraint_dynamics(qp, vp, taup)
        assert np.abs(J @ vp).max() < 1e-12                                  # consistent for Pinocchio too
        np.testing.assert_allclose(twin.v([out.qdd[m][k] for m in range(len(system.modules))]), ddq,
                                   atol=TOL, rtol=0)
        ours = np.concatenate([world_force(twin, state.q, c, out.F_EP[i][k]) for i, c in enumerate(system.contacts)])
        np.testing.assert_allclose(ours, lam, atol=TOL * max(1.0, np.abs(lam).max()), rtol=0)
        if not own_parser:
            continue
        # Pinocchio's own reading of the file: the same motion (q̈ in MuJoCo's joint order and velocity layout)
        qpos, qvel = mapping.to_mujoco(state)
        _, qfrc = mapping.to_mujoco(S.SystemState(state.q, tau))
        q_o, v_o, f_o = mujoco_to_pin(own_model, mj_model, qpos, qvel, qfrc)
        ddq_o = pin_constraint_dynamics(own_model, own_cms, q_o, v_o, f_o)
        # our q̈ through the velocity maps: a free joint's [ω̇; v̇_body] → [v̇_body; ω̇], Pinocchio's convention
        qdd_mj = mapping.to_mujoco(S.SystemState(state.q, tuple(out.qdd[m][k] for m in range(len(system.modules)))))[1]
        _, qdd_o, _ = mujoco_to_pin(own_model, mj_model, qpos, qdd_mj, qdd_mj)
        np.testing.assert_allclose(qdd_o, ddq_o, atol=TOL, rtol=0)


def pin_constraint_dynamics(model, cms, q, v, tau):
    data = model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(model, data, cms, cds)
    return pin.constraintDynamics(model, data, q, v, tau, cms, cds, pin.ProximalSettings()).copy()
