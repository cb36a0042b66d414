"""General small dense linear algebra without LAPACK: square solves (LU with partial pivoting) and singular
values (one-sided Jacobi), for code that is batched by ``jax.vmap``.

Why: a batched ``jnp.linalg.solve`` / ``svd`` / ``lstsq`` is a LAPACK custom call on the CPU, and jax/jaxlib
0.10.x can deadlock in batched LAPACK factorisations inside ``jit(vmap(...))`` on 2-core CPUs
(``../shared/bench/jax_cpu_deadlock_repro.py``; README "Known trap"). The functions here are ordinary JAX
arithmetic (``where``/``argmax`` pivoting, slices, elementwise updates), so a vmapped caller lowers to no
custom call at all. ``spatial.linalg`` covers the symmetric positive-definite case (Cholesky).

* :func:`lu_factor` / :func:`lu_solve` — PA = LU with partial pivoting (row of largest |entry| in the column,
  found by ``argmax``, swapped in by ``where``): unrolled for n ≤ ``UNROLL_MAX``, a ``lax.fori_loop`` over
  columns above (one masked rank-1 update per column).
* :func:`solve` — A⁻¹ b like ``jnp.linalg.solve`` (b of shape (n,) or (n, k)), with a custom JVP
  dx = A⁻¹ (db − dA x) that reuses the factorisation (reverse mode transposes it).
* :func:`singular_values` — σ of an (m, n) matrix, m ≥ n, descending, by cyclic one-sided Jacobi (Hestenes)
  rotations of the columns; custom JVP dσᵢ = uᵢᵀ dA vᵢ (exact for distinct σ). :func:`condition_number`
  σ_max/σ_min.

Least squares with rank-deficient matrices (``lstsq`` with ``rcond``) is not replaced: see README.
"""
import jax
import jax.numpy as jnp

from .linalg import matmul

UNROLL_MAX = 12     # matrices up to this size are factorised by unrolled code, larger ones in a fori_loop
JACOBI_SWEEPS = 10  # cyclic sweeps of one-sided Jacobi (quadratic convergence: 6x6 needs ~5 in float64)


def _swap_rows(X, k, p):
    """Rows k (static or traced) and p (traced) of X exchanged, with ``where`` only (no gather/scatter)."""
    rows = jnp.arange(X.shape[0]).reshape((-1,) + (1,) * (X.ndim - 1))
    xk = jnp.sum(jnp.where(rows == k, X, 0), axis=0)
    xp = jnp.sum(jnp.where(rows == p, X, 0), axis=0)
    return jnp.where(rows == k, xp, jnp.where(rows == p, xk, X))


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
    n = LU.shape[0]
    y = []
    for i in range(n):                                   # L y = b, unit diagonal
        yi = b[i]
        for j in range(i):
            yi = yi - LU[i, j] * y[j]
        y.append(yi)
    x = [None] * n
    for i in reversed(range(n)):                         # U x = y
        xi = y[i]
        for j in range(i + 1, n):
            xi = xi - LU[i, j] * x[j]
        x[i] = xi / LU[i, i]
    return jnp.stack(x)


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


def _jacobi(A, sweeps):
    """(W, V) with W = A V having mutually orthogonal columns and V orthogonal (one-sided Jacobi)."""
    n = A.shape[1]
    tiny = jnp.finfo(A.dtype).tiny
    eps = jnp.finfo(A.dtype).eps
    pairs = [(p, q) for p in range(n) for q in range(p + 1, n)]

    def rotate(X, p, q, c, s):
        xp, xq = X[:, p], X[:, q]
        return X.at[:, p].set(c * xp - s * xq).at[:, q].set(s * xp + c * xq)

    def sweep(_, WV):
        W, V = WV
        for p, q in pairs:
            wp, wq = W[:, p], W[:, q]
            alpha, beta, gamma = jnp.sum(wp * wp), jnp.sum(wq * wq), jnp.sum(wp * wq)
            skip = jnp.abs(gamma) <= eps * jnp.sqrt(alpha * beta) + tiny
            zeta = (beta - alpha) / (2 * jnp.where(skip, 1, gamma))
            t = jnp.where(zeta >= 0, 1.0, -1.0) / (jnp.abs(zeta) + jnp.hypot(1.0, zeta))
            t = jnp.where(skip, 0.0, t)
            c = 1 / jnp.sqrt(1 + t * t)
            W, V = rotate(W, p, q, c, c * t), rotate(V, p, q, c, c * t)
        return W, V

    return jax.lax.fori_loop(0, sweeps, sweep, (A, jnp.eye(n, dtype=A.dtype)))


@jax.custom_jvp
def singular_values(A):
    """Singular values of an (m, n) matrix with m ≥ n, descending (``jnp.linalg.svd(A, compute_uv=False)``),
    by ``JACOBI_SWEEPS`` cyclic one-sided Jacobi sweeps; no LAPACK call."""
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] < A.shape[1]:
        raise ValueError(f"singular_values needs an (m, n) matrix with m >= n, got shape {A.shape}")
    W, _ = _jacobi(A, JACOBI_SWEEPS)
    return -jnp.sort(-jnp.sqrt(jnp.sum(W * W, axis=0)))


@singular_values.defjvp
def _singular_values_jvp(primals, tangents):
    (A,), (dA,) = primals, tangents
    W, V = _jacobi(A, JACOBI_SWEEPS)
    s = jnp.sqrt(jnp.sum(W * W, axis=0))
    ds = jnp.sum(W * matmul(dA, V), axis=0) / s                # uᵢᵀ dA vᵢ with uᵢ = A vᵢ / σᵢ
    order = jnp.argsort(-s)
    return s[order], ds[order]


def condition_number(A):
    """2-norm condition number σ_max/σ_min of an (m, n) matrix, m ≥ n (inf when σ_min = 0)."""
    s = singular_values(A)
    return s[0] / s[-1]
