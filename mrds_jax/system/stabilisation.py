"""Constraint errors and constraint stabilisation (Bonaventura §6.4, Bonaventura eq. 104-112; Baumgarte).

**Position error Φ_p** (Bonaventura eq. 106-107; "found in a manner similar to that for the velocity", §6.4). From the
placements of a contact's two frames, E (ᴵR_E, ᴵr_IE) and P (ᴵR_P, ᴵr_IP), the relative pose in E's axes is

    ᴱr_EP = ᴵR_Eᵀ (ᴵr_IP − ᴵr_IE)         (Bonaventura eq. 97)        ᴱR_P = ᴵR_Eᵀ ᴵR_P         (Bonaventura eq. 99)

and the contact is closed when E and P coincide in every constrained direction (the convention of the whole
library: the contact frames are placed so that the closed contact has ᴱr_EP = 0 and ᴱR_P = 1 up to the
free modes). A 6-D pose error e = [e_ω; ᴱr_EP] ([angular; linear], frame E) is projected like the
velocity of Bonaventura eq. 105, Φ_p = ψᶜᵀ e − xᶜ(t). The rotational part e_ω is a rotation vector in E's axes chosen so
that **dΦ_p/dt = Φ_v exactly on the constraint manifold** (so Bonaventura eq. 110-111 hold and a Baumgarte or PD law
sees consistent position and velocity errors), for any amount of motion in the free directions:

* no free rotation (weld, prismatic, locked-rotation sliders): e_ω = log(ᴱR_P), the rotation vector;
* one free rotation axis a (revolute, cylindrical, screw, planar; a = the angular part of φᵘ): the
  swing-twist split ᴱR_P = R_swing(s) R_twist(a, τ) with the swing vector s = a × (ᴱR_P a) (sine-scaled,
  ⊥ a, blind to the twist τ however large) and the twist angle τ = 2 atan2(a·v, 1 + cos θ) (v = sin θ n
  from the skew part), e_ω = s + τ a. Only the screw's constrained column [−ρa; a] reads τ: its
  Φ_p = a·r − ρτ is the helix error d − ρθ (Bonaventura eq. 29), valid within one turn (|τ| < π) of the reference;
* a universal contact (variable modes, a₁ fixed in E, a₂ fixed in P): the one angular constraint is
  a₁ · (ᴱR_P a₂) = a₁ · a₂, and e_ω = −(a₁·b − a₁·a₂) c / |c|² with b = ᴱR_P a₂, c = a₁ × b, so that
  ψᶜᵀe (ψᶜ_ω = c / |c|²) has rate ψᶜᵀ ᴱẋ_EP;
* planar contacts (task [θ; x; y]): e = [atan2 of ᴱR_P; ᴱr_EP,x; ᴱr_EP,y].

Three free rotations (spherical, point contacts) leave ψᶜ without angular rows, so e_ω is irrelevant. With
an excited constrained mode (ẋᶜ(t) ≠ 0) the position target xᶜ(t) = ∫ẋᶜ dt must be supplied
(``Stabilisation.position_targets``); without it that contact's Φ_p is set to 0 (velocity feedback only).

**Velocity error Φ_v** (Bonaventura eq. 105): Φ_v = ψᶜᵀ ᴱẋ_EP − ẋᶜ ("actual minus prescribed").

**Stabilisation laws** (:class:`Stabilisation`; both off by default, all gains ≥ 0):

* Baumgarte: the constrained accelerations are asked to obey Φ̈ = −2α Φ̇ − β² Φ, i.e. the prescribed
  ẍᶜ of Bonaventura eq. 89 becomes ẍᶜ − 2α Φ_v − β² Φ_p inside yᶜ. α, β in 1/s; α = β is critical damping, and the
  error then decays like (1 + βt) e^{−βt} independently of the masses. Recommended: β ≈ 1/(10-50 dt).
* PD constraint-violation suppression (Bonaventura eq. 104, corrected, notes §4.4):
  F* = F − ψᶜ (K_v Φ_v + K_p Φ_p), i.e. Fᶜ* = Fᶜ − K_v Φ_v − K_p Φ_p after the solve; F* replaces F in
  Bonaventura eq. 74 and 95-96. The thesis prints "+K_v Φ_v + K_p Φ_p", which is dimensionally wrong (n_c vs 6) and,
  since ψᶜᵀẍ_EP gains Bᶜ ΔFᶜ with Bᶜ positive semi-definite, would amplify the drift; the negative sign
  makes the error obey Φ̈ = −Bᶜ (K_v Φ̇ + K_p Φ) + …, a damped spring whose rate depends on Bᶜ (i.e. on the
  masses). Gains: K_p in N/m (N·m/rad for angular modes), K_v in N·s/m (N·m·s/rad); the thesis used
  K_p = 0.1, K_v = 0.2 (System 6a).

Gains are pytree leaves (scalars, or arrays of shape (n_C,) for one gain per constrained direction), so
one compiled simulation serves every gain value, including 0.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model.tree import task_slice
from ..pytree import pytree_dataclass, static
from ..spatial.linalg import matmul
from ..spatial import cross


# ----------------------------------------------------------------------------- rotation errors
def rotation_log(R):
    """Rotation vector θ n of a rotation matrix (exp([θn]×) = R, 0 ≤ θ ≤ π).

    Smooth and exact near R = 1 (series branch), finite everywhere (at θ = π exactly it returns 0: the
    axis is not determined by the skew part there)."""
    v = 0.5 * jnp.stack([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])   # sin θ · n
    c = 0.5 * (jnp.trace(R) - 1.0)                                                  # cos θ
    s2 = matmul(v, v)
    small = (s2 < 1e-12) & (c > 0)
    s = jnp.sqrt(jnp.where(small, 1.0, jnp.maximum(s2, jnp.finfo(R.dtype).tiny)))
    theta = jnp.arctan2(s, c)
    scale = jnp.where(small, 1.0 + s2 / 6.0, theta / s)      # θ / sin θ
    return scale * v


def swing_twist_error(R, a):
    """e = s + τ a for ``R`` = R_swing R_twist(a, τ): s = a × (R a) (sine of the swing, ⊥ a), τ the twist
    angle about the unit axis ``a`` in (−π, π]. To first order e equals the rotation vector of R, and on
    the set R = R_twist(a, ·) its derivative along Ṙ = [ω]× R is the component of ω across a (plus the
    twist rate along a)."""
    s = cross(a, matmul(R, a))
    v = 0.5 * jnp.stack([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    tau = 2.0 * jnp.arctan2(matmul(a, v), 0.5 * (1.0 + jnp.trace(R)))       # 2 atan2(sin θ (a·n), 1 + cos θ)
    return s + tau * a


def _free_rotation_axis(phi_u):
    """(has a free rotation, unit vector in the span of the angular rows of φᵘ) — traceable."""
    A = phi_u[:3]
    M = matmul(A, A.T)
    d = jnp.diag(M)
    has = jnp.sum(d) > 1e-12
    col = M[:, jnp.argmax(d)]
    n = jnp.sqrt(jnp.maximum(matmul(col, col), jnp.finfo(M.dtype).tiny))
    ez = jnp.array([0.0, 0.0, 1.0], dtype=M.dtype)
    return has, jnp.where(has, col / n, ez)


def pose_error(contact, R_EP, r_EP):
    """The pose error e of a contact (d,), frame E, [angular; linear] (planar: [θ; x; y]), whose projection
    ψᶜᵀ e is Φ_p; see the module docstring."""
    if contact.dim == 3:
        theta = jnp.arctan2(R_EP[1, 0], R_EP[0, 0])
        return jnp.concatenate([theta[None], r_EP[:2]])
    if contact.kind == "spherical":          # ψᶜ has no angular rows: e_ω is never read (saves its kernels)
        return jnp.concatenate([jnp.zeros(3, dtype=r_EP.dtype), r_EP])
    if contact.kind == "universal" and getattr(contact, "modes", None) is not None:
        a1, a2 = contact.phi_u[:3, 0], contact.phi_u[:3, 1]
        b = matmul(R_EP, a2)
        c = cross(a1, b)
        e_w = -(matmul(a1, b) - matmul(a1, a2)) * c / jnp.maximum(matmul(c, c), jnp.finfo(c.dtype).tiny)
        return jnp.concatenate([e_w, r_EP])
    has, a = _free_rotation_axis(contact.phi_u)
    e_w = jnp.where(has, swing_twist_error(R_EP, a), rotation_log(R_EP))
    return jnp.concatenate([e_w, r_EP])


# ----------------------------------------------------------------------------- per-contact errors
def current_bases(contact, R_EP, r_EP, xd6, t):
    """(ψᵘ, ψᶜ) of a contact at the relative configuration (variable modes evaluated there)."""
    if getattr(contact, "modes", None) is None:
        return contact.psi_u, contact.psi_c
    from ..contacts.variable import contact_modes
    xd_c = contact.constraint_velocity_and_acceleration(t, xd6.dtype)[0]
    m = contact_modes(contact, R_EP, r_EP, xd6, xd_c)
    return m.psi_u, m.psi_c


def relative_pose(side_E, side_P):
    """(ᴱR_P, ᴱr_EP) (Bonaventura eq. 97, 99) from the sides' world placements (R, p, …)."""
    R_E, p_E = side_E[0], side_E[1]
    R_P, p_P = side_P[0], side_P[1]
    return matmul(R_E.T, R_P), matmul(R_E.T, p_P - p_E)


