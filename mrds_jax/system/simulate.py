"""System rollouts, conserved quantities and constraint diagnostics, consistent initial states.

* :func:`simulate` — integrates a system (MRDS Steps 2-4 at every integrator stage) with force elements
  (:mod:`.forces`), constant joint forces and optional constraint stabilisation (:mod:`.stabilisation`) on
  top of :func:`mrds_jax.integrate.rollout` (``lax.scan``, decimated outputs, quaternion renormalisation).
  Outside a trace it first checks the initial state (:func:`check_initial_state`) and afterwards turns a
  NaN into a :class:`~mrds_jax.integrate.SimulationError` naming the step. The numerical core is one
  ``jax.jit`` cached on the system's structure, so repeated calls with new parameters, states, gains or
  step sizes do not recompile.
* :func:`system_energy`, :func:`total_momentum`, :func:`trajectory_diagnostics` — kinetic + potential +
  elastic energy, spatial momentum, and the constraint errors Φ_p (position, m or rad) and Φ_v (Bonaventura eq. 105)
  along a trajectory, the joint couplings' residuals g and G v beside them.
* :func:`project_positions` (Gauss-Newton on Φ_p and the couplings' g with a fixed number of iterations),
  :func:`project_velocities` (least-norm correction onto J v = ẋᶜ and G v = 0), :func:`make_consistent` (both),
  each returning the residual.
* :func:`check_initial_state` — raises :class:`InconsistentStateError` naming every contact and joint coupling
  whose position or velocity error exceeds the tolerance (with its size), :class:`~mrds_jax.integrate.SimulationError` for a
  non-finite state, and warns :class:`SingularConfigurationWarning` with Bᶜ's condition number (and the
  contacts spanning its near-null space) at a singular or redundant configuration.
"""
import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.interface import (integrate_configuration, kinetic_energy, normalize_configuration,
                                  potential_energy, spatial_momentum)
from .. import validation
from ..validation import SingularConfigurationWarning  # noqa: F401  (raised here; public in mrds_jax.system)
from ..integrate import INTEGRATORS, SimulationError, Trajectory, check_trajectory, rollout  # noqa: F401
from ..integrate.rollout import nonfinite_description
from ..integrate.adaptive import dopri5
from ..integrate.integrators import Accelerations, SolveInfo
from .build import SystemError, SystemState
from .dynamics import _taus, constraint_system, forward_dynamics
from .lilly import lilly_forward_dynamics, lilly_stabilisation_problem, simple_closed_chain_reference
from .limits import limit_exits, report_limits
from .forces import applied_power, dissipated_power, force_potential_energy, generalized_forces, validate_forces
from .solve import SolverSettings
from .couplings import coupled_constraint_system, constraint_rows, coupling_errors, coupling_jacobian
from .stabilisation import Stabilisation, baumgarte, constraint_errors, constraint_jacobian


class InconsistentStateError(SystemError):
    """The initial state violates the constraints by more than the tolerance (names contacts and sizes)."""


