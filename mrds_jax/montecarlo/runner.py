"""Batched Monte Carlo: scenarios drawn from a spec, run as ``jit(vmap(task))`` in fixed-size chunks,
sharded over all local devices, checkpointed after every chunk.

Guarantees
* Deterministic: scenario i always gets key fold_in(PRNGKey(seed), i), so results do not depend on the
  chunk size, the number of devices, or on whether the run was interrupted and resumed.
* Nothing is lost: each finished chunk is written atomically to ``checkpoint_dir``; rerunning the same call
  loads finished chunks and computes only the rest.
* One compilation: every chunk (the last one padded) has the same shape.
* Multi-host (documented, not tested here): after ``jax.distributed.initialize()`` each process runs the
  chunks ``c`` with ``c % process_count == process_index`` on its local devices into a shared
  ``checkpoint_dir``; any process can then call :func:`run_monte_carlo` again (all chunks present) to
  assemble the result.

Failures: a scenario fails when any of its outputs is non-finite, or when the task returns ``ok = False``
(optionally with an integer ``reason`` indexing ``reasons``). Failed scenarios are counted with their
reason and excluded from the statistics.
"""
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .samplers import sample, scenario_keys

OK, NON_FINITE = 0, 1


class CheckpointMismatch(ValueError):
    pass


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
        """Per metric: mean, std, min, max, quantiles over the scenarios that did not fail; plus counts."""
        good = ~self.failed
        out = {}
        for name, x in self.metrics.items():
            xs = x[good]
            stats = dict(count=int(xs.size), mean=float(xs.mean()), std=float(xs.std(ddof=1)) if xs.size > 1
                         else 0.0, min=float(xs.min()), max=float(xs.max()))
            stats.update({f"q{q:g}": float(v) for q, v in zip(quantiles, np.quantile(xs, quantiles))})
            out[name] = stats
        out["_failed"] = dict(count=int(self.failed.sum()), reasons=self.reason_counts())
        return out


def _fingerprint(spec, n, seed, chunk_size, tag):
    text = repr((jax.tree.flatten(spec, is_leaf=lambda x: not isinstance(x, (dict, list, tuple)))[0], n, seed,
                 chunk_size, tag))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _prepare_checkpoint(path, meta):
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    meta_file = path / "meta.json"
    if meta_file.exists():
        old = json.loads(meta_file.read_text())
        if old != meta:
            diff = {k: (old.get(k), meta.get(k)) for k in set(old) | set(meta) if old.get(k) != meta.get(k)}
            raise CheckpointMismatch(f"checkpoint {path} belongs to another run (differs in {diff}); "
                                     "use a new directory or the same settings")
    else:
        meta_file.write_text(json.dumps(meta, indent=1))
    return path


def _save_chunk(path, c, arrays):
    tmp = path / f".chunk_{c:06d}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path / f"chunk_{c:06d}.npz")


def _load_chunk(path, c):
    f = path / f"chunk_{c:06d}.npz"
    if not f.exists():
        return None
    with np.load(f) as z:
        return {k: z[k] for k in z.files}


def _flags(out):
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for k, x in out.items()
                                if k not in ("ok", "reason") and jnp.issubdtype(x.dtype, jnp.inexact)]))
    ok = out.get("ok", jnp.asarray(True))
    reason = jnp.where(~finite, NON_FINITE, jnp.where(ok, OK, 2 + out.get("reason", jnp.asarray(0))))
    return reason


def make_chunk_runner(task, spec, seed, chunk_size, devices=None, dtype=None):
    """jit(vmap) of ``task`` over the scenarios ``indices`` (length ``chunk_size``), sharded over ``devices``."""
    devices = list(devices or jax.local_devices())
    if chunk_size % len(devices):
        raise ValueError(f"chunk_size {chunk_size} must be a multiple of the device count {len(devices)}")
    mesh = Mesh(np.array(devices), ("scenarios",))
    sharded = NamedSharding(mesh, PartitionSpec("scenarios"))

    def one(key):
        out = dict(task(sample(spec, key, dtype)))
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
    ones are on disk). ``tag`` distinguishes runs whose spec repr is equal but whose task differs.
    """
    n_chunks = -(-n // chunk_size)
    path = None
    if checkpoint_dir is not None:
        meta = dict(n=n, seed=seed, chunk_size=chunk_size, fingerprint=_fingerprint(spec, n, seed, chunk_size, tag),
                    keep_trajectories=bool(keep_trajectories))
        path = _prepare_checkpoint(checkpoint_dir, meta)
    runner = None
    mine = [c for c in range(n_chunks) if c % jax.process_count() == jax.process_index()]
    results, new = {}, 0
    bar = _progress(progress, n_chunks)
    for c in range(n_chunks):
        saved = _load_chunk(path, c) if path is not None else None
        if saved is None and c in mine:
            if stop_after_chunks is not None and new >= stop_after_chunks:
                bar.close()
                raise Interrupted(f"stopped after {new} new chunks ({c} of {n_chunks} done)")
            runner = runner or make_chunk_runner(task, spec, seed, chunk_size, devices, dtype)
            idx = np.minimum(np.arange(c * chunk_size, (c + 1) * chunk_size), n - 1)
            out = jax.tree.map(np.asarray, runner(idx))
            valid = min(chunk_size, n - c * chunk_size)
            saved = {k: v[:valid] for k, v in out.items() if keep_trajectories or v.ndim == 1}
            if path is not None:
                _save_chunk(path, c, saved)
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
