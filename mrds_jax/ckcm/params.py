"""Parameters of the CKCM end-effector (Nguyen & Pooran 1989, seed 002) as a JAX pytree.

Every field is an array leaf, so ``jax.grad`` / ``jax.vmap`` work over the design (θA, θB, link masses, ...)
exactly as over the state.  Units are SI, angles in **radians** (the paper prints degrees).

Values of ``nominal()``:

- eq. 58 (printed in the paper): m = 20 kg, m1 = 4.4 kg, M = 30 kg, r_A = 0.7 m, r_B = 0.8 m, θA = 30°,
  θB = 94°.
- Not given by the paper; taken from ``shared/bench/README.md`` (the MJCF model of the same mechanism) so
  that every model in the project describes one machine: stationary leg length l_s = 0.5 m, payload a
  uniform thin disc of radius r_A (I_x = I_y = M r_A²/4 = 3.675 kg m², I_z = M r_A²/2 = 7.35 kg m²),
  g = 9.81 m/s² along −z_B, nominal (home) pose: payload centroid 1.0 m above the base centroid, level.
- Our own choice (neither the paper nor the bench fixes it): the length of the moving part of a leg,
  l_m = 0.9 m, which with l_s sets the actuator stroke (see ``stroke``).  The bench's 0.5 m "upper rod"
  only models the moving part's inertia in MJCF and cannot be the actuator's extent: l_s + 0.5 m = 1.0 m is
  shorter than the nominal lengths of legs 1, 3, 5 (1.005 m) and 2, 4, 6 (1.281 m).  With l_m = 0.9 m the
  stroke is [0.9, 1.4] m, centred (1.15 m) between the two nominal lengths.
"""
from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass, replace
from .errors import AttachmentError, CKCMInputError

NOMINAL_HEIGHT = 1.0  # m, bench/README.md: payload centroid above the base centroid at the home pose


@pytree_dataclass
class CKCMParams:
    """Design and inertial parameters of the CKCM end-effector (all array leaves, SI units, radians).

    r_A, r_B           radii of the payload and base platforms (eq. 3-4)
    theta_A, theta_B   angle between A_1, A_2 and between B_1, B_2 (eq. 2)
    m                  total mass of one leg (eq. 39-42)
    m1                 mass of the moving part of one leg (eq. 42)
    l_s                length of the stationary part of a leg (eq. 41)
    l_m                length of the moving part of a leg (not in the paper; sets the stroke)
    M                  payload mass (eq. 39, 43)
    I_payload          (I_1, I_2, I_3) payload moments of inertia (eq. 24, 39)
    g                  gravitational acceleration, along −z_B (eq. 43)
    z_nominal          height of the home pose (default guess of the forward kinematics, centre of paths)
    """

    r_A: jax.Array
    r_B: jax.Array
    theta_A: jax.Array
    theta_B: jax.Array
    m: jax.Array
    m1: jax.Array
    l_s: jax.Array
    l_m: jax.Array
    M: jax.Array
    I_payload: jax.Array
    g: jax.Array
    z_nominal: jax.Array

    # --- derived quantities (all differentiable) -------------------------------------------------------
    @property
    def d0(self):
        """d_0 = l_s / 2 (eq. 41)."""
        return self.l_s / 2

    @property
    def d1(self):
        """d_1 = m_1 / (2 m) (eq. 42)."""
        return self.m1 / (2 * self.m)

    @property
    def stroke(self):
        """Actuator stroke (l_min, l_max) of every leg.  Our definition (the paper gives none):

        a leg is a stationary housing of length l_s (hinged at B_i) in which a moving rod of length l_m
        slides; the rod's tip is the ball joint A_i.  Fully retracted, either the rod's tip reaches the end
        of the housing (l = l_s) or the rod's butt reaches the base joint (l = l_m), so
        l_min = max(l_s, l_m); fully extended the rod just leaves the housing, l_max = l_s + l_m.
        This is also the range in which eq. 40's centroid model (moving part spread over [l_s, l_i]) keeps
        the moving part beyond the housing's end (l_i ≥ l_s).
        """
        return jnp.maximum(self.l_s, self.l_m), self.l_s + self.l_m

    def replace(self, **changes):
        return replace(self, **{k: jnp.asarray(v, dtype=_float()) for k, v in changes.items()})


