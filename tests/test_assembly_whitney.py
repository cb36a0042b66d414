"""A rigid peg in a hole with Coulomb friction against Whitney's quasi-static analysis (D. E. Whitney, ASME J. Dyn.
Sys. Meas. Control 104 (1982) 65-77; derivation in docs/guide/assembly.md, formulas in mrds_jax.ckcm.assembly.whitney),
float64, hard contact (the library's NCP step at a tight tolerance).

The rig (mrds_jax.ckcm.assembly.peg_rig): the peg (mrds_jax.ckcm.assembly.peg_hole: a capsule) on a planar chain x, z, θ (two
massless slides and a revolute about the tip, so the generalised forces are the applied F_x, world F_z and the
moment about the tip) in a slot of two box walls. A *support* applies Q = F₀ + t F₁ − K (q − q_ref) − D (v − v_ref):
a force-controlled lateral axis, a velocity-controlled insertion axis (a damper toward the insertion speed) and a
rotational spring — a remote-centre compliance with its centre at the tip. Two compiled batches: the four pushes
(0.2 s) and the jamming grid (40 ms).

* Quasi-static force balance: pushed slowly in one-point and in two-point contact, the contact forces (per wall,
  from the trajectory's contact_forces) and the insertion force equal the analytic sliding balance (A.7, A.8) of
  the support's measured lateral force and moment to 1e-3 relative.
* The jamming diagram: a grid of constant (F_x, M)/F_z on a two-point contact; the peg stays (jams) exactly where
  the analytic two-point jamming region (A.9-A.11) says, at every grid point farther than 5 % of the diagram's
  size from its boundary; inside Whitney's parallelogram it moves in.
* Wedging: above the wedging angle (a two-point contact shallower than the wedging depth) the peg stays while the
  insertion force is raised under a moment into the tilt; below it the same loads move it in once the load leaves
  the jamming region, at the force the region's boundary gives.
* The exact region tends to Whitney's small-angle lines (A.14) as θ → 0; the peg/hole geometry is exact (gaps of
  a two-point contact and of the chamfer), traced (a batch of PegHoles in one compiled program) and checked
  (named errors before anything compiles).
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

from mrds_jax import collision as C, system as S
from mrds_jax.ckcm.assembly import whitney as W
from mrds_jax.ckcm.assembly.peg_hole import (HoleLayout, PegHole, PegHoleError, hole_geoms, peg_geom, peg_hole_geoms,
                                    with_peg_hole)
from mrds_jax.ckcm.assembly.peg_rig import (Rig, jamming_grid, peg_module, rig_rollouts, rig_system, support, support_law,
                                   two_point_configuration, wall_forces)
from mrds_jax.system.ncp import NCPSettings
from mrds_jax.system.timestepping import ContactSettings, contact_gaps, slot_kinematics

jax.config.update("jax_enable_x64", True)

# the analytic comparisons ask for a tight solve (tests/test_contact_step.py); sliding contacts need more than the
# default 8 × 50 ADMM iterations to reach it
EXACT = ContactSettings(ncp=NCPSettings(tolerance=1e-10, stages=20, iterations=100))
DT, N_STEPS, DECIMATION = 1e-3, 200, 10
RIG = Rig(mass=0.01, com=0.03, inertia=3e-6)
P = PegHole(peg_radius=0.01, peg_length=0.06, clearance=2e-4, hole_depth=0.15, friction=0.3)   # deep: the free
# peg of the wedging test does not reach the floor in 0.2 s
R_PEG, CLEARANCE, MU = P.peg_radius, P.clearance, P.friction

THETA_JAM = 0.02                       # the jamming grid's two-point contact (ℓ ≈ 2c/θ = 2 cm, λ ≈ 3.35)
GRID_A = np.linspace(-2.0 / MU, 2.0 / MU, 11)
GRID_B = np.linspace(-6.0, 12.0, 11)
THETA_WEDGE, THETA_FREE = 0.1, 0.03    # above / below the wedging angle (0.085 for this peg and hole)
M_WEDGE, F_RATE = 0.01, 5.0            # the wedging scenes' moment into the tilt (N m) and insertion-force rate (N/s)

PUSHES = {
    # tip on the wall x = +R, 5 mm in, tilted away from the far edge; F_x = 0.2 N into the wall, the insertion axis
    # a damper toward −22 mm/s, a rotational spring about the tip
    "one-point": ((CLEARANCE, -0.005, 0.03),
                  support(force=(0.2, 0.0, 0.0), stiffness=(0.0, 0.0, 0.1), reference=(0.0, 0.0, 0.036),
                          damping=(0.0, 5.0, 2e-3), velocity=(0.0, -0.022, 0.0))),
    # two-point contact at θ = 0.02; the rotational spring presses into the tilt
    "two-point": (0.02, support(force=(0.01, 0.0, 0.0), stiffness=(0.0, 0.0, 0.1), reference=(0.0, 0.0, 0.05),
                                damping=(0.0, 5.0, 2e-3), velocity=(0.0, -0.02, 0.0))),
    # two-point contacts above / below the wedging angle: a moment into the tilt, F_z raised from 0 to 1 N, dampers
    # on the insertion axis and the tilt (no force at rest; once moving, the peg goes in slowly)
    "wedge": (THETA_WEDGE, support(force=(0.0, 0.0, M_WEDGE), ramp=(0.0, -F_RATE, 0.0), damping=(0.0, 5.0, 2e-3))),
    "free": (THETA_FREE, support(force=(0.0, 0.0, M_WEDGE), ramp=(0.0, -F_RATE, 0.0), damping=(0.0, 5.0, 2e-3))),
}


@pytest.fixture(scope="module")
def system():
    return rig_system(P, RIG)


@pytest.fixture(scope="module")
def pushes(system):
    """The four pushes of 0.2 s, every 10th state stored, in one compiled batch: {name: (trajectory, support)}."""
    q0 = jnp.stack([jnp.asarray(q, float) if isinstance(q, tuple) else two_point_configuration(P, q)
                    for q, _ in PUSHES.values()])
    supports = jax.tree.map(lambda *x: jnp.stack(x), *(s for _, s in PUSHES.values()))
    tr = rig_rollouts(system, q0, supports, DT, N_STEPS, DECIMATION, EXACT)
    return {name: (at(tr, k), at(supports, k)) for k, name in enumerate(PUSHES)}


def at(tree, k):
    return jax.tree.map(lambda x: x[k], tree)


def support_wrench(tr, s, k):
    """(F_x, F_z,world, M) the support applies at stored state k (the law at that state and time)."""
    return np.asarray(support_law(float(tr.t[k]), np.asarray(tr.q[0][k]), np.asarray(tr.v[0][k]),
                                  jax.tree.map(np.asarray, s)))


def check_solve(tr):
    assert bool(np.all(np.asarray(tr.converged))), "a contact solve did not converge"
    assert not bool(np.any(np.asarray(tr.overflow)))
    assert float(np.min(np.asarray(tr.gaps))) >= -1e-4, "penetration above 0.1 mm"


def relative(x, y):
    return np.abs(np.asarray(x) - np.asarray(y)).max() / np.abs(np.asarray(y)).max()


# ----------------------------------------------------------------------------- quasi-static force balance
def test_one_point_contact_force_balance_is_whitneys(system, pushes):
    """The tip sliding down the wall: f = F_x, friction μ f up the wall, insertion force F_z = μ F_x and the moment
    the support holds M = −r μ F_x (A.7), from the support's measured lateral force, at the last five stored states
    (the transients are over: the rotational spring's ζω ≈ 90/s, the damper's D/m = 500/s)."""
    tr, s = pushes["one-point"]
    check_solve(tr)
    F = wall_forces(system, tr)
    z = np.asarray(tr.q[0][:, 1])
    assert np.all(np.diff(z[-6:]) < -1e-5), "the peg slides in"
    for i in range(len(tr.t) - 5, len(tr.t)):
        w = support_wrench(tr, s, i - 1)                  # the law at the start of the step that ended at i
        balance, moment = W.one_point_sliding(W.wall_contact(R_PEG), MU, w[0])
        f = float(balance.normal[0])
        assert np.abs(F[i, 0]).max() == 0.0, "one-point: the mouth edge does not touch"
        assert relative(F[i, 1], [-f, 0.0, MU * f]) < 1e-3, (F[i, 1], f)
        assert relative(-w[1], balance.insertion) < 1e-3
        assert relative(w[2], moment) < 1e-3


def test_two_point_contact_force_balance_is_whitneys(system, pushes):
    """Sliding in two-point contact: from the support's measured F_x and M, the analytic balance (A.8) gives the
    normal forces of the mouth edge and the wall, their friction (μ times each, out of the hole) and the insertion
    force F_z; the simulated contact forces and the damper's insertion force agree to 1e-3 relative."""
    tr, s = pushes["two-point"]
    check_solve(tr)
    F = wall_forces(system, tr)
    q = np.asarray(tr.q[0])
    assert np.all(np.diff(q[-6:, 1]) < -1e-6), "the peg slides in"
    for i in range(len(tr.t) - 5, len(tr.t)):
        theta = float(q[i - 1, 2])
        geometry = W.two_point_contact(R_PEG, CLEARANCE, theta)
        np.testing.assert_allclose(q[i - 1, :2], np.asarray(geometry.tip), atol=1e-7)  # still in two-point contact
        w = support_wrench(tr, s, i - 1)
        balance = W.two_point_sliding(geometry, MU, w[0], w[2])
        for j, contact in enumerate((geometry.edge, geometry.wall)):
            f = float(balance.normal[j])
            expected = f * (np.asarray(contact.normal) + MU * np.asarray(contact.tangent))
            assert relative(F[i, j, [0, 2]], expected) < 1e-3, (j, F[i, j], expected)
            assert abs(F[i, j, 1]) < 1e-9 * f
        assert relative(-w[1], balance.insertion) < 1e-3, (-w[1], float(balance.insertion))


