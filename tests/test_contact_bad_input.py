"""Bad input to contact simulation gets a named error before anything compiles (issue 34 item 8; the geoms' own
checks — friction, restitution, sizes, plane normals, unknown geoms, frames and modules in pairs — are in
tests/test_collision_model.py), and an ill-posed step returns finite impulses and reports its residuals, never NaN."""
import numpy as np
import pytest

import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.model.tree import ModelError
from mrds_jax.system.ncp import NCPSettings, RowLayout, solve_ncp
from mrds_jax.system.position_correction import PositionCorrection
from mrds_jax.system.timestepping import ContactSettings
from mrds_jax.validation import ArgumentError, InputError


def free_body(mass=1.0):
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=mass, inertia=0.01 * np.eye(3))
    b.add_frame("c", "body")
    return b.build()


def ball_system():
    return S.build_system({"m": free_body()}, [], collision=[C.plane("floor"), C.sphere("ball", "m", "c", 0.1)])


STATE = S.SystemState((jnp.array([0.0, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0]),), (jnp.zeros(6),))


@pytest.mark.parametrize("settings, match", [
    (ContactSettings(ncp=NCPSettings(stages=0)), "NCPSettings.stages"),
    (ContactSettings(ncp=NCPSettings(iterations=2.5)), "NCPSettings.iterations"),
    (ContactSettings(ncp=NCPSettings(rho=-1.0)), "NCPSettings.rho"),
    (ContactSettings(ncp=NCPSettings(prox=float("nan"))), "NCPSettings.prox"),
    (ContactSettings(baumgarte=1.5), "baumgarte"),
    (ContactSettings(margin=-1e-3), "ContactSettings.margin"),
    (ContactSettings(ncp=NCPSettings(relaxation=2.0)), "NCPSettings.relaxation"),
    ("fast", "ContactSettings"),
    # the tolerance-driven solve and the buffer of active rows (issue 39)
    (ContactSettings(ncp=NCPSettings(tolerance=0.0)), "NCPSettings.tolerance must be finite and > 0"),
    (ContactSettings(ncp=NCPSettings(tolerance=float("nan"))), "NCPSettings.tolerance must be finite and > 0"),
    (ContactSettings(ncp=NCPSettings(tolerance=-1e-6)), "NCPSettings.tolerance must be finite and > 0"),
    (ContactSettings(max_contacts=0), "ContactSettings.max_contacts must be >= 1"),
    (ContactSettings(max_contacts=2.5), "ContactSettings.max_contacts must be an integer"),
    (ContactSettings(max_limit_rows=0), "ContactSettings.max_limit_rows must be >= 1"),
    (ContactSettings(ncp=NCPSettings(iterations=0)), "NCPSettings.iterations must be >= 1"),
    (ContactSettings(correction=PositionCorrection(slop=-1e-3)), "PositionCorrection.slop"),
])
def test_bad_contact_settings_are_named(settings, match):
    with pytest.raises(ArgumentError, match=match):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact=S.ContactStep(settings=settings))


def test_contact_modes_must_be_a_function_named_as_each_caller_takes_it():
    with pytest.raises(ArgumentError, match=r"simulate: ContactStep\.modes must be a function"):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact=S.ContactStep(modes=(True,)))
    from mrds_jax.system.timestepping import contact_rollout
    with pytest.raises(ArgumentError, match=r"contact_rollout: contact_modes must be a function"):
        contact_rollout(ball_system(), STATE.q, STATE.v, 1e-3, 10, contact_modes=(True,))


def test_limits_lower_above_upper_and_geoms_on_unknown_frames_are_named():
    b = mj.ModuleBuilder()
    with pytest.raises(ModelError, match="lower <= upper"):
        b.add_link("arm", None, "revolute", limits=(0.5, -0.5))
    with pytest.raises(InputError, match="nowhere"):
        S.build_system({"m": free_body()}, [], collision=[C.plane("floor"), C.sphere("ball", "m", "nowhere", 0.1)])
    with pytest.raises(InputError, match="ghost"):
        S.build_system({"m": free_body()}, [], collision=[C.plane("floor"), C.sphere("ball", "ghost", "c", 0.1)])


