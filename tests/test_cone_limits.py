"""Cone limits of spherical joints, enforced (issue 41, item 1), float64: MuJoCo's ball ``range`` (the largest
rotation angle from the reference) is one one-sided row of the contact step, gap = angle − θ with θ the joint's
rotation angle, its row −axis on the joint's angular velocity."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax import system as S
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.system.timestepping import cone_gap_and_row, limit_rows, row_layout

jax.config.update("jax_enable_x64", True)
G0, L, M, CONE = 9.81, 0.5, 1.0, 0.5


def inverted_spherical_pendulum():
    """A 1 kg bob 0.5 m above a ball joint at the origin (it falls over), its cone 0.5 rad."""
    b = mj.ModuleBuilder()
    b.add_link("bob", None, "spherical", mass=M, com=(0.0, 0.0, L), inertia=1e-3 * np.eye(3), cone_limit=CONE)
    return S.build_system({"p": b.build()}, [])


def tilt(angle, axis):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return jnp.array([np.cos(angle / 2), *(np.sin(angle / 2) * axis)])


def test_cone_row_is_the_derivative_of_the_angle():
    """The row equals central differences of θ along q ⊕ ω dt (two routes), and the gap is the angle's margin."""
    from mrds_jax.dynamics.interface import integrate_configuration
    module = inverted_spherical_pendulum().modules[0]
    q = tilt(0.3, (1.0, 0.4, -0.2))
    gap, row = cone_gap_and_row(q, CONE)
    assert float(gap) == pytest.approx(CONE - 0.3, abs=1e-14)
    h = 1e-6
    fd = [(cone_gap_and_row(integrate_configuration(module, q, h * e, 1.0), CONE)[0]
           - cone_gap_and_row(integrate_configuration(module, q, -h * e, 1.0), CONE)[0]) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(np.asarray(row), np.asarray(fd), atol=1e-9)


def test_spherical_pendulum_falls_onto_its_cone_and_rests_there():
    """Started 0.3 rad over about an oblique axis, the inverted pendulum falls, is stopped by its cone (θ ≤ 0.5 rad
    + 1e-9 throughout) and rests on it, tilted about the same axis; resting, the cone row carries the gravity
    moment: λ/dt = m g l sin θ (analytic)."""
    system = inverted_spherical_pendulum()
    assert limit_rows(system).row_names() == ["p.bob_joint (cone)"] and row_layout(system).n_unilateral == 1
    axis = np.array([1.0, 0.4, 0.0]) / np.linalg.norm([1.0, 0.4, 0.0])
    tr = S.simulate(system, S.SystemState((tilt(0.3, axis),), (jnp.zeros(3),)), 1e-3, 1500,
                    output=S.Output(decimation=50))
    q = np.asarray(tr.q[0])
    theta = 2 * np.arctan2(np.linalg.norm(q[:, 1:], axis=1), np.abs(q[:, 0]))
    assert theta.max() <= CONE + 1e-9
    np.testing.assert_allclose(theta[-1], CONE, atol=1e-9)
    np.testing.assert_allclose(q[-1, 1:] / np.linalg.norm(q[-1, 1:]), axis, atol=1e-9)
    np.testing.assert_allclose(np.asarray(tr.gaps)[-1, 0], 0.0, atol=1e-9)
    lam = float(np.asarray(tr.impulses)[-1, 0])
    np.testing.assert_allclose(lam / 1e-3, M * G0 * L * np.sin(CONE), rtol=1e-6)


def test_mjcf_ball_range_is_enforced_without_a_warning():
    """A ball joint with a range loads with its cone as a limit row and no warning that it is ignored; a start past
    the cone is named at the start of simulate."""
    xml = """<mujoco><worldbody><body name="b"><joint name="ball" type="ball" range="0 30" limited="true"/>
    <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02" mass="1" contype="0" conaffinity="0"/>
    </body></worldbody></mujoco>"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        system, mapping = load_mjcf(xml, return_mapping=True)
    (cone,) = limit_rows(system).cones
    assert cone[3] == pytest.approx(np.deg2rad(30.0)) and cone[-1].endswith(".ball")
    from mrds_jax.system.timestepping import start_violations
    state = S.SystemState((tilt(0.7, (0.0, 1.0, 0.0)),), (jnp.zeros(3),))
    _, joints = start_violations(system, state)
    assert list(joints) == [cone[-1]] and joints[cone[-1]] == pytest.approx(0.7 - np.deg2rad(30.0))
