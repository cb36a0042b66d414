"""Small dense linear algebra for the hot path: products and symmetric positive-definite solves that XLA can
fuse, at full precision, with no LAPACK call.

Why not ``@`` and ``jax.scipy.linalg``: every function of the physics works on one scenario and is batched by
``jax.vmap``. Under ``vmap`` a 6x6 ``@`` becomes a *batched* ``dot_general`` — a kernel of its own on every
backend (on the CPU a loop of tiny matrix products, on a GPU a cuBLAS/Triton call) that cannot fuse with its
neighbours, and that runs at the backend's *default* precision (TF32 for float32 on NVIDIA GPUs: ~1e-3
relative). A batched Cholesky or triangular solve is a LAPACK/cuSOLVER custom call per step (and jax 0.10.x
deadlocks in those on 2-core CPUs, docs/known_traps.md).

* :func:`matmul` — ``a @ b`` with matmul's shape rules. Small products (the spatial algebra's 3x3 and 6x6, a
  module's Jacobians) are written as a broadcast multiply and a sum over the contracted axis: elementwise
  arithmetic that XLA fuses with its neighbours and evaluates in the input dtype exactly. Large products
  (``m·k·n`` above ``SMALL_PRODUCT``: mass matrices of 100-link robots) stay a ``dot`` at
  ``Precision.HIGHEST``. Either way no product of the physics runs at default precision (a test inspects the
  lowered Stewart step).
* :func:`cholesky` — the lower Cholesky factor, unrolled in closed form (scalar arithmetic) up to
  ``UNROLL_MAX`` rows, and as a ``lax.fori_loop`` over columns (one fused column update per iteration) above.
* :func:`spd_solve` — A⁻¹ B for a symmetric positive-definite A through :func:`cholesky` and two triangular
  substitutions written the same way.

All are differentiable (ordinary JAX arithmetic: no custom rules needed) and shape-static.
"""
import jax
import jax.numpy as jnp

SMALL_PRODUCT = 4096   # m·k·n up to which a product is written elementwise (fusable)
UNROLL_MAX = 12        # matrices up to this size are factorised by unrolled scalar arithmetic


def matmul(a, b):
    """``a @ b`` (NumPy matmul semantics, including 1-D operands and broadcast batch axes), fusable for small
    operands and at ``Precision.HIGHEST`` for large ones (module docstring)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul needs arrays of rank >= 1, got shapes {a.shape} and {b.shape}")
    m = a.shape[-2] if a.ndim > 1 else 1
    k = a.shape[-1]
    n = b.shape[-1] if b.ndim > 1 else 1
    if k != (b.shape[-2] if b.ndim > 1 else b.shape[0]):
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not contract")
    if m * k * n > SMALL_PRODUCT:
        return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    if b.ndim == 1:
        return jnp.sum(a * b, axis=-1)                                  # (..., m, k)·(k,) or (k,)·(k,)
    if a.ndim == 1:
        return jnp.sum(a[:, None] * b, axis=-2)                          # (k,)·(..., k, n)
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)    # (..., m, k)·(..., k, n)


def _cholesky_unrolled(A):
    n = A.shape[-1]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        d = A[j, j] - sum(L[j][k] * L[j][k] for k in range(j))
        L[j][j] = jnp.sqrt(d)
        inv = 1.0 / L[j][j]
        for i in range(j + 1, n):
            L[i][j] = (A[i, j] - sum(L[i][k] * L[j][k] for k in range(j))) * inv
    zero = jnp.zeros_like(A[0, 0])
    return jnp.stack([jnp.stack([L[i][j] if j <= i else zero for j in range(n)]) for i in range(n)])


def _cholesky_loop(A):
    n = A.shape[-1]
    idx = jnp.arange(n)

    def column(j, L):
        v = A[:, j] - matmul(L, L[j])              # columns ≥ j of L are still zero
        col = jnp.where(idx >= j, v / jnp.sqrt(v[j]), 0.0)
        return L.at[:, j].set(col)

    return jax.lax.fori_loop(0, n, column, jnp.zeros_like(A))


def cholesky(A):
    """Lower-triangular L with L Lᵀ = A for a symmetric positive-definite A (n x n); only the lower triangle
    of A is read. NaN where A is not numerically positive definite (as LAPACK's ``potrf``)."""
    A = jnp.asarray(A)                 # a NumPy input must not meet a traced loop index (fori_loop route)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"cholesky needs a square matrix, got shape {A.shape}")
    if A.shape[0] == 0:
        return A
    return _cholesky_unrolled(A) if A.shape[0] <= UNROLL_MAX else _cholesky_loop(A)


def _substitute_unrolled(L, B, lower):
    n = L.shape[0]
    x = [None] * n
    order = range(n) if lower else reversed(range(n))
    for i in order:
        others = range(i) if lower else range(i + 1, n)
        Lik = (lambda k: L[i, k]) if lower else (lambda k: L[k, i])
        x[i] = (B[i] - sum(Lik(k) * x[k] for k in others)) / L[i, i]
    return jnp.stack(x)


def _substitute_loop(L, B, lower):
    n = L.shape[0]
    idx = jnp.arange(n)
    T = L if lower else L.T
    shape = (n,) + (1,) * (B.ndim - 1)

    def row(step, X):
        i = step if lower else n - 1 - step
        known = (idx < i) if lower else (idx > i)
        Ti = jnp.where(known, T[i], 0.0)
        xi = (B[i] - jnp.sum(Ti.reshape(shape) * X, axis=0)) / T[i, i]
        return X.at[i].set(xi)

    return jax.lax.fori_loop(0, n, row, jnp.zeros_like(B))


def triangular_solve(L, B, lower=True):
    """L⁻¹ B (``lower``) or L⁻ᵀ B (``lower=False``) for a lower-triangular L (n x n), B (n,) or (n, m)."""
    L, B = jnp.asarray(L), jnp.asarray(B)
    if L.shape[0] == 0:
        return B
    if L.shape[0] <= UNROLL_MAX:
        return _substitute_unrolled(L, B, lower)
    return _substitute_loop(L, B, lower)


def cho_solve(L, B):
    """(L Lᵀ)⁻¹ B from the Cholesky factor L of an SPD matrix: the forward substitution L⁻¹ B, then the back
    substitution L⁻ᵀ (·); B (n,) or (n, m). The one place the two substitutions are chained."""
    return triangular_solve(L, triangular_solve(L, B, lower=True), lower=False)


def spd_solve(A, B):
    """A⁻¹ B for a symmetric positive-definite A (n x n, n static), B (n,) or (n, m): a Cholesky
    factorisation and two substitutions without LAPACK (module docstring). Under ``vmap`` every step is an
    elementwise operation over the batch, which XLA fuses: this is how the n_c x n_c solves of
    Lilly & Orin eq. 36-38, the 6 x 6 solve of Lilly & Orin eq. 45 and H⁻¹ Jᵀ of a module stay cheap at large batch."""
    return cho_solve(cholesky(A), B)
