"""General small dense linear algebra without LAPACK: square solves (LU with partial pivoting) and singular
values (one-sided Jacobi), for code that is batched by ``jax.vmap``.

Why: a batched ``jnp.linalg.solve`` / ``svd`` / ``lstsq`` is a LAPACK custom call on the CPU, and jax/jaxlib
0.10.x can deadlock in batched LAPACK factorisations inside ``jit(vmap(...))`` on 2-core CPUs
(docs/known_traps.md). The functions here are ordinary JAX
arithmetic (``where``/``argmax`` pivoting, slices, elementwise updates), so a vmapped caller lowers to no
custom call at all. ``spatial.linalg`` covers the symmetric positive-definite case (Cholesky).

* :func:`lu_factor` / :func:`lu_solve` — PA = LU with partial pivoting (row of largest |entry| in the column,
  found by ``argmax``, swapped in by ``where``): unrolled for n ≤ ``UNROLL_MAX``, a ``lax.fori_loop`` over
  columns above (one masked rank-1 update per column).
* :func:`solve` — A⁻¹ b like ``jnp.linalg.solve`` (b of shape (n,) or (n, k)), with a custom JVP
  dx = A⁻¹ (db − dA x) that reuses the factorisation (reverse mode transposes it).
* :func:`singular_values` — σ of an (m, n) matrix, m ≥ n, descending, by one-sided Jacobi (Hestenes)
  rotations of the columns in Brent–Luk's parallel order (n/2 disjoint pairs per round, one round traced);
  custom JVP dσᵢ = uᵢᵀ dA vᵢ (exact for distinct σ). :func:`condition_number` σ_max/σ_min.

* :func:`damped_lstsq` — damped (Tikhonov) least squares by Householder QR of the stacked matrix, accurate where
  the normal equations lose the small singular values (the contact solve's guess-and-verify steps).
* :func:`psd_pinv_solve` — the minimum-norm least-squares solution B̃⁺ y of a symmetric positive
  semi-definite system by Cholesky with diagonal pivoting and a relative cut (rank-revealing), with the
  pseudo-inverse's custom JVP; the constraint solve's default (:mod:`mrds_jax.system.solve`).

General least squares with rank-deficient rectangular matrices (``lstsq`` with ``rcond``) is not replaced:
see README.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .batching import fast_or_fallback
from .linalg import matmul, spd_inverse

UNROLL_MAX = 12     # matrices up to this size are factorised by unrolled code, larger ones in a fori_loop
JACOBI_SWEEPS = 10  # cyclic sweeps of one-sided Jacobi (quadratic convergence: 6x6 needs ~5 in float64)


def _swap_rows(X, k, p):
    """Rows k (static or traced) and p (traced) of X exchanged, by selects against row masks (no gather or
    scatter, no nested ``jit``)."""
    rows = jax.lax.broadcasted_iota(jnp.int32, X.shape, 0)
    zero = jnp.zeros_like(X)
    at_k, at_p = rows == k, rows == p
    xk = jnp.sum(jax.lax.select(at_k, X, zero), axis=0, keepdims=True)
    xp = jnp.sum(jax.lax.select(at_p, X, zero), axis=0, keepdims=True)
    return jax.lax.select(at_k, jnp.broadcast_to(xp, X.shape), jax.lax.select(at_p, jnp.broadcast_to(xk, X.shape), X))


def _lu_unrolled(A):
    n = A.shape[0]
    piv = []
    for k in range(n):
        p = k + jnp.argmax(jnp.abs(A[k:, k]))
        A = _swap_rows(A, k, p)
        piv.append(p)
        if k + 1 < n:
            l = A[k + 1:, k] / A[k, k]
            A = A.at[k + 1:, k].set(l).at[k + 1:, k + 1:].add(-l[:, None] * A[k, k + 1:][None, :])
    return A, jnp.stack(piv)


def _lu_loop(A):
    n = A.shape[0]
    idx = jnp.arange(n)

    def body(k, carry):
        A, piv = carry
        colk = jax.lax.dynamic_index_in_dim(A, k, axis=1, keepdims=False)
        p = jnp.argmax(jnp.where(idx >= k, jnp.abs(colk), -1.0))
        A = _swap_rows(A, k, p)
        colk = jax.lax.dynamic_index_in_dim(A, k, axis=1, keepdims=False)
        rowk = jax.lax.dynamic_index_in_dim(A, k, axis=0, keepdims=False)
        below = idx > k
        l = jnp.where(below, colk / jnp.sum(jnp.where(idx == k, colk, 0)), 0)
        A = A - l[:, None] * jnp.where(below, rowk, 0)[None, :]
        A = jnp.where(below[:, None] & (idx[None, :] == k), l[:, None], A)
        return A, piv.at[k].set(p.astype(piv.dtype))

    return jax.lax.fori_loop(0, n, body, (A, jnp.zeros(n, jnp.int32)))


def lu_factor(A):
    """(LU, piv): unit-lower L and upper U packed in one (n, n) array, and the row exchanged with row k at
    step k (LAPACK's getrf convention, 0-based). No LAPACK call."""
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"lu_factor needs a square matrix, got shape {A.shape}")
    return _lu_unrolled(A) if A.shape[0] <= UNROLL_MAX else _lu_loop(A)


