"""Lilly & Orin's simple closed chain: the fast path of the MRDS machinery for a reference member carried
by m chains (Lilly & Orin eq. 8-48 and their Table 1; docs/algorithm_notes.md §8).

A *simple closed chain* is a reference member (body 0: the object held by several arms — Type 0 — or the
body of a legged vehicle — Type 1) and m chains, each touching the reference member through exactly one
general joint at its tip. Removing the reference member opens every loop, so the constraint forces of a
chain depend only on its own tip and on the reference member's acceleration a₀. Lilly & Orin eliminate
the tip forces chain by chain and solve one N₀ x N₀ system for a₀ (6 x 6 for a rigid reference member),
instead of MRDS's n_C x n_C system in all constraint-force components (notes §8.4: both must agree; the
tests check 1e-10).

Mapping onto an MRDS :class:`~mrds_jax.system.System` (notes §8.4). Chain k is a module with exactly one
contact, to the reference module; the chain tip is one side of that contact and a reference point the
other (Lilly's f_k is ᴱᴾF_EP when the chain is the E side, as in every example here). The chain's base may
be the ground (fixed-base chain: Type 0 arms, Stewart legs) or any support of known motion. Type 1 legs
are chains rooted at the support surface: Lilly's unpowered foot contact is the first general joint of
the chain (a point contact = a spherical root joint at the foot), and the actuated joint at the body is
the tip contact, its motor torques the known free-direction forces Fᵘ (Lilly's h_k). Modules with no
contact are integrated open-chain.

Per contact, with ℜ = ᴵℜ_E, S = ᴵS_EP (Bonaventura eq. 20) and the operators of :func:`.constraint_space.contact_kinematics`
(T_E = −ℜᵀS, T_P = ℜᵀ; T_c for the chain's side, T_r for the reference's), the relative acceleration of
the standard pair (Bonaventura eq. 80) is affine in a₀ and in the contact force F_k = ᴱᴾF_EP:

    ᴱẍ_EP = X_k a₀ + c_k + L_k F_k,     X_k = T_r J_r   (Lilly's X₀ᵏ: reference motion seen at the tip)
                                        L_k = T_c Λ_k⁻¹ T_cᵀ          (the chain's Λ_k⁻¹ seen at the tip)
                                        c_k = T_c ẍ_kᵒᵖᵉⁿ + T_r J̇_r v₀ − ℜᵀζ   (Bonaventura eq. 81, 83 with a₀ = 0)

Table 1, as implemented (ψ, the dual basis, replaces Lilly's orthonormal φᶜ so that non-orthogonal modes
such as the screw are exact, notes §8.4; n_c ≤ 6 per tip, any N_k):
  Step 1 (per chain, identical chains stacked and ``vmap``ped): q̈ₖᵒᵖᵉⁿ, ẍₖᵒᵖᵉⁿ, Ω_k = H_k⁻¹J_kᵀ and
     Λ_k⁻¹ (Lilly & Orin eq. 9-12; :func:`~mrds_jax.dynamics.interface.module_terms`, the module interface: any module type).
  Step 2: α_k = ẍᶜ + ψᶜᵀ(φ̇ᵘẋᵘ + φ̇ᶜẋᶜ) (the constrained relative acceleration, with the mode-rate terms
     of Bonaventura eq. 85 that Lilly & Orin eq. 23 omits, notes §8.4);
     S_k = α_k − ψᶜᵀ(c_k + L_k ψᵘ Fᵘ)                 (Lilly & Orin eq. 35)
     M_k⁻¹ = ψᶜᵀ L_k ψᶜ  (n_c x n_c), one Cholesky;  [M_k S_k | M_k ψᶜᵀ X_k]     (Lilly & Orin eq. 36-38)
     P_k = ψᵘ Fᵘ + ψᶜ M_k S_k,   R_k = ψᶜ M_k ψᶜᵀ X_k                              (Lilly & Orin eq. 42)
     [H₀ + Σ X_kᵀ R_k] a₀ = Σ X_kᵀ P_k + τ₀ − C₀ − G₀                              (Lilly & Orin eq. 45/46)
     — H₀ = I₀ and C₀ + G₀ = b₀ − g₀ for a rigid reference member; the matrix is symmetric positive
     definite: one Cholesky.
  Step 3: F_k = P_k − R_k a₀ (Lilly & Orin eq. 47);  Fᶜ_k = M_k S_k − M_k ψᶜᵀ X_k a₀ (Lilly & Orin eq. 38).
  Step 4: q̈_k = q̈ₖᵒᵖᵉⁿ + Ω_k T_cᵀ F_k (Lilly & Orin eq. 48: Lilly's −Ω_k f_k with f_k the force on the reference
     member, moved to the tip's torque reference point by T_cᵀ).
Tips with fewer constrained directions (the Stewart legs' spherical tips, n_c = 3; a point contact) are
handled exactly: only the n_c x n_c block ψᶜᵀ L_k ψᶜ is factorised, so a chain with N_k < 6 (whose 6 x 6
Λ_k⁻¹ is singular) is fine as long as its tip can move in the constrained directions.

As computed (:func:`_chain_step1_2`), the d x d operators L_k, X_k, P_k, R_k are not formed: everything is
projected onto ψᶜ first (W_c = T_cᵀψᶜ, W_r = T_rᵀψᶜ), which gives the same numbers with per-chain work
O(N_k n_c) — the operation count Lilly & Orin's Tables 2-3 assume.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..contacts.variable import contact_modes
from ..dynamics.interface import module_terms, open_chain_acceleration, reference_terms
from ..pytree import replace
from .build import SystemDescriptionError, module_taus
from .constraint_space import contact_kinematics
from .stabilisation import pose_error, relative_pose
from ..model.tree import task_slice
from ..spatial.linalg import cho_solve, cholesky, matmul
from ..validation import system_state


class ChainStructure(NamedTuple):
    """Static structure of a simple closed chain, derived once from a system's connectivity."""
    reference: int       # module index of the reference member
    chains: tuple        # per chain: (module, contact, chain is E side, reference slot)
    groups: tuple        # tuples of chain positions that are stacked and vmapped together
    free: tuple          # modules with no contact (open chains)


