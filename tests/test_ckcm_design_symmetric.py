"""The paper's 3-fold symmetric pattern as a subspace of the full design space (issue 26): through the
per-leg representation ('symmetric' space) it evaluates like, and optimises to, today's four-variable problem
('paper' space: θA, θB, m, m1, eq. 2 and 42) — both optima computed here by the existing optimiser."""
import numpy as np
import pytest
import jax.numpy as jnp

from mrds_jax.ckcm import design as D
from mrds_jax.ckcm.design.optimizer import compiled_evaluate

SMALL_TASK = D.ellipse_task(period=0.5, samples_per_path=8)
TASK = D.ellipse_task(period=0.5, samples_per_path=64)          # the `mrds-jax optimize` default task
SETTINGS = D.Settings(optimizer="adam", iterations=200, starts=1)  # its default optimiser and steps, one start


def test_symmetric_embedding_evaluates_like_the_four_variable_problem():
    """The 3-fold pattern through the per-leg representation ('symmetric' space) gives the objective and the
    constraints of today's four-variable problem ('paper' space) at random designs, to round-off."""
    from mrds_jax.ckcm.design.optimizer import compiled_evaluate
    out = {}
    for name in ("paper", "symmetric"):
        problem, data = D.make_problem(SMALL_TASK, space=name, model="paper")
        xs = np.array([[0.5, 1.7, 20.0, 4.4], [0.3, 1.9, 8.0, 2.0], [0.9, 1.2, 30.0, 9.0]])
        out[name] = [compiled_evaluate(problem)(data, jnp.asarray(x)) for x in xs]
    for a, b in zip(out["paper"], out["symmetric"]):
        assert abs(float(a.demand) - float(b.demand)) < 1e-9 * float(a.demand)
        assert "crossing" not in a.constraints and b.constraints["crossing"].size == 15 * SMALL_TASK.size
        for k in ("separation", "condition", "stroke", "elevation"):
            np.testing.assert_allclose(np.asarray(b.constraints[k]), np.asarray(a.constraints[k]), rtol=0, atol=1e-12)
        # per leg, the strength rule holds for each of the six identical legs
        np.testing.assert_allclose(np.asarray(b.constraints["strength"]).reshape(2, 6),
                                   np.repeat(np.asarray(a.constraints["strength"])[:, None], 6, 1), atol=1e-12)


def test_symmetric_subspace_reproduces_the_four_variable_optimum():
    """Adam, 200 steps, from the paper's design (eq. 58), on the paper model: the per-leg route reaches
    today's optimum.  The per-leg strength rule counts each constraint six times (one per leg), which changes
    the penalty's weights, not the optimum: agreement to 0.2 % in peak force, 0.2° and 0.5 % in masses."""
    results = {}
    for name in ("paper", "symmetric"):
        problem, data = D.make_problem(TASK, space=name, model="paper")
        results[name] = D.optimize(problem, data, SETTINGS, task=TASK, progress=False)
    a, b = results["paper"], results["symmetric"]
    print(f"\nfour-variable optimum {a.x}, peak {a.after['peak_force']:.4f} N"
          f"\nsymmetric subspace    {b.x}, peak {b.after['peak_force']:.4f} N")
    assert a.status == b.status == "converged"
    assert a.after["peak_force"] < 0.75 * a.before["peak_force"]          # a real optimum, not the start
    assert abs(b.after["peak_force"] - a.after["peak_force"]) < 2e-3 * a.after["peak_force"]
    for k in ("theta_A", "theta_B"):
        assert abs(b.x[k] - a.x[k]) < 0.2, (k, a.x, b.x)
    for k in ("m", "m1"):
        assert abs(b.x[k] - a.x[k]) < 5e-3 * a.x[k], (k, a.x, b.x)
    # and the optimum really is symmetric: every leg carries the same angles' offsets and masses
    lg = np.asarray(b.params.leg_geometry)
    assert np.allclose(np.diff(lg[0, 1::2] - lg[0, 0::2]), 0, atol=1e-12)
    assert np.allclose(np.asarray(b.params.leg_masses), np.asarray(b.params.leg_masses)[:, :1], atol=1e-12)
