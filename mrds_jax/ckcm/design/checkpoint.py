"""The optimiser's checkpoint files, written after every block and read by ``resume=True``: ``state.npz`` (every
leaf of the carry, the optimiser's own state included, the history and a checksum, written atomically) and
``fingerprint.json`` (the problem, settings, task and base parameters a saved run belongs to). A missing, damaged
or foreign file is a :class:`~mrds_jax.validation.CheckpointError` naming it. Split out of :mod:`.optimizer` (one
concern per file); the optimiser's method is there.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ... import validation as check
from ...pytree import replace
from ...validation import CheckpointError
from .optimizer_state import CARRY_FIELDS, Carry


STATE_FORMAT = 3   # 2: the multiplier update after a block is pending in the saved state (module docstring);
                   # 3: the optimiser's own state (Adam moments, L-BFGS memory) is saved too, with a checksum


def save_state(out_dir: Path, carry: Carry, blocks_done: int, history):
    """``state.npz``: every leaf of the carry (the optimiser's state as ``opt.<i>``, tree order), the history,
    the blocks done and a checksum of all of them, written atomically."""
    arrays = {f"carry.{k}": np.asarray(getattr(carry, k)) for k in CARRY_FIELDS}
    arrays.update({f"opt.{i}": np.asarray(x) for i, x in enumerate(jax.tree_util.tree_leaves(carry.opt_state))})
    arrays.update({f"history.{k}": np.asarray(v) for k, v in history.items()})
    arrays["blocks_done"] = np.asarray(blocks_done)
    arrays["checksum"] = np.asarray(check.array_checksum(arrays))
    tmp = out_dir / "state.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, out_dir / "state.npz")


def read_state(path: Path):
    """The arrays of a ``state.npz`` whose checksum matches; :class:`~mrds_jax.validation.CheckpointError`
    naming the file when it is truncated, damaged or not ours."""
    z = check.read_npz(path, "optimiser state file")
    checksum = str(z.pop("checksum", ""))
    if check.array_checksum(z) != checksum:
        raise CheckpointError(f"optimiser state file {str(path)!r} is damaged (its checksum does not match its "
                              "contents); delete the folder or run without --resume")
    return z


def load_state(path: Path, z, carry: Carry):
    """The saved carry (optimiser state included, so the run continues bit for bit), blocks done and history
    from the arrays ``z`` of ``state.npz`` (``read_state``); CheckpointError when they do not fit this run."""
    opt_leaves, opt_tree = jax.tree_util.tree_flatten(carry.opt_state)
    wanted = {f"carry.{k}": np.shape(getattr(carry, k)) for k in CARRY_FIELDS}
    wanted.update({f"opt.{i}": np.shape(x) for i, x in enumerate(opt_leaves)})
    bad = {k: (z[k].shape if k in z else None, shape) for k, shape in wanted.items()
           if k not in z or z[k].shape != shape}
    if bad:
        raise CheckpointError(f"cannot resume from {str(path)!r}: it does not fit this run (saved vs needed "
                              f"shapes: {bad})")
    fields = {k: jnp.asarray(z[f"carry.{k}"]) for k in CARRY_FIELDS}
    opt_state = jax.tree_util.tree_unflatten(opt_tree, [jnp.asarray(z[f"opt.{i}"]) for i in range(len(opt_leaves))])
    carry = replace(carry, **fields, opt_state=opt_state)
    history = {k.split(".", 1)[1]: list(z[k]) for k in z if k.startswith("history.")}
    return carry, int(z["blocks_done"]), history


def run_fingerprint(problem, settings, data, task_json):
    d = {"state": STATE_FORMAT, "problem": repr(problem), "settings": asdict(settings), "task": task_json,
         "base": {k: np.asarray(v).tolist() for k, v in vars(data.base).items()},
         "limits": asdict(jax.tree_util.tree_map(float, data.limits))}
    return json.dumps(d, sort_keys=True, default=str)


def saved_run(out):
    """(fingerprint, arrays of ``state.npz``) of the run saved in the folder ``out``, both files checked (they
    exist, are intact, and the state's checksum matches); raises :class:`~mrds_jax.validation.CheckpointError`
    naming the folder or file otherwise. Cheap (no compilation): the command line calls it before building the
    problem."""
    if out is None:
        raise check.ArgumentError("optimize: resume=True needs out_dir (the folder of the run to continue)")
    out = Path(out)
    if not (out / "state.npz").exists():
        raise CheckpointError(f"cannot resume: {str(out)!r} holds no saved run (no state.npz); run without "
                              "resume to start one")
    return check.read_json(out / "fingerprint.json", "optimiser fingerprint file"), read_state(out / "state.npz")


def check_resumable(out, fingerprint):
    """The arrays of the saved run in ``out`` (:func:`saved_run`) when it was written by this problem and these
    settings; CheckpointError otherwise."""
    saved_fingerprint, arrays = saved_run(out)
    if saved_fingerprint != fingerprint:
        raise CheckpointError(f"cannot resume from {out}: it was written by a different problem or settings "
                              "(delete the directory or pass resume=False)")
    return arrays