class SingularConfigurationError(SystemError):
    """``simulate(..., strict=True)``: the constraint solve crossed a threshold during the run."""


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
    raises :class:`~mrds_jax.system.SystemError` when the system is not a simple closed chain or the
    stabilisation needs the general path."""
    if path not in PATHS:
        raise validation.ArgumentError(f"unknown dynamics path {path!r}; use one of {PATHS}")
    if path == "general":
        return "general"
    if getattr(system, "couplings", ()):     # joint couplings are rows of the general path's solve only
        if path == "lilly":
            raise SystemError("path='lilly': the system has joint couplings, which only the general path solves; "
                              "use path='general'")
        return "general"
    simple = simple_closed_chain_reference(system) is not None
    why = lilly_stabilisation_problem(system, stabilisation)
    if path == "lilly":
        if not simple:
            raise SystemError("path='lilly': the system is not a simple closed chain (every contact joining one "
                              "chain to one common reference member, nv >= n_c per chain); use path='general'")
        if why:
            raise SystemError(f"path='lilly' cannot apply this stabilisation ({why}); use path='general' with it")
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
        if simple_closed_chain_reference(system) is None or not _is_traced(stabilisation):
            dynamics_path(system, path, stabilisation, solver)
        which = "lilly"
    else:
        which = dynamics_path(system, path, stabilisation, solver)
    reference = simple_closed_chain_reference(system)

    def acceleration(q, v, t):
        state = SystemState(tuple(q), tuple(v))
        dtype = state.q[0].dtype
        taus = _taus(system, tau, dtype)
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


@functools.partial(jax.jit, static_argnames=("n_steps", "decimation", "integrator", "solver", "method", "path"))
def _simulate_core(system, q0, v0, dt, t0, forces, stabilisation, tau, n_steps, decimation, integrator, solver,
                   method, path):
    acc = system_acceleration(system, forces, stabilisation, solver, method, tau, path, with_info=True)
    return rollout(system.modules, acc, q0, v0, dt, n_steps, decimation, integrator, t0)


@functools.partial(jax.jit, static_argnames=("n_out", "max_steps", "solver", "method", "path"))
def _simulate_adaptive_core(system, q0, v0, dt, t0, forces, stabilisation, tau, t_end, rtol, atol, n_out, max_steps,
                            solver, method, path):
    acc = system_acceleration(system, forces, stabilisation, solver, method, tau, path)
    return dopri5(system.modules, acc, q0, v0, t_end, n_out, t0, rtol, atol, dt, max_steps)


def _is_traced(tree):
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _as_float(tree, dtype):
    """Float leaves as arrays of ``dtype`` (so Python floats and arrays share one jit cache entry)."""
    def conv(x):
        if isinstance(x, jax.core.Tracer):
            return x
        a = jnp.asarray(x)
        return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a
    return jax.tree.map(conv, tree)


def simulate(system, state0, dt, n_steps=None, decimation=1, integrator="rk4_compact", forces=(),
             stabilisation="auto", tau=None, solver=SolverSettings(), method="direct", t0=0.0, check=True, tol=1e-6,
             cond_warn=1e8, path="auto", strict=False, residual_warn=1e-6, cond_jump=1e3, t_end=None, rtol=1e-6,
             atol=1e-9, n_out=1, max_steps=100_000):
    """Integrate ``n_steps`` steps of size ``dt`` from ``state0`` (a :class:`SystemState`), storing every
    ``decimation``-th state (the first stored state is ``state0``); or up to the end time ``t_end``
    (fixed-step integrators: n_steps = round((t_end − t0)/dt), a static number, so a new end time
    recompiles). Returns a :class:`~mrds_jax.integrate.Trajectory` (t, q and v per module, first non-finite
    step, solve diagnostics).

    ``integrator="dopri5"``: error-controlled Dormand-Prince 5(4) (:func:`mrds_jax.integrate.adaptive.dopri5`)
    from t0 to ``t_end`` at tolerances ``rtol``/``atol`` (on every q and v component), ``dt`` its first step,
    storing ``n_out`` + 1 equally spaced states t0 … t_end; ``t_end``, ``t0``, ``dt``, the tolerances and
    every parameter are traced, so a new end time, output spacing (for the same ``n_out``) or tolerance
    does not recompile. Returns :class:`~mrds_jax.integrate.adaptive.AdaptiveTrajectory` (with the numbers
    of accepted and rejected steps). Differentiable in forward mode. Its default stabilisation is the same
    Baumgarte rate 1/(50 dt) with ``dt`` the first step.

    ``integrator``: "rk4_compact" (default: classical RK4 with its stages in a ``lax.scan``, so the system
    dynamics is traced and compiled once instead of four times — on the planar four-bar about 2.5× faster
    to compile, 4× faster to compile under ``jax.grad``, and no slower per step on CPU), "rk4" (stages
    unrolled) or "euler" (semi-implicit, one evaluation per step). ``forces``: force elements
    (:mod:`.forces`); ``tau``: constant joint forces per module; ``stabilisation``: "auto" (default:
    Baumgarte with α = β = 1/(50 dt), :func:`default_stabilisation`), None (off) or a
    :class:`~mrds_jax.system.stabilisation.Stabilisation`; ``solver``, ``method``: as in
    :func:`~mrds_jax.system.forward_dynamics`; ``path``: "auto" (default: Lilly & Orin's fast path for simple
    closed chains, the general MRDS path otherwise; when, with ``check`` and concrete inputs, the Lilly run goes
    non-finite — a chain at a kinematic singularity, e.g. fully extended, where its M_k of Lilly & Orin eq. 36 is singular —
    it is rerun on the general path with a :class:`SingularConfigurationWarning`), "general" or "lilly"
    (:func:`dynamics_path`).
    The returned trajectory carries the constraint solve's diagnostics: ``traj.solve`` (a
    :class:`~mrds_jax.integrate.integrators.SolveInfo` of arrays over the stored states: the worst relative
    residual, condition of the part of Bᶜ solved and number of dropped directions over the steps since the
    previous stored state) and ``traj.last_finite`` (those of the last step that was still finite).
    With ``check`` (default) and concrete inputs: the initial state is checked first
    (:func:`check_initial_state` with ``tol`` and ``cond_warn``); a NaN in the result raises
    :class:`~mrds_jax.integrate.SimulationError` naming the step, the last finite solve's condition and the
    contacts spanning Bᶜ's near-null space there; and where during the run the condition exceeds
    ``cond_warn`` or ``cond_jump`` times its median over the run (passing near a singular configuration:
    on the parallelogram chain the condition rises from ~10 to 1e5-1e7 within a step of the crossing), the
    solve drops more directions than it does everywhere else in the run (at a singular configuration;
    redundant constraints drop theirs throughout and are reported once, at t₀) or the residual exceeds
    ``residual_warn`` (with redundant constraints, whose unmet inconsistent part leaves a small residual at every
    step, ``cond_jump`` times its median over the run if that is larger), a
    :class:`SingularConfigurationWarning` names the time windows and the contacts and
    says which settings help (``strict=True``: :class:`SingularConfigurationError` instead).
    Joint limits the modules keep (``Topology.joint_limits``; not enforced) that the stored states leave are
    named with the first time in a :class:`~mrds_jax.system.limits.JointLimitWarning` (also in
    :func:`trajectory_diagnostics`' ``limit_exits``).
    Under ``jit``/``vmap``/``grad`` the checks are skipped (use
    :func:`~mrds_jax.integrate.check_trajectory` and :func:`report_solve` on the result).
    """
    validation.simulation(system, state0, dt, n_steps, decimation, integrator, (*INTEGRATORS, "dopri5"), t_end)
    forces = tuple(forces)
    stabilisation = resolve_stabilisation(stabilisation, dt)
    chosen = dynamics_path(system, path, stabilisation, solver)   # decided here, on concrete gains when possible
    # a chain at a kinematic singularity (e.g. fully extended) makes Lilly's M_k (Lilly & Orin eq. 36) singular while the
    # general path's minimum-norm solve is fine: a run on the path "auto" chose that goes non-finite is rerun
    # there (concrete inputs only; under a trace the path stays what dynamics_path says)
    fallback = check and path == "auto" and chosen == "lilly"
    path = chosen
    dtype = jnp.asarray(state0.q[0]).dtype
    traced = _is_traced((system, state0, dt, t0, forces, stabilisation, tau))
    if check and not traced:
        validate_forces(system, forces)
        targets = stabilisation.position_targets if stabilisation is not None else ()
        check_initial_state(system, state0, t=t0, tol=tol, cond_warn=cond_warn, position_targets=targets)
    args = _as_float((tuple(state0.q), tuple(state0.v), dt, t0, forces, stabilisation, tau), dtype)
    if integrator == "dopri5":
        if t_end is None:
            raise validation.ArgumentError("simulate: integrator='dopri5' integrates to an end time: give t_end")

        def adaptive(path):
            return _simulate_adaptive_core(system, *args, *_as_float((t_end, rtol, atol), dtype), n_out=n_out,
                                           max_steps=max_steps, solver=solver, method=method, path=path)

        def finite(tr):
            return all(np.all(np.isfinite(np.asarray(x))) for x in tr.q + tr.v)

        tr = adaptive(path)
        if check and not _is_traced(tr.reached_end) and np.ndim(tr.reached_end) == 0:
            if fallback and not finite(tr):
                _warn_lilly_fallback("the state became NaN/inf")
                tr = adaptive("general")
            if not finite(tr):
                raise SimulationError(f"dopri5: the state became NaN/inf ({int(tr.accepted)} steps accepted)")
            if not bool(tr.reached_end):
                raise SimulationError(f"dopri5: max_steps = {max_steps} ran out before t_end = {float(t_end):g} s "
                                      f"({int(tr.accepted)} accepted, {int(tr.rejected)} rejected); loosen rtol/atol "
                                      "or raise max_steps")
        return tr
    if n_steps is None:
        if _is_traced((t_end, dt, t0)):
            raise ValueError("fixed-step integrators need a concrete t_end and dt (n_steps is static); use "
                             "integrator='dopri5' for a traced end time")
        n_steps = int(round((float(t_end) - float(t0)) / float(dt)))
        n_steps -= n_steps % decimation

    def fixed_step(path):
        return _simulate_core(system, *args, n_steps=n_steps, decimation=decimation, integrator=integrator,
                              solver=solver, method=method, path=path)

    traj = fixed_step(path)
    if check and not _is_traced(traj.first_nonfinite) and np.ndim(traj.first_nonfinite) == 0:
        dt_value = None if _is_traced(dt) else float(dt)
        if fallback and int(traj.first_nonfinite) >= 0:
            _warn_lilly_fallback(nonfinite_description(traj, dt_value))
            traj = fixed_step("general")
        try:
            check_trajectory(traj, dt_value)
        except SimulationError as e:
            last = _last_finite_state(traj)
            names = _weak_contacts(system, _state_at(traj, last), float(traj.t[last])) if last is not None else []
            raise SimulationError(f"{e}; contacts spanning the near-null space of Bᶜ at the last stored finite "
                                  f"state (t = {float(traj.t[last]):g} s): {names}" if last is not None else str(e)) from None
        report_solve(system, traj, cond_warn, residual_warn, strict, cond_jump)
        report_limits(system, traj)
    return traj


def _warn_lilly_fallback(what):
    warnings.warn(f"Lilly & Orin's path (chosen by path='auto') failed ({what}): a chain is at a kinematic "
                  "singularity where its M_k (Lilly & Orin eq. 36) is singular, e.g. fully extended; reran on the general path, "
                  "whose minimum-norm solve handles it. Pass path='general' to skip the first attempt",
                  SingularConfigurationWarning, stacklevel=3)


# ----------------------------------------------------------------------------- solve diagnostics of a run
def _last_finite_state(traj):
    ok = np.all(np.stack([np.all(np.isfinite(np.asarray(x)), axis=1) for x in traj.q + traj.v]), axis=0)
    idx = np.flatnonzero(ok)
    return int(idx[-1]) if idx.size else None


def _state_at(traj, i):
    return SystemState(tuple(jnp.asarray(x[i]) for x in traj.q), tuple(jnp.asarray(x[i]) for x in traj.v))


def _weak_contacts(system, state, t=0.0):
    """Names of the contacts and joint couplings spanning the near-null space (smallest eigenvector) of the
    solve's matrix (:func:`constraint_matrix`) at a state."""
    Bc = np.asarray(_report_core(system, state, jnp.asarray(t, state.q[0].dtype), Stabilisation())[2])
    if not Bc.size:
        return []
    w, V = np.linalg.eigh(0.5 * (Bc + Bc.T))
    v0 = np.abs(V[:, 0])
    return [n for n, sl in zip(*constraint_rows(system)) if v0[sl].size and v0[sl].max() > 0.1]


def _runs(flags):
    """[(first, last)] index ranges of consecutive True entries."""
    out, start = [], None
    for i, f in enumerate(flags):
        if f and start is None:
            start = i
        if not f and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(flags) - 1))
    return out


