"""Leg mass models of the CKCM multibody model (``mechanism``): ``LegInertia``, a pytree, so its numbers can be
differentiated or randomised too.

- ``bench_legs`` (default, physical): the benchmarks' MJCF model.  The stationary part, mass m − m1, is a
  solid cylinder of length l_s and radius 0.03 m hinged at B_i, centroid l_s/2 from B_i; the moving part,
  mass m1, a solid cylinder of length 0.5 m and radius 0.02 m ending at the tip, centroid 0.25 m below it.
  Inertia of a solid cylinder about its centroid: I_t = m(3r² + L²)/12 across, I_a = m r²/2 along the axis.
- ``paper_legs``: the mass distribution behind the paper's potential energy (Nguyen & Pooran eq. 40-43).
  Nguyen & Pooran eq. 40 puts the leg centroid at l_c = l_s/2 + (m1/2m) l_i, i.e. the first moment m l_c = m l_s/2 +
  (m1/2) l_i; two point masses reproduce it for every leg length: m − m1/2 on the stationary part at s = m l_s/(2m − m1)
  from B_i, and m1/2 at the tip.  With it the potential energies of the two models are equal, so their gravity
  terms agree to round-off (``tests/test_ckcm_multibody.py``).  No rigid pair of links reproduces
  Nguyen & Pooran eq. 40's kinetic energy as well: that is what the paper's model leaves out (``lagrangian`` docstring,
  and ``experiments/out/ckcm_reproduction.md`` for the numbers):

  * the leg is a point mass m at l_c: K_leg = ½ m (l_c² θ̇² + l̇_c²) (Nguyen & Pooran eq. 39).  The moving part really
    translates with the full l̇ (½ m1 l̇²: Nguyen & Pooran eq. 39 has ½ m d1² l̇² = ½ (m1²/4m) l̇², 18× less with
    Nguyen & Pooran eq. 58), and the spread of the two parts along the leg adds Σ m_j s_j² − m l_c² to the moment of
    inertia;
  * the leg's rotational inertia about its own centroid (zero for point masses, I_t for cylinders);
  * the azimuthal swing of the leg about the vertical through B_i (Nguyen & Pooran eq. 39 has only the elevation rate
    θ̇_i);
  * the payload's rotational energy is ½ Σ I_k ω_k² with the *base-frame* ω (exact only while the payload
    stays level or is spherical).
  On the paper's ellipse (a level translation) the last one vanishes; the first three change the inertial
  forces by tens of percent at 17 cm/s (``experiments/ckcm_reproduction.py``) and not the gravity terms.
"""
from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass
from .errors import CKCMInputError
from .params import CKCMParams, leg_mass_split


@pytree_dataclass
class LegInertia:
    """Mass model of a leg: two rigid links on the leg axis; all six legs identical, or any leaf per leg with
    a leading axis of 6 (``CKCMParams.leg_masses``; ``one_leg`` picks leg i's).

    m_lower, s_lower   mass of the stationary part and its centroid's distance from B_i along the leg
    I_lower            (I_transverse, I_transverse, I_axial) about that centroid, leg axes
    m_upper, c_upper   mass of the moving part and its centroid's distance *below the tip* A_i
    I_upper            (I_transverse, I_transverse, I_axial) about that centroid
    """
    m_lower: jax.Array
    s_lower: jax.Array
    I_lower: jax.Array
    m_upper: jax.Array
    c_upper: jax.Array
    I_upper: jax.Array


def _cylinder(m, r, L):
    """Principal inertia (I_t, I_t, I_a) of a solid cylinder of mass m, radius r, length L about its
    centroid: I_t = m (3 r² + L²) / 12, I_a = m r² / 2."""
    It = m * (3 * r**2 + L**2) / 12
    return jnp.stack(jnp.broadcast_arrays(It, It, m * r**2 / 2), axis=-1)