def relative_velocity(side_E, side_P):
    """ᴱẋ_EP = ᴱℜ_I (ẋ_P − S_EP ẋ_E) (Bonaventura eq. 98), 6-D, from the sides' (R, p, ẋ = [ω; ṗ] world axes)."""
    R_E, p_E, xd_E = side_E[0], side_E[1], side_E[2]
    p_P, xd_P = side_P[1], side_P[2]
    w = xd_E[:3]
    rel_w = xd_P[:3] - w
    rel_v = xd_P[3:] - xd_E[3:] - cross(w, p_P - p_E)
    return jnp.concatenate([matmul(R_E.T, rel_w), matmul(R_E.T, rel_v)])


def _targets(stab):
    return dict(stab.position_targets) if stab is not None else {}


def contact_errors(contact, side_E, side_P, t, psi_c=None, xd_EP=None, targets=None):
    """(Φ_p, Φ_v) of one contact (each (n_c,)) from its sides' world kinematics (R, p, ẋ).

    ``psi_c``/``xd_EP`` (task rows) may be passed when already known (inside the dynamics). ``targets``:
    dict contact name -> t ↦ xᶜ(t) for excited contacts (see module docstring)."""
    R_EP, r_EP = relative_pose(side_E, side_P)
    dtype = r_EP.dtype
    rows = task_slice(contact.dim)
    xd6 = relative_velocity(side_E, side_P) if xd_EP is None or psi_c is None else None
    if psi_c is None:
        psi_c = current_bases(contact, R_EP, r_EP, xd6, t)[1]
    if xd_EP is None:
        xd_EP = xd6[rows]
    xd_c = contact.constraint_velocity_and_acceleration(t, dtype)[0]
    phi_v = matmul(psi_c.T, xd_EP) - xd_c                                           # Bonaventura eq. 105
    phi_p = matmul(psi_c.T, pose_error(contact, R_EP, r_EP))                        # Bonaventura eq. 106-107
    targets = {} if targets is None else targets
    if contact.name in targets:
        phi_p = phi_p - jnp.asarray(targets[contact.name](t), dtype=dtype).reshape(contact.n_c)
    elif contact.excitation is not None:
        phi_p = jnp.zeros_like(phi_p)     # unknown position target of an excited mode: velocity feedback only
    return phi_p, phi_v