def test_infeasible_and_redundant_problems_give_finite_impulses_and_report_it():
    """G = 0 with a closing velocity (no impulse can stop it: infeasible) and a redundant, inconsistent pair of
    bilateral rows: finite λ, and the primal residual says the problem was not met."""
    layout = RowLayout(0, 0, 1)
    sol = solve_ncp(jnp.zeros((3, 3)), jnp.array([-1.0, 0.3, 0.0]), layout, jnp.array([0.5]))
    assert np.all(np.isfinite(np.asarray(sol.lam))) and float(sol.primal) > 0.5
    G = jnp.array([[1.0, 1.0], [1.0, 1.0]])                       # two copies of one row, asked different things
    sol = solve_ncp(G, jnp.array([1.0, -1.0]), RowLayout(2, 0, 0), jnp.zeros(0))
    assert np.all(np.isfinite(np.asarray(sol.lam))) and float(sol.primal) > 0.5


def test_painleve_rod_stays_finite_and_reports_its_residuals():
    """Painlevé's rod (a thin rod leaning at 30°, sliding fast on its lower end, μ = 1.5 > 4/3, where the
    acceleration-level problem has no solution or several): the velocity-level step returns finite states and
    impulses; its residuals are reported (finite) at every stored state."""
    b = mj.ModuleBuilder()
    b.add_link("rod", None, "free", mass=1.0, inertia=np.diag([1 / 12, 1 / 12, 1e-4]))
    b.add_frame("c", "rod")
    tilt = np.deg2rad(60.0)                                    # the rod's axis 30° above the floor
    R = np.array([[np.cos(tilt), 0, np.sin(tilt)], [0, 1, 0], [-np.sin(tilt), 0, np.cos(tilt)]])
    system = S.build_system({"rod": b.build()}, [],
                            collision=[C.plane("floor", friction=1.5), C.capsule("rod", "rod", "c", 0.01, 0.5,
                                                                                 friction=1.5)])
    quat = np.array([np.cos(tilt / 2), 0.0, np.sin(tilt / 2), 0.0])
    centre = np.array([0.0, 0.0, 0.5 * np.sin(np.pi / 6) + 0.01])
    v_world = np.array([-4.0, 0.0, 0.0])
    state = S.SystemState((jnp.asarray(np.concatenate([centre, quat])),),
                          (jnp.asarray(np.concatenate([np.zeros(3), R.T @ v_world])),))
    tr = S.simulate(system, state, 1e-3, 200, checks=S.Checks(enabled=False), output=S.Output(decimation=10))
    assert int(tr.first_nonfinite) < 0
    for x in (tr.q[0], tr.v[0], tr.impulses, tr.primal, tr.dual, tr.complementarity):
        assert np.all(np.isfinite(np.asarray(x)))
    assert float(np.max(tr.impulses)) > 0                        # it did touch and push


def test_touch_down_and_lift_off_do_not_recompile():
    """One compiled program serves a ball that never reaches the floor, one that lands, and one thrown up off it:
    inactive slots are masked, so the contact events change no shape (the jitted core's cache holds one entry)."""
    from mrds_jax.system.simulate import _contact_core
    system = ball_system()
    before = _contact_core._cache_size()
    for z, vz in ((5.0, 0.0), (0.3, 0.0), (0.1, 3.0)):
        state = S.SystemState((jnp.array([0.0, 0.0, z, 1.0, 0.0, 0.0, 0.0]),),
                              (jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, vz]),))
        S.simulate(system, state, 1e-3, 300, output=S.Output(decimation=300))
    assert _contact_core._cache_size() == before + 1


