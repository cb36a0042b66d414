"""What a contact rollout reports about its states (issue 41, item 5), float64: ``traj.gaps`` holds the gaps of every
stored state, the initial one first, so a start inside the floor shows as a negative gap whatever the decimation."""
import warnings

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.system.timestepping import state_gaps

R_BALL = 0.1


def ball_on_floor():
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=1.0, inertia=0.004 * np.eye(3))
    b.add_frame("c", "body")
    return S.build_system({"m": b.build()}, [], collision=[C.plane("floor"), C.sphere("ball", "m", "c", R_BALL)])


def test_gaps_are_those_of_the_stored_states_the_initial_one_first():
    """A ball started 5 cm in the floor, stored every 10th step: the first row is −5 cm (z − r, analytic), every
    row equals the gaps evaluated afresh at its stored state (two routes), and the ball ends on the floor."""
    system = ball_on_floor()
    q0 = jnp.array([0.0, 0.0, R_BALL - 0.05, 1.0, 0.0, 0.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = S.simulate(system, S.SystemState((q0,), (jnp.zeros(6),)), 1e-3, 300, output=S.Output(decimation=10))
    gaps = np.asarray(tr.gaps)
    z = np.asarray(tr.q[0][:, 2])
    assert gaps.shape == (31, 1)
    np.testing.assert_allclose(gaps[0, 0], -0.05, rtol=0, atol=1e-15)
    np.testing.assert_allclose(gaps[:, 0], z - R_BALL, rtol=0, atol=1e-14)       # the sphere–plane gap, analytic
    fresh = np.stack([np.asarray(state_gaps(system, S.SystemState((tr.q[0][k],), (tr.v[0][k],))))
                      for k in range(len(z))])
    np.testing.assert_allclose(gaps, fresh, rtol=0, atol=1e-15)
    assert abs(gaps[-1, 0]) < 1e-6


def test_limit_gaps_start_at_the_initial_state(tmp_path):
    """A pendulum started 0.1 rad past its lower limit −0.6: the first stored limit gaps are q − lo = −0.1 and
    hi − q = 1.3 (rad)."""
    b = mj.ModuleBuilder()
    b.add_link("arm", None, "revolute", axis=(1, 0, 0), mass=1.0, com=(0, 0.5, 0), inertia=0.01 * np.eye(3),
               limits=(-0.6, 0.6))
    system = S.build_system({"p": b.build()}, [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = S.simulate(system, S.SystemState((jnp.array([-0.7]),), (jnp.zeros(1),)), 1e-3, 20,
                        output=S.Output(decimation=10))
    np.testing.assert_allclose(np.asarray(tr.gaps)[0], [-0.1, 1.3], rtol=0, atol=1e-15)
    q = np.asarray(tr.q[0][:, 0])
    np.testing.assert_allclose(np.asarray(tr.gaps), np.stack([q + 0.6, 0.6 - q], axis=1), rtol=0, atol=1e-15)
    # a system with limits and no geometry: its contact arrays have no slot columns, and contact.png shows the margins
    from mrds_jax.sysfile.run import contact_arrays, contact_names, plot_contact
    arrays = {"t": np.asarray(tr.t), **contact_arrays(system, tr)}
    assert arrays["contact/forces"].shape == (3, 0, 3) and arrays["contact/slip"].shape == (3, 0)
    meta = dict(contact_names(system), simulation=dict(dt=1e-3, decimation=10))
    assert meta["limited_joints"] == ["p.arm_joint"] and meta["collision_pairs"] == []
    (path,) = plot_contact(arrays, meta, tmp_path)
    assert path.stat().st_size > 5000


def test_simulate_writes_contact_plots_with_the_incline_s_forces(tmp_path):
    """``box_incline`` as shipped (μ = 0.3 < tan 20°: the cube slides) through the command line's writer: contact.png
    is drawn, no constraint_error.png (nothing to close), the run is named as the velocity-level step, and the
    plotted series are the analytic ones: normal force m g cos θ, friction μ m g cos θ, slip speed a t with
    a = g (sin θ − μ cos θ); the energy lost is the friction's work μ m g cos θ × travel."""
    from mrds_jax.sysfile import example_files, load_system_file
    from mrds_jax.sysfile.run import contact_series, run_simulation, write_outputs
    built = load_system_file(example_files()["box_incline"])
    traj = run_simulation(built, progress=False)
    written, meta = write_outputs(built, traj, tmp_path, animation="none")
    names = {p.name for p in written}
    assert {"contact.png", "energy.png", "joint_motion.png"} <= names and "constraint_error.png" not in names
    assert (tmp_path / "contact.png").stat().st_size > 5000
    assert meta["step"].startswith("velocity-level") and "integrator" not in meta["simulation"]["integration"]
    assert meta["collision_pairs"] == ["incline/cube"] and meta["slot_pair"] == [0, 0, 0, 0]
    data = dict(np.load(tmp_path / "trajectory.npz"))
    s = contact_series(data, meta)
    theta, mu, g, m = np.deg2rad(20.0), 0.3, 9.81, 1.0
    t = data["t"][1:]
    # the file asks the solver for 1e-10 of the free velocities: the forces within 1e-8 (they reach 5e-9)
    np.testing.assert_allclose(s["normal"][1:, 0], m * g * np.cos(theta), rtol=1e-8)
    np.testing.assert_allclose(s["friction"][1:, 0], mu * m * g * np.cos(theta), rtol=1e-8)
    np.testing.assert_allclose(s["slip"][1:, 0], g * (np.sin(theta) - mu * np.cos(theta)) * t, rtol=1e-9)
    assert np.abs(s["gap"]).max() < 1e-9
    travel = np.linalg.norm(data["q/box"][-1, :3] - data["q/box"][0, :3])
    np.testing.assert_allclose(meta["energy_lost"], mu * m * g * np.cos(theta) * travel, rtol=2e-3)


def test_violations_jacobian_is_the_derivative_of_the_violations():
    """The projection's one-sided Jacobian from the step's rows (unilateral_violations_and_jacobian) equals central
    differences of the violations along q ⊕ Δ (two routes) for a tilted box 2 cm into a plane (its corners, a smooth
    function of the pose away from ties) and a limit passed; rows that are not violated are zero."""
    from mrds_jax.dynamics.interface import integrate_configuration, normalize_configuration
    from mrds_jax.system.timestepping import unilateral_violations, unilateral_violations_and_jacobian
    b = mj.ModuleBuilder()
    b.add_link("box", None, "free", mass=1.0, inertia=np.eye(3) / 150)
    b.add_link("flap", "box", "revolute", axis=(1, 0, 0), mass=0.1, com=(0, 0.05, 0), inertia=1e-3 * np.eye(3),
               limits=(-0.3, 0.3))
    b.add_frame("centre", "box")
    module = b.build()
    system = S.build_system({"m": module}, [], collision=[C.plane("floor"),
                                                          C.box("cube", "m", "centre", (0.1, 0.07, 0.05))])
    axis = np.array([0.3, -0.5, 0.2]) / np.linalg.norm([0.3, -0.5, 0.2])
    half = 0.15
    q = jnp.array([0.01, 0.02, 0.04, np.cos(half), *(np.sin(half) * axis), 0.4])      # flap 0.1 past its limit
    v0 = jnp.zeros(7)
    r, J = unilateral_violations_and_jacobian(system, S.SystemState((q,), (v0,)))
    assert (r < 0).sum() >= 2 and r[1] == pytest.approx(-0.1)                     # a corner or more, and the limit

    @jax.jit
    def violations_at(dv):
        qq = normalize_configuration(module, integrate_configuration(module, q, dv, 1.0))
        return unilateral_violations(system, S.SystemState((qq,), (v0,)))

    def viol(dv):
        return np.asarray(violations_at(jnp.asarray(dv)))

    h = 1e-6
    fd = np.stack([(viol(h * e) - viol(-h * e)) / (2 * h) for e in np.eye(7)], axis=1)
    np.testing.assert_allclose(np.asarray(J), fd, atol=1e-7)