# ----------------------------------------------------------------------------- stabilisation laws
@pytree_dataclass
class Stabilisation:
    """Constraint stabilisation gains (module docstring). All zero = off.

    ``baumgarte_alpha``, ``baumgarte_beta`` [1/s]: ẍᶜ → ẍᶜ − 2α Φ_v − β² Φ_p in yᶜ (Bonaventura eq. 89).
    ``pd_kv`` [N·s/m], ``pd_kp`` [N/m]: Fᶜ* = Fᶜ − K_v Φ_v − K_p Φ_p (Bonaventura eq. 104 corrected, notes §4.4).
    ``position_targets``: static tuple of (contact name, t ↦ xᶜ(t)) for kinematically excited modes.
    """
    baumgarte_alpha: jnp.ndarray = 0.0
    baumgarte_beta: jnp.ndarray = 0.0
    pd_kv: jnp.ndarray = 0.0
    pd_kp: jnp.ndarray = 0.0
    position_targets: tuple = static(default=())


def baumgarte(beta, alpha=None, position_targets=()):
    """Baumgarte stabilisation with rate ``beta`` [1/s], damping ``alpha`` (default ``beta``: critical)."""
    return Stabilisation(baumgarte_alpha=beta if alpha is None else alpha, baumgarte_beta=beta,
                         position_targets=tuple(position_targets))