class ChainDynamics(NamedTuple):
    """Result of :func:`lilly_forward_dynamics` (per-module and per-contact orders of the system)."""
    qdd: tuple                  # per module: q̈ₖ (Lilly & Orin eq. 48; the reference member's entry is a₀)
    F_c: tuple                  # per contact: Fᶜ (n_c,) (Lilly & Orin eq. 38 with a₀)
    F_EP: tuple                 # per contact: ᴱᴾF_EP (d,), by E on P, frame E, at P (Lilly & Orin eq. 47)
    a0: jnp.ndarray             # reference member's q̈ (its body acceleration for a free rigid body)
    K: jnp.ndarray              # H₀ + Σ X_kᵀ R_k, the coefficient of Lilly & Orin eq. 45/46
    rhs: jnp.ndarray            # Σ X_kᵀ P_k + τ₀ − C₀ − G₀, its right-hand side
    constraint_velocity: tuple  # per contact: Φ_v = ψᶜᵀ ᴱẋ_EP − ẋᶜ (Bonaventura eq. 105)
    min_pivot: jnp.ndarray = None  # smallest squared Cholesky pivot / largest diagonal over the M_k⁻¹ and K solves


def chain_structure(system, reference):
    """Check that ``system`` is a simple closed chain around the module ``reference`` (name or index) and
    return its :class:`ChainStructure` (static; cached). Raises :class:`~mrds_jax.system.SystemDescriptionError`
    naming the offending contact or module."""
    return _chain_structure(system.connectivity, system.contact_names, tuple(c.modes for c in system.contacts),
                            reference)


