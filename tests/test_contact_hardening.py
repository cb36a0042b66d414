"""Contact that holds when a user leans on it (issue 40), float64: a start inside the floor or past a joint limit is
pushed out on the position level (mrds_jax.system.position_correction), never launched, and named in a warning at the
start; restitution follows Newton's impact law with speculative contacts (a ball returns to e² times its drop
height); extreme friction and mass ratios keep the normal rows met; deep box overlaps separate without throwing."""
import warnings

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.system.simulate import ContactSolveWarning, PenetrationWarning

G0 = 9.81
R_BALL = 0.1


def free_body(mass=1.0, inertia=None):
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=mass,
               inertia=0.4 * mass * R_BALL ** 2 * np.eye(3) if inertia is None else np.asarray(inertia, float))
    b.add_frame("c", "body")
    return b.build()


def ball_on_floor(restitution=0.0, friction=1.0):
    return S.build_system({"m": free_body()}, [], collision=[
        C.plane("floor", restitution=restitution, friction=friction),
        C.sphere("ball", "m", "c", R_BALL, restitution=restitution, friction=friction)])


def body_state(p, v_linear=(0.0, 0.0, 0.0)):
    """A free body at ``p``, unrotated, moving at ``v_linear`` (its body frame is the world's)."""
    return (jnp.asarray(np.concatenate([p, [1.0, 0.0, 0.0, 0.0]])), jnp.asarray(np.concatenate([np.zeros(3), v_linear])))


def pendulum(limits=(-0.6, 0.6)):
    b = mj.ModuleBuilder()
    b.add_link("arm", None, "revolute", axis=(1, 0, 0), mass=1.0, com=(0, 0.5, 0), inertia=0.01 * np.eye(3),
               limits=limits)
    return S.build_system({"p": b.build()}, [])


# ----------------------------------------------------------------------------- starting in penetration
@pytest.mark.parametrize("depth", [0.05, 0.6])
def test_ball_started_in_the_floor_is_pushed_out_without_a_launch(depth):
    """5 cm and 0.6 m into the floor: never faster than 1 m/s, never more than 1 cm above its resting height, at
    rest on the floor after 0.5 s; the start is named in a warning."""
    q0, v0 = body_state([0.0, 0.0, R_BALL - depth])
    with pytest.warns(PenetrationWarning, match=r"floor/ball .* deep.*make_consistent"):
        tr = S.simulate(ball_on_floor(), S.SystemState((q0,), (v0,)), 1e-3, 500)
    z, v = np.asarray(tr.q[0][:, 2]), np.asarray(tr.v[0])
    speed = np.linalg.norm(v[:, 3:], axis=1).max()
    print(f"depth {depth}: max speed {speed:.3g} m/s, max height above rest {z.max() - R_BALL:.3g} m, "
          f"final gap {z[-1] - R_BALL:.3g} m")
    assert speed <= 1.0 and z.max() <= R_BALL + 0.01
    assert abs(z[-1] - R_BALL) < 1e-6 and np.abs(v[-50:]).max() < 1e-6


@pytest.mark.parametrize("past", [0.1, 0.6])
def test_pendulum_started_past_its_limit_returns_to_it_slowly(past):
    """Held by gravity against its lower limit −0.6 rad and started ``past`` beyond it: back on the limit,
    |q̇| ≤ 1 rad/s throughout; the joint is named at the start."""
    with pytest.warns(PenetrationWarning, match=r"joint p\.arm_joint 0\.[16] past its limit"):
        # 1500 steps: the compiled program of test_contact_step.py's pendulum stopped by its limit, from the cache
        tr = S.simulate(pendulum(), S.SystemState((jnp.array([-0.6 - past]),), (jnp.zeros(1),)), 1e-3, 1500)
    q, qd = np.asarray(tr.q[0][:, 0]), np.asarray(tr.v[0][:, 0])
    print(f"past {past}: max |qd| {np.abs(qd).max():.3g} rad/s, final q {q[-1]:.12g}")
    assert np.abs(qd).max() <= 1.0
    assert abs(q[-1] + 0.6) < 1e-9 and q.max() <= -0.6 + 1e-9


# ----------------------------------------------------------------------------- restitution
def first_rebound_apex(z, vz):
    """Height of the first apex after the first bounce (vz turning positive, then back to ≤ 0)."""
    up = np.flatnonzero(vz > 0)[0]
    down = up + np.flatnonzero(vz[up:] <= 0)[0]
    return z[up:down + 1].max()


