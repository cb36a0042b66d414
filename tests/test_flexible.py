"""Flexible links by assumed modes (mrds_jax.flexible; Bonaventura Ch. 7-8, Appendix A), checked against
what the thesis prints and against physics nobody here wrote:

* the mode shapes' constants equal Appendix A's printed numbers (tip values, slopes, a₁₂ … a₂₅);
* the module's equations of motion equal Appendix A.1's consistently linearised equations (transcribed in
  tests/flexible_appendix_a.py) to first order in the flexible coordinates: the difference shrinks like ε²;
* Table 21's natural frequencies: the two-mode model reproduces the printed values, and converges to the
  analytic Euler-Bernoulli values (clamped-free beam, with the tip mass of the locked second link);
* two routes to the bias forces (Lagrange from H(q), d'Alembert over mass points) agree;
* System 6 (closed loop): joint-torque work = Δ(kinetic + elastic energy) to 1e-8, loop closure to rounding;
* System 2a as one two-link module equals the same robot as two modules in series (Ch. 6.6) to 1e-9;
* gradients of a rollout w.r.t. EI and ρ equal central differences; a vmapped batch equals single runs;
* a segmented rigid-link model run in MuJoCo (an independent engine) converges to our motion.
"""
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.dynamics import interface as I
from mrds_jax.dynamics.energy_module import lagrange_bias
from mrds_jax.flexible import (TABLE_21, TABLE_22, FlexibleModelError, bonaventura_system, flexible_chain,
                               link_outputs, mode_tables)
from mrds_jax.flexible import segmented as SG
from mrds_jax.flexible.systems import TORQUES, system_2a_in_series
from mrds_jax.pytree import replace

from flexible_appendix_a import two_link_equations, unit_integrals


# compiled once per module structure (eager autodiff through the quadrature is slow)
inverse_dynamics = jax.jit(I.open_chain_inverse_dynamics)
mass_matrix = jax.jit(I.mass_matrix)
stiffness = jax.jit(lambda module, q: jax.hessian(lambda x: I.potential_energy(module, x))(q))
task_jacobian = jax.jit(I.task_jacobian, static_argnums=2)


