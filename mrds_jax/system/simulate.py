"""System rollouts: :func:`simulate` integrates a system (MRDS Steps 2-4 at every integrator stage) with force
elements (:mod:`.forces`), constant joint forces and optional constraint stabilisation (:mod:`.stabilisation`) on top
of :func:`mrds_jax.integrate.rollout` (``lax.scan``, decimated outputs, quaternion renormalisation). Outside a trace it
first checks the initial state (:func:`~.initial_state.check_initial_state`) and afterwards turns a NaN into a
:class:`~mrds_jax.integrate.SimulationError` naming the step, and reports the constraint solve's health
(:func:`~.solve_report.report_solve`). The numerical core is one ``jax.jit`` cached on the system's structure, so
repeated calls with new parameters, states, gains or step sizes do not recompile.

The system layer's run-time concerns, one file each: :mod:`.acceleration` (which algorithm computes q̈, and q̈ with
forces and stabilisation), this module (the rollout), :mod:`.solve_report` (the solve along a run),
:mod:`.diagnostics` (energies, momentum, constraint drift), :mod:`.projection` (consistent states) and
:mod:`.initial_state` (checking a state). Their public names are imported here too.
"""
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .. import validation
from ..integrate.adaptive import dopri5
from ..integrate.rollout import nonfinite_description
from ..pytree import float_leaves_as
from ..validation.arguments import is_traced
from .build import SystemState
from .forces import validate_forces
from .limits import report_limits
from .options import Checks, ContactStep, Integration, Output, check_groups, accept_moved_keywords
from .acceleration import resolve_stabilisation, system_acceleration
from .solve_report import _last_finite_state, _state_at, _weak_contacts
from .timestepping import (ContactSettings, buffer_capacity, collision_model_of, contact_rollout, has_unilateral_rows,
                           start_violations, validate_contact_modes, validate_contact_settings)

# the public names of the run-time files, importable from here as before the split (module docstring)
from ..integrate import INTEGRATORS, SimulationError, Trajectory, check_trajectory, rollout  # noqa: F401
from ..validation import SingularConfigurationWarning  # noqa: F401
from .acceleration import BAUMGARTE_STEPS, PATHS, default_stabilisation, dynamics_path  # noqa: F401
from .diagnostics import (Diagnostics, Energies, all_constraint_errors, system_energy,  # noqa: F401
                          total_momentum, trajectory_diagnostics)
from .initial_state import InconsistentStateError, StateReport, check_initial_state, constraint_matrix  # noqa: F401
from .projection import make_consistent, project_positions, project_velocities  # noqa: F401
from .solve_report import SingularConfigurationError, report_solve  # noqa: F401


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


@functools.partial(jax.jit, static_argnames=("n_steps", "decimation", "settings", "contact_modes"))
def _contact_core(system, q0, v0, dt, t0, forces, tau, mode_params, n_steps, decimation, settings, contact_modes):
    return contact_rollout(system, q0, v0, dt, n_steps, decimation, t0, forces, tau, contact_modes, settings,
                           mode_params)