def _substitute_unrolled(LU, b):
    """U⁻¹ L⁻¹ b for the packed factors, one row of the solution at a time: yᵢ = bᵢ − Lᵢ,:ᵢ y:ᵢ (unit lower),
    then xᵢ = (yᵢ − Uᵢ,ᵢ₊₁: xᵢ₊₁:) / Uᵢᵢ."""
    n = LU.shape[0]
    y = b[:1]
    for i in range(1, n):                                # L y = b, unit diagonal
        y = jnp.concatenate([y, (b[i] - matmul(LU[i, :i], y))[None]])
    x = y[n - 1:] / LU[n - 1, n - 1]
    for i in reversed(range(n - 1)):                     # U x = y
        x = jnp.concatenate([((y[i] - matmul(LU[i, i + 1:], x)) / LU[i, i])[None], x])
    return x


def _substitute_loop(LU, b):
    n = LU.shape[0]
    idx = jnp.arange(n)
    shape = (-1,) + (1,) * (b.ndim - 1)

    def forward(i, y):
        li = jnp.where(idx < i, jax.lax.dynamic_index_in_dim(LU, i, axis=0, keepdims=False), 0)
        yi = jax.lax.dynamic_index_in_dim(y, i, axis=0, keepdims=False) - jnp.sum(li.reshape(shape) * y, axis=0)
        return jnp.where((idx == i).reshape(shape), yi, y)

    def backward(k, x):
        i = n - 1 - k
        ui = jax.lax.dynamic_index_in_dim(LU, i, axis=0, keepdims=False)
        uii = jnp.sum(jnp.where(idx == i, ui, 0))
        ui = jnp.where(idx > i, ui, 0)
        xi = (jax.lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False) - jnp.sum(ui.reshape(shape) * x, axis=0)) / uii
        return jnp.where((idx == i).reshape(shape), xi, x)

    y = jax.lax.fori_loop(0, n, forward, b)
    return jax.lax.fori_loop(0, n, backward, y)


def lu_solve(lu_piv, b):
    """A⁻¹ b from ``lu_factor(A)``; b of shape (n,) or (n, k). Linear in b (so differentiable and
    transposable in b)."""
    LU, piv = lu_piv
    b = jnp.asarray(b)
    n = LU.shape[0]
    if b.shape[:1] != (n,) or b.ndim > 2:
        raise ValueError(f"lu_solve: right-hand side of shape {b.shape} for a {n}x{n} matrix")
    b = b.astype(jnp.result_type(LU, b))
    if n <= UNROLL_MAX:
        for k in range(n):
            b = _swap_rows(b, k, piv[k])
        return _substitute_unrolled(LU, b)
    b = jax.lax.fori_loop(0, n, lambda k, b: _swap_rows(b, k, piv[k]), b)
    return _substitute_loop(LU, b)


@jax.custom_jvp
def solve(A, b):
    """A⁻¹ b for a square A (``jnp.linalg.solve`` semantics for b of shape (n,) or (n, k)) by LU with partial
    pivoting, without LAPACK. A singular A gives inf/NaN, as LAPACK does."""
    return lu_solve(lu_factor(A), b)


@solve.defjvp
def _solve_jvp(primals, tangents):
    A, b = primals
    dA, db = tangents
    f = lu_factor(A)
    x = lu_solve(f, b)
    return x, lu_solve(f, db - matmul(dA, x))