# ----------------------------------------------------------------------------- issue 40: every bad input named
def switchable_system():
    """A free body welded to the ground by one switchable contact, resting on a floor (collision geometry)."""
    from mrds_jax import contacts as CT
    weld = CT.weld("weld", None, ("m", "c"))
    return S.build_system({"m": free_body()}, [weld], collision=[C.plane("floor"), C.sphere("ball", "m", "c", 0.1)])


@pytest.mark.parametrize("modes, match", [
    (lambda t, q, v, p: jnp.array([True, False]), r"one boolean per contact .*\(1,\); got shape \(2,\)"),
    (lambda t, q, v, p: 0.5, r"one boolean per contact .*got shape \(\) of float64"),
    (lambda t, q, v, p: jnp.array([0.5]), r"one boolean per contact .*got shape \(1,\) of float"),
    (lambda t, q, v, p: jnp.ones((1, 1), bool), r"got shape \(1, 1\)"),
    (lambda t, q, v, p: jnp.zeros(0, bool), r"got shape \(0,\)"),
    (lambda t, q, v, p: jnp.array(True), r"got shape \(\)"),
    (lambda t, q, v: jnp.array([True]), r"simulate: ContactStep\.modes must take four arguments"),
])
def test_contact_modes_of_the_wrong_shape_type_or_arity_are_named(modes, match):
    with pytest.raises(ArgumentError, match=match):
        S.simulate(switchable_system(), STATE, 1e-3, 10, contact=S.ContactStep(modes=modes))


def test_contact_arguments_simulate_would_ignore_are_named():
    modes = lambda t, q, v, p: jnp.array([True])                   # noqa: E731
    with pytest.raises(ArgumentError, match=r"simulate: ContactStep\.modes switches the system's bilateral contacts .* has none"):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact=S.ContactStep(modes=modes))
    with pytest.raises(ArgumentError, match=r"ContactStep\(unilateral=False\) turns off"):
        S.simulate(switchable_system(), STATE, 1e-3, 10, contact=S.ContactStep(modes=modes, unilateral=False))
    plain = S.build_system({"m": free_body()}, [])
    with pytest.raises(ArgumentError, match="ContactStep.settings .* no collision geometry or joint limits"):
        S.simulate(plain, STATE, 1e-3, 10, contact=S.ContactStep(settings=ContactSettings()))
    with pytest.raises(ArgumentError, match=r"ContactStep.settings .* \(unilateral=False\)"):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact=S.ContactStep(settings=ContactSettings(), unilateral=False))
    with pytest.raises(ArgumentError, match=r"simulate: ContactStep\.mode_params must be numbers or arrays \(traced leaves of ContactStep\.modes\)"):
        S.simulate(switchable_system(), STATE, 1e-3, 10,
                   contact=S.ContactStep(modes=modes, mode_params="release at 0.1"))
    with pytest.raises(ArgumentError, match="residual_warn must be finite"):
        S.simulate(ball_system(), STATE, 1e-3, 10, checks=S.Checks(residual_warn=float("nan")))


@pytest.mark.parametrize("kwargs, match", [
    (dict(settings=ContactSettings(baumgarte=5.0)), "ContactSettings.baumgarte .* in \\[0, 1\\]"),
    (dict(settings=ContactSettings(ncp=NCPSettings(relaxation=3.0))), r"NCPSettings.relaxation must be .* \(0, 2\)"),
    (dict(settings=ContactSettings(ncp=NCPSettings(stages=0))), "NCPSettings.stages must be >= 1"),
    (dict(dt=0.0), "contact_rollout: dt must be finite and > 0"),
    (dict(decimation=0), "contact_rollout: decimation must be >= 1"),
    (dict(tau=(jnp.zeros(3),)), r"tau\['m'\] has shape \(3,\), needs \(6,\)"),
    (dict(tau=(jnp.zeros(6), jnp.zeros(6))), "tau needs one array per module"),
    (dict(settings="fast"), "contact_rollout: settings must be a ContactSettings, got str"),
])
def test_bad_contact_rollout_arguments_are_named(kwargs, match):
    from mrds_jax.system.timestepping import contact_rollout
    args = dict(dt=1e-3, decimation=1, tau=None, settings=ContactSettings()) | kwargs
    with pytest.raises(ArgumentError, match=match):
        contact_rollout(ball_system(), STATE.q, STATE.v, args["dt"], 10, args["decimation"], tau=args["tau"],
                        settings=args["settings"])


