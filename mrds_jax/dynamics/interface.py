"""The module interface: every question the system layer asks of a module (Bonaventura's Step 2 contract,
Table 18, and the few questions around it), as generic functions dispatched on the module's type.

The system layer (Steps 3-4, :mod:`mrds_jax.system`), Lilly & Orin's fast path, constraint stabilisation,
force elements, the integrators and the energy diagnostics call only the functions below; they never look
inside a module. A rigid tree (:class:`mrds_jax.model.Module`, implemented in :mod:`.tree_module` by the
recursions of this package) is one kind of module; a flexible link by assumed modes or a module given by its
energies (:mod:`.energy_module`) is another.

The contract is the abstract class :class:`ModuleContract`: one method per question. A new module type either
subclasses it and defines every method (Python then refuses to construct an instance while one is missing, and
names it), or is paired with a subclass that implements the methods for it, with ``self`` the module
(``implement(MyModule, MyModuleDynamics)``, which refuses an implementation with a missing method and names it)::

    from mrds_jax.dynamics.interface import ModuleContract

    @pytree_dataclass
    class MyModule(ModuleContract):
        ...
        def module_terms(self, q, v, tau, points, method="direct"): ...

The generic functions of the same names (``module_terms(module, q, v, tau, points)``, ...) are what the system
layer calls; ``build_system`` refuses a module whose type implements no contract or lacks one of the
attributes below, naming what is missing, before anything is traced.

A module type must

* be a pytree (its arrays are leaves, so ``jax.grad``/``jax.vmap`` work over its parameters) whose static
  part identifies identical modules: modules with the same ``jax.tree.structure``, contact points and leaf
  shapes are stacked and ``vmap``ped by the system layer (the six legs of a Stewart platform);
* have the attributes ``nq`` and ``nv`` (ints), ``task_dim`` (6, or 3 for planar modules whose task space
  is [ω_z, v_x, v_y], Bonaventura footnote 19), ``frame_names`` (its operational points) and a method
  ``frame_index(name)`` raising KeyError/IndexError for an unknown point;
* implement every method of :class:`ModuleContract`: the Step 2 questions of the dynamics, the energies and
  momentum of the diagnostics, and the configuration functions of the integrators.

Conventions: spatial vectors [angular; linear]; point velocities ẋ = [ω; ṗ] and accelerations in world axes
("world_aligned"); classical accelerations ẍ = J q̈ + J̇ v (notes §0.3); ``points`` is a tuple of operational
point names; task-space quantities have d = ``task_dim`` rows per point.
"""
import abc
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..model.tree import task_slice
from ..spatial.linalg import matmul


class ModuleTerms(NamedTuple):
    """Step 2 results of one module for its contact points (Table 18); n points, d task rows."""
    qdd_open: jnp.ndarray   # (nv,) q̈ᵒᵖᵉⁿ, the module's acceleration without contact forces (Bonaventura eq. 68)
    R: jnp.ndarray          # (n, 3, 3) point orientations in the world
    p: jnp.ndarray          # (n, 3) point positions
    xd: jnp.ndarray         # (n, 6) ᴵẋ_IO = [ω; ṗ], world axes
    xdd_open: jnp.ndarray   # (n, 6) classical open-chain accelerations ᴵẍᵒᵖᵉⁿ_IO, world axes
    Psi: jnp.ndarray        # (nv, n·d) Ψ = H⁻¹ Jᵀ (Bonaventura eq. 75)
    Lam_inv: jnp.ndarray    # (n·d, n·d) Λ⁻¹_{OiOj} = J_Oi H⁻¹ J_Ojᵀ (Bonaventura eq. 69-70)
    J: jnp.ndarray = None   # (n·d, nv) the points' task Jacobian (world-aligned), optional: with it the system
                            # layer may use Λ⁻¹ = J Ψ in factored form where that is cheaper (module types that
                            # leave it None are served through Lam_inv)


