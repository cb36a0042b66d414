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
* :func:`spd_inverse` — A⁻¹ of an SPD matrix by Gauss-Jordan elimination without pivoting: n rank-1 updates of
  the whole matrix, a few vector operations each (an unrolled Cholesky and substitutions are O(n²) scalar
  operations, which XLA compiles one by one: the form for compile time).
* :func:`tree_spd_solve` — H⁻¹ B for a joint-space inertia matrix with branch-induced sparsity (Featherstone
  §6.5): subtrees eliminated first, stacked by structure and ``vmap``ped, then the Schur complement on the trunk.

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


def _unrolls(n, unrolled):
    """Whether an n x n factorisation or substitution is written unrolled: ``unrolled`` when given, else by size
    (``UNROLL_MAX``). The unrolled form runs fastest on small matrices; the loop form compiles to one column's or
    row's operations, which is what a program that is mostly compile time wants (the contact step's derivative)."""
    return n <= UNROLL_MAX if unrolled is None else bool(unrolled)


def cholesky(A, unrolled=None):
    """Lower-triangular L with L Lᵀ = A for a symmetric positive-definite A (n x n); only the lower triangle
    of A is read. NaN where A is not numerically positive definite (as LAPACK's ``potrf``). ``unrolled``: the
    form (:func:`_unrolls`; both are the same column-by-column algorithm)."""
    A = jnp.asarray(A)                 # a NumPy input must not meet a traced loop index (fori_loop route)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"cholesky needs a square matrix, got shape {A.shape}")
    if A.shape[0] == 0:
        return A
    return _cholesky_unrolled(A) if _unrolls(A.shape[0], unrolled) else _cholesky_loop(A)


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


def triangular_solve(L, B, lower=True, unrolled=None):
    """L⁻¹ B (``lower``) or L⁻ᵀ B (``lower=False``) for a lower-triangular L (n x n), B (n,) or (n, m);
    ``unrolled`` as for :func:`cholesky`."""
    L, B = jnp.asarray(L), jnp.asarray(B)
    if L.shape[0] == 0:
        return B
    if _unrolls(L.shape[0], unrolled):
        return _substitute_unrolled(L, B, lower)
    return _substitute_loop(L, B, lower)


def cho_solve(L, B, unrolled=None):
    """(L Lᵀ)⁻¹ B from the Cholesky factor L of an SPD matrix: the forward substitution L⁻¹ B, then the back
    substitution L⁻ᵀ (·); B (n,) or (n, m). The one place the two substitutions are chained."""
    return triangular_solve(L, triangular_solve(L, B, lower=True, unrolled=unrolled), lower=False, unrolled=unrolled)


def spd_solve(A, B):
    """A⁻¹ B for a symmetric positive-definite A (n x n, n static), B (n,) or (n, m): a Cholesky
    factorisation and two substitutions without LAPACK (module docstring). Under ``vmap`` every step is an
    elementwise operation over the batch, which XLA fuses: this is how the n_c x n_c solves of
    Lilly & Orin eq. 36-38, the 6 x 6 solve of Lilly & Orin eq. 45 and H⁻¹ Jᵀ of a module stay cheap at large batch."""
    return cho_solve(cholesky(A), B)


def spd_inverse(A, pivots=False):
    """A⁻¹ of a symmetric positive-definite A (n x n, n static) by Gauss-Jordan elimination without pivoting
    (Golub & Van Loan, Matrix Computations, §3.2 and §4.2: for an SPD matrix every pivot is a positive Schur
    complement, so no pivoting is needed), in place: for each pivot k, with c = A[:, k], r = A[k, :], p = 1/A_kk,

        A ← A − p c rᵀ,   A[k, :] ← p r,   A[:, k] ← −p c,   A_kk ← p

    n steps of one rank-1 update of the whole n x n matrix each: a handful of vector operations per step, where
    an unrolled Cholesky and substitutions take O(n²) scalar or row operations (and XLA compiles each one: the
    12 x 12 Cholesky solve alone is ~10,000 optimised HLO instructions under ``vmap``). Elementwise arithmetic
    that XLA fuses under ``vmap`` (no LAPACK). With ``pivots=True`` also returns the n pivots A_kk met (the
    diagonal of the Schur complements, = L_kk² of the Cholesky factor L): all > 0 exactly when A is
    numerically positive definite; a non-positive or NaN pivot makes the result meaningless (as a NaN Cholesky)."""
    A = jnp.asarray(A)
    n = A.shape[0]
    idx = jnp.arange(n)
    met = []
    for k in range(n):
        c, r = A[:, k], A[k, :]
        met.append(A[k, k])
        p = 1.0 / A[k, k]
        A = A - (p * c)[:, None] * r[None, :]
        A = jnp.where((idx == k)[:, None], (p * r)[None, :], A)
        A = jnp.where((idx == k)[None, :], (-p * c)[:, None], A)
        A = A.at[k, k].set(p)
    if pivots:
        return A, (jnp.stack(met) if met else jnp.zeros(0, A.dtype))
    return A