def report_solve(system, traj, cond_warn=1e8, residual_warn=1e-6, strict=False, cond_jump=1e3, max_listed=10):
    """Warn (:class:`SingularConfigurationWarning`; ``strict``: raise :class:`SingularConfigurationError`)
    where a trajectory's constraint solve crossed a threshold (see :func:`simulate`), naming the time
    windows (between stored states), the worst condition there and the contacts spanning Bᶜ's near-null
    space at the stored state that ends the window. Returns the list of (t_from, t_to, condition, contacts)."""
    info = traj.solve
    if info is None or not len(np.asarray(info.condition)) > 1:
        return []
    t = np.asarray(traj.t)
    res, cond, drop = (np.nan_to_num(np.asarray(x, dtype=float), nan=np.inf) for x in info)
    base = np.min(drop[1:])
    limit = min(np.inf if cond_warn is None else cond_warn, cond_jump * np.median(cond[1:]))
    # redundant constraints (directions dropped throughout) leave the part of yᶜ outside range(Bᶜ) unmet at
    # every step off the manifold (1e-6 of ‖yᶜ‖ on the Bennett linkage, whose motion is right to 2e-10 rad):
    # there only a residual well above the run's own level says something changed
    res_limit = residual_warn if base < 0.5 else max(residual_warn, cond_jump * np.median(res[1:]))
    flags = (cond > limit) | (drop > base + 0.5) | (res > res_limit)
    flags[0] = False
    events = []
    for a, b in _runs(flags):
        k = a + int(np.argmax(cond[a:b + 1]))
        names = _weak_contacts(system, _state_at(traj, k), t=t[k])
        events.append((float(t[a - 1]), float(t[b]), float(np.max(cond[a:b + 1])),
                       int(np.max(drop[a:b + 1]) - base), float(np.max(res[a:b + 1])), names))
    if not events:
        return events
    lines = [f"t in [{a:.6g}, {b:.6g}] s: condition {c:.3g} (median {np.median(cond[1:]):.3g}), {d} more dropped "
             f"direction(s), residual {r:.2g}, contacts {names}" for a, b, c, d, r, names in events[:max_listed]]
    more = f" (and {len(events) - max_listed} more)" if len(events) > max_listed else ""
    msg = (f"the constraint solve met a singular configuration during the run at {len(events)} time window(s)"
           f"{more}: " + "; ".join(lines) + ". The default solve (SolverSettings(method='pinv')) returns the "
           "minimum-norm forces there and the default stabilisation (stabilisation='auto', Baumgarte) pulls the "
           "state back onto the constraints; if the motion near these times matters, use a smaller dt (or "
           "stored states closer together, decimation, to locate them) and keep the stabilisation on; "
           "stabilisation=None is what lets such runs drift into NaN.")
    if strict:
        raise SingularConfigurationError(msg)
    warnings.warn(msg, SingularConfigurationWarning, stacklevel=3)
    return events


