"""Checking a state before a run: :func:`check_initial_state` raises :class:`InconsistentStateError` naming every
contact and joint coupling whose position or velocity error exceeds the tolerance (with its size),
:class:`~mrds_jax.integrate.SimulationError` for a non-finite state, and warns
:class:`~mrds_jax.validation.SingularConfigurationWarning` with Bᶜ's condition number (and the contacts spanning its
near-null space) at a singular or redundant configuration; :func:`constraint_matrix` is the matrix it conditions.
Split out of :mod:`.simulate` (one concern per file).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import validation
from ..integrate import (
    SimulationError,
)
from ..pytree import float_leaves_as
from .build import SystemDescriptionError, module_taus
from .constraint_space import constraint_system
from .couplings import constraint_rows, coupled_constraint_system, coupling_errors
from .stabilisation import Stabilisation, constraint_errors


class InconsistentStateError(SystemDescriptionError):
    """The initial state violates the constraints by more than the tolerance (names contacts and sizes)."""


# ----------------------------------------------------------------------------- checking a state
class StateReport(NamedTuple):
    position_error: dict        # contact or joint coupling name -> max |Φ_p| (|g| for a coupling)
    velocity_error: dict        # contact or joint coupling name -> max |Φ_v| (|G v| for a coupling)
    condition_number: float     # of Bᶜ (inf when singular)
    weak_contacts: tuple        # contacts (and joint couplings) spanning the near-null space of Bᶜ (bordered)


def constraint_matrix(system, state, t=0.0):
    """Bᶜ = ψᶜᵀ B ψᶜ (Bonaventura eq. 88), the matrix of the solve, at ``state``: Table 17's contact-pair blocks
    (:func:`~mrds_jax.system.constraint_space.constraint_space_matrix`, through the Step 2-3 quantities of
    :func:`~mrds_jax.system.constraint_space.constraint_system`; it depends on the configuration only). With joint
    couplings, the bordered matrix [Bᶜ X; Xᵀ D] of the solve (:func:`~.couplings.coupled_constraint_system`):
    contacts' rows first, then one row per coupling."""
    cs = constraint_system(system, state, None, t)
    if not system.couplings:
        return cs.Bc
    return coupled_constraint_system(system, state, cs, cs.yc, module_taus(system, None, cs.yc.dtype)).Bc


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
    errs, (g, Gv), Bc = _report_core(system, float_leaves_as(state, dtype), jnp.asarray(t, dtype), holder)
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
