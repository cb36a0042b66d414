"""The design space: which ``CKCMParams`` fields the optimiser may change, within which box, and the smooth
map between the box and the unconstrained coordinates the optimisers work in.

Design variables (SI units, radians), after Nguyen & Pooran's parameter studies (Figs. 8-11, Section 4.2):

- ``theta_A``, ``theta_B``  attachment angles of eq. 2 (Figs. 10-11)
- ``m``                     total leg mass (Fig. 8)
- ``m1``                    mass of the moving part; with ``m`` it places the leg centroid
                            l_c = l_s/2 + (m1/2m) l (eq. 40-42; the paper moves the centroid this way, Fig. 9)
- ``r_A``, ``r_B``          platform radii (eq. 3-4), optional
- ``l_s``                   stationary leg length (centroid and stroke, eq. 41), optional

A box [lower, upper] is enforced exactly by the parametrisation x = lower + (upper − lower) σ(u) (σ the
logistic function), so neither Adam nor L-BFGS ever proposes a design outside it; everything else the
designer insists on is a constraint (``constraints.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import jax
import jax.numpy as jnp

from ...validation import InputError
from ..params import CKCMParams

DEG = np.pi / 180

VARIABLES = ("theta_A", "theta_B", "m", "m1", "r_A", "r_B", "l_s")
DEFAULT_FREE = ("theta_A", "theta_B", "m", "m1")
DEFAULT_BOUNDS = {
    "theta_A": (2 * DEG, 118 * DEG),
    "theta_B": (2 * DEG, 118 * DEG),
    "m": (2.0, 40.0),
    "m1": (0.5, 15.0),
    "r_A": (0.3, 1.0),
    "r_B": (0.3, 1.2),
    "l_s": (0.3, 0.9),
}
UNITS = {"theta_A": "deg", "theta_B": "deg", "m": "kg", "m1": "kg", "r_A": "m", "r_B": "m", "l_s": "m"}


class DesignSpaceError(InputError):
    """A design space that cannot be optimised over: unknown variables, empty or inverted bounds."""


def display_value(name, value):
    """A design value in the units people read (degrees for angles)."""
    return float(np.degrees(value)) if UNITS[name] == "deg" else float(value)


@dataclass(frozen=True)
class DesignSpace:
    """Free variables and their boxes (hashable: a static argument of compiled functions).

    ``free``: names from ``VARIABLES``; ``lower``/``upper``: floats in SI units and radians."""
    free: tuple = DEFAULT_FREE
    lower: tuple = tuple(DEFAULT_BOUNDS[k][0] for k in DEFAULT_FREE)
    upper: tuple = tuple(DEFAULT_BOUNDS[k][1] for k in DEFAULT_FREE)

    @property
    def size(self):
        return len(self.free)

    def bounds(self):
        """(lower, upper) as float arrays of shape (size,)."""
        return np.asarray(self.lower, float), np.asarray(self.upper, float)

    # --- maps ------------------------------------------------------------------------------------------
    def to_params(self, x, base: CKCMParams) -> CKCMParams:
        """``base`` with the free fields replaced by the entries of ``x`` (jittable, differentiable)."""
        return base.replace(**{name: x[i] for i, name in enumerate(self.free)})

    def from_params(self, params: CKCMParams):
        """The free fields of ``params`` as a vector x (size,)."""
        return jnp.stack([jnp.asarray(getattr(params, name)) for name in self.free])

    def to_box(self, u):
        """x = lower + (upper − lower) σ(u)."""
        lo, hi = (jnp.asarray(b, jnp.result_type(u)) for b in self.bounds())
        return lo + (hi - lo) * jax.nn.sigmoid(u)

    def from_box(self, x):
        """u = logit((x − lower)/(upper − lower)); x must lie strictly inside the box."""
        lo, hi = (jnp.asarray(b, jnp.result_type(x)) for b in self.bounds())
        s = (x - lo) / (hi - lo)
        return jnp.log(s) - jnp.log1p(-s)

    # --- checks (eager) --------------------------------------------------------------------------------
    def check_inside(self, x, what="design"):
        """Raise ``DesignSpaceError`` naming every variable of ``x`` outside (or on) its bound."""
        x = np.asarray(x, float)
        lo, hi = self.bounds()
        bad = [f"{n} = {display_value(n, v):.6g} {UNITS[n]} not in ({display_value(n, a):.6g}, "
               f"{display_value(n, b):.6g})" for n, v, a, b in zip(self.free, x, lo, hi)
               if not (np.isfinite(v) and a < v < b)]
        if bad:
            raise DesignSpaceError(f"{what} lies outside the design box: " + "; ".join(bad)
                                   + " (the box is open: widen the bounds or move the start inside)")
        return x

    def describe(self, x):
        """{name: value in display units} of a design vector."""
        return {n: display_value(n, v) for n, v in zip(self.free, np.asarray(x, float))}


def make_space(free=DEFAULT_FREE, bounds=None) -> DesignSpace:
    """A checked ``DesignSpace``: ``free`` names from ``VARIABLES``, ``bounds`` {name: (lower, upper)} in SI
    units and radians overriding ``DEFAULT_BOUNDS``.  Raises ``DesignSpaceError`` on unknown names, bounds
    that are not finite, empty (lower ≥ upper) or physically meaningless (masses/lengths ≤ 0, angles outside
    (0°, 360°))."""
    free = tuple(free)
    bounds = dict(bounds or {})
    unknown = [n for n in list(free) + list(bounds) if n not in VARIABLES]
    if unknown:
        raise DesignSpaceError(f"unknown design variable(s) {unknown}; known: {list(VARIABLES)}")
    if not free:
        raise DesignSpaceError("no free design variables: name at least one of " + ", ".join(VARIABLES))
    if len(set(free)) != len(free):
        raise DesignSpaceError(f"design variables listed twice: {free}")
    extra = sorted(set(bounds) - set(free))
    if extra:
        raise DesignSpaceError(f"bounds given for variable(s) {extra} that are not free; free: {list(free)}")
    lower, upper = [], []
    for n in free:
        lo, hi = (float(v) for v in bounds.get(n, DEFAULT_BOUNDS[n]))
        unit = UNITS[n]
        shown = f"({display_value(n, lo):.6g}, {display_value(n, hi):.6g}) {unit}"
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise DesignSpaceError(f"bounds of {n} must be finite, got {shown}")
        if not lo < hi:
            raise DesignSpaceError(f"bounds of {n} are empty: lower {display_value(n, lo):.6g} >= upper "
                                   f"{display_value(n, hi):.6g} {unit}")
        if unit == "deg" and not (0 < lo and hi < 2 * np.pi):
            raise DesignSpaceError(f"bounds of {n} must lie inside (0, 360) deg, got {shown}")
        if unit != "deg" and lo <= 0:
            raise DesignSpaceError(f"bounds of {n} must be > 0 {unit}, got {shown}")
        lower.append(lo)
        upper.append(hi)
    return DesignSpace(free, tuple(lower), tuple(upper))