# ----------------------------------------------------------------------------- jamming diagram
@pytest.mark.slow      # one 121-run batch, ~60 s on two cores: the full mode (the default run keeps the pushes)
def test_jamming_diagram_outcome_matches_the_analytic_region(system):
    """Constant (F_x, M)/F_z (F_z = 10 mN) on an 11 × 11 grid from a two-point contact at θ = 0.02, 10 ms, one
    compiled batch (the solver's default tolerance, at most 4 × 50 iterations a step: a jammed peg's step is solved
    by the warm start's polish, a moving one need not be exact to move): the peg stays (‖Δq‖ < 1e-7; the jammed creep ≤ 3e-9) exactly where
    −w lies in the two contacts' friction cones (A.9), at every point farther than 5 % of the diagram's size from the
    region's boundary (A.10-A.11); elsewhere it moves by more than 3e-6; inside Whitney's parallelogram (A.15) it
    moves in. The jammed runs' solves converged at every step; no run penetrates more than 0.1 mm."""
    ab = np.array([(a, b) for a in GRID_A for b in GRID_B])
    moved, tr = jamming_grid(system, P, THETA_JAM, ab[:, 0], ab[:, 1])
    geometry = W.two_point_contact(R_PEG, CLEARANCE, THETA_JAM)
    region = W.jamming_region(geometry, MU, R_PEG)
    assert not region.wedged
    expected = np.asarray(jax.vmap(lambda a, b: W.jammed(geometry, MU, R_PEG, a, b))(ab[:, 0], ab[:, 1]))
    far = W.boundary_distance(region, ab, (np.ptp(GRID_A), np.ptp(GRID_B))) > 0.05
    assert far.sum() > 90 and expected[far].sum() > 20 and (~expected[far]).sum() > 20
    stuck = moved < 1e-7
    wrong = far & (stuck != expected)
    assert not wrong.any(), [(tuple(ab[i]), bool(stuck[i]), bool(expected[i])) for i in np.flatnonzero(wrong)]
    assert np.all(moved[far & ~expected] > 3e-6) and np.all(moved[far & expected] < 3e-9)
    lam = W.whitney_lambda(float(geometry.depth), R_PEG, MU)
    inside = far & (np.abs(ab[:, 0]) < 1 / MU) & (ab[:, 1] < W.whitney_two_point_line(ab[:, 0], lam, MU)) & \
        (ab[:, 1] > -W.whitney_two_point_line(-ab[:, 0], lam, MU))
    assert inside.sum() > 5
    z = np.asarray(tr.q[0][:, :, 1])
    assert np.all(z[inside, -1] < z[inside, 0] - 1e-6), "moves in"
    assert bool(np.all(np.asarray(tr.converged)[expected])) and not bool(np.any(np.asarray(tr.overflow)))
    assert float(np.min(np.asarray(tr.gaps))) >= -1e-4


