"""MuJoCo comparison helpers shared by the MJCF tests: states that satisfy MuJoCo's own equality constraints,
random configurations in MuJoCo's layout, the maps between its velocities/accelerations and ours, the mass matrix
and bias forces against MuJoCo's, and MuJoCo's base height from a keyframe with stiff contacts."""
import jax.numpy as jnp
import mujoco
import numpy as np

from mrds_jax import system as S
from mrds_jax.spatial import quat_to_rotation


def consistent_states(model, mapping, rng, n, spread=0.3):
    """n states near MuJoCo's reference configuration that satisfy MuJoCo's equality constraints (Gauss-Newton
    on its residual efc_pos with its Jacobian efc_J; velocities projected on the nullspace of efc_J), as
    our states. Our constraints must then hold too: load_mjcf's contacts mean what MuJoCo's equalities mean."""
    data = mujoco.MjData(model)
    out = []
    for _ in range(n):
        qpos = np.array(model.qpos0)
        mujoco.mj_integratePos(model, qpos, rng.uniform(-spread, spread, model.nv), 1.0)
        for _ in range(30):
            data.qpos[:] = qpos
            mujoco.mj_forward(model, data)
            rows = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
            r, J = data.efc_pos[rows], data.efc_J.reshape(-1, model.nv)[rows]
            if np.abs(r).max() < 1e-13:
                break
            mujoco.mj_integratePos(model, qpos, -np.linalg.lstsq(J, r, rcond=1e-10)[0], 1.0)
        assert np.abs(r).max() < 1e-12
        qvel = rng.uniform(-1, 1, model.nv)
        qvel -= np.linalg.pinv(J, rcond=1e-10) @ (J @ qvel)
        out.append(mapping.state(qpos, qvel))
    return out


def mujoco_equalities(model, data, qpos, qvel, eps=1e-6):
    """(efc_pos, efc_J, J̇v) of MuJoCo's equality rows at (qpos, qvel); J̇v = (J(q + εv) − J(q − εv)) v / 2ε."""
    def rows(q):
        data.qpos[:], data.qvel[:] = q, qvel
        mujoco.mj_forward(model, data)
        r = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        return data.efc_pos[r].copy(), data.efc_J.reshape(-1, model.nv)[r].copy()
    Js = []
    for s in (1.0, -1.0):
        q = np.array(qpos)
        mujoco.mj_integratePos(model, q, qvel, s * eps)
        Js.append(rows(q)[1])
    pos, J = rows(qpos)
    return pos, J, (Js[0] - Js[1]) @ qvel / (2 * eps)


def mujoco_kkt_acceleration(model, data, qpos, qvel, ctrl=None):
    """The exact constrained qacc from MuJoCo's own quantities at (qpos, qvel, ctrl): M (``mj_fullM``, armature
    included), ``qfrc_bias``, ``qfrc_passive``, ``qfrc_actuator`` and the equality rows J = ``efc_J`` with J̇v
    (:func:`mujoco_equalities`), solving [M Jᵀ; J 0] [q̈; −λ] = [qfrc_passive + qfrc_actuator − qfrc_bias; −J̇v].
    Returns (qacc, efc_pos of the equalities, J)."""
    pos, J, Jdot_v = mujoco_equalities(model, data, qpos, qvel)
    data.qpos[:], data.qvel[:] = qpos, qvel
    if ctrl is not None:
        data.ctrl[:] = ctrl
    mujoco.mj_forward(model, data)
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, M)
    n = len(J)
    K = np.block([[M, J.T], [J, np.zeros((n, n))]])
    rhs = np.concatenate([data.qfrc_passive + data.qfrc_actuator - data.qfrc_bias, -Jdot_v])
    return np.linalg.solve(K, rhs)[:model.nv], pos, J


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


def velocity_map(mapping, state):
    """T with qvel = T v (v: all modules' velocities stacked), at state's configuration."""
    sizes = [len(v) for v in state.v]
    cols = []
    for i in range(sum(sizes)):
        e = np.zeros(sum(sizes))
        e[i] = 1.0
        vs = tuple(jnp.asarray(x) for x in np.split(e, np.cumsum(sizes)[:-1]))
        cols.append(mapping.to_mujoco(S.SystemState(state.q, vs))[1])
    return np.stack(cols, axis=1)


def qdd_to_mujoco(mapping, state, qdd):
    """Inverse of MjcfMapping.acceleration_from_mujoco."""
    nv = sum(len(i) for i in mapping.dof_index)
    out = np.zeros(nv)
    for di, free, q, v, a in zip(mapping.dof_index, mapping.free, state.q, state.v, qdd):
        a = np.array(a)
        for fq, fv in free:
            R = np.asarray(quat_to_rotation(jnp.asarray(q[fq + 3:fq + 7])))
            w, vb = np.asarray(v[fv:fv + 3]), np.asarray(v[fv + 3:fv + 6])
            a[fv:fv + 6] = np.concatenate([R @ (a[fv + 3:fv + 6] + np.cross(w, vb)), a[fv:fv + 3]])
        out[di] = a
    return out


def assert_mass_matrix_and_bias_equal_mujoco(module, mapping, model, rng, n_states=3, atol=1e-9):
    """Our mass matrix and bias forces of ``module`` equal MuJoCo's (``mj_fullM``, ``qfrc_bias``) at ``n_states``
    random states: ours are in our velocity coordinates v, MuJoCo's in qvel = T v, so M = Tᵀ M_mj T and
    b = Tᵀ (b_mj + M_mj Ṫv)."""
    import jax
    from mrds_jax.dynamics.crba import mass_matrix
    from mrds_jax.dynamics.rnea import nonlinear_effects
    data = mujoco.MjData(model)
    ours = jax.jit(lambda q, v: (mass_matrix(module, q), nonlinear_effects(module, q, v)))
    for _ in range(n_states):
        qpos, qvel = random_qpos(model, rng), rng.uniform(-2, 2, model.nv)
        state = mapping.state(qpos, qvel)
        data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
        mujoco.mj_forward(model, data)
        M_mj = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M_mj)
        T = velocity_map(mapping, state)
        Tdot_v = np.asarray(qdd_to_mujoco(mapping, state, (jnp.zeros(model.nv),)))
        M, b = ours(state.q[0], state.v[0])
        np.testing.assert_allclose(M, T.T @ M_mj @ T, atol=atol, rtol=0)
        np.testing.assert_allclose(b, T.T @ (data.qfrc_bias + M_mj @ Tdot_v), atol=atol, rtol=0)


def mujoco_base_heights(model, keyframe, dt, n_steps, every):
    """MuJoCo's run of ``model`` from ``keyframe`` with stiff contacts (``solref`` time constant 2 ms, the time
    constant of a 2 ms step), ``n_steps`` of ``dt``: the free base's height at the start and every ``every`` steps.
    Changes ``model``'s timestep and solref in place."""
    model.opt.timestep = dt
    model.geom_solref[:] = [0.002, 1.0]
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(keyframe).id)           # its qpos, qvel and ctrl
    z = [data.qpos[2]]
    for i in range(n_steps):
        mujoco.mj_step(model, data)
        if (i + 1) % every == 0:
            z.append(data.qpos[2])
    return np.array(z)