@functools.lru_cache(maxsize=None)
def _chain_structure(conn, contact_names, mode_fns, reference):
    names = conn.module_names
    if isinstance(reference, str):
        if reference not in names:
            raise SystemDescriptionError(f"simple closed chain: no module named {reference!r}; modules are {list(names)}")
        ref = names.index(reference)
    else:
        ref = int(reference)
    per_module = [[] for _ in names]
    chains = []
    for i, (mE, _, mP, sP) in enumerate(conn.sides):
        label = f"simple closed chain: contact {contact_names[i]!r}"
        if (mE == ref) == (mP == ref):
            why = (f"joins the reference member {names[ref]!r} to itself" if mE == ref
                   else f"does not touch the reference member {names[ref]!r}")
            raise SystemDescriptionError(f"{label} {why}: every contact must join one chain tip to the reference member "
                              "(use the general path, mrds_jax.system.forward_dynamics)")
        chain, is_E = (mP, False) if mE == ref else (mE, True)
        if chain < 0:
            raise SystemDescriptionError(f"{label} joins the reference member {names[ref]!r} to the ground; a simple closed "
                              "chain needs a chain (module) between them")
        ref_slot = conn.sides[i][1] if mE == ref else sP
        per_module[chain].append(i)
        chains.append((chain, i, is_E, ref_slot))
    for k, cs in enumerate(per_module):
        if k != ref and len(cs) > 1:
            raise SystemDescriptionError(f"simple closed chain: module {names[k]!r} has {len(cs)} contacts "
                              f"({[contact_names[i] for i in cs]}); each chain touches the reference member "
                              "through exactly one")
    # stack chains whose modules are identical (Connectivity.groups) and whose contacts share n_c and side
    group_of = {k: g for g, grp in enumerate(conn.groups) for k in grp}
    groups = {}
    for pos, (k, i, is_E, _) in enumerate(chains):
        groups.setdefault((group_of[k], conn.n_c[i], mode_fns[i], is_E), []).append(pos)
    free = tuple(k for k in range(len(names)) if k != ref and not per_module[k])
    return ChainStructure(ref, tuple(chains), tuple(tuple(g) for g in groups.values()), free)


def simple_closed_chain_reference(system):
    """The reference member (module index) when ``system`` is a simple closed chain that Lilly & Orin's
    algorithm solves exactly, else None. Static (from the connectivity), cached.

    Conditions: every contact joins one chain module to one common module (the reference member), each chain
    touches it through exactly one contact, and every chain has at least as many joint velocities as its
    contact has constrained directions (nvₖ ≥ n_c: otherwise M_k⁻¹ = ψᶜᵀ Λ_k⁻¹ ψᶜ of Lilly & Orin eq. 36 is singular at
    every configuration, e.g. a 2-DOF leg on a spherical joint). The general path handles everything else."""
    return _simple_closed_chain_reference(system.connectivity, system.contact_names,
                                          tuple(c.modes for c in system.contacts),
                                          tuple(m.nv for m in system.modules))


@functools.lru_cache(maxsize=None)
def _simple_closed_chain_reference(conn, contact_names, mode_fns, nvs):
    if not conn.sides:
        return None
    touched = [set(k for k in (s[0], s[2]) if k >= 0) for s in conn.sides]
    common = set.intersection(*touched)
    if len(common) != 1:
        return None
    ref = common.pop()
    try:
        st = _chain_structure(conn, contact_names, mode_fns, ref)
    except SystemDescriptionError:
        return None
    if any(nvs[k] < conn.n_c[i] for k, i, _, _ in st.chains):
        return None
    return ref


def lilly_stabilisation_problem(system, stabilisation):
    """Why Lilly & Orin's path cannot apply ``stabilisation`` (a string), or "" when it can: it applies
    Baumgarte stabilisation with scalar gains (concrete or traced) on systems without excited contacts; the
    PD suppression of Bonaventura eq. 104, per-direction gain arrays and position targets need the general path."""
    if stabilisation is None:
        return ""
    if np.ndim(stabilisation.baumgarte_alpha) or np.ndim(stabilisation.baumgarte_beta):
        return "Baumgarte gains per constrained direction (arrays)"
    for g in (stabilisation.pd_kp, stabilisation.pd_kv):
        if np.ndim(g) or isinstance(g, jax.core.Tracer) or float(g) != 0.0:
            return "PD constraint-violation suppression (Bonaventura eq. 104)"
    if stabilisation.position_targets or any(c.excitation is not None for c in system.contacts):
        return "kinematically excited contacts (position targets)"
    return ""


