"""Hard mechanisms for tests and experiments (issue 12), each with a reference computed independently of
mrds_jax: its 1-DOF reduced-coordinate model q = q(θ), integrated by SciPy, with the dynamics from Pinocchio.

* :func:`bennett` — the Bennett linkage: four spatial revolute joints, link lengths a, b, a, b and twists
  α, β, α, β with a / sin α = b / sin β (Bennett 1903). Grübler-Kutzbach: 6·3 − 5·4 = −2 DOF; its real
  mobility is 1, so the loop Jacobian (5 x 3 here: one 3-joint chain from the ground closed by a revolute to
  the ground) has rank 2 everywhere and Bᶜ (5 x 5) is singular everywhere — redundant constraints.
  Closed form (DH convention T = Rz(θᵢ) Tx(aᵢ) Rx(αᵢ), checked in the tests by the closure residual):
  tan(θ₁/2) tan(θ₂/2) = sin((β+α)/2) / sin((β−α)/2), θ₃ = −θ₁ (:func:`bennett_q`).
* :func:`bricard` — a line-symmetric Bricard linkage (Bricard 1927; Baker, "An analysis of the Bricard linkages",
  Mech. Mach. Theory 15, 1980): six spatial revolute joints with a_{i+3} = a_i, α_{i+3} = α_i, d_{i+3} = d_i in
  DH form; Grübler-Kutzbach 6·5 − 5·6 = 0 DOF, real mobility 1 on the branch θ_{i+3} = θ_i. Built as a 5-link
  module closed by a spatial revolute to the ground (n_c = 5): one loop equation redundant, Bᶜ singular
  everywhere on the branch. Its reference (:class:`BricardPinocchio`) integrates θ₁ alone with Pinocchio's
  ``constraintDynamics`` (the closure as two 3-D point contacts on the sixth axis) on the loop solved by Newton.
* :func:`parallelogram_chain` — N planar parallelogram four-bars in series sharing their rockers; at the
  all-aligned configuration (θ = 0 or π) every loop is singular at once (mobility jumps from 1 to N+1).

Reduced model (both): with q = q(θ), q̇ = q'θ̇, q̈ = q'θ̈ + q''θ̇², projecting the open tree's equations
M q̈ + C q̇ + g = τ + Jᵀλ onto q' (the constraint forces do no work along q', J q' = 0):
    q'ᵀ M q' θ̈ = −q'ᵀ RNEA(q, q'θ̇, q''θ̇²)          (RNEA with q̈ = q''θ̇² gives M q''θ̇² + C q̇ + g)
RNEA and M are Pinocchio's; q', q'' are derivatives of the closed-form q(θ) by jax.jacfwd (of NumPy-like
formulas only, no mrds_jax code).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
from scipy.integrate import solve_ivp

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.model import ModuleBuilder
from mrds_jax.export import to_pinocchio


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def dh_chain(bld, dh, seed, mass_step):
    """Links l1 … lN of a serial chain of revolute joints about z, link i + 1 at Tz(dᵢ) Tx(aᵢ) Rx(αᵢ) of link i
    for ``dh`` = ((aᵢ, αᵢ, dᵢ), …) (DH form), each of mass 0.6 + ``mass_step``·i, its centre of mass half-way
    along aᵢ, 0.01 (i − (N − 1)/2) m sideways and 2 cm up, a slender inertia perturbed by ``seed``'s draws.
    Returns the placement (position, rotation) of the tip of link N in it."""
    rng = np.random.default_rng(seed)
    parent, pos, rot = None, (0.0, 0.0, 0.0), None
    for i, (a, alpha, d) in enumerate(dh):
        name = f"l{i + 1}"
        inertia = np.diag([2e-3, 8e-3, 8e-3]) + 1e-3 * rng.uniform(-0.2, 0.2, (3, 3))
        bld.add_link(name, parent=parent, joint="revolute", axis=(0, 0, 1), position=pos, rotation=rot,
                     mass=0.6 + mass_step * i, com=(0.5 * a, 0.01 * (i - 0.5 * (len(dh) - 1)), 0.02),
                     inertia=0.5 * (inertia + inertia.T))
        parent, pos, rot = name, (a, 0.0, d), rot_x(alpha)
    return pos, rot


# ----------------------------------------------------------------------------- Bennett linkage
BENNETT = dict(a=0.3, alpha=0.5, beta=1.1)


def bennett_params(a=BENNETT["a"], alpha=BENNETT["alpha"], beta=BENNETT["beta"]):
    return a, a * np.sin(beta) / np.sin(alpha), alpha, beta


def bennett(gravity=(0.0, 9.81, 0.0)):
    """The Bennett linkage as one 3-link module (joints 1-3, DH links 1-3) closed by a spatial revolute
    contact between the tip of link 3 (the frame of joint 4) and a ground frame X₄⁻¹ = (Tx(b) Rx(β))⁻¹."""
    a, b, alpha, beta = bennett_params()
    bld = ModuleBuilder(gravity=gravity)
    pos, rot = dh_chain(bld, ((a, alpha, 0.0), (b, beta, 0.0), (a, alpha, 0.0)), seed=12, mass_step=0.2)
    bld.add_frame("tip", "l3", position=pos, rotation=rot)
    module = bld.build()
    contact = C.revolute("joint4", None, ("bennett", "tip"), axis=(0, 0, 1), ground_rotation=rot_x(-beta),
                         ground_position=(-b, 0.0, 0.0))
    return S.build_system({"bennett": module}, [contact])


def bennett_q(theta):
    """Joint angles (θ₁, θ₂, θ₃) on the Bennett linkage's motion for θ₁ = θ (one assembly branch):
    tan(θ₁/2) tan(θ₂/2) = sin((β+α)/2) / sin((β−α)/2) and θ₃ = −θ₁ (Bennett's closure in this DH
    convention). jnp so that jax.jacfwd gives q' and q''."""
    _, _, alpha, beta = bennett_params()
    K = np.sin(0.5 * (beta + alpha)) / np.sin(0.5 * (beta - alpha))
    th2 = 2.0 * jnp.arctan2(K * jnp.cos(0.5 * theta), jnp.sin(0.5 * theta))
    return jnp.stack([theta, th2, -theta])


