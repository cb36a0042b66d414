"""``mrds_jax.batching.run_if``, the gate a batch pays for only when some scenario needs it:

* its value: ``fn(x, *operands)`` where the predicate holds, ``x`` elsewhere, scenario by scenario under ``vmap``,
  the same as computing both and selecting;
* its trips: under ``jit(vmap)`` the gated work runs once for the whole batch when some scenario needs it and not at
  all when none does (counted by a callback inside it);
* its structure: the gated work stays inside the loop in the compiled program. XLA's loop-invariant code motion
  moves out of a ``while`` every operation whose operands do not change in it; a plain ``while_loop`` gate whose
  work reads only its operands has that work moved to the program's entry and computed at every call (on jax 0.10.2
  the sine below lands in the ENTRY computation without the barrier; with it, in the loop's body).
"""
import re

import jax
import jax.numpy as jnp
import numpy as np

from mrds_jax.batching import run_if

jax.config.update("jax_enable_x64", True)


def _gated(x, y):
    return run_if(x[0] > 0, lambda carry, y: carry + jnp.sin(y) * jnp.cos(y), x, y)


def test_run_if_is_fn_where_the_predicate_holds_and_the_carry_elsewhere():
    rng = np.random.default_rng(0)
    x, y = jnp.asarray(rng.normal(size=(16, 3))), jnp.asarray(rng.normal(size=(16, 3)))
    out = np.asarray(jax.jit(jax.vmap(_gated))(x, y))
    expected = np.where(np.asarray(x[:, :1]) > 0, np.asarray(x + jnp.sin(y) * jnp.cos(y)), np.asarray(x))
    np.testing.assert_array_equal(out, expected)
    assert (np.asarray(x[:, 0]) > 0).any() and (np.asarray(x[:, 0]) <= 0).any()
    # one scenario, unbatched: both branches
    np.testing.assert_array_equal(np.asarray(_gated(x[0], y[0])), expected[0])
    np.testing.assert_array_equal(np.asarray(_gated(-jnp.abs(x[1]), y[1])), -np.abs(np.asarray(x[1])))


def test_run_if_runs_its_work_once_for_a_batch_that_needs_it_and_never_otherwise():
    trips = []

    def counted(carry):
        jax.debug.callback(lambda: trips.append(1))
        return carry + 1.0

    f = jax.jit(jax.vmap(lambda x: run_if(x > 0, counted, x)))
    for x, count in ((-jnp.ones(64), 0), ((-jnp.ones(64)).at[7].set(1.0), 1), (jnp.ones(64), 1)):
        trips.clear()
        out = np.asarray(jax.block_until_ready(f(x)))
        jax.effects_barrier()
        assert len(trips) == count, (len(trips), count)
        np.testing.assert_array_equal(out, np.where(np.asarray(x) > 0, np.asarray(x) + 1.0, np.asarray(x)))


def _computations(text):
    """{name: text} of a compiled HLO module's computations (ENTRY's name prefixed with 'ENTRY ')."""
    out = {}
    for chunk in re.split(r"\n(?=\S)", text):
        m = re.match(r"(ENTRY\s+)?%?([\w.\-]+)", chunk.split("\n", 1)[0])
        if m and "{" in chunk.split("\n", 1)[0]:
            out[("ENTRY " if m.group(1) else "") + m.group(2)] = chunk
    return out


def _placed(text, op):
    """The computations that run ``op``: the ENTRY computation, or the body of a while loop (fusions and other
    called computations are followed to the computation that calls them)."""
    comps = _computations(text)
    found, frontier = set(), {name for name, chunk in comps.items() if re.search(rf"\b{op}\(", chunk)}
    seen = set()
    while frontier:
        name = frontier.pop()
        seen.add(name)
        if name.startswith("ENTRY "):
            found.add("ENTRY")
            continue
        callers = {caller for caller, chunk in comps.items() if caller != name and re.search(
            rf"(calls|to_apply)=%?{re.escape(name)}\b", chunk)}
        if any(re.search(rf"body=%?{re.escape(name)}\b", chunk) for chunk in comps.values()):
            found.add("while body")
            continue
        frontier |= callers - seen
    return found


def test_run_if_keeps_its_work_inside_the_loop_of_the_compiled_program():
    text = jax.jit(jax.vmap(_gated)).lower(jnp.ones((8, 3)), jnp.ones((8, 3))).compile().as_text()
    assert _placed(text, "sine") == {"while body"}, _placed(text, "sine")
