"""Articulated-body algorithm (Featherstone Table 7.1), split so the q-only inertia pass can be shared by
many right-hand sides (used by the O(N) operational-space route in ``operational.py``).

Table 7.1 has three passes: outward (link velocities vᵢ and velocity products cᵢ: ``forward_kinematics``),
inward (articulated inertias Iᴬᵢ and bias forces pᴬᵢ, each link handing ᶦ⁻¹X*ᵢ Iᵃᵢ ᶦXᵢ₋₁ and ᶦ⁻¹X*ᵢ pᵃᵢ to
its parent) and outward again (accelerations aᵢ and q̈ᵢ). The per-link bodies below (``_articulated_step``,
``_bias_force_step``, ``_acceleration_step``) are those of the textbook loop, written once: the unrolled route
calls them link by link, the level-scan route on every link of a depth level at once (``levels.py``). Inertia and bias passes are separate sweeps so that the q-only one
serves many right-hand sides.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..validation import module_arrays
from ..spatial import act_force, cross_force, inv_act_motion, transform_inertia
from .common import gravity_acceleration, link_external_forces, link_inertias
from .kinematics import forward_kinematics, is_stacked
from .levels import inward, outward
from .stacked_joints import link_coordinates, module_coordinates, padding_identity
from ..spatial.linalg import matmul, spd_solve


class ArticulatedInertias(NamedTuple):
    """Per link (lists on the unrolled route; (n, ...) arrays, subspaces padded to width w, on the
    level-scan route)."""
    U: list        # Uᵢ = Iᴬᵢ Sᵢ
    D_inv: list    # (Sᵢᵀ Uᵢ)⁻¹
    Ia: list       # Iᴬᵢ − Uᵢ Dᵢ⁻¹ Uᵢᵀ, the inertia handed to the parent (link frame)


def _inverse_small(D):
    """Dᵢ⁻¹ of the joint's (nvᵢ x nvᵢ) articulated inertia, symmetric positive definite, without LAPACK."""
    if D.shape == (1, 1):
        return 1.0 / D
    if D.shape == (0, 0):          # a fixed joint (unrolled route)
        return D
    return spd_solve(D, jnp.eye(D.shape[0], dtype=D.dtype))


def _articulated_step(children, link):
    """One link of the inertia pass: Iᴬᵢ = Iᵢ + Σ_children (their hand-offs), Uᵢ = Iᴬᵢ Sᵢ, Dᵢ = SᵢᵀUᵢ + the
    joint's armature (diagonal), Iᵃᵢ = Iᴬᵢ − Uᵢ Dᵢ⁻¹ Uᵢᵀ; hands ᶦ⁻¹X*ᵢ Iᵃᵢ ᶦXᵢ₋₁ to the parent. ``diagonal``
    is diag(armature) on the joint's columns and the identity on padded columns of Sᵢ."""
    I, S, diagonal, R, p = link
    IA = I + children
    U = matmul(IA, S)
    D_inv = _inverse_small(matmul(S.T, U) + diagonal)
    Ia = IA - matmul(matmul(U, D_inv), U.T)
    return transform_inertia(R, p, Ia), ArticulatedInertias(U, D_inv, Ia)


def articulated_inertias(module, kin):
    """Backward pass over the articulated-body inertias; depends on q only. The joints' armature (rotor
    inertia) enters Dᵢ = SᵢᵀIᴬᵢSᵢ + diag(armatureᵢ), as in Pinocchio's ABA, so q̈ = (H + diag(armature))⁻¹(…)."""
    t = module.topology
    armature = module.params.armature
    if is_stacked(kin):
        arm = link_coordinates(t, armature)
        diagonal = padding_identity(t, kin.local_R.dtype) + arm[:, :, None] * jnp.eye(arm.shape[1], dtype=arm.dtype)
        return inward(t, _articulated_step, jnp.zeros((6, 6), kin.local_R.dtype),
                      (link_inertias(module), kin.S.padded, diagonal, kin.local_R, kin.local_p))
    inertias = link_inertias(module)
    links = [(inertias[i], kin.S[i], jnp.diag(armature[t.v_slices[i]]), kin.local_R[i], kin.local_p[i])
             for i in range(t.n_links)]
    out = inward(t, _articulated_step, jnp.zeros((6, 6), kin.local_R[0].dtype), links)
    return ArticulatedInertias(*(list(x) for x in zip(*out)))


