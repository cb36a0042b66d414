"""Rigid-tree module dynamics against Pinocchio (an engine nobody here wrote), float64, 20 random states
per model: H, RNEA (and C v + G), ABA, H⁻¹, frame Jacobians, J̇v, Λ⁻¹ (both routes)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax.export.pinocchio import PinocchioConversion, to_pinocchio
from robots import SIX_PERM, TREE_SPECS, pin_urdf_model, random_states, robot_model, tree_model

N_STATES = 20
TOL = 1e-9
MODELS = ["ur5", "panda"] + list(TREE_SPECS)
FRAMES = {"ur5": ("tool0", "forearm_link"), "panda": ("panda_hand_tcp", "panda_leftfinger")}


def _sym(M):
    return np.triu(M) + np.triu(M, 1).T


@functools.lru_cache(maxsize=None)
def case(name):
    """(module, pinocchio model, conversion, frames, states, our batched results): computed once."""
    if name in FRAMES:
        module, pmodel, frames = robot_model(name), pin_urdf_model(name), FRAMES[name]
    else:
        module = tree_model(name)
        pmodel = to_pinocchio(module).model
        frames = (module.topology.frame_names[-1], module.topology.frame_names[2])
    q, v, a, tau = random_states(module, np.random.default_rng(7), N_STATES)

    def ours(q, v, a, tau):
        kin = mj.forward_kinematics(module, q, v)
        acc = mj.link_accelerations(module, kin, jnp.zeros_like(v))
        out = dict(
            H=mj.mass_matrix(module, q), H_scan=mj.mass_matrix_parallel(module, q),
            rnea=mj.rnea(module, q, v, a), nle=mj.nonlinear_effects(module, q, v), aba=mj.aba(module, q, v, tau),
            Minv=mj.inverse_mass_matrix(module, q), Minv_rec=mj.inverse_mass_matrix(module, q, method="recursive"),
            lam=mj.inverse_osim(module, q, frames), lam_rec=mj.inverse_osim(module, q, frames, method="recursive"),
            psi=mj.cross_space_inertia(module, q, frames),
            psi_rec=mj.cross_space_inertia(module, q, frames, method="recursive"))
        for ref in ("world_aligned", "local", "world"):
            out[f"J_{ref}"] = jnp.stack([mj.frame_jacobian(module, q, f, ref) for f in frames])
        for ref in ("world_aligned", "local"):
            out[f"dJv_{ref}"] = jnp.stack([mj.frame_acceleration(module, kin, acc, f, ref) for f in frames])
        return out

    res = jax.tree.map(np.asarray, jax.jit(jax.vmap(ours))(q, v, a, tau))
    return module, pmodel, PinocchioConversion.of(module), frames, (q, v, a, tau), res


def pin_states(name):
    module, pmodel, conv, frames, (q, v, a, tau), res = case(name)
    data = pmodel.createData()
    for k in range(N_STATES):
        yield k, pmodel, data, conv.q(q[k]), conv.v(v[k]), conv.v(a[k]), conv.v(tau[k])


@pytest.mark.parametrize("name", MODELS)
def test_mass_matrix(name):
    _, _, conv, _, _, res = case(name)
    for k, m, d, q, v, a, tau in pin_states(name):
        H = conv.P.T @ _sym(pin.crba(m, d, q)) @ conv.P
        np.testing.assert_allclose(res["H"][k], H, atol=TOL, rtol=0)
        np.testing.assert_allclose(res["H_scan"][k], H, atol=TOL, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_rnea_and_nonlinear_effects(name):
    _, _, conv, _, _, res = case(name)
    for k, m, d, q, v, a, tau in pin_states(name):
        np.testing.assert_allclose(res["rnea"][k], conv.P.T @ pin.rnea(m, d, q, v, a), atol=TOL, rtol=0)
        np.testing.assert_allclose(res["nle"][k], conv.P.T @ pin.nonLinearEffects(m, d, q, v), atol=TOL, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_aba_and_inverse_mass_matrix(name):
    _, _, conv, _, _, res = case(name)
    for k, m, d, q, v, a, tau in pin_states(name):
        np.testing.assert_allclose(res["aba"][k], conv.P.T @ pin.aba(m, d, q, v, tau), atol=TOL, rtol=0)
        Minv = conv.P.T @ _sym(pin.computeMinverse(m, d, q)) @ conv.P
        np.testing.assert_allclose(res["Minv"][k], Minv, atol=TOL, rtol=0)
        np.testing.assert_allclose(res["Minv_rec"][k], Minv, atol=TOL, rtol=0)


PIN_REF = {"world_aligned": pin.LOCAL_WORLD_ALIGNED, "local": pin.LOCAL, "world": pin.WORLD}


@pytest.mark.parametrize("name", MODELS)
def test_frame_jacobians_and_bias_acceleration(name):
    _, _, conv, frames, _, res = case(name)
    for k, m, d, q, v, a, tau in pin_states(name):
        pin.computeJointJacobians(m, d, q)
        pin.forwardKinematics(m, d, q, v, np.zeros(m.nv))
        pin.updateFramePlacements(m, d)
        for i, f in enumerate(frames):
            fid = m.getFrameId(f)
            for ref, pref in PIN_REF.items():
                J = pin.getFrameJacobian(m, d, fid, pref)[SIX_PERM] @ conv.P
                np.testing.assert_allclose(res[f"J_{ref}"][k, i], J, atol=TOL, rtol=0, err_msg=f"{f} {ref}")
            dJv = pin.getFrameClassicalAcceleration(m, d, fid, pin.LOCAL_WORLD_ALIGNED).vector[SIX_PERM]
            np.testing.assert_allclose(res["dJv_world_aligned"][k, i], dJv, atol=TOL, rtol=0)
            dJv = pin.getFrameAcceleration(m, d, fid, pin.LOCAL).vector[SIX_PERM]
            np.testing.assert_allclose(res["dJv_local"][k, i], dJv, atol=TOL, rtol=0)


@pytest.mark.parametrize("name", MODELS)
def test_inverse_osim_and_cross_space_inertia(name):
    """Λ⁻¹_{OiOj} (all four blocks of two points) and Ψ = H⁻¹Jᵀ, both routes, against Pinocchio's J and M⁻¹."""
    _, _, conv, frames, _, res = case(name)
    for k, m, d, q, v, a, tau in pin_states(name):
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        J = np.concatenate([pin.getFrameJacobian(m, d, m.getFrameId(f), pin.LOCAL_WORLD_ALIGNED)[SIX_PERM]
                            for f in frames]) @ conv.P
        Minv = conv.P.T @ _sym(pin.computeMinverse(m, d, q)) @ conv.P
        for key in ("lam", "lam_rec"):
            np.testing.assert_allclose(res[key][k], J @ Minv @ J.T, atol=TOL, rtol=0)
        for key in ("psi", "psi_rec"):
            np.testing.assert_allclose(res[key][k], Minv @ J.T, atol=TOL, rtol=0)
