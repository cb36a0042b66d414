"""Several design tasks at once (issue 26, item 2): a workspace sweep of statically held poses, a payload range,
and the worst-case or weighted combination of the paths' demands, through the same task/objective machinery as
the ellipse and the point-to-point moves.

Checked against what nobody here wrote: central finite differences for the gradients (multibody model);
the multibody and Lagrangian inverse dynamics called directly at zero velocity and acceleration for the
sweep's forces; Newton's statics by hand (the legs' added forces carry an added payload weight: vertical
components summing to ΔM g, no net horizontal force or moment); each path's demand from a problem of that
path alone for the combinations."""
import dataclasses
import functools

import numpy as np
import pytest
import jax
import jax.numpy as jnp

from mrds_jax.ckcm import design as D, lagrangian, multibody, nominal
from mrds_jax.ckcm.design import objectives as O
from mrds_jax.ckcm.design.optimizer import compiled_evaluate
from mrds_jax.ckcm.design.problem import design_inputs, forces_and_speeds
from mrds_jax.ckcm.kinematics import leg_vectors

ELLIPSE = {"kind": "ellipse", "period": 0.5}
SWEEP = D.workspace_sweep(half_width=0.05, points=2, z_half_width=0.0)        # 4 level poses at home height
PAYLOAD = D.payload_range(ELLIPSE, [20.0, 40.0])
WEIGHTS = (1.0, 0.5, 2.0)
SMALL_FREE = ("theta_A", "theta_B", "m", "m1", "r_A")


def tasks(combine, weights=None, paths=(ELLIPSE, SWEEP, PAYLOAD)):
    return D.Task(paths=paths, samples_per_path=4, combine=combine, weights=weights)


@functools.lru_cache(maxsize=None)
def combined(model):
    """The worst-case and the weighted problem of the three paths (each a (Problem, ProblemData)), made once per
    model for the tests of this file that share them."""
    return (D.make_problem(tasks("worst"), free=SMALL_FREE, model=model),
            D.make_problem(tasks("weighted", WEIGHTS), free=SMALL_FREE, model=model))


# --- the sweep: static forces ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep_forces():
    """The sweep's forces through the design problem (both models), at the grid's poses."""
    out = {}
    sweep = dict(D.workspace_sweep(half_width=0.04, points=2), alpha=[0.0, 0.05])   # 16 poses, some tilted
    task = D.Task(paths=(sweep,), samples_per_path=4)
    for model in ("multibody", "paper"):
        problem, data = D.make_problem(task, free=SMALL_FREE, model=model)
        x = problem.space.from_params(data.base)
        params, samples = design_inputs(problem, data, x)
        out[model] = (params, samples, np.asarray(jax.jit(lambda p, s: forces_and_speeds(problem, p, s)[0])(params,
                                                                                                          samples)))
    return out


def test_sweep_poses_are_the_grid_about_home_and_at_rest(sweep_forces):
    params, samples, _ = sweep_forces["multibody"]
    q = np.asarray(samples.pose)
    assert q.shape == (16, 6)
    assert np.allclose(np.unique(q[:, 0]), [-0.04, 0.04]) and np.allclose(np.unique(q[:, 3]), [0.0, 0.05])
    assert np.allclose(np.unique(q[:, 2]), float(params.z_nominal) + np.array([-0.04, 0.04]))
    assert np.all(np.asarray(samples.rate) == 0) and np.all(np.asarray(samples.acc) == 0)


