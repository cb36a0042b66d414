"""Planar chains of flexible links by assumed modes (Bonaventura Ch. 7-8, Appendix A) as modules.

:func:`flexible_chain` builds the three modules of Ch. 8.1 — the two-link robot with a fixed base (Bonaventura eq. 130),
the one-link robot with a fixed base (Bonaventura eq. 132) and the one-link robot with a freely mobile base (Bonaventura eq. 133) —
and any planar chain of such links: each link a Bernoulli-Euler beam of length L, mass per length ρ and
bending stiffness EI with 0-``MAX_MODES`` clamped-free assumed modes (Bonaventura eq. 126-128, :mod:`.modes`), an
optional point mass at the last tip (System 2b), gravity in the plane (zero in the thesis' systems).

Coordinates (Bonaventura eq. 130-133): q = [x₁, y₁ (mobile base only), q₁ … q_n, q_f1, …, q_fn], where link k's absolute
angle at its root is φ_k = φ_base + q₁ + … + q_k (Bonaventura eq. 131: q_k = θ_kʳ + w̄'_{k−1}, the relative joint angle
plus the elastic slope at the tip of the link before), and q_fk are link k's modal coordinates.

Kinematics are second order (foreshortening, Bonaventura eq. 129): a point at x on link k is at

    r_k(x) = o_k + R(φ_k) [x + u_k(x), w_k(x)],   w_k = Σ σⱼ q_fkj,   u_k = −½ ∫₀ˣ w_k'² dx,

and the next link starts at the tip, o_{k+1} = r_k(L_k). The module is a :class:`~mrds_jax.dynamics.
energy_module.EnergyModule`: kinetic energy ½ ∫ ρ |ṙ|² dx (+ ½ M |ṙ_tip|²) by quadrature, so
H(q) = Σ ρ w_g J_gᵀ J_g with J_g = ∂r(x_g)/∂q, and elastic energy ½ Σ EI ∫ w''² dx; C, G, the Jacobians of
the operational points and J̇v all follow by autodiff through Lagrange's equations (Extended Hamilton's
principle of Appendix A for this kinematics). This keeps every term the thesis' *consistent* linearisation
keeps (the geometric/centrifugal stiffening K_G of Appendix A, e.g. θ̇²(a₁₅ − a₁₄ + P₃a₁₃) in K_f1f1, and the
first-order couplings in H_θθ, H_θf) and also its second-order remainders, so the model is exactly
conservative: joint-torque work equals the change of kinetic plus elastic energy (tested to 1e-8).

Operational points (``frame_names``): "base" (o₁, angle φ₁), "tip1" … "tip{n−1}" and "tip" (the end of the
last link) with the tangent angle φ_k + w̄'_k, in the plane z = 0 (task space [ω_z, v_x, v_y], ``planar``).
A contact on a flexible body is placed at the contact surface (§7.1.4.1): here, link tips and the base.

The contact-point kinematics option (Ch. 8.1, three levels; the dynamics of the links are always the full
second-order model above):

* ``kinematics="second_order"`` (default, Ch. 8.1 case 3): the points' placements, Jacobians and J̇v keep all
  second-order terms (ū in the tip position, the first-order terms it brings into J) — the only choice
  consistent with the energy, needed for closed loops with large deflections (System 6b);
* ``kinematics="first_order_jacobian"`` (case 2): placed as in case 1 (no foreshortening in the placements,
  velocities J v built from them), but the Jacobian keeps the first-order terms that the second-order
  kinematics brings: J = J₃(q_θ, 0) + ∂J₃/∂q_f · q_f, the case-3 Jacobian J₃ truncated at first order in
  the modal coordinates (J₃ − J = O(q_f²), J − J₁ = O(q_f)), and J̇v the derivative of that J(q) v. This is
  the thesis' "extension of the consistent model to the operational space dynamics"; J is then not the
  derivative of the placements used, so the contact constraints are no longer exactly those of a motion
  (on closed loops the constraint drifts unless stabilised; the thesis' own finding);
* ``kinematics="first_order"`` (case 1): the points are placed without foreshortening (ū = 0 in every tip,
  so neither ū nor the first-order terms derived from it appear in J or J̇v).
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.energy_module import EnergyModule, placement_jacobians
from ..validation import ModelError
from ..system.forces import JointTorque
from ..spatial import rot_z
from .modes import MAX_MODES, mode_tables

KINEMATICS = ("second_order", "first_order_jacobian", "first_order")

# Bonaventura Table 22: aluminium strip 0.08 m x 0.002 m, E = 70 GPa, used for every link of Ch. 8.3
TABLE_22 = dict(width=0.08, height=0.002, rho=0.448, E=70e9, I=5.3333e-11, EI=3.7333)


class FlexibleModelError(ModelError):
    """A flexible chain was given inconsistent or non-physical data (names the argument and the value)."""


@dataclasses.dataclass(frozen=True)
class ChainLayout:
    """The static structure of a flexible chain: modes per link, base kind, contact-kinematics level."""
    n_modes: tuple
    mobile_base: bool = False
    kinematics: str = "second_order"

    @property
    def n_links(self):
        return len(self.n_modes)

    @property
    def n_base(self):
        return 2 if self.mobile_base else 0

    @property
    def nv(self):
        return self.n_base + self.n_links + sum(self.n_modes)

    def angle_index(self, k):
        """Index of q_k (link k's angle coordinate, 0-based k) in q."""
        return self.n_base + k

    def modal_slice(self, k):
        start = self.n_base + self.n_links + sum(self.n_modes[:k])
        return slice(start, start + self.n_modes[k])

    @property
    def frame_names(self):
        return ("base",) + tuple(f"tip{k + 1}" for k in range(self.n_links - 1)) + ("tip",)


def _links(layout, params, q, foreshortening=True):
    """Per link: origin o (2,), root angle φ, the node positions r(x_g) (N_QUAD, 2), the tip position and the
    tip tangent angle φ + w̄' (Bonaventura eq. 126-129, module docstring)."""
    L, base = params["length"], params["base"]
    o = q[:2] if layout.mobile_base else base[:2]
    phi = base[2]
    out = []
    for k, n in enumerate(layout.n_modes):
        phi = phi + q[layout.angle_index(k)]
        tab = mode_tables(n)
        qf = q[layout.modal_slice(k)]
        xi = jnp.asarray(tab.xi, dtype=q.dtype)
        w = jnp.asarray(tab.sigma, dtype=q.dtype) @ qf                                  # Bonaventura eq. 126
        u = -0.5 * jnp.einsum("gij,i,j->g", jnp.asarray(tab.S, dtype=q.dtype), qf, qf) / L[k]   # Bonaventura eq. 129
        w_tip = jnp.asarray(tab.tip, dtype=q.dtype) @ qf                                # Bonaventura eq. 128
        slope_tip = jnp.asarray(tab.tip_slope, dtype=q.dtype) @ qf / L[k]
        u_tip = -0.5 * qf @ jnp.asarray(tab.tip_S, dtype=q.dtype) @ qf / L[k]
        if not foreshortening:
            u_tip = jnp.zeros_like(u_tip)
        R = rot_z(phi)[:2, :2]
        nodes = o + (jnp.stack([L[k] * xi + u, w], axis=-1) @ R.T)
        tip = o + R @ jnp.stack([L[k] + u_tip, w_tip])
        out.append((o, phi, nodes, tip, phi + slope_tip))
        o = tip
    return out


def _mass_positions(layout, params, q):
    """Positions (P, 2) of the mass points: every link's quadrature nodes, then the tip mass."""
    links = _links(layout, params, q)
    return jnp.concatenate([nodes for (_, _, nodes, _, _) in links] + [links[-1][3][None]])


def _point_masses(layout, params, dtype):
    """Masses (P,) of the points of :func:`_mass_positions`: ρ L w_g per node, then the tip mass."""
    masses = [params["rho"][k] * params["length"][k] * jnp.asarray(mode_tables(n).w, dtype=dtype)
              for k, n in enumerate(layout.n_modes)]
    return jnp.concatenate(masses + [jnp.reshape(params["tip_mass"], (1,)).astype(dtype)])


@dataclasses.dataclass(frozen=True)
class ChainMassMatrix:
    """H(q) = Σ m_g J_gᵀ J_g over the quadrature points and the tip mass (kinetic energy ½ Σ m_g |ṙ_g|²)."""
    layout: ChainLayout

    def __call__(self, params, q):
        J = jax.jacfwd(lambda x: _mass_positions(self.layout, params, x))(q)           # (P, 2, nv)
        return jnp.einsum("p,pai,paj->ij", _point_masses(self.layout, params, q.dtype), J, J)


@dataclasses.dataclass(frozen=True)
class ChainBias:
    """b(q, v) = Σ m_g J_gᵀ J̇_g v + ∂V/∂q by d'Alembert over the mass points (equal to Lagrange's
    Ḣv − ∂T/∂q + ∂V/∂q for T = ½ Σ m_g |J_g v|², and much cheaper to trace than differentiating H)."""
    layout: ChainLayout

    def __call__(self, params, q, v):
        pos = lambda x: _mass_positions(self.layout, params, x)                        # noqa: E731
        J = jax.jacfwd(pos)(q)
        acc = jax.jvp(lambda x: jax.jvp(pos, (x,), (v,))[1], (q,), (v,))[1]           # J̇ v at every point
        m = _point_masses(self.layout, params, q.dtype)
        return jnp.einsum("p,pai,pa->i", m, J, acc) + jax.grad(lambda x: ChainPotential(self.layout)(params, x))(q)


@dataclasses.dataclass(frozen=True)
class ChainPotential:
    """V(q) = ½ Σ_k (EI_k / L_k³) q_fkᵀ K̂ q_fk (Appendix A: a₁₆ = EI ∫σ''σ'' dx) − Σ m_g g·r_g."""
    layout: ChainLayout

    def __call__(self, params, q):
        V = 0.0
        for k, n in enumerate(self.layout.n_modes):
            qf = q[self.layout.modal_slice(k)]
            K = jnp.asarray(mode_tables(n).K, dtype=q.dtype) * params["EI"][k] / params["length"][k] ** 3
            V = V + 0.5 * qf @ K @ qf
        pos, m = _mass_positions(self.layout, params, q), _point_masses(self.layout, params, q.dtype)
        return V - jnp.sum(m * (pos @ params["gravity"]))


@dataclasses.dataclass(frozen=True)
class ChainMomentum:
    """Spatial momentum [angular about the world origin; linear], world axes, of the mass points (the kinetic
    energy's ½ Σ m_g |ṙ_g|²): Σ m_g [r_g × ṙ_g; ṙ_g], in the plane (only the angular z and linear x, y rows)."""
    layout: ChainLayout

    def __call__(self, params, q, v):
        r, rd = jax.jvp(lambda x: _mass_positions(self.layout, params, x), (q,), (v,))
        m = _point_masses(self.layout, params, q.dtype)
        angular = jnp.sum(m * (r[:, 0] * rd[:, 1] - r[:, 1] * rd[:, 0]))
        linear = jnp.einsum("p,pa->a", m, rd)
        zero = jnp.zeros_like(angular)
        return jnp.stack([zero, zero, angular, linear[0], linear[1], zero])


def _frame(angle, p2):
    return rot_z(angle), jnp.concatenate([p2, jnp.zeros((1,), p2.dtype)])


@dataclasses.dataclass(frozen=True)
class ChainPoints:
    """Placements of the operational points "base", "tip1" … "tip" (module docstring; ``kinematics``)."""
    layout: ChainLayout

    def __call__(self, params, q):
        links = _links(self.layout, params, q, foreshortening=self.layout.kinematics == "second_order")
        frames = [_frame(links[0][1], links[0][0])] + [_frame(a, tip) for (_, _, _, tip, a) in links]
        return jnp.stack([R for R, _ in frames]), jnp.stack([p for _, p in frames])


@dataclasses.dataclass(frozen=True)
class ChainFirstOrderJacobians:
    """Case 2 of Ch. 8.1 (module docstring): the second-order points' Jacobian J₃ truncated at first order in
    the modal coordinates, J = J₃(q_θ, 0) + ∂J₃/∂q_f · q_f (one forward-mode derivative along q_f)."""
    layout: ChainLayout

    def __call__(self, params, q):
        full = ChainPoints(dataclasses.replace(self.layout, kinematics="second_order"))
        rigid = self.layout.n_base + self.layout.n_links
        q_f = jnp.zeros_like(q).at[rigid:].set(q[rigid:])
        J0, dJ = jax.jvp(lambda x: placement_jacobians(full, params, x), (q - q_f,), (q_f,))
        return J0 + dJ


def _positive(name, value, n):
    a = np.broadcast_to(np.asarray(value, dtype=float), (n,)) if np.ndim(value) == 0 else np.asarray(value, float)
    if a.shape != (n,):
        raise FlexibleModelError(f"flexible_chain: {name} must be a scalar or have one value per link ({n}), "
                                 f"got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise FlexibleModelError(f"flexible_chain: {name} must be finite and positive, got {a.tolist()}")
    return a


def flexible_chain(lengths, n_modes=2, rho=TABLE_22["rho"], EI=TABLE_22["EI"], tip_mass=0.0,
                   base=(0.0, 0.0, 0.0), mobile_base=False, gravity=(0.0, 0.0), kinematics="second_order"):
    """A planar chain of flexible links (module docstring) as an :class:`EnergyModule`.

    ``lengths``: one per link; ``n_modes``: an int for every link or one per link (0 = rigid link);
    ``rho``, ``EI``: scalars or one per link (default: Table 22); ``tip_mass``: point mass at the last tip;
    ``base``: (x, y, angle) of the fixed base (for a mobile base: its angle offset only, the position being
    q[0:2]); ``gravity``: in-plane (g_x, g_y); ``kinematics``: "second_order", "first_order_jacobian" or
    "first_order" (the contact points' kinematics level, Ch. 8.1 cases 3, 2, 1; module docstring). The
    parameters ``module.params`` (length, rho, EI, tip_mass, base, gravity) are a pytree: ``jax.grad``/``jax.vmap`` over EI, ρ or the lengths work on them directly."""
    lengths = np.atleast_1d(np.asarray(lengths, dtype=float))
    n = lengths.shape[0]
    if lengths.ndim != 1 or n == 0:
        raise FlexibleModelError(f"flexible_chain: lengths must be a non-empty list, one per link, got {lengths}")
    lengths = _positive("lengths", lengths, n)
    modes = (int(n_modes),) * n if np.ndim(n_modes) == 0 else tuple(int(m) for m in n_modes)
    if len(modes) != n or any(not 0 <= m <= MAX_MODES for m in modes):
        raise FlexibleModelError(f"flexible_chain: n_modes must be an int or one per link ({n}), each in "
                                 f"0..{MAX_MODES}, got {n_modes}")
    if kinematics not in KINEMATICS:
        raise FlexibleModelError(f"flexible_chain: kinematics must be one of {KINEMATICS}, got {kinematics!r}")
    if not (np.isfinite(tip_mass) and tip_mass >= 0):
        raise FlexibleModelError(f"flexible_chain: tip_mass must be finite and >= 0, got {tip_mass}")
    base = np.asarray(base, dtype=float)
    if base.shape != (3,):
        raise FlexibleModelError(f"flexible_chain: base must be (x, y, angle), got {base.tolist()}")
    layout = ChainLayout(modes, bool(mobile_base), kinematics)
    params = dict(length=jnp.asarray(lengths), rho=jnp.asarray(_positive("rho", rho, n)),
                  EI=jnp.asarray(_positive("EI", EI, n)), tip_mass=jnp.asarray(float(tip_mass)),
                  base=jnp.asarray(base), gravity=jnp.asarray(np.asarray(gravity, dtype=float).reshape(2)))
    jacobians = ChainFirstOrderJacobians(layout) if kinematics == "first_order_jacobian" else None
    return EnergyModule(params, ChainMassMatrix(layout), ChainPotential(layout), ChainPoints(layout),
                        layout.frame_names, nv=layout.nv, planar=True, bias=ChainBias(layout), jacobians=jacobians,
                        momentum=ChainMomentum(layout))


def chain_layout(module):
    """The :class:`ChainLayout` of a module built by :func:`flexible_chain` (TypeError otherwise)."""
    fn = getattr(module, "mass_matrix", None)
    if not isinstance(fn, ChainMassMatrix):
        raise TypeError(f"chain_layout: {type(module).__name__} is not a flexible chain (flexible_chain)")
    return fn.layout


def motor_map(module):
    """B (n_motors, nv): generalized forces Q = Bᵀ τ of the joint motors τ (Appendix A: τ_f1 = −σ̄₁' τ₂).

    Motor 1 drives q₁ (the base joint; for a mobile base, the torque τ_θ on the link's angle); motor k ≥ 2
    drives the relative angle θ_kʳ = q_k − w̄'_{k−1} between link k−1's tip and link k (Bonaventura eq. 130), so its
    torque also does work on link k−1's modes through the tip slope."""
    layout = chain_layout(module)
    L = module.params["length"]
    B = jnp.zeros((layout.n_links, layout.nv), dtype=L.dtype)
    for k in range(layout.n_links):
        B = B.at[k, layout.angle_index(k)].set(1.0)
        if k > 0:
            sl = layout.modal_slice(k - 1)
            slope = jnp.asarray(mode_tables(layout.n_modes[k - 1]).tip_slope, dtype=L.dtype) / L[k - 1]
            B = B.at[k, sl].set(-slope)
    return B


def _motor_sinusoid(t, q, v, params):
    A, T, B = params
    return (A * jnp.sin(2.0 * jnp.pi * t / T)) @ B


def motor_torques(name, module_name, module, amplitudes, periods):
    """Bonaventura eq. 134 on the motors of a flexible chain: τᵢ = Aᵢ sin(2π t / Tᵢ), mapped to generalized
    forces by :func:`motor_map` (a :class:`~mrds_jax.system.forces.JointTorque` on ``module_name``)."""
    B = motor_map(module)
    A = jnp.asarray(amplitudes, dtype=B.dtype)
    if A.shape != (B.shape[0],):
        raise FlexibleModelError(f"motor_torques {name!r}: need one amplitude per motor ({B.shape[0]}), "
                                 f"got {np.shape(amplitudes)}")
    T = jnp.broadcast_to(jnp.asarray(periods, dtype=B.dtype), A.shape)
    return JointTorque(params=(A, T, B), name=name, module=module_name, fn=_motor_sinusoid)


def link_outputs(module, q):
    """The thesis' plotted outputs at q (Appendix C): absolute link angles φ_k (rad), the position of "tip"
    (2,), and the transverse tip deflections w̄_k (one per link)."""
    layout = chain_layout(module)
    links = _links(layout, module.params, q)
    angles = jnp.stack([phi for (_, phi, _, _, _) in links])
    defl = jnp.stack([jnp.asarray(mode_tables(n).tip, dtype=q.dtype) @ q[layout.modal_slice(k)]
                      for k, n in enumerate(layout.n_modes)])
    return angles, links[-1][3], defl


def beam_shapes(module, q, exaggerate=1.0):
    """Points along every link for drawing, (n_links, N_QUAD + 2, 2): root, quadrature nodes, tip; the modal
    coordinates scaled by ``exaggerate`` (deflections are millimetres on metre-long links)."""
    layout = chain_layout(module)
    scale = jnp.ones(layout.nv, q.dtype).at[layout.n_base + layout.n_links:].set(exaggerate)
    links = _links(layout, module.params, q * scale)
    return jnp.stack([jnp.concatenate([o[None], nodes, tip[None]]) for (o, _, nodes, tip, _) in links])


def elastic_energy(module, q):
    """½ Σ EI ∫ w''² dx (the module's potential energy without gravity)."""
    return ChainPotential(chain_layout(module))(dict(module.params, gravity=jnp.zeros(2, q.dtype)), q)
