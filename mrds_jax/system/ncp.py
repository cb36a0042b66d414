"""The constraint problem of one velocity-level time step: a nonlinear complementarity problem (NCP) over one
Delassus matrix, solved by ADMM with the De Saxcé correction, and its derivative at the solution.

Unknowns are the impulses λ of all rows of the step (:mod:`.timestepping` builds them); the post-step constraint
velocities are σ = G λ + g, with G = J H⁻¹ Jᵀ the Delassus matrix (Bonaventura's Bᶜ of Table 17 is its block of
loop rows) and g the constraint velocities at the free velocity plus drift terms. The rows come in a static
order, :class:`RowLayout`:

* ``n_bilateral`` rows of equalities (loops, joint couplings, grasps that are switched on): λ free, σ = 0;
* ``n_unilateral`` one-sided rows (joint limits): 0 ≤ λ ⊥ σ ≥ 0;
* ``n_contacts`` frictional contacts of three rows each, [n, t₁, t₂] (normal first): Coulomb's law as the
  De Saxcé-Feng complementarity (De Saxcé & Feng 1998; Acary & Brogliato 2008, §3.9),
  K_μ ∋ λ ⊥ σ̃ ∈ K_μ*,  σ̃ = σ + μ‖σ_t‖ e_n,  K_μ = {‖λ_t‖ ≤ μ λ_n},  K_μ* = {μ‖σ_t‖ ≤ σ_n}.
  It gives λ = 0 when the contact opens (σ_n > 0), σ = 0 when it sticks and λ on the cone's boundary opposite to a
  sliding velocity when it slides — exact Coulomb friction, not a convex relaxation (σ_n = 0 while sliding: no
  spurious lift-off).

Rows can be switched off per step (``active``): an inactive row's impulse is 0 and it takes no part in the solve
(separated contact slots far from touching, grasps switched off, unreached limits), without changing any shape.

**Solver** (:func:`solve_ncp`), by default semi-smooth Newton on the NCP's natural map (:func:`semismooth_newton`:
proximal-point Newton steps beside active-set steps of the iterate's modes, a batched line search, and a change of
one row's mode where a trip stalls), ADMM (below) from its iterate where it has not converged within its trips;
``NCPSettings(method="admm")`` for ADMM alone: ADMM on min ½λᵀGλ + (g + s)ᵀλ over λ ∈ K with the De Saxcé shift s = μ‖σ_t‖e_n
updated at every iteration (the fixed point of Carpentier et al., "From Compliant to Rigid Contact Simulation: a
Unified and Efficient Approach", RSS 2024, the scheme of Pinocchio's ``ADMMConstraintSolver``):

    x ← (G + R + ηI)⁻¹ (−(g + s) + R (z − u) + η x),   z ← Π_K(x + u),   u ← u + x − z,

R = ρ on the one-sided and contact rows and 0 on the bilateral ones (which the linear step solves exactly, up to
the proximal weight η that keeps redundant loops solvable), Π_K the projection onto the product of the cones.
Stages (:class:`NCPSettings`), each one inversion of G + R + ηI (Gauss-Jordan,
:func:`~mrds_jax.spatial.linalg.spd_inverse`: m rank-1 updates, which compile to a few hundred operations where an
unrolled Cholesky factor and its substitutions take thousands; formed once, so that an iteration is a
matrix-vector product), and iterations within a stage, both iterated to a
tolerance with caps (``lax.while_loop``: under ``vmap`` the loop runs until every scenario computed together has
converged, MuJoCo Warp's and Kamino's per-world exit); between stages ρ is rebalanced by the ratio of the primal
and dual residuals (Boyd et al. 2011, §3.4.1), and a stage ends early when they drift apart by 10× (Pinocchio's
spectral rule's trigger). Warm start from the previous step's λ and, for the scaled dual, from its constraint
velocities on the rows that carry an impulse (u₀ = −σ̃(λ₀)/ρ: a solved problem is a fixed point at iteration 0).
The warm start and each stage's last iterate are polished (OSQP's solution polishing, Stellato et al. 2020, §5.2):
with the modes they show fixed, the sticking rows' linear system (:func:`polish_modes`) and, for the warm start and
sliding contacts too, Newton on the mode conditions (:func:`newton_polish`, ``NCPSettings.sliding_polish``); a
polish that meets the tolerance is the answer, so a step whose contacts keep their modes — standing, and sliding on
(a cube down an incline: 13 ADMM iterations a step on average before, 0 after its first steps) — costs no
iteration. Fixed shapes: the solve batches
under ``vmap`` and runs on a GPU; no LAPACK call (:mod:`mrds_jax.spatial.linalg`).

**Residuals** (:func:`ncp_residuals`), in impulse-velocity units, reported per step: primal = the largest
violation of σ's constraints (|σ| on bilateral rows, max(−σ, 0) on one-sided rows, the distance of σ̃ from K_μ*
on contacts), dual = the distance of λ from K (0 for the returned λ, which is projected; before projection it
measures ADMM's consensus, reported as max diag G · ‖x − z‖∞ in velocity units), complementarity = max over rows/cones of |λᵀσ̃|.

**Derivative** (:func:`solve_ncp` is a ``jax.custom_jvp``): implicit differentiation at the solution with each
row's mode fixed: inactive or separated rows keep dλ = 0, sticking contacts and active bilateral and one-sided
rows keep dσ = 0, and a sliding contact keeps dσ_n = 0 and λ_t = −μ λ_n σ_t/‖σ_t‖ linearised. That is one masked
linear system (:func:`_mode_jacobian_system`), solved with a small Tikhonov term so that redundant rows
(four feet, redundant loops) give the minimum-norm dλ. At a mode switch (λ_n = 0 = σ_n, or ‖σ_t‖ = 0 on the
cone's boundary) the derivative is the one-sided derivative of the mode the solver's tolerances pick (never NaN):
the rollout is piecewise smooth and its derivative jumps there.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import validation
from ..batching import run_if
from ..spatial.linalg import cho_solve, cholesky, matmul, pivoted_solve, spd_inverse
from ..spatial.dense import damped_lstsq

POLISH_STEPS = 2  # range-restricted Newton steps of polish_modes
MIN_STAGE = 10   # iterations before a stage may end because the primal and dual residuals drifted 10× apart (fewer
                 # spend the stages' budget of factorisations too soon: tests/test_contact_ncp.py's problem 12)


class RowLayout(NamedTuple):
    """Static row structure of a step's constraint problem (module docstring); hashable."""
    n_bilateral: int = 0
    n_unilateral: int = 0
    n_contacts: int = 0

    @property
    def size(self):
        return self.n_bilateral + self.n_unilateral + 3 * self.n_contacts

    @property
    def contact_start(self):
        return self.n_bilateral + self.n_unilateral


class NCPSettings(NamedTuple):
    """The settings of :func:`solve_ncp`. ``method``: ``"newton"`` (the default: :func:`semismooth_newton`, at most
    ``newton_iterations`` trips, its proximal weight ``proximal`` × max|F| floored at ``regularisation`` (relative
    to max diag G), then ADMM from its iterate where it has not converged) or ``"admm"`` (ADMM alone). Either way
    the loops stop as soon as the returned impulses' own residual (:func:`solution_residual`) is within
    ``tolerance`` × the problem's velocity scale max|g| (floored at 64 ulp of the dtype), which is what
    ``converged`` reports, so a warm-started step that is already solved costs one check and no factorisation.
    ADMM iterates with caps: at most ``stages`` factorisations (ρ is rebalanced between stages) × at most
    ``iterations`` iterations each. ``rho`` its initial penalty relative to the largest diagonal entry of G;
    ``prox`` the proximal weight η relative to it; ``tikhonov`` the relative regularisation of the derivative's
    linear system (and of the least-squares mode steps); ``mode_tol`` the relative tolerance that decides the
    modes (separated, sticking, sliding) for the derivative; ``relaxation`` α ∈ (0, 2) the over-relaxation of the
    z-update (Boyd et al. 2011, §3.4.3; 1 is plain ADMM); ``sliding_polish`` (ADMM alone) Newton-polishes the warm
    start with its sliding contacts (:func:`newton_polish`: a cube sliding down an incline then needs no iteration
    after its first steps; it costs about 4 m³ a step: measured 1.8× the run time on Cassie with a floor and 1.3×
    on the four-loop biped, where it saves nothing; experiments/out/ncp_convergence.md)."""
    stages: int = 8
    iterations: int = 50
    rho: float = 0.1
    prox: float = 1e-9
    tikhonov: float = 1e-12
    mode_tol: float = 1e-7
    relaxation: float = 1.6
    tolerance: float = 1e-7
    sliding_polish: bool = True
    method: str = "newton"
    newton_iterations: int = 20
    proximal: float = 1.0
    regularisation: float = 1e-12


class NCPSolution(NamedTuple):
    lam: jnp.ndarray             # (m,) impulses λ
    sigma: jnp.ndarray           # (m,) post-step constraint velocities σ = G λ + g
    primal: jnp.ndarray          # () largest violation of σ's constraints (module docstring)
    dual: jnp.ndarray            # () ADMM's consensus max diag G · ‖x − z‖∞ at the last iteration (velocity units)
    complementarity: jnp.ndarray  # () max |λᵀσ̃| over rows and cones
    iterations: jnp.ndarray = None  # () ADMM iterations run (0: the warm start was already a solution)
    converged: jnp.ndarray = None   # () bool: the residuals are within NCPSettings.tolerance (module docstring)


