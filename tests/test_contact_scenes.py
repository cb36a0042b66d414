"""The ready-made contact scenes against analytic mechanics (float64).

* ``box_incline`` (a cube on a 20° incline, its file as shipped, friction set per case): with μ = 0.3 < tan 20° it
  slides, every step adding exactly a·dt = g (sin θ − μ cos θ) dt to its downhill velocity; with μ = 0.4 > tan 20°
  it sticks (travel ≤ 1e-9 m in 0.3 s).
* ``quadruped_ground`` (the quadruped on the floor by friction through four sphere feet, legs closed through the
  trunk and the ground): unpushed it stands still with Σ normal impulse = weight·dt every step and no friction;
  pushed sideways by a ramp F(t) it stands (every foot strictly inside its friction cone) while F is well below
  the friction limit μ m g and slides (every foot on the cone's boundary, |λ_t| = μ λ_n) once F is well above it.
* Both run through ``mrds-jax check`` and ``mrds-jax simulate`` (the quadruped's run is slow-marked).
"""
import dataclasses
import json

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from mrds_jax.cli import main
from mrds_jax.sysfile import example_files, load_system_file
from mrds_jax.system.timestepping import contact_rollout, row_layout

G0 = 9.81


@pytest.fixture(scope="module")
def rollout():
    """One compiled velocity-level rollout per system structure (stored every step); friction, forces and the
    state are traced leaves."""
    return jax.jit(lambda system, q0, v0, forces, tau, settings, n: contact_rollout(
        system, q0, v0, 1e-3, n, 1, forces=forces, tau=tau, settings=settings), static_argnames=("settings", "n"))


def contact_impulses(system, tr):
    layout = row_layout(system)
    return np.asarray(tr.impulses)[1:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)


# ----------------------------------------------------------------------------- the box on the incline
@pytest.fixture(scope="module")
def box():
    return load_system_file(example_files()["box_incline"])


def test_box_on_incline_slides_with_coulomb_acceleration_or_sticks(box, rollout):
    theta = np.deg2rad(20.0)
    downhill = -np.array([0.0, np.cos(theta), np.sin(theta)])
    for mu in (0.3, 0.4):
        collision = dataclasses.replace(box.system.collision, friction=jnp.full_like(box.system.collision.friction, mu))
        system = dataclasses.replace(box.system, collision=collision)
        tight = box.contact_settings._replace(ncp=box.contact_settings.ncp._replace(tolerance=1e-12))  # to rounding
        tr = rollout(system, box.state.q, box.state.v, box.forces, box.tau, tight, 300)
        p = np.asarray(tr.q[0][:, :3])
        travel = (p - p[0]) @ downhill
        assert float(np.max(tr.primal)) < 1e-9
        if mu > np.tan(theta):
            assert np.abs(travel).max() <= 1e-9, (mu, np.abs(travel).max())
            continue
        a = G0 * (np.sin(theta) - mu * np.cos(theta))                       # 0.5896 m/s²
        c, s = np.cos(theta), np.sin(theta)
        R0 = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])          # the cube's (and the plane's) rotation
        vel = np.asarray(tr.v[0])[:, 3:] @ R0.T                              # body-frame velocity to world (no turning)
        np.testing.assert_allclose(np.diff(vel @ downhill), a * 1e-3, atol=1e-9)
        lam = contact_impulses(system, tr)
        np.testing.assert_allclose(lam[:, :, 0].sum(axis=1), G0 * np.cos(theta) * 1e-3, rtol=1e-9)