def test_exact_region_tends_to_whitneys_small_angle_lines():
    """The two-point region of the capsule peg (exact in θ) against Whitney's small-angle diagram (A.14): the
    vertices (−1/μ, 1 + 2λ) and (1/μ, −1) and the directions of the rays from them, (−1, 2λμ) and (1, 0), agree to
    O(θ/μ + c/r) and converge as θ and c/r shrink; the region is wedged exactly where (A.16) says."""
    errors = []
    for theta, c in ((0.02, 2e-4), (0.002, 2e-5), (0.0002, 2e-6)):
        geometry = W.two_point_contact(R_PEG, c, theta)
        region = W.jamming_region(geometry, MU, R_PEG)
        lam = W.whitney_lambda(float(geometry.depth), R_PEG, MU)
        p_wall, p_edge = region.vertices
        d = np.array([-1.0, 2 * lam * MU]) / np.hypot(1.0, 2 * lam * MU)
        err = max(relative(p_edge, [-1 / MU, 1 + 2 * lam]), relative(p_wall, [1 / MU, -1.0]),
                  np.abs(region.directions[1] - d).max(), np.abs(region.directions[0] - [1.0, 0.0]).max())
        assert err < 3 * (theta / MU + c / R_PEG), (theta, err)
        np.testing.assert_allclose(W.whitney_two_point_line(np.array([-1 / MU, 1 / MU]), lam, MU),
                                   [1 + 2 * lam, -1.0], rtol=1e-12)
        errors.append(err)
    assert errors[0] > errors[1] > errors[2]
    theta_w = W.wedging_angle(R_PEG, CLEARANCE, MU)
    for theta in (0.999 * theta_w, 1.001 * theta_w):
        geometry = W.two_point_contact(R_PEG, CLEARANCE, theta)
        assert W.jamming_region(geometry, MU, R_PEG).wedged == bool(W.wedged(geometry, MU)) == (theta > theta_w)
    # Whitney's small-angle wedging angle c/(R μ), to O(θ/μ)
    assert abs(theta_w / W.whitney_wedging_angle(R_PEG, CLEARANCE, MU) - 1) < 2 * theta_w / MU


