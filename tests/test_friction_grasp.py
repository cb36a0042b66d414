"""The dual-arm grasp held by friction alone (``mrds_jax.examples.dual_arm_friction_grasp``: Bonaventura's Class II
contact, two sphere fingertips per hand pressing the box's side faces, no bilateral contact), float64, against
Coulomb's law: the four fingertips hold the box's weight m g only while it is at most μ · 2 · squeeze, so the grasp
holds for squeeze ≥ m g / (2 μ) = 29.4 N and slides with a = g − 2 μ squeeze / m below it; a schedule releases the
box (free fall: a = −g exactly) and regrasps it (it slides, then sticks again) without recompiling; and the slip's
derivative in the squeeze force, reverse mode = forward mode = central differences (1e-6 relative)."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

from mrds_jax.examples import dual_arm_friction_grasp
from mrds_jax.system.ncp import NCPSettings
from mrds_jax.system.timestepping import ContactSettings, contact_rollout, row_layout

G0, MU, MASS, DT = 9.81, 0.5, 3.0, 1e-3
CRITICAL = MASS * G0 / (2 * MU)        # 29.43 N
N_STEPS = 150
N_ARM = 3                              # links per arm in the quick tests (the six-link grasp: slow-marked)


def rollout_of(grasp, n_steps, settings=ContactSettings()):
    return contact_rollout(grasp.system, grasp.state.q, grasp.state.v, DT, n_steps, 1, forces=grasp.forces,
                           settings=settings)


@pytest.fixture(scope="module")
def run():
    """One compiled rollout of the grasp: the squeeze and the schedule are traced leaves of the force elements."""
    return jax.jit(lambda grasp: rollout_of(grasp, N_STEPS))


def impulses(grasp, tr):
    layout = row_layout(grasp.system)
    return np.asarray(tr.impulses)[1:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)


def slip(tr):
    """How far the box has slid down between the fingertips after each step (m, from the first step on): its drop
    relative to the mean of the contact points (each lies level with its fingertip's centre, which moves with the
    hand). The stored initial state has no contact points, so the slip is counted from the end of the first step."""
    rel = tr.q[2][1:, 2] - jnp.mean(tr.points[1:, :, 2], axis=1)
    return rel[0] - rel


def hand_sticks(lam):
    """Per step and hand (fingertip slots [0, 1] on arm 1, [2, 3] on arm 2): whether a loaded fingertip of the hand
    sticks, strictly inside its cone (|λ_t| < 0.95 μ λ_n). A lightly loaded second fingertip may slip a little
    while the first holds (the load's split between the two is set by the arms' compliance)."""
    r = np.nan_to_num(cone_ratio(lam), nan=np.inf)
    return np.stack([r[:, :2].min(axis=1) < 0.95, r[:, 2:].min(axis=1) < 0.95], axis=1)


def cone_ratio(lam):
    """|λ_t| / (μ λ_n) of the slots carrying a normal impulse (NaN elsewhere): < 1 sticking, = 1 sliding."""
    n = lam[..., 0]
    return np.where(n > 1e-9, np.linalg.norm(lam[..., 1:], axis=-1) / (MU * np.where(n > 1e-9, n, 1.0)), np.nan)


def check_holds(tr, grasp):
    lam = impulses(grasp, tr)
    assert int(tr.first_nonfinite) < 0 and float(np.max(tr.primal)) < 1e-7
    assert hand_sticks(lam).all()                                 # each hand grips, every step
    assert np.abs(np.asarray(slip(tr))).max() < 2e-4              # the box moves with the hands (they sag a little)
    # the fingertips carry the weight: over the run the upward friction impulses average m g dt
    world = np.einsum("nsk,nskj->nsj", lam, np.asarray(tr.frames)[1:])
    np.testing.assert_allclose(world[:, :, 2].sum(axis=1).mean(), MASS * G0 * DT, rtol=2e-2)


def check_slips(tr, grasp, squeeze, rtol=3e-2):
    lam = impulses(grasp, tr)
    ratio = cone_ratio(lam)[10:]
    loaded = ~np.isnan(ratio)
    assert loaded[:, :2].any(axis=1).all() and loaded[:, 2:].any(axis=1).all()   # both hands press
    np.testing.assert_allclose(ratio[loaded], 1.0, atol=1e-9)     # every loaded fingertip slides: on the cone's boundary
    # slip: the box accelerates down relative to the hands at a_k = g − μ N_k / m in step k, N_k = Σλ_n / dt the
    # fingertips' normal force (nominally 2 · squeeze: the arms' compliance takes a few per cent), summed as the
    # semi-implicit Euler step does (v_k = v_k−1 + a_k dt, x_k = x_k−1 + v_k dt), counted from the end of step 1
    normal = lam[:, :, 0].sum(axis=1) / DT
    np.testing.assert_allclose(normal.mean(), 2 * squeeze, rtol=0.1)
    v = np.cumsum((G0 - MU * normal / MASS) * DT)
    expected = np.sum(v[1:] * DT)
    np.testing.assert_allclose(float(slip(tr)[-1]), expected, rtol=rtol)
    assert float(slip(tr)[-1]) > 0.02


def test_grasp_holds_when_the_squeeze_is_enough(run):
    grasp = dual_arm_friction_grasp(N_ARM, squeeze=2 * CRITICAL)
    check_holds(run(grasp), grasp)


def test_grasp_slips_when_the_squeeze_is_not_enough(run):
    grasp = dual_arm_friction_grasp(N_ARM, squeeze=0.5 * CRITICAL)
    check_slips(run(grasp), grasp, 0.5 * CRITICAL)


@pytest.mark.slow
def test_six_link_arms_hold_and_slip():
    """The same with the six-link arms of ``dual_arm_grasp`` (18 coordinates; a longer compile)."""
    run6 = jax.jit(lambda grasp: rollout_of(grasp, N_STEPS))
    grasp = dual_arm_friction_grasp(6, squeeze=2 * CRITICAL)
    check_holds(run6(grasp), grasp)
    grasp = dual_arm_friction_grasp(6, squeeze=0.5 * CRITICAL)
    check_slips(run6(grasp), grasp, 0.5 * CRITICAL, rtol=6e-2)   # the longer arms' hands move more under the box


def test_grasp_releases_and_regrasps_on_a_schedule(run):
    """Squeeze 2× the critical one, released at t₁ and regrasped at t₂ (traced: two schedules, one program). Released,
    the box falls freely (a = −g exactly at every step without a contact impulse; the arms' springs, unloaded, swing
    the hands back against it now and then, lightly); regrasped while falling, it slides on the fingertips' cones,
    then grips again and stops sliding."""
    finals = []
    for release, regrasp in ((0.03, 0.06), (0.03, 0.07)):
        grasp = dual_arm_friction_grasp(N_ARM, squeeze=2 * CRITICAL, release=release, regrasp=regrasp)
        tr = run(grasp)
        lam = impulses(grasp, tr)
        t = np.asarray(tr.t)[1:]                      # the end time of each step
        assert hand_sticks(lam[t <= release]).all()                            # held
        window = (t > release) & (t <= regrasp)
        free = window & (np.abs(lam).max(axis=(1, 2)) == 0.0)
        assert free.sum() >= 10
        assert lam[window, :, 0].sum(axis=1).mean() < 0.1 * 2 * 2 * CRITICAL * DT  # no squeeze: light touches at most
        dvz = np.diff(np.asarray(tr.v[2])[:, 5])      # the box barely turns: its body z is the world's to 1e-3
        np.testing.assert_allclose(dvz[free], -G0 * DT, rtol=1e-3)            # free fall
        ratio = cone_ratio(lam)
        after = t > regrasp
        sliding = np.abs(np.nan_to_num(ratio[after][:5], nan=0.0) - 1.0) < 1e-9
        assert sliding.any(axis=1).all()                                       # regrasped while falling: it slides
        late = t > t[-1] - 0.02
        assert hand_sticks(lam[late]).all()                                    # ... then grips again
        s = np.asarray(slip(tr))
        assert np.ptp(s[late[0:]]) < 2e-4                                      # and the box has stopped sliding
        finals.append(float(s[-1]))
    assert finals[0] > 2e-3 and finals[1] > finals[0]                 # the longer fall slid further


TIGHT = ContactSettings(ncp=NCPSettings(stages=8, iterations=50, tolerance=1e-12))
N_GRAD = 60


def final_slip(squeeze):
    grasp = dual_arm_friction_grasp(N_ARM, squeeze=squeeze)
    return slip(rollout_of(grasp, N_GRAD, TIGHT))[-1]


@pytest.mark.slow
def test_slip_gradient_in_squeeze_force():
    """d slip / d squeeze of the slipping grasp (squeeze = 0.5 × critical): reverse mode = forward mode = central
    differences (h = 1e-6 relative), ≈ −μ t² / m (each newton of squeeze adds 2 μ N of friction on the box; the
    hands' compliance makes the normal force differ from 2 · squeeze by a few per cent)."""
    s = 0.5 * CRITICAL
    f = jax.jit(final_slip)
    rev = float(jax.jit(jax.grad(final_slip))(s))
    fwd = float(jax.jit(jax.jacfwd(final_slip))(s))
    h = 1e-6 * s
    fd = (float(f(s + h)) - float(f(s - h))) / (2 * h)
    np.testing.assert_allclose(rev, fd, rtol=1e-6)
    np.testing.assert_allclose(rev, fwd, rtol=1e-10)
    np.testing.assert_allclose(rev, -MU * DT ** 2 * N_GRAD * (N_GRAD + 1) / MASS, rtol=0.15)


def test_ready_made_file_builds_this_grasp(capsys):
    """``mrds_jax/data/systems/dual_arm_friction_grasp.toml`` is this grasp (six-link arms, squeeze 60 N, released at
    0.3 s and regrasped at 0.35 s by three stepped point forces per hand): the same modules, initial state,
    geometry, springs and squeeze at every phase; and ``mrds-jax check`` reads it (18 + 6 coordinates, no bilateral
    constraint)."""
    import json

    from mrds_jax.cli import main
    from mrds_jax.sysfile import example_files, load_system_file
    built = load_system_file(example_files()["dual_arm_friction_grasp"])
    grasp = dual_arm_friction_grasp(6, squeeze=60.0, release=0.3, regrasp=0.35)
    assert built.system.module_names == grasp.system.module_names
    for a, b in zip(jax.tree.leaves(built.system.modules), jax.tree.leaves(grasp.system.modules)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    for a, b in zip(built.state.q + built.state.v, grasp.state.q + grasp.state.v):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    ma, mb = built.system.collision, grasp.system.collision
    assert ma.pair_names() == mb.pair_names() and ma.slots == mb.slots
    for a, b in zip(jax.tree.leaves(ma), jax.tree.leaves(mb)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    springs = {f.name: f for f in built.forces if f.name.endswith("_hold")}
    for f in grasp.forces:
        if f.name in springs:
            for a, b in zip(jax.tree.leaves(springs[f.name]), jax.tree.leaves(f)):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    for t in (0.0, 0.1, 0.3, 0.32, 0.35, 0.45):
        for arm in ("arm1", "arm2"):
            file_force = sum(np.asarray(f.fn(t, built.state, f.params)) for f in built.forces
                             if f.name.startswith(f"{arm}_squeeze"))
            (py,) = [f for f in grasp.forces if f.name == f"{arm}_squeeze"]
            np.testing.assert_allclose(file_force, py.fn(t, grasp.state, py.params), atol=1e-12, err_msg=f"{arm} {t}")
    assert main(["check", "dual_arm_friction_grasp", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["coordinates"], report["constraints"], report["dof"]) == (18, 0, 18)


@pytest.mark.slow
def test_ready_made_file_simulates(tmp_path, capsys):
    """``mrds-jax simulate dual_arm_friction_grasp``: the box is held until 0.3 s, falls while released, and is
    held again at the end (its slip between the fingertips stops)."""
    from mrds_jax.cli import main
    out = tmp_path / "grasp"
    assert main(["simulate", "dual_arm_friction_grasp", "--out", str(out), "--no-progress", "--animation", "none",
                 "--no-cache"]) == 0
    data = np.load(out / "trajectory.npz")
    t, z = data["t"], data["q/box"][:, 2]
    hands = data["contact/points"][:, :, 2].mean(axis=1)
    rel = z - hands
    held, late = (t > 0.01) & (t <= 0.3), t >= 0.45
    assert np.ptp(rel[held]) < 5e-4 and rel[late].min() < rel[held].min() - 2e-3 and np.ptp(rel[late]) < 5e-4