def test_a_traced_setting_and_a_single_geom_are_named():
    import jax
    from mrds_jax.system.timestepping import contact_rollout
    with pytest.raises(ArgumentError, match=r"ContactSettings.margin is a setting of the compiled step"):
        jax.jit(lambda m: contact_rollout(ball_system(), STATE.q, STATE.v, 1e-3, 10,
                                          settings=ContactSettings(margin=m)))(1e-3)
    with pytest.raises(ArgumentError, match="collision must be a CollisionModel or a list of geoms, got one Geom"):
        S.build_system({"m": free_body()}, [], collision=C.sphere("ball", "m", "c", 0.1))


def test_float32_state_of_a_float64_system_runs_in_float64():
    state = S.SystemState(tuple(x.astype(jnp.float32) for x in STATE.q), tuple(x.astype(jnp.float32) for x in STATE.v))
    tr = S.simulate(ball_system(), state, 1e-3, 10)
    assert tr.q[0].dtype == jnp.float64 and np.all(np.isfinite(np.asarray(tr.q[0])))


LAYOUT = RowLayout(0, 1, 1)                                        # one limit row and one contact: 4 rows
G4, g4 = jnp.eye(4), jnp.array([-1.0, -1.0, 0.2, 0.0])


@pytest.mark.parametrize("change, match", [
    (dict(mu=jnp.array([-0.5])), "friction coefficients mu must be >= 0"),
    (dict(mu=jnp.array([0.5, 0.5])), r"mu has shape \(2,\), needs \(1,\)"),
    (dict(settings=NCPSettings(iterations=0)), "NCPSettings.iterations must be >= 1"),
    (dict(G=jnp.diag(jnp.array([1.0, -1.0, 1.0, 1.0]))), "G must be symmetric positive semidefinite"),
    (dict(G=jnp.eye(4)[:3]), r"G has shape \(3, 4\), needs \(4, 4\)"),
    (dict(g=g4.at[1].set(jnp.nan)), "g has non-finite entries at \\[1\\]"),
    (dict(lam0=jnp.zeros(3)), r"lam0 \(warm start\) has shape \(3,\), needs \(4,\)"),
])
def test_bad_ncp_problems_are_named(change, match):
    args = dict(G=G4, g=g4, mu=jnp.array([0.5]), lam0=None, settings=NCPSettings()) | change
    with pytest.raises(ArgumentError, match=match):
        solve_ncp(args["G"], args["g"], LAYOUT, args["mu"], lam0=args["lam0"], settings=args["settings"])


def test_a_full_buffer_of_active_rows_is_reported_not_dropped_silently():
    """Two sphere feet resting on the floor and a buffer of one contact slot: every step has one candidate more
    than the buffer holds — ``ContactTrajectory.overflow`` says so and ``simulate`` names it in a warning; with
    the buffer the model gives (both slots) nothing overflows."""
    from mrds_jax.system.simulate import ContactOverflowWarning
    feet = [C.sphere(f"foot{i}", "m", "c", 0.02, position=(x, 0.0, -0.1)) for i, x in enumerate((0.1, -0.1))]
    system = S.build_system({"m": free_body()}, [], collision=[C.plane("floor")] + feet)
    state = S.SystemState((jnp.array([0.0, 0.0, 0.12, 1.0, 0.0, 0.0, 0.0]),), (jnp.zeros(6),))
    with pytest.warns(ContactOverflowWarning, match="max_limit_rows / max_contacts"):
        tr = S.simulate(system, state, 1e-3, 5, contact=S.ContactStep(settings=ContactSettings(max_contacts=1)))
    assert bool(np.all(np.asarray(tr.overflow)[1:]))
    tr = S.simulate(system, state, 1e-3, 5)
    assert not bool(np.any(np.asarray(tr.overflow)))


