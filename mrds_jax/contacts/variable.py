"""State-dependent (variable) contact modes: the φ̇ terms of Bonaventura eq. 23, 85 and 90.

Mode vectors of lower pairs are constant in frame E; those of higher pairs, and of joints whose free
rotations pass through an intermediate body (the universal joint, B §3.3.1: "variable mode vectors ...
as in the case of a universal joint"), depend on the relative configuration of P with respect to E. A
contact with variable modes carries a static function

    modes(contact, ᴱR_P, ᴱr_EP) -> (φᵘ, φᶜ, ψᵘ, ψᶜ)            (all resolved in frame E)

of the relative orientation ᴱR_P = ᴵR_Eᵀ ᴵR_P (Bonaventura eq. 99) and position ᴱr_EP (Bonaventura eq. 97). Its stored arrays
``contact.phi_u`` etc. are the bases at the reference configuration (ᴱR_P = 1, ᴱr_EP = 0); the function
may read them (they stay pytree leaves, so they can be differentiated). ψ must stay dual to φ (ψᵀφ = 1,
Bonaventura eq. 24-25) at every configuration.

φ̇ is the time derivative of the E-frame components (B Table 1). With ᴱω_EP and ᴱṙ_EP the parts of the
standard relative velocity ᴱẋ_EP (Bonaventura eq. 98), the relative configuration moves as
d/dt ᴱR_P = (ᴱω_EP)˜ ᴱR_P and d/dt ᴱr_EP = ᴱṙ_EP, so φ̇ is one forward-mode derivative (``jax.jvp``) of
``modes`` along that tangent — exact, for any mode function. The free-mode rates are ẋᵘ = ψᵘᵀ ᴱẋ_EP
(Bonaventura eq. 101, footnote 26), ẋᶜ the prescribed constrained rates (0 for locked modes), and the term entering
yᵢ of Bonaventura eq. 90 is φ̇ᵘ ẋᵘ + φ̇ᶜ ẋᶜ.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..model.tree import task_slice
from ..spatial import cross, skew
from ..spatial.linalg import matmul


class ContactModes(NamedTuple):
    """A contact's bases at the current state and their rates (frame E, task rows)."""
    phi_u: jnp.ndarray
    phi_c: jnp.ndarray
    psi_u: jnp.ndarray
    psi_c: jnp.ndarray
    phidot_u: jnp.ndarray
    phidot_c: jnp.ndarray
    phidot_term: jnp.ndarray   # φ̇ᵘ ẋᵘ + φ̇ᶜ ẋᶜ (d,), the mode-rate part of yᵢ (Bonaventura eq. 90)


def contact_modes(contact, R_EP, r_EP, xd_EP, xd_c):
    """Bases of ``contact`` at the relative configuration (ᴱR_P, ᴱr_EP) and the φ̇ term of Bonaventura eq. 85/90.

    ``xd_EP``: the 6-D standard relative velocity ᴱẋ_EP = [ᴱω_EP; ᴱṙ_EP] (Bonaventura eq. 98, [angular; linear]);
    ``xd_c``: the prescribed constrained rates ẋᶜ (n_c,). Constant-mode contacts return their stored bases
    and zero rates without any computation.
    """
    rows = task_slice(contact.dim)
    if contact.modes is None:
        z = jnp.zeros(contact.dim, dtype=xd_EP.dtype)
        return ContactModes(contact.phi_u, contact.phi_c, contact.psi_u, contact.psi_c,
                            jnp.zeros_like(contact.phi_u), jnp.zeros_like(contact.phi_c), z)

    def bases(R, r):
        return tuple(contact.modes(contact, R, r))

    tangent = (matmul(skew(xd_EP[:3]), R_EP), xd_EP[3:])
    (pu, pc, su, sc), (dpu, dpc, _, _) = jax.jvp(bases, (R_EP, r_EP), tangent)
    xd_u = matmul(su.T, xd_EP[rows])                                   # Bonaventura eq. 101
    return ContactModes(pu, pc, su, sc, dpu, dpc, matmul(dpu, xd_u) + matmul(dpc, xd_c))


def _cols(*vs):
    return jnp.stack(vs, axis=1)


def universal_modes(contact, R_EP, r_EP):
    """Modes of a universal (Hooke) joint: rotation about a₁ (fixed in E) and about a₂ (fixed in P) free.

    With ᴱR_P = rot(a₁, θ₁) rot(a₂, θ₂), P's axis seen in E is b = ᴱR_P a₂ = rot(a₁, θ₁) a₂, so the free
    angular modes are φᵘ = [[a₁, b]; 0] and the relative angular velocity is a₁θ̇₁ + b θ̇₂. The one
    constrained rotation is about c = a₁ × b and the three translations are locked:
    φᶜ = [[c, 0]; [0, 1₃]]. The dual basis (ψᵀφ = 1) is the reciprocal basis of [a₁ b c]:
    ψᵘ = [[b × c, c × a₁] / |c|²; 0], ψᶜ = [[c / |c|², 0]; [0, 1₃]] — the constraint torque is along c,
    workless for any a₁θ̇₁ + bθ̇₂. Non-orthogonal axes are allowed; the modes are singular when b ∥ a₁.
    a₁, a₂ are read from the stored reference modes (``contact.phi_u[:3]``).
    """
    a1, a2 = contact.phi_u[:3, 0], contact.phi_u[:3, 1]
    b = matmul(R_EP, a2)
    c = cross(a1, b)
    cc = matmul(c, c)
    z = jnp.zeros(3, dtype=b.dtype)
    ang = lambda v: jnp.concatenate([v, z])  # noqa: E731
    lin = [jnp.concatenate([z, e]) for e in jnp.eye(3, dtype=b.dtype)]
    phi_u = _cols(ang(a1), ang(b))
    phi_c = _cols(ang(c), *lin)
    psi_u = _cols(ang(cross(b, c) / cc), ang(cross(c, a1) / cc))
    psi_c = _cols(ang(c / cc), *lin)
    return phi_u, phi_c, psi_u, psi_c