def _spd_solve_with_pivot(A, B):
    """(A⁻¹ B, min(diag L)² / max diag A) for a symmetric positive-definite A = L Lᵀ (no LAPACK): the solve
    and a cheap inverse-condition estimate of it."""
    L = cholesky(A)
    d = jnp.diagonal(L)
    ratio = jnp.min(d * d) / jnp.maximum(jnp.max(jnp.diagonal(A)), jnp.finfo(A.dtype).tiny)
    return cho_solve(L, B), ratio


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _chain_step1_2(module, q, v, tau, contact, ref_pt, xd_c, xdd_c, F_u, is_E, point, rows, method, gains=None):
    """Table 1 Steps 1-2 for one chain (vmapped over identical chains), in the contact's constrained subspace.

    Lilly's d x d operators (L_k = T_c Λ_k⁻¹ T_cᵀ, X₀ᵏ = T_r J_r, P_k, R_k of Lilly & Orin eq. 42) only ever meet ψᶜ, ψᵘFᵘ or
    each other, so they are never formed: with W_c = T_cᵀ ψᶜ and W_r = T_rᵀ ψᶜ (ψᶜ seen at the chain tip and
    at the reference point, d x n_c) and the known free-direction force u = ψᵘFᵘ moved there (u_c = T_cᵀ u,
    u_r = T_rᵀ u),
        M_k⁻¹ = ψᶜᵀ L_k ψᶜ = W_cᵀ Λ_k⁻¹ W_c                         (Lilly & Orin eq. 36)
        S_k = α_k − ψᶜᵀ c_k − W_cᵀ Λ_k⁻¹ u_c                        (Lilly & Orin eq. 35)
        ψᶜᵀ X₀ᵏ = W_rᵀ J_r                                         (n_c x N₀)
        X₀ᵏᵀ P_k = J_rᵀ (u_r + W_r M_k S_k),  X₀ᵏᵀ R_k = (ψᶜᵀX₀ᵏ)ᵀ M_k ψᶜᵀX₀ᵏ   (the sums of Lilly & Orin eq. 45/46)
    and Steps 3-4 need only Fᶜ_k = M_k S_k − M_k ψᶜᵀ X₀ᵏ a₀ (Lilly & Orin eq. 38), F_k = u + ψᶜ Fᶜ_k (Lilly & Orin eq. 47) and
    Ω_k T_cᵀ F_k = Ψ_k (u_c + W_c Fᶜ_k) (Lilly & Orin eq. 48): per chain O(N_k n_c) work instead of d x d products.
    ``gains`` = (α, β) of Baumgarte stabilisation (scalars, :mod:`.stabilisation`) or None: α_k gets
    −2α Φ_v − β² Φ_p, exactly as ẍᶜ does in the general path's yᶜ."""
    mt = module_terms(module, q, v, tau, (point,), method)                      # Step 1, Lilly & Orin eq. 9-12
    R_r, p_r, xd_r, bias_r, J_r = ref_pt
    chain_side = (mt.R[0], mt.p[0], mt.xd[0], mt.xdd_open[0])
    ref_side = (R_r, p_r, xd_r, bias_r)
    side_E, side_P = (chain_side, ref_side) if is_E else (ref_side, chain_side)
    T_E, T_P, xd6, c6 = contact_kinematics(contact, side_E, side_P)           # Bonaventura eq. 80-83 at a₀ = 0
    T_c, T_r = (T_E, T_P) if is_E else (T_P, T_E)
    T_c, T_r = T_c[rows, rows], T_r[rows, rows]
    R_EP, r_EP = relative_pose(side_E, side_P)                               # Bonaventura eq. 97, 99
    m = contact_modes(contact, R_EP, r_EP, xd6, xd_c)
    W_c, W_r = matmul(T_c.T, m.psi_c), matmul(T_r.T, m.psi_c)                # d x n_c
    u = matmul(m.psi_u, F_u)                                                  # ψᵘ Fᵘ (d,)
    u_c, u_r = matmul(T_c.T, u), matmul(T_r.T, u)
    LW = operational_inverse_inertia_times(mt, W_c)                           # Λ_k⁻¹ W_c (d x n_c)
    alpha = xdd_c + matmul(m.psi_c.T, m.phidot_term)                          # constrained α (Bonaventura eq. 85)
    phi_v = matmul(m.psi_c.T, xd6[rows]) - xd_c                               # Bonaventura eq. 105
    if gains is not None:                                                     # Baumgarte, as in yᶜ (Bonaventura eq. 89)
        phi_p = matmul(m.psi_c.T, pose_error(contact, R_EP, r_EP))
        alpha = alpha - 2.0 * gains[0] * phi_v - gains[1] ** 2 * phi_p
    S = alpha - matmul(m.psi_c.T, c6[rows]) - matmul(LW.T, u_c)              # Lilly & Orin eq. 35
    Xc = matmul(W_r.T, J_r)                                                   # ψᶜᵀ X₀ᵏ (n_c x N₀)
    Minv = matmul(W_c.T, LW)
    MS_MX, pivot = _spd_solve_with_pivot(Minv, jnp.concatenate([S[:, None], Xc], axis=1))   # M_k [S_k | ψᶜᵀX₀ᵏ], Lilly & Orin eq. 36-38
    MS, MX = MS_MX[:, 0], MS_MX[:, 1:]
    return dict(XtP=matmul(J_r.T, u_r + matmul(W_r, MS)), XtR=matmul(Xc.T, MX), MS=MS, MX=MX, phi_v=phi_v, pivot=pivot,
                u=u, psi_c=m.psi_c, qdd_open=mt.qdd_open, Psi_u=matmul(mt.Psi, u_c), Psi_W=matmul(mt.Psi, W_c))


