"""The front doors a new user meets first, each failure one line that says what, where and how to fix it.

* Every malformed design file (a value that is not a number, a missing key, a wrong type, truncated or empty JSON,
  a file of another kind) given to ``mrds-jax simulate --design`` ends in one line on stderr naming the key, exit
  status 2, and no output folder left behind (in process, through ``mrds_jax.cli.main``; one case through the
  installed console script).
* A numeric option out of range names the flag as typed (``--iterations must be ...``), not an internal name.
* A missing package (MuJoCo for the MJCF four-bar), hidden from a child interpreter, is one line naming the extra
  to install, exit 2, and leaves no folder (``--viewer`` needs no package: tests/test_viewer.py).
* Every option of every subcommand has a sentence in ``--help``.
* The independent check of a design prints each limit's direction (≥ or ≤) and the margin, worked out here by hand.
* ``SystemDescriptionError`` is the library's name (``SystemError`` shadowed Python's built-in): the old name
  still works with a DeprecationWarning; ``make_state`` given flat arrays says to give one array per module.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mrds_jax.cli import build_parser, main

DATA = Path(__file__).parent / "data"
DESIGN = json.loads((DATA / "ckcm_design.json").read_text())     # a design written by `mrds-jax optimize`


def _with(path_and_value):
    """The design with one key replaced (``value`` is ``...``: removed); ``path`` like "params.theta_A"."""
    path, value = path_and_value
    d = json.loads(json.dumps(DESIGN))
    *parents, last = path.split(".")
    node = d
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return json.dumps(d)


FULL = json.dumps(DESIGN)
# (id, file text, what the one line must say: a regular expression)
MALFORMED = [
    ("value not a number", _with(("params.theta_A", "abc")), r"params\.theta_A: expected a finite number.*\"abc\""),
    ("value a boolean", _with(("params.m", True)), r"params\.m: expected a finite number"),
    ("value a list of strings", _with(("params.r_A", ["a"])), r"params\.r_A: expected a finite number"),
    ("value null", _with(("initial_params.M", None)), r"initial_params\.M: expected a finite number.*null"),
    ("missing parameter", _with(("params.theta_B", ...)), r"design parameters lack \['theta_B'\]"),
    ("missing section", _with(("after", ...)), r"lacks \['after'\]"),
    ("missing peak force", _with(("after.peak_force", ...)), r"after: the key\(s\) \['peak_force'\] are missing"),
    ("missing model", _with(("problem.model", ...)), r"problem: the key\(s\) \['model'\] are missing"),
    ("section of the wrong type", _with(("params", [1, 2])), r"params: design parameters must be a JSON object"),
    ("problem of the wrong type", _with(("problem", "paper")), r"problem: expected a JSON object, got str"),
    ("x of the wrong type", _with(("x", 3)), r"x: expected a JSON object, got int"),
    ("peak force a string", _with(("after.peak_force", "300 N")), r"after\.peak_force: expected a finite number"),
    ("unknown model", _with(("problem.model", "lagrange")), r"problem\.model: expected one of \['paper', "
                                                          r"'multibody'\], got \"lagrange\""),
    ("unknown leg model", _with(("problem.legs", 3)), r"problem\.legs: expected one of"),
    ("task of the wrong type", _with(("task.paths", "ellipse")), r"task: "),
    ("status a number", _with(("status", 1)), r"status: expected a string"),
    ("truncated JSON", FULL[: len(FULL) // 2], r"not JSON \(.*\); the file is damaged or cut short"),
    ("empty file", "", r"not JSON \(.*\); the file is damaged or cut short"),
    ("a JSON list", "[1, 2]", r"not a design result \(a JSON list"),
    ("another format", json.dumps({"format": "x"}), r"not a design result \(format 'x'"),
    ("not text", None, r"not JSON \(.*\); the file is damaged or cut short"),
]


def one_line_error(argv, capsys):
    """``mrds-jax <argv>`` in process: (exit status, the stderr lines)."""
    status = main(argv)
    return status, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("case", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_design_file_is_one_line_and_status_2(case, tmp_path, capsys, monkeypatch):
    _, text, pattern = case
    path = tmp_path / "design.json"
    if text is None:
        path.write_bytes(b"\xff\xfe\x00garbage")
    else:
        path.write_text(text)
    monkeypatch.chdir(tmp_path)
    status, lines = one_line_error(["simulate", "--design", "design.json", "--out", "flown"], capsys)
    assert status == 2 and len(lines) == 1, lines
    assert lines[0].startswith("mrds-jax simulate: design.json: ") and re.search(pattern, lines[0]), lines[0]
    assert not (tmp_path / "flown").exists()


def test_missing_design_file_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, lines = one_line_error(["simulate", "--design", "nowhere/design.json"], capsys)
    assert status == 2 and lines == ["mrds-jax simulate: no design file at nowhere/design.json"], lines
    assert not (tmp_path / "nowhere").exists()


# (argv, the one line)
OPTION_ERRORS = [
    (["optimize", "--iterations", "-5"], "mrds-jax optimize: --iterations must be an integer >= 1, got -5"),
    (["optimize", "--samples", "3"], "mrds-jax optimize: --samples must be an integer >= 4, got 3"),
    (["optimize", "--lr", "nan"], "mrds-jax optimize: --lr must be a finite number > 0, got nan"),
    (["optimize", "--stroke-margin", "-0.1"], "mrds-jax optimize: --stroke-margin must be a finite number >= 0, "
                                              "got -0.1"),
    (["simulate", "--design", str(DATA / "ckcm_design.json"), "--dt", "0"],
     "mrds-jax simulate: --dt must be a finite number > 0, got 0"),
    (["dynamics", "--batch", "0"], "mrds-jax dynamics: --batch must be an integer >= 1, got 0"),
    (["simulate", "fourbar", "--design", "d.json"], "mrds-jax simulate: give a SYSTEM_FILE or --design design.json, "
                                                    "not both"),
]


@pytest.mark.parametrize("argv, line", OPTION_ERRORS, ids=[" ".join(a[:3]) for a, _ in OPTION_ERRORS])
def test_option_error_names_the_flag(argv, line, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, lines = one_line_error(argv, capsys)
    assert status == 2 and lines == [line], lines
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())       # no ckcm_design/ or flight/ left


def test_the_console_script_gives_the_same_line(tmp_path):
    bad = tmp_path / "design.json"
    bad.write_text(_with(("params.theta_A", "abc")))
    script = shutil.which("mrds-jax", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "mrds_jax.cli"]
    r = subprocess.run(cmd + ["simulate", "--design", str(bad)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "params.theta_A: expected a finite number" in r.stderr


HIDE = "import sys; sys.modules[{name!r}] = None; from mrds_jax.cli import main; sys.exit(main({argv!r}))"
# (package hidden, argv, the extra the line must name)
MISSING = [("mujoco", ["simulate", "fourbar", "--out", "fb/run"], "mjcf"),
           ("mujoco", ["simulate", "dual_arm_grasp"], "mjcf"),
           ("mujoco", ["check", "fourbar"], "mjcf")]


@pytest.mark.parametrize("name, argv, extra", MISSING, ids=[f"{m[0]}-{m[1][0]}-{m[1][1]}" for m in MISSING])
def test_missing_optional_package_is_one_line_naming_the_extra(name, argv, extra, tmp_path):
    """A child interpreter where ``import <name>`` fails, as where the package is not installed."""
    r = subprocess.run([sys.executable, "-c", HIDE.format(name=name, argv=argv)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, env={**os.environ,
                       "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                   os.environ.get("PYTHONPATH")]))})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"mrds-jax {argv[0]}: ") and f"mrds-jax[{extra}]" in lines[0], lines[0]
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())          # no output folder left behind


def _options(parser, prefix="mrds-jax"):
    """(command, option, help) of every option of every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield prefix, "/".join(action.option_strings) or action.dest, action.help


