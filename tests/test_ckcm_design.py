"""CKCM design optimisation (issue 5): gradients of every demand and constraint with respect to every design
variable against central finite differences through both dynamic models; an optimisation from the nominal
design that lowers the peak force and passes the independent check; the saved design flown by the
simulator (a second route to the optimiser's forces); bad input.

Compile-heavy: the problems are module fixtures and the optimiser settings are shared so that the compiled
optimiser blocks are reused."""
import json
import warnings

import numpy as np
import pytest
import jax
import jax.numpy as jnp

from mrds_jax.ckcm import design as D, nominal
from mrds_jax.ckcm.design import objectives as O
from mrds_jax.ckcm.design.constraints import constraint_values
from mrds_jax.ckcm.design.optimizer import compiled_block
from mrds_jax.ckcm.design.problem import forces_and_speeds

ALL = ("theta_A", "theta_B", "m", "m1", "r_A", "r_B", "l_s")   # the symmetric variables of issue 5
TASK = D.ellipse_task(period=0.5, samples_per_path=64)   # K ≥ 64: see Settings.feasibility_margin
SETTINGS = D.Settings(optimizer="adam", iterations=120, update_every=20, learning_rate=0.05, starts=1)


def _measures(problem, data, x):
    """Every differentiable quantity the optimiser sees: the three demand measures and a fixed random
    combination of all constraint values."""
    params = D.design_params(problem, data, x)
    return _measures_of_forces(problem, data, params, *forces_and_speeds(problem, params, data.samples))


def _measures_of_forces(problem, data, params, tau, speed):
    """``_measures`` from the forces and leg speeds at ``data.samples``."""
    w = data.samples.weight
    g = constraint_values(params, data.samples, jnp.max(jnp.abs(tau)), data.limits)
    flat = jnp.concatenate([v.ravel() for v in g.values()])
    mix = jax.random.normal(jax.random.PRNGKey(0), flat.shape, flat.dtype)
    return jnp.stack([O.soft_peak(tau, data.force_scale, problem.sharpness), O.rms_force(tau, w),
                      O.mean_power(tau, speed, w), jnp.dot(mix, flat)])


@pytest.fixture(scope="module", params=["paper", "multibody"])
def gradient_case(request):
    problem, data = D.make_problem(TASK, free=ALL, model=request.param)
    x = np.asarray(problem.space.from_params(data.base))
    # the values through the force kernel the problem's set-up compiled (the optimiser's), the rest compiled apart
    forces = O.jitted_forces_and_speeds(problem.model, problem.legs, problem.batch_size)
    params_of = jax.jit(lambda x: D.design_params(problem, data, x))
    rest = jax.jit(lambda p, tau, speed: _measures_of_forces(problem, data, p, tau, speed))

    def f(x):
        params = params_of(x)
        return rest(params, *forces(params, data.samples))
    J = np.asarray(jax.jit(jax.jacrev(lambda x: _measures(problem, data, x)))(jnp.asarray(x)))
    return request.param, problem, x, f, J


def test_gradients_match_central_differences(gradient_case):
    """d(peak, rms, power, constraints)/d(θA, θB, m, m1, r_A, r_B, l_s) = central differences, relative 1e-6."""
    model, problem, x, f, J = gradient_case
    for i, name in enumerate(problem.space.free):
        h = 1e-5 * max(abs(x[i]), 1.0)
        e = np.zeros_like(x)
        e[i] = h
        fd = (np.asarray(f(jnp.asarray(x + e))) - np.asarray(f(jnp.asarray(x - e)))) / (2 * h)
        scale = np.maximum(np.abs(fd), 1e-3 * np.abs(np.asarray(f(jnp.asarray(x)))))
        err = np.abs(J[:, i] - fd) / scale
        assert np.all(err < 1e-6), f"{model} model, d/d{name}: autodiff {J[:, i]} vs FD {fd} (rel err {err})"


def test_gradient_signs_agree_with_nguyen_figs_8_to_11(gradient_case):
    """At the nominal design the peak force rises with the leg mass m (Fig. 8), with m1 — the leg centroid
    moving away from the base (Fig. 9) — and with θA (Fig. 10), and falls as θB grows (Fig. 11)."""
    model, problem, x, f, J = gradient_case
    d = dict(zip(problem.space.free, J[0]))
    assert d["m"] > 0 and d["m1"] > 0 and d["theta_A"] > 0 and d["theta_B"] < 0, (model, d)


@pytest.fixture(scope="module")
def paper_problem():
    return D.make_problem(TASK, model="paper")