def operational_inverse_inertia_times(t, x):
    """Λ⁻¹ x (Bonaventura eq. 69-70) for a module's Step 2 terms ``t`` and a stacked point vector or matrix ``x``
    (n·d leading rows): J (Ψ x) where the factors are given and that is cheaper, else the formed Λ⁻¹."""
    nv, nd, n_cols = t.Psi.shape[0], t.Psi.shape[1], (x.shape[1] if x.ndim > 1 else 1)
    if _factored(t, formed=nd * nd * n_cols, factored=2 * nv * nd * n_cols):
        return matmul(t.J, matmul(t.Psi, x))
    return matmul(t.Lam_inv, x)


def _factored(t, formed, factored):
    """True when the module's terms ``t`` give J and a product with Λ⁻¹ = J Ψ costs fewer multiplications in
    factored form (``factored``) than with Λ⁻¹ formed (n·d·n·d·nv to form it, plus ``formed``)."""
    if getattr(t, "J", None) is None:
        return False
    nd, nv = t.Psi.shape[1], t.Psi.shape[0]
    return factored < nd * nd * nv + formed


def lilly_forward_dynamics(system, state, tau=None, t=0.0, reference=None, method="direct", baumgarte=None):
    """Closed-chain forward dynamics of a simple closed chain by Lilly & Orin's algorithm (Table 1).

    ``system``: an MRDS :class:`~mrds_jax.system.System` that is a simple closed chain around the module
    ``reference`` (name or index; static; default: the module that every contact touches). ``state``,
    ``tau``, ``t``, ``method``: as for :func:`~mrds_jax.system.forward_dynamics`, whose answers this
    reproduces. ``baumgarte``: None or the scalar gains (α, β) of Baumgarte stabilisation (the part of a
    :class:`~mrds_jax.system.stabilisation.Stabilisation` this path applies, :func:`lilly_stabilisation_problem`;
    contacts without excitation). Returns :class:`ChainDynamics`. See the module
    docstring for the equations.
    """
    system_state(system, state, "lilly_forward_dynamics")
    conn = system.connectivity
    if reference is None:
        touched = [set(k for k in (s[0], s[2]) if k >= 0) for s in conn.sides]
        common = set.intersection(*touched) if touched else set()
        if len(common) != 1:
            raise SystemDescriptionError("simple closed chain: name the reference member (reference=...); "
                              f"the contacts share the modules {sorted(common)}")
        reference = common.pop()
    st = chain_structure(system, reference)
    ref = st.reference
    for k, i, _, _ in st.chains:
        if system.modules[k].nv < conn.n_c[i]:
            raise SystemDescriptionError(f"simple closed chain: chain {conn.module_names[k]!r} has {system.modules[k].nv} joint "
                              f"velocities for the {conn.n_c[i]} constrained directions of contact "
                              f"{system.contact_names[i]!r}: M_k⁻¹ of Lilly & Orin eq. 36 is singular; use another reference "
                              "member or the general path")
    gains = baumgarte
    if gains is not None and any(c.excitation is not None for c in system.contacts):
        raise SystemDescriptionError("Lilly & Orin's path: Baumgarte stabilisation of kinematically excited contacts needs "
                          "their position targets; use the general path")
    d = conn.dim
    rows = task_slice(d)
    dtype = state.q[0].dtype
    taus = module_taus(system, tau, dtype)
    ref_terms = reference_terms(system.modules[ref], state.q[ref], state.v[ref], conn.points[ref])
    ref_pts = (ref_terms.R, ref_terms.p, ref_terms.xd, ref_terms.xdd_bias, ref_terms.J)

    group_outs = []
    for group in st.groups:
        ks = [st.chains[g][0] for g in group]
        cs = [system.contacts[st.chains[g][1]] for g in group]
        is_E = st.chains[group[0]][2]
        point = conn.points[ks[0]][0]
        slots = np.array([st.chains[g][3] for g in group])
        arrays = _stack([(c.phi_u, c.phi_c, c.psi_u, c.psi_c, c.ground_R, c.ground_p) for c in cs])
        exc = [c.constraint_velocity_and_acceleration(t, dtype) for c in cs]
        F_u = jnp.stack([c.free_force(t, dtype) for c in cs])

        def one(module, q, v, tq, arr, rp, xc, xxc, fu, template=cs[0], is_E=is_E, point=point):
            c = replace(template, phi_u=arr[0], phi_c=arr[1], psi_u=arr[2], psi_c=arr[3], ground_R=arr[4],
                        ground_p=arr[5])
            return _chain_step1_2(module, q, v, tq, c, rp, xc, xxc, fu, is_E, point, rows, method, gains)

        group_outs.append(jax.vmap(one)(
            _stack([system.modules[k] for k in ks]), jnp.stack([state.q[k] for k in ks]),
            jnp.stack([state.v[k] for k in ks]), jnp.stack([taus[k] for k in ks]), arrays,
            tuple(x[slots] for x in ref_pts), jnp.stack([e[0] for e in exc]), jnp.stack([e[1] for e in exc]), F_u))

    # Step 2 (reference member): Lilly & Orin eq. 45/46, one Cholesky of the symmetric positive-definite N₀ x N₀ matrix
    K = ref_terms.H + sum(o["XtR"].sum(axis=0) for o in group_outs)
    rhs = taus[ref] - ref_terms.bias + sum(o["XtP"].sum(axis=0) for o in group_outs)
    a0, pivot = _spd_solve_with_pivot(K, rhs[:, None])
    a0 = a0[:, 0]
    for o in group_outs:
        pivot = jnp.minimum(pivot, jnp.min(o["pivot"]))

    # Steps 3-4 (per chain, stacked): tip forces (Lilly & Orin eq. 47), constraint components (Lilly & Orin eq. 38), q̈ (Lilly & Orin eq. 48)
    qdd = [None] * len(system.modules)
    F_EP, F_c, phi_v = ([None] * len(system.contacts) for _ in range(3))
    qdd[ref] = a0
    for group, o in zip(st.groups, group_outs):
        Fc = o["MS"] - matmul(o["MX"], a0)                                               # Lilly & Orin eq. 38
        F = o["u"] + matmul(o["psi_c"], Fc[:, :, None])[:, :, 0]                          # Lilly & Orin eq. 47
        q_dd = o["qdd_open"] + o["Psi_u"] + matmul(o["Psi_W"], Fc[:, :, None])[:, :, 0]   # Lilly & Orin eq. 48
        for j, g in enumerate(group):
            k, i = st.chains[g][0], st.chains[g][1]
            qdd[k], F_EP[i], F_c[i], phi_v[i] = q_dd[j], F[j], Fc[j], o["phi_v"][j]
    for k in st.free:
        qdd[k] = open_chain_acceleration(system.modules[k], state.q[k], state.v[k], taus[k])
    return ChainDynamics(tuple(qdd), tuple(F_c), tuple(F_EP), a0, K, rhs, tuple(phi_v), pivot)

