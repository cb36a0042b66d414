"""A module given by its energies (a Lagrangian module whose H, C, G, J come from ``jax`` autodiff),
implementing the module contract (:class:`.interface.ModuleContract`) — the proof that a module need
not be a rigid tree, and the base for modules such as flexible links by assumed modes (Bonaventura
Appendix A), whose kinetic energy is ½ q̇ᵀ H(q) q̇ and whose potential includes the elastic energy.

The user supplies, as functions of a parameter pytree and q (nq = nv: no quaternion coordinates):

* ``mass_matrix(params, q)`` → H(q) (nv x nv, symmetric positive definite), T = ½ vᵀ H(q) v;
* ``potential(params, q)`` → V(q) (gravity, springs, elastic energy);
* ``points(params, q)`` → (R (n, 3, 3), p (n, 3)): the placements of the operational points ``frame_names``
  in the world;
* optionally ``bias(params, q, v)`` → b(q, v) below, when the module has a cheaper route to it than
  differentiating H (e.g. d'Alembert over mass points, b = Σ mᵢ Jᵢᵀ J̇ᵢ v + ∂V/∂q, :mod:`mrds_jax.flexible`);
  it must equal the Lagrange form (the flexible links' test checks the two routes against each other);
* optionally ``jacobians(params, q)`` → (n, 6, nv) world-aligned Jacobians of the points, when the module's
  contact kinematics deliberately uses a Jacobian that is not the derivative of ``points`` (Bonaventura
  Ch. 8.1's intermediate linearisation level, :mod:`mrds_jax.flexible`); J̇v is then the derivative of
  that J(q) v. Without it J is the derivative of the placements, as below;
* optionally ``momentum(params, q, v)`` → the module's total spatial momentum [angular about the world origin;
  linear] (6,), world axes (H and V do not determine it); without it ``spatial_momentum`` (and so
  ``system.total_momentum``) raises an error that says so.

Everything else follows from Lagrange's equations H q̈ + b(q, v) = τ with
    b = Ḣ v − ∂T/∂q + ∂V/∂q,   Ḣ v = (∂H/∂q · v) v           (Coriolis, centrifugal and potential forces)
and from the point placements: the Jacobian column of coordinate i is [unskew(∂R/∂qᵢ Rᵀ); ∂p/∂qᵢ]
(world axes), and J̇v is the derivative of J(q) v along q̇ = v — all by forward-mode differentiation.
Step 2 then is the same closed form as the rigid tree's "direct" route: one Cholesky of H for
q̈ᵒᵖᵉⁿ = H⁻¹(τ − b) and Ψ = H⁻¹ Jᵀ, Λ⁻¹ = J Ψ, ẍᵒᵖᵉⁿ = J q̈ᵒᵖᵉⁿ + J̇ v.
"""
from typing import Any, Callable

import jax
import jax.numpy as jnp

from ..model.tree import _lookup, task_slice
from ..pytree import pytree_dataclass, static
from ..spatial import unskew
from ..spatial.linalg import matmul, spd_solve
from . import interface


@pytree_dataclass
class EnergyModule:
    """A module described by H(q), V(q) and its operational points' placements (module docstring).

    ``params``: any pytree of arrays (differentiable, vmappable); ``mass_matrix``, ``potential``,
    ``points``: functions of (params, q); ``frame_names``: the names of the points, in the order ``points``
    returns them; ``nv``: the number of coordinates; ``planar``: task space [ω_z, v_x, v_y]."""
    params: Any
    mass_matrix: Callable = static()
    potential: Callable = static()
    points: Callable = static()
    frame_names: tuple = static()
    nv: int = static()
    planar: bool = static(default=False)
    bias: Callable = static(default=None)
    jacobians: Callable = static(default=None)
    momentum: Callable = static(default=None)

    @property
    def nq(self):
        return self.nv

    @property
    def task_dim(self):
        return 3 if self.planar else 6

    def frame_index(self, name):
        return _lookup(self.frame_names, name, "operational point")


def _placements(module, q, points):
    R, p = module.points(module.params, q)
    idx = [module.frame_index(f) for f in points]
    return R[jnp.asarray(idx)], p[jnp.asarray(idx)]


def _motion(R, p, dR, dp):
    """[ω; ṗ] of a placement moving with derivative (dR, dp): ω̃ = Ṙ Rᵀ."""
    return jnp.concatenate([unskew(matmul(dR, R.T)), dp])


