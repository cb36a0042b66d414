"""Lane-wise programs: a trace-time rewrite that turns the small reductions of a per-scenario function into
elementwise arithmetic, so that under ``jax.vmap`` they are elementwise across the batch lanes.

Why. Every function of the physics takes one scenario and is batched by ``jax.vmap``. A scenario's quantities
are tiny (3-vectors, 6x6 matrices, n_c x n_c blocks), so its sums, maxima and products run over axes of 3 to
36 elements. Written as ``reduce`` and batched, each is an XLA operation whose speed is at the mercy of the
backend's heuristics for tiny axes: from jaxlib 0.10.2 XLA:CPU sends ``reduce`` ops through its YNNPACK
fusion by default, which makes a vmapped 6x6 mat-vec ~10x slower than on 0.9.2 and the closed-chain step
~12x slower (openxla/xla#40677, jax-ml/jax#37465). Written as sums of slices, the same arithmetic is
elementwise over the batch, at full precision, whatever the backend does with ``reduce``.

Status: opt-in (``rollout(..., step_transform=lanewise)``), not the default. On XLA:CPU the Stewart step
measured slower rewritten than as written once YNNPACK's reduce fusion is off (:mod:`mrds_jax.backend_flags`):
XLA fuses the cheap slice-sums into several consumers and computes them again (about twice the flops and
bytes; ``experiments/out/stewart_speed_versions.md``). It is kept, tested, for measurement on other backends.

How. :func:`lanewise` wraps a function: at trace time it traces the function once to a jaxpr (one scenario,
the shapes of its arguments) and evaluates that jaxpr with the operations below replaced, on whatever the
arguments are (``vmap``/``jit``/``grad`` tracers or arrays). The physics is written once, readably, with
``jnp.sum``, ``@`` and ``einsum``; the fast form is generated from it here, not written beside it.

========================  ==========================================================================
primitive                 replaced by (when the reduced / contracted size is ≤ ``MAX_UNROLL``)
========================  ==========================================================================
``reduce_sum``            a balanced sum of the slices along each small reduced axis
``reduce_max/min/prod``   the same with ``max`` / ``min`` / ``mul``
``reduce_and/or``         the same with ``and`` / ``or``
``argmax/argmin``         a running compare-and-select over the slices (first extreme wins, NaN wins)
``cumsum/cumprod/...``    running sums (products, maxima, minima) of the slices
``dot_general``           Σₖ lhs[..., k] · rhs[..., k]: broadcast products of slices, balanced sum, in the
                          preferred element type; larger contractions a ``dot_general`` at
                          ``Precision.HIGHEST``
``jit`` (nested)          inlined and rewritten
``scan/while/cond``,      their inner programs rewritten (the primitive itself kept)
``custom_jvp/vjp``
========================  ==========================================================================

Every replacement computes the same mathematical quantity from the same inputs; sums are evaluated in a
different order (a balanced tree), so results agree to round-off (tests/test_lanewise.py). Derivatives: the
rewritten program is ordinary JAX, differentiated as usual; custom derivative rules are kept (only the primal
program is rewritten).

Nesting: a :func:`lanewise` function called while another is being rewritten runs as plain code (its
operations are rewritten by the outer one), so library entry points can all be wrapped without tracing
twice.
"""
import functools
import math
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import ClosedJaxpr, Literal

MAX_UNROLL = 32     # reduced / contracted sizes up to this are unrolled into elementwise arithmetic

_state = threading.local()


def _balanced(op, parts):
    """op-reduction of a list of equally shaped arrays as a balanced tree (depth log₂ n)."""
    parts = list(parts)
    while len(parts) > 1:
        nxt = [op(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def _slices(x, axis):
    return [lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis])]


def _reduce(op, prim):
    """Rule for a reduction primitive: small axes (1..MAX_UNROLL) reduced by ``op`` over slices, the others
    (large or empty axes) by the original primitive."""
    def rule(eqn, x):
        axes = tuple(eqn.params["axes"])
        small = sorted((a for a in axes if 0 < x.shape[a] <= MAX_UNROLL), reverse=True)
        if not small:
            return None
        for a in small:
            x = _balanced(op, _slices(x, a))
        rest = tuple(a - sum(1 for s in small if s < a) for a in axes if a not in small)
        if rest:
            x = prim.bind(x, **dict(eqn.params, axes=rest))
        return [x]
    return rule


def _arg(better):
    def rule(eqn, x):
        (axis,) = eqn.params["axes"]
        if not 0 < x.shape[axis] <= MAX_UNROLL:
            return None
        dtype = eqn.params["index_dtype"]
        parts = _slices(x, axis)
        best, idx = parts[0], jnp.zeros(parts[0].shape, dtype)
        floating = jnp.issubdtype(x.dtype, jnp.floating)
        for i, xi in enumerate(parts[1:], 1):
            take = better(xi, best)
            if floating:                                   # NaN wins, as in jnp.argmax/argmin
                take = take | (jnp.isnan(xi) & ~jnp.isnan(best))
            best = jnp.where(take, xi, best)
            idx = jnp.where(take, jnp.asarray(i, dtype), idx)
        return [idx]
    return rule


def _cumulative(op):
    def rule(eqn, x):
        axis, reverse = eqn.params["axis"], eqn.params["reverse"]
        if not 0 < x.shape[axis] <= MAX_UNROLL:
            return None
        parts = _slices(x, axis)[::-1] if reverse else _slices(x, axis)
        acc = [parts[0]]
        for p in parts[1:]:
            acc.append(op(acc[-1], p))
        return [jnp.stack(acc[::-1] if reverse else acc, axis=axis)]
    return rule