@pytest.mark.parametrize("dt", [1e-3, 2e-4])
def test_restitution_returns_the_ball_to_e_squared_times_its_drop_height(dt):
    """A ball dropped from h = 0.2 m (contact point above the floor) onto a floor, both of restitution e: its first
    rebound apex is e² h (Newton's impact law, v⁺ = −e v⁻) within 5 %, for e = 1 and 0.5."""
    h = 0.2
    q0, v0 = body_state([0.0, 0.0, R_BALL + h])
    for e in (1.0, 0.5):
        tr = S.simulate(ball_on_floor(restitution=e), S.SystemState((q0,), (v0,)), dt, int(round(0.5 / dt)))
        apex = first_rebound_apex(np.asarray(tr.q[0][:, 2]) - R_BALL, np.asarray(tr.v[0][:, 5]))
        print(f"dt {dt:g}, e {e}: apex {apex:.5f} m, e^2 h {e * e * h:.5f} m ({apex / (e * e * h) - 1:+.2%})")
        assert abs(apex / (e * e * h) - 1.0) < 0.05


# ----------------------------------------------------------------------------- scaling
def box_body(mass, half):
    hx, hy, hz = half
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=mass, inertia=mass / 3 * np.diag([hy * hy + hz * hz, hx * hx + hz * hz,
                                                                             hx * hx + hy * hy]))
    b.add_frame("c", "body")
    return b.build()


def test_light_sphere_with_huge_friction_rests_on_a_heavy_box():
    """A 1e-9 kg sphere on a 1000 kg box on the floor (mass ratio 1e12 between their rows' Delassus entries),
    friction 1e8 everywhere: nothing sinks (gaps ≥ −1e-3 m), everything finite, no residual warning, and the sphere
    rests (its height within 1e-9 m) — the solve runs on the Jacobi-scaled problem, μ is capped at the no-slip 1e4 and
    the sphere's complementarity is judged at its own impulses' scale (mrds_jax.system.ncp.row_scaling,
    no_slip_friction, row_complementarity: judged at the box's, a sphere held up by 1e-11 N s while it separated
    counted as solved, and it rose 6.6 mm in 0.3 s under the tests' XLA flags)."""
    mu = 1e8
    system = S.build_system({"box": box_body(1000.0, (0.5, 0.5, 0.5)), "s": free_body(1e-9)}, [], collision=[
        C.plane("floor", friction=mu), C.box("b", "box", "c", (0.5, 0.5, 0.5), friction=mu),
        C.sphere("ball", "s", "c", R_BALL, friction=mu)])
    (qb, vb), (qs, vs) = body_state([0.0, 0.0, 0.5]), body_state([0.2, 0.1, 1.0 + R_BALL])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ContactSolveWarning)
        tr = S.simulate(system, S.SystemState((qb, qs), (vb, vs)), 1e-3, 300)
    gaps = np.asarray(tr.gaps)
    print(f"min gap {gaps.min():.3g} m, sphere height {np.asarray(tr.q[1][:, 2]).min() - 1.0 - R_BALL:.3g}..."
          f"{np.asarray(tr.q[1][:, 2]).max() - 1.0 - R_BALL:.3g} m, worst primal {float(np.max(tr.primal)):.3g}")
    assert gaps.min() >= -1e-3 and all(np.all(np.isfinite(np.asarray(x))) for x in (*tr.q, *tr.v, tr.impulses))
    # at rest on the box: a held-up sphere that rises (its contact called solved at the box's impulse scale) fails
    assert np.abs(np.asarray(tr.q[1][:, 2]) - 1.0 - R_BALL).max() < 1e-9


@pytest.mark.parametrize("rho", [0.1, 10.0])     # the default ρ and a large one: the solve converges either way
def test_ball_sliding_with_huge_friction_keeps_its_contact(rho):
    """A ball sliding at 3 m/s on a floor of friction 1e8 (capped at 1e4, a no-slip contact): it stays on the floor
    (no lift-off above 1 mm, no penetration beyond 1e-3 m) and finite."""
    from mrds_jax.system.ncp import NCPSettings
    from mrds_jax.system.timestepping import ContactSettings
    q0, v0 = body_state([0.0, 0.0, R_BALL], (3.0, 0.0, 0.0))
    # 500 steps, as the pushed-out ball's run: at the default ρ the same compiled program (steps and settings are static)
    tr = S.simulate(ball_on_floor(friction=1e8), S.SystemState((q0,), (v0,)), 1e-3, 500, checks=S.Checks(enabled=False),
                    contact=S.ContactStep(settings=ContactSettings(ncp=NCPSettings(rho=rho))))
    z = np.asarray(tr.q[0][:, 2]) - R_BALL
    print(f"rho {rho}: height {z.min():.3g}..{z.max():.3g} m")
    assert np.all(np.isfinite(z)) and z.min() >= -1e-3 and z.max() <= 1e-3


