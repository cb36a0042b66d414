"""Joint couplings: equality constraints between joint coordinates (MuJoCo's ``<equality joint>`` with two joints,
fixed tendons in ``<equality tendon>``), as joint-space rows of the general path's constraint solve.

A coupling relates two *joint-space measures*, each a fixed linear combination of one-coordinate joints
(revolute, prismatic, screw: q̇ = v there): a joint, u = q_j, or a fixed tendon, u = Σⱼ cⱼ q_j (MuJoCo's tendon
length, ``wrap_prm`` the coefficients). With the reference values u₀, w₀ (MuJoCo: ``qpos0`` of the joints,
``tendon_length0`` of the tendons) and the polynomial P(x) = Σₙ aₙ xⁿ (MuJoCo's ``polycoef``)

    position       g(q) = (u − u₀) − P(w − w₀) = 0                       (without a second measure, P = a₀)
    velocity       G v = u̇ − P'(x) ẇ = 0,          G = ∂u/∂q − P'(x) ∂w/∂q,   x = w − w₀
    acceleration   G q̈ = P''(x) ẇ²                 (Ġ v = −P''(x) ẇ²: the bias of the row)

The rows of all couplings, G (n_J x nv, one block Gₖ per module) and β = P''(x) ẇ², join the contacts'
constraint-space system (MRDS: Bonaventura eq. 87-88, Table 17) as a joint-space row block: the generalized force
Gᵀλ of the couplings moves module k by Hₖ⁻¹Gₖᵀλ, its operational points by Jₖ Hₖ⁻¹ Gₖᵀ λ = Ψₖᵀ Gₖᵀ λ (Ψ of
Bonaventura eq. 75), so (:func:`mrds_jax.system.couplings.coupled_constraint_system`)

    [ Bᶜ   X ] [Fᶜ]   [ yᶜ              ]      X  = ψᶜᵀ Σₖ Aₖ Ψₖᵀ Gₖᵀ     (contact rows seeing the couplings)
    [ Xᵀ   D ] [λ ] = [ β − Σₖ Gₖ q̈ₖᵒᵖᵉⁿ ]      D  = Σₖ Gₖ Hₖ⁻¹ Gₖᵀ

and q̈ₖ = q̈ₖᵒᵖᵉⁿ + Ψₖ Aₖᵀ F_EP + Hₖ⁻¹ Gₖᵀ λ (Bonaventura eq. 74 with the couplings' generalized force). A coupling may join
joints of different modules. The functions here are pure, on one scenario; the joints are resolved to static
(module, q index, v index) triples once, by :func:`mrds_jax.system.build.coupling_dofs` when the system is built.
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, static
from .model import ContactError

COUPLED_KINDS = ("revolute", "prismatic", "screw")   # one-coordinate joints: q̇ = v


class CouplingError(ContactError):
    """Bad joint coupling; the message names the coupling."""


@pytree_dataclass
class JointCoupling:
    """(u − u₀) = P(w − w₀) between two joint-space measures u = Σ coef·q(joints), w = Σ coef2·q(joints2)
    (module docstring). Coefficients, references and polynomial are leaves (differentiable)."""
    coef: jnp.ndarray        # (n1,) coefficients of u
    coef2: jnp.ndarray       # (n2,) coefficients of w (n2 = 0: no second measure, u − u₀ = a₀)
    reference: jnp.ndarray   # (2,) u₀, w₀
    polycoef: jnp.ndarray    # (m,) a₀ … a_{m−1}
    name: str = static()
    joints: tuple = static()    # ((module, joint name), ...) of u
    joints2: tuple = static()   # ((module, joint name), ...) of w
    kind: str = static(default="joint")   # "joint" (u, w single joints) or "tendon"


def _joint_list(joints, coef, name, label):
    joints = tuple(tuple(j) for j in joints)
    if any(len(j) != 2 for j in joints):
        raise CouplingError(f"coupling {name!r}: {label} must be (module, joint) pairs, got {joints}")
    c = np.asarray(coef, dtype=float).reshape(-1)
    if c.shape != (len(joints),) or not np.all(np.isfinite(c)):
        raise CouplingError(f"coupling {name!r}: {label} needs one finite coefficient per joint ({len(joints)}), "
                            f"got {np.asarray(coef)}")
    return joints, c


def make_coupling(name, joints, coef, joints2=(), coef2=(), polycoef=(0.0, 1.0), reference=(0.0, 0.0),
                  kind="joint"):
    """A :class:`JointCoupling`, checked: one coefficient per joint, 1 to 5 finite polynomial coefficients (MuJoCo's
    ``polycoef`` has 5), and without a second measure only a₀ (the other coefficients would multiply nothing)."""
    joints, c1 = _joint_list(joints, coef, name, "joints")
    joints2, c2 = _joint_list(joints2, coef2, name, "joints2")
    if not joints:
        raise CouplingError(f"coupling {name!r}: the first measure has no joint")
    a = np.asarray(polycoef, dtype=float)
    if a.ndim != 1 or not 1 <= a.size <= 5 or not np.all(np.isfinite(a)):
        raise CouplingError(f"coupling {name!r}: polycoef must be 1 to 5 finite numbers (a₀ … a₄), got {a}")
    if not joints2 and np.any(a[1:] != 0):
        raise CouplingError(f"coupling {name!r}: polycoef {a} has non-constant terms but there is no second joint "
                            "or tendon to couple to")
    ref = np.asarray(reference, dtype=float)
    if ref.shape != (2,) or not np.all(np.isfinite(ref)):
        raise CouplingError(f"coupling {name!r}: reference must be (u₀, w₀), two finite numbers, got {ref}")
    return JointCoupling(coef=jnp.asarray(c1), coef2=jnp.asarray(c2), reference=jnp.asarray(ref),
                         polycoef=jnp.asarray(a), name=name, joints=joints, joints2=joints2, kind=kind)


def joint_coupling(name, joint1, joint2=None, polycoef=(0.0, 1.0), reference=(0.0, 0.0)):
    """MuJoCo's ``<equality joint>``: q₁ − q₁₀ = P(q₂ − q₂₀), joints given as (module, joint name); without
    ``joint2``, q₁ − q₁₀ = a₀ (a lock)."""
    return make_coupling(name, (joint1,), (1.0,), () if joint2 is None else (joint2,),
                         () if joint2 is None else (1.0,), polycoef, reference, kind="joint")


def tendon_coupling(name, tendon1, tendon2=None, polycoef=(0.0, 1.0), reference=(0.0, 0.0)):
    """MuJoCo's ``<equality tendon>`` on fixed tendons: L₁ − L₁₀ = P(L₂ − L₂₀), each tendon given as
    ``((module, joint), coef)`` pairs (its length L = Σ coef q)."""
    def split(t):
        t = tuple(t or ())
        return tuple(j for j, _ in t), tuple(c for _, c in t)
    (j1, c1), (j2, c2) = split(tendon1), split(tendon2)
    return make_coupling(name, j1, c1, j2, c2, polycoef, reference, kind="tendon")


# ----------------------------------------------------------------------------------------- evaluation
def polynomial(a, x):
    """(P(x), P'(x), P''(x)) for P(x) = Σₙ aₙ xⁿ (Horner; ``a`` has a static length)."""
    p, dp, ddp = a[-1], jnp.zeros_like(x), jnp.zeros_like(x)
    for an in a[-2::-1]:
        ddp = ddp * x + 2.0 * dp
        dp = dp * x + p
        p = p * x + an
    return p, dp, ddp


def _measure(coef, dofs, xs, which):
    """Σ coef_j xs[k_j][idx_j] (``which`` = 1: positions by q index, 2: velocities by v index); 0 for no joints."""
    terms = [c * xs[d[0]][d[which]] for c, d in zip(coef, dofs)]
    return sum(terms[1:], terms[0]) if terms else jnp.zeros((), dtype=coef.dtype)


class CouplingRow(NamedTuple):
    """One coupling at a state: g, its velocity G v, the bias β = P''(x) ẇ² and G as (module, v index, weight)."""
    position: jnp.ndarray
    velocity: jnp.ndarray
    bias: jnp.ndarray
    entries: tuple


def coupling_row(coupling, dofs, q, v):
    """:class:`CouplingRow` of one coupling at (q, v) (per-module tuples): g = (u − u₀) − P(x), G v = u̇ − P'(x) ẇ,
    β = P''(x) ẇ² (module docstring), G's entries +coefⱼ at u's joints and −P'(x) coef2ⱼ at w's."""
    d1, d2 = dofs
    c = coupling
    u, du = _measure(c.coef, d1, q, 1), _measure(c.coef, d1, v, 2)
    if not d2:
        return CouplingRow(u - c.reference[0] - c.polycoef[0], du, jnp.zeros_like(du),
                           tuple((k, vi, w) for (k, _, vi), w in zip(d1, c.coef)))
    x = _measure(c.coef2, d2, q, 1) - c.reference[1]
    dw = _measure(c.coef2, d2, v, 2)
    P, dP, ddP = polynomial(c.polycoef, x)
    entries = tuple((k, vi, w) for (k, _, vi), w in zip(d1, c.coef)) + \
        tuple((k, vi, -dP * w) for (k, _, vi), w in zip(d2, c.coef2))
    return CouplingRow(u - c.reference[0] - P, du - dP * dw, ddP * dw * dw, entries)


def coupling_matrices(rows, nvs, modules_touched, dtype):
    """Per module k in ``modules_touched`` (static), Gₖ (n_J x nvₖ) assembled from the rows' entries."""
    out = {}
    for k in modules_touched:
        G = jnp.zeros((len(rows), nvs[k]), dtype)
        for r, row in enumerate(rows):
            for kk, vi, w in row.entries:
                if kk == k:
                    G = G.at[r, vi].add(w)
        out[k] = G
    return out
