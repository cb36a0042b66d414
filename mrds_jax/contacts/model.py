"""The general joint model of a contact (Bonaventura Ch. 3.3, Bonaventura eq. 22-26, Table 1; Roberson & Schwertassek).

A contact joins an operational point **E** to an operational point **P**. Each side is either a module's
operational point ``(module, frame)`` or the fixed ground (``None``; the ground frame's placement in the
world is the array ``ground_R, ground_p``, a pytree leaf, so it can be differentiated or randomised).

The contact model acts only on the *standard pair* of Ch. 4.1 (notes §2.1):
  ᴱẋ_EP   motion of P relative to E, components in frame E, linear part = velocity of P's origin;
  ᴱᴾF_EP  force exerted by E on P, components in frame E, torque reference point at P.
Both are ordered [angular; linear] in mrds_jax (Bonaventura prints [linear; angular]; notes §0.2: the
constraint-space quantities Fᶜ, Fᵘ, ẋᶜ, ẍᶜ, Bᶜ, yᶜ are unchanged by the reordering).

  (22)  ᴱẋ_EP = φᵘ ẋᵘ + φᶜ ẋᶜ
  (23)  ᴱẍ_EP = φᵘ ẍᵘ + φᶜ ẍᶜ + φ̇ᵘ ẋᵘ + φ̇ᶜ ẋᶜ
  (24-25)  ψᵀ φ = 1 with φ = [φᵘ φᶜ], ψ = [ψᵘ ψᶜ]     (checked when the contact is built)
  (26)  ᴱᴾF_EP = ψᵘ Fᵘ + ψᶜ Fᶜ

``d`` (the task dimension) is 6 for spatial contacts and 3 for planar ones (task space [ω_z; v_x; v_y],
Bonaventura footnote 19; notes §5).

Table 1 data per contact: the bases (constant arrays here; ``phidot`` terms are zero for constant modes),
``excitation`` — an optional static function ``t -> (ẋᶜ, ẍᶜ)`` for kinematically excited constrained
modes (locked modes when ``None``), and ``applied`` — an optional static function ``t -> Fᵘ`` for known
free-direction forces (Class I, e.g. an actuated joint torque; zero when ``None``).

Variable modes (universal joint, higher pairs): ``modes`` — an optional static function
``(contact, ᴱR_P, ᴱr_EP) -> (φᵘ, φᶜ, ψᵘ, ψᶜ)`` of the relative configuration; the stored bases are then
the modes at the reference configuration (ᴱR_P = 1, ᴱr_EP = 0), and φ̇ enters Bonaventura eq. 85/90 through
:func:`~mrds_jax.contacts.variable.contact_modes`.
"""
from typing import Callable, Optional

import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, static
from ..validation import InputError

GROUND = None  # a side given as ``None`` (or the string "ground") is the fixed ground


class ContactError(InputError):
    """Bad contact description; the message names the contact."""


@pytree_dataclass
class Contact:
    """One contact (general joint) between operational points E and P: see the module docstring."""
    phi_u: jnp.ndarray      # (d, d - n_c) free modes φᵘ, frame E
    phi_c: jnp.ndarray      # (d, n_c) constrained modes φᶜ, frame E
    psi_u: jnp.ndarray      # (d, d - n_c) dual basis ψᵘ (forces in the free directions)
    psi_c: jnp.ndarray      # (d, n_c) dual basis ψᶜ (constraint forces)
    ground_R: jnp.ndarray   # (3, 3) placement of the ground frame in the world (if a side is ground)
    ground_p: jnp.ndarray   # (3,)
    name: str = static()
    kind: str = static()
    E: Optional[tuple] = static()   # (module key, frame name) or None for the ground
    P: Optional[tuple] = static()
    excitation: Optional[Callable] = static(default=None)  # t -> (ẋᶜ, ẍᶜ), each (n_c,)
    applied: Optional[Callable] = static(default=None)     # t -> Fᵘ, (d - n_c,)
    modes: Optional[Callable] = static(default=None)       # (contact, ᴱR_P, ᴱr_EP) -> (φᵘ, φᶜ, ψᵘ, ψᶜ)

    @property
    def dim(self):
        """Task dimension d (6 spatial, 3 planar)."""
        return self.phi_c.shape[0]

    @property
    def n_c(self):
        """Number of constrained directions n_c."""
        return self.phi_c.shape[1]

    @property
    def n_u(self):
        return self.phi_u.shape[1]

    @property
    def planar(self):
        return self.dim == 3

    def constraint_velocity_and_acceleration(self, t, dtype):
        """(ẋᶜ, ẍᶜ) at time t: zeros for locked modes (Table 1)."""
        if self.excitation is None:
            z = jnp.zeros(self.n_c, dtype=dtype)
            return z, z
        xd, xdd = self.excitation(t)
        return jnp.asarray(xd, dtype=dtype).reshape(self.n_c), jnp.asarray(xdd, dtype=dtype).reshape(self.n_c)

    def free_force(self, t, dtype):
        """Fᵘ at time t (Class I: zero or a known function of time)."""
        if self.applied is None:
            return jnp.zeros(self.n_u, dtype=dtype)
        return jnp.asarray(self.applied(t), dtype=dtype).reshape(self.n_u)


def _side(side, which, name):
    if side is None or (isinstance(side, str) and side == "ground"):
        return None
    if isinstance(side, (tuple, list)) and len(side) == 2 and isinstance(side[1], (str, int)):
        return (side[0], side[1])
    raise ContactError(f"contact {name!r}: side {which} must be (module, operational point) or None/'ground' "
                       f"for the fixed ground, got {side!r}")