# accept_moved_keywords wraps simulate: the warnings of this file that name simulate's caller count its frame
@accept_moved_keywords
def simulate(system, state0, dt, n_steps=None, *, forces=(), tau=None, integration=Integration(), checks=Checks(),
             output=Output(), contact=ContactStep()):
    """Integrate ``n_steps`` steps of size ``dt`` from ``state0`` (a :class:`SystemState`), storing every
    ``output.decimation``-th state (the first stored state is ``state0``); or, without ``n_steps``, up to the end
    time ``integration.t_end`` (fixed-step integrators: n_steps = round((t_end − t0)/dt), a static number, so a new
    end time recompiles). Returns a :class:`~mrds_jax.integrate.Trajectory` (t, q and v per module, first non-finite
    step, solve diagnostics); a system with collision geometry or joint limits returns a
    :class:`~.timestepping.ContactTrajectory` instead (below, *Unilateral constraints*).

    ``forces``: force elements (:mod:`.forces`); ``tau``: constant joint forces per module. The settings come in four
    small named tuples (:mod:`.options`; every default the one the flat keyword of the same name had before they
    were grouped; such a keyword still works for one release, with a
    :class:`~.options.MovedKeywordWarning` saying where it went):

    * ``integration`` (:class:`~.options.Integration`): ``integrator`` "rk4_compact" (default: classical RK4 with
      its stages in a ``lax.scan``, so the system dynamics is traced and compiled once instead of four times — on
      the planar four-bar about 2.5× faster to compile, 4× faster to compile under ``jax.grad``, and no slower per
      step on CPU), "rk4" (stages unrolled), "euler" (semi-implicit, one evaluation per step) or "dopri5" (below);
      ``stabilisation`` "auto" (default: Baumgarte with α = β = 1/(50 dt), :func:`default_stabilisation`), None
      (off) or a :class:`~mrds_jax.system.stabilisation.Stabilisation`; ``solver``, ``method``: as in
      :func:`~mrds_jax.system.forward_dynamics`; ``path``: "auto" (default: Lilly & Orin's fast path for simple
      closed chains, the general MRDS path otherwise; when, with checks and concrete inputs, the Lilly run goes
      non-finite — a chain at a kinematic singularity, e.g. fully extended, where its M_k of Lilly & Orin eq. 36 is
      singular — it is rerun on the general path with a :class:`SingularConfigurationWarning`), "general" or
      "lilly" (:func:`dynamics_path`); ``t0`` the start time, ``t_end`` the end time; ``rtol``, ``atol``,
      ``max_steps`` dopri5's.
    * ``checks`` (:class:`~.options.Checks`): ``enabled``, ``tol``, ``cond_warn``, ``cond_jump``, ``residual_warn``,
      ``strict`` (below).
    * ``output`` (:class:`~.options.Output`): ``decimation`` (fixed-step runs), ``n_out`` (dopri5).
    * ``contact`` (:class:`~.options.ContactStep`): ``settings``, ``modes``, ``mode_params``, ``unilateral``
      (below, *Unilateral constraints*).

    ``Integration(integrator="dopri5", t_end=...)``: error-controlled Dormand-Prince 5(4)
    (:func:`mrds_jax.integrate.adaptive.dopri5`) from t0 to ``t_end`` at tolerances ``rtol``/``atol`` (on every q
    and v component), ``dt`` its first step, storing ``output.n_out`` + 1 equally spaced states t0 … t_end; ``t_end``,
    ``t0``, ``dt``, the tolerances and every parameter are traced, so a new end time, output spacing (for the same
    ``n_out``) or tolerance does not recompile. Returns :class:`~mrds_jax.integrate.adaptive.AdaptiveTrajectory`
    (with the numbers of accepted and rejected steps). Differentiable in forward mode. Its default stabilisation is
    the same Baumgarte rate 1/(50 dt) with ``dt`` the first step.

    The returned trajectory carries the constraint solve's diagnostics: ``traj.solve`` (a
    :class:`~mrds_jax.integrate.integrators.SolveInfo` of arrays over the stored states: the worst relative
    residual, condition of the part of Bᶜ solved and number of dropped directions over the steps since the
    previous stored state) and ``traj.last_finite`` (those of the last step that was still finite).
    With ``checks.enabled`` (default) and concrete inputs: the initial state is checked first
    (:func:`check_initial_state` with ``checks.tol`` and ``checks.cond_warn``); a NaN in the result raises
    :class:`~mrds_jax.integrate.SimulationError` naming the step, the last finite solve's condition and the
    contacts spanning Bᶜ's near-null space there; and where during the run the condition exceeds
    ``cond_warn`` or ``cond_jump`` times its median over the run (passing near a singular configuration:
    on the parallelogram chain the condition rises from ~10 to 1e5-1e7 within a step of the crossing), the
    solve drops more directions than it does everywhere else in the run (at a singular configuration;
    redundant constraints drop theirs throughout and are reported once, at t₀) or the residual exceeds
    ``residual_warn`` (with redundant constraints, whose unmet inconsistent part leaves a small residual at every
    step, ``cond_jump`` times its median over the run if that is larger), a
    :class:`SingularConfigurationWarning` names the time windows and the contacts and
    says which settings help (``Checks(strict=True)``: :class:`SingularConfigurationError` instead).
    Joint limits the modules keep (``Topology.joint_limits``; not enforced) that the stored states leave are
    named with the first time in a :class:`~mrds_jax.system.limits.JointLimitWarning` (also in
    :func:`trajectory_diagnostics`' ``limit_exits``).
    Under ``jit``/``vmap``/``grad`` the checks are skipped (use
    :func:`~mrds_jax.integrate.check_trajectory` and :func:`report_solve` on the result).

    **Unilateral constraints.** A system with collision geometry (``System.collision``) or joint limits
    (``Topology.joint_limits``, from the builder or a file) is integrated by the velocity-level step of
    :mod:`.timestepping` (Moreau–Jean: loops, limits and frictional contacts in one problem per step), whatever
    ``integration.integrator`` says; ``contact.settings`` (:class:`~.timestepping.ContactSettings`) sets its solver
    and drift correction, ``contact.modes`` (a function (t, q, v, mode_params) → one boolean per contact of the
    system, hashable; ``contact.mode_params`` traced) switches bilateral contacts (grasps, welds) on and off during
    the run. Actuators with activation dynamics (:mod:`.actuation`) also run on this step (it carries their
    activations, as MuJoCo's ``mj_step``; ``traj.activations``), with or without collision geometry and limits. It
    returns a :class:`~.timestepping.ContactTrajectory` (states, impulses of every row, gaps, contact points and
    frames, the solver's residuals per stored state) and, with checks, warns (:class:`ContactSolveWarning`) at the
    stored states whose ``traj.converged`` is False (a step not solved to ``NCPSettings.tolerance``).
    ``ContactStep(unilateral=False)`` ignores the collision geometry and the limits (the exact acceleration-level
    path; limits are then only reported).

    Example: ``simulate(system, state, 1e-3, 2000, forces=springs, integration=Integration(stabilisation=None),
    checks=Checks(enabled=False), output=Output(decimation=10))``.
    """
    check_groups("simulate", integration=integration, checks=checks, output=output, contact=contact)
    integrator, stabilisation, path, method, solver, t0, t_end, rtol, atol, max_steps = integration
    check, tol, cond_warn, cond_jump, residual_warn, strict = checks
    decimation, n_out = output
    contact_settings, contact_modes, mode_params, unilateral = contact
    validation.simulation(system, state0, dt, n_steps, decimation, integrator, (*INTEGRATORS, "dopri5"), t_end)
    validation.positive(residual_warn, "checks.residual_warn", "simulate")
    forces = tuple(forces)
    stateful = [el.name for el in forces if getattr(el, "stateful", False)]
    velocity_level = unilateral and (has_unilateral_rows(system) or contact_modes is not None or bool(stateful))
    _check_contact_arguments(system, velocity_level, unilateral, contact_settings, contact_modes)
    if velocity_level:
        settings = validate_contact_settings(ContactSettings() if contact_settings is None else contact_settings)
        if contact_modes is not None:
            validate_contact_modes(system, contact_modes, tuple(state0.q), tuple(state0.v), mode_params)
        return _simulate_contact(system, state0, dt, n_steps, decimation, forces, tau, t0, check, tol, t_end,
                                 residual_warn, settings, contact_modes, mode_params)
    forces = tuple(forces)
    if stateful:
        raise validation.ArgumentError(f"simulate: actuators {stateful} have activation dynamics, which only the "
                                       "velocity-level step carries; ContactStep(unilateral=False) turns it off")
    stabilisation = resolve_stabilisation(stabilisation, dt)
    chosen = dynamics_path(system, path, stabilisation, solver)   # decided here, on concrete gains when possible
    # a chain at a kinematic singularity (e.g. fully extended) makes Lilly's M_k (Lilly & Orin eq. 36) singular while the
    # general path's minimum-norm solve is fine: a run on the path "auto" chose that goes non-finite is rerun
    # there (concrete inputs only; under a trace the path stays what dynamics_path says)
    fallback = check and path == "auto" and chosen == "lilly"
    path = chosen
    dtype = jnp.asarray(state0.q[0]).dtype
    traced = is_traced((system, state0, dt, t0, forces, stabilisation, tau))
    if check and not traced:
        validate_forces(system, forces)
        targets = stabilisation.position_targets if stabilisation is not None else ()
        check_initial_state(system, state0, t=t0, tol=tol, cond_warn=cond_warn, position_targets=targets)
    args = float_leaves_as((tuple(state0.q), tuple(state0.v), dt, t0, forces, stabilisation, tau), dtype)
    if integrator == "dopri5":
        if t_end is None:
            raise validation.ArgumentError("simulate: Integration(integrator='dopri5') integrates to an end time: "
                                           "give Integration(t_end=...)")

        def adaptive(path):
            return _simulate_adaptive_core(system, *args, *float_leaves_as((t_end, rtol, atol), dtype), n_out=n_out,
                                           max_steps=max_steps, solver=solver, method=method, path=path)

        def finite(tr):
            return all(np.all(np.isfinite(np.asarray(x))) for x in tr.q + tr.v)

        tr = adaptive(path)
        if check and not is_traced(tr.reached_end) and np.ndim(tr.reached_end) == 0:
            if fallback and not finite(tr):
                _warn_lilly_fallback("the state became NaN/inf")
                tr = adaptive("general")
            if not finite(tr):
                raise SimulationError(f"dopri5: the state became NaN/inf ({int(tr.accepted)} steps accepted)")
            if not bool(tr.reached_end):
                raise SimulationError(f"dopri5: Integration.max_steps = {max_steps} ran out before t_end = "
                                      f"{float(t_end):g} s ({int(tr.accepted)} accepted, {int(tr.rejected)} rejected); "
                                      "loosen Integration.rtol/atol or raise Integration.max_steps")
        return tr
    if n_steps is None:
        if is_traced((t_end, dt, t0)):
            raise ValueError("fixed-step integrators need a concrete t_end and dt (n_steps is static); use "
                             "Integration(integrator='dopri5') for a traced end time")
        n_steps = int(round((float(t_end) - float(t0)) / float(dt)))
        n_steps -= n_steps % decimation

    def fixed_step(path):
        return _simulate_core(system, *args, n_steps=n_steps, decimation=decimation, integrator=integrator,
                              solver=solver, method=method, path=path)

    traj = fixed_step(path)
    if check and not is_traced(traj.first_nonfinite) and np.ndim(traj.first_nonfinite) == 0:
        dt_value = None if is_traced(dt) else float(dt)
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