def test_every_help_option_has_a_sentence():
    options = list(_options(build_parser()))
    assert len(options) > 45, len(options)
    short = [f"{c} {o}: {h!r}" for c, o, h in options if not h or len(h.split()) < 4]
    assert not short, short


def test_check_report_shows_direction_and_margin():
    """Margins worked out by hand from the worst values and limits."""
    from mrds_jax.ckcm.design import format_report
    report = {"stroke": {"ok": True, "worst": 0.0111, "limit": 0.01, "where": "sample 3"},
              "condition": {"ok": True, "worst": 4.04, "limit": 30.0, "where": ""},
              "crossing": {"ok": False, "worst": 0.05, "limit": 0.08, "where": "legs 2 and 3"},
              "strength": {"ok": True, "worst": {"m1": 1.05, "m - m1": 4.5}, "limit": {"m1": 1.0, "m - m1": 4.0},
                           "where": "peak force 300 N"},
              "peak_force_dense": 300.0, "all_ok": False}
    lines = format_report(report).splitlines()
    assert len(lines) == 4
    assert "worst 0.0111 m ≥ limit 0.01 m (margin +0.0011 m)" in lines[0] and lines[0].split()[1] == "ok"
    assert "worst 4.04 ≤ limit 30 (margin +26)" in lines[1]
    assert "VIOLATED" in lines[2] and "worst 0.05 m ≥ limit 0.08 m (margin -0.03 m)" in lines[2]
    assert "m1 1.05 kg ≥ 1 kg (margin +0.05 kg); m - m1 4.5 kg ≥ 4 kg (margin +0.5 kg)" in lines[3]


def test_system_error_is_renamed_with_a_deprecated_alias():
    import builtins

    import mrds_jax.system as S
    from mrds_jax.validation import InputError
    assert issubclass(S.SystemDescriptionError, InputError) and S.SystemDescriptionError is not builtins.SystemError
    assert "SystemError" not in vars(S)                        # a star import does not shadow the built-in
    with pytest.warns(DeprecationWarning, match="SystemDescriptionError"):
        old = S.SystemError
    assert old is S.SystemDescriptionError


