"""Declarative system files (TOML): describe modules (URDF, MJCF, the CKCM builder or links), contacts, force
elements, the initial state and the simulation settings in one file, then ``mrds-jax check FILE`` or
``mrds-jax simulate FILE --out DIR``. The format: ``docs/system_files.md``; ready-made files:
``mrds_jax/data/systems/`` (:func:`example_files`)."""
from pathlib import Path

from .build import Built, Document, SystemFileError, build, read_system_file
from .run import check_built, format_check, run_simulation, write_outputs

EXAMPLES = Path(__file__).resolve().parent.parent / "data" / "systems"


def example_files():
    """{name: path} of the ready-made system files shipped with the package."""
    return {p.stem: p for p in sorted(EXAMPLES.glob("*.toml"))}


def load_system_file(path):
    """Read, validate and build a system file: a :class:`Built` (system, state, forces, settings)."""
    return build(read_system_file(path))


__all__ = ["Built", "Document", "EXAMPLES", "SystemFileError", "build", "check_built", "example_files",
           "format_check", "load_system_file", "read_system_file", "run_simulation", "write_outputs"]
