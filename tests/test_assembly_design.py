"""Design through contact (``mrds_jax.ckcm.assembly.design``, issue 42 item 5), float64:

* the design vector's maps: the scene's RCC and the paper's θA, θB are a design inside the box, and building the
  RCC back from it gives the scene's stiffness and damping (``assembly.default_compliance``: critically damped);
  the box map and its inverse agree; every real u lands strictly inside the box;
* bad input is named before anything compiles, through the design path: a non-finite compliance centre and a
  stiffness that is not positive definite in the base task, an interference fit, a design vector with a non-finite
  entry (named by variable) or outside the box, an empty box;
* (full mode: each of the two programs — the objective over a batch of two insertions with its forward-mode
  gradient, and its reverse-mode gradient — takes 5 to 15 minutes to compile on the shared two cores) on a window
  without a mode switch (free descent before contact: every contact slot apart at every stored state of both runs,
  for the design and each of its perturbations) the gradient of the design objective equals central differences to
  1e-6 relative; reverse mode (``jax.grad``) equals forward mode (``jvp`` per design variable) there and on a window
  through contact (the peg lands on the chamfer: slots touching, contact force > 1 N, penetration ≤ 1e-4 m, loop
  closure ≤ 1e-6 m, every contact solve converged), to 1e-9 relative.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax.ckcm import assembly as A
from mrds_jax.ckcm.assembly import design as AD, optimizers as AO
from mrds_jax.ckcm.design.optimizer import forward_jacobian
from mrds_jax.ckcm.errors import ComplianceCentreError, StiffnessError
from mrds_jax.ckcm.assembly.peg_hole import PegHoleError

SETTINGS = AD.ObjectiveSettings(dt=2e-3, n_steps=20, decimation=5)


def test_scene_design_round_trips_and_the_box_holds_every_u():
    base = A.default_task()
    problem = AD.design_problem(AD.misalignment_batch(2), base)
    x = np.asarray(AD.design_of(problem.base, problem.params))
    AD.check_design(x)                                                   # inside the box
    np.testing.assert_allclose(x[[0, 1, 2, 4, 5]], [np.log(200.0), np.log(2e4), np.log(1e3), np.radians(30.0),
                                                    np.radians(94.0)], rtol=1e-12)
    c = AD.compliance_of(jnp.asarray(x), problem.base)
    np.testing.assert_allclose(np.asarray(c.stiffness), np.asarray(base.compliance.stiffness), rtol=1e-12)
    # the damping keeps the base's critical damping: 2 (k m)^1/2 with m = 2 kg m^2, 60 kg (default_compliance)
    k = np.array([200.0, 200.0, 200.0, 2e4, 2e4, 1e3])
    np.testing.assert_allclose(np.diag(np.asarray(c.damping)), 2 * np.sqrt(k * [2, 2, 2, 60, 60, 60]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(AD.to_box(AD.from_box(jnp.asarray(x)))), x, rtol=1e-12, atol=1e-15)
    u = jnp.asarray([-40.0, -3.0, 0.0, 3.0, 40.0, 1.0])
    lo, hi = np.asarray(AD.BOX.lower), np.asarray(AD.BOX.upper)
    xb = np.asarray(AD.to_box(u))
    assert np.all(xb >= lo) and np.all(xb <= hi) and lo[2] < xb[2] < hi[2]
    stiffer = AD.compliance_of(jnp.asarray(x).at[1].add(np.log(4.0)), problem.base)   # 4x lateral stiffness
    np.testing.assert_allclose(np.diag(np.asarray(stiffer.damping))[3:5], 2 * 2 * np.sqrt(2e4 * 60), rtol=1e-12)


def _nan_centre(t):
    return t._replace(compliance=t.compliance._replace(centre=jnp.asarray(np.inf)))


def _not_pd(t):
    return t._replace(compliance=t.compliance._replace(stiffness=t.compliance.stiffness.at[5, 5].set(-1.0)))


def _interference(t):
    return t._replace(peg_hole=t.peg_hole._replace(clearance=jnp.asarray(0.0)))


@pytest.mark.parametrize("change, error, words", [
    (_nan_centre, ComplianceCentreError, "finite"),
    (_not_pd, StiffnessError, "positive definite"),
    (_interference, PegHoleError, "interference"),
])
def test_bad_base_task_is_named_before_anything_compiles(change, error, words, monkeypatch):
    monkeypatch.setattr(jax, "jit", _no_compile)
    with pytest.raises(error, match=words):
        AD.design_problem(AD.misalignment_batch(2), change(A.default_task()))


@pytest.mark.parametrize("entry, value, words", [
    (3, np.nan, "centre = nan"),
    (1, np.inf, "log_k_lateral = inf"),
    (4, np.radians(80.0), "theta_A = .* not in"),
    (0, -1e3, "log_k_angular = .* not in"),
])
def test_bad_design_vector_is_named_before_anything_compiles(entry, value, words, monkeypatch):
    problem = AD.design_problem(AD.misalignment_batch(2))
    x = np.asarray(AD.design_of(problem.base, problem.params)).copy()
    x[entry] = value
    monkeypatch.setattr(AD, "_evaluate_jit", _no_compile)
    with pytest.raises(AD.AssemblyDesignError, match=words):
        AD.checked_evaluate(problem, x, SETTINGS)
    with pytest.raises(AD.AssemblyDesignError, match="the start design"):
        AO.timed_gradient_run(problem, x, SETTINGS)


def test_batched_runs_name_bad_starts_and_derivative_before_anything_compiles(monkeypatch):
    """The runs of several starts together (the study's three seeds) take an (S, 6) array, name a bad start by its
    index and variable, and ``gradient_step`` names an unknown derivative mode, all before anything compiles."""
    problem = AD.design_problem(AD.misalignment_batch(2))
    x = np.asarray(AD.design_of(problem.base, problem.params))
    bad = np.stack([x, x])
    bad[1, 3] = np.nan
    monkeypatch.setattr(jax, "jit", _no_compile)
    for runs in (AO.timed_gradient_runs, AO.timed_cma_es_runs):
        with pytest.raises(AD.AssemblyDesignError, match=r"\(S, 6\) array, got shape \(6,\)"):
            runs(problem, x, SETTINGS)
        with pytest.raises(AD.AssemblyDesignError, match="start design 1: not finite: centre = nan"):
            runs(problem, bad, SETTINGS)
    with pytest.raises(AD.AssemblyDesignError, match="derivative must be one of"):
        AO.gradient_step(SETTINGS, AD.BOX, "backward")


def test_empty_box_and_bad_misalignments_are_named():
    problem = AD.design_problem(AD.misalignment_batch(2))
    box = AD.DesignBox(AD.BOX.lower, AD.BOX.lower)
    with pytest.raises(AD.AssemblyDesignError, match="empty"):
        AD.checked_evaluate(problem, np.zeros(6), SETTINGS, box)
    with pytest.raises(AD.AssemblyDesignError, match="one length"):
        AD.design_problem(A.Misalignment(jnp.zeros(2), jnp.zeros(3), jnp.zeros(2)))
    with pytest.raises(Exception, match="finite"):
        AD.design_problem(A.Misalignment(jnp.zeros(2), jnp.asarray([0.0, np.nan]), jnp.full(2, 1e-3)))


def _no_compile(*args, **kwargs):
    raise AssertionError("something was compiled before the bad input was named")


# ----------------------------------------------------------------------------- derivatives (full mode)
FREE = A.Misalignment(jnp.asarray([1e-3, -0.5e-3]), jnp.asarray([np.radians(0.5), -np.radians(0.3)]),
                      jnp.asarray([6e-3, 6e-3]))          # 6 mm above the mouth: 40 ms of free descent
CONTACT = A.Misalignment(jnp.asarray([1e-3, -1e-3]), jnp.asarray([np.radians(0.5), np.radians(0.5)]),
                         jnp.asarray([1e-3, 1e-3]))       # 1 mm above: the peg lands on the chamfer in the window


@pytest.fixture(scope="module")
def compiled():
    """Two programs for a batch of two insertions of 40 ms, compiled once (the problem, its misalignments, is an
    argument, so both windows share them): forward mode with the value and metrics (``design.optimizer``'s
    ``forward_jacobian``: one directional derivative per design variable, vmapped, the primal once) and reverse
    mode (``jax.grad``). Each takes minutes to compile on two cores (the full mode's timeout is raised)."""
    def f(problem, x):
        m = AD.evaluate(problem, x, SETTINGS)
        return m.objective, m

    def forward(problem, x):
        value, jac, metrics = forward_jacobian(lambda y: f(problem, y), x)
        return value, jac, metrics
    return jax.jit(forward), jax.jit(jax.grad(lambda p, x: f(p, x)[0], argnums=1))


def _start(misalignment):
    problem = AD.design_problem(misalignment)
    return problem, jnp.asarray(AD.design_of(problem.base, problem.params)).at[3].set(0.05)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_gradient_equals_central_differences_on_a_window_without_a_mode_switch(compiled):
    forward, _ = compiled
    problem, x = _start(FREE)
    _, g, m0 = forward(problem, x)
    g = np.asarray(g)
    assert int(np.max(np.asarray(m0.touching))) == 0 and float(m0.mean_depth) < -4e-3
    h = 1e-5 * np.maximum(np.abs(np.asarray(x)), 1.0)
    fd = np.zeros(6)
    for i in range(6):
        (plus, _, m_plus), (minus, _, m_minus) = forward(problem, x.at[i].add(h[i])), forward(problem, x.at[i].add(-h[i]))
        for m in (m_plus, m_minus):                          # the same contact mode throughout: free motion
            assert int(np.max(np.asarray(m.touching))) == 0 and bool(m.converged)
        fd[i] = (float(plus) - float(minus)) / (2 * h[i])
    print("forward-mode gradient", g, "central differences", fd)
    assert np.all(np.abs(g) > 1e-8)                          # every variable moves the objective
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.linalg.norm(g))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("window", ["free", "contact"])
def test_reverse_mode_equals_forward_mode(compiled, window):
    forward, reverse = compiled
    problem, x = _start(FREE if window == "free" else CONTACT)
    _, g_fwd, m = forward(problem, x)
    touching = int(np.max(np.asarray(m.touching)))
    assert (touching > 0) == (window == "contact") and bool(m.converged)
    if window == "contact":
        assert float(m.peak_contact) > 1.0 and float(m.penetration) <= 1e-4 and float(m.closure) <= 1e-6
    g_rev, g_fwd = np.asarray(reverse(problem, x)), np.asarray(g_fwd)
    print(window, "reverse", g_rev, "forward", g_fwd)
    assert np.all(np.isfinite(g_rev)) and np.linalg.norm(g_rev) > 0
    np.testing.assert_allclose(g_rev, g_fwd, rtol=1e-9, atol=1e-9 * np.linalg.norm(g_rev))