def _float():
    return jnp.result_type(float)


def make_params(*, r_A, r_B, theta_A, theta_B, m, m1, l_s, l_m, M, I_payload, g=9.81,
                z_nominal=NOMINAL_HEIGHT, validate=True, min_separation=1e-3) -> CKCMParams:
    """Build ``CKCMParams`` from numbers (angles in radians) and, unless ``validate=False``, check them with
    ``validate_params`` (which raises ``ValueError`` subclasses on bad input)."""
    f = _float()
    p = CKCMParams(
        r_A=jnp.asarray(r_A, f), r_B=jnp.asarray(r_B, f),
        theta_A=jnp.asarray(theta_A, f), theta_B=jnp.asarray(theta_B, f),
        m=jnp.asarray(m, f), m1=jnp.asarray(m1, f), l_s=jnp.asarray(l_s, f), l_m=jnp.asarray(l_m, f),
        M=jnp.asarray(M, f), I_payload=jnp.asarray(I_payload, f), g=jnp.asarray(g, f),
        z_nominal=jnp.asarray(z_nominal, f))
    if validate:
        validate_params(p, min_separation=min_separation)
    return p


def nominal(**overrides) -> CKCMParams:
    """The paper's parameter set, eq. 58, completed as described in the module docstring.

    Keyword overrides replace single fields (SI units, radians), e.g. ``nominal(theta_A=np.deg2rad(20))``;
    the result is validated (``validate=False`` to skip, ``min_separation=`` to change the tolerance)."""
    M, r_A = 30.0, 0.7
    values = dict(r_A=r_A, r_B=0.8, theta_A=np.deg2rad(30.0), theta_B=np.deg2rad(94.0),
                  m=20.0, m1=4.4, l_s=0.5, l_m=0.9, M=M,
                  I_payload=(M * r_A**2 / 4, M * r_A**2 / 4, M * r_A**2 / 2),
                  g=9.81, z_nominal=NOMINAL_HEIGHT)
    unknown = set(overrides) - set(values) - {"validate", "min_separation"}
    if unknown:
        raise TypeError(f"unknown CKCM parameter(s) {sorted(unknown)}; known: {sorted(values)}")
    values.update(overrides)
    return make_params(**values)


# --- attachment points, eq. 2-4 -------------------------------------------------------------------------
def attachment_angles(params: CKCMParams):
    """(λ_i, Λ_i), i = 1..6, in radians (eq. 2): λ_i = Λ_i = 60(i−1)° for odd i, and
    λ_i = λ_{i−1} + θA, Λ_i = Λ_{i−1} + θB for even i.  Shapes (6,) each."""
    f = jnp.result_type(params.theta_A)
    odd = jnp.deg2rad(jnp.array([0.0, 120.0, 240.0], dtype=f))
    lam = jnp.stack([odd, odd + params.theta_A], axis=-1).reshape(6)
    Lam = jnp.stack([odd, odd + params.theta_B], axis=-1).reshape(6)
    return lam, Lam


def payload_points(params: CKCMParams):
    """ᴬa_i = (r_A cos λ_i, r_A sin λ_i, 0), the ball joints in the payload frame {A} (eq. 3).  Shape (6, 3)."""
    lam, _ = attachment_angles(params)
    return jnp.stack([params.r_A * jnp.cos(lam), params.r_A * jnp.sin(lam), jnp.zeros_like(lam)], axis=-1)


def base_points(params: CKCMParams):
    """ᴮb_i = (r_B cos Λ_i, r_B sin Λ_i, 0), the leg joints in the base frame {B} (eq. 4).  Shape (6, 3)."""
    _, Lam = attachment_angles(params)
    return jnp.stack([params.r_B * jnp.cos(Lam), params.r_B * jnp.sin(Lam), jnp.zeros_like(Lam)], axis=-1)


