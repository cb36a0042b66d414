"""Batched Monte Carlo: scenarios drawn from a spec, run as ``jit(vmap(task))`` in fixed-size chunks,
sharded over all local devices, checkpointed after every chunk.

Guarantees
* Deterministic: scenario i always gets key fold_in(PRNGKey(seed), i), so results do not depend on the
  chunk size, the number of devices, or on whether the run was interrupted and resumed.
* Nothing is lost: each finished chunk is written atomically to ``checkpoint_dir``; rerunning the same call
  loads finished chunks and computes only the rest.
* Checkpoints are verified: ``meta.json`` holds the run's fingerprint — the task's code identity
  (:func:`task_identity`: its bytecode, constants, defaults and closure values), the spec's samplers and fixed
  values, n, the seed, the chunking, the dtype and ``tag`` — and a different run into the same folder is
  refused (:class:`CheckpointMismatch`, naming what differs). Every chunk file carries the fingerprint, the
  first scenario index, the count and a SHA-256 checksum of its arrays; a chunk that is truncated, shortened,
  copied from another chunk or another run is named in a :class:`CheckpointWarning` and recomputed.
* One compilation: every chunk (the last one padded) has the same shape.
* Multi-host (tests/test_distributed_montecarlo.py: two CPU processes on one machine): after
  ``jax.distributed.initialize()`` each process runs the chunks ``c`` with ``c % process_count ==
  process_index`` on its local devices into a shared ``checkpoint_dir``, then returns the result if every chunk
  is there or raises :class:`Interrupted` naming the missing ones; any process (or a later single-process call)
  with all chunks present assembles the result. A restarted job recomputes only the missing chunks.

Failures: a scenario fails when any of its outputs is non-finite, or when the task returns ``ok = False``
(optionally with an integer ``reason`` indexing ``reasons``). Failed scenarios are counted with their
reason and excluded from the statistics.
"""
import dataclasses
import functools
import hashlib
import json
import os
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .. import validation as check
from ..validation import CheckpointError
from .samplers import sample, scenario_keys

OK, NON_FINITE = 0, 1


class CheckpointMismatch(CheckpointError):
    """The checkpoint folder belongs to another run (task, spec, n, seed, chunking, ...)."""


class CheckpointWarning(UserWarning):
    """A damaged or foreign chunk file was found (named in the message) and is recomputed."""


class Interrupted(RuntimeError):
    """Raised when ``stop_after_chunks`` is reached (for tests and for time-boxed jobs)."""


@dataclass
class MonteCarloResult:
    n: int
    metrics: dict            # name -> (n,) per-scenario scalars
    failed: np.ndarray       # (n,) bool
    reason: np.ndarray       # (n,) int: 0 ok, 1 non-finite output, 2 + k the task's reasons[k]
    reasons: tuple = ()
    trajectories: dict = field(default_factory=dict)  # name -> (n, ...) when requested

    def reason_counts(self):
        names = ("ok", "non-finite output") + tuple(self.reasons)
        codes, counts = np.unique(self.reason, return_counts=True)
        return {names[c] if c < len(names) else f"reason {c}": int(k) for c, k in zip(codes, counts) if c != OK}

    def summary(self, quantiles=(0.01, 0.05, 0.5, 0.95, 0.99)):
        """Per metric: mean, std, min, max, quantiles over the scenarios that did not fail (a boolean metric as 0/1:
        its mean is the fraction that holds); plus counts."""
        good = ~self.failed
        out = {}
        for name, x in self.metrics.items():
            xs = np.asarray(x[good], dtype=float) if np.asarray(x).dtype == bool else x[good]
            stats = dict(count=int(xs.size), mean=float(xs.mean()), std=float(xs.std(ddof=1)) if xs.size > 1
                         else 0.0, min=float(xs.min()), max=float(xs.max()))
            stats.update({f"q{q:g}": float(v) for q, v in zip(quantiles, np.quantile(xs, quantiles))})
            out[name] = stats
        out["_failed"] = dict(count=int(self.failed.sum()), reasons=self.reason_counts())
        return out


