"""The velocity-level step (mrds_jax.system.timestepping) against analytic mechanics, float64: a cube on an incline
sticks below atan μ and slides with a = g (sin θ − μ cos θ) above it; a sphere rolls (a = 5/7 g sin θ) or slips
(μ < 2/7 tan θ); a dropped sphere comes to rest with restitution 0; a four-legged table stands (Σ normal impulse =
weight·dt every step, feet still); two stacked cubes rest; a pendulum is stopped by its joint limit and held there by
the gravity torque. Two routes to one quantity: the loop block of the step's Delassus matrix J H⁻¹ Jᵀ equals Bᶜ of the
acceleration-level solve (Bonaventura eq. 88), and on a mechanism whose contacts never break the velocity-level
motion converges to the exact acceleration-level one at first order as dt → 0. Bilateral contacts switch off and on
by a traced schedule without recompiling."""
import functools

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, contacts as CT, system as S
from mrds_jax.system.ncp import NCPSettings
from mrds_jax.system.timestepping import ContactSettings, contact_rollout, contact_step, delassus, row_layout
from mrds_jax.system.timestepping import bilateral_rows, module_factors, step_kinematics

G0 = 9.81
DT = 1e-3
# the analytic scenes ask the solver for a tight solve (its default tolerance is 1e-7 of the free velocities): the
# comparisons below are to rounding
EXACT = ContactSettings(ncp=NCPSettings(tolerance=1e-10))


def free_body(mass, inertia):
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=mass, inertia=np.asarray(inertia, float))
    b.add_frame("c", "body")
    return b.build()


