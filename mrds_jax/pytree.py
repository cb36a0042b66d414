"""Dataclasses registered as JAX pytrees: fields marked ``static()`` are hashable metadata (part of the
jit cache key), all others are array leaves."""
import dataclasses

import jax


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