def trajectory_states(traj):
    """The stored states of a trajectory as one :class:`SystemState` with a leading time axis."""
    return SystemState(tuple(traj.q), tuple(traj.v))


# ----------------------------------------------------------------------------- energies, momentum, drift
class Energies(NamedTuple):
    kinetic: jnp.ndarray
    potential: jnp.ndarray    # gravity, Σ over modules (module.params.gravity)
    elastic: jnp.ndarray      # springs of the force elements
    total: jnp.ndarray


def system_energy(system, state, forces=()):
    """Kinetic, gravitational and elastic energy of a system state (:class:`Energies`)."""
    T = sum(kinetic_energy(m, q, v) for m, q, v in zip(system.modules, state.q, state.v))
    V = sum(potential_energy(m, q) for m, q in zip(system.modules, state.q))
    W = force_potential_energy(system, tuple(forces), state) if forces else jnp.zeros_like(T)
    return Energies(T, V, W, T + V + W)


def total_momentum(system, state):
    """Total spatial momentum [angular about the world origin; linear], world axes (every module hangs from
    the world)."""
    return sum(spatial_momentum(m, q, v) for m, q, v in zip(system.modules, state.q, state.v))


class Diagnostics(NamedTuple):
    """Along a trajectory (leading axis: stored states)."""
    t: jnp.ndarray
    energy: Energies            # each (n,)
    dissipated_power: jnp.ndarray   # (n,) Σ c ℓ̇² of the dampers
    applied_power: jnp.ndarray      # (n,) Σ vᵀQ of the applied loads (forces.applied_power)
    position_error: jnp.ndarray     # (n, n_C + n_J) Φ_p (m or rad), then the joint couplings' g
    velocity_error: jnp.ndarray     # (n, n_C + n_J) Φ_v (m/s or rad/s), then the joint couplings' G v
    contact_names: tuple
    n_c: tuple
    limit_exits: tuple = ()         # LimitExit per joint leaving its limits (first stored state), by time
    coupling_names: tuple = ()      # the joint couplings of the last n_J columns, in order

    @property
    def energy_drift(self):
        """max |E(t) − E(0)| (J)."""
        return float(np.max(np.abs(np.asarray(self.energy.total) - float(self.energy.total[0]))))

    @property
    def relative_energy_drift(self):
        """max |E(t) − E(0)| / max(|E(0)|, max T): relative to the total energy, or to the kinetic energy
        exchanged when the potential's datum makes E(0) small."""
        scale = max(abs(float(self.energy.total[0])), float(np.max(np.asarray(self.energy.kinetic))))
        return self.energy_drift / max(scale, np.finfo(float).tiny)

    @property
    def constraint_drift(self):
        """max over time and constrained directions (contacts and joint couplings) of |Φ_p|, |g|."""
        pe = np.asarray(self.position_error)
        return float(np.max(np.abs(pe))) if pe.size else 0.0

    @property
    def velocity_drift(self):
        ve = np.asarray(self.velocity_error)
        return float(np.max(np.abs(ve))) if ve.size else 0.0

    @property
    def work_done(self):
        """∫₀ᵗ (P_applied − P_dissipated) dt at every stored state (J): SciPy's cumulative Simpson rule over the
        stored times, so its own error is O(Δt³) of the output spacing."""
        from scipy.integrate import cumulative_simpson
        net = np.asarray(self.applied_power, float) - np.asarray(self.dissipated_power, float)
        t = np.asarray(self.t, float)
        return cumulative_simpson(net, x=t, initial=0.0) if len(t) > 2 else np.zeros_like(t)

    @property
    def energy_balance(self):
        """E(t) − E(0) − :attr:`work_done` at every stored state (J): zero along an exact motion (work-energy
        theorem; E includes the springs' stored energy)."""
        E = np.asarray(self.energy.total, float)
        return E - E[0] - self.work_done

    def per_contact(self, which="position"):
        """dict contact or joint coupling name -> max |Φ| over time (|g| or |G v| for a coupling)."""
        err = np.abs(np.asarray(self.position_error if which == "position" else self.velocity_error))
        out, s = {}, 0
        for name, n in zip(self.contact_names + self.coupling_names, self.n_c + (1,) * len(self.coupling_names)):
            out[name] = float(err[:, s:s + n].max()) if n else 0.0
            s += n
        return out


