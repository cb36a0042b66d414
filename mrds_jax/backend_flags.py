"""XLA:CPU settings the engine's speed depends on, applied when ``mrds_jax`` is imported.

From jaxlib 0.10, XLA:CPU sends ``reduce`` operations (and some elementwise ones) through its YNNPACK
"library fusions" by default. For the tiny reduced axes of a closed-chain step (sums over 3 to 36 elements,
batched by ``vmap``) those fusions are very slow: a vmapped 6x6 mat-vec takes 634 µs at a batch of 4096
against 47 µs without them, and the Stewart platform's Euler step runs at 27k steps/s on jaxlib 0.10.2 against
425k with them off (the project's Stewart speed benchmark on a 2-core machine; upstream openxla/xla#40677,
jax-ml/jax#37465). XLA reads ``XLA_FLAGS`` once, when JAX starts its CPU backend, so the setting has to be in
place before the first computation of the process — which is why it is applied on import, process-wide, and
why it reaches a user's own ``jax.jit(jax.vmap(mrds_jax.simulate))`` as well as the library's own jits.

What :func:`apply` does:

* on a jaxlib whose XLA:CPU has the flag (the versions in ``HAS_YNN_FLAG``; jaxlib 0.9.2 has neither the
  fusion nor the flag, and an unknown flag in ``XLA_FLAGS`` makes XLA abort, so other versions are left
  alone), appends ``--xla_cpu_experimental_ynn_fusion_type=`` (no YNNPACK fusions) to ``XLA_FLAGS``;
* leaves ``XLA_FLAGS`` as it is when it already sets that flag (the user's choice wins) or when
  ``MRDS_JAX_XLA_FLAGS=0``;
* warns :class:`BackendFlagWarning` when JAX's backends were started before ``mrds_jax`` was imported (too
  late for the flag: import ``mrds_jax`` first, or set the flag yourself).

Other libraries' XLA:CPU computations in the same process run without YNNPACK fusions too; for large reductions
and matrix products (which XLA:CPU then runs with its own emitters and Eigen) that is the jaxlib 0.9 behaviour.
"""
import importlib.metadata
import os
import warnings

FLAG_NAME = "xla_cpu_experimental_ynn_fusion_type"
FLAG = f"--{FLAG_NAME}="
HAS_YNN_FLAG = ((0, 10),)      # jaxlib (major, minor) versions checked to have the flag


class BackendFlagWarning(UserWarning):
    """mrds_jax could not set the XLA:CPU flag its speed depends on (module docstring)."""


def jaxlib_version():
    """(major, minor) of the installed jaxlib, read from its metadata (does not start a backend)."""
    try:
        parts = importlib.metadata.version("jaxlib").split(".")
        return int(parts[0]), int(parts[1])
    except (importlib.metadata.PackageNotFoundError, ValueError, IndexError):
        return None


def _backends_started():
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def apply(environ=None):
    """Set the XLA:CPU flag if this jaxlib needs it (module docstring). Returns what was done: "set",
    "kept" (the user's XLA_FLAGS already choose), "off" (MRDS_JAX_XLA_FLAGS=0), "not needed" (a jaxlib
    without the fusion or the flag) or "late" (backends already started: warned)."""
    environ = os.environ if environ is None else environ
    if environ.get("MRDS_JAX_XLA_FLAGS", "1") == "0":
        return "off"
    version = jaxlib_version()
    if version not in HAS_YNN_FLAG:
        return "not needed"
    flags = environ.get("XLA_FLAGS", "")
    if FLAG_NAME in flags:
        return "kept"
    if _backends_started():
        warnings.warn(f"mrds_jax was imported after JAX started its backends, so XLA:CPU keeps its YNNPACK "
                      f"fusion of small reductions, which makes closed-chain steps ~10x slower on jaxlib "
                      f"{'.'.join(map(str, version))}. Import mrds_jax before running any JAX "
                      f"computation, or start Python with XLA_FLAGS={FLAG}", BackendFlagWarning, stacklevel=3)
        return "late"
    environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()
    return "set"
