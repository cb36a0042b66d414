"""IFToMM MBS benchmark problems (group A) at reduced length (issue 12; the full 10 s runs with MuJoCo beside
ours are experiments/mbs_benchmarks.py). Built through the public API (tests/mbs_benchmarks.py), DEFAULT
settings (RK4 dt = 1 ms, Baumgarte 1/(50 dt), "pinv" solve), float64, each against a reference independent
of mrds_jax:

* A01 simple pendulum as a closed loop (planar free body pinned to the ground), 1 s from horizontal: against
  the pendulum ODE integrated by SciPy (no mrds_jax, no Pinocchio).
* A02 N-four-bar with N = 4 (the benchmark has 40: 2 min to compile on CPU, in the experiment), 1 m / 1 kg
  rods, 1 s from the vertical, passing the singular all-aligned configuration once (t ≈ 0.71 s): against the
  1-DOF reduced model (Pinocchio, SciPy); the singular-configuration warning appears.
* A05 flyball governor, 0.5 s: its closed form closes both loops in Pinocchio; against the 2-DOF reduced model.
* (The Bennett linkage row: tests/test_hard_mechanisms.py, 2 s.)

Bounds 1e-8 on the joint-coordinate error, relative energy drift and closure (measured: 1e-10 or better).
"""
import numpy as np
import pinocchio as pin
import pytest

from mrds_jax import system as S
import mbs_benchmarks as B
from hard_mechanisms import parallelogram_q, reduced_reference

DT = 1e-3
TOL = 1e-8


def _wrapped_error(a, b):
    return float(np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b))))).max())


def _check(system, traj, q_ref, label):
    assert all(np.all(np.isfinite(np.asarray(x))) for x in traj.q + traj.v)
    err = _wrapped_error(traj.q[0], q_ref)
    d = S.trajectory_diagnostics(system, traj)
    print(f"\n{label}: max coordinate error {err:.2e}, relative energy drift {d.relative_energy_drift:.2e}, "
          f"closure {d.constraint_drift:.2e}")
    assert err < TOL and d.relative_energy_drift < TOL and d.constraint_drift < TOL
    return err


def test_a01_pendulum_closed_loop_matches_the_pendulum_ode():
    system = B.a01_pendulum()
    traj = S.simulate(system, B.a01_state(), DT, 1000, output=S.Output(decimation=10))
    th, _ = B.a01_reference(np.asarray(traj.t))
    assert th.min() < -1.5                                  # swung through the bottom (θ = −π/2)
    _check(system, traj, np.stack([np.asarray(B.a01_q(x)) for x in th]), "A01 1 s")


def test_a02_nfourbar_through_its_singular_configuration():
    n = 4
    system = B.a02_nfourbar(n)
    with pytest.warns(S.SingularConfigurationWarning, match="'loop2'"):
        traj = S.simulate(system, B.a02_state(n), DT, 1000, output=S.Output(decimation=10))
    t = np.asarray(traj.t)
    th, _, q_of, _ = reduced_reference(B.a02_pin(n), lambda x: parallelogram_q(x, n), B.A02["theta0"],
                                       B.A02["omega0"], t)
    assert th.min() < -0.2                                  # through θ = 0, where all rods are aligned
    _check(system, traj, np.stack([q_of(x) for x in th]), f"A02 N = {n}, 1 s")


def test_a05_flyball_closed_form_closes_both_loops_in_pinocchio():
    model = B.a05_pin()
    data = model.createData()
    for theta in ((0.0, 0.1), (1.0, 0.5), (2.5, 1.0)):
        pin.framesForwardKinematics(model, data, np.asarray(B.a05_q(np.asarray(theta))))
        for k in (1, 2):
            gap = data.oMf[model.getFrameId(f"end{k}")].translation - \
                data.oMf[model.getFrameId(f"collar{k}")].translation
            assert np.abs(gap).max() < 1e-14


def test_a05_flyball_matches_its_two_dof_reduced_model():
    system = B.a05_flyball()
    with pytest.warns(S.SingularConfigurationWarning):      # the redundant closure directions, said at t0
        traj = S.simulate(system, B.a05_state(), DT, 500, output=S.Output(decimation=10))
    t = np.asarray(traj.t)
    th, _, q_of, _ = reduced_reference(B.a05_pin(), B.a05_q, np.array([0.0, B.A05["phi0"]]),
                                       np.array([B.A05["spin0"], 0.0]), t)
    assert np.ptp(th[1]) > 0.05 and th[0, -1] > 2.5       # the arms swing out while the shaft turns
    _check(system, traj, np.stack([q_of(x) for x in th.T]), "A05 0.5 s")