def all_constraint_errors(system, state, t=0.0, position_targets=()):
    """(position, velocity) errors of every constraint at ``state``, flat: the contacts' Φ_p, Φ_v
    (:func:`~.stabilisation.constraint_errors`, contact order) then the joint couplings' g, G v
    (:func:`~.couplings.coupling_errors`, coupling order). Pure, jit/vmap/grad-able."""
    errs = constraint_errors(system, state, t, position_targets)
    g, Gv = coupling_errors(system, state)
    dtype = state.q[0].dtype
    return _flat(tuple(errs.position) + (g,), dtype), _flat(tuple(errs.velocity) + (Gv,), dtype)


def _state_diagnostics(system, forces, targets, state, t):
    pe, ve = all_constraint_errors(system, state, t, targets)
    diss = dissipated_power(system, forces, state) if forces else jnp.zeros((), dtype=state.q[0].dtype)
    return (system_energy(system, state, forces), diss, applied_power(system, forces, state, t), pe, ve)


@jax.jit
def _diagnostics_core(system, forces, stabilisation, q, v, t):
    targets = stabilisation.position_targets if stabilisation is not None else ()
    return jax.vmap(lambda q, v, t: _state_diagnostics(system, forces, targets, SystemState(q, v), t))(q, v, t)


def trajectory_diagnostics(system, traj, forces=(), stabilisation=None):
    """Energies, dissipated and applied power and constraint errors at every stored state of ``traj``
    (:class:`Diagnostics`); ``stabilisation`` only supplies position targets of excited contacts."""
    forces = tuple(forces)
    dtype = traj.q[0].dtype
    E, P, W, pe, ve = _diagnostics_core(system, _as_float(forces, dtype), stabilisation, tuple(traj.q),
                                        tuple(traj.v), jnp.asarray(traj.t, dtype))
    return Diagnostics(traj.t, E, P, W, pe, ve, system.contact_names, system.connectivity.n_c,
                       limit_exits(system, traj) if not _is_traced(traj.q) else (),
                       tuple(c.name for c in system.couplings))


