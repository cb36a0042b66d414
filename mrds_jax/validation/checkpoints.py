"""Files written and read back: output folders checked before any compilation, JSON and .npz checkpoint
files read with a :class:`~.errors.CheckpointError` naming the damaged file, and array checksums."""
import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import ArgumentError, CheckpointError


# ----------------------------------------------------------------------------- files
def output_dir(path, what="output folder"):
    """A folder we can write into (created if missing), checked before any compilation."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ArgumentError(f"{what} {str(p)!r} is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArgumentError(f"{what} {str(p)!r} cannot be created: {e.strerror}") from None
    probe = p / f".mrds_jax_write_test_{os.getpid()}"
    try:                            # a real write: os.access says yes to root on a read-only file system
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ArgumentError(f"{what} {str(p)!r} is not writable ({e.strerror})") from None
    return p


def read_json(path, what):
    """JSON from ``path``; CheckpointError naming the file when it is missing, truncated or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{what} {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what} {str(path)!r} is damaged (not JSON: {e})") from None


def read_npz(path, what):
    """All arrays of an .npz file as a dict; CheckpointError naming the file when it is damaged or truncated."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CheckpointError(f"{what} {str(path)!r} does not exist") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"{what} {str(path)!r} is damaged ({type(e).__name__}: {e})") from None


def array_checksum(arrays):
    """SHA-256 over names, dtypes, shapes and bytes of a dict of arrays (sorted by name)."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()