# --- validation (eager, on concrete values) ------------------------------------------------------------
def _closest_pair(r, angles_deg):
    """Closest pair of the six points r·(cos, sin) (numpy, leading batch dims allowed)."""
    a = np.deg2rad(angles_deg)
    pts = np.stack([r[..., None] * np.cos(a), r[..., None] * np.sin(a)], axis=-1)  # (..., 6, 2)
    d = np.linalg.norm(pts[..., :, None, :] - pts[..., None, :, :], axis=-1)
    d = d + np.where(np.eye(6, dtype=bool), np.inf, 0.0)
    flat = d.reshape(d.shape[:-2] + (36,))
    k = np.argmin(flat, axis=-1)
    return np.min(flat, axis=-1), k // 6, k % 6


def validate_params(params: CKCMParams, min_separation=1e-3):
    """Raise a ``ValueError`` subclass when the parameters do not describe a buildable end-effector.

    Checks: positive radii, masses, lengths and inertias; 0 ≤ m1 ≤ m; and that no two attachment points of
    eq. 2-4 lie closer than ``min_separation`` metres (``AttachmentError``, naming the points, their
    distance and the θA/θB that caused it).  θA ≡ 0 or 120° (mod 360°) makes A_i coincide; likewise θB for
    B_i.  Leading batch dimensions are allowed (the worst scenario is reported).

    Runs on concrete values only (call it before ``jit``/``grad``); traced parameters are not checked.
    """
    leaves = jax.tree_util.tree_leaves(params)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return params
    v = {k: np.asarray(getattr(params, k), dtype=float) for k in (
        "r_A", "r_B", "theta_A", "theta_B", "m", "m1", "l_s", "l_m", "M", "I_payload", "g", "z_nominal")}
    for k in ("r_A", "r_B", "m", "l_s", "l_m", "M", "I_payload"):
        if not np.all(np.isfinite(v[k])) or np.any(v[k] <= 0):
            raise CKCMInputError(f"CKCM parameter {k} must be finite and > 0, got {v[k]}")
    if v["I_payload"].shape[-1:] != (3,):
        raise CKCMInputError(f"I_payload must hold (I_1, I_2, I_3), got shape {v['I_payload'].shape}")
    if np.any(v["m1"] < 0) or np.any(v["m1"] > v["m"]):
        raise CKCMInputError(f"moving-part mass m1 = {v['m1']} must lie in [0, m = {v['m']}] (eq. 42)")
    for k in ("theta_A", "theta_B", "g", "z_nominal"):
        if not np.all(np.isfinite(v[k])):
            raise CKCMInputError(f"CKCM parameter {k} must be finite, got {v[k]}")
    for name, r, theta, pt in (("A", v["r_A"], v["theta_A"], "payload"), ("B", v["r_B"], v["theta_B"], "base")):
        th = np.degrees(theta)
        r_b, th_b = np.broadcast_arrays(r, th)
        odd = np.array([0.0, 120.0, 240.0])
        ang = np.stack([odd + 0 * th_b[..., None], odd + th_b[..., None]], axis=-1).reshape(th_b.shape + (6,))
        dmin, i, j = _closest_pair(r_b, ang)
        worst = np.unravel_index(np.argmin(dmin), dmin.shape) if dmin.ndim else ()
        if dmin[worst] < min_separation:
            where = f" (scenario {tuple(int(w) for w in worst)})" if dmin.ndim else ""
            raise AttachmentError(
                f"theta_{name} = {float(th_b[worst]):.10g} deg makes {pt} attachment points "
                f"{name}_{int(i[worst]) + 1} and {name}_{int(j[worst]) + 1} coincide: they are "
                f"{float(dmin[worst]):.3g} m apart (< min_separation = {min_separation:g} m){where}. "
                f"theta_{name} must stay away from 0 and 120 deg (mod 360, eq. 2).")
    return params
