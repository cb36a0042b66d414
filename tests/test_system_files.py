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


# ready-made contact scenes (tests/test_contact_scenes.py runs them through check and simulate;
# tests/test_assembly_scene.py the CKCM peg-in-hole)
CONTACT_SCENES = {"box_incline", "quadruped_ground", "dual_arm_friction_grasp", "ckcm_peg_in_hole"}


def test_ready_made_files_are_all_listed():
    assert set(example_files()) == set(EXPECTED) | CONTACT_SCENES


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
    assert len(data["t"]) == n_steps // spec.output.decimation + 1
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


GEOMETRY = """name = "geometry"

[[module]]
name = "arm"

[[module.link]]
name = "upper"
axis = [0.0, 1.0, 0.0]
limits = ["-30 deg", "45 deg"]

[[module.link]]
name = "lower"
parent = "upper"
position = [0.5, 0.0, 0.0]
axis = [0.0, 1.0, 0.0]

[[module.frame]]
name = "shoulder"
link = "upper"

[[module.frame]]
name = "tip"
link = "lower"
position = [0.5, 0.0, 0.0]

[[geom]]
name = "floor"
kind = "plane"
position = [0.0, 0.0, -1.0]
normal = [0.0, 0.0, 2.0]
friction = 0.4

[[geom]]
name = "hand"
kind = "sphere"
on = "arm/tip"
radius = "5 cm"
friction = 0.9
priority = 1

[[geom]]
name = "upperarm"
kind = "capsule"
on = "arm/shoulder"
position = [0.25, 0.0, 0.0]
rpy = [0.0, "90 deg", 0.0]
radius = 0.03
half_length = 0.2
restitution = 0.5

[[geom]]
name = "post"
kind = "box"
position = [0.8, 0.0, -0.5]
half_extents = [0.1, 0.1, 0.5]
contype = 2
conaffinity = 2

[[collision.pair]]
geoms = ["post", "hand"]
friction = 0.1

[[collision.exclude]]
bodies = ["arm/upper", "ground"]
geoms = ["upperarm", "floor"]
"""


def test_system_file_geometry_friction_filters_and_limits(tmp_path):
    """[[geom]] tables become the system's collision model: sizes, poses (a plane by its normal, a capsule turned by
    rpy), MuJoCo's friction mixing (the higher priority's), explicit pairs with their own friction, contype/
    conaffinity and excludes (by body or by geom); link limits become the step's one-sided rows."""
    from mrds_jax.collision import SLOTS
    from mrds_jax.system.timestepping import row_layout
    both = tmp_path / "both.toml"
    both.write_text(GEOMETRY)
    with pytest.raises(SystemFileError, match=r"an exclude gives either 'bodies' or 'geoms'") as info:
        load_system_file(both)
    assert info.value.key == "collision.exclude[0]"
    path = tmp_path / "geometry.toml"
    path.write_text(GEOMETRY.replace('geoms = ["upperarm", "floor"]\n', ""))
    built = load_system_file(path)
    model = built.system.collision
    geoms = {g.name: g for g in model.geoms}
    np.testing.assert_allclose(geoms["floor"].rotation[:, 2], [0.0, 0.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(geoms["upperarm"].rotation[:, 2], [1.0, 0.0, 0.0], atol=1e-15)   # capsule axis along x
    np.testing.assert_allclose(geoms["hand"].size, [0.05, 0.0, 0.0])
    np.testing.assert_allclose(geoms["post"].size, [0.1, 0.1, 0.5])
    pairs = {frozenset(p): (float(f), float(e)) for p, f, e in zip(model.pair_names(), model.friction,
                                                                 model.restitution)}
    # floor-hand: priority 1 wins (0.9); floor-upperarm excluded with the whole upper link (and upperarm-hand by
    # the parent-child filter); the post (contype 2) meets nothing but the explicit pair, with its own friction
    assert pairs == {frozenset({"floor", "hand"}): (0.9, 0.0), frozenset({"post", "hand"}): (0.1, 0.0)}
    assert model.slots == tuple(SLOTS[(model.geoms[i].kind, model.geoms[j].kind)] for i, j in model.pairs)
    assert built.system.modules[0].topology.joint_limits[0] == pytest.approx((-np.pi / 6, np.pi / 4))
    assert row_layout(built.system).n_unilateral == 2
    # check reports the gaps: the hand (r = 5 cm, centre at x = 1 m, z = 0) is 0.1 m from the post's face x = 0.9 m
    from mrds_jax.sysfile import check_built
    c = check_built(built)["collision"]
    assert (c["geoms"], c["pairs"], c["closest_pair"], c["penetrating"]) == (4, 2, "hand/post", {})
    np.testing.assert_allclose(c["min_gap"], 0.05, rtol=1e-12)
    path.write_text(path.read_text().replace("position = [0.0, 0.0, -1.0]", "position = [0.0, 0.0, 0.02]"))
    c = check_built(load_system_file(path))["collision"]      # the floor now 7 cm into the hand (its lowest point -5 cm)
    assert list(c["penetrating"]) == ["floor/hand"]         # (the upper arm is excluded from the ground)
    np.testing.assert_allclose(c["penetrating"]["floor/hand"], -0.07, rtol=1e-12)
    # without the exclude the upper arm meets the floor (restitution: the larger, 0.5)
    path.write_text(GEOMETRY.split("[[collision.exclude]]")[0])
    model = load_system_file(path).system.collision
    pairs = {frozenset(p): float(e) for p, e in zip(model.pair_names(), model.restitution)}
    assert pairs[frozenset({"floor", "upperarm"})] == 0.5


MJCF = """<mujoco>
  <worldbody>
    <geom name="ground" type="plane" size="1 1 0.1" friction="0.7"/>
    <body name="a" pos="0 0 1"><freejoint/><geom name="ball" type="sphere" size="0.1" friction="0.3"/></body>
    <body name="b" pos="1 0 1"><freejoint/><geom name="cube" type="box" size="0.1 0.1 0.1" contype="2" conaffinity="2"/></body>
  </worldbody>
  <contact><pair geom1="ball" geom2="cube" friction="0.2 0.2 0.005 0.0001 0.0001"/></contact>
</mujoco>
"""


def test_mjcf_collision_model_is_kept_and_extended(tmp_path):
    """An MJCF file's geoms and pairs come with it (ground-ball by the filters, friction the larger; ball-cube by
    its <pair>, friction 0.2; ground-cube filtered out by contype/conaffinity); a [[geom]] wall added in the system
    file pairs with them by the filters, and the file's own pairs keep their friction."""
    (tmp_path / "scene.xml").write_text(MJCF)
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nmjcf = "scene.xml"\n')

    def pairs(model):
        return {frozenset(p): round(float(f), 12) for p, f in zip(model.pair_names(), model.friction)}

    expected = {frozenset({"ground", "ball"}): 0.7, frozenset({"ball", "cube"}): 0.2}
    assert pairs(load_system_file(path).system.collision) == expected
    path.write_text('name = "s"\nmjcf = "scene.xml"\n\n[[geom]]\nname = "wall"\nkind = "plane"\n'
                    'position = [3.0, 0.0, 0.0]\nnormal = [-1.0, 0.0, 0.0]\nfriction = 0.5\n')
    assert pairs(load_system_file(path).system.collision) == {**expected, frozenset({"wall", "ball"}): 0.5}