def damped_lstsq(A, b, sqrt_eps):
    """argmin_x ‖A x − b‖² + ε ‖x‖² for A (m, n), b (m,), ε = ``sqrt_eps``² > 0, by Householder QR of the stacked
    [A; √ε I] (Golub & Van Loan, *Matrix Computations*, 4th ed., Alg. 5.2.1; damped least squares as an ordinary
    one, §6.1.4): the reflectors applied to [b; 0] as they are formed, then back substitution on R, each a
    ``lax.fori_loop`` of n steps (one masked reflection of the remaining columns per step; no LAPACK). The rounding
    is ulp × cond of the stacked matrix, not the normal equations' ulp × cond(A)², which hides every singular value
    below √ulp × ‖A‖ (3e-4 in float32), so ε may be as small as (ulp × ‖A‖)²; R is nonsingular for any ε > 0
    (RᵀR = AᵀA + εI), and where A is rank-deficient the result is the minimum-norm solution to O(ε)."""
    A, b = jnp.asarray(A), jnp.asarray(b)
    m, n = A.shape
    dtype = A.dtype
    if n == 0:
        return jnp.zeros(0, dtype)
    S = jnp.concatenate([jnp.concatenate([A, b[:, None]], axis=1),
                         jnp.concatenate([sqrt_eps * jnp.eye(n, dtype=dtype), jnp.zeros((n, 1), dtype)], axis=1)])
    rows = jnp.arange(m + n)

    def reflect(k, S):
        x = jnp.where(rows >= k, _pick(S, k, 1), 0.0)
        norm = jnp.sqrt(jnp.sum(x * x))
        alpha = jnp.where(_pick(x, k, 0) >= 0, -norm, norm)        # the sign that avoids cancellation in v_k
        v = jnp.where(rows == k, x - alpha, x)
        vv = jnp.sum(v * v)
        beta = jnp.where(vv > 0, 2.0 / jnp.where(vv > 0, vv, 1.0), 0.0)
        return S - (beta * v)[:, None] * matmul(v, S)[None, :]

    S = jax.lax.fori_loop(0, n, reflect, S)
    R, c = S[:n, :n], S[:n, n]
    idx = jnp.arange(n)

    def back(step, x):
        i = n - 1 - step
        row = _pick(R, i, 0)
        xi = (_pick(c, i, 0) - jnp.sum(jnp.where(idx > i, row * x, 0.0))) / _pick(row, i, 0)
        return jnp.where(idx == i, xi, x)

    return jax.lax.fori_loop(0, n, back, jnp.zeros(n, dtype))


def _jacobi_round(WV, _):
    """One round of parallel (Brent–Luk round-robin) one-sided Jacobi on columns kept in "pair layout":
    column i is paired with column n−1−i, and the n/2 pairs are rotated at once, each so that its two columns
    become orthogonal (Hestenes: ζ = (β − α)/2γ, t = sign ζ/(|ζ| + √(1+ζ²)), c = 1/√(1+t²), s = c t with
    α = ‖w_p‖², β = ‖w_q‖², γ = w_pᵀw_q). Then the columns move one place round the circle (column 0 fixed),
    so that after n−1 rounds every pair has met once: one cyclic sweep. W and V move together, so W = A V
    holds column by column throughout."""
    W, V = WV
    h = W.shape[1] // 2
    eps, tiny = jnp.finfo(W.dtype).eps, jnp.finfo(W.dtype).tiny
    wp, wq = W[:, :h], W[:, h:][:, ::-1]
    alpha, beta, gamma = jnp.sum(wp * wp, axis=0), jnp.sum(wq * wq, axis=0), jnp.sum(wp * wq, axis=0)
    skip = jnp.abs(gamma) <= eps * jnp.sqrt(alpha * beta) + tiny
    one = jnp.ones_like(gamma)
    zeta = (beta - alpha) / (2 * jax.lax.select(skip, one, gamma))
    t = jax.lax.select(zeta >= 0, one, -one) / (jnp.abs(zeta) + jnp.sqrt(1 + zeta * zeta))
    t = jax.lax.select(skip, jnp.zeros_like(t), t)
    c = 1 / jnp.sqrt(1 + t * t)
    sn = c * t

    def rotate_and_move(X):
        xp, xq = X[:, :h], X[:, h:][:, ::-1]
        X = jnp.concatenate([c * xp - sn * xq, (sn * xp + c * xq)[:, ::-1]], axis=1)
        return jnp.concatenate([X[:, :1], X[:, -1:], X[:, 1:-1]], axis=1)

    return (rotate_and_move(W), rotate_and_move(V)), None