# ----------------------------------------------------------------------------- wedging
def test_wedged_peg_stays_as_the_insertion_force_rises_and_a_deeper_one_slides(system, pushes):
    """A moment M = 0.01 N m presses into the tilt while F_z rises at 5 N/s to 1 N. At θ = 0.1 > θ_w (ℓ = 4.5 mm, less
    than the wedging depth) the contact cones see each other (A.16), every load jams (A.11), the peg has no sliding
    solution (A.19) under these loads, and it does not move (‖Δq‖ < 1e-9). At θ = 0.03 < θ_w (ℓ = 1.3 cm) the same
    loads jam it until (0, M/(r F_z)) crosses the region's boundary (A.11), F_z* = 0.464 N, and it moves in from
    there (first motion within two stored states, 20 ms)."""
    theta_w = W.wedging_angle(R_PEG, CLEARANCE, MU)
    assert THETA_FREE < theta_w < THETA_WEDGE
    wedge, free = (W.two_point_contact(R_PEG, CLEARANCE, th) for th in (THETA_WEDGE, THETA_FREE))
    assert float(wedge.depth) < W.whitney_wedging_depth(R_PEG, CLEARANCE, MU) < float(free.depth)
    assert W.jamming_region(wedge, MU, R_PEG).wedged and not W.jamming_region(free, MU, R_PEG).wedged
    tr_w, _ = pushes["wedge"]
    tr_f, _ = pushes["free"]
    check_solve(tr_w)
    check_solve(tr_f)
    F_z = F_RATE * np.asarray(tr_w.t)
    slides = [float(W.sliding_from_rest(wedge, MU, THETA_WEDGE, RIG.mass, RIG.com, RIG.inertia,
                                        np.array([0.0, -f, M_WEDGE]))[1]) for f in F_z]
    assert max(slides) < 0                                   # no solution but the static one
    q_w = np.asarray(tr_w.q[0])
    assert np.abs(q_w - q_w[0]).max() < 1e-9
    F = wall_forces(system, tr_w)
    np.testing.assert_allclose(F[-1].sum(axis=0)[2], F_RATE * (float(tr_w.t[-1]) - DT), rtol=1e-6)  # the walls carry F_z
    # the unwedged peg: jammed while the point is inside the region, moving once it leaves
    region = W.jamming_region(free, MU, R_PEG)
    lo, hi = 0.0, 10.0                                       # b = 0 moves, b = 10 jams: bisect (A.9) along a = 0
    for _ in range(60):
        lo, hi = (lo, 0.5 * (lo + hi)) if bool(W.jammed(free, MU, R_PEG, 0.0, 0.5 * (lo + hi))) else (0.5 * (lo + hi), hi)
    b_star = hi
    assert W.boundary_distance(region, [[0.0, b_star]])[0] < 1e-3
    t_star = M_WEDGE / (R_PEG * b_star) / F_RATE
    q_f = np.asarray(tr_f.q[0])
    moving = np.abs(q_f - q_f[0]).max(axis=1) > 1e-9
    t_first = float(tr_f.t[np.argmax(moving)])
    assert t_star <= t_first <= t_star + 2 * DT * DECIMATION, (t_star, t_first)
    assert q_f[-1, 1] < q_f[0, 1] - 1e-4