class PointMotion(NamedTuple):
    """Placements and velocities of a module's operational points (no dynamics)."""
    R: jnp.ndarray          # (n, 3, 3)
    p: jnp.ndarray          # (n, 3)
    xd: jnp.ndarray         # (n, 6) [ω; ṗ], world axes


class ReferenceTerms(NamedTuple):
    """What Lilly & Orin's reference member contributes to Lilly & Orin eq. 45/46, with its contact points."""
    H: jnp.ndarray          # (nv, nv) H₀
    bias: jnp.ndarray       # (nv,) C₀ v + G₀
    R: jnp.ndarray          # (n, 3, 3) point placements
    p: jnp.ndarray          # (n, 3)
    xd: jnp.ndarray         # (n, 6) point velocities, world axes
    xdd_bias: jnp.ndarray   # (n, 6) J̇ v (classical, world axes): the points' accelerations at q̈ = 0
    J: jnp.ndarray          # (n, d, nv) task-row Jacobians, world axes


class ModuleContract(abc.ABC):
    """Every question the system layer, the diagnostics and the integrators ask of a module (module docstring).
    ``self`` is the module; besides these methods a module has ``nq``, ``nv``, ``task_dim``, ``frame_names``
    and ``frame_index(name)`` (:data:`ATTRIBUTES`)."""

    @abc.abstractmethod
    def module_terms(self, q, v, tau, points, method="direct"):
        """Step 2 (Table 18) for the contact points ``points``: :class:`ModuleTerms`. ``tau``: the module's
        generalized forces (nv,); ``method``: "direct" or "recursive" where the module type has both routes."""

    @abc.abstractmethod
    def open_chain_acceleration(self, q, v, tau):
        """q̈ of a module with no contact (Bonaventura eq. 68: H⁻¹(τ − C v − G))."""

    @abc.abstractmethod
    def open_chain_inverse_dynamics(self, q, v, qdd):
        """τ = H q̈ + C v + G: the generalized forces that produce ``qdd`` without contact forces."""

    @abc.abstractmethod
    def point_motion(self, q, v, points):
        """:class:`PointMotion` of the operational points ``points`` (kinematics only)."""

    @abc.abstractmethod
    def point_jacobians(self, q, points):
        """World-aligned 6-D Jacobians of the operational points, (n, 6, nv): ẋ_i = J_i v."""

    @abc.abstractmethod
    def reference_terms(self, q, v, points):
        """:class:`ReferenceTerms` of a module used as Lilly & Orin's reference member."""

    @abc.abstractmethod
    def mass_matrix(self, q):
        """H(q), the joint-space inertia matrix (nv x nv)."""

    @abc.abstractmethod
    def kinetic_energy(self, q, v):
        """Kinetic energy."""

    @abc.abstractmethod
    def potential_energy(self, q):
        """Potential energy (gravity, and internal elastic energy where the module has one)."""

    @abc.abstractmethod
    def spatial_momentum(self, q, v):
        """Total spatial momentum [angular about the world origin; linear], world axes."""

    @abc.abstractmethod
    def configuration_derivative(self, q, v):
        """q̇(q, v)."""

    @abc.abstractmethod
    def integrate_configuration(self, q, v, dt):
        """q(t + dt) for a constant v."""

    @abc.abstractmethod
    def normalize_configuration(self, q):
        """q projected back onto the configuration manifold (unit quaternions); identity where there is none."""


METHODS = tuple(sorted(ModuleContract.__abstractmethods__))
ATTRIBUTES = ("nq", "nv", "task_dim", "frame_names", "frame_index")


def _generic(name):
    """The generic function ``name(module, ...)``: the module type's implementation of the contract method, or a
    TypeError naming the module type when it has none."""
    @functools.singledispatch
    def generic(module, *args, **kwargs):
        raise TypeError(f"{name}: {type(module).__name__} does not implement the module interface (subclass "
                        "mrds_jax.dynamics.interface.ModuleContract, or pair the type with an implementation by "
                        "mrds_jax.dynamics.interface.implement)")

    generic.register(ModuleContract)(lambda module, *args, **kwargs: getattr(module, name)(*args, **kwargs))
    generic.__name__ = generic.__qualname__ = name
    generic.__doc__ = getattr(ModuleContract, name).__doc__
    return generic


