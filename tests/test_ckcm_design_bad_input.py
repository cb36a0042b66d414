"""Bad design-space and task specifications of the full design space (issue 26), in the catalogue style of
tests/test_bad_input.py: each raises one of mrds_jax's own exception types whose message names the item and
its value — before the dynamics compiles (the force kernel is replaced by one that fails the test if called;
only the task's tiny path sampler runs)."""
import numpy as np
import pytest

from mrds_jax.ckcm import design as D, nominal
from mrds_jax.ckcm.params import per_leg_geometry
from mrds_jax.validation import InputError

TASK = D.ellipse_task(period=0.5, samples_per_path=8)
DEG = np.pi / 180


def crossing_start():
    """The paper's design with leg 2 re-attached as an X over leg 1: A_2 at 10°, B_2 at −10° (all joints
    still ≥ 0.12 m apart): the two legs pass 1.1 cm from each other on the ellipse."""
    p = nominal()
    g = np.asarray(per_leg_geometry(p)).copy()
    g[0, 1], g[1, 1] = 10 * DEG, -10 * DEG
    return p.replace(leg_geometry=g)


def joints_too_close():
    p = nominal()
    g = np.asarray(per_leg_geometry(p)).copy()
    g[0, 3] = g[0, 2] + 4 * DEG                      # λ_4 = λ_3 + 4°: A_3, A_4 4.9 cm apart (< 0.1 m)
    return p.replace(leg_geometry=g)


CASES = [
    ("inverted bounds", lambda: D.make_problem(TASK, space="full", bounds={"r_A_3": (0.9, 0.4)}),
     D.DesignSpaceError, r"bounds of r_A_3 are empty: lower 0.9 >= upper 0.4 m"),
    ("inverted angle bounds", lambda: D.make_problem(TASK, space="full", bounds={"Lambda_2": (1.5, 0.5)}),
     D.DesignSpaceError, r"bounds of Lambda_2 are empty: lower 85.94\d* >= upper 28.64\d* deg"),
    ("unknown variable", lambda: D.make_problem(TASK, free=("lambda_1", "lambda_7")),
     D.DesignSpaceError, r"unknown design variable\(s\) \['lambda_7'\]"),
    ("unknown bound", lambda: D.make_problem(TASK, space="full", bounds={"mass_3": (1, 2)}),
     D.DesignSpaceError, r"unknown design variable\(s\) \['mass_3'\]"),
    ("unknown space", lambda: D.make_problem(TASK, space="huge"), D.DesignSpaceError,
     r"unknown design space 'huge'; known: \['paper', 'symmetric', 'full'\]"),
    ("symmetric and per-leg name", lambda: D.make_problem(TASK, free=("theta_A", "lambda_2")),
     D.DesignSpaceError, r"theta_A and lambda_2 both set the same per-leg quantity"),
    ("per-leg mass bounds below the strength rule", lambda: D.make_problem(TASK, space="full",
                                                                          bounds={"m1_5": (0.2, 0.8)}),
     D.InfeasibleBoundsError, r"m1 <= 0.8 kg \(leg 5\) but the strength rule needs m1 >= 1 kg"),
    ("crossing legs at the start", lambda: D.make_problem(TASK, space="full", base=crossing_start()),
     D.DesignSpaceError, r"legs 1 and 2 of the start design cross: 0.011\d* m apart \(< min_leg_distance 0.08 m\) "
                         r"on path 0 \(ellipse\), sample \d"),
    ("joints too close at the start", lambda: D.make_problem(TASK, space="full", base=joints_too_close()),
     D.DesignSpaceError, r"the start design: payload attachment points A_3 .* and A_4 .* coincide"),
    ("pose outside the workspace", lambda: D.make_problem(D.ellipse_task(period=0.5, samples_per_path=8, z=1.6),
                                                          space="full"),
     D.TaskError, r"path 0 \(ellipse\), sample 0 at pose \[0.05, 0.0, 1.6, 0.0, 0.0, 0.0\] is outside the "
                  r"workspace of the start design \(stroke \[0.9, 1.4\] m\): leg 1 1.\d+ m"),
    ("move ending outside the workspace", lambda: D.make_problem(D.Task(paths=(
        {"kind": "ellipse", "period": 0.5},
        {"kind": "point_to_point", "start": [0, 0, 1.0, 0, 0, 0], "end": [0.6, 0, 1.0, 0, 0, 0], "duration": 1.0}),
        samples_per_path=8), space="full"),
     D.TaskError, r"path 1 \(point_to_point\), sample \d at pose .* outside the workspace .* leg \d"),
    ("negative per-leg radius", lambda: D.make_problem(TASK, space="full", base=nominal().replace(
        leg_geometry=np.asarray(per_leg_geometry(nominal())) * np.array([[1], [1], [1], [-1]]))),
     InputError, r"attachment radii must be > 0: r_B_1 = -0.8 m"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_design_specification_is_named_before_compiling(case, no_design_dynamics):
    _, make, error, message = case
    with pytest.raises(error, match=message):
        make()


def test_good_full_space_specification_reaches_the_dynamics(no_design_dynamics):
    """The same entry point with a good specification gets as far as the dynamics (so the cases above fail
    in the checks, not by accident)."""
    with pytest.raises(AssertionError, match="dynamics was compiled"):
        D.make_problem(TASK, space="full")


CLI_CASES = [
    ("inverted bounds", ["--space", "full", "--bound", "r_A_3=0.9:0.4"], r"bounds of r_A_3 are empty"),
    ("unknown variable", ["--free", "lambda_1,lambda_7"], r"unknown design variable\(s\) \['lambda_7'\]"),
    ("unknown bound", ["--space", "full", "--bound", "mass_3=1:2"], r"--bound 'mass_3=1:2': unknown variable 'mass_3'"),
    ("crossing legs at the start", ["--space", "full", "--period", "0.5", "--samples", "8", "--min-leg-distance",
                                    "0.5"], r"legs \d and \d of the start design cross: 0.\d+ m apart "
                                            r"\(< min_leg_distance 0.5 m\)"),
    ("too few Monte Carlo draws", ["--space", "full", "--robust", "--mc-samples", "1"],
     r"robust_samples must be >= 2, got 1"),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_command_line_bad_design_specification_is_one_line(case, tmp_path, capsys, no_design_dynamics):
    import re
    from mrds_jax.cli import main
    _, argv, pattern = case
    code = main(["optimize", *argv, "--out", str(tmp_path / "o"), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert re.search(pattern, err), f"stderr {err!r} does not match {pattern!r}"