def _value_identity(x, h):
    """Feed a value's content into the hash ``h``: arrays by dtype, shape and bytes; dataclasses (samplers) by
    type and fields; containers element by element; functions by :func:`task_identity`; others by repr."""
    if isinstance(x, (types.FunctionType, functools.partial, types.MethodType)):
        h.update(task_identity(x).encode())
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        h.update(f"<{type(x).__module__}.{type(x).__qualname__}>".encode())
        for f in dataclasses.fields(x):
            h.update(f.name.encode())
            _value_identity(getattr(x, f.name), h)
    elif isinstance(x, dict):
        for k in sorted(x, key=repr):
            h.update(repr(k).encode())
            _value_identity(x[k], h)
    elif isinstance(x, (list, tuple)):
        h.update(f"{type(x).__name__}{len(x)}".encode())
        for v in x:
            _value_identity(v, h)
    elif isinstance(x, (np.ndarray, jax.Array, np.generic)):
        a = np.asarray(x)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    else:
        h.update(repr(x).encode())


def _code_identity(code, h):
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_identity(c, h)
        else:
            h.update(repr(c).encode())


def task_identity(fn):
    """A hash of what a task computes, for the checkpoint fingerprint: for a function its module, name,
    bytecode (with nested functions), constants, defaults and closure values; for ``functools.partial`` the
    function's identity and the bound arguments; for another callable its type and attributes. Functions it
    calls by global name are identified by name only."""
    h = hashlib.sha256()
    if isinstance(fn, functools.partial):
        h.update(task_identity(fn.func).encode())
        _value_identity((fn.args, fn.keywords), h)
    elif isinstance(fn, types.MethodType):
        h.update(task_identity(fn.__func__).encode())
        _value_identity(fn.__self__, h)
    elif isinstance(fn, types.FunctionType):
        h.update(f"{fn.__module__}.{fn.__qualname__}".encode())
        _code_identity(fn.__code__, h)
        _value_identity((fn.__defaults__, fn.__kwdefaults__), h)
        for cell in fn.__closure__ or ():
            try:
                _value_identity(cell.cell_contents, h)
            except ValueError:          # an empty cell
                h.update(b"<empty>")
    else:
        h.update(f"{type(fn).__module__}.{type(fn).__qualname__}".encode())
        _value_identity(getattr(fn, "__dict__", {}), h)
    return h.hexdigest()


def _fingerprint(task, spec, n, seed, chunk_size, tag, dtype):
    """SHA-256 (first 32 hex digits) of everything that decides a run's results: the task's code identity, the
    spec (samplers and fixed values), n, seed, chunk size, dtype and ``tag``."""
    h = hashlib.sha256()
    for part in (task_identity(task), spec, n, seed, chunk_size, tag, None if dtype is None else np.dtype(dtype).str):
        _value_identity(part, h)
    return h.hexdigest()[:32]


def _prepare_checkpoint(path, meta):
    path = check.output_dir(path, "checkpoint folder")
    meta_file = path / "meta.json"
    if meta_file.exists():
        old = check.read_json(meta_file, "Monte Carlo checkpoint file")
        if old != meta:
            diff = {k: (old.get(k), meta.get(k)) for k in set(old) | set(meta) if old.get(k) != meta.get(k)} \
                if isinstance(old, dict) else {"meta.json": (old, meta)}
            raise CheckpointMismatch(f"checkpoint {path} belongs to another run (differs in {diff}; the fingerprint "
                                     "covers the task's code, the spec, n, seed, chunk_size, dtype and tag); use a "
                                     "new directory or the same settings")
    else:
        tmp = path / f".meta.{os.getpid()}.tmp.json"      # processes of a multi-host run may write it together
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, meta_file)
    return path


def _chunk_file(path, c):
    return path / f"chunk_{c:06d}.npz"


def _save_chunk(path, c, arrays, start, fingerprint):
    """Write chunk ``c`` atomically with what it covers: first scenario, count, run fingerprint, checksum."""
    count = len(next(iter(arrays.values())))
    meta = dict(_start=np.asarray(start), _count=np.asarray(count), _fingerprint=np.asarray(fingerprint),
                _checksum=np.asarray(check.array_checksum(arrays)))
    tmp = path / f".chunk_{c:06d}.tmp.npz"
    np.savez(tmp, **arrays, **meta)
    os.replace(tmp, _chunk_file(path, c))