GENERICS = {name: _generic(name) for name in METHODS}
module_terms = GENERICS["module_terms"]
open_chain_acceleration = GENERICS["open_chain_acceleration"]
open_chain_inverse_dynamics = GENERICS["open_chain_inverse_dynamics"]
point_motion = GENERICS["point_motion"]
point_jacobians = GENERICS["point_jacobians"]
reference_terms = GENERICS["reference_terms"]
mass_matrix = GENERICS["mass_matrix"]
kinetic_energy = GENERICS["kinetic_energy"]
potential_energy = GENERICS["potential_energy"]
spatial_momentum = GENERICS["spatial_momentum"]
configuration_derivative = GENERICS["configuration_derivative"]
integrate_configuration = GENERICS["integrate_configuration"]
normalize_configuration = GENERICS["normalize_configuration"]


@functools.singledispatch
def with_loop_points(module, n_points):
    """``module`` as the system layer should hold it when ``n_points`` contact points sit on it (Bonaventura's
    operational points of a closed chain): a module type may answer with a form that suits looped use (the rigid
    tree takes the level-scan recursion for mid-size trees: :func:`mrds_jax.dynamics.levels.loop_recursion`). By
    default the module itself. Optional: not one of :data:`METHODS`, so a new module type need not answer it."""
    return module


@jax.tree_util.register_pytree_node_class
class Directions:
    """A module's constraint directions D (n·d x c, the points' task rows stacked), given block by block: entry e
    puts the (d x wₑ) block ``blocks[e]`` at the rows of point ``slots[e]`` and columns ``starts[e]`` ..
    ``starts[e] + wₑ`` (entries that share rows and columns add); zero elsewhere. A pytree: the blocks are its
    leaves, the layout (``slots``, ``starts``, ``width``) is static."""

    def __init__(self, blocks, slots, starts, width):
        self.blocks, self.slots, self.starts, self.width = tuple(blocks), tuple(slots), tuple(starts), int(width)

    def column_groups(self):
        """(start, stop, entries) of every distinct column range, in column order."""
        groups = {}
        for e, (a, blk) in enumerate(zip(self.starts, self.blocks)):
            groups.setdefault((a, a + blk.shape[-1]), []).append(e)
        return [(a, b, es) for (a, b), es in sorted(groups.items())]

    def dense(self, n_points, d):
        """D itself, (n_points·d x width)."""
        rows = []
        for s in range(n_points):
            placed = [jnp.pad(blk, ((0, 0), (a, self.width - a - blk.shape[-1])))
                      for slot, a, blk in zip(self.slots, self.starts, self.blocks) if slot == s]
            rows.append(sum(placed) if placed else jnp.zeros((d, self.width), self.blocks[0].dtype))
        return jnp.concatenate(rows, axis=0)

    def tree_flatten(self):
        return self.blocks, (self.slots, self.starts, self.width)

    @classmethod
    def tree_unflatten(cls, aux, blocks):
        return cls(blocks, *aux)


class ColumnTerms(NamedTuple):
    """Step 2 of a module along given constraint directions (:func:`module_terms_along`): Ψ and Λ⁻¹ only in the
    directions D (:class:`Directions`) in which the system's contacts can push, instead of every task row of every
    point: U = Ψ D = H⁻¹ Jᵀ D (Bonaventura eq. 75) and K = Dᵀ Λ⁻¹ D = (Jᵀ D)ᵀ U (Bonaventura eq. 69-70). With D
    the identity this is :class:`ModuleTerms`' Ψ and Λ⁻¹."""
    qdd_open: jnp.ndarray   # (nv,) q̈ᵒᵖᵉⁿ (Bonaventura eq. 68)
    xdd_open: jnp.ndarray   # (n, 6) the points' classical open-chain accelerations, world axes
    U: jnp.ndarray          # (nv, c) Ψ D
    K: jnp.ndarray          # (c, c) Dᵀ Λ⁻¹ D