def _jacobi(A, sweeps):
    """(W, V) with W = A V having mutually orthogonal columns and V orthogonal (one-sided Jacobi), by
    ``sweeps`` sweeps of :func:`_jacobi_round` in a ``lax.scan`` (one traced round, however large n). An odd
    number of columns gets a zero column appended, which no rotation touches (γ = 0) and which the caller
    drops; the columns come back in a permuted order (singular values are sorted afterwards)."""
    n = A.shape[1]
    W = A if n % 2 == 0 else jnp.concatenate([A, jnp.zeros_like(A[:, :1])], axis=1)
    N = W.shape[1]
    V = jnp.eye(N, dtype=A.dtype)
    if N < 2:
        return W, V
    (W, V), _ = jax.lax.scan(_jacobi_round, (W, V), None, length=sweeps * (N - 1))
    return W, V


def _singular_triplets(A):
    """(σ, W, V) of :func:`_jacobi` with σ = ‖columns of W‖, the n largest (the zero column of an odd n
    dropped), descending."""
    W, V = _jacobi(A, JACOBI_SWEEPS)
    s = jnp.sqrt(jnp.sum(W * W, axis=0))
    order = jnp.argsort(-s)[: A.shape[1]]
    return s[order], W[:, order], V[: A.shape[1], order]


@jax.custom_jvp
def singular_values(A):
    """Singular values of an (m, n) matrix with m ≥ n, descending (``jnp.linalg.svd(A, compute_uv=False)``),
    by ``JACOBI_SWEEPS`` sweeps of parallel-ordered one-sided Jacobi; no LAPACK call."""
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] < A.shape[1]:
        raise ValueError(f"singular_values needs an (m, n) matrix with m >= n, got shape {A.shape}")
    return _singular_triplets(A)[0]


@singular_values.defjvp
def _singular_values_jvp(primals, tangents):
    (A,), (dA,) = primals, tangents
    s, W, V = _singular_triplets(A)
    return s, jnp.sum(W * matmul(dA, V), axis=0) / s                # uᵢᵀ dA vᵢ with uᵢ = A vᵢ / σᵢ


def condition_number(A):
    """2-norm condition number σ_max/σ_min of an (m, n) matrix, m ≥ n (inf when σ_min = 0)."""
    s = singular_values(A)
    return s[0] / s[-1]


# ----------------------------------------------------------------------------- PSD pseudo-inverse solve
class PivotedCholesky(NamedTuple):
    """B ≈ B̃ = L Lᵀ from :func:`pivoted_cholesky` (columns of L in pivot order, the dropped ones zero)."""
    L: jnp.ndarray          # (n, n): of B / scale; column k is the k-th pivot's column; zero for k ≥ rank
    G_inv: jnp.ndarray      # (n, n) inverse of G = LᵀL + diag(dropped), the kept block's Gram matrix
    rank: jnp.ndarray       # number of pivots kept (float, so that it can ride along a custom JVP)
    min_pivot: jnp.ndarray  # smallest kept pivot / largest pivot ≈ λ_min(B̃)/λ_max(B): inverse conditioning
    max_dropped: jnp.ndarray  # largest dropped pivot / largest pivot (0 at full rank): ≥ ‖B − B̃‖₂/(n·scale)
    scale: jnp.ndarray      # max diag B: B̃ = scale · L Lᵀ (the factorisation is of B / scale, so no overflow)


def _pick(X, j, axis):
    """X[j] along ``axis`` for a traced j, by ``where`` and a sum (no gather)."""
    idx = jnp.arange(X.shape[axis])
    mask = (idx == j) if X.ndim == 1 else (idx == j).reshape((-1, 1) if axis == 0 else (1, -1))
    return jnp.sum(jnp.where(mask, X, 0), axis=axis)


