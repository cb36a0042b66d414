"""spatial.dense (LAPACK-free LU solve and Jacobi singular values, used by the vmapped CKCM and inverse-dynamics
paths) against numpy.linalg in float64: well- and ill-conditioned matrices, both the unrolled (n <= 12) and the
looped (n > 12) code, gradients against central differences, and no LAPACK call when lowered under vmap."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from mrds_jax.spatial import dense

jax.config.update("jax_enable_x64", True)
EPS = np.finfo(np.float64).eps
LAPACK = re.compile(r"custom_call\s*@\w*(lapack|cusolver|hipsolver|potrf|getrf|gesdd|gesvd|syevd|geqrf)",
                    re.IGNORECASE)
SIZES = [1, 2, 3, 6, 12, 13, 24]
solve = jax.jit(dense.solve)                      # compiled once per shape (op-by-op dispatch is slow)
singular_values = jax.jit(dense.singular_values)
condition_number = jax.jit(dense.condition_number)


def matrix_with_condition(rng, n, cond, m=None):
    """(m, n) matrix with singular values spread log-uniformly from 1 to 1/cond."""
    m = n if m is None else m
    U = np.linalg.qr(rng.standard_normal((m, m)))[0][:, :n]
    V = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return U @ np.diag(np.logspace(0, -np.log10(cond), n)) @ V.T


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("cond", [10.0, 1e6, 1e10])
def test_solve_equals_numpy(n, cond):
    rng = np.random.default_rng(n)
    A = matrix_with_condition(rng, n, cond)
    for b in (rng.standard_normal(n), rng.standard_normal((n, 3))):
        x, ref = np.asarray(solve(A, b)), np.linalg.solve(A, b)
        # both are backward stable: forward errors within cond * eps (times a small factor) of each other
        assert np.max(np.abs(x - ref)) <= 50 * n * cond * EPS * np.max(np.abs(ref)), (n, cond)
        assert np.max(np.abs(A @ x - b)) <= 50 * n * EPS * np.max(np.abs(A)) * np.max(np.abs(x))


@pytest.mark.parametrize("n", [4, 13])
def test_solve_pivots(n):
    """A zero leading diagonal (needs row exchanges) and a permutation matrix."""
    rng = np.random.default_rng(3)
    P = np.eye(n)[rng.permutation(n)]
    A = rng.standard_normal((n, n))
    A[0, 0] = 0.0
    b = rng.standard_normal(n)
    np.testing.assert_allclose(solve(P, b), P.T @ b, rtol=0, atol=1e-15)
    np.testing.assert_allclose(solve(A, b), np.linalg.solve(A, b), rtol=1e-10, atol=1e-12)


def test_singular_matrix_gives_non_finite():
    A = np.ones((3, 3))
    assert not np.all(np.isfinite(solve(A, np.ones(3))))


@pytest.mark.parametrize("n", [6, 13])
def test_solve_gradients(n):
    rng = np.random.default_rng(7)
    A = matrix_with_condition(rng, n, 30.0)
    b = rng.standard_normal(n)
    check_grads(solve, (A, b), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6, eps=1e-6)
    gA, gb = jax.grad(lambda A, b: jnp.sum(jnp.sin(solve(A, b))), argnums=(0, 1))(A, b)
    rA, rb = jax.grad(lambda A, b: jnp.sum(jnp.sin(jnp.linalg.solve(A, b))), argnums=(0, 1))(A, b)
    np.testing.assert_allclose(gA, rA, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb, rb, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 2), (6, 6), (9, 6), (13, 13)])
@pytest.mark.parametrize("cond", [3.0, 1e4, 1e8])
def test_singular_values_equal_numpy(shape, cond):
    m, n = shape
    rng = np.random.default_rng(m * 100 + n)
    A = matrix_with_condition(rng, n, cond, m)
    s, ref = np.asarray(singular_values(A)), np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s, ref, rtol=0, atol=20 * n * EPS * ref[0])
    # one-sided Jacobi is accurate in the relative sense for matrices of this kind (graded columns aside)
    np.testing.assert_allclose(condition_number(A), np.linalg.cond(A), rtol=1e3 * n * EPS * cond)


@pytest.mark.parametrize("shape", [(6, 6), (8, 5)])
def test_singular_value_gradients(shape):
    rng = np.random.default_rng(11)
    A = matrix_with_condition(rng, shape[1], 20.0, shape[0])
    check_grads(singular_values, (A,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6, eps=1e-6)
    check_grads(condition_number, (A,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6, eps=1e-6)
    np.testing.assert_allclose(jax.grad(condition_number)(A), jax.grad(jnp.linalg.cond)(A),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n", [6, 24])
def test_vmapped_code_has_no_lapack_call_and_matches(n):
    rng = np.random.default_rng(5)
    A = np.stack([matrix_with_condition(rng, n, 100.0) for _ in range(16)])
    b = rng.standard_normal((16, n))
    vsolve = jax.jit(jax.vmap(dense.solve))
    vcond = jax.jit(jax.vmap(dense.condition_number))
    text = vsolve.lower(A, b).as_text() + vcond.lower(A).as_text()
    text += jax.jit(jax.vmap(jax.grad(lambda a, v: jnp.sum(dense.solve(a, v)) + dense.condition_number(a))))\
        .lower(A, b).as_text()
    assert LAPACK.search(text) is None
    assert "custom_call" not in text
    np.testing.assert_allclose(vsolve(A, b), np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(vcond(A), np.linalg.cond(A), rtol=1e-10)


@pytest.mark.parametrize("shape", [(6, 6), (13, 9), (12, 12)])
def test_damped_lstsq_equals_numpy_and_keeps_small_singular_values_in_float32(shape):
    """argmin ‖A x − b‖² + ε‖x‖² against numpy's lstsq of the stacked [A; √ε I], [b; 0] (float64, cond 1e6, a
    rank-deficient A, b in its range, whose null space ε decides: the minimum-norm answer); then in float32 a
    consistent system with condition 1e4, solved to float32's rounding × cond by the QR, where the normal
    equations' Cholesky (rounding ulp × cond², 1.2e1 here) loses it; no LAPACK call under vmap."""
    m, n = shape
    rng = np.random.default_rng(m * n)
    A = matrix_with_condition(rng, n, 1e6, m)
    if m == n == 12:
        A[:, -2:] = A[:, :2] @ rng.standard_normal((2, 2))         # rank 10 of 12, b in its range
    b = A @ rng.standard_normal(n) if m == n == 12 else rng.standard_normal(m)
    for se in (1e-3, 1e-9):
        x = np.asarray(jax.jit(dense.damped_lstsq)(A, b, se))
        ref = np.linalg.lstsq(np.vstack([A, se * np.eye(n)]), np.concatenate([b, np.zeros(n)]), rcond=None)[0]
        np.testing.assert_allclose(x, ref, rtol=1e-6 if se < 1e-6 else 1e-10, atol=1e-10 * np.abs(ref).max())
    A32 = matrix_with_condition(rng, n, 1e4, m)
    x_true = rng.standard_normal(n)
    b32 = A32 @ x_true
    se = m * np.finfo(np.float32).eps
    x = np.asarray(jax.jit(dense.damped_lstsq)(jnp.asarray(A32, jnp.float32), jnp.asarray(b32, jnp.float32),
                                               jnp.float32(se)), float)
    AtA = jnp.asarray(A32.T @ A32, jnp.float32) + se * se * jnp.eye(n, dtype=jnp.float32)
    normal = np.asarray(jnp.linalg.solve(AtA, jnp.asarray(A32.T @ b32, jnp.float32)), float)
    err = np.linalg.norm(x - x_true) / np.linalg.norm(x_true)
    assert err < 1e4 * 50 * np.finfo(np.float32).eps, err
    assert err < 0.1 * np.linalg.norm(normal - x_true) / np.linalg.norm(x_true)
    text = jax.jit(jax.vmap(dense.damped_lstsq, (0, 0, None))).lower(
        np.stack([A] * 4), np.stack([b] * 4), 1e-6).as_text()
    assert LAPACK.search(text) is None and "custom_call" not in text


