"""Whitney's remote-centre-compliance guideline on the CKCM peg-in-hole scene (``mrds_jax.ckcm.assembly``), float64.

The prediction, from Whitney (1982) as docs/guide/assembly.md writes it (A.3, A.13-A.15, A.20), made from the
settings before any simulation. A lateral error ε and an angular error θ₀ (the peg's tilt about its tip) leave the
compliance centre C, L_g behind the tip, at ε + L_g sin θ₀ from the hole's axis once the chamfer has brought the tip
onto the axis. The RCC's angular stiffness (200 N m/rad) is far softer, per unit of tip motion, than its lateral one
(2e4 N/m) once L_g is large (k_θ/L_g² ≪ k_l): the peg then turns about C and enters tilted by θ = θ₀ + ε/L_g; with
C at the tip it keeps θ = θ₀ and the lateral spring pushes it sideways with F_x ≤ k_l (|ε| + c) and no moment.

* Two-point contact begins where the hole's clearance no longer admits the tilt: at the depth ℓ(θ) of (A.3) below
  the mouth edge (here the chamfer's lower edge, w below the mouth).
* C far behind the tip (L_g = 0.3 m, L_g/r = 30 > μ(1 + λ) at every depth of the hole): in two-point contact the
  point (a, b) = (F_x, M/r)/F_z runs on b = −(L_g/r) a + M_C/(r F_z), steeper than Whitney's two-point lines (A.20):
  the peg jams once two-point contact is reached above the target depth.
* C at the tip (L_g = 0): b carries no part of the lateral force; the peg stays inside the parallelogram (A.15)
  while |a| < λ/(μ(1 + λ)) at the depth of two-point contact (and < 1/μ in one-point contact): it inserts. F_z is
  at least the commanded insertion force, so |a| ≤ k_l (|ε| + c)/F_ins bounds it from the settings.

The test checks that its scenarios lie on the predicted sides, then that the simulated outcome (``outcome_of``:
from the motion and the contact state) is the prediction: inserted with C at the tip, jammed or wedged (stuck in
two-point contact, short of the target) with C far behind, with loop closure ≤ 1e-6 m, penetration ≤ 1e-4 m and the
contact solve converged at every stored step; the jammed peg stops within 1 mm of the depth where (A.3) puts the
two-point contact of the tilt θ₀ + ε/L_g. One vmapped program runs the four insertions (two error pairs × two
compliance centres); the full mode adds two more error pairs. Cost (2026-11-27, the shared 2-core CPU): the default
test 253 s at load 10, mostly compiling the vmapped insertion; the full-mode one 136 s at load 4.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import ckcm
from mrds_jax.ckcm import assembly as A
from mrds_jax.ckcm.assembly import whitney as W

P = ckcm.nominal()
DT, DURATION, DECIMATION = 2e-3, 0.6, 10
STANDOFF, TARGET, SPEED, FORCE = 0.011, 0.025, 0.1, 30.0
AT_TIP, FAR = 0.0, 0.3


def task(lateral, angular, centre):
    base = A.default_task()
    return base._replace(
        compliance=base.compliance._replace(centre=jnp.asarray(centre), insertion_speed=jnp.asarray(SPEED),
                                            insertion_force=jnp.asarray(FORCE)),
        misalignment=A.Misalignment(jnp.asarray(lateral), jnp.asarray(angular), jnp.asarray(STANDOFF)),
        target_depth=jnp.asarray(TARGET))


def outcomes(cases):
    """The Outcome of each (lateral, angular, centre), in one vmapped program."""
    batch = jax.tree.map(lambda *x: jnp.stack(x), *[task(*c) for c in cases])
    n_steps = int(round(DURATION / DT))

    def one(t):
        return A.outcome_of(A.insertion(P, t, DT, n_steps, DECIMATION), t)
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(one))(batch))


def peg():
    return A.default_task().peg_hole


def two_point_tip_depth(theta):
    """The tip's depth below the mouth where a peg tilted by |θ| first touches both walls (A.3, below the chamfer's
    lower edge)."""
    p = peg()
    return float(W.two_point_contact(float(p.peg_radius), float(p.clearance), abs(theta)).depth) + float(p.chamfer)


def lateral_ratio_bound(lateral):
    """Largest |a| = |F_x|/F_z with C at the tip: F_x ≤ k_l (|ε| + c), F_z ≥ the insertion force."""
    k = np.asarray(A.default_compliance().stiffness)
    return k[3, 3] * (abs(lateral) + float(peg().clearance)) / FORCE


def predicted(lateral, angular, centre):
    """"inserts" or "jams" from Whitney's analysis (module docstring), or None where it does not decide."""
    p = peg()
    r, mu = float(p.peg_radius), float(p.friction)
    if centre == AT_TIP:
        depth = two_point_tip_depth(angular)
        lam = W.whitney_lambda(depth - float(p.chamfer), r, mu)
        a = lateral_ratio_bound(lateral)
        inside = a < 1.0 / mu and (depth > TARGET or a < lam / (mu * (1.0 + lam)))
        return "inserts" if inside else None
    theta = angular + lateral / centre
    lam_max = W.whitney_lambda(float(p.hole_depth), r, mu)
    steeper = centre / r > mu * (1.0 + lam_max)
    return "jams" if steeper and two_point_tip_depth(theta) < TARGET else None


def check_throughout(o):
    assert np.all(o.closure <= 1e-6), o.closure
    assert np.all(o.penetration <= 1e-4), o.penetration
    assert np.all(o.converged), o.converged


def check_guideline(errors):
    cases = [(e, th, c) for c in (AT_TIP, FAR) for e, th in errors]
    for e, th, c in cases:
        assert predicted(e, th, c) == ("inserts" if c == AT_TIP else "jams"), (e, th, c)
    o = outcomes(cases)
    check_throughout(o)
    names = list(zip(np.array(A.OUTCOMES)[o.code], np.round(1e3 * o.depth, 2)))
    n = len(errors)
    assert np.all(o.code[:n] == A.OUTCOMES.index("inserted")), names
    assert np.all(np.isin(o.code[n:], [A.OUTCOMES.index("jammed"), A.OUTCOMES.index("wedged")])), names
    assert np.all(o.depth[n:] < TARGET)
    # and it stops where Whitney's geometry puts the two-point contact of the tilt θ₀ + ε/L_g (A.3), within 1 mm
    jam_depth = [two_point_tip_depth(th + e / FAR) for e, th in errors]
    np.testing.assert_allclose(o.depth[n:], jam_depth, atol=1e-3)


def test_rcc_at_the_tip_inserts_and_far_behind_it_jams():
    check_guideline([(2e-3, np.radians(1.0)), (-1.5e-3, np.radians(-1.0))])


@pytest.mark.slow
def test_rcc_guideline_over_more_errors():
    check_guideline([(1e-3, np.radians(1.5)), (-2.5e-3, np.radians(-0.75))])