@functools.singledispatch
def module_terms_along(module, q, v, tau, points, D, method="direct"):
    """:class:`ColumnTerms` of ``module`` along the directions ``D`` (:class:`Directions`) at its points
    ``points``. Any module type answers through its :meth:`ModuleContract.module_terms`: block by block,
    Ψ[:, s] W and (J[s]ᵀ Wₐ)ᵀ (Ψ[:, s'] W_b), or Wₐᵀ Λ⁻¹[s, s'] W_b where the module gives no J (the pair blocks of
    Table 17). A type may register a form that solves with H only for the c columns Jᵀ D (the rigid tree does on
    its level-scan route, :mod:`.tree_module`: the four-loop biped's 8 points have 48 task rows, its loops push
    along 12). Optional: not one of :data:`METHODS`, so a new module type need not answer it."""
    t = module_terms(module, q, v, tau, points, method)
    d = module.task_dim
    rows = [slice(d * s, d * (s + 1)) for s in D.slots]
    groups = D.column_groups()
    U = [sum(matmul(t.Psi[:, rows[e]], D.blocks[e]) for e in es) for _, _, es in groups]
    if t.J is not None:
        V = [sum(matmul(t.J[rows[e]].T, D.blocks[e]) for e in es) for _, _, es in groups]
        K = [[matmul(Va.T, Ub) for Ub in U] for Va in V]
    else:
        K = [[sum(matmul(D.blocks[e].T, matmul(t.Lam_inv[rows[e], rows[f]], D.blocks[f])) for e in ea for f in eb)
              for _, _, eb in groups] for _, _, ea in groups]
    return ColumnTerms(t.qdd_open, t.xdd_open, jnp.concatenate(U, axis=1),
                       jnp.concatenate([jnp.concatenate(row, axis=1) for row in K], axis=0))


def missing_methods(implementation):
    """The contract methods that the class ``implementation`` leaves unimplemented (sorted names)."""
    if not (isinstance(implementation, type) and issubclass(implementation, ModuleContract)):
        return list(METHODS)
    return sorted(implementation.__abstractmethods__)


def implement(module_type, implementation):
    """Pair ``module_type`` with ``implementation``, a subclass of :class:`ModuleContract` whose methods answer
    the contract with ``self`` a ``module_type`` instance (the way a type defined in a lower layer, such as the
    rigid tree :class:`mrds_jax.model.Module`, gets its dynamics). Refuses an implementation that leaves a method
    out, naming it."""
    missing = missing_methods(implementation)
    if missing:
        raise TypeError(f"{getattr(implementation, '__name__', implementation)!s} cannot implement the module "
                        f"contract for {module_type.__name__}: missing {', '.join(missing)}")
    for name, generic in GENERICS.items():
        generic.register(module_type)(getattr(implementation, name))
    return implementation


def implements_interface(module):
    """True when ``module``'s type implements the contract (a :class:`ModuleContract` subclass, or paired with an
    implementation by :func:`implement`)."""
    return all(g.dispatch(type(module)) is not g.dispatch(object) for g in GENERICS.values())


def missing_attributes(module):
    """The attributes of :data:`ATTRIBUTES` that ``module`` lacks."""
    return [name for name in ATTRIBUTES if not hasattr(module, name)]


def task_jacobian(module, q, points):
    """The points' task-space Jacobians stacked, (n·d, nv), d = ``module.task_dim`` rows each
    (:func:`point_jacobians` restricted to the task rows)."""
    return point_jacobians(module, q, points)[:, task_slice(module.task_dim)].reshape(-1, module.nv)