def test_lowering_check_sees_lapack():
    a = jnp.eye(6)[None] + jnp.zeros((4, 6, 6))
    assert LAPACK.search(jax.jit(jax.vmap(jnp.linalg.solve)).lower(a, a[..., 0]).as_text())


# ----------------------------------------------------------------------------- spatial.linalg (SPD solves)
@pytest.mark.parametrize("n", [3, 12, 13, 18, 30])     # unrolled (n <= 12) and fori_loop routes
def test_cholesky_and_spd_solve_equal_numpy(n):
    from mrds_jax.spatial import linalg
    rng = np.random.default_rng(n)
    M = matrix_with_condition(rng, n, 1e3)
    A = M @ M.T                                              # condition number 1e6
    B = rng.standard_normal((n, 4))
    L = np.asarray(jax.jit(linalg.cholesky)(jnp.asarray(np.tril(A) + np.triu(rng.standard_normal((n, n)), 1))))
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=0, atol=1e-9 * np.abs(L).max())   # upper ignored
    for lower, T in ((True, L), (False, L.T)):
        X = np.asarray(jax.jit(linalg.triangular_solve, static_argnums=2)(jnp.asarray(L), jnp.asarray(B), lower))
        np.testing.assert_allclose(T @ X, B, rtol=0, atol=1e-10 * np.abs(B).max() * np.abs(X).max())
    X = np.asarray(jax.jit(jax.vmap(linalg.spd_solve, in_axes=(None, 1), out_axes=1))(jnp.asarray(A), jnp.asarray(B)))
    ref = np.linalg.solve(A, B)
    np.testing.assert_allclose(X, ref, rtol=0, atol=1e6 * EPS * 100 * np.abs(ref).max())
    X = np.asarray(jax.jit(linalg.cho_solve)(jnp.asarray(L), jnp.asarray(B)))     # from numpy's factor's twin
    np.testing.assert_allclose(X, ref, rtol=0, atol=1e6 * EPS * 100 * np.abs(ref).max())


