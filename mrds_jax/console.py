"""A quiet, honest console: the persistent XLA cache keyed by machine, and the precision policy.

**XLA cache.** A compiled CPU program is specific to the host's instruction set: a cache written on one
machine type and read on another makes XLA print error lines (``cpu_aot_loader.cc``, machine-type mismatch)
before it recompiles. :func:`enable_compilation_cache` therefore keeps one sub-folder per machine
(architecture, CPU model and flags, jax/jaxlib versions), so a program is only ever read back on the kind of
machine that wrote it.

**Precision policy.** JAX computes in float32 unless ``jax_enable_x64`` is on, and a closed chain in float32
loses about four digits (constraint drift 1e-6 m instead of 1e-14 m over 1 s on the Stewart platform). The
system builders call :func:`check_precision`: when a system is built while ``jax_enable_x64`` is off, it
warns once (:class:`Float32Warning`) unless float32 was asked for with :func:`allow_float32` (or the
environment variable ``MRDS_JAX_FLOAT32=1``). Arrays cast to float32 on purpose while x64 is on do not warn.
"""
import functools
import hashlib
import os
import platform
import warnings
from pathlib import Path


class Float32Warning(UserWarning):
    """A system was built in float32 without float32 being asked for."""


_state = {"allowed": False, "warned": False}


def allow_float32(allowed=True):
    """Say that float32 is wanted: no :class:`Float32Warning`."""
    _state["allowed"] = bool(allowed)


def check_precision(where="build_system"):
    """Warn once if jax_enable_x64 is off and float32 was not asked for (see the module docstring)."""
    import jax
    if jax.config.jax_enable_x64 or _state["allowed"] or _state["warned"] or os.environ.get("MRDS_JAX_FLOAT32") == "1":
        return
    _state["warned"] = True
    warnings.warn(f"{where}: jax_enable_x64 is off, so this system computes in float32; closed chains lose about "
                  "four digits (loop-closure drift ~1e-6 m instead of ~1e-14 m). Call "
                  "jax.config.update('jax_enable_x64', True) before building, or mrds_jax.console.allow_float32() "
                  "(or MRDS_JAX_FLOAT32=1) if float32 is what you want", Float32Warning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def machine_key():
    """A short name for this machine's compiled-code compatibility: arch, CPU model/flags, jax, jaxlib."""
    import jax
    import jaxlib
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                cpu += line
            if cpu.count(":") >= 2:
                break
    except OSError:
        cpu = platform.processor()
    digest = hashlib.sha256(f"{cpu}|{jax.__version__}|{jaxlib.__version__}".encode()).hexdigest()[:12]
    return f"{platform.machine()}-{digest}"


def compilation_cache_dir(base):
    """``base``/<machine key>: where this machine's compiled programs are kept."""
    return Path(base).expanduser() / machine_key()


def enable_compilation_cache(base):
    """Keep XLA's compiled programs in :func:`compilation_cache_dir` (created); returns the folder."""
    import jax
    path = compilation_cache_dir(base)
    path.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    return path