def _chunk_problem(z, start, count, fingerprint):
    """Why a loaded chunk cannot be trusted (None when it can)."""
    meta = ("_start", "_count", "_fingerprint", "_checksum")
    if any(k not in z for k in meta):
        return "it lacks the chunk header (indices, count, checksum): written by an older version or by hand"
    if str(z["_fingerprint"]) != fingerprint:
        return "it belongs to another run (fingerprint differs)"
    if int(z["_start"]) != start:
        return f"it holds scenarios from {int(z['_start'])}, this chunk starts at {start} (a copied or swapped chunk)"
    arrays = {k: v for k, v in z.items() if k not in meta}
    sizes = {k: len(v) for k, v in arrays.items()}
    if int(z["_count"]) != count or any(s != count for s in sizes.values()):
        return f"it should hold {count} scenarios, has count {int(z['_count'])} and arrays of {sorted(set(sizes.values()))}"
    if check.array_checksum(arrays) != str(z["_checksum"]):
        return "its checksum does not match its contents"
    return None


def _load_chunk(path, c, start, count, fingerprint):
    """The arrays of a verified chunk file, or None when it is missing; a damaged or foreign chunk is named in a
    :class:`CheckpointWarning`, moved aside (``*.bad``) and treated as missing (recomputed)."""
    f = _chunk_file(path, c)
    if not f.exists():
        return None
    try:
        z = check.read_npz(f, "chunk file")
        problem = _chunk_problem(z, start, count, fingerprint)
    except CheckpointError as e:
        z, problem = None, str(e)
    if problem is None:
        return {k: v for k, v in z.items() if not k.startswith("_")}
    warnings.warn(f"Monte Carlo checkpoint: chunk file {f} is not trusted ({problem}); it is recomputed",
                  CheckpointWarning, stacklevel=3)
    os.replace(f, f.with_suffix(".npz.bad"))
    return None


def _check_arguments(task, spec, n, seed, chunk_size, stop_after_chunks):
    where = "run_monte_carlo"
    if not callable(task):
        raise check.ArgumentError(f"{where}: task must be a function of one scenario, got {type(task).__name__}")
    check.count(n, "n (number of scenarios)", where)
    check.count(chunk_size, "chunk_size", where)
    check.count(seed, "seed", where, minimum=0)
    if stop_after_chunks is not None:
        check.count(stop_after_chunks, "stop_after_chunks", where, minimum=0)


def _flags(out):
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for k, x in out.items()
                                if k not in ("ok", "reason") and jnp.issubdtype(x.dtype, jnp.inexact)]))
    ok = out.get("ok", jnp.asarray(True))
    reason = jnp.where(~finite, NON_FINITE, jnp.where(ok, OK, 2 + out.get("reason", jnp.asarray(0))))
    return reason


class TaskOutputError(check.ArgumentError):
    """A Monte Carlo task returned something other than a dict of numeric arrays (names the output)."""


def task_outputs(out):
    """The task's outputs as a dict; :class:`TaskOutputError` naming the output (and its type) when the task
    returns no dict, or an output that is not a numeric array (a string, None, a nested dict or list)."""
    where = "run_monte_carlo: the task must return a dict of numeric arrays (output name -> array)"
    if not isinstance(out, Mapping):
        raise TaskOutputError(f"{where}, got {'an array' if isinstance(out, jax.Array) else type(out).__name__}")
    for name, x in out.items():
        if not isinstance(x, (jax.Array, np.ndarray, np.number, int, float, bool)) or \
                not (jnp.issubdtype(jnp.result_type(x), jnp.number) or jnp.issubdtype(jnp.result_type(x), jnp.bool_)):
            raise TaskOutputError(f"{where}; output {name!r} is {type(x).__name__}")
    return {name: jnp.asarray(x) for name, x in out.items()}