def _bias_force_step(children, link):
    """One link of the bias-force pass: pᴬᵢ = pᵢ + Σ_children, uᵢ = τᵢ − Sᵢᵀ pᴬᵢ, pᵃᵢ = pᴬᵢ + Iᵃᵢ cᵢ + Uᵢ Dᵢ⁻¹ uᵢ;
    hands ᶦ⁻¹X*ᵢ pᵃᵢ to the parent."""
    p_own, tau, S, art, c, R, p = link
    pA = p_own + children
    u = tau - matmul(S.T, pA)
    pa = pA + matmul(art.Ia, c) + matmul(art.U, matmul(art.D_inv, u))
    return act_force(R, p, pa), u


def _acceleration_step(a_parent, link):
    """One link of the acceleration pass: aᵢ' = ᶦXᵢ₋₁ a_λ(i) + cᵢ, q̈ᵢ = Dᵢ⁻¹ (uᵢ − Uᵢᵀ aᵢ'), aᵢ = aᵢ' + Sᵢ q̈ᵢ."""
    R, p, c, u, S, art = link
    a = inv_act_motion(R, p, a_parent) + c
    qdd = matmul(art.D_inv, u - matmul(art.U.T, a))
    return a + matmul(S, qdd), qdd


def articulated_solve(module, kin, art, tau, bias_forces, velocity_products, root_acceleration):
    """Bias-force backward pass and acceleration forward pass of ABA.

    ``bias_forces`` (per link, link frame): vᵢ ×* Iᵢ vᵢ − f_ext,i; ``velocity_products``: cᵢ per link;
    ``root_acceleration``: spatial acceleration of the support (gravity included).
    Returns (q̈, link accelerations)."""
    t = module.topology
    if is_stacked(kin):
        bias, c = jnp.asarray(bias_forces), jnp.asarray(velocity_products)
        u = inward(t, _bias_force_step, jnp.zeros(6, bias.dtype),
                   (bias, link_coordinates(t, tau), kin.S.padded, art, c, kin.local_R, kin.local_p))
        acc, qdd = outward(t, _acceleration_step, root_acceleration, (kin.local_R, kin.local_p, c, u, kin.S.padded, art))
        return module_coordinates(t, qdd), acc
    art_i = [ArticulatedInertias(art.U[i], art.D_inv[i], art.Ia[i]) for i in range(t.n_links)]
    u = inward(t, _bias_force_step, jnp.zeros(6, tau.dtype),
               [(bias_forces[i], tau[t.v_slices[i]], kin.S[i], art_i[i], velocity_products[i], kin.local_R[i],
                 kin.local_p[i]) for i in range(t.n_links)])
    acc, qdd = outward(t, _acceleration_step, root_acceleration,
                       [(kin.local_R[i], kin.local_p[i], velocity_products[i], u[i], kin.S[i], art_i[i])
                        for i in range(t.n_links)])
    return jnp.concatenate(qdd), acc


def velocity_bias_forces(inertias, velocities, f_ext):
    """pᵢ = vᵢ ×* Iᵢ vᵢ − f_ext,i for every link (stacked arrays or lists)."""
    if isinstance(velocities, (list, tuple)):
        return [cross_force(v, matmul(inertias[i], v)) - f_ext[i] for i, v in enumerate(velocities)]
    return jax.vmap(lambda I, v: cross_force(v, matmul(I, v)))(inertias, velocities) - f_ext


def aba(module, q, v, tau, f_ext=None, support_velocity=None, support_acceleration=None):
    """Forward dynamics q̈ = H⁻¹ (τ − C v − G + Σ Jᵢᵀ f_ext,i), O(N): Featherstone Table 7.1, gravity as a
    fictitious support acceleration (§5.3)."""
    q, v, tau = module_arrays(module, "aba", q=q, v=v, tau=tau)
    kin = forward_kinematics(module, q, v, support_velocity)
    art = articulated_inertias(module, kin)
    bias = velocity_bias_forces(link_inertias(module), kin.velocity, link_external_forces(module, f_ext, q.dtype))
    qdd, _ = articulated_solve(module, kin, art, tau, bias, kin.velocity_product,
                               gravity_acceleration(module, support_acceleration))
    return qdd
