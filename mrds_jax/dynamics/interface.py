"""The module interface: every question the system layer asks of a module (Bonaventura's Step 2 contract,
Table 18, and the few questions around it), as generic functions dispatched on the module's type.

The system layer (Steps 3-4, :mod:`mrds_jax.system`), Lilly & Orin's fast path, constraint stabilisation,
force elements, the integrators and the energy diagnostics call only the functions below; they never look
inside a module. A rigid tree (:class:`mrds_jax.model.Module`, implemented in :mod:`.tree_module` by the
recursions of this package) is one kind of module; a flexible link by assumed modes or a module given by its
energies (:mod:`.energy_module`) is another, plugged in by registering its own implementations::

    from mrds_jax.dynamics import interface as mi

    @mi.module_terms.register(MyModule)
    def _(module, q, v, tau, points, method="direct"): ...

A module type must

* be a pytree (its arrays are leaves, so ``jax.grad``/``jax.vmap`` work over its parameters) whose static
  part identifies identical modules: modules with the same ``jax.tree.structure``, contact points and leaf
  shapes are stacked and ``vmap``ped by the system layer (the six legs of a Stewart platform);
* have the attributes ``nq`` and ``nv`` (ints), ``task_dim`` (6, or 3 for planar modules whose task space
  is [ω_z, v_x, v_y], Bonaventura footnote 19), ``frame_names`` (its operational points) and a method
  ``frame_index(name)`` raising KeyError/IndexError for an unknown point;
* register implementations of the generic functions below. The first seven (``REQUIRED``) are needed by the
  dynamics; the energies and configuration functions by the diagnostics and the integrators.

Conventions: spatial vectors [angular; linear]; point velocities ẋ = [ω; ṗ] and accelerations in world axes
("world_aligned"); classical accelerations ẍ = J q̈ + J̇ v (notes §0.3); ``points`` is a tuple of operational
point names; task-space quantities have d = ``task_dim`` rows per point.
"""
import functools
from typing import NamedTuple

import jax.numpy as jnp


class ModuleTerms(NamedTuple):
    """Step 2 results of one module for its contact points (Table 18); n points, d task rows."""
    qdd_open: jnp.ndarray   # (nv,) q̈ᵒᵖᵉⁿ, the module's acceleration without contact forces (eq. 68)
    R: jnp.ndarray          # (n, 3, 3) point orientations in the world
    p: jnp.ndarray          # (n, 3) point positions
    xd: jnp.ndarray         # (n, 6) ᴵẋ_IO = [ω; ṗ], world axes
    xdd_open: jnp.ndarray   # (n, 6) classical open-chain accelerations ᴵẍᵒᵖᵉⁿ_IO, world axes
    Psi: jnp.ndarray        # (nv, n·d) Ψ = H⁻¹ Jᵀ (eq. 75)
    Lam_inv: jnp.ndarray    # (n·d, n·d) Λ⁻¹_{OiOj} = J_Oi H⁻¹ J_Ojᵀ (eq. 69-70)


class PointMotion(NamedTuple):
    """Placements and velocities of a module's operational points (no dynamics)."""
    R: jnp.ndarray          # (n, 3, 3)
    p: jnp.ndarray          # (n, 3)
    xd: jnp.ndarray         # (n, 6) [ω; ṗ], world axes


class ReferenceTerms(NamedTuple):
    """What Lilly & Orin's reference member contributes to eq. 45/46, with its contact points."""
    H: jnp.ndarray          # (nv, nv) H₀
    bias: jnp.ndarray       # (nv,) C₀ v + G₀
    R: jnp.ndarray          # (n, 3, 3) point placements
    p: jnp.ndarray          # (n, 3)
    xd: jnp.ndarray         # (n, 6) point velocities, world axes
    xdd_bias: jnp.ndarray   # (n, 6) J̇ v (classical, world axes): the points' accelerations at q̈ = 0
    J: jnp.ndarray          # (n, d, nv) task-row Jacobians, world axes


def _generic(fn):
    """A singledispatch generic function whose default raises a TypeError naming the module type."""
    @functools.singledispatch
    @functools.wraps(fn)
    def generic(module, *args, **kwargs):
        raise TypeError(f"{fn.__name__}: {type(module).__name__} does not implement the module interface "
                        f"(register an implementation with mrds_jax.dynamics.interface.{fn.__name__}.register)")
    return generic


@_generic
def module_terms(module, q, v, tau, points, method="direct"):
    """Step 2 (Table 18) for the contact points ``points``: :class:`ModuleTerms`. ``tau``: the module's
    generalized forces (nv,); ``method``: "direct" or "recursive" where the module type has both routes."""


@_generic
def open_chain_acceleration(module, q, v, tau):
    """q̈ of a module with no contact (eq. 68: H⁻¹(τ − C v − G))."""


@_generic
def inverse_dynamics(module, q, v, qdd):
    """τ = H q̈ + C v + G: the generalized forces that produce ``qdd`` without contact forces."""


@_generic
def point_motion(module, q, v, points):
    """:class:`PointMotion` of the operational points ``points`` (kinematics only)."""


@_generic
def point_jacobians(module, q, points):
    """World-aligned 6-D Jacobians of the operational points, (n, 6, nv): ẋ_i = J_i v."""


@_generic
def reference_terms(module, q, v, points):
    """:class:`ReferenceTerms` of a module used as Lilly & Orin's reference member."""


@_generic
def mass_matrix(module, q):
    """H(q), the joint-space inertia matrix (nv x nv)."""


@_generic
def kinetic_energy(module, q, v):
    """Kinetic energy."""


@_generic
def potential_energy(module, q):
    """Potential energy (gravity, and internal elastic energy where the module has one)."""


@_generic
def spatial_momentum(module, q, v):
    """Total spatial momentum [angular about the world origin; linear], world axes."""


@_generic
def configuration_derivative(module, q, v):
    """q̇(q, v)."""


@_generic
def integrate_configuration(module, q, v, dt):
    """q(t + dt) for a constant v."""


@_generic
def normalize_configuration(module, q):
    """q projected back onto the configuration manifold (unit quaternions); identity where there is none."""


def task_jacobian(module, q, points):
    """The points' task-space Jacobians stacked, (n·d, nv), d = ``module.task_dim`` rows each
    (:func:`point_jacobians` restricted to the task rows)."""
    from ..model.tree import task_slice
    return point_jacobians(module, q, points)[:, task_slice(module.task_dim)].reshape(-1, module.nv)


REQUIRED = (module_terms, open_chain_acceleration, inverse_dynamics, point_motion, point_jacobians, reference_terms,
            mass_matrix)
ALL = REQUIRED + (mass_matrix, kinetic_energy, potential_energy, spatial_momentum, configuration_derivative,
                  integrate_configuration, normalize_configuration)


def implements_interface(module):
    """True when ``module``'s type has implementations of the required generic functions."""
    return all(f.dispatch(type(module)) is not f.dispatch(object) for f in REQUIRED)


from . import energy_module, tree_module  # noqa: E402,F401  (register EnergyModule and the rigid tree, Module)
