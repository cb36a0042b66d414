"""System rollouts, conserved quantities and constraint diagnostics, consistent initial states.

* :func:`simulate` — integrates a system (MRDS Steps 2-4 at every integrator stage) with force elements
  (:mod:`.forces`), constant joint forces and optional constraint stabilisation (:mod:`.stabilisation`) on
  top of :func:`mrds_jax.integrate.rollout` (``lax.scan``, decimated outputs, quaternion renormalisation).
  Outside a trace it first checks the initial state (:func:`check_initial_state`) and afterwards turns a
  NaN into a :class:`~mrds_jax.integrate.SimulationError` naming the step. The numerical core is one
  ``jax.jit`` cached on the system's structure, so repeated calls with new parameters, states, gains or
  step sizes do not recompile.
* :func:`system_energy`, :func:`total_momentum`, :func:`trajectory_diagnostics` — kinetic + potential +
  elastic energy, spatial momentum, and the constraint errors Φ_p (position, m or rad) and Φ_v (eq. 105)
  along a trajectory.
* :func:`project_positions` (Gauss-Newton on Φ_p with a fixed number of iterations), :func:`project_velocities`
  (least-norm correction onto J v = ẋᶜ), :func:`make_consistent` (both), each returning the residual.
* :func:`check_initial_state` — raises :class:`InconsistentStateError` naming every contact whose position
  or velocity error exceeds the tolerance (with its size), :class:`~mrds_jax.integrate.SimulationError` for a
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
from ..integrate import INTEGRATORS, SimulationError, Trajectory, check_trajectory, rollout  # noqa: F401
from .build import SystemError, SystemState
from .dynamics import _taus, forward_dynamics
from .lilly import lilly_forward_dynamics, lilly_stabilisation_problem, simple_closed_chain_reference
from .forces import dissipated_power, force_potential_energy, generalized_forces, validate_forces
from .solve import SolverSettings
from .stabilisation import Stabilisation, baumgarte, constraint_errors, constraint_jacobian


class InconsistentStateError(SystemError):
    """The initial state violates the constraints by more than the tolerance (names contacts and sizes)."""


class SingularConfigurationWarning(UserWarning):
    """Bᶜ is (nearly) singular: redundant constraints or a singular configuration (Bonaventura §6.4)."""


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
    rate: README "Constraint stabilisation by default" (measured on the Bennett linkage and the four-bar)."""
    return baumgarte(1.0 / (BAUMGARTE_STEPS * dt))


def resolve_stabilisation(stabilisation, dt):
    """``"auto"`` → :func:`default_stabilisation` (dt); None → off; a :class:`Stabilisation` as given."""
    if isinstance(stabilisation, str):
        if stabilisation != "auto":
            raise ValueError(f"stabilisation must be 'auto', None or a Stabilisation, got {stabilisation!r}")
        return default_stabilisation(dt)
    return stabilisation


def system_acceleration(system, forces=(), stabilisation=None, solver=SolverSettings(), method="direct", tau=None,
                        path="auto"):
    """``acceleration(q, v, t)`` for :func:`mrds_jax.integrate.rollout`: q̈ per module from the closed-chain
    dynamics chosen by :func:`dynamics_path` (``path``), with the force elements' generalized forces added to
    ``tau`` (constant per-module joint forces, tuple/dict/None). With ``path="lilly"`` given explicitly the
    stabilisation's Baumgarte gains are applied and its other parts must be off (checked when its gains are
    concrete; :func:`simulate` decides the path before tracing)."""
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
            return lilly_forward_dynamics(system, state, taus, t, reference, method, baumgarte_gains(stabilisation)).qdd
        return forward_dynamics(system, state, taus, t, solver, method, stabilisation).qdd
    return acceleration


def baumgarte_gains(stabilisation):
    """(α, β) of a stabilisation, or None when it is None."""
    return None if stabilisation is None else (stabilisation.baumgarte_alpha, stabilisation.baumgarte_beta)


@functools.partial(jax.jit, static_argnames=("n_steps", "decimation", "integrator", "solver", "method", "path"))
def _simulate_core(system, q0, v0, dt, t0, forces, stabilisation, tau, n_steps, decimation, integrator, solver,
                   method, path):
    acc = system_acceleration(system, forces, stabilisation, solver, method, tau, path)
    return rollout(system.modules, acc, q0, v0, dt, n_steps, decimation, integrator, t0)


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