def test_sweep_forces_are_the_inverse_dynamics_at_rest(sweep_forces):
    """Every sweep pose: the task's forces equal the multibody model's (``multibody.inverse_dynamics_at``)
    and the Lagrangian model's (``lagrangian.actuator_forces_total``) inverse dynamics at zero velocity and
    acceleration, each called directly, pose by pose."""
    for model, direct in (("multibody", lambda p, q, z: multibody.inverse_dynamics_at(p, q, z, z).tau_actuated),
                          ("paper", lambda p, q, z: lagrangian.actuator_forces_total(p, q, z, z))):
        direct = jax.jit(direct)            # one compilation, then called pose by pose (not batched with the task's)
        params, samples, tau = sweep_forces[model]
        for k, q in enumerate(np.asarray(samples.pose)):
            ref = np.asarray(direct(params, jnp.asarray(q), jnp.zeros(6)))
            assert np.allclose(tau[k], ref, rtol=1e-10, atol=1e-9), (model, k, tau[k], ref)
        assert 50 < np.max(np.abs(tau)) < 1000                 # static forces of a 30-kg payload on 6 legs


def _static_balance(params, pose, dtau):
    """(Σ Δτ_i u_i, Σ (A_i − d) × Δτ_i u_i): net force and moment about the payload's centroid of leg forces
    Δτ_i along the legs (u_i the unit vector B_i → A_i; positive pushes the payload away from the base)."""
    q = np.asarray(leg_vectors(params, jnp.asarray(pose)))
    u = q / np.linalg.norm(q, axis=1, keepdims=True)
    from mrds_jax.ckcm.params import base_points
    A = np.asarray(base_points(params)) + q
    f = dtau[:, None] * u
    return f.sum(0), np.cross(A - pose[:3], f).sum(0)


@pytest.mark.parametrize("model", ["multibody", "paper"])
def test_payload_range_forces_balance_the_added_payload_weight_by_hand(model):
    """A payload range on the sweep: at every static pose the legs' added forces Δτ = τ(50 kg) − τ(20 kg) carry
    the added weight alone (the legs' own weight cancels in the difference; the statics are linear): vertical
    components summing to ΔM g = 30 · 9.81 N, no net horizontal force, no moment about the payload centroid."""
    sweep = dict(D.workspace_sweep(half_width=0.04, points=2), beta=[0.0, -0.06])
    task = D.Task(paths=(D.payload_range(sweep, [20.0, 50.0]),), samples_per_path=4)
    problem, data = D.make_problem(task, free=SMALL_FREE, model=model)
    params, samples = design_inputs(problem, data, problem.space.from_params(data.base))
    tau = np.asarray(jax.jit(lambda p, s: forces_and_speeds(problem, p, s)[0])(params, samples))
    n = 16
    q = np.asarray(samples.pose)
    assert np.array_equal(q[:n], q[n:]) and np.allclose(np.asarray(samples.payload_factor), [20 / 30] * n + [50 / 30] * n)
    for k in range(n):
        force, moment = _static_balance(params, q[k], tau[n + k] - tau[k])
        assert abs(force[2] - 30.0 * 9.81) < 1e-8 * 300, (k, force)
        assert np.all(np.abs(force[:2]) < 1e-8 * 300) and np.all(np.abs(moment) < 1e-8 * 300), (k, force, moment)


def test_level_home_pose_legs_balance_the_payload_weight_by_hand():
    """One pose by hand with (nearly) massless legs: at the level home pose the legs' forces along the legs
    carry the payload's weight, vertical components summing to M g, no net horizontal force or moment; by
    Nguyen & Pooran eq. 2's 3-fold symmetry legs 1, 3, 5 carry equal forces, and so do legs 2, 4, 6."""
    params = nominal(m=1e-7, m1=0.4e-7)
    task = D.Task(paths=({"kind": "sweep"},), samples_per_path=4)
    samples = task.samples(params)
    tau = np.asarray(O.actuator_forces(params, samples, "multibody"))[0]
    pose = np.asarray(samples.pose)[0]
    force, moment = _static_balance(params, pose, tau)
    assert abs(force[2] - 30.0 * 9.81) < 1e-5 and np.all(np.abs(force[:2]) < 1e-5) and np.all(np.abs(moment) < 1e-5)
    assert np.allclose(tau[0::2], tau[0], rtol=1e-9, atol=1e-6) and np.allclose(tau[1::2], tau[1], atol=1e-6), tau


