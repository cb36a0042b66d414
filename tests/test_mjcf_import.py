"""MJCF import (``mrds_jax.load_mjcf``) against MuJoCo itself, an engine nobody here wrote.

* Trees: every joint type (hinge with ref and an off-origin axis, slide, ball, free, two hinges = universal),
  a jointless body merged, inertias computed by MuJoCo from geoms: mass matrix (mj_fullM) and forward
  dynamics (mj_forward's qacc) at random states, site placements.
* Loops: MuJoCo's constraints are soft, so its qacc differs from the exact one by M⁻¹Jᵀ Δf with J its
  constraint Jacobian (efc_J). Projected on the nullspace N of J, Nᵀ M q̈ does not depend on the constraint
  force: Nᵀ M (q̈_ours − q̈_mujoco) = 0 up to MuJoCo's solver tolerance. Together with the constraint
  holding exactly (MuJoCo's own residual efc_pos, differentiated twice along the motion), this determines
  q̈ — so both parts are checked against MuJoCo. The four-bar also equals the same mechanism built by hand.
* Round trip: export → load_mjcf gives the same dynamics to 1e-10.
* Unsupported elements: errors and warnings that name them.
"""
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.model.mjcf import load_mjcf

DATA = Path(__file__).parent / "data"


def random_qpos(model, rng):
    """A random configuration in MuJoCo's layout (unit quaternions for ball and free joints)."""
    qpos = np.array(model.qpos0)
    for j in range(model.njnt):
        a, t = model.jnt_qposadr[j], model.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a:a + 3] = rng.uniform(-1, 1, 3)
            u = rng.normal(size=4)
            qpos[a + 3:a + 7] = u / np.linalg.norm(u)
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            u = rng.normal(size=4)
            qpos[a:a + 4] = u / np.linalg.norm(u)
        else:
            qpos[a] = rng.uniform(-1.2, 1.2)
    return qpos


def velocity_map(mapping, state, nv):
    """T with qvel = T v (v: all modules' velocities stacked), at state's configuration."""
    sizes = [len(v) for v in state.v]
    cols = []
    for i in range(sum(sizes)):
        e = np.zeros(sum(sizes))
        e[i] = 1.0
        vs = tuple(jnp.asarray(x) for x in np.split(e, np.cumsum(sizes)[:-1]))
        cols.append(mapping.to_mujoco(S.SystemState(state.q, vs))[1])
    return np.stack(cols, axis=1)


# ----------------------------------------------------------------------------------------------- trees
@pytest.fixture(scope="module")
def tree():
    system, mapping = load_mjcf(DATA / "mjcf_tree.xml", return_mapping=True)
    model = mujoco.MjModel.from_xml_path(str(DATA / "mjcf_tree.xml"))
    return system, mapping, model


def test_tree_structure(tree):
    system, mapping, model = tree
    assert system.module_names == ("upper", "yoke", "drone")
    kinds = [m.topology.joint_kinds for m in system.modules]
    assert kinds == [("revolute", "prismatic", "spherical"), ("universal",), ("free", "revolute")]
    # the jointless bracket is merged into "upper": its mass is there, and it stays an operational point
    upper = system.modules[0]
    assert "bracket" in upper.topology.frame_names and "bracket" not in upper.topology.link_names
    b = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in ("upper", "bracket")]
    np.testing.assert_allclose(float(upper.params.mass[0]), model.body_mass[b].sum(), rtol=1e-12)
    assert sum(m.nq for m in system.modules) == model.nq and sum(m.nv for m in system.modules) == model.nv


def test_tree_mass_matrix_dynamics_and_sites_equal_mujoco(tree):
    system, mapping, model = tree
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    aba = jax.jit(mj.aba)
    crba = jax.jit(mj.mass_matrix)
    for _ in range(4):
        qpos = random_qpos(model, rng)
        qvel = rng.uniform(-2, 2, model.nv)
        state = mapping.state(qpos, qvel)
        tau = tuple(jnp.asarray(rng.uniform(-3, 3, m.nv)) for m in system.modules)
        data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
        data.qfrc_applied[:] = mapping.to_mujoco(S.SystemState(state.q, tau))[1]
        mujoco.mj_forward(model, data)
        # mass matrix: qvel = T v, so ours is Tᵀ M_mujoco T (block-diagonal over the modules)
        M_mj = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M_mj)
        T = velocity_map(mapping, state, model.nv)
        ours = jax.scipy.linalg.block_diag(*[crba(m, q) for m, q in zip(system.modules, state.q)])
        np.testing.assert_allclose(ours, T.T @ M_mj @ T, atol=1e-10)
        expected = mapping.acceleration_from_mujoco(state, data.qacc)
        for m, q, v, t, e in zip(system.modules, state.q, state.v, tau, expected):
            np.testing.assert_allclose(aba(m, q, v, t), e, atol=1e-9, rtol=1e-9)
        for s in range(model.nsite):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, s)
            k = next(k for k, m in enumerate(system.modules) if name in m.topology.frame_names)
            kin = mj.forward_kinematics(system.modules[k], state.q[k])
            R, p = mj.frame_placement(system.modules[k], kin, name)
            np.testing.assert_allclose(p, data.site_xpos[s], atol=1e-12)
            np.testing.assert_allclose(R, data.site_xmat[s].reshape(3, 3), atol=1e-12)
