"""The IFToMM / Universidade da Coruña multibody benchmark library, group A (https://www.iftomm-multibody.org/
benchmark/), built through mrds_jax's public API (ModuleBuilder, contacts, build_system), each with a
reference computed independently of mrds_jax.

* A01 simple pendulum (:func:`a01_pendulum`): a 1 kg point mass on a massless 1 m rod, gravity 9.81 m/s²,
  released from rest with the rod horizontal, 10 s. Modelled as a CLOSED LOOP, not a 1-DOF revolute tree:
  the mass is a planar free body (x, y, φ; its frame at the mass) pinned to the ground 1 m away by a planar
  revolute contact. A free body needs an invertible mass matrix, so the "point" mass carries a rotational
  inertia ``A01["I_c"]`` = 1e-6 kg m² about its centre (the pendulum's inertia about the pivot is then
  1 + 1e-6 kg m²). Reference (:func:`a01_reference`): (mL² + I_c) θ̈ = −m g L cos θ integrated by SciPy
  DOP853 at rtol = atol = 1e-13 — no mrds_jax and no Pinocchio code. (I_c = 1e-6 moves the 10 s motion by
  up to 2.2e-5 rad from the ideal point mass's; a much smaller I_c makes Bᶜ's condition reach the solve's
  relative cut.)
* A02 N-four-bar mechanism (:func:`a02_nfourbar`): N = 40 parallelogram four-bars in a row, every rod and
  coupler 1 m and 1 kg (uniform: I = mL²/12 about the middle), gravity 9.81 m/s², the cranks released
  vertical (θ = π/2) with the couplers moving at 1 m/s (θ̇ = −1 rad/s), 10 s. The mechanism turns over and
  passes its all-aligned singular configuration (θ = 0, π: the mobility jumps from 1 to N + 1) twice per
  turn. Built by tests/hard_mechanisms.py's ``parallelogram_chain``; reference: its 1-DOF reduced model
  (Pinocchio RNEA/CRBA, SciPy DOP853).
* A05 flyball governor (:func:`a05_flyball`), a spatial mechanism with two closed loops and redundant
  closure constraints; our own parameters after the library's layout (the library's A05 also has a spring
  and damper on the sleeve, left out here: a conservative system, so its energy is a check):
  a vertical shaft (revolute z, 2 kg, I = diag(0.05, 0.05, 0.01) kg m² about its centre at z = 0.25 m) with
  two arms hinged at (±d, 0, h), d = 0.05 m, h = 0.5 m, about the horizontal tangential axes; each arm a
  1 kg ball at la = 0.4 m from its hinge (I = 4e-4 kg m² each axis); a light link (0.1 kg, length
  ll = 0.25 m) from the arm at lc = 0.2 m to a sleeve (0.5 kg) sliding on the shaft (prismatic z); each link
  closed on the sleeve at (±d, 0, z_s) by a SPHERICAL contact (3 constraints, the out-of-plane one redundant:
  Grübler 6 − 6 = 0, mobility 2). Gravity 9.81 m/s² along −z. Released at φ = 0.5 rad (arms from the
  vertical) with the shaft spinning at 2π rad/s. Reference: the 2-DOF reduced model (ψ shaft, φ arms),
  closed form q(ψ, φ) (:func:`a05_q`), Pinocchio RNEA/CRBA, SciPy DOP853.
* The Bennett linkage (tests/hard_mechanisms.py): spatial over-constrained 4R loop (Grübler −2, mobility 1).
"""
import functools

import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.export import to_pinocchio
from mrds_jax.model import ModuleBuilder
from hard_mechanisms import parallelogram_chain, parallelogram_q

G = 9.81


# ----------------------------------------------------------------------------- A01 simple pendulum
A01 = dict(m=1.0, L=1.0, I_c=1e-6, theta0=0.0, T=10.0)


def a01_pendulum(m=A01["m"], L=A01["L"], I_c=A01["I_c"]):
    """A01 as a closed loop: the mass is a planar free body (its frame at the mass, angle φ = the rod's angle
    from +x), its frame "pivot" at (−L, 0) pinned to the ground origin by a planar revolute contact."""
    bld = ModuleBuilder(planar=True, gravity=(0.0, -G, 0.0))
    bld.add_link("mass", joint="planar_free", mass=m, inertia=(I_c, I_c, I_c))
    bld.add_frame("pivot", "mass", position=(-L, 0.0, 0.0))
    return S.build_system({"pendulum": bld.build()}, [C.planar_revolute("pin", ("pendulum", "pivot"), None)])


def a01_q(theta, L=A01["L"]):
    """Planar free coordinates (x, y, φ) of the mass with the rod at angle θ from +x."""
    return jnp.stack([L * jnp.cos(theta), L * jnp.sin(theta), theta])


def a01_state(theta0=A01["theta0"], omega0=0.0, L=A01["L"]):
    th = jnp.asarray(theta0, dtype=float)
    v = jnp.stack([-L * jnp.sin(th), L * jnp.cos(th), 1.0]) * omega0
    return S.SystemState((a01_q(th, L),), (v,))


