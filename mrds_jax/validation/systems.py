"""Checks of the arguments of the system layer: dictionaries by name (with a did-you-mean), per-module
arguments, states and the arguments of ``simulate``."""
import difflib
import warnings

import numpy as np

from .arguments import choice, count, positive, vector
from .errors import ArgumentError, SingularConfigurationWarning, UnknownNameError


# ----------------------------------------------------------------------------- dictionaries and systems
def did_you_mean(name, options):
    """``"; did you mean 'mass'?"`` for the closest of ``options`` to a misspelt ``name`` (difflib), or ``""``."""
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def known_keys(mapping, allowed, what, where):
    """Every key of ``mapping`` names something that exists (a misspelt key must not be ignored silently)."""
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        raise UnknownNameError(f"{where}: {what} has entries for {unknown}, which do not exist; known: "
                               f"{list(allowed)}{did_you_mean(unknown[0], allowed)}")


def per_module(system, value, what, size, where):
    """A per-module argument (joint forces ``tau``, states' ``q``/``v``): None, a dict by module name or a
    sequence with one entry per module, each of shape (module.<size>,)."""
    if value is None:
        return
    names = system.module_names
    if isinstance(value, dict):
        known_keys(value, names, what, where)
        items = [(n, m, value[n]) for n, m in zip(names, system.modules) if n in value]
    else:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise ArgumentError(f"{where}: {what} must be a dict by module name or one array per module, "
                                f"got {type(value).__name__}")
        if len(value) != len(names):
            raise ArgumentError(f"{where}: {what} has {len(value)} entries, the system has {len(names)} modules "
                                f"{list(names)} (give one array per module, or a dict by module name)")
        items = list(zip(names, system.modules, value))
    for n, m, x in items:
        if x is not None:
            vector(x, getattr(m, size), f"{what} of module {n!r}", where)


def system_state(system, state, where):
    """A :class:`~mrds_jax.system.SystemState` with one q and one v per module, of the modules' sizes."""
    if not (hasattr(state, "q") and hasattr(state, "v")):
        raise ArgumentError(f"{where}: state must be a SystemState (mrds_jax.system.make_state), got "
                            f"{type(state).__name__}")
    per_module(system, tuple(state.q), "state.q", "nq", where)
    per_module(system, tuple(state.v), "state.v", "nv", where)


def simulation(system, state0, dt, n_steps, decimation, integrator, integrators, t_end=None):
    """The arguments of ``simulate``: a state that fits the system, dt > 0, n_steps ≥ 1 a multiple of
    ``output.decimation`` ≥ 1 (or no n_steps and an end time ``integration.t_end``), a known integrator."""
    where = "simulate"
    system_state(system, state0, where)
    positive(dt, "dt", where)
    count(decimation, "output.decimation", where)
    choice(integrator, integrators, "integration.integrator", where)
    if n_steps is None:
        if t_end is None:
            raise ArgumentError(f"{where}: give n_steps or an end time Integration(t_end=...)")
        return
    count(n_steps, "n_steps", where)
    if n_steps % decimation:
        raise ArgumentError(f"{where}: n_steps ({n_steps}) must be a multiple of output.decimation ({decimation})")


def constraint_conditioning(Bc, cond_warn, contact_names, slices, prefix=""):
    """Bᶜ's condition number and the contacts spanning its near-null space, for a concrete Bᶜ; warns
    :class:`~.errors.SingularConfigurationWarning` naming them when the condition number exceeds ``cond_warn``
    (None: no warning). Returns (cond, weak contact names)."""
    Bc = np.asarray(Bc)
    if not Bc.size:
        return 1.0, ()
    w, V = np.linalg.eigh(0.5 * (Bc + Bc.T))
    cond = float(w[-1] / w[0]) if w[0] > 0 else float("inf")
    weak = ()
    if cond_warn is not None and cond > cond_warn:
        v0 = np.abs(V[:, 0])
        weak = tuple(n for n, sl in zip(contact_names, slices) if v0[sl].size and v0[sl].max() > 0.1)
        warnings.warn(f"{prefix}singular or redundant constraints: the constraint-space matrix Bᶜ has condition "
                      f"number {cond:.3g} (> {cond_warn:g}); contacts spanning its near-null space: {list(weak)}. "
                      "The solve returns the minimum-norm constraint forces (see SolverSettings); check for "
                      "redundant contacts or a singular configuration", SingularConfigurationWarning, stacklevel=3)
    return cond, weak