def pivoted_solve(A, b):
    """A⁻¹ b for a general square A (n x n, n static) and b (n,): Gaussian elimination with partial pivoting
    (Golub & Van Loan, Matrix Computations, Alg. 3.4.1) on the augmented matrix [A | b], then back substitution,
    each a ``lax.fori_loop`` of n steps (one masked rank-1 update, or one row, per step: a small program at any n).
    For the non-symmetric Newton matrices of the contact solve (:func:`mrds_jax.system.ncp.semismooth_newton`),
    where a normal-equations solve would square their condition; no LAPACK call. A singular A gives inf or NaN."""
    A, b = jnp.asarray(A), jnp.asarray(b)
    n = A.shape[0]
    if n == 0:
        return b
    idx = jnp.arange(n)
    Ab = jnp.concatenate([A, b[:, None]], axis=1)

    def eliminate(k, Ab):
        col = jnp.where(idx >= k, jnp.abs(Ab[:, k]), -1.0)
        p = jnp.argmax(col)
        rk, rp = Ab[k], Ab[p]
        Ab = Ab.at[p].set(rk).at[k].set(rp)                        # rows k and p swapped
        factors = jnp.where(idx > k, Ab[:, k] / Ab[k, k], 0.0)
        return Ab - factors[:, None] * Ab[k][None, :]

    U = jax.lax.fori_loop(0, n, eliminate, Ab)

    def back(step, x):
        i = n - 1 - step
        xi = (U[i, n] - jnp.sum(jnp.where(idx > i, U[i, :n] * x, 0.0))) / U[i, i]
        return x.at[i].set(xi)

    return jax.lax.fori_loop(0, n, back, jnp.zeros(n, A.dtype))


# ----------------------------------------------------------------------------- branch-induced sparsity
def _children(parents, dofs):
    inside = set(dofs)
    out = {i: [] for i in dofs}
    for i in dofs:
        if parents[i] in inside:
            out[parents[i]].append(i)
    return out


def _subtree(children, root):
    out, todo = [], [root]
    while todo:
        i = todo.pop()
        out.append(i)
        todo += children[i]
    return sorted(out)


def tree_blocks(parents, dofs=None):
    """The block structure :func:`tree_spd_solve` eliminates along, for the dofs ``dofs`` (a set closed under
    descendants; default all) of the dof parent array ``parents``: ``(trunk, subtrees)``, the trunk the chain from
    the root down to the first dof with several children (empty for a forest of several roots), the subtrees the
    sorted dof lists hanging below it (each one root's descendants). Static: plain ints."""
    dofs = list(range(len(parents))) if dofs is None else sorted(dofs)
    inside = set(dofs)
    children = _children(parents, dofs)
    roots = [i for i in dofs if parents[i] not in inside]
    trunk = []
    if len(roots) == 1:
        trunk = [roots[0]]
        while len(children[trunk[-1]]) == 1:
            trunk.append(children[trunk[-1]][0])
        roots = children[trunk[-1]]
    return trunk, [_subtree(children, r) for r in roots]


def _take(A, idx, axis=0):
    """Entries ``idx`` (static ints) of A along ``axis`` (0 or 1): a slice when they are contiguous, else a gather
    by constant indices."""
    if idx == list(range(idx[0], idx[0] + len(idx))):
        return A[idx[0]:idx[0] + len(idx)] if axis == 0 else A[:, idx[0]:idx[0] + len(idx)]
    return jnp.take(A, jnp.asarray(idx), axis=axis)


def _block(A, rows, cols):
    return _take(_take(A, rows, 0), cols, 1)


def _signature(parents, dofs):
    """What makes two subtrees' solves the same program: their dof parent arrays relative to their own dofs."""
    pos = {d: k for k, d in enumerate(dofs)}
    return tuple(pos.get(parents[d], -1) for d in dofs)


