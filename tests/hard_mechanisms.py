"""Hard mechanisms for tests and experiments (issue 12), each with a reference computed independently of
mrds_jax: its 1-DOF reduced-coordinate model q = q(θ), integrated by SciPy, with the dynamics from Pinocchio.

* :func:`bennett` — the Bennett linkage: four spatial revolute joints, link lengths a, b, a, b and twists
  α, β, α, β with a / sin α = b / sin β (Bennett 1903). Grübler-Kutzbach: 6·3 − 5·4 = −2 DOF; its real
  mobility is 1, so the loop Jacobian (5 x 3 here: one 3-joint chain from the ground closed by a revolute to
  the ground) has rank 2 everywhere and Bᶜ (5 x 5) is singular everywhere — redundant constraints.
  Closed form (DH convention T = Rz(θᵢ) Tx(aᵢ) Rx(αᵢ), checked in the tests by the closure residual):
  tan(θ₁/2) tan(θ₂/2) = sin((β+α)/2) / sin((β−α)/2), θ₃ = −θ₁ (:func:`bennett_q`).
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


# ----------------------------------------------------------------------------- Bennett linkage
BENNETT = dict(a=0.3, alpha=0.5, beta=1.1)


def bennett_params(a=BENNETT["a"], alpha=BENNETT["alpha"], beta=BENNETT["beta"]):
    return a, a * np.sin(beta) / np.sin(alpha), alpha, beta


def bennett(gravity=(0.0, 9.81, 0.0)):
    """The Bennett linkage as one 3-link module (joints 1-3, DH links 1-3) closed by a spatial revolute
    contact between the tip of link 3 (the frame of joint 4) and a ground frame X₄⁻¹ = (Tx(b) Rx(β))⁻¹."""
    a, b, alpha, beta = bennett_params()
    lengths, twists = (a, b, a), (alpha, beta, alpha)
    bld = ModuleBuilder(gravity=gravity)
    rng = np.random.default_rng(12)
    parent, pos, rot = None, (0.0, 0.0, 0.0), None
    for i in range(3):
        name = f"l{i + 1}"
        inertia = np.diag([2e-3, 8e-3, 8e-3]) + 1e-3 * rng.uniform(-0.2, 0.2, (3, 3))
        bld.add_link(name, parent=parent, joint="revolute", axis=(0, 0, 1), position=pos, rotation=rot,
                     mass=0.6 + 0.2 * i, com=(0.5 * lengths[i], 0.01 * (i - 1), 0.02),
                     inertia=0.5 * (inertia + inertia.T))
        parent, pos, rot = name, (lengths[i], 0.0, 0.0), rot_x(twists[i])
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
