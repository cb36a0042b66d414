"""The module contract (:class:`.interface.ModuleContract`) for a rigid tree, :class:`mrds_jax.model.Module`: Bonaventura's
Step 2 (Table 18) answered by the recursions of this package (forward kinematics, CRBA, RNEA, ABA, the
operational-space quantities of Bonaventura eq. 69-75).
"""
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from ..model import configuration
from ..model.tree import Module, task_slice
from ..spatial.linalg import matmul
from . import energy, ground, interface
from .aba import aba
from .crba import mass_matrix, mass_matrix_from_kinematics, mass_matrix_solve
from .levels import loop_recursion, uses_level_scan
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


def _uses_ground_coordinates(module):
    """Whether Step 2 of this tree runs in ground coordinates (:mod:`.ground`): on the level-scan route
    (``levels.uses_level_scan``: trees from 24 links, or from 12 with contact points), where it replaces the
    recursions' level scans by products with the ancestor matrix (the four-loop biped's Euler step: 821 → 613
    kernels, compile 8.7 → 6.1 s, 42,100 → 47,600 steps/s at batch 4096, ``mjcf_speed.py``); small trees keep the
    unrolled link-coordinate passes, which run faster there (the Stewart platform's legs and plate on Lilly & Orin's
    path: 335,000 steps/s against 253,000 in ground coordinates, ``stewart_speed.py``, batch 4096, jax 0.10.2)."""
    return uses_level_scan(module.topology)


class Step2Pieces(NamedTuple):
    """What Step 2 of a rigid tree computes before its solve with H (:func:`_step2_pieces`)."""
    H: jnp.ndarray            # (nv, nv), armature included
    bias: jnp.ndarray         # (nv,) C v + G
    J: jnp.ndarray            # (n·d, nv) the points' task Jacobians
    points_at: Callable       # q̈ -> (R, p, ẋ, ẍ) of the points, ẍ classical at that q̈


def _step2_pieces(module, q, v, points):
    """H (CRBA), C v + G (RNEA at q̈ = 0) and the points' task Jacobians from one kinematics pass, in ground
    coordinates or link by link (:func:`_uses_ground_coordinates`)."""
    if _uses_ground_coordinates(module):
        g = ground.ground_terms(module, q, v, points)
        return Step2Pieces(g.H, g.bias, g.J, lambda qdd: (g.points.R, g.points.p, g.points.xd,
                                                          ground.point_accelerations_at(module, g, qdd)))
    kin = forward_kinematics(module, q, v)
    J = task_jacobian(module, q, points, "world_aligned", kin)
    return Step2Pieces(mass_matrix_from_kinematics(module, kin), nonlinear_effects_from_kinematics(module, kin), J,
                       lambda qdd: _points_kinematics(module, kin, link_accelerations(module, kin, qdd), points))


def _solve_with_mass_matrix(module, H, bias, tau, columns):
    """(q̈ᵒᵖᵉⁿ, H⁻¹ columns) from one solve ``mass_matrix_solve(H, [τ − C v − G | columns])`` (Bonaventura eq. 68
    and, with columns = Jᵀ, Bonaventura eq. 75)."""
    X = mass_matrix_solve(module, H, jnp.concatenate([(tau - bias)[:, None], columns], axis=1))
    return X[:, 0], X[:, 1:]


def _terms_along(module, q, v, tau, points, D, method="direct"):
    """:func:`~.interface.module_terms_along` of a rigid tree. On the ground-coordinate route
    (:func:`_uses_ground_coordinates`) the solve with H takes only the c columns Jᵀ D (one matrix product with the
    dense D: measured faster than moving D's columns to the ground frame as wrenches and summing them over subtrees
    without forming J, 17.9-18.6 against 20.6-22.7 µs per biped Euler step at batch 4096): U = H⁻¹ Jᵀ D and
    K = (Jᵀ D)ᵀ U. Small trees and the
    ``"recursive"`` route answer through ``module_terms`` block by block (the generic form): there the solve is
    cheap and the blocks are small products (the Stewart platform's general path: 92,700 steps/s through a dense
    D against 127,000 block by block, ``stewart_speed.py --path general``, batch 4096)."""
    if method != "direct" or not _uses_ground_coordinates(module):
        return interface.module_terms_along.dispatch(object)(module, q, v, tau, points, D, method)
    g = ground.ground_terms(module, q, v, points)
    V = jnp.matmul(g.J.T, D.dense(len(points), module.task_dim), precision=jax.lax.Precision.HIGHEST)
    qdd, U = _solve_with_mass_matrix(module, g.H, g.bias, tau, V)
    return interface.ColumnTerms(qdd, ground.point_accelerations_at(module, g, qdd), U, matmul(V.T, U))