def bench_legs(params: CKCMParams, r_lower=0.03, r_upper=0.02, upper_length=0.5) -> LegInertia:
    """The physical legs of the benchmarks' MJCF model (module docstring): a cylinder of mass m − m1, length
    l_s, radius ``r_lower`` hinged at B_i; a cylinder of mass m1, length ``upper_length``, radius ``r_upper``
    ending at the tip.  Differentiable in ``params`` (m, m1, l_s) and the three numbers."""
    f = jnp.result_type(params.m)
    m, m1 = leg_mass_split(params)
    ml, mu = m - m1, m1
    L = jnp.asarray(upper_length, f)
    return LegInertia(m_lower=ml, s_lower=params.l_s / 2, I_lower=_cylinder(ml, jnp.asarray(r_lower, f), params.l_s),
                      m_upper=mu, c_upper=L / 2, I_upper=_cylinder(mu, jnp.asarray(r_upper, f), L))


def paper_legs(params: CKCMParams) -> LegInertia:
    """Point masses with the first moment of Nguyen & Pooran eq. 40-42 (module docstring): m − m1/2 at m l_s/(2m − m1)
    from B_i and m1/2 at the tip, no rotational inertia.  The potential energy then equals Nguyen & Pooran eq. 43
    exactly."""
    m, m1 = leg_mass_split(params)
    z3 = jnp.zeros(jnp.shape(m) + (3,), jnp.result_type(params.m))
    return LegInertia(m_lower=m - m1 / 2, s_lower=m * params.l_s / (2 * m - m1),
                      I_lower=z3, m_upper=m1 / 2, c_upper=jnp.zeros_like(m), I_upper=z3)


LEG_MODELS = {"bench": bench_legs, "paper": paper_legs}


def leg_model(params: CKCMParams, legs="bench") -> LegInertia:
    """``legs`` as a ``LegInertia``: one already, or the name of a model in ``LEG_MODELS``."""
    if isinstance(legs, LegInertia):
        return legs
    if legs not in LEG_MODELS:
        raise CKCMInputError(f"unknown leg model {legs!r}; use a LegInertia or one of {sorted(LEG_MODELS)}")
    return LEG_MODELS[legs](params)


def check_legs(legs: LegInertia):
    """Raise ``CKCMInputError`` for a leg mass model that cannot be built (eager, concrete values only)."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(legs)):
        return legs
    v = {k: np.asarray(getattr(legs, k), float) for k in ("m_lower", "s_lower", "I_lower", "m_upper", "c_upper",
                                                            "I_upper")}
    for k in ("m_lower", "m_upper"):
        if not np.all(np.isfinite(v[k])) or np.any(v[k] <= 0):
            raise CKCMInputError(f"leg mass {k} must be finite and > 0, got {v[k]}")
    for k in ("I_lower", "I_upper"):
        if v[k].shape[-1:] != (3,) or not np.all(np.isfinite(v[k])) or np.any(v[k] < 0):
            raise CKCMInputError(f"leg inertia {k} must be three finite principal moments >= 0, got {v[k]}")
    for k in ("s_lower", "c_upper"):
        if not np.all(np.isfinite(v[k])):
            raise CKCMInputError(f"leg centroid distance {k} must be finite, got {v[k]}")
    if np.any(v["s_lower"] <= 0):
        raise CKCMInputError(f"s_lower = {v['s_lower']} must be > 0: a point mass at the universal joint B_i "
                             "leaves the leg's swing without inertia")
    return legs


def one_leg(legs: LegInertia, i: int) -> LegInertia:
    """Leg ``i``'s mass model: ``legs`` itself when all six legs share it, else its i-th entry (per-leg
    masses, ``CKCMParams.leg_masses``: every leaf has a leading axis of 6)."""
    def pick(a, ndim):
        return a[i] if jnp.ndim(a) > ndim else a
    return LegInertia(pick(legs.m_lower, 0), pick(legs.s_lower, 0), pick(legs.I_lower, 1), pick(legs.m_upper, 0),
                      pick(legs.c_upper, 0), pick(legs.I_upper, 1))


__all__ = ["LegInertia", "bench_legs", "paper_legs", "LEG_MODELS", "leg_model", "check_legs", "one_leg"]
