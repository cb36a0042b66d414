"""The module interface (:mod:`.interface`) for a rigid tree, :class:`mrds_jax.model.Module`: Bonaventura's
Step 2 (Table 18) answered by the recursions of this package (forward kinematics, CRBA, RNEA, ABA, the
operational-space quantities of eq. 69-75).
"""
import jax.numpy as jnp

from ..model import configuration
from ..model.tree import Module, task_slice
from ..spatial.linalg import matmul, spd_solve
from . import energy, interface
from .aba import aba
from .crba import mass_matrix, mass_matrix_from_kinematics
from .kinematics import (forward_kinematics, frame_acceleration, frame_jacobian, frame_placement, frame_velocity,
                         link_accelerations, task_jacobian)
from .operational import cross_space_inertia
from .rnea import nonlinear_effects_from_kinematics, rnea


def _points_kinematics(module, kin, link_acc, points):
    """(R, p, ẋ) of the points, stacked, and ẍ (classical) from the link accelerations ``link_acc`` unless
    that is None."""
    out = []
    for f in points:
        R, p = frame_placement(module, kin, f)
        row = (R, p, frame_velocity(module, kin, f, "world_aligned"))
        if link_acc is not None:
            row += (frame_acceleration(module, kin, link_acc, f, "world_aligned"),)
        out.append(row)
    return tuple(jnp.stack(x) for x in zip(*out))


@interface.module_terms.register(Module)
def module_terms(module, q, v, tau, points, method="direct"):
    """Bonaventura Step 2 (Table 18) for a rigid tree and its contact points ``points`` (frame names).

    ``method="direct"``: one forward-kinematics pass, H by CRBA and C v + G by RNEA at q̈ = 0 on it, and one
    Cholesky factorisation of H for both q̈ᵒᵖᵉⁿ = H⁻¹(τ − C v − G) (eq. 68) and Ψ = H⁻¹ Jᵀ (eq. 75):
    ``spd_solve(H, [τ − b | Jᵀ])``; Λ⁻¹ = J Ψ (eq. 69-70). ``method="recursive"``: q̈ᵒᵖᵉⁿ by ABA and Ψ by
    the O(N) recursions of :func:`~mrds_jax.dynamics.cross_space_inertia` (Table 9)."""
    kin = forward_kinematics(module, q, v)
    J = task_jacobian(module, q, points, "world_aligned", kin)
    if method == "direct":
        H = mass_matrix_from_kinematics(module, kin)
        rhs = tau - nonlinear_effects_from_kinematics(module, kin)
        X = spd_solve(H, jnp.concatenate([rhs[:, None], J.T], axis=1))
        qdd, Psi = X[:, 0], X[:, 1:]
    else:
        qdd = aba(module, q, v, tau)
        Psi = cross_space_inertia(module, q, points, "world_aligned", method)
    R, p, xd, xdd = _points_kinematics(module, kin, link_accelerations(module, kin, qdd), points)
    return interface.ModuleTerms(qdd, R, p, xd, xdd, Psi, matmul(J, Psi))


@interface.open_chain_acceleration.register(Module)
def open_chain_acceleration(module, q, v, tau):
    """ABA (Featherstone Table 7.1)."""
    return aba(module, q, v, tau)


@interface.point_motion.register(Module)
def point_motion(module, q, v, points):
    return interface.PointMotion(*_points_kinematics(module, forward_kinematics(module, q, v), None, points))


@interface.point_jacobians.register(Module)
def point_jacobians(module, q, points):
    kin = forward_kinematics(module, q)
    return jnp.stack([frame_jacobian(module, q, f, "world_aligned", kin) for f in points])


@interface.reference_terms.register(Module)
def reference_terms(module, q, v, points):
    """H₀ (CRBA), C₀v + G₀ (RNEA at q̈ = 0), and the points' placements, velocities, J̇v and task Jacobians,
    all from one forward-kinematics pass."""
    kin = forward_kinematics(module, q, v)
    rows = task_slice(module.task_dim)
    R, p, xd, bias = _points_kinematics(module, kin, link_accelerations(module, kin, jnp.zeros_like(v)), points)
    J = jnp.stack([frame_jacobian(module, q, f, "world_aligned", kin)[rows] for f in points])
    return interface.ReferenceTerms(mass_matrix_from_kinematics(module, kin),
                                    nonlinear_effects_from_kinematics(module, kin), R, p, xd, bias, J)


interface.mass_matrix.register(Module)(mass_matrix)
interface.inverse_dynamics.register(Module)(lambda module, q, v, qdd: rnea(module, q, v, qdd))
interface.kinetic_energy.register(Module)(lambda module, q, v: energy.kinetic_energy(module, q, v))
interface.potential_energy.register(Module)(energy.potential_energy)
interface.spatial_momentum.register(Module)(energy.spatial_momentum)
interface.configuration_derivative.register(Module)(configuration.configuration_derivative)
interface.integrate_configuration.register(Module)(configuration.integrate_configuration)
interface.normalize_configuration.register(Module)(configuration.normalize_configuration)