def make_chunk_runner(task, spec, seed, chunk_size, devices=None, dtype=None):
    """jit(vmap) of ``task`` over the scenarios ``indices`` (length ``chunk_size``), sharded over ``devices``."""
    devices = list(devices or jax.local_devices())
    if chunk_size % len(devices):
        raise ValueError(f"chunk_size {chunk_size} must be a multiple of the device count {len(devices)}")
    mesh = Mesh(np.array(devices), ("scenarios",))
    sharded = NamedSharding(mesh, PartitionSpec("scenarios"))

    def one(key):
        out = task_outputs(task(sample(spec, key, dtype)))
        out["reason"] = _flags(out)
        out.pop("ok", None)
        return out

    @jax.jit
    def run(indices):
        indices = jax.lax.with_sharding_constraint(indices, sharded)
        return jax.vmap(one)(scenario_keys(seed, indices))

    def call(indices):
        return run(jax.device_put(jnp.asarray(indices, dtype=jnp.uint32), sharded))

    return call


def run_monte_carlo(task, spec, n, seed=0, chunk_size=1024, checkpoint_dir=None, keep_trajectories=False,
                    reasons=(), devices=None, progress=True, stop_after_chunks=None, tag="", dtype=None):
    """Run ``task(sample(spec, key_i))`` for i = 0..n-1 and collect its outputs.

    ``task`` maps one scenario (a pytree shaped like ``spec``) to a dict of arrays: scalar outputs are
    *metrics* (statistics via :meth:`MonteCarloResult.summary`), others *trajectories* (kept only with
    ``keep_trajectories``). Optional outputs ``ok`` (bool) and ``reason`` (int into ``reasons``) flag
    failures. ``stop_after_chunks`` raises :class:`Interrupted` after that many new chunks (the finished
    ones are on disk). ``tag``: anything else that changes the results and that the task's code identity
    (:func:`task_identity`) cannot see, e.g. the version of a function the task calls by global name.
    Raises :class:`~mrds_jax.validation.ArgumentError` for bad arguments, :class:`CheckpointMismatch` when
    ``checkpoint_dir`` holds another run, and warns :class:`CheckpointWarning` for each damaged chunk file
    (recomputed).
    """
    _check_arguments(task, spec, n, seed, chunk_size, stop_after_chunks)
    n_chunks = -(-n // chunk_size)
    path = None
    fp = _fingerprint(task, spec, n, seed, chunk_size, tag, dtype)
    if checkpoint_dir is not None:
        meta = dict(format=2, n=n, seed=seed, chunk_size=chunk_size, fingerprint=fp,
                    keep_trajectories=bool(keep_trajectories))
        path = _prepare_checkpoint(checkpoint_dir, meta)
    runner = None
    mine = [c for c in range(n_chunks) if c % jax.process_count() == jax.process_index()]
    results, new = {}, 0
    bar = _progress(progress, n_chunks)
    for c in range(n_chunks):
        valid = min(chunk_size, n - c * chunk_size)
        saved = _load_chunk(path, c, c * chunk_size, valid, fp) if path is not None else None
        if saved is None and c in mine:
            if stop_after_chunks is not None and new >= stop_after_chunks:
                bar.close()
                raise Interrupted(f"stopped after {new} new chunks ({c} of {n_chunks} done)")
            runner = runner or make_chunk_runner(task, spec, seed, chunk_size, devices, dtype)
            idx = np.minimum(np.arange(c * chunk_size, (c + 1) * chunk_size), n - 1)
            out = jax.tree.map(np.asarray, runner(idx))
            saved = {k: v[:valid] for k, v in out.items() if keep_trajectories or v.ndim == 1}
            if path is not None:
                _save_chunk(path, c, saved, c * chunk_size, fp)
            new += 1
        if saved is not None:
            results[c] = saved
        bar.update(1)
    bar.close()
    missing = [c for c in range(n_chunks) if c not in results]
    if missing:
        raise Interrupted(f"chunks {missing[:5]}{'...' if len(missing) > 5 else ''} are not finished yet "
                          "(other processes of a multi-host run?)")
    merged = {k: np.concatenate([results[c][k] for c in range(n_chunks)]) for k in results[0]}
    reason = merged.pop("reason").astype(int)
    metrics = {k: v for k, v in merged.items() if v.ndim == 1}
    trajectories = {k: v for k, v in merged.items() if v.ndim > 1}
    return MonteCarloResult(n=n, metrics=metrics, failed=reason != OK, reason=reason, reasons=tuple(reasons),
                            trajectories=trajectories)


class _NoBar:
    def update(self, k):
        pass

    def close(self):
        pass


def _progress(enabled, total):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, desc="monte carlo", unit="chunk")
