"""A non-symmetric full-space design (issue 26) flown by the MRDS multibody plant under computed torque: the
plant applies, instant by instant, the closed-chain inverse-dynamics forces the optimiser evaluates for
``model="multibody"`` — so the peak force a multibody design reports is the one the plant applies (1e-6
relative).  The design is saved and flown through the same route as `mrds-jax simulate --design`."""
import numpy as np
import jax
import jax.numpy as jnp

from mrds_jax.ckcm import design as D, nominal
from mrds_jax.ckcm.design import objectives as O
from mrds_jax.ckcm.design.results import DesignResult, load_design
from mrds_jax.ckcm.design.simulation import simulate_design


def non_symmetric_design():
    space = D.named_space("full")
    rng = np.random.default_rng(3)
    x = np.asarray(space.from_params(nominal()), float)
    lo, hi = space.bounds()
    x = np.clip(x + 0.03 * (hi - lo) * rng.uniform(-1, 1, x.size), lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo))
    return space.to_params(jnp.asarray(x), nominal())


def test_plant_applies_the_reported_multibody_forces(tmp_path):
    params = non_symmetric_design()
    task = D.ellipse_task(period=0.5, samples_per_path=50)
    result = DesignResult(status="converged", message="", params=params, initial_params=params, x={}, x_initial={},
                          before={}, after={"peak_force": 0.0},    # a design file needs the reported peak; not read here
                          task=task.to_json(), problem={"model": "multibody", "legs": "bench"},
                          settings={}, history={}, starts=[], evaluations=0)
    result.save(tmp_path / "design.json")
    loaded = load_design(tmp_path / "design.json")
    np.testing.assert_array_equal(np.asarray(loaded.params.leg_geometry), np.asarray(params.leg_geometry))
    np.testing.assert_array_equal(np.asarray(loaded.params.leg_masses), np.asarray(params.leg_masses))
    run, = simulate_design(loaded, dt=0.5 / 200)       # RK4: the flight's error falls as dt⁴
    r = run["result"]
    assert run["max_closure_error"] < 1e-6 and run["max_position_error"] < 1e-6
    # the optimiser's forces at the plant's instants (the task's samples are every other one of them)
    path, _ = task.path_objects(params)[0]
    q, qd, qdd = jax.vmap(path)(r.t)
    samples = D.TaskSamples(q, qd, qdd, jnp.ones_like(r.t), jnp.zeros_like(r.t), params.M, params.I_payload)
    tau_id = np.asarray(O.actuator_forces(params, samples, "multibody", "bench"))
    flown = np.asarray(r.forces)
    rel = np.abs(flown - tau_id).max() / np.abs(tau_id).max()
    print(f"\nflown vs inverse dynamics: max |difference| / peak = {rel:.2e}; peak {np.abs(flown).max():.6f} N "
          f"flown, {np.abs(tau_id).max():.6f} N inverse dynamics")
    assert rel < 1e-6
    assert abs(np.abs(flown).max() - np.abs(tau_id).max()) < 1e-6 * np.abs(tau_id).max()
    # and the design is really non-symmetric: its legs carry different forces at the same instant
    assert np.ptp(np.abs(tau_id).max(axis=0)) > 1.0
