"""What a designer insists on, as smooth inequality constraints g(design) ≤ 0, each scaled to be O(1):

- ``separation``  no two attachment points of one platform closer than ``min_separation`` (m): the joints
                  have a size.  Points i, j on a circle of radius r at angles λ_i, λ_j (Nguyen & Pooran eq. 2-4) are the chord
                  2 r |sin((λ_i − λ_j)/2)| apart; all 15 pairs of both platforms:
                  g = 1 − d_ij / min_separation.
- ``condition``   the Jacobian C = ∂l/∂Φ (Nguyen & Pooran eq. 26-27) well conditioned at every task sample:
                  g = log cond(C) / log max_condition − 1 (far from the singularities where the forces blow up).
- ``stroke``      every leg length within the stroke (``CKCMParams.stroke``) less ``stroke_margin`` at every
                  sample: g = (l_min + margin − l) / 0.1 m and (l − l_max + margin) / 0.1 m.
- ``elevation``   every leg at least ``min_elevation`` above the base plane (the kinematics of Nguyen & Pooran eq. 28-31 need
                  legs pointing up): g = (sin θ_min − q_iz / l_i) / sin θ_min.
- ``strength``    the legs strong enough for the peak force F they carry (``StrengthRule``):
                  g = 1 − m1 / m1_required and 1 − (m − m1) / m_stationary_required (per leg with per-leg
                  masses, every leg sized for the peak force of all six).
- ``crossing``    no two legs closer than ``min_leg_distance`` (m) at any task sample (what a
                  non-symmetric geometry needs; the legs are the segments B_i A_i, Nguyen & Pooran eq. 9-10):
                  g = 1 − d_ij / min_leg_distance for all 15 pairs at every sample (``segment_distance``).
                  Only for per-leg designs (``CKCMParams.leg_geometry``): Nguyen & Pooran eq. 2's pattern keeps its legs ~0.3 m
                  apart, and leaving the group out keeps today's four-variable problem's compiled program as it
                  was; the independent check (``verify``) measures the leg distances of every design.

``verify.py`` re-checks a design against the same limits with independent, non-smoothed code.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import jax
import jax.numpy as jnp

from ...pytree import pytree_dataclass
from ..kinematics import condition_number, inverse_kinematics, jacobian, leg_vectors
from ..params import CKCMParams, attachment_angles, attachment_radii, base_points, leg_mass_split
from .task import TaskSamples

GROUPS = ("separation", "condition", "stroke", "elevation", "strength", "crossing")
LEG_PAIRS = np.triu_indices(6, 1)
STROKE_SCALE = 0.1  # m


@pytree_dataclass
class StrengthRule:
    """Lower bounds on the leg masses from the peak force F (N) the leg transmits.

    Each part is a fixed mass (joints, bearings, motor: ``moving_fixed``, ``stationary_fixed``, kg) plus a
    load-bearing member of length L (l_m for the moving rod, l_s for the housing) whose cross-section carries
    F at the allowable stress with a safety factor: A = SF F / σ, mass ρ L A.  So
        m1 ≥ moving_fixed + ρ l_m SF F / σ,     m − m1 ≥ stationary_fixed + ρ l_s SF F / σ.
    Defaults: steel (ρ = 7850 kg/m³, σ = 100 MPa, SF = 2), 1 kg moving and 4 kg stationary hardware.
    With these the fixed masses dominate for forces below ~10 kN: the rule mostly keeps the optimiser from
    making legs of nothing.
    """
    density: float = 7850.0
    allowable_stress: float = 100e6
    safety_factor: float = 2.0
    moving_fixed: float = 1.0
    stationary_fixed: float = 4.0

    def required_masses(self, params: CKCMParams, peak_force):
        """(m1 required, m − m1 required) in kg for a peak force ``peak_force`` (N)."""
        k = self.density * self.safety_factor * peak_force / self.allowable_stress
        return self.moving_fixed + k * params.l_m, self.stationary_fixed + k * params.l_s


@pytree_dataclass
class Limits:
    """The designer's limits (module docstring); defaults suit the paper's 1-m machine.

    A pytree of numbers: limits travel with the problem's data, not its compiled code, so changing them (or
    vmapping over them for a trade-off curve) needs no recompilation.  ``check_limits`` validates them."""
    min_separation: float = 0.10
    max_condition: float = 30.0
    stroke_margin: float = 0.01
    min_elevation_deg: float = 10.0
    strength: StrengthRule = dataclasses.field(default_factory=StrengthRule)
    min_leg_distance: float = 0.08


def check_limits(limits: Limits) -> Limits:
    """Raise ``ValueError`` naming the first meaningless limit (eager)."""
    for name in ("min_separation", "stroke_margin", "min_leg_distance"):
        v = float(getattr(limits, name))
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"Limits.{name} must be finite and >= 0, got {v}")
    if not float(limits.max_condition) > 1:
        raise ValueError(f"Limits.max_condition must be > 1, got {limits.max_condition}")
    if not 0 < float(limits.min_elevation_deg) < 90:
        raise ValueError(f"Limits.min_elevation_deg must lie in (0, 90), got {limits.min_elevation_deg}")
    s = limits.strength
    for name in ("density", "allowable_stress", "safety_factor"):
        if not float(getattr(s, name)) > 0:
            raise ValueError(f"StrengthRule.{name} must be > 0, got {getattr(s, name)}")
    for name in ("moving_fixed", "stationary_fixed"):
        if not float(getattr(s, name)) > 0:
            raise ValueError(f"StrengthRule.{name} must be > 0 kg (a leg part needs some mass), got "
                             f"{getattr(s, name)}")
    return limits


def limits_as_arrays(limits: Limits, dtype) -> Limits:
    """``limits`` with every number an array of ``dtype`` (the form ``ProblemData`` carries)."""
    return jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype), limits)


def pair_distances(params: CKCMParams):
    """Distances (15,) between all pairs of payload points and (15,) of base points (Nguyen & Pooran eq. 2-4): for points at
    radii r_i, r_j and angles λ_i, λ_j, (r_i² + r_j² − 2 r_i r_j cos(λ_i − λ_j))^½ (the chord
    2 r |sin((λ_i − λ_j)/2)| on one circle)."""
    lam, Lam = attachment_angles(params)
    rA, rB = attachment_radii(params)
    i, j = LEG_PAIRS

    def distances(r, a):
        return jnp.sqrt(r[i]**2 + r[j]**2 - 2 * r[i] * r[j] * jnp.cos(a[i] - a[j]))
    return distances(rA, lam), distances(rB, Lam)


def segment_distance(p1, q1, p2, q2):
    """Distance between the segments p1 q1 and p2 q2 (3-vectors; Ericson, Real-Time Collision Detection,
    2005, §5.1.9: the closest points' parameters s, t in [0, 1] in closed form, clamped).

    The parameters are held fixed under differentiation (``stop_gradient``): the distance is the minimum of
    |p1 + s d1 − p2 − t d2| over the square, so by Danskin's theorem its derivative is the partial derivative
    at the minimiser (exact wherever the closest pair is unique, i.e. the legs are not parallel)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b, c, f = d1 @ d1, d2 @ d2, d1 @ d2, d1 @ r, d2 @ r
    denom = a * e - b * b
    parallel = denom <= 1e-12 * a * e
    s = jnp.where(parallel, 0.0, jnp.clip((b * f - c * e) / jnp.where(parallel, 1.0, denom), 0.0, 1.0))
    t = (b * s + f) / e
    s = jnp.where(t < 0, jnp.clip(-c / a, 0.0, 1.0), jnp.where(t > 1, jnp.clip((b - c) / a, 0.0, 1.0), s))
    s, t = jax.lax.stop_gradient(s), jax.lax.stop_gradient(jnp.clip(t, 0.0, 1.0))
    return jnp.linalg.norm(p1 + s * d1 - p2 - t * d2)


def leg_distances(params: CKCMParams, pose):
    """Distances (15,) between all pairs of legs, each the segment B_i A_i at ``pose`` (Nguyen & Pooran eq. 9-10)."""
    b = base_points(params)
    a = b + leg_vectors(params, pose)
    i, j = LEG_PAIRS
    return jax.vmap(segment_distance)(b[i], a[i], b[j], a[j])


def _per_sample(params, pose, crossing):
    l = inverse_kinematics(params, pose)
    q = leg_vectors(params, pose)
    return l, q[:, 2] / l, condition_number(jacobian(params, pose)), leg_distances(params, pose) if crossing else None


def constraint_values(params: CKCMParams, samples: TaskSamples, peak_force, limits: Limits):
    """{group: g} with g ≤ 0 where the design meets the limit (``GROUPS``; module docstring)."""
    dA, dB = pair_distances(params)
    sep = 1 - jnp.concatenate([dA, dB]) / limits.min_separation
    per_leg = params.leg_geometry is not None
    l, elevation, cond, legs = jax.vmap(lambda q: _per_sample(params, q, per_leg))(samples.pose)
    l_min, l_max = params.stroke
    m = limits.stroke_margin
    stroke = jnp.concatenate([(l_min + m - l).ravel(), (l - l_max + m).ravel()]) / STROKE_SCALE
    s_min = jnp.sin(jnp.radians(limits.min_elevation_deg))
    elev = ((s_min - elevation) / s_min).ravel()
    condition = jnp.log(cond) / jnp.log(limits.max_condition) - 1
    m1_req, ms_req = limits.strength.required_masses(params, peak_force)
    m, m1 = leg_mass_split(params)
    strength = jnp.concatenate([jnp.atleast_1d(1 - m1 / m1_req), jnp.atleast_1d(1 - (m - m1) / ms_req)])
    g = {"separation": sep, "condition": condition, "stroke": stroke, "elevation": elev, "strength": strength}
    if per_leg:
        g["crossing"] = (1 - legs / limits.min_leg_distance).ravel()
    return g


def max_violations(g: dict):
    """{group: max g} (≤ 0: satisfied)."""
    return {k: jnp.max(v) for k, v in g.items()}