# ----------------------------------------------------------------------------- cones
def _safe_norm(x, axis=-1):
    sq = jnp.sum(x * x, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def project_friction_cone(lam, mu):
    """Π_{K_μ}: the Euclidean projection of contact impulses (k, 3) = [λ_n, λ_t1, λ_t2] onto the Coulomb cones
    ‖λ_t‖ ≤ μ λ_n (the second-order cone projection, e.g. Acary & Brogliato 2008, §12.7): unchanged inside,
    0 in the polar cone (μ‖λ_t‖ ≤ −λ_n), else onto the boundary, λ_n' = (λ_n + μ‖λ_t‖)/(1 + μ²),
    λ_t' = μ λ_n' λ_t/‖λ_t‖. μ = 0 gives the normal ray (λ_n⁺, 0, 0)."""
    ln, lt = lam[..., 0], lam[..., 1:]
    r = _safe_norm(lt)
    inside = r <= mu * ln
    polar = mu * r <= -ln
    ln_b = (ln + mu * r) / (1.0 + mu * mu)
    scale = jnp.where(r > 0, mu * ln_b / jnp.where(r > 0, r, 1.0), 0.0)
    boundary = jnp.concatenate([ln_b[..., None], lt * scale[..., None]], axis=-1)
    out = jnp.where(inside[..., None], lam, boundary)
    return jnp.where(polar[..., None] & ~inside[..., None], jnp.zeros_like(lam), out)


def project_dual_friction_cone(sig, mu):
    """Π_{K_μ*} with K_μ* = {μ‖σ_t‖ ≤ σ_n} = K_{1/μ} (μ > 0); for μ = 0 the half-space σ_n ≥ 0."""
    sn, st = sig[..., 0], sig[..., 1:]
    r = _safe_norm(st)
    mu_safe = jnp.where(mu > 0, mu, 1.0)
    inv = 1.0 / mu_safe
    inside = mu * r <= sn
    polar = r <= -mu * sn
    sn_b = (sn + inv * r) / (1.0 + inv * inv)
    scale = jnp.where(r > 0, inv * sn_b / jnp.where(r > 0, r, 1.0), 0.0)
    boundary = jnp.concatenate([sn_b[..., None], st * scale[..., None]], axis=-1)
    out = jnp.where(inside[..., None], sig, boundary)
    out = jnp.where(polar[..., None] & ~inside[..., None], jnp.zeros_like(sig), out)
    halfspace = jnp.concatenate([jnp.maximum(sn, 0.0)[..., None], st], axis=-1)
    return jnp.where((mu > 0)[..., None], out, halfspace)


def de_saxce_shift(sig_c, mu):
    """The De Saxcé correction μ‖σ_t‖ e_n of each contact (k, 3) (De Saxcé & Feng 1998)."""
    s = mu * _safe_norm(sig_c[..., 1:])
    return jnp.concatenate([s[..., None], jnp.zeros_like(sig_c[..., 1:])], axis=-1)


def _split(x, layout):
    b, u = layout.n_bilateral, layout.n_unilateral
    return x[:b], x[b:b + u], x[b + u:].reshape(layout.n_contacts, 3)


def _join(xb, xu, xc):
    return jnp.concatenate([xb, xu, xc.reshape(-1)])


def project_impulses(lam, layout, mu):
    """Π_K over all rows: bilateral rows free, one-sided rows onto λ ≥ 0, contacts onto K_μ."""
    lb, lu, lc = _split(lam, layout)
    return _join(lb, jnp.maximum(lu, 0.0), project_friction_cone(lc, mu))


def _shift(sigma, layout, mu):
    _, _, sc = _split(sigma, layout)
    return _join(jnp.zeros(layout.n_bilateral, sigma.dtype), jnp.zeros(layout.n_unilateral, sigma.dtype),
                 de_saxce_shift(sc, mu))


def ncp_residuals(G, g, lam, layout, mu, active):
    """(primal, dual, complementarity) of impulses ``lam`` (module docstring); inactive rows are skipped."""
    return residuals_of(matmul(G, lam) + g, lam, layout, mu, active)


def residuals_of(sigma, lam, layout, mu, active):
    """(primal, dual, complementarity) of impulses ``lam`` with constraint velocities ``sigma`` (module docstring)."""
    g = sigma
    act = active.astype(g.dtype)
    sb, su, sc = _split(sigma * act, layout)
    lb, lu, lc = _split(lam * act, layout)
    st = sc + de_saxce_shift(sc, mu)
    zero = jnp.zeros((), g.dtype)
    primal = jnp.max(jnp.concatenate([jnp.abs(sb), jnp.maximum(-su, 0.0),
                                      _safe_norm(st - project_dual_friction_cone(st, mu)), zero[None]]))
    dual = jnp.max(jnp.concatenate([jnp.maximum(-lu, 0.0), _safe_norm(lc - project_friction_cone(lc, mu)),
                                    zero[None]]))
    comp = jnp.max(jnp.concatenate([jnp.abs(lu * su), jnp.abs(jnp.sum(lc * st, axis=-1)), zero[None]]))
    return primal, dual, comp


# ----------------------------------------------------------------------------- ADMM
def _scale(G):
    """max |diag G|, the problem's impulse-to-velocity scale; 1 when G is 0 (no impulse moves anything: the problem
    is solved as well as it can be, λ finite, and the primal residual says what is not met)."""
    d = jnp.max(jnp.abs(jnp.diagonal(G))) if G.shape[0] else jnp.zeros((), G.dtype)
    return jnp.where(d > 0, d, 1.0)


def _masked_problem(G, g, active):
    """G and g with the inactive rows decoupled: their impulses are 0 (G's row and column replaced by the scale on
    the diagonal, g's entry by 0)."""
    a = active.astype(G.dtype)
    scale = _scale(G)
    Gm = G * a[:, None] * a[None, :] + jnp.diag((1.0 - a) * scale)
    return Gm, g * a, scale


def convergence_tolerance(g, tolerance):
    """The absolute tolerance of a problem with free velocities ``g``: ``tolerance`` (relative) × max|g|, the
    relative part floored at 64 ulp of the dtype (float32 cannot resolve less)."""
    rel = jnp.maximum(jnp.asarray(tolerance, g.dtype), 64 * jnp.finfo(g.dtype).eps)
    return rel * jnp.max(jnp.abs(g), initial=jnp.finfo(g.dtype).tiny)


def row_complementarity(sigma, lam, layout, mu, active, w):
    """The complementarity of each one-sided row and contact in velocity units, whatever its impulses' scale:
    |λᵀσ̃| / max(‖λ‖, ‖σ̃‖/w), with ``w`` the row's own velocity per impulse (its diagonal of G; a contact's largest,
    as :func:`row_scaling`). It is at most the velocity σ̃ has along λ and at most the velocity w‖λ‖ the impulse gives
    its own row, so it is 0 for a row that is open (λ = 0) or closed (σ̃ = 0) and small only where the row is nearly
    so in velocity: a 1e-9 kg sphere held up by 1e-11 N s while it separates at 1e-5 m/s counts 1e-5 m/s, where the
    product over the problem's largest impulse (a 1000 kg box's 2.5 N s) hides it at 1e-16 (the box and sphere of
    tests/test_contact_hardening.py). The largest over the active rows; 0 without such rows."""
    act = active.astype(sigma.dtype)
    _, su, sc = _split(sigma * act, layout)
    _, lu, lc = _split(lam * act, layout)
    _, wu, wc = _split(w, layout)
    st = sc + de_saxce_shift(sc, mu)
    tiny = jnp.finfo(sigma.dtype).tiny
    wc = jnp.max(wc, axis=-1)
    comp_u = jnp.abs(lu * su) / jnp.maximum(jnp.maximum(jnp.abs(lu), jnp.abs(su) / jnp.maximum(wu, tiny)), tiny)
    comp_c = jnp.abs(jnp.sum(lc * st, axis=-1)) / jnp.maximum(
        jnp.maximum(_safe_norm(lc), _safe_norm(st) / jnp.maximum(wc, tiny)), tiny)
    return jnp.max(jnp.concatenate([comp_u, comp_c, jnp.zeros(1, sigma.dtype)]))


def solution_residual(G, g, lam, layout, mu, active, D):
    """The one number :func:`solve_ncp` stops on and calls ``converged`` (module docstring): the largest of the
    primal residual, the dual one (λ's distance from K, in velocity units through max diag G) and the
    complementarity both per impulse of the problem, |λᵀσ̃|/max|λ|, and per row (:func:`row_complementarity`: rows
    whose impulses are far below the largest, a light body on a heavy one, are solved as exactly in velocity), all
    of the *unscaled* problem, whose impulses are D λ and whose velocities are σ/D when ``G``, ``g`` and ``lam`` are
    the row-scaled ones (:func:`row_scaling`; D = 1: the problem itself). NaN counts as infinite."""
    sigma = (matmul(G, lam) + g) / D
    lam_u = D * lam
    primal, dual, comp = residuals_of(sigma, lam_u, layout, mu, active)
    lam_scale = jnp.maximum(jnp.max(jnp.abs(lam_u), initial=0.0), jnp.finfo(g.dtype).tiny)
    w = jnp.abs(jnp.diagonal(G)) / (D * D)
    velocity_per_impulse = jnp.max(w, initial=0.0)
    comp_rows = row_complementarity(sigma, lam_u, layout, mu, active, w)
    res = jnp.maximum(jnp.maximum(primal, jnp.maximum(comp / lam_scale, comp_rows)), dual * velocity_per_impulse)
    return jnp.where(jnp.isnan(res), jnp.inf, res)


def _carrying(lam, layout):
    """1 on the rows of one-sided rows and contacts whose (normal) impulse is positive, else 0: where a warm start
    carries a dual estimate (a row that did not act has none; starting it from σ̃/ρ biases redundant sets toward
    internal forces)."""
    _, lu, lc = _split(lam, layout)
    on_c = jnp.repeat((lc[:, 0] > 0).astype(lam.dtype), 3)
    return _join(jnp.zeros(layout.n_bilateral, lam.dtype), (lu > 0).astype(lam.dtype), on_c)


def polish_modes(Gm, gm, layout, guess, active, eta):
    """Solution polishing (Stellato et al., "OSQP", Math. Prog. Comp. 2020, §5.2) for the NCP: take the modes of
    ``guess`` — bilateral rows, one-sided rows with λ > 0 and contacts with λ_n > 0 closed (sticking: σ = 0 on all
    three rows), the rest open (λ = 0) — and solve the linear system of the closed rows, G_cc λ_c = −g_c, by Newton
    steps from the guess restricted to G_cc's range, δ = A⁻¹ G_cc A⁻¹ r (A = G_cc + ηI, r = −g_c − G_cc λ): each
    step removes the residual within the range to O(η/s)² and adds nothing along the null space, so a redundant set
    (four feet, a grasped object) keeps the guess's split of its internal forces instead of −g_null/η. The result
    is an NCP solution when it lies in the cones and the open rows separate; the caller checks that with the
    residuals and otherwise iterates. Sliding contacts have no linear mode system and are left to ADMM."""
    _, lu, lc = _split(guess, layout)
    closed = _join(jnp.ones(layout.n_bilateral, bool), lu > 0, jnp.repeat(lc[:, 0] > 0, 3)) & active
    c = closed.astype(Gm.dtype)
    Gc = Gm * c[:, None] * c[None, :]
    Ainv = spd_inverse(Gc + jnp.diag((1.0 - c) * _scale(Gm) + eta))
    lam = guess * c
    for _ in range(POLISH_STEPS):
        r = -(gm + matmul(Gc, lam)) * c
        lam = lam + matmul(Ainv, matmul(Gc, matmul(Ainv, r)))
    return lam


def polish(Gm, gm, layout, mu, active, z, D, eta, tol, slip_tol, tikhonov, sliding=False):
    """(z polished, its residual :func:`solution_residual`): by :func:`polish_modes` (sticking contacts, exact on
    G_cc's range even where it is ill-conditioned) and, with ``sliding``, also by :func:`newton_polish` (sliding
    contacts too, by least squares: weaker where M is ill-conditioned, its normal matrix squares M's condition): the
    better of the two. Both methods polish the warm start so; ADMM also each stage's end, with the sticking polish
    only: the Newton polish is m³ work a step, not a stage (on Cassie, 98 slots, polishing every stage's end this
    way cost 2.9× the run time for no fewer iterations)."""
    scale = _scale(Gm)
    eta_p = jnp.maximum(eta, 64 * jnp.finfo(Gm.dtype).eps * scale)
    zs = polish_modes(Gm, gm, layout, z, active, eta_p)
    rs = solution_residual(Gm, gm, zs, layout, mu, active, D)
    if not sliding:
        return zs, rs
    zn = newton_polish(Gm, gm, layout, mu, active, z, slip_tol, tikhonov)
    rn = solution_residual(Gm, gm, zn, layout, mu, active, D)
    sticking_does = (rs <= tol) | ~(rn < rs)
    return jnp.where(sticking_does, zs, zn), jnp.where(sticking_does, rs, rn)


def _admm(G, g, layout, mu, active, lam0, settings, D, polish_start=True):
    """ADMM on the masked problem (module docstring), iterated to ``settings.tolerance``: an outer loop of stages
    (one factorisation of G + R + ηI each, ρ rebalanced between them by the ratio of the primal and dual
    residuals, Boyd et al. 2011, §3.4.1) around an inner loop of iterations, both ``lax.while_loop`` with caps, so
    that under ``vmap`` the loops leave when every scenario computed together has converged. The scaled dual is
    warm-started from the warm start's own constraint velocities, u₀ = −σ̃(λ₀)/ρ on the rows that carry an impulse
    (at a solution, λ = Π_K(λ − σ̃/ρ): the previous step's solution is a fixed point). Returns (λ, consensus, iterations, converged)."""
    Gm, gm, scale = _masked_problem(G, g, active)
    m = layout.size
    dtype = G.dtype
    eta = settings.prox * scale
    conic = jnp.concatenate([jnp.zeros(layout.n_bilateral, dtype), jnp.ones(m - layout.n_bilateral, dtype)])
    a = active.astype(dtype)
    tol = convergence_tolerance(gm / D, settings.tolerance)
    slip_tol = mode_tolerance(settings.mode_tol, dtype) * jnp.max(jnp.abs(gm), initial=jnp.finfo(dtype).tiny)
    refine = layout.n_bilateral > 0          # redundant bilateral rows make A ill-conditioned (η ~ 1e-9)

    def project(w):
        return project_impulses(w, layout, mu) * a

    def shifted_velocity(lam):
        sigma = matmul(Gm, lam) + gm
        return sigma + _shift(sigma, layout, mu)

    def residual(x, z, z_prev, rho):
        """The problem's own residual at z (:func:`solution_residual`: what the loop stops on), and ADMM's
        consensus and dual change (velocity units; they rebalance ρ and end a stage, they are no gate)."""
        consensus = scale * jnp.max(jnp.abs((x - z) * conic))
        change = rho * jnp.max(jnp.abs((z - z_prev) * conic))
        return solution_residual(Gm, gm, z, layout, mu, active, D), consensus, change

    def stage(carry):
        x, z, u, rho, k, total, _, _ = carry
        R = rho * conic
        diag = R + eta
        # A = G + R + ηI inverted once per stage: an iteration is then matrix-vector products, not two sequential
        # substitutions of m rows
        Ainv = spd_inverse(Gm + jnp.diag(diag))

        def iterate(c):
            x, z, u, i, total, _, _, _ = c
            r = -(gm + _shift(matmul(Gm, x) + gm, layout, mu)) + R * (z - u) + eta * x
            x = matmul(Ainv, r)
            if refine:
                x = x + matmul(Ainv, r - matmul(Gm, x) - diag * x)          # one step of iterative refinement
            xr = settings.relaxation * x + (1.0 - settings.relaxation) * z      # over-relaxation (Boyd §3.4.3)
            z_new = jnp.where(conic > 0, project(xr + u), x * a)
            u = u + (xr - z_new) * conic
            res, consensus, change = residual(x, z_new, z, rho)
            return x, z_new, u, i + 1, total + 1, res, consensus, change

        def unbalanced(consensus, change):
            return (consensus > 10 * change) | (change > 10 * consensus)

        def going(c):
            _, _, _, i, _, res, consensus, change = c
            return (i < settings.iterations) & ~(res <= tol) & ~((i >= MIN_STAGE) & unbalanced(consensus, change))

        inf = jnp.asarray(jnp.inf, dtype)
        x, z, u, _, total, res, consensus, change = jax.lax.while_loop(
            going, iterate, (x, z, u, jnp.zeros((), jnp.int32), total, inf, inf, inf))
        # the stage's modes polished (OSQP polishes after its iterations): exact where ADMM found the modes but
        # converges slowly to them (redundant feet with loops stall near 1e-8 relative)
        zp, res_p = polished(z)
        take = ~(res <= tol) & (res_p <= tol)
        x, z, res = jnp.where(take, zp, x), jnp.where(take, zp, z), jnp.where(take, res_p, res)
        ratio = jnp.sqrt(jnp.maximum(consensus, 1e-300) / jnp.maximum(change, 1e-300))
        ratio = jnp.where((consensus > 0) & (change > 0), jnp.clip(ratio, 0.1, 10.0), 1.0)
        return x, z, u / ratio, rho * ratio, k + 1, total, res, consensus     # scaled dual u = y/ρ follows ρ

    def more_stages(carry):
        return (carry[4] < settings.stages) & ~(carry[6] <= tol)

    z0 = project(lam0)
    rho0 = jnp.asarray(settings.rho, dtype) * scale

    def polished(z, sliding=False):
        return polish(Gm, gm, layout, mu, active, z, D, eta, tol, slip_tol, settings.tikhonov, sliding)

    # the warm start's modes polished into an exact solution (polish_modes) where that is one: a step whose
    # contacts keep their modes (standing, holding, resting, nothing near) needs no iteration
    if polish_start:
        zp, res_p = polished(z0, sliding=settings.sliding_polish and layout.n_contacts > 0)
        z0 = jnp.where(res_p <= tol, zp, z0)
    u0 = -shifted_velocity(z0) * conic * _carrying(z0, layout) / rho0
    res0, _, _ = residual(z0, z0, z0, rho0)
    zero = jnp.zeros((), jnp.int32)
    x, z, _, _, _, total, res, consensus = jax.lax.while_loop(
        more_stages, stage, (z0, z0, u0, rho0, zero, zero, res0, jnp.zeros((), dtype)))
    lam = jnp.where(conic > 0, z, x) * a
    return lam, consensus, total, res <= tol


# ----------------------------------------------------------------------------- Newton
LINE_SEARCH_STEPS = (1.0, 0.5, 0.25, 0.125, 1.0 / 32, 1.0 / 256)
"""The step sizes :func:`semismooth_newton`'s line search tries, all at once (one batched evaluation of the merit)."""
ARMIJO = 1e-4    # sufficient decrease of the line search: θ(λ + α δ) ≤ (1 − 2 ARMIJO α) θ(λ)


def natural_map(G, g, lam, layout, mu, active):
    """F(λ) = λ − Π_K(λ − σ̃(λ)), σ̃ = G λ + g + μ‖σ_t‖ e_n: the natural map of the De Saxcé complementarity
    (Acary & Brogliato 2008, §13.4; Hüeber, Stadler & Wohlmuth 2008): F = 0 exactly at the NCP's solutions (Moreau:
    λ = Π_K(λ − σ̃) ⇔ K ∋ λ ⊥ σ̃ ∈ K*). On bilateral rows F = σ, on one-sided rows λ − max(λ − σ, 0), on an inactive
    row F = λ. Its weight is 1, for a row-scaled G (:func:`row_scaling`: diag G ≤ 1). Returns (F, λ − σ̃, σ)."""
    sigma = matmul(G, lam) + g
    y = lam - (sigma + _shift(sigma, layout, mu))
    return jnp.where(active, lam - project_impulses(y, layout, mu), lam), y, sigma


def natural_map_jacobian(G, y, sigma, layout, mu, active):
    """An element of the generalised (Clarke) Jacobian of :func:`natural_map` at the point with λ − σ̃ = ``y`` and
    σ = ``sigma``: J = I − P + P T G, P = ∂Π_K(y) (per cone, the derivative of
    :func:`project_friction_cone`'s branch at y; 1 or 0 on one-sided rows; 1 on bilateral ones) and T = ∂σ̃/∂σ
    (per contact, the derivative of the De Saxcé shift, :func:`de_saxce_shift`). Inactive rows are rows of I."""
    m, dtype = layout.size, G.dtype
    b, u, k = layout.n_bilateral, layout.n_unilateral, layout.n_contacts
    _, yu, yc = _split(y, layout)
    _, _, sc = _split(sigma, layout)
    Pc = jax.vmap(jax.jacfwd(project_friction_cone))(yc, mu)                              # (k, 3, 3)
    Tc = jax.vmap(jax.jacfwd(lambda s, c: s + de_saxce_shift(s, c)))(sc, mu)            # (k, 3, 3)
    pu = (yu > 0).astype(dtype)
    PTG = jnp.concatenate([G[:b], pu[:, None] * G[b:b + u],
                           jnp.einsum("kab,kbc,kcm->kam", Pc, Tc, G[b + u:].reshape(k, 3, m)).reshape(3 * k, m)])
    rows = b + u + 3 * jnp.arange(k)[:, None] + jnp.arange(3)[None]
    I_P = jnp.zeros((m, m), dtype).at[b + jnp.arange(u), b + jnp.arange(u)].set(1.0 - pu)
    I_P = I_P.at[rows[:, :, None], rows[:, None, :]].set(jnp.eye(3, dtype=dtype)[None] - Pc)
    return jnp.where(active[:, None], I_P + PTG, jnp.eye(m, dtype=dtype))


def semismooth_newton(G, g, layout, mu, active, lam0, settings, D):
    """The default solve (module docstring): semi-smooth Newton on the natural map (:func:`natural_map`; Qi & Sun
    1993; for frictional contact Alart & Curnier 1991, Hüeber, Stadler & Wohlmuth 2008) of the row-scaled problem,
    from the warm start. Each trip is one proximal-point Newton step, δ = −J_ε⁻¹ F with J_ε the Jacobian
    (:func:`natural_map_jacobian`) of the map of G + εI around the current λ (Rockafellar 1976; with ε ∝ ‖F‖ the
    regularised Newton of Li, Fukushima, Qi & Yamashita 2004: superlinear where the solutions are not isolated, as
    along the null space of a rank-deficient G — two-point feet, four coplanar corners, a wedged peg — and the
    step there is the one nearest the current split of the internal forces), solved by pivoted elimination
    (:func:`~mrds_jax.spatial.linalg.pivoted_solve`), beside the active-set step of the iterate's modes
    (:func:`mode_step`), then a line search on θ = ½‖F‖² over :data:`LINE_SEARCH_STEPS` and the step to the first
    mode boundary (:func:`first_crossing`) along both directions, evaluated together: of the trials with Armijo's
    sufficient decrease the lowest θ, else the lowest θ. Where a trip lowers θ by less than a tenth and a row's
    velocity says its mode is wrong (an open row penetrating, a closed one separating), that row's mode is changed
    (:func:`changed_modes`) and a few block-pivoting mode steps taken (:func:`pivoted_modes`), kept where every row's
    sign agrees with its mode (:func:`mode_signs_hold`) and θ falls — or, where the trip is stuck at a local minimum
    of θ, where θ rises by less than :data:`ESCAPE_RISE`. After :data:`RESTART_TRIPS` slow trips in a row without such a change (an iterate creeping
    along G's null space with its internal forces pinned to the cones' boundaries) Newton restarts from the
    least-friction, least-norm impulses of the iterate's velocities (:func:`least_norm_impulses`). After two
    trips in a row that lower θ by less than half (:data:`CREEP_TRIP`, :data:`GUESS_AFTER`) the trip's result is
    checked against a few guessed modes (:func:`candidate_modes`: of the contacts that stick by their impulses and
    yet slip, all or one sliding), each taken a few accurate Newton steps (:func:`fixed_mode_steps`) and kept only
    where it solves the problem (guess and verify: an iterate creeping along G's null space at 8-12 % a trip, two
    feet inside their cones where the answer has one of them sliding; a quadruped in float32: 56 trips -> 18 at
    most on its hardest 83 problems). Where a trip is stuck (θ down by under 1 %, :data:`STUCK_TRIP`) with an open
    contact that penetrates, exchanges of modes are tried first the same way (:func:`exchanged_modes`: that contact
    closed and one of the least loaded touching contacts opened, the step of an active-set method; a box on an
    incline rocking from one corner to the next in float32: 380 trips -> 6 at most on 133 problems of a batch of
    256). On the captured problems of tests/test_contact_problems.py (1,900 problems, float64 and
    float32): at most 19 trips, 4.2 on average; with the Newton direction alone and the largest Armijo step, 78 and
    9, and without the change of mode 400+ (ADMM's cap) on four sliding corners and two rocking box feet. The loop
    (``lax.while_loop``) leaves when the problem's own residual (:func:`solution_residual`) of
    the projected iterate is within the tolerance, after ``settings.newton_iterations`` trips, or when no step
    lowers θ with six growing proximal weights in a row (a local minimum of θ that is no solution: the caller's ADMM
    takes over from there). Returns
    (λ projected onto K, trips)."""
    Gm, gm, scale = _masked_problem(G, g, active)
    a = active.astype(G.dtype)
    tol = convergence_tolerance(gm / D, settings.tolerance)
    alphas = jnp.asarray(LINE_SEARCH_STEPS, G.dtype)
    floor = regularisation_weight(settings.regularisation, G.dtype) * scale
    eye = jnp.eye(layout.size, dtype=G.dtype)
    slip = MODE_SLIP * jnp.max(jnp.abs(gm), initial=0.0)

    def project(lam):
        return project_impulses(lam, layout, mu) * a

    def merit(lam):
        F = natural_map(Gm, gm, lam, layout, mu, active)[0]
        return 0.5 * jnp.sum(F * F)

    def residual(lam):
        return solution_residual(Gm, gm, project(lam), layout, mu, active, D)

    slip_tol = mode_tolerance(settings.mode_tol, G.dtype) * jnp.max(jnp.abs(gm), initial=jnp.finfo(G.dtype).tiny)

    def restart(lam):
        # the least-friction, least-norm impulses of the iterate's velocities (:func:`least_norm_impulses`): the
        # same velocities with the internal forces along G's null space removed
        return least_norm_impulses(Gm, gm, lam, layout, mu, active, slip_tol, settings.tikhonov, D * tol) * a

    def verified(lam, cands):
        # guess and verify: from λ, GUESS_STEPS Newton steps of each candidate's modes (:func:`fixed_mode_steps`,
        # all candidates together); the first whose result solves the problem (its residual within the tolerance)
        # replaces λ, so a wrong guess costs time and nothing else. Returns (λ, whether a guess solved it)
        xs = jax.vmap(lambda m: project(fixed_mode_steps(Gm, gm, lam, layout, mu, active, m, GUESS_STEPS)))(cands)
        res = jax.vmap(residual)(xs)
        first = jnp.argmax(res <= tol)
        return jnp.where(res[first] <= tol, xs[first], lam), res[first] <= tol

    def verified_guess(lam):
        # the guesses of :func:`candidate_modes` (contacts that stick by their impulses and yet slip)
        return verified(lam, candidate_modes(lam, matmul(Gm, lam) + gm, layout, mu, active, slip))[0]

    def verified_exchange(carry, sigma):
        # the exchanges of :func:`exchanged_modes` (the open contact that penetrates most closed, one touching
        # contact opened) at a trip stuck with an open contact penetrating (σ = Gλ + g, the trip's velocities)
        lam = carry[0]
        return verified(lam, exchanged_modes(lam, sigma, layout, mu, active, slip, D * tol))

    def trip(carry):
        lam, k, _, kappa, slow, creep = carry
        F, y, sigma = natural_map(Gm, gm, lam, layout, mu, active)
        theta = 0.5 * jnp.sum(F * F)
        # the proximal-point Newton step: the Jacobian of the map of G + εI at the proximal centre λ (whose map at λ
        # is F itself), ε = κ × proximal × max|F| above the floor; κ grows tenfold after a trip that found no
        # lower θ (a shorter, more gradient-like step, as Levenberg-Marquardt's damping) and shrinks after one that did
        eps = jnp.maximum(kappa * settings.proximal * jnp.max(jnp.abs(F), initial=0.0), floor)
        newton = -pivoted_solve(natural_map_jacobian(Gm + eps * eye, y, sigma, layout, mu, active), F)
        # the active-set step (:func:`mode_step`): where the natural map's Jacobian is singular at a stick-slip
        # switch or an inconsistent mode (four sliding corners), the step that keeps the iterate's modes
        modes = guess_modes(lam, sigma, layout, mu, active, slip)
        steps = jnp.stack([newton, mode_step(Gm, gm, lam, sigma, layout, mu, active, modes, settings.tikhonov)])
        sizes = jnp.concatenate([jnp.append(alphas, first_crossing(lam, d, layout, mu)) for d in steps])
        trials = lam[None] + sizes[:, None] * jnp.repeat(steps, alphas.size + 1, axis=0)
        thetas = jax.vmap(merit)(trials)
        thetas = jnp.where(jnp.isnan(thetas), jnp.inf, thetas)
        # of the trials with Armijo's sufficient decrease the lowest θ, else the lowest θ of all
        armijo = thetas <= (1.0 - 2.0 * ARMIJO * sizes) * theta
        best = jnp.argmin(jnp.where(armijo | ~jnp.any(armijo), thetas, jnp.inf))
        stalled = ~(thetas[best] < theta)
        lam_new = jnp.where(stalled, lam, trials[best])
        # a trip that does not lower θ by a tenth (a local minimum of θ that is no solution; in float32 θ's rounding
        # passes Armijo's test there), where an open row penetrates or a closed one separates: that row's mode
        # changed (:func:`changed_modes`) and its steps kept where they lower θ or, at a stuck trip, raise it by less
        # than ESCAPE_RISE (θ's local minima lie between modes: four sliding corners whose normal velocities cannot
        # all be 0 stall at θ ~ e², and the solution with one corner open is reached only through larger θ)
        # a trip stuck at a local minimum of θ with an open contact that penetrates: first the exchanges of modes
        # (:func:`exchanged_modes`: that contact closed and one touching contact opened together), kept only where
        # one solves the problem. Closing it alone leads to an inconsistent mode (four sliding corners) whose
        # least-squares step runs along G's null space, and the next trips come back to the same minimum
        stuck = ~(thetas[best] < STUCK_TRIP * theta)
        exchanged = jnp.zeros((), bool)
        if layout.n_contacts:                   # (limit rows alone: no contact to exchange)
            exchange = stuck & jnp.any(penetrating_rows(modes, sigma, layout, active, D * tol)[0])
            lam_x, exchanged = run_if(exchange, verified_exchange, (lam, exchanged), sigma)
            lam_new = jnp.where(exchanged, lam_x, lam_new)
        changed, change = changed_modes(modes, lam, sigma, layout, active, D * tol)
        escape = change & ~(thetas[best] < SLOW_TRIP * theta) & ~exchanged

        def changed_step(carry, Gm, gm, changed):
            # the changed mode's step, then PIVOTS steps of the modes each result shows (block pivoting: a contact
            # that the change leaves pulling, λ_n < 0, opens, one left penetrating closes; :func:`pivoted_modes`),
            # kept where every row's sign agrees with its mode and θ is lower than the trip's step gives, or,
            # where the trip is stuck (θ's local minima lie between modes), where θ rises by less than ESCAPE_RISE
            def pivot(_, carry):
                x, m = carry
                x = open_rows(x + mode_step(Gm, gm, x, matmul(Gm, x) + gm, layout, mu, active, m, settings.tikhonov),
                              layout, m)
                return x, pivoted_modes(x, matmul(Gm, x) + gm, layout, mu, active, slip, D * tol)

            x, m = jax.lax.fori_loop(0, PIVOTS, pivot, (carry[0], changed))
            return x, mode_signs_hold(m, x, matmul(Gm, x) + gm, layout, active, D * tol) & (
                (stuck & (merit(x) < ESCAPE_RISE * theta)) | (merit(x) < thetas[best]))

        lam_mode, holds = run_if(escape, changed_step, (lam, jnp.zeros((), bool)), Gm, gm, changed)
        escape = escape & holds
        lam_new = jnp.where(escape, lam_mode, lam_new)
        escape = escape | exchanged
        kappa = jnp.where(escape, 1.0, jnp.where(stalled, 10.0 * kappa, jnp.maximum(0.1 * kappa, 1.0)))
        # RESTART_TRIPS slow trips in a row (θ down by less than a tenth each, no change of mode): the iterate creeps
        # along G's null space, its internal forces pinned to the cones' boundaries (two box feet whose every corner
        # pushes, float32: 0.3 % a trip, where the solution has a corner of each foot open), and Newton restarts
        # from the same velocities' least-friction, least-norm impulses (:func:`restart`), whatever θ does there
        slow = jnp.where(escape | (thetas[best] < SLOW_TRIP * theta), 0, slow + 1)
        # GUESS_AFTER trips in a row that lowered θ by less than half (:data:`CREEP_TRIP`) with a contact that sticks
        # by its impulse and yet slips: guess and verify its modes (:func:`candidate_modes`), kept only where the
        # result solves the problem
        creep = jnp.where(escape | (thetas[best] < CREEP_TRIP * theta), 0, creep + 1)
        guess = (creep >= GUESS_AFTER) & jnp.any(uncertain_contacts(lam_new, matmul(Gm, lam_new) + gm, layout, mu,
                                                                    active, slip))
        lam_new = run_if(guess, verified_guess, lam_new)
        restarts = slow >= RESTART_TRIPS
        lam_new = run_if(restarts, restart, lam_new)
        kappa, slow = jnp.where(restarts, 1.0, kappa), jnp.where(restarts, 0, slow)
        return lam_new, k + 1, residual(lam_new), kappa, slow, creep

    def going(carry):
        _, k, res, kappa, _, _ = carry
        return (k < settings.newton_iterations) & ~(res <= tol) & (kappa < 1e6)

    lam0 = project(lam0)
    res0 = residual(lam0)
    # the warm start polished as ADMM's is (:func:`polish`: its modes kept, the sticking rows' linear system and the
    # sliding contacts' Newton polish), so that a contact that was open stays open where that is consistent (where
    # the NCP has several solutions, the one its previous step's modes lead to), and a step whose contacts keep
    # their modes — standing, sliding on — costs no trip and is exact
    lam1, res1 = run_if(~(res0 <= tol), lambda carry, Gm, gm: polish(
        Gm, gm, layout, mu, active, carry[0], D, settings.prox * scale, tol, slip_tol, settings.tikhonov,
        settings.sliding_polish and layout.n_contacts > 0), (lam0, res0), Gm, gm)
    # the loop stops on the residual of the projected iterate, which it returns: the polish's own residual is of
    # its unprojected impulses (a polished corner just outside its cone passed there while its projection did not,
    # and the loop left before its first trip: 131 ADMM iterations on a float32 incline problem instead)
    res1 = jnp.where(res1 <= tol, residual(lam1), res1)
    keep = ~(res0 <= tol) & ~(res1 <= tol) & ~(merit(lam1) < merit(lam0))
    lam1, res1 = jnp.where(keep, lam0, lam1), jnp.where(keep, res0, res1)
    zero = jnp.zeros((), jnp.int32)
    lam, trips, _, _, _, _ = jax.lax.while_loop(going, trip, (lam1, zero, res1, jnp.ones((), G.dtype), zero, zero))
    return project(lam), trips


MODE_SLIP = 1e-4
"""A contact on its cone's boundary slides in :func:`semismooth_newton`'s :func:`mode_step` where its slip exceeds this × the problem's max|g|."""
SLOW_TRIP = 0.9
""":func:`semismooth_newton` changes a row's mode (:func:`changed_modes`) after a trip whose θ fell by less than 1 − this."""
CREEP_TRIP = 0.5
""":func:`semismooth_newton` guesses and verifies modes after :data:`GUESS_AFTER` trips in a row whose θ fell by less than 1 − this."""
STUCK_TRIP = 0.99
""":func:`semismooth_newton` is stuck after a trip whose θ fell by less than 1 − this: it tries exchanges of modes
(:func:`exchanged_modes`) and changes a mode even where θ rises (by less than :data:`ESCAPE_RISE`)."""
ESCAPE_RISE = 1e5
""":func:`semismooth_newton` keeps a change of mode at a stuck trip only where θ rises by less than this factor.
Between what the escapes need and what they cost on the captured problems (float32): a box on an incline left its
local minimum with all corners sliding through a rise of 3.5e3 (then solved in four trips; refused at a cap of 1e3
it took 286), a biped's foot corner opened at a rise of 6e6 and the problem took 32 trips (17 at most on its file with
the change refused)."""
PIVOTS = 3
""":func:`semismooth_newton`'s change of mode takes this many mode steps, each of the modes the last one shows."""
RESTART_TRIPS = 4
""":func:`semismooth_newton` restarts from the least-norm impulses after this many slow trips (:data:`SLOW_TRIP`) in a row."""


def mode_step(Gm, gm, lam, sigma, layout, mu, active, modes, tikhonov):
    """The active-set Newton step at fixed ``modes`` (separated, sticking, sliding, closed_u; :func:`guess_modes`):
    one minimum-norm least-squares Newton step δ on the mode conditions F(λ) = 0 (:func:`mode_residual`), with the
    Jacobian M (:func:`mode_system`) at the current iterate ``lam`` (σ = ``sigma``): δ = −(MᵀM + εI)⁻¹ Mᵀ F
    (:func:`regularised_least_squares`), the step of :func:`newton_polish` and the second direction of
    :func:`semismooth_newton`. Where the natural map's generalised Jacobian is singular — a contact at the
    stick-slip switch, an inconsistent mode such as four coplanar corners all sliding — its Newton step is huge and
    useless, while this one is the least-squares step of the mode the iterate is in (a semismooth Newton step with
    another element of the generalised Jacobian; Qi & Sun 1993); along G's null space (redundant feet) it is the
    minimum-norm step, so the iterate keeps its split of the internal forces."""
    M, _, _ = mode_system(Gm, lam, sigma, layout, mu, active, modes)
    return -regularised_least_squares(M, mode_residual(lam, sigma, layout, mu, active, modes), tikhonov, _scale(Gm))


def changed_modes(modes, lam, sigma, layout, active, velocity_tol):
    """``modes`` (:func:`guess_modes`) with one row's mode changed, the active-set method's step (Nocedal & Wright
    2006, §16.5): the open row that penetrates most closed (of the separated contacts with σ_n < −``velocity_tol``
    and the open one-sided rows with σ below it, the most negative σ; a contact closes sticking), else the closed
    row that separates opened (of the touching contacts and closed one-sided rows with σ > ``velocity_tol``, the one
    whose σ is largest for its impulse λ: the least loaded of those that separate); ``velocity_tol`` per row, the
    solve's tolerance (a rounding-level σ changes nothing). Returns (modes, whether a row changed). Where the mode
    system is inconsistent — four coplanar corners whose normal velocities cannot all be 0 (a corner above the plane
    is not pulled down by the gap correction, the others are) — the least-squares step of the mode stalls with
    σ_n = ±e at the corners, and the NCP's solution has one corner open: of the two diagonal corners with σ_n = +e
    the less loaded (opening the other leaves the box on three corners that cannot carry it, λ_n < 0 at the first);
    where a foot's corner is open but penetrates while its neighbours stick, that corner closes."""
    separated, sticking, sliding, closed_u = modes
    if not layout.n_contacts + layout.n_unilateral:
        return modes, jnp.zeros((), bool)
    k, u = layout.n_contacts, layout.n_unilateral
    _, lu, lc = _split(lam, layout)
    _, su, sc = _split(sigma, layout)
    _, au, _ = _split(active, layout)
    # closing: the most negative velocity of an open row
    _, tu, tc = _split(velocity_tol, layout)
    pen_c, pen_u = penetrating_rows(modes, sigma, layout, active, velocity_tol)
    close = jnp.concatenate([jnp.where(pen_c, -sc[:, 0], -jnp.inf), jnp.where(pen_u, -su, -jnp.inf)])
    i = jnp.argmax(close)
    closes = close[i] > 0
    # opening: the largest σ/λ of a closed row that separates
    ratio = lambda v, t, l: jnp.where((v > t) & (l > 0), v / jnp.where(l > 0, l, 1.0), -jnp.inf)      # noqa: E731
    opening = jnp.concatenate([jnp.where(~separated, ratio(sc[:, 0], tc[:, 0], lc[:, 0]), -jnp.inf),
                               jnp.where(closed_u & au, ratio(su, tu, lu), -jnp.inf)])
    j = jnp.argmax(opening)
    opens = ~closes & (opening[j] > -jnp.inf)
    close_c, close_u = closes & (jnp.arange(k) == i), closes & (jnp.arange(u) == i - k)
    open_c, open_u = opens & (jnp.arange(k) == j), opens & (jnp.arange(u) == j - k)
    return ((separated | open_c) & ~close_c, (sticking & ~open_c) | close_c, sliding & ~open_c,
            (closed_u & ~open_u) | close_u), closes | opens


def pivoted_modes(lam, sigma, layout, mu, active, slip_tol, velocity_tol):
    """The modes an iterate shows (:func:`guess_modes`: a contact whose λ_n ≤ 0 is open), with the open rows that
    penetrate (σ < −``velocity_tol``, per row) closed, contacts sticking: the next modes of block principal pivoting
    (Júdice & Pires 1994; the primal-dual active set of Hintermüller, Ito & Kunisch 2002)."""
    modes = guess_modes(lam, sigma, layout, mu, active, slip_tol)
    separated, sticking, sliding, closed_u = modes
    close_c, close_u = penetrating_rows(modes, sigma, layout, active, velocity_tol)
    return separated & ~close_c, sticking | close_c, sliding, closed_u | close_u


def mode_signs_hold(modes, lam, sigma, layout, active, velocity_tol):
    """Whether every row's sign agrees with its mode at ``lam`` (σ its velocities): touching contacts and closed
    one-sided rows push (λ ≥ 0), open ones separate (σ ≥ −``velocity_tol``, per row). :func:`semismooth_newton`
    takes a change of mode (:func:`changed_modes`) only where this holds after it: opening one of four feet that
    must all carry the trunk leaves the opened foot penetrating, closing a penetrating corner of four on a plane can
    leave another pulling (λ_n < 0), and the next trips would undo either, in a cycle."""
    separated, _, _, closed_u = modes
    _, lu, lc = _split(lam, layout)
    _, su, sc = _split(sigma, layout)
    _, tu, tc = _split(velocity_tol, layout)
    _, au, ac = _split(active, layout)
    ok_c = jnp.where(separated, ~ac[:, 0] | (sc[:, 0] >= -tc[:, 0]), lc[:, 0] >= 0)
    ok_u = jnp.where(closed_u, lu >= 0, ~au | (su >= -tu))
    return jnp.all(ok_c) & jnp.all(ok_u)


def open_rows(lam, layout, modes):
    """λ with the rows that ``modes`` opens exactly 0 (separated contacts, one-sided rows not closed): a least-squares
    step leaves round-off there (1e-29 on a separated contact), and an open row carries no impulse at all."""
    separated, _, _, closed_u = modes
    lb, lu, lc = _split(lam, layout)
    return _join(lb, jnp.where(closed_u, lu, 0.0), jnp.where(separated[:, None], 0.0, lc))


def first_crossing(lam, step, layout, mu):
    """The step size α ∈ (0, 1] at which λ + α δ first leaves its mode's region: a contact strictly inside its cone
    reaches the boundary ‖λ_t + α δ_t‖ = μ (λ_n + α δ_n) (the smaller positive root of that quadratic), a contact's
    normal impulse or a one-sided row's impulse reaches 0 (it opens); 1 where none does. :func:`semismooth_newton` tries it beside its fixed
    step sizes: where the sticking system is inconsistent (along G's null space: four feet whose springs spread
    them, four coplanar corners) the Newton step of the sticking mode is long and only the step to the boundary,
    where the contact starts to slide, lowers the residual (the active-set method's step to the first blocking
    constraint, Nocedal & Wright 2006, §16.5)."""
    one = jnp.ones((), lam.dtype)
    _, lu, lc = _split(lam, layout)
    _, du, dc = _split(step, layout)
    A = jnp.sum(dc[:, 1:] ** 2, axis=-1) - (mu * dc[:, 0]) ** 2
    B = 2.0 * (jnp.sum(lc[:, 1:] * dc[:, 1:], axis=-1) - mu * mu * lc[:, 0] * dc[:, 0])
    C = jnp.sum(lc[:, 1:] ** 2, axis=-1) - (mu * lc[:, 0]) ** 2
    inside = (C < 0) & (lc[:, 0] > 0)
    root = jnp.sqrt(jnp.maximum(B * B - 4.0 * A * C, 0.0))
    q = -0.5 * (B + jnp.where(B >= 0, root, -root))                 # the roots q/A and C/q, without cancellation
    r1 = jnp.where(A != 0, q / jnp.where(A != 0, A, 1.0), jnp.inf)
    r2 = jnp.where(q != 0, C / jnp.where(q != 0, q, 1.0), jnp.inf)
    pos = lambda r: jnp.where(inside & (r > 0) & jnp.isfinite(r), r, jnp.inf)     # noqa: E731
    cone = jnp.minimum(pos(r1), pos(r2))
    opens = lambda x, d: jnp.where((x > 0) & (d < 0), -x / jnp.where(d < 0, d, -1.0), jnp.inf)   # noqa: E731
    alpha = jnp.minimum(jnp.min(cone, initial=jnp.inf), jnp.min(opens(lu, du), initial=jnp.inf))
    alpha = jnp.minimum(alpha, jnp.min(opens(lc[:, 0], dc[:, 0]), initial=jnp.inf))
    return jnp.where(alpha <= 1.0, alpha, one)


def regularisation_weight(regularisation, dtype):
    """The floor of :func:`semismooth_newton`'s proximal weight ε (relative to max diag G):
    ``NCPSettings.regularisation``, at least 8 ulp of the dtype, so that J_ε stays invertible where G is singular."""
    return max(float(regularisation), 8 * float(jnp.finfo(dtype).eps))


# ----------------------------------------------------------------------------- the derivative
def solution_modes(lam, sigma, layout, mu, active, tol, velocity_scale=None):
    """Per contact: (separated, sticking, sliding) booleans at a solution, with relative tolerance ``tol`` on
    the impulse scale max|λ| and the velocity scale ``velocity_scale`` (default max|σ|; give the problem's, e.g.
    max(|g|, |Gλ|), when σ may be all ≈ 0); per one-sided row: whether it is closed (λ > 0 or σ ≤ 0)."""
    _, lu, lc = _split(lam, layout)
    _, su, sc = _split(sigma, layout)
    _, au, ac = _split(active, layout)
    lam_scale = jnp.maximum(jnp.max(jnp.abs(lam)), jnp.finfo(lam.dtype).tiny)
    sig_scale = jnp.max(jnp.abs(sigma)) if velocity_scale is None else velocity_scale
    sig_scale = jnp.maximum(sig_scale, jnp.finfo(lam.dtype).tiny)
    on = ac[:, 0]
    separated = ~on | (lc[:, 0] <= tol * lam_scale)
    slip = _safe_norm(sc[:, 1:])
    sliding = ~separated & (slip > tol * sig_scale)
    sticking = ~separated & ~sliding
    closed_u = au & ((lu > tol * lam_scale) | (su <= tol * sig_scale))
    return separated, sticking, sliding, closed_u


MODE_ULPS = 1024
"""The modes of the derivative are decided no finer than this many ulp of the dtype (:func:`mode_tolerance`)."""


def mode_tolerance(mode_tol, dtype):
    """``NCPSettings.mode_tol`` floored at :data:`MODE_ULPS` ulp of ``dtype`` (1.2e-4 in float32; float64 keeps 1e-7):
    a solution converged to 64 ulp (:func:`convergence_tolerance`) decides stick or slip only above its own error,
    else float32's gradient takes a rounding-level slip for sliding (2 % off float64's on a table pushed across
    the floor; tests/test_contact_float32.py)."""
    return max(float(mode_tol), MODE_ULPS * float(jnp.finfo(dtype).eps))


def _mode_jacobian_system(G, g, lam, sigma, layout, mu, active, tol):
    """The linearisation of the solution's mode conditions: rows M such that M dλ = −P (dG λ + dg) + Q dμ
    (module docstring), the modes decided by :func:`solution_modes` with relative tolerance ``tol``. Returns
    (M, P, Qmu) with P the selector of σ-rows and Qmu the friction sensitivity."""
    a = active.astype(G.dtype)
    scale = jnp.maximum(jnp.max(jnp.abs(g * a)), jnp.max(jnp.abs(matmul(G, lam) * a)))
    modes = solution_modes(lam, sigma, layout, mu, active, tol, scale)
    return mode_system(G, lam, sigma, layout, mu, active, modes)


def _sliding_geometry(lam, sigma, layout, mu):
    """Per contact: ŝ = σ_t/‖σ_t‖ (0 where σ_t = 0), the weight W = μ λ_n (I − ŝŝᵀ)/‖σ_t‖ (k, 2, 2) of
    dŝ, and the static indices of the tangent (k, 2) and normal (k,) rows."""
    k = layout.n_contacts
    _, _, lc = _split(lam, layout)
    _, _, sc = _split(sigma, layout)
    st = sc[:, 1:]
    r = _safe_norm(st)
    r_safe = jnp.where(r > 0, r, 1.0)
    shat = st / r_safe[:, None]
    Pt = (jnp.eye(2, dtype=lam.dtype)[None] - shat[:, :, None] * shat[:, None, :]) / r_safe[:, None, None]
    W = (mu * lc[:, 0])[:, None, None] * Pt
    start = layout.contact_start
    idx_t = start + 3 * jnp.arange(k)[:, None] + jnp.array([1, 2])[None]
    idx_n = start + 3 * jnp.arange(k)
    return shat, W, idx_t, idx_n


def _sigma_rows(layout, active, modes):
    """The rows whose mode keeps σ fixed (bilateral, closed one-sided rows, the normals of touching contacts and the
    tangents of sticking ones); the others keep λ fixed, except the tangents of sliding contacts."""
    separated, sticking, _, closed_u = modes
    ab, _, _ = _split(active, layout)
    return _join(ab, closed_u, jnp.stack([~separated, sticking, sticking], axis=-1))


def mode_system(G, lam, sigma, layout, mu, active, modes):
    """(M, P, Qmu) of the mode conditions at fixed ``modes`` (separated, sticking, sliding, closed_u; see
    :func:`solution_modes`): σ-rows keep σ_i = (Gλ + g)_i (row G_i), λ-rows keep λ_i (row e_i), and a sliding
    contact's tangent rows keep λ_t + μ λ_n ŝ = 0, ŝ = σ_t/‖σ_t‖, linearised:
    dλ_t + μ ŝ dλ_n + μ λ_n (I − ŝŝᵀ)/‖σ_t‖ (G_t dλ + dG_t λ + dg_t) + λ_n ŝ dμ = 0.
    M is the Jacobian of :func:`mode_residual` in λ (the Newton matrix of :func:`newton_polish`); P maps a change of
    σ's data (dG λ + dg) to the right-hand side and Qmu a change of μ (the implicit derivative, module docstring)."""
    m = layout.size
    dtype = G.dtype
    k = layout.n_contacts
    sliding = modes[2]
    sig_rows = _sigma_rows(layout, active, modes)
    M = jnp.where(sig_rows[:, None], G, jnp.eye(m, dtype=dtype))
    P = sig_rows.astype(dtype)
    _, _, lc = _split(lam, layout)
    shat, W, idx_t, idx_n = _sliding_geometry(lam, sigma, layout, mu)
    slide_rows = jnp.einsum("kab,kbm->kam", W, G[idx_t])                          # μλ_n P_t G_t
    slide_rows = slide_rows.at[jnp.arange(k)[:, None], jnp.array([0, 1])[None], idx_t].add(1.0)
    slide_rows = slide_rows.at[jnp.arange(k)[:, None], jnp.array([0, 1])[None], idx_n[:, None]].add(
        mu[:, None] * shat)
    sl = sliding[:, None]
    M = M.at[idx_t].set(jnp.where(sl[..., None], slide_rows, M[idx_t]))
    # the σ-part of the right-hand side of a sliding tangent row is W (dG_t λ + dg_t); of its dμ-part λ_n ŝ
    Wfull = jnp.zeros((m, m), dtype)
    Wfull = Wfull.at[idx_t[:, :, None], idx_t[:, None, :]].set(jnp.where(sl[..., None], W, 0.0))
    Pmat = jnp.diag(P * ~(jnp.zeros(m, bool).at[idx_t].set(sl))) + Wfull
    Qmu = jnp.zeros((m, k), dtype).at[idx_t, jnp.arange(k)[:, None]].set(
        jnp.where(sl, -(lc[:, 0])[:, None] * shat, 0.0))
    return M, Pmat, Qmu


def mode_residual(lam, sigma, layout, mu, active, modes):
    """F(λ) of the mode conditions (:func:`mode_system`): σ_i on σ-rows, λ_i on λ-rows, λ_t + μ λ_n ŝ on the
    tangent rows of sliding contacts; F = 0 with λ in K and σ̃ in K* is an NCP solution."""
    F = jnp.where(_sigma_rows(layout, active, modes), sigma, lam)
    shat, _, idx_t, idx_n = _sliding_geometry(lam, sigma, layout, mu)
    slide = lam[idx_t] + (mu * lam[idx_n])[:, None] * shat
    return F.at[idx_t].set(jnp.where(modes[2][:, None], slide, F[idx_t]))


def guess_modes(lam, sigma, layout, mu, active, slip_tol):
    """The modes a Newton polish (:func:`newton_polish`) assumes from an iterate: one-sided rows closed where λ > 0,
    contacts separated where λ_n ≤ 0, sliding where λ is on the cone's boundary (to 1e-4) and the slip exceeds
    ``slip_tol``, else sticking (OSQP's active set from the iterate's signs, Stellato et al. 2020, §5.2)."""
    _, lu, lc = _split(lam, layout)
    _, au, ac = _split(active, layout)
    _, _, sc = _split(sigma, layout)
    separated = ~ac[:, 0] | (lc[:, 0] <= 0)
    boundary = _safe_norm(lc[:, 1:]) >= (1.0 - 1e-4) * mu * lc[:, 0]
    sliding = ~separated & boundary & (_safe_norm(sc[:, 1:]) > slip_tol)
    return separated, ~separated & ~sliding, sliding, au & (lu > 0)


def newton_polish(Gm, gm, layout, mu, active, guess, slip_tol, tikhonov, steps=3):
    """Solution polishing (Stellato et al., "OSQP", Math. Prog. Comp. 2020, §5.2) for the NCP, sliding contacts
    included: the modes of ``guess`` (:func:`guess_modes`) fixed, ``steps`` Newton steps on their conditions
    F(λ) = 0 (:func:`mode_residual`; for sliding contacts the natural map of Coulomb's law on the cone's boundary,
    the non-smooth Newton of Macklin et al., "Non-smooth Newton Methods for Deformable Multi-body Dynamics", ACM
    TOG 2019, at fixed modes), each the minimum-norm least-squares step (:func:`regularised_least_squares`) with
    the Jacobian M (:func:`mode_system`) at the current iterate (quadratic convergence in the slip direction; a
    Jacobian frozen at the guess left 1e-7 after six steps on one sliding point mass), so that a redundant set
    (four feet, a grasped object) keeps the guess's split of its internal forces. The result is an NCP solution when it lies in the cones
    and the open rows separate; the caller checks that with the residuals and otherwise iterates."""
    sigma = matmul(Gm, guess) + gm
    modes = guess_modes(guess, sigma, layout, mu, active, slip_tol)

    def newton_step(_, lam):
        return lam + mode_step(Gm, gm, lam, matmul(Gm, lam) + gm, layout, mu, active, modes, tikhonov)

    # a loop, not unrolled: one traced step (its factorisation is most of the polish's program) instead of `steps`
    return open_rows(jax.lax.fori_loop(0, steps, newton_step, guess), layout, modes)


# ----------------------------------------------------------------------------- scaling
NO_SLIP_FRICTION = 1e4
"""Friction coefficients above this are treated as this one (:func:`no_slip_friction`)."""


def no_slip_friction(mu):
    """μ capped at :data:`NO_SLIP_FRICTION` = 1e4: a cone of half-angle atan 1e4 is 1e-4 rad from a half-line, so a
    contact sticks unless its normal impulse is 1e-4 of the tangential one — numerically a no-slip constraint — while
    larger μ only make the De Saxcé shift μ‖σ_t‖ (module docstring) amplify the solver's tangential residual into a
    spurious normal velocity (μ = 1e8 lifted a sliding ball off the floor by 2e5 m)."""
    return jnp.minimum(mu, NO_SLIP_FRICTION)


def row_scaling(G, layout):
    """Per-row scale D = diag(G)^{-1/2} (Jacobi scaling; one value per contact, the largest of its three rows', so
    the cones K_μ are unchanged): the solve runs on D G D, whose diagonal is ≤ 1, with impulses λ = D λ̃. Rows with a
    mass ratio of 1e9 (a 1e-9 kg sphere on a 1000 kg box) then share one impulse-to-velocity scale instead of the
    heaviest row's ρ starving the others. Rows with a zero diagonal (nothing moves them) keep D = 1."""
    d = jnp.abs(jnp.diagonal(G))
    db, du, dc = _split(d, layout)
    dc = jnp.broadcast_to(jnp.max(dc, axis=-1, keepdims=True), dc.shape)
    d = _join(db, du, dc)
    tiny = jnp.finfo(G.dtype).tiny / jnp.finfo(G.dtype).eps
    return jnp.where(d > tiny, 1.0 / jnp.sqrt(jnp.where(d > tiny, d, 1.0)), 1.0)


def _solve_fixed_modes(G, g, mu, active, lam0, D, layout, settings):
    """The solve on the row-scaled problem (``D``: :func:`row_scaling`): Newton (:func:`semismooth_newton`) and,
    where it stalls or reaches its cap, ADMM from its last iterate (whose loops do not run where Newton converged:
    under ``vmap``, not unless some scenario of the batch needs them); or ADMM alone (``method="admm"``)."""
    trips = jnp.zeros((), jnp.int32)
    polish_start = True
    if settings.method == "newton":
        lam0, trips = semismooth_newton(G, g, layout, mu, active, lam0, settings, D)
        polish_start = False
    lam, consensus, iterations, converged = _admm(G, g, layout, mu, active, lam0, settings, D, polish_start)
    lam = least_norm_where_solved(G, g, lam, layout, mu, active, D, settings, converged)
    return lam, jnp.stack([consensus, (trips + iterations).astype(g.dtype), converged.astype(g.dtype)])


def uncertain_contacts(lam, sigma, layout, mu, active, slip_tol):
    """Per contact: whether it touches and sticks by its impulse (inside its cone, :func:`guess_modes`) and yet
    slips (‖σ_t‖ > ``slip_tol``), so that its mode is in doubt (:func:`candidate_modes`)."""
    _, sticking, _, _ = guess_modes(lam, sigma, layout, mu, active, slip_tol)
    return sticking & (_safe_norm(_split(sigma, layout)[2][:, 1:]) > slip_tol)


def candidate_modes(lam, sigma, layout, mu, active, slip_tol, count=None):
    """Modes to guess and verify where :func:`semismooth_newton` creeps, stacked on a leading axis of
    1 + ``count`` (default :data:`GUESSES`): the iterate's modes (:func:`guess_modes`) with every *uncertain* contact
    sliding — one that touches, sticks by its impulse (inside its cone) and yet slips (‖σ_t‖ > ``slip_tol``) —
    then with the i-th most slipping uncertain contact alone sliding, i < ``count``. An iterate creeping along G's
    null space (the squeeze between two feet) shows two such contacts slipping alike where the solution has one
    sliding and one sticking, and neither its velocities nor its impulses tell which (a quadruped in float32:
    either way round on two problems; the friction of the one that slides already opposes its slip in one, of the
    one that sticks in the other)."""
    separated, sticking, sliding, closed_u = guess_modes(lam, sigma, layout, mu, active, slip_tol)
    k = layout.n_contacts
    count = GUESSES if count is None else count
    slip = _safe_norm(_split(sigma, layout)[2][:, 1:])
    uncertain = uncertain_contacts(lam, sigma, layout, mu, active, slip_tol)
    order = jnp.argsort(jnp.where(uncertain, -slip, jnp.inf))[:count]
    alone = (jnp.arange(k)[None, :] == order[:, None]) & uncertain[None, :]
    slides = jnp.concatenate([uncertain[None], alone])
    n = slides.shape[0]
    tile = lambda x: jnp.broadcast_to(x, (n,) + x.shape)           # noqa: E731
    return tile(separated), sticking & ~slides, sliding | slides, tile(closed_u)


def penetrating_rows(modes, sigma, layout, active, velocity_tol):
    """(per contact, per one-sided row): whether it is open in ``modes`` (separated, sticking, sliding, closed_u;
    :func:`guess_modes`: a contact whose λ_n ≤ 0, a one-sided row not closed) and active, and yet penetrates
    (σ < −``velocity_tol``, per row; a contact's normal row), so that its mode is wrong."""
    separated, _, _, closed_u = modes
    _, su, sc = _split(sigma, layout)
    _, tu, tc = _split(velocity_tol, layout)
    _, au, ac = _split(active, layout)
    return separated & ac[:, 0] & (sc[:, 0] < -tc[:, 0]), ~closed_u & au & (su < -tu)


def exchanged_modes(lam, sigma, layout, mu, active, slip_tol, velocity_tol, count=None):
    """Modes to guess and verify where :func:`semismooth_newton` is stuck with an open contact that penetrates
    (:func:`penetrating_rows`), stacked on a leading axis of ``count`` (default :data:`EXCHANGES`): the
    iterate's modes (:func:`guess_modes`) with the most penetrating such contact closed (sliding where it slips by
    more than ``slip_tol``, else sticking) and the i-th least loaded touching contact (smallest λ_n) opened — an
    exchange of the active-set method (a box rocking from one corner to its neighbour). Closing the contact alone
    leaves a box on four coplanar sliding corners whose normal velocities cannot all be 0 (a float32 incline at
    batch 256: the iterate came back to one corner open and penetrating at 1.5e-6 m/s, 341 trips); the solution has
    it closed and another corner open, and neither velocities nor impulses at the iterate tell which."""
    modes = guess_modes(lam, sigma, layout, mu, active, slip_tol)
    separated, sticking, sliding, closed_u = modes
    k = layout.n_contacts
    count = min(EXCHANGES if count is None else count, k)
    _, _, lc = _split(lam, layout)
    _, _, sc = _split(sigma, layout)
    pen = penetrating_rows(modes, sigma, layout, active, velocity_tol)[0]
    i = jnp.argmax(jnp.where(pen, -sc[:, 0], -jnp.inf))
    closes = (jnp.arange(k) == i) & pen[i]
    slips = _safe_norm(sc[:, 1:]) > slip_tol
    order = jnp.argsort(jnp.where(~separated & ~closes, lc[:, 0], jnp.inf))[:count]
    opens = (jnp.arange(k)[None, :] == order[:, None]) & (~separated & ~closes)[None, :]
    return ((separated & ~closes)[None] | opens, ((sticking | (closes & ~slips))[None]) & ~opens,
            ((sliding | (closes & slips))[None]) & ~opens, jnp.broadcast_to(closed_u, (count,) + closed_u.shape))


EXCHANGES = 3
""":func:`exchanged_modes` guesses at most this many contacts to open."""
GUESSES = 2
""":func:`candidate_modes` guesses at most this many single sliding contacts."""
GUESS_STEPS = 5
""":func:`semismooth_newton`'s guess and verify takes this many Newton steps of each guessed mode."""
GUESS_AFTER = 2
""":func:`semismooth_newton` guesses and verifies modes after this many trips in a row that lowered θ by less than :data:`CREEP_TRIP`."""


def fixed_mode_steps(Gm, gm, lam, layout, mu, active, modes, steps):
    """``steps`` Newton steps on the conditions of fixed ``modes`` (:func:`mode_residual`) from ``lam``, each the
    least-squares step of the mode system (:func:`mode_system`) on equilibrated rows (:func:`row_equilibration`),
    solved accurately by :func:`~mrds_jax.spatial.dense.damped_lstsq` (the normal equations' rounding, ulp ×
    cond², hides the sliding rows' small singular values in float32: the steps of :func:`mode_step` crept there,
    6.5e-4, 4.1e-4, 1.7e-4, where these converge, 6.5e-4, 3e-4, 1.9e-5), the open rows set to 0
    (:func:`open_rows`)."""
    def step(_, x):
        return open_rows(x + accurate_mode_step(Gm, gm, x, layout, mu, active, modes), layout, modes)

    return jax.lax.fori_loop(0, steps, step, lam)


def accurate_mode_step(Gm, gm, lam, layout, mu, active, modes):
    """The Newton step δ of fixed ``modes``' conditions (:func:`mode_residual`) at ``lam``: the least-squares
    solution of M δ = −F (:func:`mode_system`) on equilibrated rows (:func:`row_equilibration`) by Householder QR
    of the damped system (:func:`~mrds_jax.spatial.dense.damped_lstsq`, damping m ulp): :func:`mode_step`'s step
    without the normal equations' rounding, for the steps that must converge in float32 (:func:`fixed_mode_steps`).
    (Tried in the pivots of :func:`semismooth_newton`'s change of mode too: a float32 biped problem then took 220
    trips, not 13.)"""
    sigma = matmul(Gm, lam) + gm
    M, _, _ = mode_system(Gm, lam, sigma, layout, mu, active, modes)
    d = row_equilibration(M)
    return -damped_lstsq(d[:, None] * M, d * mode_residual(lam, sigma, layout, mu, active, modes),
                         M.shape[0] * jnp.finfo(M.dtype).eps)


def touching_modes(sigma, layout, active, slip_tol, velocity_tol=None):
    """The modes a solution's velocities show, for :func:`least_norm_impulses`: a contact is open where it separates
    (σ_n > ``velocity_tol``, per row; default 0), else sliding where it slips (‖σ_t‖ > ``slip_tol``), else sticking;
    a one-sided row is closed where σ ≤ ``velocity_tol``. Unlike :func:`guess_modes`, which reads λ, a contact that
    touches without pushing (λ = 0 = σ_n: the second of two contacts at one point, the solve's impulse all on the
    first) is closed, so that the selection may share the impulse with it."""
    tol = jnp.zeros_like(sigma) if velocity_tol is None else velocity_tol
    _, su, sc = _split(sigma, layout)
    _, tu, tc = _split(tol, layout)
    _, au, ac = _split(active, layout)
    separated = ~ac[:, 0] | (sc[:, 0] > tc[:, 0])
    sliding = ~separated & (_safe_norm(sc[:, 1:]) > slip_tol)
    return separated, ~separated & ~sliding, sliding, au & (su <= tu)


FRICTION_WEIGHT = 1e3
SELECTION_REFINEMENTS = 4
"""The weight of tangential impulses in :func:`least_norm_impulses`' norm (friction 1e6 times dearer than push)."""


def least_norm_impulses(Gm, gm, lam, layout, mu, active, slip_tol, tikhonov, velocity_tol=None):
    """The impulses that need the least friction, and of those the least norm, with the modes and constraint
    velocities of the solution ``lam`` (issue 58's one answer for indeterminate forces): the x of least ‖W x‖ with
    M x = M λ, M the mode system (:func:`mode_system` at the modes its velocities show, :func:`touching_modes`), W = 1 on normal,
    one-sided and bilateral rows and :data:`FRICTION_WEIGHT` on tangential ones: x = W⁻¹ (M W⁻¹)⁺ M λ
    (:func:`least_squares_factor`, iterated Tikhonov: :data:`SELECTION_REFINEMENTS` solves with one factor, each
    update in M W⁻¹'s row space, so the limit is the least-norm solution and the ε bias of one solve, 1e-7 where W
    makes columns small, is gone; Hanke & Groetsch 1998), the open rows exactly 0 (:func:`open_rows`). Along G's null space —
    four feet, two-point feet, four coplanar corners, a wedged peg, a grasped object — impulses change no velocity,
    and this removes them: a table on four feet carries no friction on flat ground (the plain least norm would
    trade some of the normal impulses' moment for friction at the feet), a wedged peg's squeeze is the least one.
    The norm is that of the row-scaled impulses (:func:`row_scaling`), Σ G_ii λ_i², an energy, so that rows of
    different units (forces, torques) weigh alike. The cones are not enforced: the caller keeps ``lam`` where x is
    no solution."""
    sigma = matmul(Gm, lam) + gm
    modes = touching_modes(sigma, layout, active, slip_tol, velocity_tol)
    M, _, _ = mode_system(Gm, lam, sigma, layout, mu, active, modes)
    w = _join(jnp.ones(layout.n_bilateral, Gm.dtype), jnp.ones(layout.n_unilateral, Gm.dtype),
              jnp.tile(jnp.array([1.0, FRICTION_WEIGHT, FRICTION_WEIGHT], Gm.dtype), (layout.n_contacts, 1)))
    Mw = M / w[None, :]
    # ε at √ulp: a factor of MᵀM + εI puts rounding / ε of each right-hand side into M's null space (1e-4 of it at
    # ε = 1e-12), the very component that is to be 0; the refinements remove the bias that ε puts in its range
    solve = least_squares_factor(Mw, max(float(tikhonov), float(jnp.finfo(Gm.dtype).eps) ** 0.5), _scale(Gm))
    b = matmul(M, lam)
    y = jnp.zeros_like(lam)
    for _ in range(SELECTION_REFINEMENTS):        # iterated Tikhonov: the least-norm solution, the ε bias removed
        y = y + solve(b - matmul(Mw, y))
    return open_rows(y / w, layout, modes)


def least_norm_where_solved(G, g, lam, layout, mu, active, D, settings, solved):
    """``lam`` replaced by :func:`least_norm_impulses` where it is a solution (``solved``) and so is that one, to
    the solve's tolerance and no less exactly but for rounding (:func:`solution_residual`); on the row-scaled
    problem."""
    Gm, gm, _ = _masked_problem(G, g, active)
    dtype = G.dtype
    tol = convergence_tolerance(gm / D, settings.tolerance)
    slip_tol = mode_tolerance(settings.mode_tol, dtype) * jnp.max(jnp.abs(gm), initial=jnp.finfo(dtype).tiny)
    x = least_norm_impulses(Gm, gm, lam, layout, mu, active, slip_tol, settings.tikhonov, D * tol) * active.astype(dtype)
    res_x = solution_residual(Gm, gm, x, layout, mu, active, D)
    res = solution_residual(Gm, gm, lam, layout, mu, active, D)
    # no less exact than the solve's answer, but for rounding (the dtype's floor of the tolerance)
    keep = solved & (res_x <= tol) & (res_x <= res + convergence_tolerance(gm / D, 0.0))
    return jnp.where(keep, x, lam)


_solve_core = jax.custom_jvp(_solve_fixed_modes, nondiff_argnums=(6, 7))


def _solve_core_jvp(layout, settings, primals, tangents):
    G, g, mu, active, lam0, D = primals
    dG, dg, dmu, _, _, _ = tangents
    lam, info = _solve_fixed_modes(G, g, mu, active, lam0, D, layout, settings)
    sigma = matmul(G, lam) + g
    M, Pmat, Qmu = _mode_jacobian_system(G, g, lam, sigma, layout, mu, active,
                                         mode_tolerance(settings.mode_tol, G.dtype))
    rhs = -matmul(Pmat, matmul(dG, lam) + dg) + matmul(Qmu, dmu)
    dlam = regularised_least_squares(M, rhs, settings.tikhonov, _scale(G))
    return (lam, info), (dlam * active.astype(G.dtype), jnp.zeros_like(info))


def row_equilibration(M):
    """D = 1/max|Mᵢ| per row (1 on rows of zeros): D M x = D b has the solutions of a consistent M x = b, on a
    matrix whose rows all have unit size (a sliding row μλ_n P_t G_t/‖σ_t‖ can be 1e6 times the others near the
    stick-slip switch)."""
    size = jnp.max(jnp.abs(M), axis=1)
    return jnp.where(size > 0, 1.0 / jnp.where(size > 0, size, 1.0), 1.0)


def derivative_regularisation(tikhonov, scale, MtM):
    """The Tikhonov weight ε of :func:`regularised_least_squares`: ``tikhonov`` × ``scale``², floored at m ulp of
    the dtype × max diag MᵀM, the rounding of MᵀM's entries (Higham 2002, §3.5): below it a rank-deficient MᵀM
    (redundant feet) is not numerically positive definite and its solve is inf/NaN (float32: 1e-12 < 2e-7)."""
    m = MtM.shape[0]
    floor = m * jnp.finfo(MtM.dtype).eps * jnp.max(jnp.diagonal(MtM), initial=0.0)
    return jnp.maximum(tikhonov * scale * scale, floor)


def regularised_least_squares(M, b, tikhonov, scale):
    """dλ = (MᵀM + εI)⁻¹ Mᵀ b on equilibrated rows (:func:`least_squares_factor`): Tikhonov-regularised least squares, the minimum-norm
    solution (to O(ε)) where M is rank-deficient (redundant rows), finite in float32 too
    (:func:`derivative_regularisation`)."""
    return least_squares_factor(M, tikhonov, scale)(b)


def least_squares_factor(M, tikhonov, scale):
    """b ↦ (MᵀM + εI)⁻¹ Mᵀ b on the rows equilibrated (:func:`row_equilibration`), factored once (Cholesky of the
    regularised normal matrix, ε by :func:`derivative_regularisation`: not Gauss-Jordan's explicit inverse, whose
    rounding along MᵀM's near-null space made float32 reverse-mode gradients 5 % off the float64 ones,
    tests/test_contact_float32.py); in its loop form, one column's operations (the solve's derivative is half of a
    gradient's program)."""
    d = row_equilibration(M)
    Me = d[:, None] * M
    MtM = matmul(Me.T, Me)
    L = cholesky(MtM + derivative_regularisation(tikhonov, scale, MtM) * jnp.eye(M.shape[0], dtype=M.dtype),
                 unrolled=False)
    return lambda b: cho_solve(L, matmul(Me.T, d * b), unrolled=False)


_solve_core.defjvp(_solve_core_jvp)


def validate_ncp_settings(settings, where="solve_ncp"):
    """Named errors for :class:`NCPSettings` that cannot work, before anything compiles: stages or iterations not
    integers ≥ 1, ρ ≤ 0, a negative proximal weight, Tikhonov term or mode tolerance, relaxation outside (0, 2)."""
    if not isinstance(settings, NCPSettings):
        raise validation.ArgumentError(f"{where}: the solver's settings must be an NCPSettings, got "
                                       f"{type(settings).__name__}")
    validation.count(settings.stages, "NCPSettings.stages", where)
    validation.count(settings.iterations, "NCPSettings.iterations", where)
    validation.positive(settings.rho, "NCPSettings.rho", where)
    validation.positive(settings.tolerance, "NCPSettings.tolerance", where)
    for name in ("prox", "tikhonov", "mode_tol"):
        validation.positive(getattr(settings, name), f"NCPSettings.{name}", where, allow_zero=True)
    if not isinstance(settings.sliding_polish, (bool, np.bool_)):
        raise validation.ArgumentError(f"{where}: NCPSettings.sliding_polish must be True or False (it chooses the "
                                       f"compiled program), got {settings.sliding_polish!r}")
    if settings.method not in ("newton", "admm"):
        raise validation.ArgumentError(f"{where}: NCPSettings.method must be 'newton' or 'admm', got "
                                       f"{settings.method!r}")
    validation.count(settings.newton_iterations, "NCPSettings.newton_iterations", where)
    validation.positive(settings.proximal, "NCPSettings.proximal", where)
    validation.positive(settings.regularisation, "NCPSettings.regularisation", where, allow_zero=True)
    if validation.is_traced(settings.relaxation) or not 0.0 < float(settings.relaxation) < 2.0:
        raise validation.ArgumentError(f"{where}: NCPSettings.relaxation must be a number in (0, 2) (ADMM converges "
                                       f"there; 1 is plain ADMM), got {settings.relaxation}")
    return settings


def validate_ncp_problem(G, g, layout, mu, active=None, lam0=None, settings=NCPSettings(), where="solve_ncp"):
    """Named errors (:class:`~mrds_jax.validation.ArgumentError`) for a problem :func:`solve_ncp` cannot solve, as
    ``simulate``'s inputs are checked: shapes that do not fit ``layout`` (G not square (m, m), g, μ, ``active`` or
    the warm start not of their lengths) and settings that cannot work (stages or iterations < 1, ρ ≤ 0, relaxation
    outside (0, 2)); on concrete values also NaN/inf in G, g, μ or the warm start, μ < 0, and a G that is not
    symmetric positive semidefinite (its smallest eigenvalue below −1e-9 of its largest, −64 ulp in float32: no
    impulse minimises the problem's energy). Traced values are checked for their shapes only."""
    if not isinstance(layout, RowLayout):
        raise validation.ArgumentError(f"{where}: layout must be a RowLayout, got {type(layout).__name__}")
    m = layout.size
    shapes = dict(G=((m, m), G), g=((m,), g), mu=((layout.n_contacts,), mu))
    if active is not None:
        shapes["active"] = ((m,), active)
    if lam0 is not None:
        shapes["lam0 (warm start)"] = ((m,), lam0)
    for name, (shape, x) in shapes.items():
        if jnp.shape(x) != shape and not (name == "mu" and jnp.size(x) == layout.n_contacts):
            raise validation.ArgumentError(f"{where}: {name} has shape {jnp.shape(x)}, needs {shape} for the layout's "
                                           f"{m} rows ({layout.n_bilateral} bilateral, {layout.n_unilateral} one-sided, "
                                           f"{layout.n_contacts} contacts of 3)")
    validate_ncp_settings(settings, where)
    for name, x in (("G", G), ("g", g), ("mu", mu), ("lam0 (warm start)", lam0)):
        if x is not None:
            validation.finite(x, name, where)
    if not validation.is_traced(mu) and np.any(np.asarray(mu) < 0):
        raise validation.ArgumentError(f"{where}: friction coefficients mu must be >= 0, got {np.asarray(mu).tolist()}")
    if not validation.is_traced(G) and m:
        Gs = 0.5 * (np.asarray(G, float) + np.asarray(G, float).T)
        w = np.linalg.eigvalsh(Gs)
        floor = max(1e-9, 64 * float(jnp.finfo(jnp.asarray(G).dtype).eps))    # a float32 G is PSD to its rounding
        if w[0] < -floor * max(abs(w[-1]), np.finfo(float).tiny):
            raise validation.ArgumentError(f"{where}: G must be symmetric positive semidefinite (a Delassus matrix "
                                           f"J H⁻¹ Jᵀ); its smallest eigenvalue is {w[0]:.3g} (largest {w[-1]:.3g})")


def solve_ncp(G, g, layout, mu, active=None, lam0=None, settings=NCPSettings()):
    """Solve the step's NCP (module docstring) for impulses λ: ``G`` (m, m) the Delassus matrix, ``g`` (m,) the
    free constraint velocities with drift terms, ``layout`` a :class:`RowLayout`, ``mu`` (n_contacts,) friction
    coefficients, ``active`` (m,) bool (default all), ``lam0`` a warm start (default 0). Returns
    :class:`NCPSolution`; differentiable (forward and reverse) by implicit differentiation at the solution."""
    validate_ncp_problem(G, g, layout, mu, active, lam0, settings)
    G, g = jnp.asarray(G), jnp.asarray(g)
    m = layout.size
    dtype = g.dtype
    mu = jnp.asarray(mu, dtype).reshape(layout.n_contacts)
    active = jnp.ones(m, bool) if active is None else jnp.asarray(active, bool)
    lam0 = jnp.zeros(m, dtype) if lam0 is None else jnp.asarray(lam0, dtype)
    G = 0.5 * (G + G.T)
    if m == 0:                              # nothing to solve (a step whose buffer of active rows is empty)
        zero = jnp.zeros((), dtype)
        return NCPSolution(g, g, zero, zero, zero, jnp.zeros((), jnp.int32), jnp.ones((), bool))
    mu = no_slip_friction(mu)
    D = jax.lax.stop_gradient(row_scaling(G, layout))          # λ = D λ̃ holds for any D: no derivative through it
    Gs, gs = D[:, None] * G * D[None, :], D * g
    lam_s, info = _solve_core(Gs, gs, mu, active, jax.lax.stop_gradient(lam0 / D), D, layout, settings)
    info = jax.lax.stop_gradient(info)
    lam = D * lam_s
    sigma = matmul(G, lam) + g
    primal, dual, comp = ncp_residuals(G, g, lam, layout, mu, active)
    # converged: the returned impulses' own residual, evaluated as the loops evaluate it (on the row-scaled problem,
    # in the units of the original one), so that the flag, the warning and the reported residuals say the same
    # thing. Evaluated on the unscaled problem instead, its float32 rounding (a few % of the 64-ulp tolerance) put
    # steps that the loops had stopped on, and that an independent float64 residual puts at 0.99 of the tolerance,
    # above it (a four-loop biped's and a quadruped's rollout: one step each reported unconverged)
    a = active.astype(dtype)
    Gm, gm, _ = _masked_problem(Gs, gs, active)
    res = jax.lax.stop_gradient(solution_residual(Gm, gm, lam_s, layout, mu, active, D))
    converged = res <= convergence_tolerance(gm / D, settings.tolerance)
    return NCPSolution(lam, sigma * a, primal, dual, comp, info[1].astype(jnp.int32), converged)
