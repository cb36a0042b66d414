"""Work that a batch runs only when some scenario of it needs it.

Every function of the library takes one scenario and is ``vmap``-ped across thousands. Under ``vmap`` a
``lax.cond`` whose predicate differs between scenarios becomes a ``select``: both branches are computed for every
scenario at every call, so an expensive branch that one scenario in a thousand needs (EPA for an overlapping
pair, a contact solve's fallback) is paid by all. :func:`run_if` is the library's one gate that a batch pays
for only when some scenario needs it: a ``lax.while_loop`` of at most one trip, whose predicate under ``vmap`` is
batched, so that JAX runs the body while any scenario's predicate holds and keeps the carry of the others — one
trip for the whole batch when some scenario needs it, none when none does.

One trap makes the gate fail silently: XLA's loop-invariant code motion (the ``while-loop-invariant-code-motion``
pass) moves out of a loop every operation whose operands do not change within it, and an operation that reads
only values from outside the loop (or carried through it unchanged) is such an operation; moved out, it is
computed at every call whatever the predicate says. :func:`run_if` therefore passes its carry through an
``optimization_barrier`` together with the loop's own flag inside the trip, so that everything ``fn`` computes
from the carry depends on the loop and stays in it (measured on Go1's cylinder pairs under ``jit(vmap)``: the
gated EPA cost 374 µs a pair with no pair overlapping before, 43 µs with the barrier, the cost of GJK alone).
Values ``fn`` closes over can still be moved out: pass what the gated work is computed from in the carry.

Not differentiable in reverse mode (a ``while_loop``): gate work whose inputs are held constant
(``stop_gradient``), and differentiate what follows from its result.
"""
import jax
import jax.numpy as jnp


def run_if(pred, fn, x, *operands):
    """``fn(x, *operands)`` where ``pred``, else ``x``, computed only when ``pred`` holds somewhere in the batch: a
    ``lax.while_loop`` of at most one trip (module docstring). ``fn`` maps the carry ``x`` (a pytree of arrays) to
    a pytree of the same structure, shapes and dtypes; ``operands`` (pytrees of arrays) are what else the gated
    work is computed from (a matrix it factorises). Everything ``fn`` computes from ``x`` and ``operands`` stays
    inside the trip; what it computes from values it closes over alone may be moved out and paid at every call."""
    def trip(carry):
        flag, value, ops = carry
        value, ops, _ = jax.lax.optimization_barrier((value, ops, flag))
        return jnp.zeros_like(flag), fn(value, *ops), ops

    _, out, _ = jax.lax.while_loop(lambda carry: carry[0], trip, (jnp.asarray(pred, bool), x, operands))
    return out


__all__ = ["run_if"]
