"""The constraint solve's health along a run: :func:`report_solve` lists the windows of steps where Bᶜ's condition
number jumped or the solve residual grew (singular or redundant configurations), naming the weakest contacts.
Split out of :mod:`.simulate` (one concern per file).
"""
import warnings

import jax.numpy as jnp
import numpy as np

from ..validation import SingularConfigurationWarning
from .build import SystemDescriptionError, SystemState
from .couplings import constraint_rows
from .initial_state import _report_core
from .stabilisation import Stabilisation


class SingularConfigurationError(SystemDescriptionError):
    """``simulate(..., checks=Checks(strict=True))``: the constraint solve crossed a threshold during the run."""


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
           "minimum-norm forces there and the default stabilisation (Integration(stabilisation='auto'), Baumgarte) "
           "pulls the state back onto the constraints; if the motion near these times matters, use a smaller dt (or "
           "stored states closer together, Output(decimation=...), to locate them) and keep the stabilisation on; "
           "Integration(stabilisation=None) is what lets such runs drift into NaN.")
    if strict:
        raise SingularConfigurationError(msg)
    warnings.warn(msg, SingularConfigurationWarning, stacklevel=4)  # simulate's caller, past its wrapper
    return events
