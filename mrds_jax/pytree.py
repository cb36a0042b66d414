"""Dataclasses registered as JAX pytrees: fields marked ``static()`` are hashable metadata (part of the
jit cache key), all others are array leaves."""
import dataclasses

import jax
import jax.numpy as jnp


def static(**kw):
    return dataclasses.field(metadata={"static": True}, **kw)


def pytree_dataclass(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    meta = [f.name for f in fields if f.metadata.get("static")]
    data = [f.name for f in fields if not f.metadata.get("static")]
    return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)


def replace(obj, **changes):
    return dataclasses.replace(obj, **changes)


def float_leaves_as(tree, dtype):
    """``tree`` with its concrete floating-point leaves as arrays of ``dtype`` and its other concrete leaves as
    arrays (so Python floats and arrays share one jit cache entry); traced leaves pass unchanged."""
    def convert(x):
        if isinstance(x, jax.core.Tracer):
            return x
        a = jnp.asarray(x)
        return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a
    return jax.tree.map(convert, tree)