# ----------------------------------------------------------------------------- reduced-coordinate reference
def reduced_reference(pin_model, q_of_theta, theta0, dtheta0, t_eval, rtol=1e-13, atol=1e-13):
    """Integrate the reduced model (module docstring) by SciPy's DOP853 from (θ₀, θ̇₀) and return (θ, θ̇) at
    ``t_eval`` and the functions θ ↦ q(θ), θ ↦ q'(θ) as NumPy.

    1 DOF (scalar θ₀): q' is a vector, θ and θ̇ are 1-D arrays over ``t_eval``. k DOF (θ₀ of length k):
    Q = ∂q/∂θ (n x k), q̈ = Q θ̈ + (∂Q/∂θ · θ̇) θ̇ (the second term by jax.jvp of θ ↦ Q(θ) θ̇ along θ̇),
    Qᵀ M Q θ̈ = −Qᵀ RNEA(q, Q θ̇, (∂Q/∂θ · θ̇) θ̇); θ and θ̇ are (k, len(t_eval))."""
    scalar = np.ndim(theta0) == 0
    q_vec = (lambda th: q_of_theta(th[0])) if scalar else q_of_theta
    k = 1 if scalar else len(theta0)
    data = pin_model.createData()
    q_fn = jax.jit(q_vec)
    Q_fn = jax.jit(jax.jacfwd(q_vec))
    quad_fn = jax.jit(lambda th, w: jax.jvp(lambda x: jax.jacfwd(q_vec)(x) @ w, (th,), (w,))[1])

    def rhs(_, x):
        th, w = x[:k], x[k:]
        q, Q, quad = (np.asarray(v, dtype=float) for v in (q_fn(th), Q_fn(th), quad_fn(th, w)))
        M = pin.crba(pin_model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        r = pin.rnea(pin_model, data, q, Q @ w, quad)
        return np.concatenate([w, -np.linalg.solve(Q.T @ M @ Q, Q.T @ r)])

    x0 = np.concatenate([np.atleast_1d(theta0), np.atleast_1d(dtheta0)]).astype(float)
    sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), x0, method="DOP853", t_eval=t_eval, rtol=rtol, atol=atol)
    assert sol.success, sol.message
    if scalar:
        return sol.y[0], sol.y[1], lambda th: np.asarray(q_fn(jnp.atleast_1d(th)), dtype=float), \
            lambda th: np.asarray(Q_fn(jnp.atleast_1d(th))[:, 0], dtype=float)
    return sol.y[:k], sol.y[k:], lambda th: np.asarray(q_fn(jnp.asarray(th)), dtype=float), \
        lambda th: np.asarray(Q_fn(jnp.asarray(th)), dtype=float)


@functools.lru_cache(maxsize=None)
def bennett_pin():
    return to_pinocchio(bennett().modules[0]).model


# ----------------------------------------------------------------------------- Bricard linkage
BRICARD = dict(a=(0.3, 0.4, 0.35), alpha=(0.6, 1.1, 0.8), d=(0.05, -0.1, 0.08))