# ----------------------------------------------------------------------------- Appendix A's printed constants
def test_mode_constants_match_appendix_A():
    u = unit_integrals(3)
    np.testing.assert_allclose(u["tip"], [2.0, -2.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(u["tip_slope"], [2.75301096934507, -9.56155682042328, 15.6973320929786], rtol=1e-12)
    np.testing.assert_allclose(u["int_x_sigma"], [0.568825743709911, 0.090766786886387, 3.24163743697444e-02],
                               rtol=1e-11)
    np.testing.assert_allclose(u["int_sigma"], [0.782991756039626, 0.433935895110719, 0.254425296866106], rtol=1e-11)
    np.testing.assert_allclose(u["int_dd"], [[4.64777831867864, -7.37987526966198, 3.9415154871266],
                                             [-7.37987526966198, 32.417399027969, -22.3524444398869],
                                             [3.9415154871266, -22.3524444398869, 77.2988908022961]], rtol=1e-11)
    np.testing.assert_allclose(u["int_1mx2_dd"], [[2.38667274821651, -1.37171056689486, -1.58475844061916],
                                                  [-1.37171056689486, 12.9564497281511, 0.338815769523045],
                                                  [-1.58475844061916, 0.338815769523045, 35.7190397578695]],
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(u["int_1mx_dd"], [[1.57087818999425, -0.422320389109118, -1.07208483410593],
                                                 [-0.422320389109118, 8.64714269356121, 1.89005470803216],
                                                 [-1.07208483410593, 1.89005470803216, 24.9521133081691]],
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(u["beta4"], [12.3623633683262, 485.518818513371, 3806.54626639145], rtol=1e-11)
    t = mode_tables(3)                                           # orthonormality: a₁₄ = ρ L δᵢⱼ
    np.testing.assert_allclose(np.einsum("g,gi,gj->ij", t.w, t.sigma, t.sigma), np.eye(3), atol=1e-12)


# ----------------------------------------------------------------------------- Appendix A.1's equations
def test_equations_of_motion_equal_appendix_A_to_first_order(rng):
    """Our module keeps every term of the second-order (foreshortening) kinematics; Appendix A.1 keeps the
    terms of first order in (q_f, q̇_f, q̈_f). The residuals τ = H q̈ + C + K q must then agree exactly at
    ε = 0 (a rigid two-link arm with distributed mass and a tip mass) and differ by O(ε²): halving ε
    quarters the difference in every equation (a first-order slip would only halve it)."""
    n, L1, L2, r1, r2, E1, E2, M = 2, 1.0, 0.5, 0.448, 0.6, 3.7333, 2.9, 0.3
    mod = flexible_chain([L1, L2], n, rho=[r1, r2], EI=[E1, E2], tip_mass=M)
    th, thd, thdd = (rng.normal(size=2) for _ in range(3))
    f, fd, fdd = (rng.normal(size=2 * n) for _ in range(3))

    def difference(eps):
        q, qd, qdd = (np.concatenate([a, eps * b]) for a, b in ((th, f), (thd, fd), (thdd, fdd)))
        H, C, K = two_link_equations(q, qd, L1, L2, r1, r2, E1, E2, M, n)
        ours = inverse_dynamics(mod, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd))
        return np.abs(H @ qdd + C + K @ q - np.asarray(ours))

    assert difference(0.0).max() < 1e-12
    d1, d2 = difference(4e-3), difference(2e-3)
    assert d1.min() > 1e-9                                     # the second-order remainders are there ...
    np.testing.assert_allclose(d1 / d2, 4.0, rtol=0.02)        # ... and are second order in every row


@pytest.mark.parametrize("kinematics", ["second_order", "first_order_jacobian", "first_order"])
def test_tip_jacobian_equals_appendix_A(kinematics, rng):
    """J of the tip of link 2 (Appendix A.1, exact for the second-order kinematics) equals ours at each of
    Ch. 8.1's levels, with A.1's terms dropped as the thesis describes each: case 3 keeps everything; case 2
    drops the second-order foreshortening ū from J but keeps the first-order terms it brings (d₁₃, e₂₃ =
    ∂ū/∂q_f); case 1 drops both."""
    n, L1, L2 = 2, 1.0, 0.5
    mod = flexible_chain([L1, L2], n, kinematics=kinematics)
    q = np.concatenate([rng.normal(size=2), 0.05 * rng.normal(size=2 * n)])
    u = unit_integrals(n)
    qf1, qf2 = q[2:2 + n], q[2 + n:]
    s1, c1, s12, c12 = np.sin(q[0]), np.cos(q[0]), np.sin(q[0] + q[1]), np.cos(q[0] + q[1])
    a13, b23 = u["int_dd"] / L1, u["int_dd"] / L2
    w1, w2 = u["tip"] @ qf1, u["tip"] @ qf2
    ub1, ub2 = (-0.5 * qf1 @ a13 @ qf1, -0.5 * qf2 @ b23 @ qf2) if kinematics == "second_order" else (0.0, 0.0)
    d13, e23 = (a13 @ qf1, b23 @ qf2) if kinematics != "first_order" else (0.0 * qf1, 0.0 * qf2)
    Jx = np.concatenate([[-(L1 + ub1) * s1 - w1 * c1 - (L2 + ub2) * s12 - w2 * c12, -(L2 + ub2) * s12 - w2 * c12],
                         -s1 * u["tip"] - d13 * c1, -s12 * u["tip"] - e23 * c12])
    Jy = np.concatenate([[(L1 + ub1) * c1 - w1 * s1 + (L2 + ub2) * c12 - w2 * s12, (L2 + ub2) * c12 - w2 * s12],
                         c1 * u["tip"] - d13 * s1, c12 * u["tip"] - e23 * s12])
    Jt = np.concatenate([[1.0, 1.0], np.zeros(n), u["tip_slope"] / L2])
    J = np.asarray(task_jacobian(mod, jnp.asarray(q), ("tip",)))        # planar task rows [ω_z, v_x, v_y]
    np.testing.assert_allclose(J, np.stack([Jt, Jx, Jy]), atol=1e-12)


# ----------------------------------------------------------------------------- Table 21
def _locked_frequencies(module, q, n_locked=2):
    """ω of the flexible coordinates with the first ``n_locked`` (joint) coordinates held (Table 21's "link 2
    at 90°": q₁, q₂)."""
    H, K = np.asarray(mass_matrix(module, q)), np.asarray(stiffness(module, q))
    f = np.arange(n_locked, module.nv)
    return np.sqrt(np.sort(np.linalg.eigvals(np.linalg.solve(H[np.ix_(f, f)], K[np.ix_(f, f)])).real))


def _tip_mass_beam_frequencies(L, rho, EI, m, n=2):
    """The first n roots of the clamped-free Euler-Bernoulli beam with a tip point mass m (analytic
    frequency equation, det of the tip boundary conditions EI W'' = 0, EI W''' = −m ω² W; bisection)."""
    def det(b):
        c, s, ch, sh = np.cos(b * L), np.sin(b * L), np.cosh(b * L), np.sinh(b * L)
        W, W2, W3 = np.array([ch - c, sh - s]), b ** 2 * np.array([ch + c, sh + s]), b ** 3 * np.array([sh - s, ch + c])
        return np.linalg.det(np.stack([W2, W3 + b ** 4 / rho * m * W]))
    grid = np.linspace(0.05, 30.0 / L, 20001)
    vals = np.array([det(b) for b in grid])
    roots = []
    for i in np.flatnonzero(np.sign(vals[:-1]) != np.sign(vals[1:]))[:n]:
        lo, hi = grid[i], grid[i + 1]
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.sign(det(mid)) == np.sign(det(lo)) else (lo, mid)
        roots.append(lo)
    return np.array(roots) ** 2 * np.sqrt(EI / rho)


@pytest.mark.parametrize("key,tip_mass", [("2a", 0.0), ("2b", 0.5)])
def test_table_21_frequencies(key, tip_mass):
    """With q₁, q₂ locked, link 2 translates with link 1's tip (q₂ = θ₂ʳ + w̄₁' is held, eq. 130), so link 1 is
    a cantilever carrying the point mass ρL₂ + M, and link 2 a cantilever with the tip mass M. Our two-mode
    model gives Table 21 as printed (the thesis' own two-mode model); with five modes it converges to the
    analytic frequencies, which two modes overestimate by at most 2.1 % (Rayleigh-Ritz bounds from above)."""
    rho, EI = TABLE_22["rho"], TABLE_22["EI"]
    q = jnp.array([0.0, np.pi / 2])
    two = _locked_frequencies(flexible_chain([1.0, 0.5], 2, tip_mass=tip_mass), jnp.concatenate([q, jnp.zeros(4)]))
    printed = TABLE_21[key]
    # (2, 2) modes: sorted frequencies interleave link 1 and link 2 (they decouple at 90 degrees)
    ours = dict(zip(sorted(printed, key=printed.get), two))
    for name, value in printed.items():
        np.testing.assert_allclose(ours[name], value, rtol=0.01, err_msg=f"System {key} {name}")
    link1 = _tip_mass_beam_frequencies(1.0, rho, EI, rho * 0.5 + tip_mass)
    link2 = _tip_mass_beam_frequencies(0.5, rho, EI, tip_mass)
    five1 = _locked_frequencies(flexible_chain([1.0, 0.5], (5, 0), tip_mass=tip_mass), jnp.concatenate([q, jnp.zeros(5)]))
    five2 = _locked_frequencies(flexible_chain([1.0, 0.5], (0, 5), tip_mass=tip_mass), jnp.concatenate([q, jnp.zeros(5)]))
    np.testing.assert_allclose(five1[:2], link1, rtol=0.01)
    np.testing.assert_allclose(five2[:2], link2, rtol=0.01)
    np.testing.assert_allclose([ours["w11"], ours["w21"]], [link1[0], link2[0]], rtol=0.01)
    assert np.all(two[[0, 2]] >= five1[:2]) and np.all(five1[:2] >= link1 * (1 - 1e-9))


def test_table_21_system_1():
    """System 1: the clamped-free beam, ω = (βL)² √(EI / ρL⁴), βL = 1.8751, 4.6941 (10.15, 63.61 rad/s)."""
    rho, EI = TABLE_22["rho"], TABLE_22["EI"]
    ours = _locked_frequencies(flexible_chain([1.0], 2), jnp.zeros(3), n_locked=1)
    analytic = np.array([1.87510407, 4.69409113]) ** 2 * np.sqrt(EI / rho)
    np.testing.assert_allclose(ours, analytic, rtol=1e-8)
    np.testing.assert_allclose(ours, [TABLE_21["1"]["w11"], TABLE_21["1"]["w12"]], rtol=0.01)


# ----------------------------------------------------------------------------- two routes, bad input
@pytest.mark.parametrize("kind", ["two-link, tip mass, gravity", "mobile base"])
def test_dalembert_bias_equals_lagrange(kind, rng):
    mod = (flexible_chain([0.8, 0.6], (2, 3), tip_mass=0.4, gravity=(0.3, -9.81)) if kind.startswith("two")
           else flexible_chain([1.0], 3, mobile_base=True, gravity=(0.0, -9.81)))
    for _ in range(3):
        q = jnp.asarray(np.concatenate([rng.normal(size=mod.nv - 5), 0.05 * rng.normal(size=5)]))
        v = jnp.asarray(rng.normal(size=mod.nv))
        np.testing.assert_allclose(jax.jit(mod.bias)(mod.params, q, v), jax.jit(lagrange_bias)(mod, q, v),
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw,match", [
    (dict(lengths=[1.0, -0.5]), "lengths"), (dict(lengths=[1.0], n_modes=7), "n_modes"),
    (dict(lengths=[1.0], EI=[1.0, 2.0]), "EI"), (dict(lengths=[1.0], rho=0.0), "rho"),
    (dict(lengths=[1.0], kinematics="third"), "kinematics"), (dict(lengths=[1.0], tip_mass=-1.0), "tip_mass")])
def test_bad_flexible_chain_is_named(kw, match):
    with pytest.raises(FlexibleModelError, match=match):
        flexible_chain(**kw)


# ----------------------------------------------------------------------------- closed loop: energy, closure
@pytest.fixture(scope="module")
def system_6a_run():
    sc = bonaventura_system("6a", n_modes=1)
    dt, n = 1e-3, 400
    traj = S.simulate(sc.system, sc.state, dt, n, forces=sc.forces)
    return sc, traj, dt


def test_closed_loop_energy_balance_and_closure(system_6a_run):
    """System 6a (two two-link flexible robots holding hands) without damping or stabilisation: the work of
    the joint torques equals the change of kinetic + elastic energy, and the loop stays closed."""
    sc, traj, dt = system_6a_run
    d = S.trajectory_diagnostics(sc.system, traj, forces=sc.forces)
    W = d.work_done
    assert np.abs(W).max() > 1e-6
    assert np.abs(d.energy_balance).max() < 1e-8 * np.abs(W).max()
    assert np.abs(np.asarray(d.position_error)).max() < 1e-11
    defl = jax.vmap(lambda q: link_outputs(sc.system.modules[0], q)[2])(traj.q[0])
    assert np.abs(np.asarray(defl)).max() > 1e-6                       # the links do bend


def test_two_link_module_equals_two_modules_in_series():
    """Ch. 6.6 / §8.2: System 2a as one two-link module and as a fixed one-link module plus a mobile one-link
    module joined by an actuated revolute contact: the same link angles, tip and deflections to 1e-9."""
    outs = []
    for sc in (bonaventura_system("2a", n_modes=1), system_2a_in_series(n_modes=1)):
        traj = S.simulate(sc.system, sc.state, 1e-3, 300, forces=sc.forces, output=S.Output(decimation=30))
        outs.append([[np.asarray(a) for a in jax.vmap(lambda q: link_outputs(m, q))(qs)]
                     for m, qs in zip(sc.system.modules, traj.q)])
    (one,), (first, second) = outs[0][:1], outs[1]
    ang1, tip1, defl1 = one
    np.testing.assert_allclose(ang1, np.concatenate([first[0], second[0]], axis=1), atol=1e-9)
    np.testing.assert_allclose(tip1, second[1], atol=1e-9)
    np.testing.assert_allclose(defl1, np.concatenate([first[2], second[2]], axis=1), atol=1e-9)
    assert np.abs(ang1[-1] - ang1[0]).max() > 1e-3 and np.abs(defl1).max() > 1e-6     # it moves and bends


# ----------------------------------------------------------------------------- gradients and batches
@pytest.fixture(scope="module")
def system_1_rollout():
    sc = bonaventura_system("1", n_modes=2)

    @jax.jit
    def final_outputs(EI, rho):
        m = sc.system.modules[0]
        m = replace(m, params=dict(m.params, EI=jnp.reshape(EI, (1,)), rho=jnp.reshape(rho, (1,))))
        traj = S.simulate(replace(sc.system, modules=(m,)), sc.state, 1e-3, 400, forces=sc.forces,
                          checks=S.Checks(enabled=False), output=S.Output(decimation=400))
        ang, tip, defl = link_outputs(m, traj.q[0][-1])
        return jnp.concatenate([ang, tip, defl])
    return final_outputs


def test_rollout_gradients_wrt_EI_and_rho_match_central_differences(system_1_rollout):
    """Forward-mode derivatives of a 0.4 s System 1 rollout (link angle, tip, tip deflection) w.r.t. EI and ρ
    against central differences (Richardson-extrapolated over h and h/2, so the O(h²) truncation does not
    mask a relative 1e-6 disagreement)."""
    EI, rho = TABLE_22["EI"], TABLE_22["rho"]
    J = jax.jacfwd(system_1_rollout, argnums=(0, 1))(EI, rho)

    def central(i, h):
        args = [EI, rho]
        args[i] += h
        up = system_1_rollout(*args)
        args[i] -= 2 * h
        return (up - system_1_rollout(*args)) / (2 * h)

    for i, x in enumerate((EI, rho)):
        h = 1e-4 * x
        fd = (4 * central(i, h / 2) - central(i, h)) / 3
        assert np.abs(fd).max() > 1e-6
        big = np.abs(fd) > 1e-3 * np.abs(fd).max()
        np.testing.assert_allclose(J[i][big], fd[big], rtol=1e-6)
        assert np.linalg.norm(J[i] - fd) < 1e-6 * np.linalg.norm(fd)


def test_vmapped_batch_equals_single_runs(system_1_rollout):
    EIs, rhos = jnp.array([3.0, 3.7333, 4.5]), jnp.array([0.40, 0.448, 0.50])
    batch = jax.vmap(system_1_rollout)(EIs, rhos)
    for k in range(3):
        np.testing.assert_allclose(batch[k], system_1_rollout(EIs[k], rhos[k]), rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------------------- MuJoCo segmented reference
def _mujoco_segmented_system_1(n_elements, duration, every):
    layout = SG.segment_layout([1.0], n_elements, TABLE_22["EI"], TABLE_22["rho"])
    model = mujoco.MjModel.from_xml_string(SG.segmented_mjcf({"a": layout}, timestep=1e-4))
    data = mujoco.MjData(model)
    A, T = map(np.asarray, TORQUES["1"])
    qs = [data.qpos.copy()]
    for i in range(int(round(duration / 1e-4))):
        data.ctrl[:] = A * np.sin(2 * np.pi * (data.time + 0.5e-4) / T)     # midpoint hold over the step
        mujoco.mj_step(model, data)
        if (i + 1) % every == 0:
            qs.append(data.qpos.copy())
    return SG.segmented_outputs(layout, np.array(qs))


def test_segmented_mujoco_model_converges_to_the_assumed_modes_motion():
    """System 1 for 3 s: the lumped model (rigid segments + springs, MuJoCo RK4) approaches our three-mode
    motion as the number of elements doubles (angle, tip, transverse deflection)."""
    sc = bonaventura_system("1", n_modes=3)
    traj = S.simulate(sc.system, sc.state, 1e-3, 3000, forces=sc.forces, output=S.Output(decimation=50))
    ang, tip, defl = (np.asarray(a) for a in jax.vmap(lambda q: link_outputs(sc.system.modules[0], q))(traj.q[0]))
    errors = []
    for n in (4, 8):
        phi, tip_m, defl_m = _mujoco_segmented_system_1(n, 3.0, 500)
        errors.append([np.abs(phi - ang).max(), np.abs(tip_m - tip).max(), np.abs(defl_m - defl).max()])
    errors = np.array(errors)
    assert np.all(errors[1] < 0.5 * errors[0]), errors
    assert errors[1, 2] < 0.05 * np.abs(defl).max(), errors
