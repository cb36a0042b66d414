"""XLA:CPU settings the engine's speed and compile time depend on, applied when ``mrds_jax`` is imported.

XLA reads ``XLA_FLAGS`` once, when JAX starts its CPU backend, so the settings have to be in place before the first
computation of the process — which is why they are applied on import, process-wide, and why they reach a user's own
``jax.jit(jax.vmap(mrds_jax.simulate))`` as well as the library's own jits. The settings (:data:`FLAGS`), each
applied only on the jaxlib versions checked to have it (an unknown flag in ``XLA_FLAGS`` makes XLA abort):

* **No YNNPACK fusions** (``--xla_cpu_experimental_ynn_fusion_type=``, jaxlib 0.10). From jaxlib 0.10, XLA:CPU
  sends ``reduce`` operations (and some elementwise ones) through its YNNPACK "library fusions" by default. For
  the tiny reduced axes of a closed-chain step (sums over 3 to 36 elements, batched by ``vmap``) those fusions are
  very slow: a vmapped 6x6 mat-vec takes 634 µs at a batch of 4096 against 47 µs without them, and the Stewart
  platform's Euler step runs at 27k steps/s on jaxlib 0.10.2 against 425k with them off (the project's Stewart
  speed benchmark on a 2-core machine; upstream openxla/xla#40677, jax-ml/jax#37465). jaxlib 0.9.2 has neither the
  fusion nor the flag.
* **The older loop emitters** (``--xla_cpu_use_fusion_emitters=false``, jaxlib 0.9 and 0.10). XLA:CPU generates
  fused loops with its MLIR "fusion emitters" by default; for the large programs of a closed chain the older
  emitters compile faster and run about as fast (measured on a shared 2-core machine, process CPU seconds, two
  rounds each, ``experiments/out/backend_flags.md``: the four-loop biped's rollout compiles in 11.8-12.7 s instead
  of 14.5-17.7 s on jax 0.10.2 and 14.9-15.3 s instead of 16.9-17.4 s on 0.9.2, Cassie's in 14.1-15.2 s instead
  of 17.8-19.1 s and 16.7-16.8 s instead of 19.1-22.2 s, the contact quadruped's the same within noise; per
  scenario-step 5-10 % less on 0.10.2, within ±5 % on 0.9.2). The flag concerns XLA:CPU only (a GPU backend ignores it).

What :func:`apply` does:

* appends each setting of :data:`FLAGS` that this jaxlib has to ``XLA_FLAGS``, unless ``XLA_FLAGS`` already sets
  that flag (the user's choice wins), or ``MRDS_JAX_XLA_FLAGS=0`` (nothing is set);
* warns :class:`BackendFlagWarning` when JAX's backends were started before ``mrds_jax`` was imported (too
  late for the flags: import ``mrds_jax`` first, or set the flags yourself).

Other libraries' XLA:CPU computations in the same process run with these settings too; for large reductions
and matrix products (which XLA:CPU then runs with its own emitters and Eigen) that is the jaxlib 0.9 behaviour.

**One scenario per call** (opt in: :func:`one_scenario_runtime`). XLA:CPU's runtime runs a program's independent
kernels on its thread pool; it goes sequential only where every buffer is at most 512 bytes or the program has at
most 8 kernels (``ThunkExecutor``). One scenario's forward dynamics is ~440 small kernels, so the pool brings
thread handoffs, not parallel work, and on a virtual machine an idle core is a halted vCPU that takes tens of µs to
wake; JAX also hands each call to a dispatch thread. A process that runs one scenario at a time (model-predictive
control, a notebook stepping a robot, a comparison with Pinocchio, which is single-threaded) runs faster pinned to
one core with dispatch in the calling thread: :func:`one_scenario_runtime`, called before the first computation.
Batched work (``vmap``) wants every core: do not use it there. ``experiments/biped_timing.py --runtime`` measures it.
"""
import importlib.metadata
import os
import warnings
from typing import NamedTuple