def bricard_dh():
    """DH parameters (a, α, d) of the six links, line-symmetric: link i + 3 repeats link i."""
    return tuple(tuple(BRICARD[k][i % 3] for k in ("a", "alpha", "d")) for i in range(6))


def _dh_inverse(a, alpha, d):
    """(R, p) of (Tz(d) Tx(a) Rx(α))⁻¹."""
    R = rot_x(alpha)
    return R.T, -R.T @ np.array([a, 0.0, d])


def bricard(gravity=(0.0, 9.81, 0.0)):
    """The Bricard linkage as one 5-link module (joints 1-5, DH links 1-5: link i + 1 sits at Tz(dᵢ) Tx(aᵢ)
    Rx(αᵢ) of link i) closed by a spatial revolute contact "joint6" between the tip of link 5 (the frame of
    joint 6) and the ground frame (Tz(d₆) Tx(a₆) Rx(α₆))⁻¹. The frame "tip_z", one metre along the sixth axis
    from "tip", is the second point of the Pinocchio twin's closure."""
    dh = bricard_dh()
    bld = ModuleBuilder(gravity=gravity)
    pos, rot = dh_chain(bld, dh[:5], seed=21, mass_step=0.1)
    bld.add_frame("tip", "l5", position=pos, rotation=rot)
    bld.add_frame("tip_z", "l5", position=np.asarray(pos) + rot[:, 2], rotation=rot)
    R_g, p_g = _dh_inverse(*dh[5])
    contact = C.revolute("joint6", None, ("bricard", "tip"), axis=(0, 0, 1), ground_rotation=R_g,
                         ground_position=p_g)
    return S.build_system({"bricard": bld.build()}, [contact])


def bricard_q(theta1):
    """Joint angles (q₁…q₅) on the mobile branch (q₄ = q₁, q₅ = q₂: the line symmetry) for q₁ = θ₁ ∈ [3.2, 4.1],
    solved by Newton (:meth:`BricardPinocchio.on_loop`) from the branch's shape there."""
    q = bricard_pin().on_loop(theta1, (theta1, -1.75, 1.23, theta1, -1.75))
    assert np.abs(q[3:] - q[:2]).max() < 1e-12, q          # on the line-symmetric branch
    return q


@functools.lru_cache(maxsize=None)
def bricard_pin():
    return BricardPinocchio()


class BricardPinocchio:
    """The Bricard linkage in Pinocchio alone (the module exported by ``to_pinocchio``, which copies joints and
    inertias; nothing else of mrds_jax): the sixth joint as two ``CONTACT_3D`` constraints, "tip" and "tip_z" on
    the ground frame's origin and one metre along its z axis (six rows, rank 4 on the loop: the revolute's five
    equations, one of them redundant, and the second point's own redundant row)."""

    def __init__(self):
        system = bricard()
        self.merged = to_pinocchio(system.modules[0])
        self.model = self.merged.model
        self.data = self.model.createData()
        R_g, p_g = _dh_inverse(*bricard_dh()[5])
        self.targets = (p_g, p_g + R_g[:, 2])
        self.frames = tuple(self.model.getFrameId(f) for f in ("tip", "tip_z"))
        self.cms = [self.merged.constraint("3d", (0, f), (None, pin.SE3(R_g, p))) for f, p in
                    zip(("tip", "tip_z"), self.targets)]
        self.cds = [cm.createData() for cm in self.cms]
        pin.initConstraintDynamics(self.model, self.data, self.cms, self.cds)
        self.prox = pin.ProximalSettings(1e-14, 1e-2, 200)   # redundant rows: the proximal (min-norm) solve

    def closure(self, q):
        """The two points' world positions minus their targets (6,)."""
        pin.framesForwardKinematics(self.model, self.data, q)
        return np.concatenate([self.data.oMf[f].translation - p for f, p in zip(self.frames, self.targets)])

    def closure_jacobian(self, q):
        """d closure / dq (6 x 5): the points' linear Jacobians in world axes."""
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        return np.concatenate([pin.getFrameJacobian(self.model, self.data, f, pin.LOCAL_WORLD_ALIGNED)[:3]
                               for f in self.frames])

    def on_loop(self, theta1, guess):
        """q on the loop with q₁ = θ₁: Newton on q₂…q₅ from ``guess`` (least squares, the rows being dependent)."""
        q = np.array(guess, dtype=float)
        q[0] = theta1
        for _ in range(50):
            r = self.closure(q)
            if np.abs(r).max() < 1e-15:
                break
            q[1:] -= np.linalg.lstsq(self.closure_jacobian(q)[:, 1:], r, rcond=None)[0]
        return q

    def tangent(self, q):
        """dq/dθ₁ on the loop: the closure Jacobian's null vector scaled to a unit first entry."""
        n = np.linalg.svd(self.closure_jacobian(q))[2][-1]
        return n / n[0]

    def constraint_dynamics(self, q, v):
        """Pinocchio's ``constraintDynamics`` q̈ (no joint forces)."""
        return pin.constraintDynamics(self.model, self.data, q, v, np.zeros(self.model.nv), self.cms, self.cds,
                                      self.prox).copy()

    def rollout(self, q0, dtheta0, t_eval, rtol=1e-13, atol=1e-13):
        """Coordinate partitioning (Wehage & Haug 1982) on θ₁ = q₁: θ̈₁ = q̈₁ of ``constraintDynamics`` at
        q = on_loop(θ₁), v = tangent(q) θ̇₁; SciPy DOP853 at ``rtol``/``atol``. Returns q (len(t_eval), 5)."""
        guess = [np.array(q0, dtype=float)]

        def rhs(_, x):
            q = guess[0] = self.on_loop(x[0], guess[0])
            return np.array([x[1], self.constraint_dynamics(q, self.tangent(q) * x[1])[0]])

        sol = solve_ivp(rhs, (0.0, float(t_eval[-1])), [q0[0], dtheta0], method="DOP853", t_eval=t_eval,
                        rtol=rtol, atol=atol)
        assert sol.success, sol.message
        out, q = [], np.array(q0, dtype=float)
        for th in sol.y[0]:
            q = self.on_loop(th, q)
            out.append(q)
        return np.array(out)