def a01_reference(t_eval, theta0=A01["theta0"], omega0=0.0, m=A01["m"], L=A01["L"], I_c=A01["I_c"]):
    """(θ, θ̇) at ``t_eval`` of (mL² + I_c) θ̈ = −m g L cos θ (SciPy DOP853, 1e-13)."""
    J = m * L * L + I_c
    sol = solve_ivp(lambda _, x: [x[1], -m * G * L * np.cos(x[0]) / J], (0.0, float(t_eval[-1])),
                    [theta0, omega0], method="DOP853", t_eval=t_eval, rtol=1e-13, atol=1e-13)
    assert sol.success, sol.message
    return sol.y[0], sol.y[1]


# ----------------------------------------------------------------------------- A02 N-four-bar
A02 = dict(n=40, length=1.0, mass=1.0, theta0=0.5 * np.pi, omega0=-1.0, T=10.0)


def a02_nfourbar(n=A02["n"], length=A02["length"], mass=A02["mass"]):
    """A02: ``parallelogram_chain`` with rods and couplers of ``length`` and ``mass`` (uniform slender rods:
    I = m l²/12 about the middle, a small axial inertia so that the 3-D inertia is valid)."""
    inertia = (1e-3 * mass * length ** 2, mass * length ** 2 / 12, mass * length ** 2 / 12)
    return parallelogram_chain(n=n, r=length, L=length, gravity=G, rod=(mass, inertia), bar=(mass, inertia))


def a02_state(n=A02["n"], theta0=A02["theta0"], omega0=A02["omega0"]):
    return S.SystemState((parallelogram_q(theta0, n),), (parallelogram_q(1.0, n) * omega0,))


@functools.lru_cache(maxsize=None)
def a02_pin(n=A02["n"]):
    return to_pinocchio(a02_nfourbar(n).modules[0]).model


# ----------------------------------------------------------------------------- A05 flyball governor
A05 = dict(d=0.05, h=0.5, la=0.4, lc=0.2, ll=0.25, phi0=0.5, spin0=2 * np.pi, T=10.0)


def a05_flyball(d=A05["d"], h=A05["h"], la=A05["la"], lc=A05["lc"], ll=A05["ll"]):
    """The flyball governor of the module docstring. Link order (depth-first, Pinocchio's): shaft, arm1,
    link1, arm2, link2, sleeve. Arm k hangs along −z of its frame at angle 0; arm 1's hinge axis is −y
    (positive angle swings it out to +x), arm 2's +y (out to −x)."""
    bld = ModuleBuilder(gravity=(0.0, 0.0, -G))
    bld.add_link("shaft", joint="revolute", axis=(0, 0, 1), mass=2.0, com=(0.0, 0.0, 0.25),
                 inertia=(0.05, 0.05, 0.01))
    for k, (side, axis) in enumerate(((1.0, (0, -1, 0)), (-1.0, (0, 1, 0))), start=1):
        bld.add_link(f"arm{k}", parent="shaft", joint="revolute", axis=axis, position=(side * d, 0.0, h),
                     mass=1.0, com=(0.0, 0.0, -la), inertia=(4e-4, 4e-4, 4e-4))
        bld.add_link(f"link{k}", parent=f"arm{k}", joint="revolute", axis=axis, position=(0.0, 0.0, -lc),
                     mass=0.1, com=(0.0, 0.0, -0.5 * ll), inertia=(0.1 * ll ** 2 / 12, 0.1 * ll ** 2 / 12, 1e-5))
        bld.add_frame(f"end{k}", f"link{k}", position=(0.0, 0.0, -ll))
    bld.add_link("sleeve", parent="shaft", joint="prismatic", axis=(0, 0, 1), mass=0.5,
                 inertia=(2e-3, 2e-3, 2e-3))
    for k, side in ((1, 1.0), (2, -1.0)):
        bld.add_frame(f"collar{k}", "sleeve", position=(side * d, 0.0, 0.0))
    contacts = [C.spherical(f"loop{k}", ("governor", f"collar{k}"), ("governor", f"end{k}")) for k in (1, 2)]
    return S.build_system({"governor": bld.build()}, contacts)


def a05_q(theta, h=A05["h"], lc=A05["lc"], ll=A05["ll"]):
    """Joint coordinates for θ = (ψ, φ): shaft ψ, both arms φ, both links β = −φ − asin(lc sin φ / ll)
    (the link end straight below/above the collar: lc sin φ + ll sin(φ + β) = 0), sleeve height
    z_s = h − lc cos φ − √(ll² − lc² sin² φ)."""
    psi, phi = theta[0], theta[1]
    s = lc * jnp.sin(phi)
    beta = -phi - jnp.arcsin(s / ll)
    z = h - lc * jnp.cos(phi) - jnp.sqrt(ll * ll - s * s)
    return jnp.stack([psi, phi, beta, phi, beta, z])


def a05_state(phi0=A05["phi0"], spin0=A05["spin0"]):
    import jax
    th = jnp.asarray([0.0, phi0])
    return S.SystemState((a05_q(th),), (jax.jacfwd(a05_q)(th) @ jnp.asarray([spin0, 0.0]),))


@functools.lru_cache(maxsize=None)
def a05_pin():
    return to_pinocchio(a05_flyball().modules[0]).model
