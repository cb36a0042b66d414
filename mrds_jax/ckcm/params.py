"""Parameters of the CKCM end-effector (Nguyen & Pooran 1989) as a JAX pytree.

Every field is an array leaf, so ``jax.grad`` / ``jax.vmap`` work over the design (θA, θB, link masses, ...)
exactly as over the state.  Units are SI, angles in **radians** (the paper prints degrees).

Values of ``nominal()``:

- Nguyen & Pooran eq. 58 (printed in the paper): m = 20 kg, m1 = 4.4 kg, M = 30 kg, r_A = 0.7 m, r_B = 0.8 m, θA = 30°,
  θB = 94°.
- Not given by the paper; taken from the MJCF model of the same mechanism that the speed benchmarks use so
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

NOMINAL_HEIGHT = 1.0  # m, the benchmarks' MJCF model: payload centroid above the base centroid at the home pose


@pytree_dataclass
class CKCMParams:
    """Design and inertial parameters of the CKCM end-effector (all array leaves, SI units, radians).

    r_A, r_B           radii of the payload and base platforms (Nguyen & Pooran eq. 3-4)
    theta_A, theta_B   angle between A_1, A_2 and between B_1, B_2 (Nguyen & Pooran eq. 2)
    m                  total mass of one leg (Nguyen & Pooran eq. 39-42)
    m1                 mass of the moving part of one leg (Nguyen & Pooran eq. 42)
    l_s                length of the stationary part of a leg (Nguyen & Pooran eq. 41)
    l_m                length of the moving part of a leg (not in the paper; sets the stroke)
    M                  payload mass (Nguyen & Pooran eq. 39, 43)
    I_payload          (I_1, I_2, I_3) payload moments of inertia (Nguyen & Pooran eq. 24, 39)
    g                  gravitational acceleration, along −z_B (Nguyen & Pooran eq. 43)
    z_nominal          height of the home pose (default guess of the forward kinematics, centre of paths)
    leg_geometry       None (the paper's 3-fold pattern of Nguyen & Pooran eq. 2-4 from r_A, r_B, θA, θB) or a (4, 6)
                       array of per-leg attachment angles and radii (λ_i, Λ_i, r_A,i, r_B,i): Nguyen & Pooran eq. 3-4
                       with every point free (the ``full`` design space); θA, θB, r_A, r_B then no longer place the joints
    leg_masses         None (every leg m, m1) or a (2, 6) array of per-leg (m_i, m1_i)
                       (Nguyen & Pooran eq. 40-42 per leg)
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
    leg_geometry: jax.Array | None = None
    leg_masses: jax.Array | None = None

    # --- derived quantities (all differentiable) -------------------------------------------------------
    @property
    def d0(self):
        """d_0 = l_s / 2 (Nguyen & Pooran eq. 41)."""
        return self.l_s / 2

    @property
    def d1(self):
        """d_1 = m_1 / (2 m) (Nguyen & Pooran eq. 42); per leg (6,) when ``leg_masses`` is set."""
        m, m1 = leg_mass_split(self)
        return m1 / (2 * m)

    @property
    def stroke(self):
        """Actuator stroke (l_min, l_max) of every leg.  Our definition (the paper gives none):

        a leg is a stationary housing of length l_s (hinged at B_i) in which a moving rod of length l_m
        slides; the rod's tip is the ball joint A_i.  Fully retracted, either the rod's tip reaches the end
        of the housing (l = l_s) or the rod's butt reaches the base joint (l = l_m), so
        l_min = max(l_s, l_m); fully extended the rod just leaves the housing, l_max = l_s + l_m.
        This is also the range in which Nguyen & Pooran eq. 40's centroid model (moving part spread over [l_s, l_i])
        keeps the moving part beyond the housing's end (l_i ≥ l_s).
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
    """The paper's parameter set, Nguyen & Pooran eq. 58, completed as described in the module docstring.

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


# --- attachment points, Nguyen & Pooran eq. 2-4 -----------------------------------------------------------------------
def symmetric_angles(theta_A, theta_B):
    """(λ_i, Λ_i), i = 1..6, of the paper's 3-fold pattern (Nguyen & Pooran eq. 2): λ_i = Λ_i = 60(i−1)° for odd i, and
    λ_i = λ_{i−1} + θA, Λ_i = Λ_{i−1} + θB for even i.  Shapes (6,) each."""
    f = jnp.result_type(theta_A)
    odd = jnp.deg2rad(jnp.array([0.0, 120.0, 240.0], dtype=f))
    lam = jnp.stack([odd, odd + theta_A], axis=-1).reshape(6)
    Lam = jnp.stack([odd, odd + theta_B], axis=-1).reshape(6)
    return lam, Lam


def attachment_angles(params: CKCMParams):
    """(λ_i, Λ_i), i = 1..6, in radians: Nguyen & Pooran eq. 2's pattern (``symmetric_angles``), or the per-leg angles
    of ``params.leg_geometry``.  Shapes (6,) each."""
    if params.leg_geometry is not None:
        return params.leg_geometry[0], params.leg_geometry[1]
    return symmetric_angles(params.theta_A, params.theta_B)


def attachment_radii(params: CKCMParams):
    """(r_A,i, r_B,i), i = 1..6 (Nguyen & Pooran eq. 3-4: every point of a platform on one circle unless
    ``leg_geometry``)."""
    if params.leg_geometry is not None:
        return params.leg_geometry[2], params.leg_geometry[3]
    return jnp.broadcast_to(params.r_A, (6,)), jnp.broadcast_to(params.r_B, (6,))


def per_leg_geometry(params: CKCMParams):
    """The (4, 6) array (λ_i, Λ_i, r_A,i, r_B,i) of ``params``, whichever way it holds its geometry."""
    return jnp.stack(attachment_angles(params) + attachment_radii(params))


def leg_mass_split(params: CKCMParams):
    """(m, m1): the leg masses of Nguyen & Pooran eq. 42, scalars, or (6,) arrays when ``params.leg_masses`` is set."""
    if params.leg_masses is not None:
        return params.leg_masses[0], params.leg_masses[1]
    return params.m, params.m1


def per_leg_masses(params: CKCMParams):
    """The (2, 6) array (m_i, m1_i) of ``params``, whichever way it holds its leg masses."""
    return jnp.stack([jnp.broadcast_to(v, (6,)) for v in leg_mass_split(params)])


def _circle_points(r, angle):
    return jnp.stack([r * jnp.cos(angle), r * jnp.sin(angle), jnp.zeros_like(angle)], axis=-1)


def payload_points(params: CKCMParams):
    """ᴬa_i = (r_A cos λ_i, r_A sin λ_i, 0), the ball joints in the payload frame {A} (Nguyen & Pooran eq. 3).
    Shape (6, 3)."""
    lam, _ = attachment_angles(params)
    r = params.leg_geometry[2] if params.leg_geometry is not None else params.r_A
    return _circle_points(r, lam)


def base_points(params: CKCMParams):
    """ᴮb_i = (r_B cos Λ_i, r_B sin Λ_i, 0), the leg joints in the base frame {B} (Nguyen & Pooran eq. 4).
    Shape (6, 3)."""
    _, Lam = attachment_angles(params)
    r = params.leg_geometry[3] if params.leg_geometry is not None else params.r_B
    return _circle_points(r, Lam)


# --- validation (eager, on concrete values) ------------------------------------------------------------
def _closest_pair_of_points(pts):
    """Closest pair (distance, i, j) of six points (..., 6, 2) (numpy, leading batch dims allowed)."""
    d = np.linalg.norm(pts[..., :, None, :] - pts[..., None, :, :], axis=-1)
    d = d + np.where(np.eye(6, dtype=bool), np.inf, 0.0)
    flat = d.reshape(d.shape[:-2] + (36,))
    k = np.argmin(flat, axis=-1)
    return np.min(flat, axis=-1), k // 6, k % 6


def _closest_pair(r, angles_deg):
    """Closest pair of the six points r·(cos, sin) (numpy, leading batch dims allowed; r (...) or (..., 6))."""
    a = np.deg2rad(angles_deg)
    r = r if np.shape(r)[-1:] == (6,) and np.ndim(r) == np.ndim(a) else np.asarray(r)[..., None]
    return _closest_pair_of_points(np.stack([r * np.cos(a), r * np.sin(a)], axis=-1))


def _validate_per_leg(params: CKCMParams, min_separation):
    """The checks of ``validate_params`` for per-leg geometry and masses (``leg_geometry``, ``leg_masses``)."""
    if params.leg_masses is not None:
        lm = np.asarray(params.leg_masses, float)
        if lm.shape != (2, 6) or not np.all(np.isfinite(lm)):
            raise CKCMInputError(f"leg_masses must be a finite (2, 6) array (m_i, m1_i), got shape {lm.shape}")
        bad = [f"leg {i + 1}: m = {lm[0, i]:.6g} kg, m1 = {lm[1, i]:.6g} kg" for i in range(6)
               if not (lm[0, i] > 0 and 0 <= lm[1, i] <= lm[0, i])]
        if bad:
            raise CKCMInputError("leg masses must satisfy m_i > 0 and 0 <= m1_i <= m_i (Nguyen & Pooran eq. 42): "
                                 + "; ".join(bad))
    if params.leg_geometry is None:
        return
    lg = np.asarray(params.leg_geometry, float)
    if lg.shape != (4, 6) or not np.all(np.isfinite(lg)):
        raise CKCMInputError(f"leg_geometry must be a finite (4, 6) array (lambda_i, Lambda_i, r_A_i, r_B_i), "
                             f"got shape {lg.shape}")
    bad = [f"{n}_{i + 1} = {lg[row, i]:.6g} m" for row, n in ((2, "r_A"), (3, "r_B")) for i in range(6)
           if not lg[row, i] > 0]
    if bad:
        raise CKCMInputError("attachment radii must be > 0: " + "; ".join(bad))
    for name, row, pt in (("A", 0, "payload"), ("B", 1, "base")):
        dmin, i, j = _closest_pair(lg[row + 2], np.degrees(lg[row]))
        if dmin < min_separation:
            raise AttachmentError(
                f"{pt} attachment points {name}_{int(i) + 1} (angle {np.degrees(lg[row, i]):.6g} deg, radius "
                f"{lg[row + 2, i]:.6g} m) and {name}_{int(j) + 1} (angle {np.degrees(lg[row, j]):.6g} deg, radius "
                f"{lg[row + 2, j]:.6g} m) coincide: they are {float(dmin):.3g} m apart (< min_separation = "
                f"{min_separation:g} m)")


def validate_params(params: CKCMParams, min_separation=1e-3):
    """Raise a ``ValueError`` subclass when the parameters do not describe a buildable end-effector.

    Checks: positive radii, masses, lengths and inertias; 0 ≤ m1 ≤ m; and that no two attachment points of
    Nguyen & Pooran eq. 2-4 lie closer than ``min_separation`` metres (``AttachmentError``, naming the points, their
    distance and the θA/θB that caused it).  θA ≡ 0 or 120° (mod 360°) makes A_i coincide; likewise θB for
    B_i.  Per-leg geometry and masses (``leg_geometry``, ``leg_masses``) are checked point by point and leg
    by leg.  Leading batch dimensions are allowed for the scalar fields (the worst scenario is reported).

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
        raise CKCMInputError(f"moving-part mass m1 = {v['m1']} must lie in [0, m = {v['m']}] (Nguyen & Pooran eq. 42)")
    for k in ("theta_A", "theta_B", "g", "z_nominal"):
        if not np.all(np.isfinite(v[k])):
            raise CKCMInputError(f"CKCM parameter {k} must be finite, got {v[k]}")
    _validate_per_leg(params, min_separation)
    if params.leg_geometry is not None:
        return params
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
                f"theta_{name} must stay away from 0 and 120 deg (mod 360, Nguyen & Pooran eq. 2).")
    return params
