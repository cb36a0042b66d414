"""The ``mrds-jax`` console script driven as a user drives it: a child process in a fresh folder.

* The documented commands run twice in a row into the same folder (``--out`` defaults to the system's name, so
  the first run's output folder lies where the second run looks for its input): a ready-made name is the shipped
  file, never the folder of that name; ``check`` after them passes too. (All four ready-made systems run twice
  with the default ``--out`` in one process in test_system_files.py; here the four-bar, through the real entry
  point.)
* Every class of user error ends in one line on stderr naming the file, the line and the key (or the option),
  and exit status 2, never a traceback (a diverging simulation, the costliest to reach, in test_system_files.py).
* ``simulate --viewer`` writes the browser viewer page beside the plots; in a headless Chromium (where one is
  installed: marked ``browser``) it shows the four-bar moving: two screenshots at different times differ.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mrds_jax.viz.viewer import find_browser, screenshot

DATA = Path(__file__).parent / "data"
SCRIPT = shutil.which("mrds-jax", path=str(Path(sys.executable).parent)) or shutil.which("mrds-jax")


def mrds_jax(args, cwd, timeout=300):
    """Run the console script (or ``python -m mrds_jax.cli`` where it is not installed) in ``cwd``."""
    cmd = [SCRIPT] if SCRIPT else [sys.executable, "-m", "mrds_jax.cli"]
    return subprocess.run(cmd + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))       # the test run's XLA flags and XLA cache (tests/conftest.py)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("user")


@pytest.fixture(scope="module")
def fourbar_runs(workdir):
    """``mrds-jax simulate fourbar --out fourbar --viewer``, then the same without ``--viewer`` into the same folder
    (compiled programs kept between the runs, in the test run's XLA cache named by ``--cache-dir``: the in-process
    four-bar runs of test_system_files.py share its programs, 3 s of CPU measured)."""
    args = ["simulate", "fourbar", "--out", "fourbar", "--no-progress", "--animation", "none",
            "--cache-dir", os.environ["MRDS_TEST_XLA_CACHE"]]
    return [mrds_jax(args + ["--viewer"], workdir), mrds_jax(args, workdir)]


def test_simulate_fourbar_twice_into_the_same_folder_then_check(fourbar_runs, workdir):
    for r in fourbar_runs:
        assert r.returncode == 0, r.stdout + r.stderr
        assert re.search(r"time: compile \d+\.\d s, simulate \d+\.\d s, write \d+\.\d s", r.stdout), r.stdout
    for name in ("trajectory.npz", "joint_motion.png", "viewer.html"):
        assert (workdir / "fourbar" / name).stat().st_size > 1000, name
    check = mrds_jax(["check", "fourbar"], workdir)
    assert check.returncode == 0 and "degrees of freedom: 2" in check.stdout, check.stdout + check.stderr


def _bad(name):
    return str(DATA / "bad_systems" / f"{name}.toml")


# (id, arguments, the one line on stderr: a regular expression)
USER_ERRORS = [
    ("misspelt key", ["check", _bad("misspelled_key")],
     r"^mrds-jax check: .*misspelled_key\.toml:11: module\[0\]\.link\[0\]\.mas: unknown key 'mas' \(= '1 kg'\); "
     r"did you mean 'mass'\?$"),
    ("negative mass", ["simulate", _bad("negative_mass"), "--out", "neg"],
     r"^mrds-jax simulate: .*negative_mass\.toml:11: module\[0\]\.link\[0\]\.mass: Input should be greater than 0, "
     r"got '-2 kg'$"),
    ("inconsistent initial state, check", ["check", str(DATA / "inconsistent_state.toml")],
     r"^mrds-jax check: .*inconsistent_state\.toml:34: initial\.make_consistent: the initial state violates the "
     r"contacts: position error 0\.7 \(hold\), velocity error 0\.3 \(hold\), more than 1e-06; set make_consistent "
     r"= true under \[initial\]"),
    ("inconsistent initial state, simulate", ["simulate", str(DATA / "inconsistent_state.toml"), "--out", "inc"],
     r"^mrds-jax simulate: .*inconsistent_state\.toml:34: initial\.make_consistent: .*position error 0\.7 .*"
     r"velocity error 0\.3"),
    ("contacts that cannot close", ["check", str(DATA / "unreachable_contact.toml")],
     r"^mrds-jax check: .*unreachable_contact\.toml:31: initial\.q: the initial state violates the contacts: "
     r"position error 4 \(hold\).*make_consistent did not close the loops \(residuals 4, .*\): check that the "
     r"contacts can hold together"),
    ("not TOML", ["check", _bad("syntax_error")], r"^mrds-jax check: .*syntax_error\.toml:4: not valid TOML"),
    ("unknown choice", ["check", _bad("unknown_contact_kind")],
     r"^mrds-jax check: .*unknown_contact_kind\.toml:26: contact\[0\]\.kind: Input should be 'weld'.*got 'hinge'"),
    ("unknown module", ["check", _bad("missing_module")],
     r"^mrds-jax check: .*missing_module\.toml:28: contact\[0\]\.P: no module named 'arm2' .*did you mean 'arm'\?$"),
    ("missing file", ["check", "fourbr"],
     r"^mrds-jax check: fourbr: no such system file \(ready-made: .*\); did you mean 'fourbar'\?$"),
    ("a folder", ["check", "."], r"^mrds-jax check: \.: is a folder, not a system file"),
    ("bad option value", ["simulate", "fourbar", "--animation", "avi"],
     r"^mrds-jax simulate: error: argument --animation: invalid choice: 'avi'"),
    ("output folder is a file", ["simulate", "fourbar", "--out", __file__],
     r"^mrds-jax simulate: --out '.*test_cli\.py' is a file, not a folder$"),
    ("nothing to simulate", ["simulate"], r"^mrds-jax simulate: give a SYSTEM_FILE"),
    ("design batch size", ["optimize", "--batch-size", "0", "--out", "bs"],
     r"^mrds-jax optimize: --batch-size must be an integer >= 1, got 0$"),
    ("design iterations", ["optimize", "--iterations", "-5", "--out", "it"],
     r"^mrds-jax optimize: --iterations must be an integer >= 1, got -5$"),
]


PROGRESS = re.compile(r"^(compiling the \d+-coordinate system|compiled and ran the first block)")   # simulate's phases


@pytest.mark.parametrize("case", USER_ERRORS, ids=[c[0] for c in USER_ERRORS])
def test_user_error_is_one_line_and_status_2(case, tmp_path):
    _, args, pattern = case
    r = mrds_jax(args, tmp_path)
    lines = [line for line in r.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    assert re.search(pattern, lines[0]), f"stderr {lines[0]!r} does not match {pattern!r}"


def test_help_is_plain_text(tmp_path):
    r = mrds_jax(["--help"], tmp_path)
    assert r.returncode == 0 and "mrds-jax simulate fourbar" in r.stdout
    assert not re.search(r":(class|func|mod):", r.stdout), r.stdout


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_viewer_page_shows_the_fourbar_moving(fourbar_runs, workdir):
    """Two screenshots of the page ``simulate --viewer`` wrote, 1.3 s apart in the browser's time (the loop
    lasts 2.55 s): the mechanism is drawn and has moved between them."""
    assert fourbar_runs[0].returncode == 0, fourbar_runs[0].stderr
    from PIL import Image
    html = workdir / "fourbar" / "viewer.html"
    frames = [np.asarray(Image.open(screenshot(html, workdir / f"frame{ms}.png", size=(480, 360), wait_ms=ms))
                         .convert("RGB")).astype(int) for ms in (3000, 4300)]
    for img in frames:                      # the rocker (module 1, #ff7f0e) is drawn
        orange = (img[..., 0] > img[..., 2] + 80) & (img[..., 1] > 60)
        assert orange.sum() > 30, orange.sum()
    changed = np.abs(frames[0] - frames[1]).max(axis=-1) > 40       # the grid, the axes and the camera stand still
    assert changed.sum() > 100, changed.sum()
