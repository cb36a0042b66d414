"""Loops closed on the position level through an impact (issue 58 item 4), float64: a planar four-bar whose coupler
carries a sphere swings under gravity onto a floor (a hard impact at t ≈ 0.81 s, λ_n up to 5.6 N s). The velocity
level alone (velocity-level Baumgarte, ``PositionCorrection(loops=0)``) leaves the loop open by 1.1e-4 m along this
fast swing; the step's position projection closes it (the loop's Φ_p(q⁺) with the normal rows in one projection,
then a chord iteration, :func:`~mrds_jax.system.timestepping.close_loops`) to 4.5e-11 m at every stored state,
through the impact, without penetration; and it leaves a consistent state consistent (the same compiled rollout
at dt = 1e-9 s: nothing moves). The Cassie and biped landings: ``experiments/loop_closure.py``."""
import functools

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, contacts as CT, system as S
from mrds_jax.system.position_correction import PositionCorrection
from mrds_jax.system.timestepping import ContactSettings, contact_rollout

DT, N = 1e-3, 900


@functools.lru_cache(maxsize=None)
def fourbar_on_floor():
    """The four-bar of tests/test_contact_step.py (crank 0.4 m, coupler 1.0 m, rocker 0.7 m to the ground pivot at
    x = 1 m, crank at 2 rad/s) with a sphere (r = 5 cm) half-way along the coupler and the floor y = 0 below it."""
    b = mj.ModuleBuilder(planar=True)
    for name, parent, x in (("crank", None, 0.0), ("coupler", "crank", 0.4), ("rocker", "coupler", 1.0)):
        b.add_link(name, parent, "revolute", position=(x, 0, 0), mass=1.0, com=(0.3, 0, 0), inertia=0.01 * np.eye(3))
    b.add_frame("tip", "rocker", position=(0.7, 0, 0))
    b.add_frame("knee", "coupler", position=(0.5, 0, 0))
    pivot = CT.planar_revolute("pivot", None, ("bars", "tip"), ground_position=(1.0, 0.0, 0.0))
    geoms = [C.plane("floor", normal=(0, 1, 0), friction=0.5), C.sphere("foot", "bars", "knee", 0.05)]
    system = S.build_system({"bars": b.build()}, [pivot], collision=geoms)
    guess = S.make_state(system, [np.array([1.2, -1.9, -2.0])], [np.array([2.0, 0.0, 0.0])])
    state, _, _ = S.make_consistent(system, guess)
    return system, state


@functools.lru_cache(maxsize=None)
def rollout():
    """One compiled rollout (every step stored) for both tests: dt is traced."""
    return jax.jit(lambda system, q0, v0, dt: contact_rollout(system, q0, v0, dt, N, 1, settings=ContactSettings()))


def closure(system, traj):
    return np.abs(np.asarray(S.trajectory_diagnostics(system, traj).position_error)).max(axis=1)


def test_the_loop_stays_closed_through_an_impact():
    system, state = fourbar_on_floor()
    assert ContactSettings().correction.loops == 1.0
    tr = rollout()(system, state.q, state.v, DT)
    gaps = np.asarray(tr.gaps)[:, -1]
    touched = np.flatnonzero(gaps < 1e-6)
    assert touched.size > 50 and touched[0] > 700                       # it lands, late in the run
    assert float(np.asarray(tr.impulses)[:, -3].max()) > 1.0            # a hard impact (N s)
    err = closure(system, tr)
    assert err.max() <= 1e-8, err.max()                                 # measured 4.5e-11 (1.1e-4 with loops=0)
    assert err[touched[0]:].max() <= 1e-8
    assert gaps.min() >= -1e-9                                          # no penetration (measured -4e-14)
    assert bool(np.asarray(tr.converged).all()) and int(tr.first_nonfinite) < 0


def test_a_consistent_state_is_left_consistent():
    """At dt = 1e-9 s the four-bar moves along its velocity, q(t) = q₀ + t v₀ to 1e-15 rad (gravity adds
    ½ g t² ~ 1e-12 over the 0.9 µs): the projection and the chord iteration add nothing to a consistent state,
    loop closed and out of the floor."""
    system, state = fourbar_on_floor()
    tr = rollout()(system, state.q, state.v, 1e-9)
    err = closure(system, tr)
    assert err[0] < 1e-12 and err.max() <= max(err[0], 1e-12)
    t = np.asarray(tr.t)[:, None]
    np.testing.assert_allclose(np.asarray(tr.q[0]), np.asarray(state.q[0]) + t * np.asarray(state.v[0]), rtol=0,
                               atol=1e-11)
    assert np.asarray(tr.gaps).min() > 0.0


@pytest.mark.slow                        # a reverse-mode program of its own: 75 s of CPU on a busy 2-core machine
def test_gradients_go_through_the_projection_as_through_the_step():
    """Reverse mode through 20 steps (the loop's projection and chord iteration act at every one): the derivative
    of w · q(0.02 s) along v₀ equals central differences (1e-6 relatively; 4e-5 with the projection's target
    Φ_b(q⁺) not differentiated)."""
    system, state = fourbar_on_floor()
    w = jnp.array([1.0, -0.5, 0.25])

    def final(v0):
        return jnp.dot(w, contact_rollout(system, state.q, (v0,), DT, 20, 20).q[0][-1])

    v0 = state.v[0]
    grad = np.asarray(jax.jit(jax.grad(final))(v0))
    f, h = jax.jit(final), 1e-6
    fd = np.array([(float(f(v0.at[i].add(h))) - float(f(v0.at[i].add(-h)))) / (2 * h) for i in range(3)])
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def test_loops_is_a_validated_fraction():
    from mrds_jax.validation import ArgumentError
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ArgumentError, match="PositionCorrection.loops"):
            S.simulate(fourbar_on_floor()[0], fourbar_on_floor()[1], DT, 10,
                       contact=S.ContactStep(settings=ContactSettings(correction=PositionCorrection(loops=bad))))