# ----------------------------------------------------------------------------- deep overlaps
@pytest.mark.slow
@pytest.mark.parametrize("top, depth", [((0.0, 0.0, 0.27), 0.03), ((0.0, 0.0, 0.12), 0.18), ((0.02, 0.0, 0.12), 0.18)])
def test_deep_box_overlaps_separate_without_throwing(top, depth):
    """Two equal 0.2 m cubes, one on the floor, the other started ``depth`` into it from above (centred, where its
    corners lie on the lower cube's side faces and a corner's nearest face would give a gap of −0.0, or shifted by
    2 cm): the pair's corners are measured along the separating-axis face of least overlap (narrowphase
    _sat_face_depth), so the cubes separate along one normal within 0.3 s (gap ≥ −1e-3 m), no speed above 1.5 m/s.
    (The default position correction: Gauss–Seidel sweeps until converged, at most 100 a step.)"""
    h = 0.1
    system = S.build_system({"a": box_body(1.0, (h, h, h)), "b": box_body(1.0, (h, h, h))}, [], collision=[
        C.plane("floor"), C.box("A", "a", "c", (h, h, h)), C.box("B", "b", "c", (h, h, h))])
    (qa, va), (qb, vb) = body_state([0.0, 0.0, h]), body_state(top)
    with pytest.warns(PenetrationWarning, match=f"pair A/B {depth:g} m deep"):
        tr = S.simulate(system, S.SystemState((qa, qb), (va, vb)), 1e-3, 300)
    speed = max(np.linalg.norm(np.asarray(v)[:, 3:], axis=1).max() for v in tr.v)
    gap_end = float(np.asarray(tr.gaps)[-1].min())
    print(f"{depth} m deep at {top}: final gap {gap_end:.3g} m, max speed {speed:.3g} m/s")
    assert gap_end >= -1e-3 and speed <= 1.5


# ----------------------------------------------------------------------------- a robot's keyframe in the floor
def test_legged_robot_whose_keyframe_puts_its_feet_1mm_into_the_floor_stands_without_a_hop(tmp_path):
    """tests/data/quadruped_contact.xml with a keyframe that lowers the trunk to 0.349 m, its four sphere feet 1.1 mm
    into the floor (feet 0.331 m below the trunk, radius 2 cm), started as written (``mapping.keyframe_state``
    without projection): the start is named in a PenetrationWarning, and over 0.5 s the trunk never moves up
    faster than 0.05 m/s nor rises more than 2 mm above its start (no hop), and the feet end out of the floor
    (within the correction's slop) and the robot standing (trunk height between 0.34 and 0.352 m)."""
    from pathlib import Path
    from mrds_jax.system.timestepping import contact_gaps
    xml = (Path(__file__).parent / "data" / "quadruped_contact.xml").read_text()
    xml = xml.replace("</mujoco>", '  <keyframe>\n    <key name="feet_in_floor" qpos="0 0 0.349 1 0 0 0 0 0 0 0 0 0 0 0"/>\n'
                                   "  </keyframe>\n</mujoco>")
    path = tmp_path / "quadruped_key.xml"
    path.write_text(xml)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = mj.load_mjcf(str(path), return_mapping=True, return_forces=True)
    state = mapping.keyframe_state("feet_in_floor")
    assert -1.2e-3 <= min(contact_gaps(system, state).values()) <= -1e-3            # the feet 1.1 mm deep
    with pytest.warns(PenetrationWarning):
        tr = S.simulate(system, state, 5e-4, 1000, forces=forces, output=S.Output(decimation=10))
    z = np.asarray(tr.q[0][:, 2])
    vz = np.diff(z) / (10 * 5e-4)                     # the trunk's mean vertical speed between stored states
    print(f"trunk z {z.min():.5f}..{z.max():.5f} m, largest upward speed {vz.max():.3g} m/s, "
          f"final gap {float(np.asarray(tr.gaps)[-1].min()):.3g} m")
    assert vz.max() <= 0.05 and z.max() <= 0.349 + 2e-3
    assert float(np.asarray(tr.gaps)[-1].min()) >= -1e-4 - 1e-9 and 0.34 <= z[-1] <= 0.352