# --- combinations ---------------------------------------------------------------------------------------------
def _alone(spec, demand, force_scale, x):
    """The demand of one path on its own: a problem of that path alone, at the combined problem's soft-peak
    scale (the soft peak's temperature), evaluated at x (the same design variables)."""
    problem, data = D.make_problem(tasks("pooled", paths=(spec,)), free=SMALL_FREE, model="paper", demand=demand)
    return float(D.evaluate(problem, dataclasses.replace(data, force_scale=force_scale), jnp.asarray(x)).demand)


def test_worst_case_and_weighted_combine_the_demands_they_report_per_path():
    """Worst = max_p d_p and weighted = Σ w_p d_p of the per-path demands each problem reports
    (``demand_path_<p>``), and the two problems report the same per-path demands, at the start design and at a
    moved one. (That each d_p is the demand of a problem of path p alone: the next test, in the full mode.)"""
    (worst, wdata), (weighted, vdata) = combined("paper")
    x0 = np.asarray(worst.space.from_params(wdata.base))
    for x in (x0, x0 * np.array([1.2, 0.9, 0.8, 1.1, 0.95])):
        a, b = compiled_evaluate(worst)(wdata, jnp.asarray(x)), compiled_evaluate(weighted)(vdata, jnp.asarray(x))
        d = [float(a.metrics[f"demand_path_{i}"]) for i in range(3)]
        assert [float(b.metrics[f"demand_path_{i}"]) for i in range(3)] == pytest.approx(d, rel=1e-12)
        assert float(a.demand) == pytest.approx(max(d), rel=1e-12)
        assert float(b.demand) == pytest.approx(float(np.dot(WEIGHTS, d)), rel=1e-12)
        assert len(set(d)) == 3                      # three different demands: the max and the sum are not trivial


@pytest.mark.parametrize("demand", ["peak", "rms"])
def test_worst_case_is_the_max_and_weighted_the_weighted_sum_of_the_paths_alone(demand):
    """Worst = max over the paths of each path's demand on its own; weighted = Σ w_p d_p, at the start design
    and at a moved one (where another path may be the worst)."""
    worst, wdata = D.make_problem(tasks("worst"), free=SMALL_FREE, model="paper", demand=demand)
    weighted, vdata = D.make_problem(tasks("weighted", WEIGHTS), free=SMALL_FREE, model="paper", demand=demand)
    x0 = np.asarray(worst.space.from_params(wdata.base))
    for x in (x0, x0 * np.array([1.2, 0.9, 0.8, 1.1, 0.95])):
        alone = [_alone(s, demand, wdata.force_scale, x) for s in (ELLIPSE, SWEEP, PAYLOAD)]
        ev = D.evaluate(worst, wdata, jnp.asarray(x))
        assert float(ev.demand) == pytest.approx(max(alone), rel=1e-12)
        assert [float(ev.metrics[f"demand_path_{i}"]) for i in range(3)] == pytest.approx(alone, rel=1e-12)
        ev = D.evaluate(weighted, vdata, jnp.asarray(x))
        assert float(ev.demand) == pytest.approx(float(np.dot(WEIGHTS, alone)), rel=1e-12)
    assert alone[2] > alone[0] > alone[1]       # the 40-kg payload range is the worst, the static sweep the least