def _dot_general(eqn, lhs, rhs):
    """Σₖ lhs[..., k] rhs[..., k] over the contracted index k, as broadcast products of slices (output layout
    of ``dot_general``: batch dims, lhs free dims, rhs free dims), in the output dtype."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    out_dtype = eqn.outvars[0].aval.dtype
    k = math.prod(lhs.shape[a] for a in lc)
    if k > MAX_UNROLL:
        params = dict(eqn.params, precision=(lax.Precision.HIGHEST, lax.Precision.HIGHEST))
        return [eqn.primitive.bind(lhs, rhs, **params)]
    lf = [a for a in range(lhs.ndim) if a not in lc and a not in lb]
    rf = [a for a in range(rhs.ndim) if a not in rc and a not in rb]
    batch = tuple(lhs.shape[a] for a in lb)
    lfree, rfree = tuple(lhs.shape[a] for a in lf), tuple(rhs.shape[a] for a in rf)
    out_shape = batch + lfree + rfree
    if k == 0:
        return [jnp.zeros(out_shape, out_dtype)]
    L = lax.transpose(lhs, tuple(lb) + tuple(lf) + tuple(lc)).astype(out_dtype).reshape(batch + lfree + (k,))
    R = lax.transpose(rhs, tuple(rb) + tuple(rf) + tuple(rc)).astype(out_dtype).reshape(batch + rfree + (k,))
    lshape = batch + lfree + (1,) * len(rfree)
    rshape = batch + (1,) * len(lfree) + rfree
    terms = [lax.index_in_dim(L, i, -1, keepdims=False).reshape(lshape)
             * lax.index_in_dim(R, i, -1, keepdims=False).reshape(rshape) for i in range(k)]
    return [jnp.broadcast_to(_balanced(lax.add, terms), out_shape)]


def _inline(eqn, *args):
    closed = eqn.params["jaxpr"]
    return _evaluate(closed.jaxpr, closed.consts, args)


RULES = {
    "reduce_sum": _reduce(lax.add, lax.reduce_sum_p), "reduce_max": _reduce(lax.max, lax.reduce_max_p),
    "reduce_min": _reduce(lax.min, lax.reduce_min_p), "reduce_prod": _reduce(lax.mul, lax.reduce_prod_p),
    "reduce_and": _reduce(lax.bitwise_and, lax.reduce_and_p), "reduce_or": _reduce(lax.bitwise_or, lax.reduce_or_p),
    "argmax": _arg(lambda a, b: a > b), "argmin": _arg(lambda a, b: a < b),
    "cumsum": _cumulative(lax.add), "cumprod": _cumulative(lax.mul),
    "cummax": _cumulative(lax.max), "cummin": _cumulative(lax.min),
    "dot_general": _dot_general,
    "jit": _inline, "pjit": _inline,
}


def _rewrite_closed(closed):
    """The same program (same input and output types) with its operations rewritten."""
    avals = [v.aval for v in closed.jaxpr.invars]
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False)) for a in avals]
    return jax.make_jaxpr(lambda *xs: _evaluate(closed.jaxpr, closed.consts, xs))(*specs)


def _rewrite_param(value):
    if isinstance(value, ClosedJaxpr):
        return _rewrite_closed(value)
    if isinstance(value, tuple) and value and all(isinstance(v, ClosedJaxpr) for v in value):
        return tuple(_rewrite_closed(v) for v in value)
    return value


def _bind(eqn, invals):
    params = {k: _rewrite_param(v) for k, v in eqn.params.items()}
    out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
    return out if eqn.primitive.multiple_results else [out]


def _evaluate(jaxpr, consts, args):
    env = {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        rule = RULES.get(eqn.primitive.name)
        with eqn.ctx.manager:
            outs = rule(eqn, *invals) if rule is not None else None
            if outs is None:
                outs = _bind(eqn, invals)
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _is_array(x):
    """Leaves traced as inputs; everything else (Python numbers, callables, strings) stays static."""
    return isinstance(x, (jax.Array, jax.core.Tracer, np.ndarray, np.generic))


def rewriting():
    """True while a :func:`lanewise` rewrite is tracing (nested lanewise functions then run as plain code)."""
    return getattr(_state, "depth", 0) > 0


def lanewise(fun):
    """``fun`` with every small reduction and contraction written as elementwise arithmetic (module docstring).

    Same signature, same pytrees in and out, same values to round-off, same derivatives; composes with
    ``jit``, ``vmap`` and ``grad`` in any order. Non-array leaves of the arguments (callables, Python numbers,
    strings) are static. Trace-time only: each call traces ``fun`` once more."""
    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if rewriting():
            return fun(*args, **kwargs)
        flat, tree = jax.tree.flatten((args, kwargs))
        dynamic = [i for i, x in enumerate(flat) if _is_array(x)]
        out_tree = []

        def flat_fun(*xs):
            leaves = list(flat)
            for i, x in zip(dynamic, xs):
                leaves[i] = x
            a, kw = jax.tree.unflatten(tree, leaves)
            out = fun(*a, **kw)
            leaves, t = jax.tree.flatten(out)
            out_tree.append(t)
            return leaves

        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            xs = [flat[i] for i in dynamic]
            closed = jax.make_jaxpr(flat_fun)(*xs)
            outs = _evaluate(closed.jaxpr, closed.consts, xs)
        finally:
            _state.depth -= 1
        return jax.tree.unflatten(out_tree[0], outs)
    return wrapped