def simulate(system, state0, dt, n_steps, decimation=1, integrator="rk4_compact", forces=(), stabilisation="auto",
             tau=None, solver=SolverSettings(), method="direct", t0=0.0, check=True, tol=1e-6, cond_warn=1e8,
             path="auto"):
    """Integrate ``n_steps`` steps of size ``dt`` from ``state0`` (a :class:`SystemState`), storing every
    ``decimation``-th state (the first stored state is ``state0``). Returns a
    :class:`~mrds_jax.integrate.Trajectory` (t, q and v per module, first non-finite step).

    ``integrator``: "rk4_compact" (default: classical RK4 with its stages in a ``lax.scan``, so the system
    dynamics is traced and compiled once instead of four times — on the planar four-bar about 2.5× faster
    to compile, 4× faster to compile under ``jax.grad``, and no slower per step on CPU), "rk4" (stages
    unrolled) or "euler" (semi-implicit, one evaluation per step). ``forces``: force elements
    (:mod:`.forces`); ``tau``: constant joint forces per module; ``stabilisation``: "auto" (default:
    Baumgarte with α = β = 1/(50 dt), :func:`default_stabilisation`), None (off) or a
    :class:`~mrds_jax.system.stabilisation.Stabilisation`; ``solver``, ``method``: as in
    :func:`~mrds_jax.system.forward_dynamics`; ``path``: "auto" (default: Lilly & Orin's fast path for simple
    closed chains without stabilisation, the general MRDS path otherwise), "general" or "lilly"
    (:func:`dynamics_path`).
    With ``check`` (default) and concrete inputs: the initial state is checked first
    (:func:`check_initial_state` with ``tol`` and ``cond_warn``) and a NaN in the result raises
    :class:`~mrds_jax.integrate.SimulationError` naming the step. Under ``jit``/``vmap``/``grad`` the
    checks are skipped (use :func:`~mrds_jax.integrate.check_trajectory` on the result).
    """
    validation.simulation(system, state0, dt, n_steps, decimation, integrator, INTEGRATORS)
    forces = tuple(forces)
    stabilisation = resolve_stabilisation(stabilisation, dt)
    path = dynamics_path(system, path, stabilisation, solver)   # decided here, on concrete gains when possible
    dtype = jnp.asarray(state0.q[0]).dtype
    traced = _is_traced((system, state0, dt, t0, forces, stabilisation, tau))
    if check and not traced:
        validate_forces(system, forces)
        targets = stabilisation.position_targets if stabilisation is not None else ()
        check_initial_state(system, state0, t=t0, tol=tol, cond_warn=cond_warn, position_targets=targets)
    args = _as_float((tuple(state0.q), tuple(state0.v), dt, t0, forces, stabilisation, tau), dtype)
    traj = _simulate_core(system, *args, n_steps=n_steps, decimation=decimation, integrator=integrator,
                          solver=solver, method=method, path=path)
    if check and not _is_traced(traj.first_nonfinite):
        check_trajectory(traj, float(dt) if not isinstance(dt, jax.core.Tracer) else None)
    return traj


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
    position_error: jnp.ndarray     # (n, n_C) Φ_p (m or rad)
    velocity_error: jnp.ndarray     # (n, n_C) Φ_v (m/s or rad/s)
    contact_names: tuple
    n_c: tuple

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
        """max over time and constrained directions of |Φ_p|."""
        pe = np.asarray(self.position_error)
        return float(np.max(np.abs(pe))) if pe.size else 0.0

    @property
    def velocity_drift(self):
        ve = np.asarray(self.velocity_error)
        return float(np.max(np.abs(ve))) if ve.size else 0.0

    def per_contact(self, which="position"):
        """dict contact name -> max |Φ| over time."""
        err = np.abs(np.asarray(self.position_error if which == "position" else self.velocity_error))
        out, s = {}, 0
        for name, n in zip(self.contact_names, self.n_c):
            out[name] = float(err[:, s:s + n].max()) if n else 0.0
            s += n
        return out


def _state_diagnostics(system, forces, targets, state, t):
    errs = constraint_errors(system, state, t, targets)
    cat = lambda xs: jnp.concatenate(xs) if xs else jnp.zeros(0, dtype=state.q[0].dtype)  # noqa: E731
    diss = dissipated_power(system, forces, state) if forces else jnp.zeros((), dtype=state.q[0].dtype)
    return system_energy(system, state, forces), diss, cat(errs.position), cat(errs.velocity)