def _check_contact_arguments(system, velocity_level, unilateral, contact_settings, contact_modes):
    """Named errors for :class:`~.options.ContactStep` settings :func:`simulate` would otherwise ignore: ``modes``
    with ``unilateral=False`` (the acceleration-level path keeps every contact on), ``settings`` where the
    velocity-level step does not run (no collision geometry, no joint limits, no ``modes``, no activation
    dynamics; or ``unilateral=False``)."""
    if contact_modes is not None and not unilateral:
        raise validation.ArgumentError("simulate: ContactStep.modes switches contacts in the velocity-level step, "
                                       "which ContactStep(unilateral=False) turns off; drop one of the two")
    if contact_settings is not None and not velocity_level:
        why = "unilateral=False" if not unilateral else "the system has no collision geometry or joint limits"
        raise validation.ArgumentError(f"simulate: ContactStep.settings set the velocity-level step, which does not "
                                       f"run here ({why}); drop them or use Integration(solver=..., "
                                       "stabilisation=...)")


class ContactOverflowWarning(UserWarning):
    """More one-sided rows or contact slots could act in some step than the step's buffer holds
    (:class:`~.timestepping.ContactSettings` ``max_limit_rows``, ``max_contacts``), or more collision pairs of one
    kind were within reach than the broad phase computes (``ContactSettings.broad_phase``,
    :class:`~mrds_jax.collision.BroadPhase` ``max_pairs``)."""


