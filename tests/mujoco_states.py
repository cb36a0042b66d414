"""States that satisfy MuJoCo's own equality constraints (test helper shared by the MJCF tests)."""
import mujoco
import numpy as np


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