@pytest.mark.parametrize("model", ["paper", pytest.param("multibody", marks=pytest.mark.slow)])
def test_combined_objective_gradients_match_central_differences(model):
    """d(worst-case and weighted objectives, and each path's demand)/d(design variables), float64: autodiff
    equals central differences to 1e-6 relative (the multibody model's compile takes ~4 min on the shared
    2-core machine: full mode, like tests/test_ckcm_design.py's multibody gradients)."""
    (worst, wdata), (weighted, vdata) = combined(model)

    def measures(x):
        a, b = D.evaluate(worst, wdata, x), D.evaluate(weighted, vdata, x)
        return jnp.stack([a.objective, b.objective] + [a.metrics[f"demand_path_{i}"] for i in range(3)])
    x = np.asarray(worst.space.from_params(wdata.base))
    evaluate_worst, evaluate_weighted = compiled_evaluate(worst), compiled_evaluate(weighted)

    def f(x):       # the same measures by the optimiser's evaluation, whose force kernel the problems' set-up compiled
        a, b = evaluate_worst(wdata, x), evaluate_weighted(vdata, x)
        return jnp.stack([a.objective, b.objective] + [a.metrics[f"demand_path_{i}"] for i in range(3)])
    J = np.asarray(jax.jit(jax.jacfwd(measures))(jnp.asarray(x)))
    worst_err = 0.0
    for i in range(x.size):
        h = 1e-5 * max(abs(x[i]), 1.0)
        e = np.zeros_like(x)
        e[i] = h
        fd = (np.asarray(f(jnp.asarray(x + e))) - np.asarray(f(jnp.asarray(x - e)))) / (2 * h)
        err = np.abs(J[:, i] - fd) / np.maximum(np.abs(fd), np.max(np.abs(J), axis=1))
        worst_err = max(worst_err, float(err.max()))
        assert np.all(err < 1e-6), (SMALL_FREE[i], J[:, i], fd)
    assert np.all(np.max(np.abs(J), axis=1) > 1e-3)      # every measure depends on the design
    print(f"\nworst relative error {worst_err:.3g}")


def test_task_round_trips_through_json():
    t = tasks("weighted", WEIGHTS)
    assert D.Task.from_json(t.to_json()) == t


