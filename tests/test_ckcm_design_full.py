"""The full CKCM design space (issue 26): per-leg attachment angles and radii (24), nominal height, per-leg
masses (12) and payload mass — 38 variables — through the MRDS multibody model.

Checked against what nobody here wrote: central finite differences for every gradient; the existing
four-variable optimiser (run here, not a copied number) for the symmetric subspace; a second, independent
segment-distance algorithm (numpy candidate enumeration) for the leg-crossing constraint."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

from mrds_jax.ckcm import design as D, nominal
from mrds_jax.ckcm.design import geometry as Gm
from mrds_jax.ckcm.design import objectives as O
from mrds_jax.ckcm.design.constraints import constraint_values, leg_distances, segment_distance
from mrds_jax.ckcm.design.problem import design_inputs, forces_and_speeds

SMALL_TASK = D.ellipse_task(period=0.5, samples_per_path=8)


def _all_measures(problem, data, x):
    """Every objective (soft peak, RMS, power) and every constraint entry, one flat vector."""
    params, samples = design_inputs(problem, data, x)
    tau, speed = forces_and_speeds(problem, params, samples)
    g = constraint_values(params, samples, jnp.max(jnp.abs(tau)), data.limits)
    w = samples.weight
    return jnp.concatenate([jnp.stack([O.soft_peak(tau, data.force_scale, problem.sharpness),
                                       O.rms_force(tau, w), O.mean_power(tau, speed, w)])]
                           + [g[k].ravel() for k in D.GROUPS])


def _perturbed_start(space):
    """A non-symmetric start inside the full box: every per-leg variable moved off eq. 2's pattern."""
    rng = np.random.default_rng(1)
    base = nominal()
    x = np.asarray(space.from_params(base), float)
    lo, hi = space.bounds()
    x = np.clip(x + 0.03 * (hi - lo) * rng.uniform(-1, 1, x.size), lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo))
    return space.to_params(jnp.asarray(x), base)


@pytest.fixture(scope="module")
def full_gradient_case():
    space = D.named_space("full")
    base = _perturbed_start(space)
    problem, data = D.make_problem(SMALL_TASK, space=space, model="multibody", base=base)
    x = np.asarray(problem.space.from_params(data.base))
    f = jax.jit(lambda x: _all_measures(problem, data, x))
    J = np.asarray(jax.jit(jax.jacfwd(lambda x: _all_measures(problem, data, x)))(jnp.asarray(x)))
    return problem, x, f, J


def test_full_space_has_the_issue_variables():
    space = D.named_space("full")
    assert space.size == 38 and space.per_leg
    assert sum(n.split("_")[0] in ("lambda", "Lambda") or n.startswith(("r_A_", "r_B_")) for n in space.free) == 24
    assert {"z_nominal", "M"} <= set(space.free) and sum(n.startswith(("m_", "m1_")) for n in space.free) == 12


def test_full_space_gradients_match_central_differences(full_gradient_case):
    """d(objectives, every constraint)/d(every one of the 38 variables), multibody model, float64: autodiff
    equals central differences to 1e-6 relative: to the larger of the derivative and the largest derivative
    of the same measure (its gradient's size; a zero derivative's FD is round-off, ~1e-10)."""
    problem, x, f, J = full_gradient_case
    row_scale = np.max(np.abs(J), axis=1)
    worst = (0.0, "")
    for i, name in enumerate(problem.space.free):
        h = 1e-5 * max(abs(x[i]), 1.0)
        e = np.zeros_like(x)
        e[i] = h
        fd = (np.asarray(f(jnp.asarray(x + e))) - np.asarray(f(jnp.asarray(x - e)))) / (2 * h)
        err = np.abs(J[:, i] - fd) / np.maximum(np.abs(fd), row_scale)
        k = int(np.argmax(err))
        if err[k] > worst[0]:
            worst = (float(err[k]), f"d/d{name} entry {k}: autodiff {J[k, i]:.12g} vs FD {fd[k]:.12g}")
    print(f"\n{J.shape[0]} measures x {J.shape[1]} variables; worst relative error {worst[0]:.3g} ({worst[1]})")
    assert worst[0] < 1e-6, worst


def test_crossing_constraint_matches_an_independent_segment_distance():
    """The differentiable leg distances (Ericson's clamped closed form) equal a numpy candidate enumeration,
    at the task samples of a non-symmetric design and for random segments (the full space's start: no gradient
    program is compiled for this check)."""
    params = _perturbed_start(D.named_space("full"))
    poses = np.asarray(SMALL_TASK.samples(params).pose)
    d = np.asarray(jax.vmap(lambda q: leg_distances(params, q))(jnp.asarray(poses)))
    assert np.allclose(d, Gm.leg_pair_distances(params, poses), rtol=0, atol=1e-12)
    P = np.random.default_rng(0).normal(size=(500, 4, 3))
    a = np.asarray(jax.vmap(segment_distance)(*[jnp.asarray(P[:, k]) for k in range(4)]))
    assert np.allclose(a, Gm.segment_distances(*[P[:, k] for k in range(4)]), rtol=0, atol=1e-12)