@pytest.fixture(scope="module")
def optimum(paper_problem, tmp_path_factory):
    problem, data = paper_problem
    out = tmp_path_factory.mktemp("design")
    with warnings.catch_warnings():
        warnings.simplefilter("error", D.DesignWarning)     # a clean run warns about nothing
        result = D.optimize(problem, data, SETTINGS, task=TASK, out_dir=out, progress=False)
    return result, out


def test_optimum_lowers_peak_force_and_passes_independent_check(optimum, paper_problem):
    problem, data = paper_problem
    result, _ = optimum
    assert result.status == "converged"
    assert result.after["peak_force"] < 0.85 * result.before["peak_force"], (result.before, result.after)
    report = D.verify_design(result.params, TASK, data.limits, "paper")
    assert report["all_ok"], D.format_report(report)
    # lighter legs with the centroid nearer the base (d1 = m1 / 2m down), as Nguyen's guideline says
    p0, p1 = result.initial_params, result.params
    assert float(p1.m) < float(p0.m) and float(p1.m1 / p1.m) < float(p0.m1 / p0.m)
    # the optimiser's block compiled once, ahead of the progress bar, and its executable ran every block: the
    # carry keeps its shapes and dtypes from block to block (the jit fallback never compiled)
    assert compiled_block(problem, SETTINGS).compilations() == (1, 0)


def test_lbfgs_reaches_the_adam_optimum(optimum, paper_problem):
    """The second optimiser (optax L-BFGS, backtracking line search) from the same start reaches a verified
    optimum whose peak force is within 2 % of Adam's."""
    problem, data = paper_problem
    result = D.optimize(problem, data, D.Settings(optimizer="lbfgs", iterations=40), task=TASK, progress=False)
    assert result.status == "converged" and D.verify_design(result.params, TASK, data.limits)["all_ok"]
    adam = optimum[0].after["peak_force"]
    assert abs(result.after["peak_force"] - adam) < 0.02 * adam, (result.after["peak_force"], adam)
    assert result.evaluations > 40          # line-search trials are counted


def test_on_block_returning_true_stops_the_run(optimum, paper_problem):
    """A wall-time budget (``experiments/ckcm_design.py --compare``): ``on_block`` returning true after the
    second block ends the run there, with the steps done so far and the same designs as the full run's first
    two blocks (the compiled block of ``optimum`` is reused)."""
    problem, data = paper_problem
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", D.DesignWarning)
        result = D.optimize(problem, data, SETTINGS, task=TASK, progress=False,
                            on_block=lambda steps, best: seen.append((steps, best)) or steps >= 40)
    assert [s for s, _ in seen] == [20, 40]
    full = optimum[0]
    assert len(result.history["objective"]) == 40
    assert np.allclose(result.history["objective"], full.history["objective"][:40], rtol=0, atol=1e-12)
    assert seen[-1][1] == pytest.approx(min(np.where(np.asarray(full.history["violation"][:40]).ravel()
                                                     <= -SETTINGS.feasibility_margin,
                                                     np.asarray(full.history["objective"][:40]).ravel(), np.inf)))


def test_saved_design_loads_and_resumes(optimum, paper_problem):
    problem, data = paper_problem
    result, out = optimum
    loaded = D.load_design(out / "design.json")
    for k in ("theta_A", "theta_B", "m", "m1", "M"):
        assert float(getattr(loaded.params, k)) == float(getattr(result.params, k))
    assert loaded.after == result.after and loaded.task == TASK.to_json()
    # resuming a finished run recomputes nothing and returns the same design
    again = D.optimize(problem, data, SETTINGS, task=TASK, out_dir=out, resume=True, progress=False)
    assert again.x == result.x
    with pytest.raises(ValueError, match="different problem or settings"):
        D.optimize(problem, data, D.Settings(iterations=40, update_every=20), task=TASK, out_dir=out,
                   resume=True, progress=False)


def test_simulated_design_applies_the_inverse_dynamics_forces(optimum):
    """Second route: the saved design flown under computed torque by the multibody plant applies, sample by
    sample, the multibody closed-chain inverse-dynamics forces of the path (the plant stays on the path)."""
    from mrds_jax.ckcm.design.simulation import simulate_design
    result, out = optimum
    run, = simulate_design(out / "design.json", dt=0.5 / 100)
    r = run["result"]
    assert run["max_closure_error"] < 1e-6 and run["max_position_error"] < 1e-6   # RK4 at dt = 10 ms
    path, _ = D.Task.from_json(result.task).path_objects(result.params)[0]
    q, qd, qdd = jax.vmap(path)(r.t)
    samples = D.TaskSamples(q, qd, qdd, jnp.ones_like(r.t), jnp.zeros_like(r.t), result.params.M,
                            result.params.I_payload)
    tau_id = np.asarray(O.actuator_forces(result.params, samples, "multibody", "bench"))
    np.testing.assert_allclose(np.asarray(r.forces), tau_id, rtol=0, atol=1e-5 * np.abs(tau_id).max())