class ContactSolveWarning(UserWarning):
    """The velocity-level step's constraint problem was not solved to the residual asked for at some steps."""


class PenetrationWarning(UserWarning):
    """The initial state of a contact simulation penetrates a collision pair or is past a joint limit."""


def _warn_start_violations(system, state):
    """A :class:`PenetrationWarning` naming the pairs that penetrate and the joints past a limit at the start
    (:func:`~.timestepping.start_violations`, as ``mrds-jax check`` lists them): the step pushes them out on the
    position level over a few steps (:class:`~.position_correction.PositionCorrection`), never by a launch, but
    the start is not what the user described."""
    from .timestepping import _as_system_float
    pairs, joints = start_violations(system, SystemState(*_as_system_float(system, state.q, state.v)))
    if pairs or joints:
        what = [f"pair {n} {d:.3g} m deep" for n, d in pairs.items()]
        what += [f"joint {n} {d:.3g} past its limit" for n, d in joints.items()]
        warnings.warn("the initial state penetrates or is past a limit: " + "; ".join(what) + ". The step pushes it "
                      "out over a few steps (ContactSettings.correction); make_consistent(system, state) resolves "
                      "it before the run", PenetrationWarning, stacklevel=5)


def _broad_phase_can_grow(system, traj, settings):
    """Whether a concrete run overflowed the broad phase's default capacities (``max_pairs`` unset) and doubling
    ``BroadPhase.capacity_factor`` would give some pair kind more places."""
    from ..collision.model import pair_capacities
    model = collision_model_of(system)
    if (model is None or settings.broad_phase.max_pairs is not None or is_traced(traj.pair_overflow)
            or not np.any(np.asarray(traj.pair_overflow))):
        return False
    return any(capacity < count for capacity, count in pair_capacities(model, settings.broad_phase).values())


