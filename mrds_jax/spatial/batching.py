"""A fast path with an exact fallback, decided per scenario and evaluated per batch.

Every function of the physics takes one scenario and is batched by ``jax.vmap``. A branch on a traced value
(``lax.cond``) then becomes a ``select``: both branches run for every scenario. For a cheap common case with
an expensive rare one (a plain Cholesky solve of a constraint matrix of full numerical rank, and the pivoted
pseudo-inverse when it is not), that makes the rare case's cost everybody's.

:func:`fast_or_fallback` keeps the per-scenario meaning — scenario b gets ``fast(args_b)`` where that reports
itself valid and ``slow(args_b)`` otherwise, whatever else is in the batch — and, under ``vmap``, runs
``slow`` for the whole batch only when some scenario needs it (one ``lax.cond`` on "all valid", through a
``jax.custom_batching.custom_vmap`` rule). Unbatched it is a ``lax.cond``. Not differentiable by itself
(``custom_vmap`` has no reverse-mode rule): use it for the primal of a function with its own custom JVP.
"""
import jax
import jax.numpy as jnp


def _where_lanes(ok, a, b):
    return jax.tree.map(lambda x, y: jnp.where(ok.reshape(ok.shape + (1,) * (x.ndim - ok.ndim)), x, y), a, b)


def fast_or_fallback(fast, slow):
    """``f(*arrays)``: ``fast(*arrays) -> (ok, out)`` where ``ok`` (a boolean scalar) holds, else
    ``slow(*arrays) -> out`` (the same pytree of arrays). See the module docstring."""

    @jax.custom_batching.custom_vmap
    def f(*args):
        ok, out = fast(*args)
        return jax.lax.cond(ok, lambda: out, lambda: slow(*args))

    @f.def_vmap
    def _batched(axis_size, in_batched, *args):
        args = [a if b else jnp.broadcast_to(a, (axis_size,) + jnp.shape(a)) for a, b in zip(args, in_batched)]
        ok, out = jax.vmap(fast)(*args)
        out = jax.lax.cond(jnp.all(ok), lambda: out, lambda: _where_lanes(ok, out, jax.vmap(slow)(*args)))
        return out, jax.tree.map(lambda _: True, out)

    return f