def rot_x(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def quat_x(theta):
    return np.array([np.cos(theta / 2), np.sin(theta / 2), 0.0, 0.0])


def incline_system(theta, mu, shape):
    """A free 1 kg body (cube of side 0.2 or sphere of radius 0.1) resting on the plane through the origin tilted
    by θ about x; the downhill direction is d = −(0, cos θ, sin θ)."""
    n = rot_x(theta)[:, 2]
    if shape == "cube":
        body, geom = free_body(1.0, np.eye(3) * (0.04 + 0.04) / 12), C.box("g", "m", "c", (0.1, 0.1, 0.1), friction=mu)
    else:
        body, geom = free_body(1.0, np.eye(3) * 0.4 * 0.01), C.sphere("g", "m", "c", 0.1, friction=mu)
    system = S.build_system({"m": body}, [], collision=[C.plane("floor", normal=n, friction=mu), geom])
    q0 = jnp.asarray(np.concatenate([0.1 * n, quat_x(theta)]))
    return system, q0


@pytest.fixture(scope="module")
def rollout():
    """One compiled rollout (1 s, every step stored) per system structure: θ and μ are traced leaves."""
    return jax.jit(lambda system, q0, v0: contact_rollout(system, q0, v0, DT, 1000, 1, settings=EXACT))


def downhill(theta):
    return -np.array([0.0, np.cos(theta), np.sin(theta)])


@pytest.mark.parametrize("shape", ["cube", "sphere"])
def test_body_on_incline_sticks_rolls_or_slides_as_coulomb_says(rollout, shape):
    theta = 0.3
    d = downhill(theta)
    # cube: μ above tan θ = 0.309 sticks, below slides; sphere: rolls without slip for μ ≥ 2/7 tan θ = 0.0884
    cases = {"cube": [(0.35, 0.0), (0.25, G0 * (np.sin(theta) - 0.25 * np.cos(theta)))],
             "sphere": [(0.5, 5.0 / 7.0 * G0 * np.sin(theta)), (0.05, G0 * (np.sin(theta) - 0.05 * np.cos(theta)))]}
    for mu, a in cases[shape]:
        system, q0 = incline_system(theta, mu, shape)
        tr = rollout(system, (q0,), (jnp.zeros(6),))
        p = np.asarray(tr.q[0][:, :3])
        travel = (p - p[0]) @ d
        assert float(np.max(tr.primal)) < 1e-9 and float(np.max(tr.complementarity)) < 1e-9
        if a == 0.0:
            assert np.abs(travel).max() <= 1e-9, (mu, np.abs(travel).max())
            continue
        layout = row_layout(system)
        lam = np.asarray(tr.impulses)[1:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)
        n = rot_x(theta)[:, 2]
        assert np.abs((p - p[0]) @ n).max() < 1e-9                     # stays on the plane
        if shape == "cube":
            # the cube does not turn: its body-frame velocity is the world one, and each step adds exactly a·dt
            vel = np.asarray(tr.v[0])[:, 3:] @ np.eye(3)
            R0 = rot_x(theta)
            np.testing.assert_allclose(np.diff((vel @ R0.T) @ d), a * DT, atol=1e-9, err_msg=f"mu={mu}")
            continue
        # the sphere over the first 0.2 s: λ_n = m g cos θ dt; rolling, |λ_t| = 2/7 m g sin θ dt inside the cone;
        # slipping, on the cone's boundary |λ_t| = μ λ_n; the centre's acceleration (second differences of the
        # positions) is a. The free joint's velocity is a body twist, so a first-order step of a spinning body errs
        # by ½ ω² |v| dt² a step in its translation (docs/guide/contact.md): rolling, ω = |v|/r, an acceleration error
        # ½ |v|³/r² dt = 3.5e-3 m/s² (1.7e-3 relative) at 0.2 s; the bounds below are 3x that. Every step meets
        # Coulomb's law exactly (the residuals above, and the slipping impulse on the cone's boundary to 1e-9).
        lam = lam[:200, 0]
        np.testing.assert_allclose(lam[:, 0], G0 * np.cos(theta) * DT, rtol=5e-3)
        expected = 2.0 / 7.0 * G0 * np.sin(theta) * DT if mu == 0.5 else mu * G0 * np.cos(theta) * DT
        np.testing.assert_allclose(np.linalg.norm(lam[:, 1:], axis=-1), expected, rtol=5e-3)
        if mu != 0.5:
            np.testing.assert_allclose(np.linalg.norm(lam[:, 1:], axis=-1), mu * lam[:, 0], rtol=1e-9)
        else:
            assert np.all(np.linalg.norm(lam[:, 1:], axis=-1) < 0.9 * mu * lam[:, 0])
        acc = np.diff(np.diff(p[:201] @ d)) / DT ** 2
        np.testing.assert_allclose(acc, a, rtol=5e-3, err_msg=f"sphere mu={mu}")


def _rotation(quat):
    w, x, y, z = quat
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def test_dropped_sphere_comes_to_rest_with_restitution_zero():
    system = S.build_system({"m": free_body(1.0, np.eye(3) * 0.004)},
                            [], collision=[C.plane("floor"), C.sphere("ball", "m", "c", 0.1)])
    q0 = jnp.array([0.0, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0])
    # 500 steps: the compiled program of the ball pushed out of the floor (test_contact_hardening.py), from the cache
    tr = S.simulate(system, S.SystemState((q0,), (jnp.array([0.0, 0.0, 0.0, 0.3, 0.0, 0.0]),)), DT, 500)
    z = np.asarray(tr.q[0][:, 2])
    vz = np.diff(z) / DT                                  # the centre's vertical velocity over each step
    touch = int(np.argmax(z <= 0.1 + 1e-12))
    assert 0 < touch < 300                               # free fall of 0.2 m takes 0.2 s
    assert np.abs(z[touch:] - 0.1).max() < 1e-9          # no bounce, no penetration
    assert np.abs(vz[touch:]).max() < 1e-9
    assert z.min() >= 0.1 - 1e-9


def test_four_legged_table_stands_with_the_weight_on_its_feet():
    """A 3 kg body, its centre of mass off the middle, on four sphere feet off the body's origin (a redundant set:
    only the sum of the normal impulses is unique)."""
    feet = [C.sphere(f"foot{i}", "m", "c", 0.02, position=(sx * 0.2, sy * 0.15, -0.1))
            for i, (sx, sy) in enumerate([(1, 1), (1, -1), (-1, 1), (-1, -1)])]
    body = free_body(3.0, np.diag([0.05, 0.06, 0.08])).with_params(com=np.array([[0.06, -0.04, 0.02]]))
    system = S.build_system({"m": body}, [],
                            collision=[C.plane("floor", friction=0.8)] + feet)
    q0 = jnp.array([0.0, 0.0, 0.12, 1.0, 0.0, 0.0, 0.0])
    tr = S.simulate(system, S.SystemState((q0,), (jnp.zeros(6),)), DT, 300, contact=S.ContactStep(settings=EXACT))
    layout = row_layout(system)
    lam = np.asarray(tr.impulses)[1:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)
    np.testing.assert_allclose(lam[:, :, 0].sum(axis=1), 3.0 * G0 * DT, rtol=1e-9)
    assert np.abs(lam[:, :, 1:]).max() < 1e-9            # no friction needed on flat ground
    assert np.abs(np.asarray(tr.q[0]) - np.asarray(q0)).max() < 1e-9


@pytest.mark.xfail(strict=True, reason="regression of issues 39/40, open: the top cube of an offset stack creeps "
                   "5e-6 m in 0.3 s (bound 2e-6) and the floor's impulse chatters by 0.5 % with a ~70-step period "
                   "under the buffered step with position-level correction; the box–box manifold (two corners and one "
                   "edge slot) is the suspect")
def test_two_stacked_cubes_rest():
    cubes = {"low": free_body(1.0, np.eye(3) * 0.08 / 12), "high": free_body(2.0, np.eye(3) * 0.16 / 12)}
    geoms = [C.plane("floor", friction=0.5), C.box("a", "low", "c", (0.1, 0.1, 0.1), friction=0.5),
             C.box("b", "high", "c", (0.1, 0.1, 0.1), friction=0.5)]
    system = S.build_system(cubes, [], collision=geoms)
    q0 = (jnp.array([0.0, 0.0, 0.1, 1.0, 0, 0, 0]), jnp.array([0.03, -0.02, 0.3, 1.0, 0, 0, 0]))
    tr = S.simulate(system, S.SystemState(q0, (jnp.zeros(6), jnp.zeros(6))), DT, 300)
    for k in range(2):
        assert np.abs(np.asarray(tr.q[k]) - np.asarray(q0[k])).max() < 2e-6   # box-box edge slot: 1e-7 tilt
    # the floor carries both cubes: the impulses of the floor-cube slots sum to 3 kg · g · dt
    model = system.collision
    names = [tuple(model.geoms[i].name for i in pair) for pair in model.pairs]
    start = row_layout(system).contact_start
    lam = np.asarray(tr.impulses)[-1, start:].reshape(-1, 3)
    s = 0
    floor_sum = 0.0
    for pair, n in zip(names, model.slots):
        if "floor" in pair and "a" in pair:
            floor_sum = lam[s:s + n, 0].sum()
        s += n
    np.testing.assert_allclose(floor_sum, 3.0 * G0 * DT, rtol=1e-5)             # the edge slot's 1e-7 tilt


def pendulum(limits=(-0.6, 0.6)):
    b = mj.ModuleBuilder()
    b.add_link("arm", None, "revolute", axis=(1, 0, 0), mass=1.0, com=(0, 0.5, 0), inertia=0.01 * np.eye(3),
               limits=limits)
    return S.build_system({"p": b.build()}, [])


def test_pendulum_is_stopped_by_its_limit_and_held_by_the_gravity_torque():
    system = pendulum()
    tr = S.simulate(system, S.SystemState((jnp.zeros(1),), (jnp.zeros(1),)), DT, 1500)
    q = np.asarray(tr.q[0][:, 0])
    assert q.min() >= -0.6 - 1e-12
    assert abs(q[-1] + 0.6) < 1e-12 and abs(float(tr.v[0][-1, 0])) < 1e-12
    # held: the lower limit's impulse per step is the gravity torque m g l cos(q) times dt
    np.testing.assert_allclose(float(tr.impulses[-1, 0]), 1.0 * G0 * 0.5 * np.cos(0.6) * DT, rtol=1e-9)
    # the same run with the limits ignored swings through
    free = S.simulate(system, S.SystemState((jnp.zeros(1),), (jnp.zeros(1),)), DT, 1500,
                      contact=S.ContactStep(unilateral=False))
    assert np.asarray(free.q[0]).min() < -1.0


# ----------------------------------------------------------------------------- two routes
@functools.lru_cache(maxsize=None)      # made consistent once for the tests that share it
def fourbar(limits=None):
    b = mj.ModuleBuilder(planar=True)
    for name, parent, x in (("crank", None, 0.0), ("coupler", "crank", 0.4), ("rocker", "coupler", 1.0)):
        b.add_link(name, parent, "revolute", position=(x, 0, 0), mass=1.0, com=(0.3, 0, 0), inertia=0.01 * np.eye(3),
                   limits=limits)
    b.add_frame("tip", "rocker", position=(0.7, 0, 0))
    pivot = CT.planar_revolute("pivot", None, ("bars", "tip"), ground_position=(1.0, 0.0, 0.0))
    system = S.build_system({"bars": b.build()}, [pivot])
    guess = S.make_state(system, [np.array([1.2, -1.9, -2.0])], [np.array([2.0, 0.0, 0.0])])
    state, _, _ = S.make_consistent(system, guess)
    return system, state


def test_loop_block_of_the_delassus_matrix_is_the_constraint_space_matrix():
    system, state = fourbar()

    def both_routes(state):        # one compiled program: op by op took twice its compile time
        J, _ = bilateral_rows(system, state, state.v, 0.0, DT, 0.2)
        G, _ = delassus(system, module_factors(step_kinematics(system, state)), J)
        return G, S.constraint_matrix(system, state)
    G, B = jax.jit(both_routes)(state)
    np.testing.assert_allclose(G, B, rtol=1e-12, atol=1e-13)


def test_velocity_level_motion_converges_to_the_exact_one_as_dt_goes_to_zero():
    """The four-bar with joint limits it never reaches (so the velocity-level step runs, its loop never opens):
    at t = 0.4 s the configuration error against the exact acceleration-level RK4 motion halves with dt."""
    system, state = fourbar(limits=(-50.0, 50.0))
    assert row_layout(system).n_unilateral == 6
    exact = S.simulate(system, state, 1e-4, 4000, output=S.Output(decimation=4000),
                       contact=S.ContactStep(unilateral=False))
    errors = []
    for dt in (4e-3, 2e-3, 1e-3):
        n = int(round(0.4 / dt))
        tr = S.simulate(system, state, dt, n, output=S.Output(decimation=n))
        errors.append(np.abs(np.asarray(tr.q[0][-1]) - np.asarray(exact.q[0][-1])).max())
        closure = S.trajectory_diagnostics(system, tr).position_error
        assert np.abs(np.asarray(closure)).max() < 1e-4
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((ratios > 1.6) & (ratios < 2.6)), (errors, ratios)
    assert errors[-1] < 2e-2


def test_a_bilateral_contact_switches_off_and_on_by_a_traced_schedule():
    """The four-bar's pivot released at t₁ and regrasped at t₂ (mode_params, traced): before t₁ the loop is closed,
    between t₁ and t₂ the tip leaves the pivot, after t₂ the pivot pulls it back (the drift correction removes the
    fraction β of the opening per step) and holds it; a second schedule runs on the same compiled program."""
    system, state = fourbar()
    modes = lambda t, q, v, p: jnp.array([(t < p[0]) | (t >= p[1])])  # noqa: E731
    runs = []
    for schedule in ((0.1, 0.3), (0.2, 0.35)):
        tr = S.simulate(system, state, DT, 500, checks=S.Checks(enabled=False), output=S.Output(decimation=10),
                        contact=S.ContactStep(modes=modes, mode_params=jnp.array(schedule)))
        err = S.trajectory_diagnostics(system, tr)
        gap = np.abs(np.asarray(err.position_error)).max(axis=tuple(range(1, np.ndim(err.position_error))))
        vel = np.abs(np.asarray(err.velocity_error)).max(axis=tuple(range(1, np.ndim(err.velocity_error))))
        t = np.asarray(tr.t)
        assert gap[t <= schedule[0]].max() < 1e-6
        assert gap[(t > schedule[0] + 0.05) & (t < schedule[1])].min() > 1e-3      # released: the tip drifts away
        late = t > schedule[1] + 0.1
        assert gap[late].max() < 1e-5 and vel[late].max() < 1e-3                   # regrasped: closed and held
        runs.append(tr)
    assert np.abs(np.asarray(runs[0].q[0][-1]) - np.asarray(runs[1].q[0][-1])).max() > 1e-3   # the schedules differ


def test_make_consistent_resolves_penetration_and_limit_violation():
    """A ball 5 cm into the floor and a limited joint 0.3 rad past its upper limit: make_consistent moves them to
    touching (gap 0) and onto the limit, by the least change (the ball straight up, the joint back to 0.5)."""
    from mrds_jax.system.timestepping import contact_gaps, unilateral_violations
    b = mj.ModuleBuilder()
    b.add_link("ball", None, "free", mass=1.0, inertia=0.004 * np.eye(3))
    b.add_frame("c", "ball")
    b.add_link("arm", "ball", "revolute", axis=(1, 0, 0), limits=(-0.5, 0.5), mass=0.1, inertia=1e-3 * np.eye(3))
    system = S.build_system({"b": b.build()}, [], collision=[C.plane("floor"), C.sphere("s", "b", "c", 0.1)])
    state = S.SystemState((jnp.array([0.01, 0.02, 0.05, 1.0, 0, 0, 0, 0.8]),), (jnp.zeros(7),))
    assert contact_gaps(system, state) == pytest.approx({"floor/s": -0.05})
    fixed, residual, _ = S.make_consistent(system, state)
    assert float(residual) < 1e-12 and np.abs(np.asarray(unilateral_violations(system, fixed))).max() < 1e-12
    np.testing.assert_allclose(np.asarray(fixed.q[0]), [0.01, 0.02, 0.1, 1.0, 0, 0, 0, 0.5], atol=1e-12)


def test_contact_forces_active_set_and_scene_of_a_run():
    """The four-legged table's stored run: each foot's mean force over a step is its share of the weight, straight up
    (world axes), the active set is the four feet, and the viewer's scene shows the four slots with those forces."""
    from mrds_jax.viz.scene import scene
    feet = [C.sphere(f"foot{i}", "m", "c", 0.02, position=(sx * 0.2, sy * 0.15, -0.1))
            for i, (sx, sy) in enumerate([(1, 1), (1, -1), (-1, 1), (-1, -1)])]
    system = S.build_system({"m": free_body(3.0, np.diag([0.05, 0.06, 0.08]))}, [],
                            collision=[C.plane("floor", friction=0.8)] + feet)
    tr = S.simulate(system, S.SystemState((jnp.array([0.0, 0.0, 0.12, 1.0, 0, 0, 0]),), (jnp.zeros(6),)), DT, 20,
                    output=S.Output(decimation=10))
    F = np.asarray(tr.contact_forces(system))
    np.testing.assert_allclose(F[1:].sum(axis=1), [[0.0, 0.0, 3.0 * G0]] * 2, atol=1e-9)
    assert np.all(np.asarray(tr.active_set(system))[1:]) and not np.any(np.asarray(tr.active_set(system))[0])
    sc = scene(system, tr)
    assert sc.points.shape == (3, 4, 3) and len(sc.contact_names) == 4
    np.testing.assert_allclose(sc.forces[1:, :, 2].sum(axis=1), 3.0 * G0, rtol=1e-9)
    np.testing.assert_allclose(sc.points[-1, :, 2], 0.0, atol=1e-9)
    # the geoms for the viewer: the floor and four feet, each with its world pose at every stored state
    assert [g[0] for g in sc.geoms] == ["floor", "foot0", "foot1", "foot2", "foot3"]
    np.testing.assert_allclose(sc.geoms[1][3][-1][:3, 3], [0.2, 0.15, 0.02], atol=1e-9)
