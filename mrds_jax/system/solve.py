"""The constraint-space solve Bᶜ Fᶜ = yᶜ (Bonaventura eq. 87) and its policy for singular or redundant
constraints.

Bᶜ = ψᶜᵀ B ψᶜ is symmetric positive semi-definite (B = Σₖ Gₖ Hₖ⁻¹ Gₖᵀ). It is positive definite when the
contacts' constrained directions are independent; it is singular when they are redundant (e.g. a
spatial revolute closing a planar loop: the out-of-plane rows are dependent) or at a singular
configuration (§6.4).

Methods (``SolverSettings.method``):

``"proximal"`` (default): proximal-point iterations (the scheme of Pinocchio's ``ProximalSettings``)
    F₀ = 0,   F_{k+1} = F_k + (Bᶜ + μ1)⁻¹ (yᶜ − Bᶜ F_k),   μ = ``regularization`` · max(diag Bᶜ),
    one Cholesky factorisation of the always positive-definite Bᶜ + μ1, then ``iterations`` pairs of
    triangular solves (both without LAPACK, :mod:`mrds_jax.spatial.linalg`: fused under ``vmap``). For
    non-singular Bᶜ the error contracts by μ/(λ_min + μ) per iteration, so with the
    defaults it is exact to rounding unless Bᶜ is ill-conditioned beyond ~1/``regularization``. For
    singular Bᶜ with a consistent yᶜ (redundant constraints) it converges to the **minimum-norm** Fᶜ
    (starting from 0, no component ever enters the null space of Bᶜ) — the answer Pinocchio returns. For
    finite inputs it never produces NaN, and it is differentiable (no branches). Use the returned
    ``residual`` = ‖Bᶜ Fᶜ − yᶜ‖ / ‖yᶜ‖ to detect inconsistent (truly singular) situations.
``"cholesky"``: one plain Cholesky solve — the fastest, exact for well-posed systems; returns NaN when Bᶜ
    is not numerically positive definite (use only when the constraints are known independent).
``"lstsq"``: minimum-norm least squares by a symmetric eigendecomposition with relative cut-off
    ``regularization``; robust, but its derivative is undefined at repeated eigenvalues (avoid under
    ``jax.grad``).

Defaults depend on the dtype: float64 ``regularization = 1e-9``, float32 ``1e-4``; ``iterations = 4``.
"""
from typing import NamedTuple, Optional

import jax.numpy as jnp

from ..spatial.linalg import cholesky, matmul, spd_solve, triangular_solve

METHODS = ("proximal", "cholesky", "lstsq")


class SolverSettings(NamedTuple):
    method: str = "proximal"
    regularization: Optional[float] = None   # None: 1e-9 (float64) / 1e-4 (float32)
    iterations: int = 4


def _default_regularization(dtype):
    return 1e-9 if jnp.finfo(dtype).bits >= 64 else 1e-4


def solve_constraint_system(Bc, yc, settings=SolverSettings()):
    """Solve Bᶜ Fᶜ = yᶜ (eq. 87) by ``settings``; returns (Fᶜ, relative residual). See module docstring."""
    if settings.method not in METHODS:
        raise ValueError(f"unknown constraint solver {settings.method!r}; use one of {METHODS}")
    n = yc.shape[0]
    if n == 0:
        return yc, jnp.zeros((), dtype=yc.dtype)
    reg = settings.regularization
    reg = _default_regularization(Bc.dtype) if reg is None else reg
    Bc = 0.5 * (Bc + Bc.T)
    scale = jnp.maximum(jnp.max(jnp.abs(jnp.diag(Bc))), jnp.finfo(Bc.dtype).tiny)
    if settings.method == "cholesky":
        F = spd_solve(Bc, yc)
    elif settings.method == "lstsq":
        w, V = jnp.linalg.eigh(Bc)
        keep = w > reg * scale
        w_inv = jnp.where(keep, 1.0 / jnp.where(keep, w, 1.0), 0.0)
        F = matmul(V, w_inv * (matmul(V.T, yc)))
    else:
        L = cholesky(Bc + (reg * scale) * jnp.eye(n, dtype=Bc.dtype))
        F = jnp.zeros_like(yc)
        for _ in range(settings.iterations):
            F = F + triangular_solve(L, triangular_solve(L, yc - matmul(Bc, F)), lower=False)
    residual = jnp.linalg.norm(matmul(Bc, F) - yc) / jnp.maximum(jnp.linalg.norm(yc), jnp.finfo(yc.dtype).tiny)
    return F, residual