def test_spd_solve_gradient_equals_central_differences():
    from mrds_jax.spatial import linalg
    rng = np.random.default_rng(18)
    M = rng.standard_normal((18, 18))
    A = jnp.asarray(M @ M.T + 18 * np.eye(18))
    b = jnp.asarray(rng.standard_normal(18))
    check_grads(lambda A, b: linalg.spd_solve(0.5 * (A + A.T), b), (A, b), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)


# ----------------------------------------------------------------------------- branch-induced sparsity (trees)
TREES = {"biped": (-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 8, 12, 13, 14, 12, 5, 17, 18, 19, 20, 21, 19, 23, 24, 25,
                   23),                                    # tests/data/biped_fourbar.xml's dof parents (28 dofs)
         "forest": (-1, 0, 1, -1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, -1, 3),   # three roots
         "chain": tuple(range(-1, 15)),                    # no branching: one dense block
         "small": (-1, 0, 1, 2, 1, 4, 4, -1, 7)}


def tree_matrix(rng, parents, cond=1e3):
    """An SPD matrix with the branch-induced sparsity of ``parents`` (H_ij = 0 unless i, j are related)."""
    n = len(parents)
    related = np.zeros((n, n), bool)
    for i in range(n):
        j = i
        while j >= 0:
            related[i, j] = related[j, i] = True
            j = parents[j]
    M = matrix_with_condition(rng, n, cond)
    A = np.where(related, M @ M.T, 0.0)
    return A + np.diag(np.abs(A).sum(axis=1))              # diagonally dominant: SPD whatever was cut