def pivoted_cholesky(B, cut):
    """Outer-product Cholesky of a symmetric PSD B (n x n) with diagonal pivoting (Higham, *Accuracy and
    Stability of Numerical Algorithms*, §10.3): at step k the largest remaining diagonal entry dⱼ of the Schur
    complement is the pivot; it is kept while dⱼ > ``cut`` · max diag(B), after which every later step is
    dropped too (the pivots never increase). Then B − B̃ (B̃ = scale · L Lᵀ) is the remaining Schur
    complement: PSD with diagonal ≤ cut · max diag B, so ‖B − B̃‖₂ ≤ trace ≤ (n − rank) · cut · max diag B.
    B is divided by scale = max diag B first. No LAPACK; one ``lax.scan`` over the n steps (never unrolled: it is
    the rare fallback of :func:`psd_pinv_solve`, and unrolled it tripled the compile time of the dual-arm step).
    Returns :class:`PivotedCholesky`."""
    n = B.shape[0]
    dtype = B.dtype
    idx = jnp.arange(n)
    scale = jnp.maximum(jnp.max(jnp.diagonal(B)), jnp.finfo(dtype).tiny)
    B = B / scale
    diag = jnp.diagonal(B)

    def step(k, carry):
        L, d, used, kept, first = carry
        j = jnp.argmax(jnp.where(used, -jnp.inf, d))
        piv = _pick(d, j, 0)
        keep = kept & (piv > cut)
        col = (_pick(B, j, 1) - matmul(L, _pick(L, j, 0))) / jnp.sqrt(jnp.where(keep, piv, 1.0))
        col = jnp.where(keep & ~used, col, 0.0)
        col = jnp.where(idx == j, jnp.where(keep, jnp.sqrt(jnp.where(keep, piv, 1.0)), 0.0), col)
        L = jnp.where(idx[None, :] == k, col[:, None], L)
        d = jnp.where(idx == j, 0.0, d - col * col)
        first = jnp.where(k == 0, piv, first)
        stats = (jnp.where(keep, piv, jnp.inf), jnp.where(keep, 0.0, piv))
        return (L, d, used | (idx == j), keep, first), stats

    carry = (jnp.zeros_like(B), diag, jnp.zeros(n, bool), jnp.asarray(True), jnp.zeros((), dtype))
    carry, (kept_piv, dropped_piv) = jax.lax.scan(lambda c, k: step(k, c), carry, jnp.arange(n))
    L = carry[0]
    kept = jnp.isfinite(kept_piv)
    G = matmul(L.T, L) + jnp.diag(jnp.where(kept, 0.0, 1.0).astype(dtype))
    top = jnp.maximum(carry[4], jnp.finfo(dtype).tiny)
    rank = jnp.sum(kept)
    min_pivot = jnp.where(rank > 0, jnp.min(jnp.where(kept, kept_piv, top)) / top, 0.0)
    return PivotedCholesky(L, spd_inverse(G), rank.astype(dtype), min_pivot, jnp.max(dropped_piv) / top, scale)


def _gram_solve(f, x):
    """G⁻¹ x with G = LᵀL (+ identity on the dropped columns)."""
    return matmul(f.G_inv, x)


def _pinv_apply(f, x):
    """B̃⁺ x = L G⁻² Lᵀ x / scale (L of full column rank on its kept columns: (LLᵀ)⁺ = (L⁺)ᵀ L⁺, L⁺ = G⁻¹ Lᵀ)."""
    return matmul(f.L, _gram_solve(f, _gram_solve(f, matmul(f.L.T, x)))) / f.scale


def _plain_factor(B, cut):
    """(B / scale)⁻¹ by Gauss-Jordan without pivoting (:func:`~mrds_jax.spatial.linalg.spd_inverse`,
    scale = max diag B), and whether B / scale is of full numerical rank at ``cut``: then B⁺ = B⁻¹ (the fast
    path of :func:`psd_pinv_solve`). Returns (inverse, scale, ok, min_pivot).

    The rank test reads the inverse's diagonal, not only the pivots met: 1/(A⁻¹)ᵢᵢ is the pivot index i would meet
    if it were eliminated last (the Schur complement of the rest), and for a symmetric positive-definite A
    λ_max(A⁻¹) ≤ trace A⁻¹ ≤ n · maxᵢ (A⁻¹)ᵢᵢ ≤ n · λ_max(A⁻¹), so

        λ_min(A) ≤ μ = 1 / maxᵢ (A⁻¹)ᵢᵢ ≤ n · λ_min(A)

    (rank-revealing to a factor n, as diagonal pivoting is: Higham, *Accuracy and Stability of Numerical
    Algorithms*, §10.3). The pivots in elimination order are not: the last one is 1/(A⁻¹)ₙₙ, which stays large when
    the near-null vector has a small n-th component (a redundant loop equation 1e-9 off its manifold gave
    pivots > 1e-9 with λ_min ~ 1e-12, and forces ~ yᶜ/λ_min along the redundant direction). ``ok`` holds when
    every pivot and μ exceed ``cut`` and every (A⁻¹)ᵢᵢ is positive; NaN fails it. ``min_pivot`` = min(pivots, μ)."""
    dtype = B.dtype
    scale = jnp.maximum(jnp.max(jnp.diagonal(B)), jnp.finfo(dtype).tiny)
    B_inv, pivots = spd_inverse(B / scale, pivots=True)
    eye = jnp.eye(B.shape[0], dtype=bool)
    last = jnp.where(B_inv > 0, 1 / B_inv, -1)                      # on the diagonal: μᵢ = 1/(A⁻¹)ᵢᵢ (or −1)
    min_pivot = jnp.min(jnp.where(eye, jnp.minimum(pivots[None, :], last), jnp.inf))   # one fused reduction
    return B_inv, scale, min_pivot > cut, min_pivot


