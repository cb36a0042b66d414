"""Checks of the arguments of the public functions: numbers, counts, choices, and the per-module arrays
(q, v, q̈, τ) of the dynamics functions. Concrete values are checked; traced ones (inside ``jit``/``vmap``/
``grad``) only for their shape."""
import jax
import jax.numpy as jnp
import numpy as np

from .errors import ArgumentError


def is_traced(x):
    """True when ``x`` (any pytree) holds a JAX tracer: only static properties can be checked then."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


# ----------------------------------------------------------------------------- numbers and counts
def count(value, what, where, minimum=1):
    """An integer ``value`` ≥ ``minimum`` (n_steps, decimation, batch sizes, sample counts), returned as int."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{where}: {what} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ArgumentError(f"{where}: {what} must be >= {minimum}, got {value}")
    return int(value)


def positive(value, what, where, allow_zero=False):
    """A finite number > 0 (≥ 0 with ``allow_zero``): step sizes, periods, gains. Tracers pass unchecked."""
    if is_traced(value):
        return value
    try:
        x = float(np.asarray(value))
    except (TypeError, ValueError):
        raise ArgumentError(f"{where}: {what} must be a number, got {value!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ArgumentError(f"{where}: {what} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return value


def ordered(low, high, what, where, strict=False):
    """Elementwise low ≤ high (< with ``strict``) for concrete bounds, e.g. a sampler's range."""
    if is_traced((low, high)):
        return
    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    bad = ~((lo < hi) if strict else (lo <= hi)) | ~np.isfinite(lo + hi)
    if np.any(bad):
        raise ArgumentError(f"{where}: {what} needs low {'<' if strict else '<='} high (finite), got low={low!r}, "
                            f"high={high!r}")


def nonnegative_array(value, what, where, strict=False):
    """Every entry ≥ 0 (> 0 with ``strict``) and finite, for concrete arrays (standard deviations, tolerances)."""
    if is_traced(value):
        return
    a = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(a)) or np.any(a < 0) or (strict and np.any(a == 0)):
        raise ArgumentError(f"{where}: {what} must be finite and {'> 0' if strict else '>= 0'}, got {value!r}")


def choice(value, options, what, where):
    """``value`` is one of ``options``."""
    if value not in options:
        raise ArgumentError(f"{where}: unknown {what} {value!r}; use one of {list(options)}")
    return value


# ----------------------------------------------------------------------------- arrays of a module
def vector(x, n, what, where, hint=""):
    """``x`` as an array of shape (n,) (lists and tuples are converted; tracers keep their shape check)."""
    try:
        a = x if isinstance(x, (jax.Array, jax.core.Tracer)) else jnp.asarray(x)
    except (TypeError, ValueError):
        raise ArgumentError(f"{where}: {what} must be an array of {n} numbers, got {type(x).__name__} {x!r}") from None
    if jnp.shape(a) != (n,):
        raise ArgumentError(f"{where}: {what} has shape {jnp.shape(a)}, needs ({n},){hint}")
    return a


_MODULE_SIZES = dict(q="nq", v="nv", qdd="nv", tau="nv")


def module_arrays(module, where, **arrays):
    """The per-module arrays of a dynamics call (q → nq, v/qdd/tau → nv entries) as arrays of the right
    shape, in the order given; None stays None. One scenario per call: batch with ``jax.vmap``."""
    hint = f" (module nq={module.nq}, nv={module.nv}; one scenario per call, batch with jax.vmap)"
    out = []
    for name, x in arrays.items():
        out.append(None if x is None else finite(vector(x, getattr(module, _MODULE_SIZES[name]), name, where, hint),
                                                 name, where))
    return out[0] if len(out) == 1 else tuple(out)


def finite(x, what, where):
    """``x`` unchanged when its entries are finite; an ArgumentError naming the non-finite entries when ``x`` is
    concrete and has NaN or ±inf (a NaN q or τ would otherwise come back as NaN without a word). Traced values
    pass (checking them would need a host sync inside compiled code)."""
    if is_traced(x):
        return x
    a = np.asarray(x)
    if np.issubdtype(a.dtype, np.number) and not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.isfinite(a))
        raise ArgumentError(f"{where}: {what} has non-finite entries at {bad.tolist()} ({a[bad].tolist()}); the "
                            "tree algorithms need finite inputs")
    return x