# ----------------------------------------------------------------------------- geometry
def test_two_point_contact_geometry_touches_both_walls(system):
    """At the analytic two-point pose (A.3-A.5) both walls are at gap 0 (to rounding) and the floor is far."""
    for theta in (0.02, 0.1):
        gaps = contact_gaps(system, S.SystemState((two_point_configuration(P, theta),), (jnp.zeros(3),)))
        assert abs(gaps["peg/hole_px"]) < 1e-12 and abs(gaps["peg/hole_mx"]) < 1e-12, gaps
        assert gaps["peg/hole_floor"] > 0.01


def test_chamfer_gap_is_the_distance_to_the_chamfer_plane():
    """A 45° chamfer of width 3 mm: the end sphere 1 mm off the chamfer's middle has gap 1 mm to the chamfer, and the
    boxes around it are farther (slot and square)."""
    w, g = 3e-3, 1e-3
    p = P._replace(chamfer=w)
    R = R_PEG + CLEARANCE
    x0, z0 = R + w / 2 - (R_PEG + g) / np.sqrt(2), -w / 2 + (R_PEG + g) / np.sqrt(2)
    for shape in ("slot", "square"):
        sysc = S.build_system({"peg": peg_module()}, [],
                              collision=peg_hole_geoms(p, "peg", "tip", HoleLayout(shape=shape, chamfer=True)))
        gaps = contact_gaps(sysc, S.SystemState((jnp.array([x0, z0, 0.0]),), (jnp.zeros(3),)))
        assert abs(gaps["peg/hole_px_chamfer"] - g) < 1e-12
        assert min(v for k, v in gaps.items() if k != "peg/hole_px_chamfer") > g