class BackendFlag(NamedTuple):
    """One XLA:CPU setting: ``--name=value``, set on the jaxlib (major, minor) versions ``jaxlibs``."""
    name: str
    value: str
    jaxlibs: tuple

    @property
    def text(self):
        return f"--{self.name}={self.value}"


NO_YNN_FUSIONS = BackendFlag("xla_cpu_experimental_ynn_fusion_type", "", ((0, 10),))
LOOP_EMITTERS = BackendFlag("xla_cpu_use_fusion_emitters", "false", ((0, 9), (0, 10)))
FLAGS = (NO_YNN_FUSIONS, LOOP_EMITTERS)
# the YNNPACK setting under its former names (tests and users read these)
FLAG_NAME, FLAG, HAS_YNN_FLAG = NO_YNN_FUSIONS.name, NO_YNN_FUSIONS.text, NO_YNN_FUSIONS.jaxlibs


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


def due_flags(version, flags):
    """The settings of :data:`FLAGS` that jaxlib ``version`` has and the ``XLA_FLAGS`` string ``flags`` does not
    already set (the user's choice wins)."""
    return [f for f in FLAGS if version in f.jaxlibs and f"--{f.name}=" not in flags]


def apply(environ=None):
    """Set the XLA:CPU flags this jaxlib has (module docstring). Returns what was done: "set" (at least one
    added), "kept" (the user's XLA_FLAGS already choose every one), "off" (MRDS_JAX_XLA_FLAGS=0), "not needed" (a
    jaxlib with none of them) or "late" (backends already started: warned where the YNNPACK setting was due)."""
    environ = os.environ if environ is None else environ
    if environ.get("MRDS_JAX_XLA_FLAGS", "1") == "0":
        return "off"
    version = jaxlib_version()
    if not any(version in f.jaxlibs for f in FLAGS):
        return "not needed"
    flags = environ.get("XLA_FLAGS", "")
    due = due_flags(version, flags)
    if not due:
        return "kept"
    if _backends_started():
        if NO_YNN_FUSIONS in due:
            warnings.warn(f"mrds_jax was imported after JAX started its backends, so XLA:CPU keeps its YNNPACK "
                          f"fusion of small reductions, which makes closed-chain steps ~10x slower on jaxlib "
                          f"{'.'.join(map(str, version))}. Import mrds_jax before running any JAX computation, or "
                          f"start Python with XLA_FLAGS=\"{' '.join(f.text for f in due)}\"", BackendFlagWarning,
                          stacklevel=3)
        return "late"
    environ["XLA_FLAGS"] = " ".join([flags] + [f.text for f in due]).strip()
    return "set"


class RuntimeStartedError(RuntimeError):
    """:func:`one_scenario_runtime` was called after JAX started its CPU backend."""


def one_scenario_runtime(core=None):
    """Run this process's XLA:CPU work on one core, each call in the calling thread (module docstring): pins the
    process (its threads, and so every thread started after, XLA's pool included) to ``core`` (default: the
    lowest core it may run on) and turns JAX's asynchronous CPU dispatch off. Call it before the first JAX
    computation, e.g. right after ``import mrds_jax``; returns the core. For processes that run one scenario per
    call: a batch (``vmap``) runs on that one core only."""
    allowed = os.sched_getaffinity(0)
    core = min(allowed) if core is None else core
    if core not in allowed:
        raise ValueError(f"one_scenario_runtime: core {core!r} is not one this process may run on "
                         f"({sorted(allowed)})")
    if _backends_started():
        raise RuntimeStartedError("one_scenario_runtime: JAX's CPU backend has already started (a computation ran "
                                  "before it), so its thread pool and dispatch are fixed; call it before the first "
                                  "JAX computation of the process")
    import jax
    for thread in _thread_ids():
        os.sched_setaffinity(thread, {core})
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    return core


def _thread_ids():
    """This process's threads (Linux: /proc/self/task; elsewhere the calling thread, 0)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