# ----------------------------------------------------------------------------- issue 58 item 6: named at the door
def test_a_warm_start_of_the_wrong_length_is_named():
    """JAX clamps out-of-range gathers: a short warm start would be read silently; it is named, traced too."""
    import jax
    from mrds_jax.system.timestepping import contact_step, row_layout
    system = ball_system()
    size = row_layout(system).size
    match = (r"contact_step: lam_prev \(the warm start, the previous step's impulses\) has shape \(2,\), "
             rf"needs \({size},\)")
    with pytest.raises(ArgumentError, match=match):
        contact_step(system, STATE.q, STATE.v, 0.0, 1e-3, jnp.zeros(2))
    with pytest.raises(ArgumentError, match=match):
        jax.jit(lambda lam: contact_step(system, STATE.q, STATE.v, 0.0, 1e-3, lam))(jnp.zeros(2))


@pytest.mark.parametrize("settings, match", [
    (ContactSettings(baumgarte=jnp.asarray(0.2)),
     r"ContactSettings\.baumgarte .* give a Python number .* not an unhashable ArrayImpl"),
    (ContactSettings(correction=PositionCorrection(loops=np.asarray(1.0))),
     r"PositionCorrection\.loops .* give a Python number .* ndarray"),
    (ContactSettings(ncp=NCPSettings(tolerance=jnp.asarray(1e-7))), r"NCPSettings\.tolerance .*\(static, hashed\)"),
])
def test_settings_holding_an_array_are_named(settings, match):
    with pytest.raises(ArgumentError, match=match):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact=S.ContactStep(settings=settings))


def test_a_schedule_with_a_python_if_on_traced_time_is_named():
    def modes(t, q, v, p):
        if t < p[0]:                                 # a Python if on a traced value
            return jnp.array([True])
        return jnp.array([False])
    match = r"ContactStep\.modes is called with traced t, q, v .* use jnp\.where or jax\.lax\.cond on traced t, q, v"
    with pytest.raises(ArgumentError, match=match):
        S.simulate(switchable_system(), STATE, 1e-3, 10,
                   contact=S.ContactStep(modes=modes, mode_params=jnp.array([0.1])))
    from mrds_jax.system.timestepping import contact_rollout
    with pytest.raises(ArgumentError, match=r"contact_rollout: contact_modes is called with traced t"):
        contact_rollout(switchable_system(), STATE.q, STATE.v, 1e-3, 10,
                        contact_modes=lambda t, q, v, p: jnp.array([float(t) < 0.1]))


def test_an_unhashable_schedule_is_named_and_a_frozen_dataclass_runs():
    import dataclasses

    @dataclasses.dataclass                           # eq=True, not frozen: __hash__ is None
    class Release:
        at: float

        def __call__(self, t, q, v, p):
            return jnp.array([t < self.at])

    with pytest.raises(ArgumentError, match=r"simulate: ContactStep\.modes must be hashable: it is a static "
                                            r"argument of the compiled rollout .* frozen dataclass .* not an "
                                            r"unhashable Release"):
        S.simulate(switchable_system(), STATE, 1e-3, 10, contact=S.ContactStep(modes=Release(0.005)))

    @dataclasses.dataclass(frozen=True)              # hashable: accepted at the door (checked without compiling)
    class FrozenRelease:
        at: float

        def __call__(self, t, q, v, p):
            return jnp.array([t < self.at])

    from mrds_jax.system.timestepping import validate_contact_modes
    modes = FrozenRelease(0.005)
    assert validate_contact_modes(switchable_system(), modes, STATE.q, STATE.v, ()) is modes