def pd_suppression(kp, kv, position_targets=()):
    """Bonaventura's PD constraint-violation suppression (Bonaventura eq. 104-105, corrected sign): gains K_p, K_v."""
    return Stabilisation(pd_kv=kv, pd_kp=kp, position_targets=tuple(position_targets))


def _side(contact, motion, m, slot, dtype):
    if m < 0:
        return contact.ground_R, contact.ground_p, jnp.zeros(6, dtype=dtype)
    pm = motion[m]
    return pm.R[slot], pm.p[slot], pm.xd[slot]


def stabilisation_terms(system, cs, t, stab):
    """(Δyᶜ, ΔFᶜ), each (n_C,), for :func:`~mrds_jax.system.forward_dynamics`: yᶜ += Δyᶜ before the solve
    (Baumgarte), Fᶜ −= ΔFᶜ after it (PD suppression, Bonaventura eq. 104). ``cs``: the ConstraintSystem of the state."""
    conn = system.connectivity
    dtype = cs.yc.dtype
    modes = getattr(cs, "modes", ()) or ()
    targets = _targets(stab)
    phi_p, phi_v = [], []
    for i, (c, (mE, sE, mP, sP)) in enumerate(zip(system.contacts, conn.sides)):
        psi_c = modes[i].psi_c if modes else c.psi_c
        pp, pv = contact_errors(c, _side(c, cs.motion, mE, sE, dtype), _side(c, cs.motion, mP, sP, dtype), t,
                                psi_c=psi_c, xd_EP=cs.xd_EP[i], targets=targets)
        phi_p.append(pp)
        phi_v.append(pv)
    if not phi_p:
        z = jnp.zeros(0, dtype=dtype)
        return z, z
    phi_p, phi_v = jnp.concatenate(phi_p), jnp.concatenate(phi_v)
    dy = -2.0 * stab.baumgarte_alpha * phi_v - stab.baumgarte_beta ** 2 * phi_p
    dF = stab.pd_kv * phi_v + stab.pd_kp * phi_p
    return dy, dF


class ConstraintErrors(NamedTuple):
    """Φ_p and Φ_v of every contact (tuples of (n_c,) arrays, contact order)."""
    position: tuple
    velocity: tuple


def point_kinematics(system, state):
    """Per module: (R, p, ẋ) of its contact points (``Connectivity.points``), world axes; kinematics only
    (:func:`~mrds_jax.dynamics.interface.point_motion`)."""
    from ..dynamics.interface import point_motion
    out = []
    for module, pts, q, v in zip(system.modules, system.connectivity.points, state.q, state.v):
        if not pts:
            out.append(None)
            continue
        pm = point_motion(module, q, v, pts)
        out.append([(pm.R[i], pm.p[i], pm.xd[i]) for i in range(len(pts))])
    return out


def constraint_errors(system, state, t=0.0, position_targets=()):
    """Φ_p (Bonaventura eq. 106-107, see module docstring) and Φ_v (Bonaventura eq. 105) of every contact at ``state``; pure
    kinematics, jit/vmap/grad-able."""
    pk = point_kinematics(system, state)
    dtype = state.q[0].dtype
    targets = dict(position_targets)
    pos, vel = [], []
    for c, (mE, sE, mP, sP) in zip(system.contacts, system.connectivity.sides):
        side = lambda m, s: ((c.ground_R, c.ground_p, jnp.zeros(6, dtype=dtype)) if m < 0  # noqa: E731
                             else pk[m][s])
        pp, pv = contact_errors(c, side(mE, sE), side(mP, sP), t, targets=targets)
        pos.append(pp)
        vel.append(pv)
    return ConstraintErrors(tuple(pos), tuple(vel))


def constraint_jacobian(system, state, t=0.0):
    """J (n_C, Σ nv): Φ_v = J v − ẋᶜ, the constraint Jacobian in velocity coordinates (Bonaventura eq. 109-111)."""
    sizes = [m.nv for m in system.modules]
    splits = np.cumsum(sizes)[:-1]

    def phi_v(v_flat):
        vs = tuple(jnp.split(v_flat, splits)) if len(sizes) > 1 else (v_flat,)
        errs = constraint_errors(system, type(state)(state.q, vs), t)
        return jnp.concatenate(errs.velocity) if errs.velocity else jnp.zeros(0, dtype=v_flat.dtype)

    v0 = jnp.concatenate([jnp.zeros(n, dtype=state.q[0].dtype) for n in sizes])
    return jax.jacfwd(phi_v)(v0)