class RigidTree(interface.ModuleContract):
    """The contract's methods for :class:`mrds_jax.model.Module` (``self`` is the rigid tree), paired with it by
    :func:`.interface.implement` below: the model layer defines the tree, this layer its dynamics."""

    def module_terms(self, q, v, tau, points, method="direct"):
        """Bonaventura Step 2 (Table 18) for a rigid tree and its contact points ``points`` (frame names).

        ``method="direct"``: H by the CRBA, C v + G by the RNEA at q̈ = 0 and the points' Jacobians from one
        kinematics pass, and one solve with H for both q̈ᵒᵖᵉⁿ = H⁻¹(τ − C v − G) (Bonaventura eq. 68) and Ψ = H⁻¹ Jᵀ
        (Bonaventura eq. 75): ``mass_matrix_solve(H, [τ − b | Jᵀ])`` (Cholesky, or Featherstone's sparse LTLᵀ for
        mid-size trees); Λ⁻¹ = J Ψ (Bonaventura eq. 69-70). The pass is in ground coordinates (:mod:`.ground`:
        every recursion but the placements a product with the tree's ancestor matrix) for a module on the level-scan
        route, in link coordinates link by link for one on the unrolled route (fewer operations, each on a few
        numbers: faster for small trees, :func:`_uses_ground_coordinates`). ``method="recursive"``: q̈ᵒᵖᵉⁿ by ABA
        and Ψ by the O(N) recursions of :func:`~mrds_jax.dynamics.cross_space_inertia` (Table 9): a second route
        to the same terms (``tests/test_ground_coordinates.py``)."""
        if method == "direct":
            pieces = _step2_pieces(self, q, v, points)
            qdd, Psi = _solve_with_mass_matrix(self, pieces.H, pieces.bias, tau, pieces.J.T)
            R, p, xd, xdd = pieces.points_at(qdd)
            return interface.ModuleTerms(qdd, R, p, xd, xdd, Psi, matmul(pieces.J, Psi), pieces.J)
        kin = forward_kinematics(self, q, v)
        J = task_jacobian(self, q, points, "world_aligned", kin)
        qdd = aba(self, q, v, tau)
        Psi = cross_space_inertia(self, q, points, "world_aligned", method)
        R, p, xd, xdd = _points_kinematics(self, kin, link_accelerations(self, kin, qdd), points)
        return interface.ModuleTerms(qdd, R, p, xd, xdd, Psi, matmul(J, Psi), J)

    def open_chain_acceleration(self, q, v, tau):
        """ABA (Featherstone Table 7.1)."""
        return aba(self, q, v, tau)

    def open_chain_inverse_dynamics(self, q, v, qdd):
        """RNEA."""
        return rnea(self, q, v, qdd)

    def point_motion(self, q, v, points):
        """The points' placements and velocities, from the same kinematics pass as :meth:`module_terms` (so that
        a program asking both computes it once)."""
        if _uses_ground_coordinates(self):
            pts = ground.point_kinematics(self, ground.ground_kinematics(self, q, v), points)[0]
            return interface.PointMotion(pts.R, pts.p, pts.xd)
        return interface.PointMotion(*_points_kinematics(self, forward_kinematics(self, q, v), None, points))

    def point_jacobians(self, q, points):
        kin = forward_kinematics(self, q)
        return jnp.stack([frame_jacobian(self, q, f, "world_aligned", kin) for f in points])

    def reference_terms(self, q, v, points):
        """H₀ (CRBA), C₀v + G₀ (RNEA at q̈ = 0), and the points' placements, velocities, J̇v and task Jacobians,
        all from one kinematics pass (in ground coordinates or link by link, as for :meth:`module_terms`)."""
        if _uses_ground_coordinates(self):
            g = ground.ground_terms(self, q, v, points)
            return interface.ReferenceTerms(g.H, g.bias, g.points.R, g.points.p, g.points.xd, g.point_bias,
                                            g.points.J[:, task_slice(self.task_dim)])
        kin = forward_kinematics(self, q, v)
        rows = task_slice(self.task_dim)
        R, p, xd, bias = _points_kinematics(self, kin, link_accelerations(self, kin, jnp.zeros_like(v)), points)
        J = jnp.stack([frame_jacobian(self, q, f, "world_aligned", kin)[rows] for f in points])
        return interface.ReferenceTerms(mass_matrix_from_kinematics(self, kin),
                                        nonlinear_effects_from_kinematics(self, kin), R, p, xd, bias, J)

    def mass_matrix(self, q):
        """CRBA."""
        return mass_matrix(self, q)

    def kinetic_energy(self, q, v):
        return energy.kinetic_energy(self, q, v)

    def potential_energy(self, q):
        return energy.potential_energy(self, q)

    def spatial_momentum(self, q, v):
        return energy.spatial_momentum(self, q, v)

    def configuration_derivative(self, q, v):
        return configuration.configuration_derivative(self, q, v)

    def integrate_configuration(self, q, v, dt):
        return configuration.integrate_configuration(self, q, v, dt)

    def normalize_configuration(self, q):
        return configuration.normalize_configuration(self, q)


interface.implement(Module, RigidTree)
interface.module_terms_along.register(Module)(_terms_along)
interface.with_loop_points.register(Module)(loop_recursion)