def test_infeasible_start_is_reported_and_left(optimum, paper_problem):
    problem, data = paper_problem
    x0 = np.asarray(problem.space.from_params(data.base)).copy()
    x0[problem.space.free.index("m1")] = 0.7            # below the strength rule's 1 kg moving part
    with pytest.warns(D.DesignWarning, match=r"start design is infeasible: strength"):
        result = D.optimize(problem, data, SETTINGS, task=TASK, x0=x0, progress=False)
    assert result.status == "converged" and result.after["violation_strength"] <= 0


def test_bounds_excluding_every_feasible_design():
    with pytest.raises(D.InfeasibleBoundsError, match=r"m - m1 <= 2.5 kg .* stationary part >= 4 kg"):
        D.make_problem(TASK, bounds={"m": (2.0, 3.0)})
    with pytest.raises(D.InfeasibleBoundsError, match=r"theta_A in \[1, 5\] deg"):
        D.make_problem(TASK, bounds={"theta_A": (np.radians(1), np.radians(5))})
    with pytest.raises(D.DesignSpaceError, match="bounds of theta_B are empty"):
        D.make_problem(TASK, bounds={"theta_B": (1.0, 0.5)})
    with pytest.raises(D.DesignSpaceError, match="unknown design variable"):
        D.make_problem(TASK, free=("theta_A", "mass"))


def test_start_outside_box_and_bad_task(paper_problem):
    problem, data = paper_problem
    x0 = np.asarray(problem.space.from_params(data.base)).copy()
    x0[0] = np.radians(150)
    with pytest.raises(D.DesignSpaceError, match=r"theta_A = 150 deg not in"):
        D.optimize(problem, data, SETTINGS, x0=x0, progress=False)
    with pytest.raises(D.TaskError, match="unknown kind 'circle'"):
        D.Task(paths=({"kind": "circle", "period": 1.0},)).samples(nominal())
    with pytest.raises(D.TaskError, match="period must be finite and > 0"):
        D.ellipse_task(period=-1.0).samples(nominal())
    with pytest.raises(D.DesignFileError, match="no design file"):
        D.load_design("/nonexistent/design.json")


def _peak_or_nan_below_400(tau, speed, weight):
    """The soft peak, but NaN once the peak force drops below 400 N: a run that diverges mid-way."""
    p = O.soft_peak(tau, 425.0, 100.0)
    return jnp.where(jnp.max(jnp.abs(tau)) < 400.0, jnp.nan, p)


def test_diverging_run_keeps_best_feasible_design():
    problem, data = D.make_problem(TASK, demand=_peak_or_nan_below_400)
    with pytest.warns(D.DesignWarning, match=r"start 0 diverged at step \d+ .* best feasible design .* was kept"):
        result = D.optimize(problem, data, SETTINGS, task=TASK, progress=False)
    s = result.starts[0]
    assert s["diverged_at"] > 0 and s["feasible"] and s["best_iteration"] < s["diverged_at"]
    assert np.isfinite(result.after["demand"]) and 400.0 <= result.after["peak_force"] < result.before["peak_force"]


def test_no_feasible_design_gives_least_violating_one(paper_problem):
    """Odd legs join A_i and B_i at the same azimuth, so at the home height they are ~1.005 m long whatever
    θA, θB and the masses: a stroke margin of 0.2 m (legs within [1.1, 1.2] m) cannot be met, which the box
    check cannot prove in advance."""
    problem, data = D.make_problem(TASK, limits=D.Limits(stroke_margin=0.2))
    assert problem == paper_problem[0]          # limits are data: the compiled optimiser is reused
    with pytest.warns(D.DesignWarning) as record:
        result = D.optimize(problem, data, SETTINGS, task=TASK, progress=False)
    assert result.status == "infeasible"
    assert "no feasible design found" in result.message and "stroke" in result.message
    assert any("start design is infeasible: stroke" in str(w.message) for w in record)
    assert np.isfinite(result.after["peak_force"]) and json.dumps(result.to_json())
    # the independent check sees the same violation (and nothing the smooth constraints missed)
    report = D.verify_design(result.params, TASK, data.limits, "paper")
    assert not report["stroke"]["ok"] and report["stroke"]["worst"] < 0.2
    for group in ("separation", "condition", "elevation", "strength"):
        assert report[group]["ok"] == (result.after[f"violation_{group}"] <= 0), group


