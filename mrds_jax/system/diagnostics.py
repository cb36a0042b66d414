"""Conserved quantities and constraint drift along a trajectory: :func:`system_energy` (kinetic + potential +
elastic), :func:`total_momentum` (spatial momentum), :func:`trajectory_diagnostics` (the constraint errors Φ_p,
position, and Φ_v, Bonaventura eq. 105, with the joint couplings' residuals g and G v beside them).
Split out of :mod:`.simulate` (one concern per file).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.interface import kinetic_energy, potential_energy, spatial_momentum
from ..validation.arguments import is_traced
from ..pytree import float_leaves_as
from .build import SystemState
from .couplings import coupling_errors
from .forces import applied_power, dissipated_power, force_potential_energy
from .limits import limit_exits
from .stabilisation import constraint_errors


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
    E, P, W, pe, ve = _diagnostics_core(system, float_leaves_as(forces, dtype), stabilisation, tuple(traj.q),
                                        tuple(traj.v), jnp.asarray(traj.t, dtype))
    return Diagnostics(traj.t, E, P, W, pe, ve, system.contact_names, system.connectivity.n_c,
                       limit_exits(system, traj) if not is_traced(traj.q) else (),
                       tuple(c.name for c in system.couplings))


def _flat(xs, dtype):
    return jnp.concatenate(xs) if xs else jnp.zeros(0, dtype=dtype)