def placement_jacobians(points, params, q):
    """(n, 6, nv) world-aligned Jacobians of all placements ``points(params, q)`` (forward mode, one column
    per coordinate: [unskew(∂R/∂qᵢ Rᵀ); ∂p/∂qᵢ])."""
    def column(e):
        (R, p), (dR, dp) = jax.jvp(lambda x: points(params, x), (q,), (e,))
        return jax.vmap(_motion)(R, p, dR, dp)
    cols = jax.vmap(column)(jnp.eye(q.shape[0], dtype=q.dtype))      # (nv, n, 6)
    return jnp.moveaxis(cols, 0, -1)


def _jacobians(module, q, points):
    """(len(points), 6, nv) Jacobians of the named points: the module's own ``jacobians`` when it has one,
    else the derivative of its placements."""
    J = (module.jacobians or (lambda params, x: placement_jacobians(module.points, params, x)))(module.params, q)
    return J[jnp.asarray([module.frame_index(f) for f in points])]


def _jdot_v(module, q, v, points):
    """J̇ v (n, 6): the derivative of J(q) v along q̇ = v."""
    return jax.jvp(lambda x: matmul(_jacobians(module, x, points), v), (q,), (v,))[1]


def _bias(module, q, v):
    """b = Ḣ v − ∂T/∂q + ∂V/∂q (Lagrange's equations), or the module's own ``bias`` when it has one."""
    if module.bias is not None:
        return module.bias(module.params, q, v)
    return lagrange_bias(module, q, v)


def lagrange_bias(module, q, v):
    """b = Ḣ v − ∂T/∂q + ∂V/∂q by differentiating H(q) and V(q) (Lagrange's equations)."""
    H = lambda x: module.mass_matrix(module.params, x)                               # noqa: E731
    Hdot = jax.jvp(H, (q,), (v,))[1]
    dT = jax.grad(lambda x: 0.5 * matmul(v, matmul(H(x), v)))(q)
    dV = jax.grad(lambda x: module.potential(module.params, x))(q)
    return matmul(Hdot, v) - dT + dV


class EnergyModuleDynamics(interface.ModuleContract):
    """The contract's methods for :class:`EnergyModule` (``self`` is the module), paired with it by
    :func:`.interface.implement` below (the class's own field ``mass_matrix`` is the user's function H(params, q),
    so the contract lives beside it rather than in it)."""

    def module_terms(self, q, v, tau, points, method="direct"):
        """Step 2 (Table 18) from H, b and the point kinematics (module docstring); ``method`` is ignored (the
        closed form is the only route)."""
        rows = task_slice(self.task_dim)
        H = self.mass_matrix(self.params, q)
        J6 = _jacobians(self, q, points)
        J = J6[:, rows].reshape(-1, self.nv)
        X = spd_solve(H, jnp.concatenate([(tau - _bias(self, q, v))[:, None], J.T], axis=1))
        qdd, Psi = X[:, 0], X[:, 1:]
        R, p = _placements(self, q, points)
        xd = matmul(J6, v)
        return interface.ModuleTerms(qdd, R, p, xd, matmul(J6, qdd) + _jdot_v(self, q, v, points), Psi,
                                     matmul(J, Psi), J)

    def open_chain_acceleration(self, q, v, tau):
        return spd_solve(self.mass_matrix(self.params, q), tau - _bias(self, q, v))

    def open_chain_inverse_dynamics(self, q, v, qdd):
        return matmul(self.mass_matrix(self.params, q), qdd) + _bias(self, q, v)

    def point_motion(self, q, v, points):
        R, p = _placements(self, q, points)
        return interface.PointMotion(R, p, matmul(_jacobians(self, q, points), v))

    def point_jacobians(self, q, points):
        return _jacobians(self, q, points)

    def reference_terms(self, q, v, points):
        R, p = _placements(self, q, points)
        J6 = _jacobians(self, q, points)
        return interface.ReferenceTerms(self.mass_matrix(self.params, q), _bias(self, q, v), R, p, matmul(J6, v),
                                        _jdot_v(self, q, v, points), J6[:, task_slice(self.task_dim)])

    def mass_matrix(self, q):
        return self.mass_matrix(self.params, q)

    def kinetic_energy(self, q, v):
        return 0.5 * matmul(v, matmul(self.mass_matrix(self.params, q), v))

    def potential_energy(self, q):
        return self.potential(self.params, q)

    def spatial_momentum(self, q, v):
        if self.momentum is None:
            raise TypeError("spatial_momentum: this EnergyModule was built without a momentum function (H(q) and "
                            "V(q) do not determine it); pass momentum=f(params, q, v) -> [angular; linear]")
        return self.momentum(self.params, q, v)

    def configuration_derivative(self, q, v):
        return v

    def integrate_configuration(self, q, v, dt):
        return q + v * dt

    def normalize_configuration(self, q):
        return q


interface.implement(EnergyModule, EnergyModuleDynamics)
