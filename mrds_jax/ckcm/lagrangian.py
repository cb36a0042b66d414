"""The paper's Lagrangian model of the CKCM end-effector (Nguyen & Pooran 1989, Section 3.3 and 4.1),
derived by JAX autodiff from the energies of Nguyen & Pooran eq. 39-43 instead of typed from the printed coefficients.

Generalized coordinates, as the paper chooses them (Section 3.3, Nguyen & Pooran eq. 20): the *pose* Φ = (x, y, z, α, β,
γ) with Z-Y-X Euler angles, because the forward kinematics has no closed form.  Nguyen & Pooran eq. 45,

    F = D(Φ) Φ̈ + H(Φ)(Φ̇, Φ̇) + G(Φ),

gives the generalized Cartesian forces F_j conjugate to φ_j (forces along x, y, z; torques conjugate to the
Euler-angle rates), and the actuator (leg) forces follow by virtual work (Nguyen & Pooran eq. 56, corrected below):
τ = C⁻ᵀ F with C = ∂l/∂Φ of Nguyen & Pooran eq. 26-27.

Energies (Nguyen & Pooran eq. 39-43), each leg i a point mass m at distance l_ci = d0 + d1 l_i from B_i along the leg:

    K = ½ Σ_i (m l_ci² θ̇_i² + m l̇_ci²) + ½ Σ_k M ẋ_k² + ½ Σ_k I_k ω_k²,   P = M g z + m g Σ_i l_ci sin θ_i,

with θ_i the leg elevation (Nguyen & Pooran eq. 28), ω = ᴮΩ = V(Φ) Φ̇ (Nguyen & Pooran eq. 32-34).  ``kinetic_energy``
and ``potential_energy`` implement exactly these (K as ½ Σ_k w_k φ_k² of velocities φ linear in Φ̇,
``_velocities``); D = ∂²K/∂Φ̇² (Nguyen & Pooran eq. 46), the velocity-product term d/dt(∂K/∂Φ̇) − ∂K/∂Φ at Φ̈ = 0, and
G = ∂P/∂Φ all come from ``jax`` derivatives of them (Nguyen & Pooran eq. 37-38; the terms of Nguyen & Pooran eq. 45 by
forward mode from φ, ``_lagrange_terms``).

Departures from the printed equations, and why:

- **D (Nguyen & Pooran eq. 46)** is derived, not typed.  As printed, the d_1² c_ij c_im term has no factor m (the
  kinetic energy ½ m l̇_ci² = ½ m d_1² l̇_i² carries one) and the payload block E sits inside the sum over the six
  legs (it would count the payload six times; its index is also printed as e_im for the (j, m) element).
  E's entries, M δ_jm and I_k v_kj v_km, agree with the derivation: E = diag(M, M, M, 0, 0, 0) +
  Vᵀ diag(I_1, I_2, I_3) V.  The test suite checks the autodiff D against
  Σ_i m (l_ci² t_i t_iᵀ + d_1² c_i c_iᵀ) + E (with t_i5 corrected, below).
- **H (Nguyen & Pooran eq. 48-52)** is not typed at all: ``velocity_product`` is the Lagrangian term and
  ``velocity_product_coefficients`` the Christoffel form H_jmn = ½(∂D_jm/∂φ_n + ∂D_jn/∂φ_m − ∂D_mn/∂φ_j),
  symmetric in (m, n); the printed Nguyen & Pooran eq. 48-52 are not reproducible from the energies term by term.
- **G (Nguyen & Pooran eq. 53)** prints m g c_ij sin θ_i; ∂(m g l_ci sin θ_i)/∂φ_j gives m g d_1 c_ij sin θ_i (the
  factor d_1 = ∂l_ci/∂l_i is missing).  Derived G = Σ_i m g (d_1 c_ij sin θ_i + l_ci t_ij cos θ_i) + M g δ_j3.
- **t_i5 (Nguyen & Pooran eq. 31e)** is printed with + c_i3 c_i5; the derivative of Nguyen & Pooran eq. 28 has
  − c_i3 c_i5 (see ``kinematics.elevation_jacobian``).  It enters D and G only through autodiff here.
- **Nguyen & Pooran eq. 56** prints τ = Jᵀ F.  With J = C (Nguyen & Pooran eq. 26: l̇ = C Φ̇), virtual work
  τᵀ δl = Fᵀ δΦ gives F = Cᵀ τ, so τ = C⁻ᵀ F; ``actuator_forces`` does that (the print holds only if J denotes
  ∂Φ/∂l = C⁻¹).
- **Nguyen & Pooran eq. 44** has ∂/∂φ̇ where ∂/∂φ is meant in its position-derivative terms; we differentiate the
  energies directly, so nothing of Nguyen & Pooran eq. 44 is typed.
- **Nguyen & Pooran eq. 39 kept as printed** (``EnergyModel()``, the default): the payload's rotational energy uses the
  base-frame angular velocity with diagonal I_k (exact only for a spherical payload; for the bench's disc
  with I_1 = I_2 it misses the tilt coupling), each leg is a point mass (no rotational inertia of its own),
  and the leg's azimuthal rotation about the vertical is ignored (only θ̇_i appears).  ``EnergyModel``
  switches on the body-frame payload inertia (``payload_rotation="body"``) and the azimuthal leg term
  (``leg_azimuth=True``) for comparison with the full multibody model (``experiments/ckcm_model_gap.py``).

Accuracy: float64 to round-off (power balance to ~1e-14 W of ~50 W); float32 gives actuator forces to ~3e-7
relative (measured at a random state).

Parameters the paper leaves open (l_s, l_m, I_k, height of the path) follow the benchmarks' MJCF model of the same mechanism; see
``params.py``.  Path of Section 4 (Nguyen & Pooran eq. 55): ``ellipse_path``; its timing is ours (constant angular rate,
period from the maximum actuator speed; the paper's Tables 1-2 give only "V_max" and the durations).
Reading the tables (``experiments/ckcm_reproduction.py``): their gravity column is the Cartesian force F_x of
Nguyen & Pooran eq. 45, with loop periods of 10 s (Table 1) and 0.5 s (Table 2) and the ellipse ≈ 0.57 m *below* the
base; their inertial column cannot be reproduced (it implies D₁₁ ≈ 15 kg < M).  The full multibody model of the
same machine, and what Nguyen & Pooran eq. 39 leaves out (the moving part's axial kinetic energy, the legs' rotational
inertia and azimuthal swing): ``multibody`` and ``legs.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
import functools

import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass
from ..spatial import dense
from .kinematics import angular_velocity_matrix, home_pose, jacobian, leg_vectors, rotation, warn_if_singular
from .params import CKCMParams, leg_mass_split


@dataclass(frozen=True)
class EnergyModel:
    """Static (hashable) choice of kinetic-energy terms; the default is Nguyen & Pooran eq. 39 exactly as printed.

    payload_rotation  "paper": ½ Σ_k I_k ω_k² with ω in {B} (Nguyen & Pooran eq. 39);
                      "body":  ½ ωᴬᵀ diag(I) ωᴬ with ωᴬ = Rᵀ ᴮΩ (rigid-body exact).
    leg_azimuth       add ½ m l_ci² cos²θ_i ψ̇_i², ψ_i the leg azimuth (missing from Nguyen & Pooran eq. 39).
    """
    payload_rotation: str = "paper"
    leg_azimuth: bool = False

    def __post_init__(self):
        if self.payload_rotation not in ("paper", "body"):
            raise ValueError(f"payload_rotation must be 'paper' or 'body', got {self.payload_rotation!r}")


PAPER = EnergyModel()


# --- energies, Nguyen & Pooran eq. 39-43 ------------------------------------------------------------------------------
def _leg_coordinates(params: CKCMParams, q, azimuth=False):
    """(l_ci, θ_i[, ψ_i]): centroid distance (Nguyen & Pooran eq. 40), elevation (Nguyen & Pooran eq. 28) [and azimuth]
    of every leg."""
    v = leg_vectors(params, q)
    # Nguyen & Pooran eq. 11 (= Nguyen & Pooran eq. 18, see kinematics.inverse_kinematics)
    l = jnp.sqrt(jnp.sum(v**2, axis=-1))
    qp = jnp.sqrt(v[:, 0]**2 + v[:, 1]**2)
    out = (params.d0 + params.d1 * l, jnp.arctan2(v[:, 2], qp))
    return out + (jnp.arctan2(v[:, 1], v[:, 0]),) if azimuth else out


def _velocities(params: CKCMParams, q, qd, model: EnergyModel = PAPER):
    """(φ, w): the velocities whose weighted squares make up Nguyen & Pooran eq. 39's kinetic energy, K = ½ Σ_k w_k
    φ_k²: l_ci θ̇_i and l̇_ci (weight m, six legs each), ẋ, ẏ, ż (M), ω_k (I_k) [and l_ci cos θ_i ψ̇_i (m)].

    θ̇_i and l̇_ci are forward-mode derivatives of Nguyen & Pooran eq. 28 and Nguyen & Pooran eq. 40 along Φ̇ (exactly
    t_i·Φ̇ of Nguyen & Pooran eq. 30 and d_1 c_i·Φ̇ of Nguyen & Pooran eq. 26); ω = V Φ̇ (Nguyen & Pooran eq. 33-34).  φ
    is linear in Φ̇: φ = W(Φ) Φ̇."""
    coords, rates = jax.jvp(lambda x: _leg_coordinates(params, x, model.leg_azimuth), (q,), (qd,))
    lc, th, lcd, thd = coords[0], coords[1], rates[0], rates[1]
    omega = angular_velocity_matrix(q) @ qd
    if model.payload_rotation == "body":
        omega = rotation(q).T @ omega
    m = jnp.broadcast_to(leg_mass_split(params)[0], lc.shape)
    phi, w = [lc * thd, lcd, qd[:3], omega], [m, m, jnp.broadcast_to(params.M, (3,)), params.I_payload]
    if model.leg_azimuth:
        phi.append(lc * jnp.cos(th) * rates[2])
        w.append(m)
    return jnp.concatenate(phi), jnp.concatenate(w)


def kinetic_energy(params: CKCMParams, q, qd, model: EnergyModel = PAPER):
    """K of Nguyen & Pooran eq. 39 at pose ``q`` = Φ and Euler-rate velocity ``qd`` = Φ̇ (Nguyen & Pooran eq. 20-21):
    ½ Σ_i m (l_ci² θ̇_i² + l̇_ci²) + ½ M |ẋ|² + ½ Σ_k I_k ω_k² = ½ Σ w φ² (``_velocities``)."""
    phi, w = _velocities(params, q, qd, model)
    return 0.5 * jnp.sum(w * phi**2)


def potential_energy(params: CKCMParams, q):
    """P = M g z + m g Σ_i l_ci sin θ_i (Nguyen & Pooran eq. 43): payload and leg centroids above the base plane (with
    per-leg masses ``leg_masses``, Σ_i m_i g l_ci sin θ_i)."""
    lc, th = _leg_coordinates(params, q)
    return params.g * (params.M * q[2] + jnp.sum(leg_mass_split(params)[0] * lc * jnp.sin(th)))


def total_energy(params: CKCMParams, q, qd, model: EnergyModel = PAPER):
    """E = K + P (Nguyen & Pooran eq. 39, 43)."""
    return kinetic_energy(params, q, qd, model) + potential_energy(params, q)


# --- the terms of Nguyen & Pooran eq. 45 ------------------------------------------------------------------------------
def mass_matrix(params: CKCMParams, q, model: EnergyModel = PAPER):
    """D(Φ) = ∂²K/∂Φ̇² (Nguyen & Pooran eq. 45-46).  K is quadratic in Φ̇ (Nguyen & Pooran eq. 39), so ∂K/∂Φ̇ = D Φ̇ and
    column j of D is ∂K/∂Φ̇ evaluated at Φ̇ = e_j: exact, and one derivative level cheaper than a Hessian."""
    dK_dqd = jax.grad(kinetic_energy, argnums=2)
    return jax.vmap(lambda e: dK_dqd(params, q, e, model), out_axes=1)(jnp.eye(q.shape[-1], dtype=q.dtype))


def _lagrange_terms(params, q, qd, qdd, model):
    """(D Φ̈, Σ H Φ̇Φ̇) from Nguyen & Pooran eq. 37 with L = K − P and K = ½ φᵀ diag(w) φ, φ = W(Φ) Φ̇
    (``_velocities``): ∂K/∂Φ̇ = Wᵀ w φ, so d/dt(∂K/∂Φ̇) = Wᵀ w (W Φ̈ + Ẇ Φ̇) + Ẇᵀ w φ and ∂K/∂Φ = (∂φ/∂Φ)ᵀ w φ.  The Φ̈
    part is D Φ̈ with D = Wᵀ diag(w) W (Nguyen & Pooran eq. 46); the rest is the velocity-product term.  W = ∂φ/∂Φ̇ and
    its derivatives ∂W/∂φ_d come from forward-mode autodiff (directional derivatives, vmapped), with
    Ẇ = Σ_d φ̇_d ∂W/∂φ_d and (∂φ/∂Φ)_kd = Σ_j (∂W_kj/∂φ_d) φ̇_j: the same terms as the Hessian of K, in
    about half the operations (XLA compiles it, and its design derivatives, faster)."""
    eye = jnp.eye(q.shape[-1], dtype=q.dtype)

    def w_transposed(x):                                   # Wᵀ (6, n_φ): row j is φ(Φ, e_j)
        return jax.vmap(lambda e: _velocities(params, x, e, model)[0])(eye)
    Wt, dWt = jax.vmap(lambda d: jax.jvp(w_transposed, (q,), (d,)), out_axes=(None, 0))(eye)  # dWt[d] = ∂Wᵀ/∂φ_d
    w = _velocities(params, q, qd, model)[1]
    phi = Wt.T @ qd
    Wdot_t = jnp.einsum("d,djk->jk", qd, dWt)
    dphi_dq = jnp.einsum("djk,j->kd", dWt, qd)
    inertial = Wt @ (w * (Wt.T @ qdd))
    return inertial, Wdot_t @ (w * phi) + Wt @ (w * (Wdot_t.T @ qd)) - dphi_dq.T @ (w * phi)


def velocity_product(params: CKCMParams, q, qd, model: EnergyModel = PAPER):
    """Σ_mn H_jmn φ̇_m φ̇_n (Nguyen & Pooran eq. 45, 48) from the Lagrangian: (∂²K/∂Φ̇∂Φ) Φ̇ − ∂K/∂Φ, i.e.
    Nguyen & Pooran eq. 37 with Φ̈ = 0 and without the potential."""
    return _lagrange_terms(params, q, qd, jnp.zeros_like(q), model)[1]


def velocity_product_coefficients(params: CKCMParams, q, model: EnergyModel = PAPER):
    """H_jmn (6, 6, 6) of Nguyen & Pooran eq. 45 in Christoffel form, ½(∂D_jm/∂φ_n + ∂D_jn/∂φ_m − ∂D_mn/∂φ_j), symmetric
    in (m, n), so that Σ_mn H_jmn φ̇_m φ̇_n equals ``velocity_product``."""
    dD = jax.jacfwd(mass_matrix, argnums=1)(params, q, model)  # dD[j, m, n] = ∂D_jm/∂φ_n
    return 0.5 * (dD + jnp.swapaxes(dD, 1, 2) - jnp.transpose(dD, (2, 0, 1)))


def gravity(params: CKCMParams, q):
    """G(Φ) = ∂P/∂Φ (Nguyen & Pooran eq. 53-54, derived; see the module docstring for the printed
    Nguyen & Pooran eq. 53's missing d_1)."""
    return jax.grad(potential_energy, argnums=1)(params, q)


@pytree_dataclass
class ForceSplit:
    """Force contributions as the paper's Tables 1-2 list them: inertial D Φ̈, velocity products
    H Φ̇Φ̇, gravity G, and their sum (total)."""
    inertial: jax.Array
    velocity_product: jax.Array
    gravity: jax.Array
    total: jax.Array


def cartesian_forces(params: CKCMParams, q, qd, qdd, model: EnergyModel = PAPER) -> ForceSplit:
    """Generalized Cartesian forces F = D Φ̈ + H Φ̇Φ̇ + G (Nguyen & Pooran eq. 45), split into its three terms."""
    fi, fv = _lagrange_terms(params, q, qd, qdd, model)
    fg = gravity(params, q)
    return ForceSplit(fi, fv, fg, fi + fv + fg)


def actuator_forces(params: CKCMParams, q, qd, qdd, model: EnergyModel = PAPER) -> ForceSplit:
    """Leg actuator forces τ = C⁻ᵀ F (Nguyen & Pooran eq. 56 corrected: virtual work with l̇ = C Φ̇ of
    Nguyen & Pooran eq. 26), each of the three terms of Nguyen & Pooran eq. 45 mapped separately (they add up to the
    total).  Warns :class:`~mrds_jax.ckcm.errors.SingularPoseWarning` at a (near) singular pose given concrete
    inputs."""
    warn_if_singular(params, q, "ckcm.lagrangian.actuator_forces")
    F = cartesian_forces(params, q, qd, qdd, model)
    CT = jacobian(params, q).T
    return jax.tree_util.tree_map(lambda f: dense.solve(CT, f), F)


def actuator_forces_total(params: CKCMParams, q, qd, qdd, model: EnergyModel = PAPER):
    """The total leg forces τ = C⁻ᵀ (D Φ̈ + H Φ̇Φ̇ + G) (Nguyen & Pooran eq. 45, 56 corrected) alone: equal, bit for
    bit, to ``actuator_forces(...).total`` with one linear solve instead of four (what the design optimiser needs).
    Warns as ``actuator_forces`` does."""
    warn_if_singular(params, q, "ckcm.lagrangian.actuator_forces_total")
    return dense.solve(jacobian(params, q).T, cartesian_forces(params, q, qd, qdd, model).total)


# --- the path of Section 4, Nguyen & Pooran eq. 55 --------------------------------------------------------------------
ELLIPSE_SEMI_AXES = (0.05, 0.025)  # m: (x/5)² + (y/2.5)² = 1 in cm (Nguyen & Pooran eq. 55)


def ellipse_path(t, period, params: CKCMParams | None = None, z=None, semi_axes=ELLIPSE_SEMI_AXES):
    """Pose, velocity and acceleration (Φ, Φ̇, Φ̈) at time ``t`` on the ellipse of Nguyen & Pooran eq. 55.

    x = a cos(2π t/T), y = b sin(2π t/T) (a = 5 cm, b = 2.5 cm), at constant height and level orientation.
    The height z defaults to ``params.z_nominal`` (1.0 m, as in the benchmarks' MJCF model): the paper only says "a
    horizontal plane" (printed: "below the base platform"), and its frames put the payload above the base.
    The timing law (constant angular rate, period ``period`` = T, starting at (a, 0)) is our choice; use
    ``period_for_max_actuator_speed`` to set T from a maximum actuator speed as the paper's tables do.
    """
    if z is None:
        z = params.z_nominal if params is not None else 1.0
    a, b = semi_axes
    w = 2 * jnp.pi / period
    s = w * t
    c, sn = jnp.cos(s), jnp.sin(s)
    zero = jnp.zeros_like(s)
    zz = zero + z
    q = jnp.stack([a * c, b * sn, zz, zero, zero, zero])
    qd = jnp.stack([-a * w * sn, b * w * c, zero, zero, zero, zero])
    qdd = jnp.stack([-a * w**2 * c, -b * w**2 * sn, zero, zero, zero, zero])
    return q, qd, qdd


@functools.partial(jax.jit, static_argnames=("semi_axes", "samples"))
def _max_leg_speed_unit_period(params, z, semi_axes, samples):
    t = jnp.linspace(0.0, 1.0, samples, endpoint=False)

    def speed(ti):
        q, qd, _ = ellipse_path(ti, 1.0, params, z, semi_axes)
        return jnp.max(jnp.abs(jacobian(params, q) @ qd))
    return jnp.max(jax.vmap(speed)(t))


def period_for_max_actuator_speed(params: CKCMParams, v_max, z=None, semi_axes=ELLIPSE_SEMI_AXES,
                                  samples=2048):
    """Period T of ``ellipse_path`` whose largest actuator speed max_{i,t} |l̇_i| equals ``v_max`` (m/s).

    l̇ = C Φ̇ (Nguyen & Pooran eq. 26) scales as 1/T at a constant angular rate, so T = T₁ · v₁ / v_max with v₁ the
    maximum at T₁ = 1 s, taken over ``samples`` points of the loop (relative error ~(π/samples)²)."""
    z = params.z_nominal if z is None else z
    return _max_leg_speed_unit_period(params, z, tuple(semi_axes), int(samples)) / v_max


def actuator_forces_along_path(params: CKCMParams, times, period, z=None, semi_axes=ELLIPSE_SEMI_AXES,
                               model: EnergyModel = PAPER, batch_size=None):
    """Actuator-force split (``ForceSplit`` of (len(times), 6) arrays) along ``ellipse_path`` — the
    quantities of the paper's Tables 1-2 (Section 4.1: IK Nguyen & Pooran eq. 18, dynamics Nguyen & Pooran eq. 45,
    τ Nguyen & Pooran eq. 56).

    The time samples go through ``jax.lax.map`` (sequential by default, ``batch_size`` points vectorised at
    a time): it compiles about about twice as fast as ``vmap`` on CPU and stays clear of the jax 0.10 CPU
    deadlock of large vmapped factorisations (docs/DESIGN.md).  Batch over *scenarios* with ``jax.vmap``."""
    def at(t):
        q, qd, qdd = ellipse_path(t, period, params, z, semi_axes)
        return actuator_forces(params, q, qd, qdd, model)
    return jax.lax.map(at, jnp.asarray(times), batch_size=batch_size)


@functools.lru_cache(maxsize=None)
def jitted(name, model: EnergyModel = PAPER):
    """A cached ``jax.jit`` of one of this module's functions with the energy model bound, e.g.
    ``jitted("actuator_forces")(params, q, qd, qdd)``.  Saves recompiling in notebooks and tests."""
    fn = globals()[name]
    if "model" in fn.__code__.co_varnames:
        fn = functools.partial(fn, model=model)
    return jax.jit(fn)


__all__ = ["EnergyModel", "PAPER", "ForceSplit", "kinetic_energy", "potential_energy", "total_energy",
           "mass_matrix", "velocity_product", "velocity_product_coefficients", "gravity", "cartesian_forces",
           "actuator_forces", "actuator_forces_total", "ellipse_path", "period_for_max_actuator_speed",
           "actuator_forces_along_path", "ELLIPSE_SEMI_AXES", "jitted", "home_pose"]