def _solve_plain(B, y, cut):
    B_inv, scale, ok, min_pivot = _plain_factor(B, cut)
    x = matmul(B_inv, y) / scale
    one, zero = jnp.ones((), B.dtype), jnp.zeros((), B.dtype)
    return ok, (x, B.shape[0] * one, min_pivot, zero)


def _solve_pivoted(B, y, cut):
    f = pivoted_cholesky(B, cut)
    return _pinv_apply(f, y), f.rank, f.min_pivot, f.max_dropped


def _pinv_matrices_plain(B, cut):
    B_inv, scale, ok, min_pivot = _plain_factor(B, cut)
    n = B.shape[0]
    eye = jnp.eye(n, dtype=B.dtype)
    return ok, (B_inv / scale, eye, n * jnp.ones((), B.dtype), min_pivot, jnp.zeros((), B.dtype))


def _pinv_matrices_pivoted(B, cut):
    f = pivoted_cholesky(B, cut)
    LG = matmul(f.L, _gram_solve(f, jnp.eye(B.shape[0], dtype=B.dtype)))     # L G⁻¹
    return matmul(LG, LG.T) / f.scale, matmul(LG, f.L.T), f.rank, f.min_pivot, f.max_dropped


@functools.lru_cache(maxsize=None)
def _switched(cut, plain, pivoted):
    return fast_or_fallback(functools.partial(plain, cut=cut), functools.partial(pivoted, cut=cut))


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def psd_pinv_solve(B, y, cut):
    """Minimum-norm least-squares solution x = B̃⁺ y of B x = y for a symmetric positive semi-definite B,
    where B̃ = L Lᵀ is B with its pivots below ``cut`` · max diag(B) removed (:func:`pivoted_cholesky`:
    ‖B − B̃‖₂ ≤ (n − r) · cut · max diag B). So: x ∈ range(B̃), B̃ x = P y with P the projection onto range(B̃)
    (the part of y outside it — an inconsistent right-hand side — is ignored), and among those x the
    shortest. At full numerical rank B̃ = B and x = B⁻¹ y. Never NaN for finite B, y (B = 0 gives x = 0).

    Fast path: an unpivoted elimination of B / max diag B (Gauss-Jordan, :func:`_plain_factor`) whose pivots and
    1 / max diag of the inverse it gives (within a factor n of λ_min) all exceed ``cut`` shows B of full
    numerical rank; then x = B⁻¹ y by that inverse (rank n, ``min_pivot`` the smaller of the two, nothing
    dropped) and the pivoted factorisation is not run — under ``vmap`` it runs only when some scenario of the batch
    needs it (:func:`~mrds_jax.spatial.batching.fast_or_fallback`).

    Returns (x, rank, min_pivot, max_dropped) (:class:`PivotedCholesky` for the last three: rank and two
    relative pivot sizes, not differentiated). Custom JVP: the derivative of the pseudo-inverse at constant
    rank (Golub & Pereyra eq. 4.12, 1973, for symmetric B̃):
    dx = B̃⁺(dy − dB x) + B̃⁺² dB (1 − P) y + (1 − P) dB B̃⁺ x — so forward and reverse mode are
    exact where the rank does not change, and the discrete pivot choice is never differentiated."""
    return _switched(cut, _solve_plain, _solve_pivoted)(B, y)


@psd_pinv_solve.defjvp
def _psd_pinv_solve_jvp(cut, primals, tangents):
    B, y = primals
    dB, dy = tangents
    pinv, proj, rank, min_pivot, max_dropped = _switched(cut, _pinv_matrices_plain, _pinv_matrices_pivoted)(B)
    x = matmul(pinv, y)                                                # (primal only: the tangent path below
    r = y - matmul(proj, y)                                            #  is products, which transpose under
    Bx = matmul(dB, matmul(pinv, x))                                   #  reverse mode)
    dx = matmul(pinv, dy - matmul(dB, x) + matmul(pinv, matmul(dB, r))) + Bx - matmul(proj, Bx)
    zero = jnp.zeros((), dtype=B.dtype)
    return (x, rank, min_pivot, max_dropped), (dx, zero, zero, zero)