def _simulate_contact(system, state0, dt, n_steps, decimation, forces, tau, t0, check, tol, t_end, residual_warn,
                      settings, contact_modes, mode_params):
    """:func:`simulate` for systems with unilateral rows (its docstring)."""
    forces = tuple(forces)
    dtype = jnp.asarray(state0.q[0]).dtype
    traced = is_traced((system, state0, dt, t0, forces, tau))
    if check and not traced:
        validate_forces(system, forces)
        check_initial_state(system, state0, t=t0, tol=tol, cond_warn=np.inf)
        _warn_start_violations(system, state0)
    if n_steps is None:
        if is_traced((t_end, dt, t0)):
            raise ValueError("the velocity-level step needs a concrete t_end and dt (n_steps is static)")
        n_steps = int(round((float(t_end) - float(t0)) / float(dt)))
        n_steps -= n_steps % decimation
    q0, v0, dt_, t0_, forces, tau = float_leaves_as((tuple(state0.q), tuple(state0.v), dt, t0, forces, tau), dtype)
    run = lambda settings: _contact_core(system, q0, v0, dt_, t0_, forces, tau, float_leaves_as(mode_params, dtype),  # noqa: E731
                                         n_steps=n_steps, decimation=decimation, settings=settings,
                                         contact_modes=contact_modes)
    traj = run(settings)
    while _broad_phase_can_grow(system, traj, settings):
        first = float(np.asarray(traj.t)[np.flatnonzero(np.asarray(traj.pair_overflow))[0]])
        settings = settings._replace(broad_phase=settings.broad_phase._replace(
            capacity_factor=2 * settings.broad_phase.capacity_factor))
        warnings.warn(f"more collision pairs of one kind were within reach than the broad phase's default capacity "
                      f"(first at t = {first:g} s): run again with twice the capacity, "
                      f"ContactSettings(broad_phase=BroadPhase(capacity_factor={settings.broad_phase.capacity_factor}))"
                      " (pass it, or BroadPhase(max_pairs=...), to compile the larger buffer at once)",
                      ContactOverflowWarning, stacklevel=4)
        traj = run(settings)
    if check and not is_traced(traj.first_nonfinite) and np.ndim(traj.first_nonfinite) == 0:
        if int(traj.first_nonfinite) >= 0:
            raise SimulationError(f"the state became NaN/inf at step {int(traj.first_nonfinite)} "
                                  f"(t = {float(t0) + int(traj.first_nonfinite) * float(dt):g} s)")
        worst = np.maximum(np.asarray(traj.primal), np.asarray(traj.complementarity))
        # the solver's own verdict (NCPSettings.tolerance, relative to the step's velocity scale and floored at the
        # dtype's resolution; NaN is never converged): the warning and traj.converged say the same thing
        bad = np.flatnonzero(~np.asarray(traj.converged))
        if bad.size:
            its = np.asarray(traj.iterations_max)
            warnings.warn(f"the contact problem was not solved to NCPSettings.tolerance "
                          f"({settings.ncp.tolerance:g} of the step's velocity scale) at {bad.size} stored "
                          f"states (first t = {float(np.asarray(traj.t)[bad[0]]):g} s, worst primal/complementarity "
                          f"residual {np.nanmax(worst):.2e}, at most {int(its.max())} iterations a step); raise "
                          "ContactSettings.ncp stages/iterations, or the problem is ill-posed (Painlevé, redundant "
                          "rows): the impulses stay finite", ContactSolveWarning, stacklevel=4)
        overflow = np.asarray(traj.overflow) | np.asarray(traj.pair_overflow)
        if np.any(overflow):
            first = float(np.asarray(traj.t)[np.flatnonzero(overflow)[0]])
            warnings.warn(f"more one-sided rows or contact slots could act than the step's buffer holds, or more "
                          f"collision pairs of one kind were within reach than the broad phase computes (first at "
                          f"t = {first:g} s; buffer_capacity gives {buffer_capacity(system, settings)} limit rows and "
                          "contact slots): the farthest were left out of those steps; raise "
                          "ContactSettings.max_limit_rows / max_contacts / broad_phase.max_pairs",
                          ContactOverflowWarning, stacklevel=4)
    return traj


def _warn_lilly_fallback(what):
    warnings.warn(f"Lilly & Orin's path (chosen by path='auto') failed ({what}): a chain is at a kinematic "
                  "singularity where its M_k (Lilly & Orin eq. 36) is singular, e.g. fully extended; reran on the general path, "
                  "whose minimum-norm solve handles it. Pass Integration(path='general') to skip the first attempt",
                  SingularConfigurationWarning, stacklevel=4)


def trajectory_states(traj):
    """The stored states of a trajectory as one :class:`SystemState` with a leading time axis."""
    return SystemState(tuple(traj.q), tuple(traj.v))


__all__ = ["Diagnostics", "Energies", "InconsistentStateError", "SingularConfigurationError",
           "SingularConfigurationWarning", "StateReport", "default_stabilisation", "report_solve",
           "Trajectory", "check_initial_state", "all_constraint_errors", "constraint_matrix", "make_consistent", "project_positions", "project_velocities",
           "simulate", "system_acceleration", "dynamics_path", "system_energy", "total_momentum", "trajectory_diagnostics",
           "trajectory_states"]
