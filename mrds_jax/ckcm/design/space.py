"""The design space: which ``CKCMParams`` fields the optimiser may change, within which box, and the smooth
map between the box and the unconstrained coordinates the optimisers work in.

Design variables (SI units, radians), after Nguyen & Pooran's parameter studies (Figs. 8-11, Section 4.2):

- ``theta_A``, ``theta_B``  attachment angles of Nguyen & Pooran eq. 2 (Figs. 10-11)
- ``m``                     total leg mass (Fig. 8)
- ``m1``                    mass of the moving part; with ``m`` it places the leg centroid
                            l_c = l_s/2 + (m1/2m) l (Nguyen & Pooran eq. 40-42; the paper moves the centroid this way, Fig. 9)
- ``r_A``, ``r_B``          platform radii (Nguyen & Pooran eq. 3-4), optional
- ``l_s``                   stationary leg length (centroid and stroke, Nguyen & Pooran eq. 41), optional
- ``z_nominal``             the nominal platform height (the task moves with it: its paths are relative to
                            the home pose), optional
- ``M``                     the payload mass (its inertia scales with it: the same shape), optional

Per leg (the ``full`` space; Nguyen & Pooran eq. 2-4 and 40-42 with every leg its own): ``lambda_i``, ``Lambda_i`` the payload and base
attachment angles of leg i, ``r_A_i``, ``r_B_i`` their radii, ``m_i``, ``m1_i`` its total and moving mass
(with m_i they place its centroid, Nguyen & Pooran eq. 40-42), i = 1..6.  A space that names any of them is *per leg*: the
design is carried as ``CKCMParams.leg_geometry`` / ``leg_masses``, and a symmetric name moves every leg the
way Nguyen & Pooran eq. 2 does (θA sets λ_2, λ_4, λ_6 relative to λ_1, λ_3, λ_5; r_A every r_A_i; m every m_i ...).

Named spaces (``SPACES``, ``named_space``): ``paper`` (θA, θB, m, m1: today's four variables), ``symmetric``
(the same four through the per-leg representation: the paper's 3-fold pattern as a subspace of ``full``),
``full`` (the 24 attachment angles and radii, z_nominal, the 12 leg masses, M: 38 variables).

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
from ..params import CKCMParams, per_leg_geometry, per_leg_masses

DEG = np.pi / 180

SYMMETRIC_VARIABLES = ("theta_A", "theta_B", "m", "m1", "r_A", "r_B", "l_s", "z_nominal", "M")
LEGS = range(1, 7)
# per-leg name -> (array, row) of CKCMParams.leg_geometry ("G": λ, Λ, r_A, r_B) or leg_masses ("Ms": m, m1)
PER_LEG_ROWS = {"lambda": ("G", 0), "Lambda": ("G", 1), "r_A": ("G", 2), "r_B": ("G", 3), "m": ("Ms", 0),
                "m1": ("Ms", 1)}
GEOMETRY_VARIABLES = tuple(f"{k}_{i}" for k in ("lambda", "Lambda", "r_A", "r_B") for i in LEGS)
MASS_VARIABLES = tuple(f"{k}_{i}" for k in ("m", "m1") for i in LEGS)
PER_LEG_VARIABLES = GEOMETRY_VARIABLES + MASS_VARIABLES
VARIABLES = SYMMETRIC_VARIABLES + PER_LEG_VARIABLES
DEFAULT_FREE = ("theta_A", "theta_B", "m", "m1")
FULL_FREE = GEOMETRY_VARIABLES + ("z_nominal",) + MASS_VARIABLES + ("M",)
# symmetric name -> the per-leg row it sets (all legs; θA/θB the even legs relative to the odd ones)
SYMMETRIC_ROWS = {"theta_A": "lambda", "theta_B": "Lambda", "r_A": "r_A", "r_B": "r_B", "m": "m", "m1": "m1"}


def _per_leg_bounds():
    """Default boxes of the per-leg variables: odd legs' angles within ±20° of Nguyen & Pooran eq. 2's 0, 120, 240°, even legs'
    5° to 115° beyond them; radii, masses as their symmetric counterparts."""
    b = {}
    for i in LEGS:
        c = 120 * DEG * ((i - 1) // 2)
        ang = (c - 20 * DEG, c + 20 * DEG) if i % 2 else (c + 5 * DEG, c + 115 * DEG)
        b.update({f"lambda_{i}": ang, f"Lambda_{i}": ang, f"r_A_{i}": (0.3, 1.0), f"r_B_{i}": (0.3, 1.2),
                  f"m_{i}": (2.0, 40.0), f"m1_{i}": (0.5, 15.0)})
    return b


DEFAULT_BOUNDS = {
    "theta_A": (2 * DEG, 118 * DEG),
    "theta_B": (2 * DEG, 118 * DEG),
    "m": (2.0, 40.0),
    "m1": (0.5, 15.0),
    "r_A": (0.3, 1.0),
    "r_B": (0.3, 1.2),
    "l_s": (0.3, 0.9),
    "z_nominal": (0.8, 1.3),
    "M": (20.0, 40.0),
    **_per_leg_bounds(),
}
UNITS = {"theta_A": "deg", "theta_B": "deg", "m": "kg", "m1": "kg", "r_A": "m", "r_B": "m", "l_s": "m",
         "z_nominal": "m", "M": "kg",
         **{n: {"lambda": "deg", "Lambda": "deg", "r_A": "m", "r_B": "m", "m": "kg", "m1": "kg"}[n.rsplit("_", 1)[0]]
            for n in PER_LEG_VARIABLES}}
SPACES = {"paper": (DEFAULT_FREE, False), "symmetric": (DEFAULT_FREE, True), "full": (FULL_FREE, True)}


class DesignSpaceError(InputError):
    """A design space that cannot be optimised over: unknown variables, empty or inverted bounds."""


def display_value(name, value):
    """A design value in the units people read (degrees for angles)."""
    return float(np.degrees(value)) if UNITS[name] == "deg" else float(value)


@dataclass(frozen=True)
class DesignSpace:
    """Free variables and their boxes (hashable: a static argument of compiled functions).

    ``free``: names from ``VARIABLES``; ``lower``/``upper``: floats in SI units and radians; ``per_leg``: the
    design is carried per leg (``CKCMParams.leg_geometry`` / ``leg_masses``; module docstring)."""
    free: tuple = DEFAULT_FREE
    lower: tuple = tuple(DEFAULT_BOUNDS[k][0] for k in DEFAULT_FREE)
    upper: tuple = tuple(DEFAULT_BOUNDS[k][1] for k in DEFAULT_FREE)
    per_leg: bool = False

    @property
    def size(self):
        return len(self.free)

    def bounds(self):
        """(lower, upper) as float arrays of shape (size,)."""
        return np.asarray(self.lower, float), np.asarray(self.upper, float)

    # --- maps ------------------------------------------------------------------------------------------
    def to_params(self, x, base: CKCMParams) -> CKCMParams:
        """``base`` with the free fields replaced by the entries of ``x`` (jittable, differentiable); per leg,
        the per-leg arrays of ``base`` with the named entries (or, for a symmetric name, rows) replaced."""
        scalars = {name: x[i] for i, name in enumerate(self.free) if name in SYMMETRIC_VARIABLES}
        if not self.per_leg:
            return base.replace(**scalars)
        arrays = {"G": per_leg_geometry(base), "Ms": per_leg_masses(base)}
        for i, name in enumerate(self.free):
            if name in SYMMETRIC_ROWS:
                key, row = PER_LEG_ROWS[SYMMETRIC_ROWS[name]]
                a = arrays[key]
                if name in ("theta_A", "theta_B"):          # Nguyen & Pooran eq. 2: the even legs θ beyond the odd ones
                    arrays[key] = a.at[row, 1::2].set(a[row, 0::2] + x[i])
                else:
                    arrays[key] = a.at[row].set(x[i])
            elif name in PER_LEG_VARIABLES:
                (key, row), leg = _per_leg_target(name)
                arrays[key] = arrays[key].at[row, leg].set(x[i])
        return base.replace(**scalars, leg_geometry=arrays["G"], leg_masses=arrays["Ms"])

    def from_params(self, params: CKCMParams):
        """The free fields of ``params`` as a vector x (size,)."""
        return jnp.stack([jnp.asarray(variable_value(params, name, self.per_leg)) for name in self.free])

    def to_box(self, u):
        """x = lower + (upper − lower) σ(u) (``box_of_unconstrained``)."""
        return box_of_unconstrained(u, *self.bounds())

    def from_box(self, x):
        """u = logit((x − lower)/(upper − lower)); x must lie strictly inside the box."""
        return unconstrained_of_box(x, *self.bounds())

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


def box_of_unconstrained(u, lower, upper):
    """x = lower + (upper − lower) σ(u), σ the logistic function: every real u maps strictly inside the box
    [lower, upper] (module docstring), smoothly."""
    lo, hi = (jnp.asarray(b, jnp.result_type(u)) for b in (lower, upper))
    return lo + (hi - lo) * jax.nn.sigmoid(u)


def unconstrained_of_box(x, lower, upper):
    """u = logit((x − lower)/(upper − lower)), the inverse of ``box_of_unconstrained``; x strictly inside."""
    lo, hi = (jnp.asarray(b, jnp.result_type(x)) for b in (lower, upper))
    s = (x - lo) / (hi - lo)
    return jnp.log(s) - jnp.log1p(-s)


def _per_leg_target(name):
    """((array key, row), leg index 0..5) of a per-leg variable name such as ``lambda_3``."""
    kind, leg = name.rsplit("_", 1)
    return PER_LEG_ROWS[kind], int(leg) - 1


def variable_value(params: CKCMParams, name, per_leg=False):
    """The value of design variable ``name`` in ``params`` (per leg: read from the per-leg arrays)."""
    if per_leg and name in PER_LEG_VARIABLES:
        (key, row), leg = _per_leg_target(name)
        return (per_leg_geometry(params) if key == "G" else per_leg_masses(params))[row, leg]
    if per_leg and name in ("theta_A", "theta_B"):
        ang = per_leg_geometry(params)[0 if name == "theta_A" else 1]
        return ang[1] - ang[0]
    if per_leg and name in SYMMETRIC_ROWS:
        (key, row), _ = _per_leg_target(SYMMETRIC_ROWS[name] + "_1")
        return (per_leg_geometry(params) if key == "G" else per_leg_masses(params))[row, 0]
    return getattr(params, name)


def _check_overlaps(free):
    """Raise ``DesignSpaceError`` when a symmetric name and a per-leg name move the same quantity."""
    clashes = [f"{s} and {p}" for s, row in SYMMETRIC_ROWS.items() if s in free
               for p in free if p in PER_LEG_VARIABLES and p.rsplit("_", 1)[0] == row]
    if clashes:
        raise DesignSpaceError(f"design variables {'; '.join(clashes)} both set the same per-leg quantity "
                               "(the symmetric name sets it on every leg): free one or the other")


def named_space(name, bounds=None) -> DesignSpace:
    """The design space called ``name`` in ``SPACES`` ("paper", "symmetric", "full"), ``bounds`` overriding
    the defaults (``make_space``)."""
    if name not in SPACES:
        raise DesignSpaceError(f"unknown design space {name!r}; known: {list(SPACES)}")
    free, per_leg = SPACES[name]
    return make_space(free, bounds, per_leg=per_leg)


def make_space(free=DEFAULT_FREE, bounds=None, per_leg=None) -> DesignSpace:
    """A checked ``DesignSpace``: ``free`` names from ``VARIABLES``, ``bounds`` {name: (lower, upper)} in SI
    units and radians overriding ``DEFAULT_BOUNDS``.  Raises ``DesignSpaceError`` on unknown names, bounds
    that are not finite, empty (lower ≥ upper) or physically meaningless (masses/lengths ≤ 0, Nguyen & Pooran eq. 2's θA, θB
    outside (0°, 360°), per-leg angles outside (−360°, 360°)), or a symmetric and a per-leg name that move the
    same quantity.  ``per_leg``: default True when any per-leg name is free."""
    free = tuple(free)
    bounds = dict(bounds or {})
    unknown = [n for n in list(free) + list(bounds) if n not in VARIABLES]
    if unknown:
        raise DesignSpaceError(f"unknown design variable(s) {unknown}; known: {list(VARIABLES)}")
    if not free:
        raise DesignSpaceError("no free design variables: name at least one of " + ", ".join(VARIABLES))
    if len(set(free)) != len(free):
        raise DesignSpaceError(f"design variables listed twice: {free}")
    _check_overlaps(free)
    per_leg = any(n in PER_LEG_VARIABLES for n in free) if per_leg is None else bool(per_leg)
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
        if n in ("theta_A", "theta_B") and not (0 < lo and hi < 2 * np.pi):
            raise DesignSpaceError(f"bounds of {n} must lie inside (0, 360) deg, got {shown}")
        if unit == "deg" and not (-2 * np.pi < lo and hi < 2 * np.pi):
            raise DesignSpaceError(f"bounds of {n} must lie inside (-360, 360) deg, got {shown}")
        if unit != "deg" and lo <= 0:
            raise DesignSpaceError(f"bounds of {n} must be > 0 {unit}, got {shown}")
        lower.append(lo)
        upper.append(hi)
    return DesignSpace(free, tuple(lower), tuple(upper), per_leg)
