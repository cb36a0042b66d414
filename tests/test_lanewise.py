"""spatial.lanewise: the trace-time rewrite of small reductions and contractions into elementwise sums of slices
gives the same values (1e-12, float64) and the same derivatives as the program as written, composes with
jit/vmap/grad, and leaves no small reduce or dot_general in the rewritten program."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax.spatial.lanewise import lanewise


def _prims(fun, *args):
    names = []

    def walk(jaxpr):
        for e in jaxpr.eqns:
            names.append(e.primitive.name)
            for p in e.params.values():
                for sub in (p if isinstance(p, tuple) else (p,)):
                    if hasattr(sub, "jaxpr") and hasattr(sub, "consts"):
                        walk(sub.jaxpr)
    walk(jax.make_jaxpr(fun)(*args).jaxpr)
    return names


def physics_like(A, x, w):
    """Mat-vecs, an einsum, norms, a max, an argmax, a cumulative sum and a small solve, as the step has them."""
    y = A @ x + jnp.einsum("ij,j->i", A.T, w)
    n = jnp.linalg.norm(y) + jnp.max(jnp.abs(A)) + jnp.prod(1.0 + 0.01 * w[:3])
    k = jnp.argmax(jnp.abs(x))
    c = jnp.cumsum(w)[-1]
    M = A @ A.T + 6.0 * jnp.eye(6)
    z = jax.lax.cond(n > 0, lambda m: m @ y, lambda m: -y, M)
    return y * n + c + z + k.astype(y.dtype), jnp.sum(M, axis=0), jnp.any(y > 100.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    return tuple(jnp.asarray(rng.normal(size=s)) for s in ((5, 6, 6), (5, 6), (5, 6)))


def test_values_equal_the_program_as_written(data):
    plain = jax.jit(jax.vmap(physics_like))(*data)
    fast = jax.jit(jax.vmap(lanewise(physics_like)))(*data)
    for a, b in zip(plain, fast):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-12)
    one = lanewise(physics_like)(*(x[0] for x in data))          # unbatched, eager
    np.testing.assert_allclose(np.asarray(one[0]), np.asarray(plain[0][0]), rtol=1e-12)


def test_no_small_reduce_or_dot_is_left(data):
    names = _prims(jax.vmap(lanewise(physics_like)), *data)
    assert not [n for n in names if n.startswith(("reduce_", "arg", "cum")) or n == "dot_general"], names
    plain = _prims(jax.vmap(physics_like), *data)
    assert "dot_general" in plain and "reduce_sum" in plain      # the check can fail


def test_gradients_equal_the_program_as_written_and_central_differences(data):
    def loss(f):
        return lambda A, x, w: jnp.sum(jax.vmap(f)(A, x, w)[0] ** 2)
    g_plain = jax.grad(loss(physics_like), argnums=(0, 1, 2))(*data)
    g_fast = jax.jit(jax.grad(loss(lanewise(physics_like)), argnums=(0, 1, 2)))(*data)
    for a, b in zip(g_plain, g_fast):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-10, atol=1e-10)
    A, x, w = data
    d = jnp.asarray(np.random.default_rng(4).normal(size=x.shape))
    h = 1e-6
    f = loss(lanewise(physics_like))
    fd = (f(A, x + h * d, w) - f(A, x - h * d, w)) / (2 * h)
    np.testing.assert_allclose(float(jnp.sum(g_fast[1] * d)), float(fd), rtol=1e-6)


def test_large_contractions_stay_products():
    A = jnp.ones((48, 48))
    names = _prims(lanewise(lambda a: a @ a), A)
    assert names.count("dot_general") == 1
    np.testing.assert_allclose(np.asarray(lanewise(lambda a: a @ a)(A)), 48.0)


def test_closed_chain_rollout_with_the_rewritten_step_matches_the_plain_rollout():
    """The dual-arm grasp (3-DOF arms on the general path: the Bᶜ solve with pivoting; 6-DOF arms on Lilly &
    Orin's path), 2 Euler steps,
    vmapped over 3 perturbed states: the rewritten step gives the plain trajectory to 1e-10."""
    from mrds_jax import examples
    from mrds_jax.integrate import rollout
    from mrds_jax.spatial.lanewise import lanewise as lw
    from mrds_jax.system.simulate import system_acceleration

    dq = jnp.linspace(0.0, 1e-3, 3)
    for n, path in ((3, "general"), (6, "lilly")):
        system, state = examples.dual_arm_grasp(n=n)
        acc = system_acceleration(system, path=path)

        def run(s, transform):
            tr = rollout(system.modules, acc, s.q, s.v, 1e-3, 2, 2, "euler", step_transform=transform)
            return tr.v

        states = jax.vmap(lambda e: type(state)(state.q, tuple(v + e for v in state.v)))(dq)
        plain = jax.jit(jax.vmap(lambda s: run(s, None)))(states)
        fast = jax.jit(jax.vmap(lambda s: run(s, lw)))(states)
        for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(fast)):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-10, atol=1e-10)
