"""The first hour, as a new user has it (full mode: ``MRDS_SLOW=1``, which ``.ci/run`` runs).

A copy of the repository as a clone has it (``git ls-files``: tracked and untracked-but-not-ignored files) gets a
fresh virtual environment (no system site-packages) and exactly the README's own install line,
``python3 -m venv .venv && . .venv/bin/activate && pip install . && mrds-jax optimize --out ckcm_design``, run
as written by bash: no extras, nothing of the test environment. Then every other command in the README's
``bash`` blocks and in its code spans that start with ``mrds-jax`` runs in that environment, as written, each
exiting 0 (the README's test command is ``.ci/run``'s own job and is left out); each ready-made system goes
through ``check`` and ``simulate`` (default settings); the documentation site command runs with ``build
--strict`` in place of ``serve`` (which never exits), after the README's ``pip install ".[docs]"``.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_readme import README, code_blocks

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install . && "


def readme_commands(text=README):
    """The shell commands the README shows, in order: the lines of its ``bash`` blocks (without the test
    command, which is CI's own), then the ``mrds-jax`` commands of its code spans that no block has."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip() and "pytest" not in ln]
    spans = [s for s in re.findall(r"`((?:mrds-jax|pip install) [^`\n]*)`", text)
             if "pytest" not in s and not any(s in ln for ln in lines)]
    return lines + spans


def user_env():
    """The environment of a user's shell: no virtual environment or Python path of the test run (its XLA flags
    and compilation cache stay: they change compile time, not what runs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    here = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != here)
    return env


def shell(command, cwd, timeout=900):
    """``command`` as a user types it, in bash inside the clone, after activating its .venv (if any yet)."""
    activate = ". .venv/bin/activate && " if (cwd / ".venv").exists() else ""
    return subprocess.run(["bash", "-c", activate + command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=user_env())


def clone_of_the_repository(dest):
    """The files a clone has: ``git ls-files`` (tracked and untracked-but-not-ignored) copied to ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """The clone after the README's first line ran in it (the install and the optimiser): (folder, result)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the repository's git checkout")
    dest = clone_of_the_repository(tmp_path_factory.mktemp("clone"))
    first = readme_commands()[0]
    assert first.startswith(INSTALL) and "[" not in first, first          # exactly `pip install .`, no extras
    return dest, shell(first, dest)


@pytest.mark.slow
def test_readme_install_line_installs_no_extras_and_optimises(clone):
    dest, run = clone
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"peak actuator force 4\d\d\.\d\d N -> 29\d\.\d\d N", run.stdout), run.stdout[-3000:]
    for name in ("design.json", "history.csv", "optimisation.png", "forces.png", "geometry.png"):
        assert (dest / "ckcm_design" / name).stat().st_size > 1000, name
    installed = shell("python -m pip list --format=freeze", dest).stdout.lower()
    assert "mujoco==" in installed and "matplotlib==" in installed             # the dependencies
    for extra in ("pytest==", "pin==", "mkdocs=="):                           # and no extra's packages
        assert extra not in installed, extra
    for heavy in ("meshcat==", "ipython==", "pyzmq==", "yourdfpy==", "trimesh=="):   # nor what they used to bring
        assert heavy not in installed, heavy


@pytest.mark.slow
@pytest.mark.parametrize("command", readme_commands()[1:], ids=lambda c: c.split("#")[0].strip())
def test_every_readme_command_exits_0(clone, command):
    dest, first = clone
    assert first.returncode == 0, first.stderr[-2000:]
    if "mkdocs serve" in command:        # serve never returns: build the same site, warnings as errors
        command = command.replace("mkdocs serve", "mkdocs build --strict --site-dir site")
    run = shell(command, dest)
    assert run.returncode == 0, f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    if "--design" in command:
        for name in ("actuator_forces.png", "tracking_error.png", "animation.gif", "viewer.html"):
            assert (dest / "ckcm_design" / "flight" / name).stat().st_size > 1000, name


READY_MADE = sorted(p.stem for p in (ROOT / "mrds_jax" / "data" / "systems").glob("*.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("name", READY_MADE)
def test_every_ready_made_system_checks_and_simulates(clone, name):
    dest, first = clone
    assert first.returncode == 0, first.stderr[-2000:]
    for command in (f"mrds-jax check {name}", f"mrds-jax simulate {name} --out ready/{name} --no-progress"):
        run = shell(command, dest)
        assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    folder = dest / "ready" / name
    assert (folder / "trajectory.npz").stat().st_size > 1000
    data, meta = np.load(folder / "trajectory.npz"), json.loads((folder / "trajectory.json").read_text())
    plots = ["joint_motion.png", "energy.png"] + (["constraint_error.png"] if data["constraint/position"].shape[1] else [])
    if "contact/impulses" in data:          # a contact scene: the contact plot, with load on some pair
        plots.append("contact.png")
        assert meta["step"].startswith("velocity-level") and "integrator" not in meta["simulation"]["integration"]
        assert "energy_lost" in meta and (data["contact/forces"].size == 0       # limits only: no slots
                                          or np.abs(data["contact/forces"]).max() > 0.0)  # some pair carried load
    else:
        assert not (folder / "contact.png").exists() and "energy_drift" in meta
    for plot in plots:
        assert (folder / plot).stat().st_size > 5000, plot


def test_readme_commands_are_found():
    """The finder sees the README's blocks and spans, the install line first, the test command left out."""
    commands = readme_commands()
    assert commands[0].startswith(INSTALL)
    assert any(c.startswith("mrds-jax simulate --design") for c in commands)
    assert any(c.startswith("mrds-jax check stewart") for c in commands)
    assert not any("pytest" in c for c in commands)
    assert 'pip install ".[docs]" && mkdocs serve' in commands
    assert len(code_blocks(README)) >= len([c for c in commands if not c.startswith("pip")])
