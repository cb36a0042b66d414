"""Declarative system files (``mrds_jax.sysfile``) through the command line.

* Every ready-made file (``mrds_jax/data/systems``: four-bar, dual-arm grasp, Stewart platform, quadruped)
  runs through ``mrds-jax check`` and ``mrds-jax simulate``: the degrees of freedom equal Grübler's count
  (coordinates minus independent constraints, counted by hand below), the initial state is consistent, the
  simulation keeps the constraints (max |Φ_p| < 1e-6) and writes the documented outputs; the passive
  four-bar (no stabilisation, no damping) conserves energy.
* A catalogue of bad files (``tests/data/bad_systems``, each with its expected error in its first line)
  gives errors naming the key and the line.
"""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from mrds_jax.cli import main
from mrds_jax.sysfile import SystemFileError, example_files, load_system_file, read_system_file

BAD = Path(__file__).parent / "data" / "bad_systems"

# (coordinates, constraints, DOF) counted from the mechanisms: four-bar 1 + 3 (ball) + 1 coordinates, one
# ball joint (3); dual arm 6 + 6 + 6, two welds (6 each); Stewart six U-P legs (3 each) + free payload, six
# balls (3 each); quadruped free trunk + 4 x 3 joints, four point contacts (3 each)
EXPECTED = {"fourbar": (5, 3, 2), "dual_arm_grasp": (18, 12, 6), "stewart": (24, 18, 6), "quadruped": (18, 12, 6)}