@pytest.mark.parametrize("tree", list(TREES))
def test_tree_spd_solve_equals_numpy(tree):
    from mrds_jax.spatial import linalg
    parents = TREES[tree]
    rng = np.random.default_rng(len(parents))
    A = tree_matrix(rng, parents)
    B = rng.standard_normal((len(parents), 5))
    ref = np.linalg.solve(A, B)
    f = jax.jit(jax.vmap(lambda A, B: linalg.tree_spd_solve(A, parents, B)))
    X = np.asarray(f(jnp.asarray(A)[None], jnp.asarray(B)[None]))[0]
    np.testing.assert_allclose(X, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    x = np.asarray(jax.jit(lambda A, b: linalg.tree_spd_solve(A, parents, b))(jnp.asarray(A), jnp.asarray(B[:, 0])))
    np.testing.assert_allclose(x, ref[:, 0], rtol=0, atol=1e-12 * np.abs(ref).max())


def test_tree_blocks_of_the_biped_stack_its_legs():
    from mrds_jax.spatial import linalg
    trunk, subtrees = linalg.tree_blocks(TREES["biped"])
    assert trunk == list(range(6)) and subtrees == [list(range(6, 17)), list(range(17, 28))]


@pytest.mark.parametrize("n", [1, 6, 13])
def test_spd_inverse_equals_numpy(n):
    from mrds_jax.spatial import linalg
    rng = np.random.default_rng(n)
    M = matrix_with_condition(rng, n, 1e3)
    A = M @ M.T
    np.testing.assert_allclose(np.asarray(jax.jit(linalg.spd_inverse)(jnp.asarray(A))), np.linalg.inv(A), rtol=0,
                               atol=1e6 * EPS * 100 * np.abs(np.linalg.inv(A)).max())


def test_tree_spd_solve_gradient_equals_central_differences():
    from mrds_jax.spatial import linalg
    parents = TREES["biped"]
    rng = np.random.default_rng(3)
    A = jnp.asarray(tree_matrix(rng, parents, 10.0))
    b = jnp.asarray(rng.standard_normal(len(parents)))
    check_grads(lambda A, b: linalg.tree_spd_solve(0.5 * (A + A.T), parents, b), (A, b), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)


def _compiled_kernels(f, *args):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from bench_gpu import count_kernels
    text = jax.jit(jax.vmap(f)).lower(*args).compile().as_text()
    return count_kernels(text), sum(1 for line in text.splitlines() if " = " in line)


def test_vmapped_tree_solve_and_pinv_solve_compile_small():
    """Structure, not time: the biped's 28 x 49 solve along its tree compiles to no loop and few kernels (the dense
    route was three fori_loops over 28 columns, 65 of the step's 86 µs per scenario at batch 1024: issue 35), and
    the 12 x 12 pseudo-inverse solve to ~1,400 optimised HLO instructions (22,034 with unrolled Cholesky)."""
    from mrds_jax.spatial import linalg
    parents = TREES["biped"]
    A = jnp.asarray(tree_matrix(np.random.default_rng(0), parents))[None].repeat(4, axis=0)
    kernels, _ = _compiled_kernels(lambda A, B: linalg.tree_spd_solve(A, parents, B), A, jnp.ones((4, 28, 49)))
    assert kernels["while_loops"] == 0 and kernels["custom_call"] == 0 and kernels["total"] <= 70, kernels
    B = jnp.asarray(np.eye(12) + 0.1)[None].repeat(4, axis=0)
    kernels, hlo = _compiled_kernels(lambda B, y: dense.psd_pinv_solve(B, y, 1e-9), B, jnp.ones((4, 12)))
    assert kernels["custom_call"] == 0 and kernels["total"] <= 150 and hlo <= 3000, (kernels, hlo)
