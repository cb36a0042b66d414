"""Operational-space quantities of a module (Bonaventura Step 2; Lilly & Orin eq. 40-44).

For operational points O_i, O_j of one module:
  open-chain accelerations  q̈ᵒᵖᵉⁿ = H⁻¹(τ − Cv − G),  ẍᵒᵖᵉⁿ_O = J_O q̈ᵒᵖᵉⁿ + J̇_O v
  cross-space inertia       Ψ = H⁻¹ Jᵀ  (Lilly & Orin's Ω)
  multi-point inverse operational-space inertia  Λ⁻¹_{OiOj} = J_Oi H⁻¹ J_Ojᵀ  (Bonaventura eq. 69-70,
      Table 9)
  relative Jacobian         ᴱJ_EP = ᴱℜ_I (ᴵJ_IP − ᴵS_EP ᴵJ_IE)  (Bonaventura eq. 71)

Ψ and Λ⁻¹ have two routes, tested equal: ``"direct"`` (H solved along its tree sparsity, ``crba.mass_matrix_solve``) and ``"recursive"``, O(N) per
column: one ABA inertia pass, then for each unit task-space force a bias-force and forward pass
(the unit-force method; Lilly & Orin compute Λ⁻¹ this way by force propagation).
"""
import jax
import jax.numpy as jnp

from ..validation import module_arrays
from ..spatial import act_force, inv_act_force, rigid_body_transform, spatial_rotation
from .aba import aba, articulated_inertias, articulated_solve
from .crba import mass_matrix, mass_matrix_solve
from .minverse import METHODS
from .kinematics import (_check_reference, forward_kinematics, frame_acceleration, frame_jacobian, frame_motion,
                         frame_placement, link_accelerations, on_one_link, task_jacobian, task_rows)
from ..spatial.linalg import matmul



def _as_tuple(frames):
    return (frames,) if isinstance(frames, (str, int)) else tuple(frames)


def open_chain_accelerations(module, q, v, tau, frames=(), f_ext=None, reference="world_aligned",
                             support_velocity=None, support_acceleration=None):
    """(q̈ᵒᵖᵉⁿ, ẍᵒᵖᵉⁿ): joint accelerations with no contact forces, and the task-space accelerations of
    ``frames`` (stacked, d = 6 or 3 rows each) they produce, with the support's motion included."""
    frames = _as_tuple(frames)
    qdd = aba(module, q, v, tau, f_ext, support_velocity, support_acceleration)
    kin = forward_kinematics(module, q, v, support_velocity)
    acc = link_accelerations(module, kin, qdd, support_acceleration)
    rows = task_rows(module)
    xdd = [frame_acceleration(module, kin, acc, f, reference)[rows] for f in frames]
    return qdd, (jnp.concatenate(xdd) if xdd else jnp.zeros(0, dtype=q.dtype))


def _check_method(method):
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")


def cross_space_inertia(module, q, frames, reference="world_aligned", method="direct"):
    """Ψ = H⁻¹ Jᵀ, (nv, k·d) for k operational points."""
    return _operational_solve(module, q, _as_tuple(frames), (), reference, method)[0]


def inverse_osim(module, q, frames, frames_j=None, reference="world_aligned", method="direct"):
    """Multi-point inverse operational-space inertia Λ⁻¹_{OiOj} = J_Oi H⁻¹ J_Ojᵀ (Bonaventura eq. 69), blocks for every
    pair (O_i in ``frames``, O_j in ``frames_j``, default the same points), (k_i·d, k_j·d)."""
    frames = _as_tuple(frames)
    frames_j = frames if frames_j is None else _as_tuple(frames_j)
    return _operational_solve(module, q, frames_j, frames, reference, method)[1]


def _operational_solve(module, q, force_frames, accel_frames, reference, method):
    """Ψ for unit forces at ``force_frames`` and Λ⁻¹ (rows: ``accel_frames``, cols: ``force_frames``)."""
    q = module_arrays(module, "operational-space quantities", q=q)
    _check_reference(reference)
    _check_method(method)
    kin = forward_kinematics(module, q)
    if method == "direct":
        H = mass_matrix(module, q)
        J = task_jacobian(module, q, force_frames, reference, kin)
        Psi = mass_matrix_solve(module, H, J.T)
        Ji = task_jacobian(module, q, accel_frames, reference, kin) if accel_frames else J[:0]
        return Psi, matmul(Ji, Psi)
    return _unit_force_columns(module, q, kin, force_frames, accel_frames, reference)


def _task_force_on_link(module, kin, frame, reference, w):
    """Link-frame force equivalent to a task-space force ``w`` (6-D, dual of the Jacobian's twist) at an
    operational point."""
    t, par = module.topology, module.params
    f = t.frame_index(frame)
    R_f, p_f = frame_placement(module, kin, frame)
    if reference == "world":
        link = t.frame_links[f]
        return inv_act_force(kin.world_R[link], kin.world_p[link], w)
    if reference == "world_aligned":
        w = jnp.concatenate([matmul(R_f.T, w[:3]), matmul(R_f.T, w[3:])])
    return act_force(par.frame_R[f], par.frame_p[f], w)


def _unit_force_columns(module, q, kin, force_frames, accel_frames, reference):
    t = module.topology
    art = articulated_inertias(module, kin)
    rows = task_rows(module)
    zero6 = jnp.zeros(6, dtype=q.dtype)
    zeros = on_one_link(module, kin, None, zero6)
    zero_tau = jnp.zeros(t.nv, dtype=q.dtype)
    psi_cols, lam_cols = [], []
    for frame in force_frames:
        link = t.frame_links[t.frame_index(frame)]

        def column(e, frame=frame, link=link):
            f_link = _task_force_on_link(module, kin, frame, reference, e)
            bias = on_one_link(module, kin, link, -f_link)
            qdd, acc = articulated_solve(module, kin, art, zero_tau, bias, zeros, zero6)
            lam = [frame_motion(module, kin, acc, g, reference)[rows] for g in accel_frames]
            return qdd, (jnp.concatenate(lam) if lam else jnp.zeros(0, dtype=q.dtype))

        basis = jnp.eye(6, dtype=q.dtype)[rows]
        qdd, lam = jax.vmap(column)(basis)
        psi_cols.append(qdd.T)
        lam_cols.append(lam.T)
    return jnp.concatenate(psi_cols, axis=1), jnp.concatenate(lam_cols, axis=1)


def relative_jacobian(module, q, frame_E, frame_P):
    """ᴱJ_EP = ᴱℜ_I (ᴵJ_IP − ᴵS_EP ᴵJ_IE) (Bonaventura eq. 71, Bonaventura eq. 48): the twist of P relative to a body
    rigidly attached to E at P's location, in E's axes; task rows only for planar modules."""
    kin = forward_kinematics(module, q)
    J_E = frame_jacobian(module, q, frame_E, "world_aligned", kin)
    J_P = frame_jacobian(module, q, frame_P, "world_aligned", kin)
    R_E, p_E = frame_placement(module, kin, frame_E)
    _, p_P = frame_placement(module, kin, frame_P)
    J = matmul(spatial_rotation(R_E.T), J_P - matmul(rigid_body_transform(p_P - p_E), J_E))
    return J[task_rows(module)]