# ----------------------------------------------------------------------------- parallelogram chain
PARALLELOGRAM = dict(n=3, r=0.4, L=0.5)


def parallelogram_chain(n=PARALLELOGRAM["n"], r=PARALLELOGRAM["r"], L=PARALLELOGRAM["L"], gravity=3.0,
                        rod=(0.5, (1e-3, 2e-3, 2e-3)), bar=(0.8, (1e-3, 4e-3, 4e-3))):
    """N = ``n`` parallelogram four-bars in series (planar, gravity ``gravity`` m/s² along −y, weak so that
    moderate speeds turn the rods over): n + 1 equal rods ("rod0" … "rodN",
    length r) pivoted on the ground at x = 0, L, …, nL, and n couplers (length L) each hinged to the tip of
    rod i and closed on the tip of rod i+1 by a planar revolute contact ("loop1" … "loopN"). 2n + 1 joints,
    2n constraints: mobility 1 (all rods parallel, couplers horizontal), except where every rod lies on the
    ground line (θ = 0 or π): there each loop is singular (Bᶜ loses n of its 2n ranks) and the mobility
    jumps to n + 1. ``rod`` and ``bar``: (mass, principal inertias about the centre of mass, which is
    at the middle of each rod and coupler).

    The IFToMM benchmark A02 ("N-four-bar mechanism") is ``n=40, r=L=1, gravity=9.81`` with 1 kg uniform
    rods and couplers (tests/mbs_benchmarks.py)."""
    bld = ModuleBuilder(planar=True, gravity=(0.0, -gravity, 0.0))
    (rod_m, rod_I), (bar_m, bar_I) = rod, bar
    for i in range(n + 1):             # depth-first link order (rod0, bar0, rod1, …): Pinocchio's convention
        bld.add_link(f"rod{i}", joint="revolute", position=(i * L, 0.0, 0.0), mass=rod_m, com=(0.5 * r, 0.0, 0.0),
                     inertia=rod_I)
        bld.add_frame(f"tip{i}", f"rod{i}", position=(r, 0.0, 0.0))
        if i < n:
            bld.add_link(f"bar{i}", parent=f"rod{i}", joint="revolute", position=(r, 0.0, 0.0), mass=bar_m,
                         com=(0.5 * L, 0.0, 0.0), inertia=bar_I)
            bld.add_frame(f"end{i}", f"bar{i}", position=(L, 0.0, 0.0))
    contacts = [C.planar_revolute(f"loop{i + 1}", ("chain", f"end{i}"), ("chain", f"tip{i + 1}"))
                for i in range(n)]
    return S.build_system({"chain": bld.build()}, contacts)


def parallelogram_q(theta, n=PARALLELOGRAM["n"]):
    """Joint angles on the parallelogram branch: every rod at θ, every coupler at −θ relative to its rod
    (horizontal). Link order of :func:`parallelogram_chain`: rod0, bar0, rod1, bar1, …, rodN."""
    return theta * jnp.asarray([1.0 if k % 2 == 0 else -1.0 for k in range(2 * n + 1)])


@functools.lru_cache(maxsize=None)
def parallelogram_pin():
    return to_pinocchio(parallelogram_chain().modules[0]).model