def _as_matrix(x, d, name, label):
    a = np.asarray(x, dtype=float)
    if a.ndim == 1 and a.size == d:
        a = a[:, None]
    if a.size == 0:
        a = np.zeros((d, 0))
    if a.ndim != 2 or a.shape[0] != d:
        raise ContactError(f"contact {name!r}: {label} must have {d} rows (task dimension), got shape {a.shape}")
    return a


def dual_basis(phi_u, phi_c):
    """ψ = φ⁻ᵀ (Bonaventura eq. 24), split as (ψᵘ, ψᶜ); numpy, at build time."""
    phi = np.concatenate([phi_u, phi_c], axis=1)
    psi = np.linalg.inv(phi).T
    n_u = phi_u.shape[1]
    return psi[:, :n_u], psi[:, n_u:]


def check_dual(name, phi_u, phi_c, psi_u, psi_c, tol=1e-9):
    """Raise ContactError naming the contact unless [φᵘ φᶜ] is a basis and ψᵀφ = 1 (Bonaventura eq. 24-25)."""
    phi = np.concatenate([phi_u, phi_c], axis=1)
    psi = np.concatenate([psi_u, psi_c], axis=1)
    d = phi.shape[0]
    if phi.shape != (d, d) or psi.shape != (d, d):
        raise ContactError(f"contact {name!r}: φᵘ, φᶜ must have {d} columns together (got {phi.shape[1]}), "
                           f"and ψᵘ, ψᶜ the same shapes as φᵘ, φᶜ (got {psi_u.shape}, {psi_c.shape})")
    if not (np.all(np.isfinite(phi)) and np.all(np.isfinite(psi))):
        raise ContactError(f"contact {name!r}: the mode bases contain non-finite values")
    s = np.linalg.svd(phi, compute_uv=False)
    if s.size and s.min() <= 1e-12 * max(1.0, s.max()):
        raise ContactError(f"contact {name!r}: [φᵘ φᶜ] is not a basis of the {d}-dimensional task space "
                           f"(singular values {s})")
    err = np.abs(psi.T @ phi - np.eye(d)).max()
    if err > tol:
        raise ContactError(f"contact {name!r}: the bases are not dual: max |ψᵀφ − 1| = {err:.3g} "
                           f"(Bonaventura eq. 24-25 need ψᵀφ = 1; omit ψ to have it computed as φ⁻ᵀ)")


def make_contact(name, E, P, phi_u, phi_c, psi_u=None, psi_c=None, kind="custom", ground_rotation=None,
                 ground_position=None, excitation=None, applied=None, dim=None, dtype=None, modes=None):
    """Build a :class:`Contact` from its free and constrained modes (frame E, [angular; linear]).

    ``psi_u, psi_c`` default to the dual basis φ⁻ᵀ; when given, ψᵀφ = 1 is checked (Bonaventura eq. 24-25) and a
    ``ContactError`` naming the contact is raised otherwise. ``E``/``P``: ``(module, frame)`` or ``None``
    for the fixed ground, whose frame sits at ``ground_rotation, ground_position`` in the world.
    """
    if not isinstance(name, str) or not name:
        raise ContactError(f"a contact needs a non-empty name, got {name!r}")
    E, P = _side(E, "E", name), _side(P, "P", name)
    if E is None and P is None:
        raise ContactError(f"contact {name!r}: both sides are the ground")
    if dim is None:
        dim = np.asarray(phi_c if np.size(phi_c) else phi_u, dtype=float).shape[0]
    if dim not in (3, 6):
        raise ContactError(f"contact {name!r}: task dimension must be 6 (spatial) or 3 (planar), got {dim}")
    phi_u = _as_matrix(phi_u, dim, name, "φᵘ")
    phi_c = _as_matrix(phi_c, dim, name, "φᶜ")
    if phi_u.shape[1] + phi_c.shape[1] != dim:
        raise ContactError(f"contact {name!r}: φᵘ and φᶜ have {phi_u.shape[1]} + {phi_c.shape[1]} columns, "
                           f"need {dim} together")
    if psi_u is None and psi_c is None:
        try:
            psi_u, psi_c = dual_basis(phi_u, phi_c)
        except np.linalg.LinAlgError:
            raise ContactError(f"contact {name!r}: [φᵘ φᶜ] is singular, not a basis") from None
    elif psi_u is None or psi_c is None:
        raise ContactError(f"contact {name!r}: give both ψᵘ and ψᶜ, or neither")
    psi_u = _as_matrix(psi_u, dim, name, "ψᵘ")
    psi_c = _as_matrix(psi_c, dim, name, "ψᶜ")
    check_dual(name, phi_u, phi_c, psi_u, psi_c)
    R = np.eye(3) if ground_rotation is None else np.asarray(ground_rotation, dtype=float)
    p = np.zeros(3) if ground_position is None else np.asarray(ground_position, dtype=float)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ContactError(f"contact {name!r}: ground_rotation is not a rotation matrix")
    if p.shape != (3,):
        raise ContactError(f"contact {name!r}: ground_position must have shape (3,), got {p.shape}")
    dtype = dtype or jnp.zeros(0).dtype
    arr = lambda x: jnp.asarray(x, dtype=dtype)  # noqa: E731
    return Contact(phi_u=arr(phi_u), phi_c=arr(phi_c), psi_u=arr(psi_u), psi_c=arr(psi_c), ground_R=arr(R),
                   ground_p=arr(p), name=name, kind=kind, E=E, P=P, excitation=excitation, applied=applied,
                   modes=modes)


def validate_contact(contact, tol=1e-9):
    """Re-check a (possibly edited) contact's concrete bases: ψᵀφ = 1 (Bonaventura eq. 24-25)."""
    check_dual(contact.name, *(np.asarray(x) for x in (contact.phi_u, contact.phi_c, contact.psi_u,
                                                        contact.psi_c)), tol=tol)
    return contact