def test_command_line_optimize_then_simulate(optimum, tmp_path, capsys):
    """`mrds-jax optimize` then `mrds-jax simulate --design` (same settings as the fixtures, so the compiled
    optimiser and simulation are reused): files written, independent check passed, exit status 0."""
    from mrds_jax.cli import main
    out = tmp_path / "run"
    assert main(["optimize", "--iterations", "120", "--starts", "1", "--out", str(out),
                 "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "converged" in text and "VIOLATED" not in text
    for name in ("design.json", "history.csv", "optimisation.png", "forces.png", "geometry.png", "geometry3d.png",
                 "force_distribution.png", "state.npz"):
        assert (out / name).stat().st_size > 0, name
    saved = D.load_design(out / "design.json")
    assert saved.verification["all_ok"] and saved.after == optimum[0].after
    assert main(["simulate", "--design", str(out / "design.json"), "--dt", "0.005", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "peak actuator force, one figure per model" in text and "as the plant, flying path 0" in text


def test_command_line_bad_input(tmp_path, capsys):
    """A user error: exit status 2 and one line on stderr naming it (more cases: tests/test_bad_input.py)."""
    from mrds_jax.cli import main
    (tmp_path / "x.json").write_text("{}")
    for argv, message in ((["optimize", "--bound", "theta_A=5", "--out", str(tmp_path)], "expected NAME=LO:HI"),
                          (["optimize", "--bound", "m=10:5", "--out", str(tmp_path), "--no-cache"],
                           "bounds of m are empty"),
                          (["simulate", "--design", str(tmp_path / "x.json"), "--no-cache"], "not a design result")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------- kill and resume (issue 13), beside the `optimum` run
KILLABLE = """
import sys, time
from mrds_jax.ckcm.design import optimizer as O
from mrds_jax.cli import main
real, calls = O.compiled_block, []

def killable(problem, settings):
    block = real(problem, settings)

    def run(data, carry):
        calls.append(1)
        out = block(data, carry)
        if len(calls) == 3:                        # block 3 of 6 dispatched: killed before it is saved
            print("IN BLOCK 3", flush=True)
            time.sleep(600)
        return out
    run.compile = block.compile                    # optimize compiles the block before its progress bar
    return run

O.compiled_block = killable
main(sys.argv[1:])
"""
CLI_ARGS = ["optimize", "--iterations", "120", "--starts", "1", "--no-cache", "--no-plots"]   # = SETTINGS, TASK


def test_command_line_killed_mid_block_resumes_bit_identical(optimum, tmp_path, capsys):
    """`mrds-jax optimize` killed (SIGKILL, child process) while its third block runs, then `--resume`d here:
    every array of the optimiser's state (design, multipliers, penalties, Adam moments, best designs, history)
    and the result equal the uninterrupted run (the `optimum` fixture, same problem and settings) bit for bit.
    The resumed run reuses this process's compiled block; only the child compiles."""
    from mrds_jax.cli import main
    from processes import kill_when_ready
    out = tmp_path / "run"
    kill_when_ready(KILLABLE, [*CLI_ARGS, "--out", str(out)], "IN BLOCK 3")
    with np.load(out / "state.npz") as z:
        assert int(z["blocks_done"]) == 2
    assert main([*CLI_ARGS, "--out", str(out), "--resume"]) == 0
    capsys.readouterr()
    full_dir = optimum[1]
    with np.load(full_dir / "state.npz") as a, np.load(out / "state.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    full, resumed = (json.loads((d / "design.json").read_text()) for d in (full_dir, out))
    for d in (full, resumed):
        d.pop("verification", None)             # the command line adds the independent check
    assert resumed == full


def test_damaged_saved_run_is_named_in_one_line(optimum, tmp_path, capsys):
    """--resume on an empty folder, a truncated state.npz or fingerprint.json: one line naming the folder or
    file, exit status 2, before anything is compiled."""
    import shutil
    from mrds_jax.cli import main

    def resume(folder):
        code = main([*CLI_ARGS, "--out", str(folder), "--resume"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        return err

    assert "holds no saved run (no state.npz)" in resume(tmp_path / "empty")
    for name, cut in (("state.npz", 0.5), ("fingerprint.json", 0.5), ("state.npz", 0.999)):
        folder = tmp_path / f"{name}-{cut}"
        shutil.copytree(optimum[1], folder)
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * cut)])
        assert f"{name}' is damaged" in resume(folder)