def test_peg_hole_numbers_are_traced_leaves(system):
    """One compiled program, a batch of PegHoles (radius, clearance, friction): the wall gaps of a centred upright
    peg are the clearances, and the peg–hole pairs carry each μ."""
    batch = P._replace(peg_radius=jnp.array([0.01, 0.008]), clearance=jnp.array([1e-4, 5e-4]),
                       friction=jnp.array([0.2, 0.7]))
    batch = PegHole(*(jnp.broadcast_to(jnp.asarray(x, float), (2,)) for x in batch))

    def probe(p):
        s2 = with_peg_hole(system, p)
        sk = slot_kinematics(s2, S.SystemState((jnp.array([0.0, -0.01, 0.0]),), (jnp.zeros(3),)))
        return sk.gap, sk.friction

    gap, friction = jax.jit(jax.vmap(probe))(batch)
    names = system.collision.pair_names()
    pair = np.asarray(system.collision.slot_pair)
    for k in range(2):
        for wall in ("hole_px", "hole_mx"):
            np.testing.assert_allclose(np.asarray(gap[k])[pair == names.index(("peg", wall))].min(),
                                       batch.clearance[k], atol=1e-12)
        np.testing.assert_allclose(friction[k], batch.friction[k])


@pytest.mark.parametrize("change, message", [
    (dict(clearance=0.0), "interference fit"), (dict(clearance=-1e-4), "wider than the hole's mouth"),
    (dict(peg_radius=float("nan")), "peg_radius must be finite"), (dict(hole_depth=0.0), "hole_depth must be > 0"),
    (dict(friction=-0.1), "friction must be ≥ 0"), (dict(chamfer=1e-3), "HoleLayout.chamfer is False"),
    (dict(peg_length=float("inf")), "peg_length must be finite")])
def test_bad_peg_hole_is_named_before_anything_compiles(change, message):
    with pytest.raises(PegHoleError, match=message):
        peg_hole_geoms(P._replace(**change), "peg", "tip")


def test_bad_layout_and_chamfer_are_named():
    with pytest.raises(PegHoleError, match="shape must be one of"):
        hole_geoms(P, HoleLayout(shape="round"))
    with pytest.raises(PegHoleError, match="needs PegHole.chamfer > 0"):
        hole_geoms(P, HoleLayout(chamfer=True))
    with pytest.raises(PegHoleError, match="walls at least 1.5 w thick"):
        hole_geoms(P._replace(chamfer=0.02), HoleLayout(chamfer=True))
    with pytest.raises(PegHoleError, match="is a box"):
        with_peg_hole(S.build_system({"peg": peg_module()}, [],
                                     collision=[C.box("peg", "peg", "tip", (0.01, 0.01, 0.01))] + hole_geoms(P)), P)
    assert peg_geom(P, "peg", "tip").kind == "capsule"


def test_with_peg_hole_keeps_the_pegs_tip_and_axis():
    """A peg hanging from its frame (tip 1 cm below the origin, axis −z): a new PegHole changes its length and
    radius, not where its tip is or which way it points."""
    down = np.diag([1.0, -1.0, -1.0])
    built = S.build_system({"peg": peg_module()}, [],
                           collision=peg_hole_geoms(P, "peg", "tip", tip=(0.0, 0.0, -0.01), tip_rotation=down))
    peg = with_peg_hole(built, P._replace(peg_length=0.04, peg_radius=0.008)).collision.geoms[0]
    np.testing.assert_allclose(peg.position, [0.0, 0.0, -0.01 - 0.02], atol=1e-15)
    np.testing.assert_allclose(peg.rotation, down, atol=1e-15)
    np.testing.assert_allclose(peg.size[:2], [0.008, 0.02], atol=1e-15)
    with pytest.raises(PegHoleError, match="tip must be a finite"):
        peg_geom(P, "peg", "tip", tip=(0.0, np.nan, 0.0))
