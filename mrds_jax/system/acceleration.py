"""Which closed-chain algorithm computes q̈, and q̈ of a system with its force elements and stabilisation.

* :func:`dynamics_path` — "general" (Bonaventura's MRDS Steps 2-4), "lilly" (Lilly & Orin's simple closed chain) or
  "auto"; :func:`system_acceleration` — the accelerations function the integrators call; the default Baumgarte
  stabilisation (:func:`default_stabilisation`) and the solve diagnostics of one call (:func:`solve_info`).
Split out of :mod:`.simulate` (one concern per file); :mod:`.simulate` integrates what this module returns.
"""

import jax.numpy as jnp

from .. import validation
from ..integrate.integrators import Accelerations, SolveInfo
from ..validation.arguments import is_traced
from .build import SystemDescriptionError, SystemState, module_taus
from .dynamics import forward_dynamics
from .forces import generalized_forces
from .lilly import (
    lilly_forward_dynamics,
    lilly_stabilisation_problem,
    simple_closed_chain_reference,
)
from .solve import SolverSettings
from .stabilisation import baumgarte

# ----------------------------------------------------------------------------- dynamics with forces
PATHS = ("auto", "general", "lilly")


def dynamics_path(system, path="auto", stabilisation=None, solver=SolverSettings()):
    """Which closed-chain algorithm computes q̈: "general" (Bonaventura's MRDS Steps 2-4,
    :func:`~mrds_jax.system.forward_dynamics`) or "lilly" (Lilly & Orin's O(mN) simple-closed-chain algorithm,
    :func:`~mrds_jax.system.lilly_forward_dynamics`; the same answers, tested to 1e-10, at a fraction of the
    cost: per-chain n_c x n_c solves and one N₀ x N₀ solve instead of one n_C x n_C solve over all contacts).

    ``path="auto"`` picks "lilly" when the system is a simple closed chain
    (:func:`~mrds_jax.system.lilly.simple_closed_chain_reference`), the stabilisation is none or scalar
    Baumgarte gains (:func:`~mrds_jax.system.lilly.lilly_stabilisation_problem`) and the solver settings are
    the defaults (the Lilly path solves by plain Cholesky: exact for independent constraints, which a simple
    closed chain with nvₖ ≥ n_c has away from singular configurations); otherwise "general". ``path="lilly"``
    raises :class:`~mrds_jax.system.SystemDescriptionError` when the system is not a simple closed chain or the
    stabilisation needs the general path."""
    if path not in PATHS:
        raise validation.ArgumentError(f"unknown dynamics path {path!r}; use one of {PATHS}")
    if path == "general":
        return "general"
    if getattr(system, "couplings", ()):     # joint couplings are rows of the general path's solve only
        if path == "lilly":
            raise SystemDescriptionError("path='lilly': the system has joint couplings, which only the general path solves; "
                              "use path='general'")
        return "general"
    simple = simple_closed_chain_reference(system) is not None
    why = lilly_stabilisation_problem(system, stabilisation)
    if path == "lilly":
        if not simple:
            raise SystemDescriptionError("path='lilly': the system is not a simple closed chain (every contact joining one "
                              "chain to one common reference member, nv >= n_c per chain); use path='general'")
        if why:
            raise SystemDescriptionError(f"path='lilly' cannot apply this stabilisation ({why}); use path='general' with it")
        return "lilly"
    return "lilly" if simple and not why and solver == SolverSettings() else "general"


BAUMGARTE_STEPS = 50.0   # default stabilisation: Baumgarte, critically damped, rate β = 1 / (50 dt)


def default_stabilisation(dt):
    """The stabilisation :func:`simulate` uses unless told otherwise (``stabilisation="auto"``): Baumgarte
    with α = β = 1 / (``BAUMGARTE_STEPS`` · dt) (β = 20/s at dt = 1 ms) — a constraint error decays like
    (1 + βt) e^{−βt}, by e⁻¹ in about 100 steps whatever the step size. Why it is on by default and why this
    rate: docs/simulation.md, "Stabilisation" (measured on the Bennett linkage and the four-bar)."""
    return baumgarte(1.0 / (BAUMGARTE_STEPS * dt))


def resolve_stabilisation(stabilisation, dt):
    """``"auto"`` → :func:`default_stabilisation` (dt); None → off; a :class:`Stabilisation` as given."""
    if isinstance(stabilisation, str):
        if stabilisation != "auto":
            raise ValueError(f"stabilisation must be 'auto', None or a Stabilisation, got {stabilisation!r}")
        return default_stabilisation(dt)
    return stabilisation


def system_acceleration(system, forces=(), stabilisation=None, solver=SolverSettings(), method="direct", tau=None,
                        path="auto", with_info=False):
    """``acceleration(q, v, t)`` for :func:`mrds_jax.integrate.rollout`: q̈ per module from the closed-chain
    dynamics chosen by :func:`dynamics_path` (``path``), with the force elements' generalized forces added to
    ``tau`` (constant per-module joint forces, tuple/dict/None). With ``path="lilly"`` given explicitly the
    stabilisation's Baumgarte gains are applied and its other parts must be off (checked when its gains are
    concrete; :func:`simulate` decides the path before tracing). ``with_info``: return
    :class:`~mrds_jax.integrate.integrators.Accelerations` (q̈ and the solve's residual, condition and rank
    deficiency, :func:`solve_info`) so that rollouts record them."""
    if path == "lilly":
        if simple_closed_chain_reference(system) is None or not is_traced(stabilisation):
            dynamics_path(system, path, stabilisation, solver)
        which = "lilly"
    else:
        which = dynamics_path(system, path, stabilisation, solver)
    reference = simple_closed_chain_reference(system)

    def acceleration(q, v, t):
        state = SystemState(tuple(q), tuple(v))
        dtype = state.q[0].dtype
        taus = module_taus(system, tau, dtype)
        if forces:
            taus = tuple(a + b for a, b in zip(taus, generalized_forces(system, forces, state, t)))
        if which == "lilly":
            out = lilly_forward_dynamics(system, state, taus, t, reference, method, baumgarte_gains(stabilisation))
        else:
            out = forward_dynamics(system, state, taus, t, solver, method, stabilisation)
        return Accelerations(out.qdd, solve_info(system, out)) if with_info else out.qdd
    acceleration.reports_info = with_info
    return acceleration


def solve_info(system, out):
    """:class:`~mrds_jax.integrate.integrators.SolveInfo` of one dynamics evaluation (general or Lilly path):
    relative residual (0 on the Lilly path, which has no single system to check), condition ≈ 1 / smallest
    pivot ratio, number of constrained directions the solve dropped."""
    dtype = out.qdd[0].dtype
    n_C = system.connectivity.n_constraints
    residual = getattr(out, "residual", None)
    rank = getattr(out, "rank", None)
    tiny = jnp.finfo(dtype).tiny
    return SolveInfo(jnp.zeros((), dtype) if residual is None else residual.astype(dtype),
                     1.0 / jnp.maximum(out.min_pivot.astype(dtype), tiny),
                     jnp.zeros((), dtype) if rank is None else (n_C - rank).astype(dtype))


def baumgarte_gains(stabilisation):
    """(α, β) of a stabilisation, or None when it is None."""
    return None if stabilisation is None else (stabilisation.baumgarte_alpha, stabilisation.baumgarte_beta)
