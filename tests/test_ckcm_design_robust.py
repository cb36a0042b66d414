"""Robust design under manufacturing tolerances (issue 26, item 3): the smooth quantile against numpy's
quantile and against central differences of itself; the robust objective's reparameterised gradient with
respect to every variable of the full space against central differences (paper model, few draws: the
multibody route of the same code is checked nominally in test_ckcm_design_full.py)."""
import functools

import numpy as np
import pytest
import jax
import jax.numpy as jnp

from mrds_jax.ckcm import design as D, nominal
from mrds_jax.ckcm.design import robust as R
from mrds_jax.ckcm.design.problem import evaluate

TASK = D.ellipse_task(period=0.5, samples_per_path=4)


def test_smooth_quantile_is_numpys_quantile_for_a_narrow_kernel():
    y = np.random.default_rng(0).normal(size=20000)
    for alpha in (0.5, 0.9, 0.95, 0.99):
        q = float(R.smooth_quantile(jnp.asarray(y), alpha, 1e-3))
        assert abs(q - np.quantile(y, alpha)) < 5e-3, (alpha, q, np.quantile(y, alpha))


def test_smooth_quantile_gradient_is_the_implicit_one():
    y = jnp.asarray(np.random.default_rng(1).normal(size=64))
    g = np.asarray(jax.grad(lambda v: R.smooth_quantile(v, 0.9, 0.3))(y))
    for i in (0, 7, 30):
        e = np.zeros(64)
        e[i] = 1e-6
        fd = (float(R.smooth_quantile(y + e, 0.9, 0.3)) - float(R.smooth_quantile(y - e, 0.9, 0.3))) / 2e-6
        assert abs(g[i] - fd) < 1e-6 * max(abs(fd), 1e-3), (i, g[i], fd)
    assert abs(g.sum() - 1) < 1e-12                 # a quantile moves with a common shift of the samples


def test_perturbed_machine_keeps_the_nominal_for_zero_noise_and_moves_points_by_the_tolerance():
    p = nominal()
    tol = R.Tolerances(point_sd=1e-3, mass_sd=0.02)
    same = R.perturbed_params(p, jnp.zeros(R.NOISE_SIZE), tol)
    from mrds_jax.ckcm.params import base_points, payload_points
    assert np.allclose(np.asarray(payload_points(same)), np.asarray(payload_points(p)), atol=1e-15)
    eps = np.zeros(R.NOISE_SIZE)
    eps[0], eps[12] = 1.0, 1.0                        # A_1: 1 sd tangential and 1 sd radial
    moved = np.asarray(payload_points(R.perturbed_params(p, jnp.asarray(eps), tol)))
    d = moved[0] - np.asarray(payload_points(p))[0]
    assert abs(np.linalg.norm(d) - np.hypot(np.hypot(1e-3, 1e-3), 0) ) < 1e-6   # √2 mm, to the arc's curvature
    assert np.allclose(np.asarray(base_points(R.perturbed_params(p, jnp.asarray(eps), tol))), np.asarray(base_points(p)))


@pytest.fixture(scope="module", params=["mean", "quantile"])
def robust_case(request):
    problem, data = D.make_problem(TASK, space="full", model="paper", robust=request.param, robust_samples=8)
    x = np.asarray(problem.space.from_params(data.base))
    f = jax.jit(lambda x: evaluate(problem, data, x).demand)
    g = np.asarray(jax.jit(jax.grad(lambda x: evaluate(problem, data, x).demand))(jnp.asarray(x)))
    return request.param, problem, x, f, g


def test_robust_objective_gradient_matches_central_differences(robust_case):
    name, problem, x, f, g = robust_case
    scale = np.max(np.abs(g))
    for i, v in enumerate(problem.space.free):
        h = 1e-5 * max(abs(x[i]), 1.0)
        e = np.zeros_like(x)
        e[i] = h
        fd = (float(f(jnp.asarray(x + e))) - float(f(jnp.asarray(x - e)))) / (2 * h)
        assert abs(g[i] - fd) < 1e-6 * max(abs(fd), scale), (name, v, g[i], fd)


def test_robust_peak_exceeds_the_nominal_one(robust_case):
    """Tolerances break the symmetry of the paper's design: the 95th percentile of the peak force is above the
    nominal machine's, and the mean is near it."""
    name, problem, x, f, g = robust_case
    nominal_problem, data = D.make_problem(TASK, space="full", model="paper")
    nominal_demand = jax.jit(lambda y: evaluate(nominal_problem, data, y).demand)     # compiled: faster than op by op
    nominal_peak = float(nominal_demand(jnp.asarray(x)))
    robust_peak = float(f(jnp.asarray(x)))
    if name == "quantile":
        assert robust_peak > nominal_peak
    assert abs(robust_peak - nominal_peak) < 0.05 * nominal_peak


