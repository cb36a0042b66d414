"""The constraint-space solve Bᶜ Fᶜ = yᶜ (Bonaventura eq. 87) and its policy for singular or redundant
constraints.

Bᶜ = ψᶜᵀ B ψᶜ is symmetric positive semi-definite (B = Σₖ Gₖ Hₖ⁻¹ Gₖᵀ). It is positive definite when the
contacts' constrained directions are independent; it is singular when they are redundant (a spatial
revolute closing a planar loop, the Bennett linkage: dependent rows everywhere) or at a singular
configuration (§6.4). Numerically, "singular" is never exact: a few 1e-7 off the constraint manifold (an RK4
stage) the redundant directions of Bᶜ get eigenvalues of order 1e-14 · ‖Bᶜ‖ instead of 0, and yᶜ a small
component along them. An exact solve of that nearly singular system enforces the redundant direction with
forces ~ yᶜ/λ (large, and wrong: the reduced-coordinate motion does not see them), so the default drops it.

Methods (``SolverSettings.method``):

``"pinv"`` (default): the minimum-norm least-squares solution with a relative cut,
    Fᶜ = B̃⁺ yᶜ,   B̃ = L Lᵀ from Cholesky with diagonal pivoting of Bᶜ, pivots ≤ ``regularization`` ·
    max diag Bᶜ dropped (:func:`mrds_jax.spatial.dense.psd_pinv_solve`). **Guarantees**, for finite input:
    (i) ‖Bᶜ − B̃‖₂ ≤ (n_C − r) · ``regularization`` · max diag Bᶜ (r = the rank kept); (ii) Fᶜ ∈ range(B̃) and
    B̃ Fᶜ = P yᶜ, P the orthogonal projection onto range(B̃): the part of yᶜ outside range(B̃) (an inconsistent
    right-hand side, e.g. off the manifold) is ignored, and of all such Fᶜ this is the shortest — the
    minimum-norm constraint forces that Pinocchio and the reduced-coordinate model give for redundant
    constraints; (iii) at full numerical rank (every pivot kept) Fᶜ = Bᶜ⁻¹ yᶜ exactly (to rounding,
    ≈ ε · cond Bᶜ); (iv) never NaN (Bᶜ = 0 gives Fᶜ = 0); (v) differentiable: a custom JVP, the derivative of
    the pseudo-inverse at constant rank (exact wherever the rank does not change; the discrete pivot choice is
    not differentiated). No LAPACK call (fused under ``vmap``; docs/known_traps.md): n_C argmax-pivoted
    column steps, the inverse of the n_C x n_C Gram matrix LᵀL (Gauss-Jordan) and four products with it; the fast
    path of full numerical rank, one unpivoted Gauss-Jordan inverse of Bᶜ, taken only where 1 / max diag of that
    inverse (λ_min to within a factor n_C, so a redundant direction cannot hide behind large pivots) exceeds the
    cut (:func:`mrds_jax.spatial.dense.psd_pinv_solve`).
    What it does not do: a genuinely independent constraint whose pivot falls below the cut (a configuration
    within ~√``regularization`` of a singular one) is dropped too, i.e. not enforced at that instant; the
    ``rank`` and ``min_pivot`` outputs show it, and :func:`~mrds_jax.system.simulate` warns.
``"proximal"``: proximal-point iterations (the scheme of Pinocchio's ``ProximalSettings``)
    F₀ = 0,   F_{k+1} = F_k + (Bᶜ + μ1)⁻¹ (yᶜ − Bᶜ F_k),   μ = ``regularization`` · max(diag Bᶜ),
    ``iterations`` times. Exact for well-conditioned Bᶜ and minimum-norm for exactly singular Bᶜ with an
    exactly consistent yᶜ, but not in between: a near-null eigenvalue λ ≪ μ is partly enforced (force
    ≈ k·y_λ/μ after k iterations), which is what moved the Bennett linkage off its reduced-coordinate
    motion by 4e-2 rad in 2 s (``tests/test_hard_mechanisms.py``). Kept for comparison.
``"cholesky"``: one plain Cholesky solve — exact for well-posed systems; NaN when Bᶜ is not numerically
    positive definite (use only when the constraints are known independent; Lilly & Orin's fast path solves
    this way).
``"lstsq"``: minimum-norm least squares by a symmetric eigendecomposition (LAPACK ``eigh``) with relative
    cut-off ``regularization`` on the eigenvalues: the same answer as "pinv" up to the cut's rule; its
    derivative is undefined at repeated eigenvalues (avoid under ``jax.grad``).

Defaults depend on the dtype: float64 ``regularization = 1e-9``, float32 ``1e-4``; ``iterations = 4``
("proximal" only).

Besides Fᶜ every method returns the relative residual ‖Bᶜ Fᶜ − yᶜ‖ / ‖yᶜ‖ (large when yᶜ is inconsistent:
a truly singular situation), the rank kept and ``min_pivot`` ≈ λ_min/λ_max of the part solved (the inverse
condition number; for "cholesky"/"proximal" the smallest squared Cholesky pivot over max diag Bᶜ).
"""
from typing import NamedTuple, Optional

