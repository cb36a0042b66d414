"""The scene ``ckcm_peg_in_hole`` (``mrds_jax.ckcm.assembly``), float64:

* the Python builder and the ready-made system file build the same scene: the CKCM plant at the paper's design with
  its ball joints closed (≤ 1e-12 m), the peg above the hole with every contact slot separated, the controller as six
  actuators; (full mode) their feed-forward is the plant's own gravity forces at the start pose: without an
  insertion command the plant's accelerations vanish there (the start is an equilibrium);
* bad input is named before anything compiles: an interference fit (clearance ≤ 0), a peg wider than the hole's
  mouth, a stiffness that is not positive definite, a compliance centre that is not finite, a target depth outside
  the hole;
* (full mode) one insertion from a 2 mm, 0.5° error with the RCC at the tip: the peg reaches the target depth with
  loop closure ≤ 1e-6 m, penetration ≤ 1e-4 m, the contact solve converged at every stored step; and
  ``mrds-jax simulate ckcm_peg_in_hole --viewer`` writes its trajectory, plots and viewer page.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import ckcm
from mrds_jax import system as S
from mrds_jax.ckcm import assembly as A
from mrds_jax.ckcm.assembly import compliance as CC
from mrds_jax.ckcm.assembly.peg_hole import PegHoleError, start_clearance
from mrds_jax.sysfile import example_files, load_system_file
from mrds_jax.system.timestepping import contact_gaps

P = ckcm.nominal()
TASK = A.default_task(misalignment=A.Misalignment(2e-3, np.radians(0.5), 5e-3))


def test_scene_starts_closed_separated_and_at_rest():
    scene = A.peg_in_hole(P, TASK)
    assert np.max(np.asarray(ckcm.multibody.closure_errors(P, scene.state))) < 1e-12
    gaps = contact_gaps(scene.system, scene.state)
    assert len(gaps) == 7 and min(gaps.values()) > 1e-3          # 2 walls × 3 boxes + floor, all apart at the start
    tip, R = A.tip_position(scene.state.q[-1])
    np.testing.assert_allclose(np.asarray(tip), np.asarray(A.MOUTH) + np.array([2e-3, 0.0, 5e-3]), atol=1e-12)
    np.testing.assert_allclose(np.arctan2(R[0, 2], R[2, 2]), np.radians(0.5), atol=1e-12)
    el = scene.forces[0]
    assert el.name == "rcc" and len(el.joints) == 6


@pytest.mark.slow
def test_without_insertion_command_the_start_is_an_equilibrium():
    """With no insertion force or speed, the controller's actuator forces at the start (the feed-forward: the
    plant's gravity forces there) hold the whole plant at rest: every module's acceleration vanishes."""
    task = TASK._replace(compliance=TASK.compliance._replace(insertion_force=jnp.asarray(0.0),
                                                             insertion_speed=jnp.asarray(0.0)))

    def accelerations(task):
        scene = A.peg_in_hole(P, task)
        Q = S.generalized_forces(scene.system, scene.forces, scene.state, 0.0)
        return S.forward_dynamics(scene.system, scene.state, Q).qdd
    qdd = jax.jit(accelerations)(task)
    assert max(float(jnp.abs(a).max()) for a in qdd) < 1e-9
    qdd = jax.jit(accelerations)(TASK)                         # with the insertion command it moves
    assert max(float(jnp.abs(a).max()) for a in qdd) > 0.1


def test_ready_made_file_builds_the_scene():
    built = load_system_file(example_files()["ckcm_peg_in_hole"])
    names = built.system.collision.geom_names
    assert names[0] == "peg" and len(names) == 8 and built.system.module_names[-1] == "payload"
    assert [f.name for f in built.forces] == ["rcc"]
    assert built.contact_settings.margin == 1e-4 and built.contact_settings.ncp.stages == 40
    scene = A.peg_in_hole(P, TASK)
    for a, b in zip(built.state.q, scene.state.q):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)


@pytest.mark.parametrize("change, error, words", [
    (lambda t: t._replace(peg_hole=t.peg_hole._replace(clearance=jnp.asarray(0.0))), PegHoleError, "interference"),
    (lambda t: t._replace(peg_hole=t.peg_hole._replace(clearance=jnp.asarray(-1e-4))), PegHoleError,
     "wider than the hole's mouth"),
    (lambda t: t._replace(compliance=t.compliance._replace(stiffness=-t.compliance.stiffness)), CC.StiffnessError,
     "positive definite"),
    (lambda t: t._replace(compliance=t.compliance._replace(centre=jnp.asarray(np.nan))), CC.ComplianceCentreError,
     "finite"),
    (lambda t: t._replace(target_depth=jnp.asarray(0.2)), ckcm.CKCMInputError, "inside the hole"),
    # the end sphere (r = 10 mm) 1.9 mm off the axis, 1 mm above the mouth: 8.3 mm across and 4 mm above the
    # chamfer's lower corner (R = 10.2 mm, w = 3 mm), √(8.3² + 4²) = 9.2136 mm from it: 0.786 mm inside
    (lambda t: t._replace(misalignment=A.Misalignment(*jnp.asarray([-1.9e-3, 0.0, 1e-3]))), ckcm.CKCMInputError,
     "overlaps them by 0.786 mm"),
])
def test_bad_input_is_named_before_anything_compiles(change, error, words):
    with pytest.raises(error) as info:
        A.peg_in_hole(P, change(TASK))
    assert words in str(info.value)


@pytest.mark.parametrize("lateral, standoff", [(2e-3, 3e-3), (-3e-3, 5e-3)])   # nearest: the chamfer's corner, its face
def test_start_clearance_is_the_narrow_phase_gap(lateral, standoff):
    """peg_hole.start_clearance (the end sphere against the walls' profile in the slot's plane, by hand) equals the
    smallest gap the capsule–box narrow phase finds at the scene's initial state (tilted 0.5°: the straight part
    rises away from the walls). By hand: √(8.2² + 6²) − 10 = 0.161 mm from the chamfer's lower corner (R = 10.2 mm,
    w = 3 mm), (13.2 − 3 + 5)/√2 − 10 = 0.748 mm from its face."""
    task = TASK._replace(misalignment=A.Misalignment(*jnp.asarray([lateral, np.radians(0.5), standoff])))
    scene = A.peg_in_hole(P, task)
    gaps = contact_gaps(scene.system, scene.state)
    expected = float(start_clearance(task.peg_hole, lateral, standoff, A.LAYOUT))
    assert expected == pytest.approx({2e-3: 1.60709e-4, -3e-3: 7.48023e-4}[lateral], abs=1e-9)
    np.testing.assert_allclose(min(gaps.values()), expected, atol=1e-9)


@pytest.mark.slow
def test_scene_inserts_with_small_errors():
    run = jax.jit(lambda t: A.insertion(P, t, 2e-3, 350, 5))(TASK)
    o = A.outcome_of(run, TASK)
    assert int(o.code) == 0 and float(o.depth) >= 0.03, (int(o.code), float(o.depth))
    assert float(np.max(run.closure)) <= 1e-6
    assert float(np.max(run.penetration)) <= 1e-4
    assert bool(np.all(run.converged))
    assert float(o.peak_contact) > 1.0                      # it did touch (the chamfer guided it)


@pytest.mark.slow
def test_simulate_ready_made_with_viewer(tmp_path):
    from mrds_jax.cli import main
    out = tmp_path / "pih"
    assert main(["simulate", "ckcm_peg_in_hole", "--out", str(out), "--viewer", "--no-progress", "--animation",
                 "none"]) == 0
    assert (out / "viewer.html").exists() and (out / "trajectory.npz").exists()