def test_ready_made_files_are_all_listed():
    assert set(example_files()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_reports_dof_constraints_consistency(name, capsys):
    assert main(["check", name, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    n, n_c, dof = EXPECTED[name]
    assert (report["coordinates"], report["constraints"], report["dof"]) == (n, n_c, dof)
    assert report["redundant_constraints"] == 0 and report["max_position_error"] < 1e-9
    assert np.isfinite(report["condition_number"]) and report["dtype"] == "float64"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_simulate_writes_trajectory_plots_and_animation(name, tmp_path, capsys, monkeypatch):
    """Run as the docs say, twice (``--out`` defaults to the system's name: the second run finds the first
    one's output folder where a path named like the system would be), then ``check`` the same name."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / name
    animation = "gif" if name == "fourbar" else "none"     # one animation is enough to pay for here
    for run in range(2):
        assert main(["simulate", name, "--no-progress", "--animation", "none" if run else animation, "--no-cache"]) == 0
        captured = capsys.readouterr()
        assert "compiled and ran the first block" in captured.err
        assert re.search(r"time: compile \d+\.\d s, simulate \d+\.\d s, write \d+\.\d s", captured.out)
    assert main(["check", name]) == 0
    spec = read_system_file(example_files()[name]).spec
    data = np.load(out / "trajectory.npz")
    meta = json.loads((out / "trajectory.json").read_text())
    n_steps = round(spec.simulation.duration / spec.simulation.dt)
    assert len(data["t"]) == n_steps // spec.simulation.decimation + 1
    np.testing.assert_allclose(data["t"][-1], spec.simulation.duration, rtol=1e-9)
    for m, sizes in meta["modules"].items():
        assert data[f"q/{m}"].shape == (len(data["t"]), sizes["nq"]) and np.isfinite(data[f"q/{m}"]).all()
    assert sum(sizes["nv"] for sizes in meta["modules"].values()) == EXPECTED[name][0]
    assert np.abs(data["constraint/position"]).max() < 1e-6
    for f in ("joint_motion.png", "constraint_error.png", "energy.png") + (("animation.gif",) if name == "fourbar" else ()):
        assert (out / f).stat().st_size > 1000, f
    if name == "fourbar":   # passive, exact constraints, RK4: the total energy is conserved
        E = data["energy/total"]
        assert np.abs(E - E[0]).max() < 1e-6 * np.abs(data["energy/kinetic"]).max()
        assert np.ptp(data["energy/kinetic"]) > 1e-2      # and it is exchanged with the potential


def _expectation(path):
    m = re.match(r"# expect: (\S+) @ (\d+): (.*)", path.read_text().splitlines()[0])
    return (None if m.group(1) == "None" else m.group(1)), int(m.group(2)), m.group(3)


@pytest.mark.parametrize("path", sorted(BAD.glob("*.toml")), ids=lambda p: p.stem)
def test_bad_files_name_key_and_line(path):
    key, line, pattern = _expectation(path)
    with pytest.raises(SystemFileError) as info:
        load_system_file(path)
    e = info.value
    assert (e.key, e.line) == (key, line), str(e)
    assert re.search(pattern, e.message), str(e)
    assert str(e).startswith(f"{path}:{line}: ")


def test_check_command_exits_with_the_located_error(capsys):
    assert main(["check", str(BAD / "missing_frame.toml")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"^mrds-jax check: .*missing_frame\.toml:27: contact\[0\]\.E: module 'arm' has no operational "
                     r"point 'elbow'", err) and len(err.splitlines()) == 1, err


def test_misspelt_key_names_the_closest_key():
    from mrds_jax.sysfile import schema
    assert schema.keys_at(("module", 0, "link", 1))[:3] == ["name", "parent", "joint"]
    assert schema.keys_at(("simulation",)) == list(schema.Simulation.model_fields)
    assert schema.keys_at(("initial", "q")) == []            # a dict of module names, not a table of keys


def test_every_plotted_line_has_a_legend_label():
    """joint_motion.png labels each position coordinate (a ball joint's four quaternion entries apart), the
    animation each module once."""
    from mrds_jax.loaders.mjcf import load_mjcf
    from mrds_jax.sysfile import EXAMPLES
    from mrds_jax.sysfile.run import coordinate_names
    from mrds_jax.viz.animation import _legend_labels
    system = load_mjcf(EXAMPLES / "fourbar.xml")
    labels = {name: coordinate_names(m) for name, m in zip(system.module_names, system.modules)}
    assert labels == {"crank": ["crank_hinge"] + [f"coupler_ball[{i}]" for i in range(4)], "rocker": ["rocker_hinge"]}
    assert _legend_labels([0, 0, 1, 1, 1], ("crank", "rocker")) == ["crank", None, "rocker", None, None]


def test_ready_made_names_and_paths_resolve_without_ambiguity(tmp_path, monkeypatch):
    """A bare ready-made name is the shipped file even beside a folder of that name (an earlier run's output);
    a path is a path; a folder or a missing file is a located error with the closest ready-made name."""
    from mrds_jax.sysfile.cli import resolve
    examples = example_files()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fourbar").mkdir()
    (tmp_path / "mine").write_text('name = "mine"\n')
    assert resolve("fourbar", examples) == examples["fourbar"]
    assert resolve("mine", examples) == Path("mine") and resolve("./mine", examples) == Path("mine")
    with pytest.raises(SystemFileError, match=r"^\./fourbar: is a folder, not a system file; for the ready-made "
                                              r"one write fourbar$"):
        resolve("./fourbar", examples)
    with pytest.raises(SystemFileError, match=r"^stewrt\.toml: no such system file .*did you mean 'stewart'\?$"):
        resolve("stewrt.toml", examples)


def test_diverging_simulation_is_a_user_error_at_dt(tmp_path, capsys):
    """Steps far too long for the motion: the state becomes NaN, reported as one line naming ``[simulation] dt``
    (exit status 2), not a SimulationError traceback."""
    path = Path(__file__).parent / "data" / "diverging.toml"
    assert main(["simulate", str(path), "--out", str(tmp_path / "run"), "--no-progress", "--no-cache"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mrds-jax")]
    assert len(err) == 1 and re.search(r"diverging\.toml:11: simulation\.dt: the simulation diverged in the block from "
                                       r"t = 0 s: the state became NaN/inf at step \d+.*; try a smaller dt", err[0]), err