import jax.numpy as jnp

from ..spatial.dense import psd_pinv_solve
from ..spatial.linalg import cho_solve, cholesky, matmul

METHODS = ("pinv", "proximal", "cholesky", "lstsq")


class SolverSettings(NamedTuple):
    method: str = "pinv"
    regularization: Optional[float] = None   # None: 1e-9 (float64) / 1e-4 (float32)
    iterations: int = 4


class ConstraintSolve(NamedTuple):
    """Result of :func:`solve_constraint_system`."""
    F: jnp.ndarray           # (n_C,) Fᶜ
    residual: jnp.ndarray    # ‖Bᶜ Fᶜ − yᶜ‖ / ‖yᶜ‖
    rank: jnp.ndarray        # rank of the part of Bᶜ solved (float)
    min_pivot: jnp.ndarray   # ≈ λ_min / λ_max of that part (inverse condition number); 1 when n_C = 0


def _default_regularization(dtype):
    return 1e-9 if jnp.finfo(dtype).bits >= 64 else 1e-4


def regularization(settings, dtype):
    """The relative cut (or proximal weight) that ``settings`` means for ``dtype``."""
    return _default_regularization(dtype) if settings.regularization is None else settings.regularization


def _cholesky_pivot_ratio(L, scale):
    d = jnp.diagonal(L)
    return jnp.min(d * d) / scale


def solve_constraint_system(Bc, yc, settings=SolverSettings()):
    """Solve Bᶜ Fᶜ = yᶜ (Bonaventura eq. 87) by ``settings``; returns :class:`ConstraintSolve`. See module docstring."""
    if settings.method not in METHODS:
        raise ValueError(f"unknown constraint solver {settings.method!r}; use one of {METHODS}")
    n = yc.shape[0]
    one = jnp.ones((), dtype=yc.dtype)
    if n == 0:
        return ConstraintSolve(yc, jnp.zeros((), dtype=yc.dtype), 0 * one, one)
    reg = regularization(settings, Bc.dtype)
    Bc = 0.5 * (Bc + Bc.T)
    scale = jnp.maximum(jnp.max(jnp.abs(jnp.diag(Bc))), jnp.finfo(Bc.dtype).tiny)
    rank = n * one
    if settings.method == "pinv":
        F, rank, ratio, _ = psd_pinv_solve(Bc, yc, reg)
    elif settings.method == "cholesky":
        L = cholesky(Bc)
        F = cho_solve(L, yc)
        ratio = _cholesky_pivot_ratio(L, scale)
    elif settings.method == "lstsq":
        w, V = jnp.linalg.eigh(Bc)
        keep = w > reg * scale
        w_inv = jnp.where(keep, 1.0 / jnp.where(keep, w, 1.0), 0.0)
        F = matmul(V, w_inv * (matmul(V.T, yc)))
        rank = jnp.sum(keep).astype(yc.dtype)
        ratio = jnp.min(jnp.where(keep, w, jnp.inf)) / jnp.maximum(w[-1], jnp.finfo(Bc.dtype).tiny)
        ratio = jnp.where(rank > 0, ratio, 0.0)
    else:
        L = cholesky(Bc + (reg * scale) * jnp.eye(n, dtype=Bc.dtype))
        F = jnp.zeros_like(yc)
        for _ in range(settings.iterations):
            F = F + cho_solve(L, yc - matmul(Bc, F))
        ratio = _cholesky_pivot_ratio(L, scale)
    residual = jnp.linalg.norm(matmul(Bc, F) - yc) / jnp.maximum(jnp.linalg.norm(yc), jnp.finfo(yc.dtype).tiny)
    return ConstraintSolve(F, residual, rank, ratio)
