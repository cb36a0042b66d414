"""Distributions over parameters and initial states, as pytree leaves.

A *spec* is any pytree (dict, tuple, dataclass) whose leaves are samplers or plain arrays (kept fixed).
:func:`sample` draws one scenario from a spec with one PRNG key; every leaf gets its own key derived from
the leaf's position, so adding a leaf does not change the draws of the others.
"""
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from .. import validation as check


class Sampler:
    """Base class: ``draw(key, dtype)`` returns one sample."""

    def draw(self, key, dtype):
        raise NotImplementedError


def _arrays(dtype, *values):
    """The parameters as arrays, and the shape they broadcast to."""
    arrays = [jnp.asarray(v, dtype) for v in values]
    return arrays, jnp.broadcast_shapes(*(a.shape for a in arrays))


@dataclass(frozen=True)
class Normal(Sampler):
    mean: object
    std: object

    def __post_init__(self):
        check.nonnegative_array(self.std, "std", "Normal")

    def draw(self, key, dtype):
        (mean, std), shape = _arrays(dtype, self.mean, self.std)
        return mean + std * jax.random.normal(key, shape, dtype)


@dataclass(frozen=True)
class Uniform(Sampler):
    low: object
    high: object

    def __post_init__(self):
        check.ordered(self.low, self.high, "the range", "Uniform")

    def draw(self, key, dtype):
        (low, high), shape = _arrays(dtype, self.low, self.high)
        return jax.random.uniform(key, shape, dtype, low, high)


@dataclass(frozen=True)
class TruncatedNormal(Sampler):
    """Normal(mean, std) restricted to [low, high]."""
    mean: object
    std: object
    low: object
    high: object

    def __post_init__(self):
        check.nonnegative_array(self.std, "std", "TruncatedNormal", strict=True)
        check.ordered(self.low, self.high, "the truncation range", "TruncatedNormal", strict=True)

    def draw(self, key, dtype):
        (mean, std, low, high), shape = _arrays(dtype, self.mean, self.std, self.low, self.high)
        return mean + std * jax.random.truncated_normal(key, (low - mean) / std, (high - mean) / std, shape, dtype)


@dataclass(frozen=True)
class ToleranceBand(Sampler):
    """A manufacturing tolerance: nominal ± tol, uniform (``relative=True``: tol is a fraction of nominal)."""
    nominal: object
    tol: object
    relative: bool = False

    def __post_init__(self):
        check.nonnegative_array(self.tol, "tol", "ToleranceBand")

    def draw(self, key, dtype):
        (nominal, tol), shape = _arrays(dtype, self.nominal, self.tol)
        tol = tol * (jnp.abs(nominal) if self.relative else 1.0)
        return nominal + tol * jax.random.uniform(key, shape, dtype, -1.0, 1.0)


def _is_sampler(x):
    return isinstance(x, Sampler)


def sample(spec, key, dtype=None):
    """One scenario: every sampler leaf of ``spec`` replaced by a draw, other leaves kept."""
    dtype = dtype or jnp.zeros(0).dtype
    leaves, treedef = jax.tree.flatten(spec, is_leaf=_is_sampler)
    out = [leaf.draw(jax.random.fold_in(key, i), dtype) if _is_sampler(leaf) else jnp.asarray(leaf)
           for i, leaf in enumerate(leaves)]
    return jax.tree.unflatten(treedef, out)


def scenario_keys(seed, indices):
    """Key of scenario i = fold_in(PRNGKey(seed), i): independent of chunking and device count."""
    base = jax.random.PRNGKey(seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.asarray(indices, dtype=jnp.uint32))