@jax.jit
def _diagnostics_core(system, forces, stabilisation, q, v, t):
    targets = stabilisation.position_targets if stabilisation is not None else ()
    return jax.vmap(lambda q, v, t: _state_diagnostics(system, forces, targets, SystemState(q, v), t))(q, v, t)


def trajectory_diagnostics(system, traj, forces=(), stabilisation=None):
    """Energies, dissipated power and constraint errors at every stored state of ``traj``
    (:class:`Diagnostics`); ``stabilisation`` only supplies position targets of excited contacts."""
    forces = tuple(forces)
    dtype = traj.q[0].dtype
    E, P, pe, ve = _diagnostics_core(system, _as_float(forces, dtype), stabilisation, tuple(traj.q), tuple(traj.v),
                                     jnp.asarray(traj.t, dtype))
    return Diagnostics(traj.t, E, P, pe, ve, system.contact_names, system.connectivity.n_c)


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
    """Gauss-Newton on Φ_p(q) = 0 with a fixed number of ``iterations``: q ← q ⊕ Δ with the least-norm
    Δ = −J⁺ Φ_p, J = ∂Φ_p/∂Δ (exact, by forward-mode autodiff through the configuration update, so
    quaternions stay unit). Returns (state with projected q and the given v, residual max |Φ_p|).
    Pure and jit-able. Redundant constraints are fine (least squares with cut-off ``rcond``, by LAPACK's
    ``jnp.linalg.lstsq``, kept because its rank cut-off has no cheap exact LAPACK-free equivalent): to project
    a large batch of states on jax 0.10.x on a 2-core CPU, where batched LAPACK calls in ``jit(vmap)`` can
    deadlock (README "Known trap"), map it in chunks, ``jax.lax.map(f, states, batch_size=64)``."""
    dtype = state.q[0].dtype
    nv = sum(m.nv for m in system.modules)
    zeros_v = tuple(jnp.zeros(m.nv, dtype=dtype) for m in system.modules)

    def phi_p(q):
        return _flat(constraint_errors(system, SystemState(q, zeros_v), t, position_targets).position, dtype)

    def body(_, q):
        r = phi_p(q)
        J = jax.jacfwd(lambda dv: phi_p(_retract(system, q, dv)))(jnp.zeros(nv, dtype=dtype))
        dv = -jnp.linalg.lstsq(J, r, rcond=rcond)[0]
        return _retract(system, q, dv)

    q = jax.lax.fori_loop(0, iterations, body, tuple(state.q))
    r = phi_p(q)
    return SystemState(q, tuple(state.v)), (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def project_velocities(system, state, t=0.0, rcond=1e-10):
    """Least-norm change of v that satisfies the velocity constraints J v = ẋᶜ (eq. 105, Φ_v = 0):
    v ← v − J⁺ Φ_v(v). Returns (state, residual max |Φ_v|). Pure and jit-able. LAPACK ``lstsq`` with cut-off
    ``rcond``: see :func:`project_positions` about batching it."""
    dtype = state.q[0].dtype
    J = constraint_jacobian(system, state, t)
    v = _flat(tuple(state.v), dtype)
    r = _flat(constraint_errors(system, state, t).velocity, dtype)
    v = v - jnp.linalg.lstsq(J, r, rcond=rcond)[0] if r.size else v
    out, s = [], 0
    for m in system.modules:
        out.append(v[s:s + m.nv])
        s += m.nv
    new = SystemState(tuple(state.q), tuple(out))
    r = _flat(constraint_errors(system, new, t).velocity, dtype)
    return new, (jnp.max(jnp.abs(r)) if r.size else jnp.zeros((), dtype))


def make_consistent(system, state, t=0.0, iterations=10, position_targets=()):
    """:func:`project_positions` then :func:`project_velocities`; returns (state, position residual,
    velocity residual)."""
    state, rp = project_positions(system, state, t, iterations, position_targets)
    state, rv = project_velocities(system, state, t)
    return state, rp, rv


# ----------------------------------------------------------------------------- checking a state
class StateReport(NamedTuple):
    position_error: dict        # contact name -> max |Φ_p|
    velocity_error: dict        # contact name -> max |Φ_v|
    condition_number: float     # of Bᶜ (inf when singular)
    weak_contacts: tuple        # contacts spanning Bᶜ's near-null space


def constraint_matrix(system, state, t=0.0):
    """Bᶜ = Σₖ Jₖ Hₖ⁻¹ Jₖᵀ with Jₖ the module-k columns of the constraint Jacobian (eq. 109-111): the
    matrix of the solve (eq. 88, Bᶜ = ψᶜᵀ B ψᶜ), from kinematics and mass matrices only."""
    from ..dynamics.interface import mass_matrix
    from ..spatial.linalg import spd_solve
    J = constraint_jacobian(system, state, t)
    Bc, s = jnp.zeros((J.shape[0], J.shape[0]), dtype=J.dtype), 0
    for m, q in zip(system.modules, state.q):
        Jk = J[:, s:s + m.nv]
        s += m.nv
        Bc = Bc + Jk @ spd_solve(mass_matrix(m, q), Jk.T)     # no LAPACK call (spatial.linalg)
    return Bc


@jax.jit
def _report_core(system, state, t, targets_holder):
    return constraint_errors(system, state, t, targets_holder.position_targets), constraint_matrix(system, state, t)


def check_initial_state(system, state, t=0.0, tol=1e-6, tol_velocity=None, cond_warn=1e8, position_targets=(),
                        raise_on_violation=True):
    """Check a concrete state before a simulation. Raises :class:`~mrds_jax.integrate.SimulationError` if
    it is not finite (naming module and array), :class:`InconsistentStateError` naming every contact whose
    max |Φ_p| exceeds ``tol`` (m or rad) or max |Φ_v| exceeds ``tol_velocity`` (default ``tol``; m/s or
    rad/s), with the sizes; warns :class:`SingularConfigurationWarning` when Bᶜ's condition number exceeds
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
    errs, Bc = _report_core(system, _as_float(state, dtype), jnp.asarray(t, dtype), holder)
    pos = {c.name: float(np.max(np.abs(np.asarray(e)))) if np.size(e) else 0.0
           for c, e in zip(system.contacts, errs.position)}
    vel = {c.name: float(np.max(np.abs(np.asarray(e)))) if np.size(e) else 0.0
           for c, e in zip(system.contacts, errs.velocity)}
    Bc = np.asarray(Bc)
    cond, weak = 1.0, ()
    if Bc.size:
        w, V = np.linalg.eigh(0.5 * (Bc + Bc.T))
        cond = float(w[-1] / w[0]) if w[0] > 0 else float("inf")
        if cond_warn is not None and cond > cond_warn:
            v0 = np.abs(V[:, 0])
            slices = system.connectivity.constraint_slices()
            weak = tuple(c.name for c, sl in zip(system.contacts, slices) if v0[sl].size and v0[sl].max() > 0.1)
            warnings.warn(f"singular or redundant constraints: the constraint-space matrix Bᶜ has condition number "
                          f"{cond:.3g} (> {cond_warn:g}); contacts spanning its near-null space: {list(weak)}. "
                          "The solve returns the minimum-norm constraint forces (see SolverSettings); check for "
                          "redundant contacts or a singular configuration", SingularConfigurationWarning,
                          stacklevel=2)
    bad = [f"contact {n!r}: position error {pos[n]:.3g} (m or rad)" for n in pos if not pos[n] <= tol]
    bad += [f"contact {n!r}: velocity error {vel[n]:.3g} (m/s or rad/s)" for n in vel
            if not vel[n] <= tol_velocity]
    if bad and raise_on_violation:
        raise InconsistentStateError(
            "the initial state violates the constraints beyond the tolerance "
            f"(position {tol:g}, velocity {tol_velocity:g}): " + "; ".join(bad)
            + ". Use mrds_jax.system.make_consistent (or project_positions / project_velocities) first.")
    return StateReport(pos, vel, cond, weak)


__all__ = ["Diagnostics", "Energies", "InconsistentStateError", "SingularConfigurationWarning", "StateReport",
           "Trajectory", "check_initial_state", "constraint_matrix", "make_consistent", "project_positions", "project_velocities",
           "simulate", "system_acceleration", "dynamics_path", "system_energy", "total_momentum", "trajectory_diagnostics",
           "trajectory_states"]