def test_reverse_pullback_is_the_forward_jacobians_and_central_differences():
    """The optimiser's step differentiates in reverse mode above ``FORWARD_MAX_VARIABLES`` variables (issue 26,
    item 4: the forward Jacobian of 37 variables made a step cost ~45 evaluations): its pull-back of random
    cotangents of (f, stacked constraints) equals the forward Jacobian's and central differences of the
    cotangents' inner product, on the symmetric space's problem (the same code as the full space's, fewer forward
    directions to compile; reverse mode through the robust statistic is checked above, by ``jax.grad``)."""
    from mrds_jax.ckcm.design import optimizer as Opt
    problem, data = D.make_problem(TASK, space="symmetric", model="paper")
    settings = D.Settings()
    assert Opt.uses_reverse_mode(settings, 37) and not Opt.uses_reverse_mode(settings, 4)
    assert not Opt.uses_reverse_mode(D.Settings(derivatives="forward"), 37)
    assert Opt.uses_reverse_mode(D.Settings(derivatives="reverse"), 4)
    fn = functools.partial(Opt._objective_and_constraints, problem, settings, data)
    u = problem.space.from_box(jnp.asarray(problem.space.from_params(data.base)))
    rng = np.random.default_rng(3)
    n_constraints = jax.eval_shape(fn, u)[0][1].shape
    ct = (jnp.asarray(rng.normal()), jnp.asarray(rng.normal(size=n_constraints)))
    d = rng.normal(size=u.shape)
    h = 1e-6

    def inner(u):
        (f, g), _ = fn(u)
        return ct[0] * f + ct[1] @ g

    def everything(u):             # one compilation: both pull-backs and the two central-difference points (vmapped:
        return (Opt.reverse_pullback(fn, u)[1](ct), Opt.forward_pullback(fn, u)[1](ct),     # one copy of the model)
                jax.vmap(inner)(jnp.stack([u + h * d, u - h * d])))
    rev, fwd, (plus, minus) = (np.asarray(v) for v in jax.jit(everything)(u))
    assert np.max(np.abs(rev - fwd)) < 1e-10 * np.max(np.abs(fwd)), np.max(np.abs(rev - fwd))
    fd = (float(plus) - float(minus)) / (2 * h)
    assert abs(rev @ d - fd) < 1e-6 * max(abs(fd), 1.0), (rev @ d, fd)


def test_unknown_derivative_mode_is_named():
    with pytest.raises(ValueError, match="derivatives 'backward'"):
        D.Settings(derivatives="backward")


@pytest.mark.parametrize("robust_case", ["quantile"], indirect=True)   # the default run's case, compiled once
def test_batch_size_changes_the_schedule_not_the_numbers(robust_case):
    """``Problem.batch_size`` (``mrds-jax optimize --batch-size``) says how many task samples and Monte Carlo
    draws run as one vectorised batch, the rest in sequence (``jax.lax.map``).  The fixture's 8 draws and 4
    samples at the default 16 (all at once) against batches of 2 (4 batches of draws in sequence, each running
    its samples in 2 batches; a batch that leaves a remainder compiles a second copy of the dynamics, three
    times the compile time here): the same robust demand and gradient.  A batch size that is not an integer
    ≥ 1 is refused by name before anything compiles."""
    stat, _, x, f, g = robust_case
    problem, data = D.make_problem(TASK, space="full", model="paper", robust=stat, robust_samples=8, batch_size=2)
    assert problem.batch_size == 2
    d2, g2 = jax.jit(jax.value_and_grad(lambda y: evaluate(problem, data, y).demand))(jnp.asarray(x))
    assert abs(float(d2) - float(f(x))) <= 1e-13 * abs(float(f(x)))
    assert np.abs(g).max() > 0
    np.testing.assert_allclose(np.asarray(g2), g, rtol=0, atol=1e-12 * np.abs(g).max())
    for bad in (0, 2.5, None):
        with pytest.raises(ValueError, match=r"Problem: batch_size must be (an integer )?>= 1, got"):
            D.make_problem(TASK, space="full", robust="quantile", robust_samples=6, batch_size=bad)