# --- bad specifications, named before compiling ----------------------------------------------------------------
BAD = [
    ("sweep pose outside the workspace",
     lambda: D.make_problem(tasks("worst", paths=(ELLIPSE, dict(SWEEP, z=[0.0, 0.5])))),
     D.TaskError, r"path 1 \(sweep\), pose 1 at pose \[-0.05, -0.05, 1.5, 0.0, 0.0, 0.0\] is outside the workspace "
                  r"of the start design \(stroke \[0.9, 1.4\] m\): leg 1 1.\d+ m"),
    ("negative weight", lambda: tasks("weighted", (1.0, -1.0, 2.0)),
     D.TaskError, r"weights must be finite and >= 0: path 1 \(sweep\) -1.0"),
    ("all weights zero", lambda: tasks("weighted", (0, 0, 0)), D.TaskError, r"weights are all zero"),
    ("weights of the wrong length", lambda: tasks("weighted", (1.0, 2.0)),
     D.TaskError, r"weights: one per path \(3: \['ellipse', 'sweep', 'ellipse'\]\), got \[1.0, 2.0\]"),
    ("weights without weighted", lambda: tasks("worst", WEIGHTS), D.TaskError, r"weights need combine='weighted'"),
    ("unknown combination", lambda: tasks("mean"), D.TaskError, r"unknown combination 'mean'"),
    ("empty payload range", lambda: tasks("worst", paths=(ELLIPSE, D.payload_range(ELLIPSE, []))),
     D.TaskError, r"path 1 \(ellipse\): payload_masses \(kg\) is empty"),
    ("negative payload mass", lambda: tasks("worst", paths=(D.payload_range(ELLIPSE, [10, -5]),)),
     D.TaskError, r"path 0 \(ellipse\): payload_masses \(kg\) must be finite and > 0"),
    ("empty sweep axis", lambda: tasks("worst", paths=(dict(SWEEP, y=[]),)),
     D.TaskError, r"path 0 \(sweep\): offsets 'y' is empty"),
    ("unknown sweep key", lambda: tasks("worst", paths=({"kind": "sweep", "xx": [0.1]},)),
     D.TaskError, r"path 0 \(sweep\): unknown key\(s\) \['xx'\]"),
    ("payload range with a free payload mass", lambda: D.make_problem(tasks("worst"), space="full"),
     D.DesignSpaceError, r"payload range .* fixes the payload mass: M cannot be a free design variable too"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_task_specification_is_named_before_compiling(case, no_design_dynamics):
    _, make, error, message = case
    with pytest.raises(error, match=message):
        make()


def test_good_task_specification_reaches_the_dynamics(no_design_dynamics):
    with pytest.raises(AssertionError, match="dynamics was compiled"):
        D.make_problem(tasks("weighted", WEIGHTS), free=SMALL_FREE)


# --- command line ---------------------------------------------------------------------------------------------
def test_command_line_optimises_several_tasks_weighted(tmp_path, capsys):
    """`mrds-jax optimize --task ellipse,sweep,payload --combine weighted --weights ...`: the saved design
    says what it was optimised for, reports each task's demand, and its objective is their weighted sum."""
    import json
    from mrds_jax.cli import main
    out = tmp_path / "o"
    code = main(["optimize", "--task", "ellipse,sweep,payload", "--combine", "weighted", "--weights", "1,0.5,2",
                 "--payload-masses", "20,40", "--sweep-points", "2", "--samples", "4", "--iterations", "2",
                 "--starts", "1", "--no-plots", "--no-cache", "--out", str(out)])
    text = capsys.readouterr().out
    assert code in (0, 1), text
    assert "combined weighted with weights [1.0, 0.5, 2.0]" in text and "| demand_path_2" in text
    saved = json.loads((out / "design.json").read_text())
    task = D.Task.from_json(saved["task"])
    assert task.combine == "weighted" and task.weights == (1.0, 0.5, 2.0)
    assert [p["kind"] for p in task.paths] == ["ellipse", "sweep", "ellipse"]
    assert task.paths[2]["payload_masses"] == [20.0, 40.0] and task.size == 4 + 8 + 8
    for when in ("before", "after"):
        d = [saved[when][f"demand_path_{i}"] for i in range(3)]
        assert saved[when]["demand"] == pytest.approx(float(np.dot(WEIGHTS, d)), rel=1e-12)


CLI_BAD = [
    (["--task", "ellipse,orbit"], r"--task 'ellipse,orbit': unknown task\(s\) \['orbit'\]"),
    (["--task", "ellipse,sweep", "--combine", "weighted", "--weights", "1,-1"],
     r"weights must be finite and >= 0: path 1 \(sweep\) -1.0"),
    (["--task", "payload", "--payload-masses", ""], r"path 0 \(ellipse\): payload_masses \(kg\) is empty"),
    (["--task", "ellipse,sweep", "--sweep-half-width", "0.6"], r"path 1 \(sweep\), pose 0 at pose .* is outside the workspace"),
    (["--task", "ellipse,payload", "--space", "full"], r"M cannot be a free design variable too"),
]


@pytest.mark.parametrize("case", CLI_BAD, ids=[" ".join(c[0]) for c in CLI_BAD])
def test_command_line_bad_task_is_one_line(case, tmp_path, capsys, no_design_dynamics):
    import re
    from mrds_jax.cli import main
    argv, pattern = case
    code = main(["optimize", *argv, "--samples", "4", "--out", str(tmp_path / "o"), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert re.search(pattern, err), f"stderr {err!r} does not match {pattern!r}"


@pytest.mark.slow
def test_command_line_robust_full_space_writes_its_plots(tmp_path, capsys):
    """`mrds-jax optimize --space full --robust` (tiny sizes) writes the convergence, 3-D geometry and force
    distribution plots, the last with the as-built machines' peak forces before and after (full mode: the
    robust block compiles in ~1 min)."""
    from mrds_jax.cli import main
    out = tmp_path / "o"
    code = main(["optimize", "--space", "full", "--robust", "--mc-samples", "4", "--samples", "4", "--iterations", "10",
                 "--starts", "1", "--no-cache", "--out", str(out)])
    text = capsys.readouterr().out
    assert code in (0, 1), text
    assert "robust peak force (quantile)" in text
    for name in ("optimisation.png", "geometry3d.png", "force_distribution.png"):
        assert (out / name).stat().st_size > 20_000, name