def test_box_incline_runs_through_check_and_simulate(tmp_path, capsys):
    assert main(["check", "box_incline", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["coordinates"], report["constraints"], report["dof"]) == (6, 0, 6)
    c = report["collision"]                                   # the cube rests on the incline: gap 0, no penetration
    assert (c["pairs"], c["slots"], c["penetrating"]) == (1, 4, {}) and abs(c["min_gap"]) < 1e-12
    out = tmp_path / "box"
    assert main(["simulate", "box_incline", "--out", str(out), "--no-progress", "--animation", "none",
                 "--no-cache"]) == 0
    data = np.load(out / "trajectory.npz")
    theta = np.deg2rad(20.0)
    travel = (data["q/box"][-1, :3] - data["q/box"][0, :3]) @ -np.array([0.0, np.cos(theta), np.sin(theta)])
    # semi-implicit Euler from rest: travel = a dt² n(n+1)/2 after n steps
    np.testing.assert_allclose(travel, G0 * (np.sin(theta) - 0.3 * np.cos(theta)) * 1e-6 * 1000 * 1001 / 2, rtol=1e-9)
    assert data["contact/forces"].shape == (len(data["t"]), 4, 3) and data["contact/active"][1:].sum(axis=1).min() >= 3


# ----------------------------------------------------------------------------- the quadruped on the ground
MU, MASS = 0.3, 15.6           # the file's friction; trunk 8 kg + four legs of 0.5 + 1.0 + 0.4 kg
N_QUAD = 400


@pytest.fixture(scope="module")
def quadruped():
    return load_system_file(example_files()["quadruped_ground"])


def with_push(built, force, start, ramp):
    """The file's force elements with the push's (force, start, ramp) replaced (traced leaves: no recompile)."""
    forces = []
    for f in built.forces:
        if f.name == "push":
            f = dataclasses.replace(f, params=(jnp.asarray(force, float), jnp.asarray(start, float),
                                               jnp.asarray(ramp, float)))
        forces.append(f)
    return tuple(forces)


def quadruped_run(built, rollout, force, start=0.0, ramp=0.0):
    forces = with_push(built, force, start, ramp)
    tr = rollout(built.system, built.state.q, built.state.v, forces, built.tau, built.contact_settings, N_QUAD)
    assert int(tr.first_nonfinite) < 0
    return tr, contact_impulses(built.system, tr)


def test_quadruped_stands_by_friction_with_its_weight_on_its_feet(quadruped, rollout):
    tr, lam = quadruped_run(quadruped, rollout, [0.0, 0.0, 0.0])
    W = MASS * G0
    np.testing.assert_allclose(lam[:, :, 0].sum(axis=1), W * 1e-3, rtol=1e-9)
    assert np.abs(lam[:, :, 1:]).max() < 1e-9 * W * 1e-3                 # flat ground, static stance: no friction
    q = np.asarray(tr.q[0])
    assert np.abs(q - q[0]).max() < 1e-9                                   # it does not move


def test_pushed_quadruped_stands_below_the_friction_limit_and_slides_above_it(quadruped, rollout):
    """F(t) = 2 μ m g t / 0.4 s: the friction limit μ m g is reached at t = 0.2 s. Below 0.4 μ m g every foot sticks
    (strictly inside its cone) and the trunk stays within 5 mm (the legs' springs give); above 1.4 μ m g every foot
    slides on its cone's boundary and the trunk runs away sideways, the floor's friction μ Σλ_n against the push.
    (Between, the push's moment unloads the feet on its side, which slip first: at about 0.55 and 0.75 μ m g.)"""
    W = MASS * G0
    tr, lam = quadruped_run(quadruped, rollout, [0.0, 2 * MU * W, 0.0], 0.0, 0.4)
    t = np.asarray(tr.t)[1:]
    F = 2 * MU * W * t / 0.4
    ratio = np.linalg.norm(lam[:, :, 1:], axis=-1) / (MU * lam[:, :, 0])   # |λ_t| / (μ λ_n) per foot
    below, above = F < 0.4 * MU * W, F > 1.4 * MU * W
    assert below.sum() > 70 and above.sum() > 50
    assert ratio[below].max() < 0.99, ratio[below].max()
    np.testing.assert_allclose(ratio[above], 1.0, atol=1e-9)
    y = np.asarray(tr.q[0])[1:, 1]
    assert np.abs(y[below]).max() < 5e-3 and y[-1] > 2e-2, (np.abs(y[below]).max(), y[-1])
    # while sliding, the floor's friction is μ times the normal impulse, opposing the push (+y)
    world = np.einsum("nsk,nskj->nsj", lam, np.asarray(tr.frames)[1:])[above].sum(axis=1)   # Σ over the feet, world
    np.testing.assert_allclose(-world[:, 1], MU * lam[above][:, :, 0].sum(axis=1), rtol=1e-2)  # feet slide ~3° apart


@pytest.mark.slow
def test_quadruped_ground_runs_through_check_and_simulate(tmp_path, capsys):
    assert main(["check", "quadruped_ground", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["coordinates"], report["constraints"], report["dof"]) == (18, 0, 18)
    out = tmp_path / "quad"
    assert main(["simulate", "quadruped_ground", "--out", str(out), "--no-progress", "--animation", "none",
                 "--no-cache"]) == 0
    data = np.load(out / "trajectory.npz")
    forces = data["contact/forces"]
    np.testing.assert_allclose(forces[1:21, :, 2].sum(axis=1), MASS * G0, rtol=1e-9)   # world z, before the push
    assert data["q/quad"][-1, 1] > 1e-2                                                  # pushed past μ m g: it slid
