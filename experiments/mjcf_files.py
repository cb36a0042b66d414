"""MJCF files through ``load_mjcf``, each classified: loaded (modules, DOF), a named error (a ModelError or other
ValueError whose message starts with the file), or a bare error (anything else: a bug). The files: those given, or
every ``*.xml`` under the directories given (e.g. the ``mjx/test_data`` of a mujoco wheel that ships it; the
mujoco 4.0 wheel does not).

    python experiments/mjcf_files.py /path/to/mujoco/mjx/test_data
"""
import sys
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)


def classify(path):
    """(outcome, detail) of ``load_mjcf(path)``: 'loaded', 'named error' or 'bare error'."""
    from mrds_jax.loaders.mjcf import load_mjcf
    from mrds_jax.validation import InputError
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            system = load_mjcf(path)
    except (InputError, ValueError, FileNotFoundError) as e:
        named = str(e).startswith(str(path)) or isinstance(e, InputError)
        return ("named error" if named else "bare error"), f"{type(e).__name__}: {str(e)[len(str(path)) + 2:][:110]}"
    except Exception as e:              # noqa: BLE001 - what this script exists to find
        return "bare error", f"{type(e).__name__}: {str(e)[:110]}"
    return "loaded", f"{len(system.modules)} modules, {sum(m.nv for m in system.modules)} DOF"


def main(args):
    files = []
    for a in map(Path, args):
        files += sorted(a.rglob("*.xml")) if a.is_dir() else [a]
    rows = []
    print("| file | outcome | detail |\n|---|---|---|", flush=True)
    for f in files:
        rows.append((f, *classify(f)))
        print(f"| {f.name} | {rows[-1][1]} | {rows[-1][2]} |", flush=True)
    counts = {k: sum(r[1] == k for r in rows) for k in ("loaded", "named error", "bare error")}
    print(f"\n{len(rows)} files: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
