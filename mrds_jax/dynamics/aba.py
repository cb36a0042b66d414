"""Articulated-body algorithm (Featherstone Table 7.1), split so the q-only inertia pass can be shared by
many right-hand sides (used by the O(N) operational-space route in ``operational.py``)."""
from typing import NamedTuple

import jax.numpy as jnp

from ..model.tree import check_state
from ..spatial import act_force, cross_force, inv_act_motion, transform_inertia
from .common import gravity_acceleration, link_external_forces, link_inertias
from .kinematics import forward_kinematics
from ..spatial.linalg import matmul, spd_solve


class ArticulatedInertias(NamedTuple):
    U: list        # Uᵢ = Iᴬᵢ Sᵢ
    D_inv: list    # (Sᵢᵀ Uᵢ)⁻¹
    Ia: list       # Iᴬᵢ − Uᵢ Dᵢ⁻¹ Uᵢᵀ, the inertia handed to the parent (link frame)


def _inverse_small(D):
    """Dᵢ⁻¹ of the joint's (nvᵢ x nvᵢ) articulated inertia, symmetric positive definite, without LAPACK."""
    if D.shape == (1, 1):
        return 1.0 / D
    return spd_solve(D, jnp.eye(D.shape[0], dtype=D.dtype))


def articulated_inertias(module, kin):
    """Backward pass over the articulated-body inertias; depends on q only."""
    t = module.topology
    IA = list(link_inertias(module))
    U, D_inv, Ia = [None] * t.n_links, [None] * t.n_links, [None] * t.n_links
    for i in reversed(range(t.n_links)):
        S = kin.S[i]
        if S.shape[1] == 0:
            U[i], D_inv[i], Ia[i] = S, jnp.zeros((0, 0), dtype=S.dtype), IA[i]
        else:
            U[i] = matmul(IA[i], S)
            D_inv[i] = _inverse_small(matmul(S.T, U[i]))
            Ia[i] = IA[i] - matmul(matmul(U[i], D_inv[i]), U[i].T)
        parent = t.parents[i]
        if parent >= 0:
            IA[parent] = IA[parent] + transform_inertia(kin.local_R[i], kin.local_p[i], Ia[i])
    return ArticulatedInertias(U, D_inv, Ia)


def articulated_solve(module, kin, art, tau, bias_forces, velocity_products, root_acceleration):
    """Bias-force backward pass and acceleration forward pass of ABA.

    ``bias_forces`` (per link, link frame): vᵢ ×* Iᵢ vᵢ − f_ext,i; ``velocity_products``: cᵢ per link;
    ``root_acceleration``: spatial acceleration of the support (gravity included).
    Returns (q̈, link accelerations)."""
    t = module.topology
    pA = list(bias_forces)
    u = [None] * t.n_links
    for i in reversed(range(t.n_links)):
        S, vs = kin.S[i], t.v_slices[i]
        u[i] = tau[vs] - matmul(S.T, pA[i])
        pa = pA[i] + matmul(art.Ia[i], velocity_products[i]) + matmul(art.U[i], matmul(art.D_inv[i], u[i]))
        parent = t.parents[i]
        if parent >= 0:
            pA[parent] = pA[parent] + act_force(kin.local_R[i], kin.local_p[i], pa)
    acc, qdd = [], []
    for i in range(t.n_links):
        parent = t.parents[i]
        a_parent = root_acceleration if parent < 0 else acc[parent]
        a = inv_act_motion(kin.local_R[i], kin.local_p[i], a_parent) + velocity_products[i]
        qdd_i = matmul(art.D_inv[i], u[i] - matmul(art.U[i].T, a))
        acc.append(a + matmul(kin.S[i], qdd_i))
        qdd.append(qdd_i)
    return jnp.concatenate(qdd), acc


def aba(module, q, v, tau, f_ext=None, support_velocity=None, support_acceleration=None):
    """Forward dynamics q̈ = H⁻¹ (τ − C v − G + Σ Jᵢᵀ f_ext,i), O(N)."""
    check_state(module, q, v, "aba")
    kin = forward_kinematics(module, q, v, support_velocity)
    art = articulated_inertias(module, kin)
    inertias = link_inertias(module)
    fext = link_external_forces(module, f_ext, q.dtype)
    bias = [cross_force(vi, matmul(inertias[i], vi)) - fext[i] for i, vi in enumerate(kin.velocity)]
    qdd, _ = articulated_solve(module, kin, art, tau, bias, kin.velocity_product,
                               gravity_acceleration(module, support_acceleration))
    return qdd