def test_make_state_with_flat_arrays_says_one_array_per_module():
    import mrds_jax as mj
    from mrds_jax import contacts as C, system as S
    b = mj.ModuleBuilder(planar=True)
    for name, parent, x in (("crank", None, 0.0), ("coupler", "crank", 0.4), ("rocker", "coupler", 1.0)):
        b.add_link(name, parent, "revolute", position=(x, 0, 0), mass=1.0, com=(0.3, 0, 0), inertia=0.01 * np.eye(3))
    b.add_frame("tip", "rocker", position=(0.7, 0, 0))
    pivot = C.planar_revolute("pivot", None, ("bars", "tip"), ground_position=(1.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = S.build_system({"bars": b.build()}, [pivot])
    with pytest.raises(S.SystemDescriptionError, match=r"state: q is one array of shape \(3,\); give one array per "
                                                       r"module, in the order \['bars'\]: make_state\(system, "
                                                       r"\[q_bars\]\) or a dict \{'bars': \.\.\.\}"):
        S.make_state(system, np.array([1.2, -1.9, -2.0]))
    with pytest.raises(S.SystemDescriptionError, match=r"q has 2 entries, the system has 1 module \['bars'\]: give "
                                                       r"one array per module"):
        S.make_state(system, [np.zeros(3), np.zeros(3)])


@pytest.fixture(scope="module")
def flight(tmp_path_factory):      # 40-70 s on two cores (the plant's flight compiles): full mode
    """``mrds-jax simulate --design <a saved optimum> --viewer --out flown`` in process: (folder, stdout)."""
    import contextlib
    import io
    out = tmp_path_factory.mktemp("flight") / "flown"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(["simulate", "--design", str(DATA / "ckcm_design.json"), "--viewer", "--out", str(out)])
    assert status == 0, buffer.getvalue()
    return out, buffer.getvalue()


@pytest.mark.slow
def test_simulate_design_writes_plots_animation_and_viewer(flight):
    """The flight of the optimum: two labelled peak forces (the optimiser's model, the multibody plant), the
    plant's larger (it has the legs' inertia the paper's model leaves out), and its plots, animation and page."""
    out, stdout = flight
    peaks = re.findall(r"^  (\d+\.\d+) N: (.*)$", stdout, re.M)
    assert [label.split(",")[0] for _, label in peaks] == [
        "the paper's Lagrangian model (Nguyen & Pooran eq. 39-45)",
        "the MRDS multibody model (bench cylinder legs) as the plant"], stdout
    paper, plant = (float(p) for p, _ in peaks)
    assert paper == pytest.approx(DESIGN["after"]["peak_force"], abs=1e-3) and plant > paper, (paper, plant)
    for name in ("actuator_forces.png", "tracking_error.png", "animation.gif", "viewer.html", "flight.npz"):
        assert (out / name).stat().st_size > 1000, name
    data = np.load(out / "flight.npz")
    assert data["forces"].shape == (len(data["t"]), 6) and np.abs(data["forces"]).max() == pytest.approx(plant, abs=1e-3)
    page = (out / "viewer.html").read_text()
    assert "optimised CKCM end-effector" in page and 'id="mrds-time"' in page


from mrds_jax.viz.viewer import find_browser  # noqa: E402


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_flight_viewer_shows_the_platform_on_its_legs_with_a_title_and_no_floor(flight, tmp_path):
    """A screenshot of the page in headless Chromium: the flight's model has no plane, so no floor is drawn (no
    collision geom, no other object, no grid, no floor-coloured pixels); the payload's sticks (module 7, grey
    #7f7f7f) lie above most of the legs' pixels (orange, green, brown: red or green well over blue, unlike the
    blue sky), and the title box (dark text on white, top left) is there."""
    from PIL import Image

    from mrds_jax.viz.viewer import render_viewer
    out, _ = flight
    png, drawn = render_viewer(out / "viewer.html", tmp_path / "flight.png", size=(800, 600), wait_ms=3000)
    assert drawn["geoms"] == {} and drawn["others"] == [] and not drawn["grid"], drawn
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    floor = (r > 150) & (abs(r - g) < 12) & (r - b > 3) & (r - b < 30)
    grey = (abs(r - 127) < 25) & (abs(g - 127) < 25) & (abs(b - 127) < 25)
    legs = (r > b + 40) | (g > b + 40)
    rows = np.arange(img.shape[0])[:, None] * np.ones(img.shape[1], int)
    assert floor.sum() < 50 and grey.sum() > 200 and legs.sum() > 200, (floor.sum(), grey.sum(), legs.sum())
    assert np.median(rows[grey]) < np.median(rows[legs]), (np.median(rows[grey]), np.median(rows[legs]))
    label = img[5:60, 10:400]
    dark, light = (label.max(axis=-1) < 90).sum(), (label.min(axis=-1) > 200).sum()
    assert dark > 300 and light > 3000, (dark, light)