def tree_spd_solve(H, parents, B):
    """H⁻¹ B for a symmetric positive-definite H with the branch-induced sparsity of the dof parent array
    ``parents`` (a joint-space inertia matrix: H_ij = 0 unless one of i, j is an ancestor of the other,
    Featherstone RBDA §6.5), B (n,) or (n, m).

    The elimination order of Featherstone's LTLᵀ factorisation (RBDA §6.5, Table 6.3: every dof is eliminated
    before its ancestors, so no fill-in leaves the sparsity pattern), taken block-wise (:func:`tree_blocks`): the
    subtrees hanging below the trunk couple only with the trunk (their mutual blocks of H are zero), so with T the
    trunk and b the subtrees

        Y_b = H_bb⁻¹ [H_bT | B_b]                                      (each subtree on its own, recursively)
        S   = H_TT − Σ_b H_Tb Y_b[:, :|T|],   r = B_T − Σ_b H_Tb Y_b[:, |T|:]   (Schur complement of the subtrees)
        X_T = S⁻¹ r,   X_b = Y_b[:, |T|:] − Y_b[:, :|T|] X_T

    which is block Gaussian elimination leaves first, the order of Table 6.3. Subtrees with the same structure
    (a robot's legs, arms) are stacked and solved by one ``vmap``; a block without branching (a chain) is
    inverted densely by Gauss-Jordan (:func:`spd_inverse`) and multiplied out. Everything is elementwise
    arithmetic that XLA fuses under ``vmap`` (no loop, no LAPACK). Measured on the 28-dof biped's 28 x 49 solve
    (float32, batch 1024, ``experiments/out/profile_general_path.md``): 46 kernels and ~1,000 optimised HLO
    instructions, 4 µs per scenario, against 74 µs for the dense Cholesky's ``fori_loop``s; the scalar form of
    Table 6.3 fully unrolled was 33,000 HLO instructions and 18 s of compilation."""
    H, B = jnp.asarray(H), jnp.asarray(B)
    if len(parents) == 0:
        return B
    return _tree_solve(H, tuple(parents), B, list(range(len(parents))))


def _tree_solve(H, parents, B, dofs):
    """(H[dofs, dofs])⁻¹ B for the descendant-closed ``dofs`` (sorted); H indexed by their positions 0..len-1."""
    trunk, subtrees = tree_blocks(parents, dofs)
    if not subtrees or (trunk and len(subtrees) == 1):
        return matmul(spd_inverse(H), B)
    pos = {d: k for k, d in enumerate(dofs)}
    t = [pos[d] for d in trunk]
    nt = len(t)
    Bm = B[:, None] if B.ndim == 1 else B
    S, r = (_block(H, t, t), _take(Bm, t)) if t else (None, None)
    Y = [None] * len(subtrees)
    groups = {}
    for j, sub in enumerate(subtrees):
        groups.setdefault(_signature(parents, sub), []).append(j)
    for sig, members in groups.items():         # subtrees of one structure: one vmapped solve
        idx = [[pos[d] for d in subtrees[j]] for j in members]
        H_bb = jnp.stack([_block(H, i, i) for i in idx])
        rhs = jnp.stack([jnp.concatenate(([_block(H, i, t)] if t else []) + [_take(Bm, i)], axis=1) for i in idx])
        Ys = jax.vmap(lambda Hb, R, sig=sig: _tree_solve(Hb, sig, R, list(range(len(sig)))))(H_bb, rhs)
        for g, (j, i) in enumerate(zip(members, idx)):
            Y[j] = Ys[g]
            if t:                                # Schur complement: S −= H_Tb H_bb⁻¹ H_bT, r −= H_Tb H_bb⁻¹ B_b
                H_Tb = _block(H, t, i)
                S = S - matmul(H_Tb, Y[j][:, :nt])
                r = r - matmul(H_Tb, Y[j][:, nt:])
    order, parts = [], []
    if t:
        X_T = matmul(spd_inverse(S), r)
        order, parts = list(t), [X_T]
    for j, sub in enumerate(subtrees):
        order += [pos[d] for d in sub]
        parts.append(Y[j][:, nt:] - matmul(Y[j][:, :nt], X_T) if t else Y[j])
    X = jnp.concatenate(parts, axis=0)
    inverse = [order.index(k) for k in range(len(dofs))]
    X = _take(X, inverse)
    return X[:, 0] if B.ndim == 1 else X