# ----------------------------------------------------------------------------- consistent initial states
def _retract(system, q, dv_flat):
    out, s = [], 0
    for m, qk in zip(system.modules, q):
        dv = dv_flat[s:s + m.nv]
        s += m.nv
        out.append(normalize_configuration(m, integrate_configuration(m, qk, dv, 1.0)))
    return tuple(out)


def _flat(xs, dtype):
    return jnp.concatenate(xs) if xs else jnp.zeros(0, dtype=dtype)


def project_positions(system, state, t=0.0, iterations=10, position_targets=(), rcond=1e-10):
    """Gauss-Newton on Φ_p(q) = 0 with a fixed number of ``iterations``, Φ_p the contacts' position errors and
    the joint couplings' residuals g (:func:`all_constraint_errors`): q ← q ⊕ Δ with the least-norm
    Δ = −J⁺ Φ_p, J = ∂Φ_p/∂Δ (exact, by forward-mode autodiff through the configuration update, so
    quaternions stay unit). Returns (state with projected q and the given v, residual max |Φ_p|).
    Pure and jit-able. Redundant constraints are fine (least squares with cut-off ``rcond``, by LAPACK's
    ``jnp.linalg.lstsq``, kept because its rank cut-off has no cheap exact LAPACK-free equivalent): to project
    a large batch of states on jax 0.10.x on a 2-core CPU, where batched LAPACK calls in ``jit(vmap)`` can
    deadlock (docs/known_traps.md), map it in chunks, ``jax.lax.map(f, states, batch_size=64)``."""
    dtype = state.q[0].dtype
    nv = sum(m.nv for m in system.modules)
    zeros_v = tuple(jnp.zeros(m.nv, dtype=dtype) for m in system.modules)

    def phi_p(q):
        return all_constraint_errors(system, SystemState(q, zeros_v), t, position_targets)[0]

    def body(_, q):
        r = phi_p(q)
        J = jax.jacfwd(lambda dv: phi_p(_retract(system, q, dv)))(jnp.zeros(nv, dtype=dtype))
        dv = -jnp.linalg.lstsq(J, r, rcond=rcond)[0]
        return _retract(system, q, dv)

    q = jax.lax.fori_loop(0, iterations, body, tuple(state.q))
    r = phi_p(q)
    return SystemState(q, tuple(state.v)), (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def project_velocities(system, state, t=0.0, rcond=1e-10):
    """Least-norm change of v that satisfies the velocity constraints J v = ẋᶜ (Bonaventura eq. 105, Φ_v = 0)
    and the joint couplings' G v = 0: v ← v − [J; G]⁺ [Φ_v; G v]. Returns (state, residual max |Φ_v|, |G v|).
    Pure and jit-able. LAPACK ``lstsq`` with cut-off ``rcond``: see :func:`project_positions` about batching it."""
    dtype = state.q[0].dtype
    J = jnp.concatenate([constraint_jacobian(system, state, t), coupling_jacobian(system, state)])
    v = _flat(tuple(state.v), dtype)
    r = all_constraint_errors(system, state, t)[1]
    v = v - jnp.linalg.lstsq(J, r, rcond=rcond)[0] if r.size else v
    out, s = [], 0
    for m in system.modules:
        out.append(v[s:s + m.nv])
        s += m.nv
    new = SystemState(tuple(state.q), tuple(out))
    r = all_constraint_errors(system, new, t)[1]
    return new, (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def make_consistent(system, state, t=0.0, iterations=10, position_targets=()):
    """:func:`project_positions` then :func:`project_velocities`; returns (state, position residual,
    velocity residual)."""
    state, rp = project_positions(system, state, t, iterations, position_targets)
    state, rv = project_velocities(system, state, t)
    return state, rp, rv


# ----------------------------------------------------------------------------- checking a state
class StateReport(NamedTuple):
    position_error: dict        # contact or joint coupling name -> max |Φ_p| (|g| for a coupling)
    velocity_error: dict        # contact or joint coupling name -> max |Φ_v| (|G v| for a coupling)
    condition_number: float     # of Bᶜ (inf when singular)
    weak_contacts: tuple        # contacts (and joint couplings) spanning the near-null space of Bᶜ (bordered)


def constraint_matrix(system, state, t=0.0):
    """Bᶜ = ψᶜᵀ B ψᶜ (Bonaventura eq. 88), the matrix of the solve, at ``state``: Table 17's contact-pair blocks
    (:func:`~mrds_jax.system.constraint_space.constraint_space_matrix`, through the Step 2-3 quantities of
    :func:`~mrds_jax.system.dynamics.constraint_system`; it depends on the configuration only). With joint
    couplings, the bordered matrix [Bᶜ X; Xᵀ D] of the solve (:func:`~.couplings.coupled_constraint_system`):
    contacts' rows first, then one row per coupling."""
    cs = constraint_system(system, state, None, t)
    if not system.couplings:
        return cs.Bc
    return coupled_constraint_system(system, state, cs, cs.yc, _taus(system, None, cs.yc.dtype)).Bc


@jax.jit
def _report_core(system, state, t, targets_holder):
    return (constraint_errors(system, state, t, targets_holder.position_targets), coupling_errors(system, state),
            constraint_matrix(system, state, t))


def check_initial_state(system, state, t=0.0, tol=1e-6, tol_velocity=None, cond_warn=1e8, position_targets=(),
                        raise_on_violation=True):
    """Check a concrete state before a simulation. Raises :class:`~mrds_jax.integrate.SimulationError` if
    it is not finite (naming module and array), :class:`InconsistentStateError` naming every contact whose
    max |Φ_p| exceeds ``tol`` (m or rad) or max |Φ_v| exceeds ``tol_velocity`` (default ``tol``; m/s or
    rad/s), and every joint coupling whose |g| or |G v| does, with the sizes; warns :class:`SingularConfigurationWarning` when Bᶜ's condition number exceeds
    ``cond_warn`` (None: no check). Returns a :class:`StateReport`."""
    for name, m, q, v in zip(system.module_names, system.modules, state.q, state.v):
        for label, x in (("q", q), ("v", v)):
            bad = np.flatnonzero(~np.isfinite(np.asarray(x)))
            if bad.size:
                raise SimulationError(f"initial state: module {name!r} has non-finite {label}{bad.tolist()} "
                                      f"(= {np.asarray(x)[bad]})")
    tol_velocity = tol if tol_velocity is None else tol_velocity
    dtype = jnp.asarray(state.q[0]).dtype
    holder = Stabilisation(position_targets=tuple(position_targets))
    errs, (g, Gv), Bc = _report_core(system, _as_float(state, dtype), jnp.asarray(t, dtype), holder)
    names, slices = constraint_rows(system)
    kind = {n: "contact" if i < len(system.contacts) else "joint coupling" for i, n in enumerate(names)}
    pos = {n: float(np.max(np.abs(np.asarray(e)))) if np.size(e) else 0.0
           for n, e in zip(names, tuple(errs.position) + tuple(g))}
    vel = {n: float(np.max(np.abs(np.asarray(e)))) if np.size(e) else 0.0
           for n, e in zip(names, tuple(errs.velocity) + tuple(Gv))}
    cond, weak = validation.constraint_conditioning(Bc, cond_warn, names, slices)
    bad = [f"{kind[n]} {n!r}: position error {pos[n]:.3g} (m or rad)" for n in pos if not pos[n] <= tol]
    bad += [f"{kind[n]} {n!r}: velocity error {vel[n]:.3g} (m/s or rad/s)" for n in vel
            if not vel[n] <= tol_velocity]
    if bad and raise_on_violation:
        raise InconsistentStateError(
            "the initial state violates the constraints beyond the tolerance "
            f"(position {tol:g}, velocity {tol_velocity:g}): " + "; ".join(bad)
            + ". Use mrds_jax.system.make_consistent (or project_positions / project_velocities) first.")
    return StateReport(pos, vel, cond, weak)


__all__ = ["Diagnostics", "Energies", "InconsistentStateError", "SingularConfigurationError",
           "SingularConfigurationWarning", "StateReport", "default_stabilisation", "report_solve",
           "Trajectory", "check_initial_state", "all_constraint_errors", "constraint_matrix", "make_consistent", "project_positions", "project_velocities",
           "simulate", "system_acceleration", "dynamics_path", "system_energy", "total_momentum", "trajectory_diagnostics",
           "trajectory_states"]
