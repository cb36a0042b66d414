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
])
def test_bad_contact_settings_are_named(settings, match):
    with pytest.raises(ArgumentError, match=match):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact_settings=settings)


def test_contact_modes_must_be_a_function():
    with pytest.raises(ArgumentError, match="contact_modes must be a function"):
        S.simulate(ball_system(), STATE, 1e-3, 10, contact_modes=(True,))


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
    tr = S.simulate(system, state, 1e-3, 200, decimation=10, check=False)
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
        S.simulate(system, state, 1e-3, 300, decimation=300)
    assert _contact_core._cache_size() == before + 1
