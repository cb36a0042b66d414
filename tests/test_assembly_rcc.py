"""Whitney's remote-centre-compliance guideline on the CKCM peg-in-hole scene (``mrds_jax.ckcm.assembly``), float64.

The prediction, from Whitney (1982) as docs/guide/assembly.md §6 writes it (A.20), before any simulation: the RCC's
lateral spring k_l, deflected by the lateral error ε once the chamfer has moved the tip onto the hole's axis, pushes
the peg sideways with F_x ≈ k_l (|ε| − c) at the compliance centre C, L_g behind the tip. About the tip that is
a = F_x/F_z and b ≈ M_C/(r F_z) − (L_g/r) a with M_C = 0 (no angular error: the angular spring is not deflected).

* C at the tip (L_g = 0): b = 0, the peg is pushed sideways with no moment; it slides in on one wall as long as
  |a| < 1/μ (the parallelogram's one-point sides, A.15): it inserts.
* C far behind the tip (L_g = 0.3 m, L_g/r = 30): the point (a, b) runs on the line b = −(L_g/r) a, steeper than
  Whitney's two-point lines for every depth of the hole (L_g/r > μ(1 + λ(D))), and leaves the parallelogram at
  |a| = λ/(L_g/r − μ(1 + λ)) ≤ λ(D)/(L_g/r − μ(1 + λ(D))): above that the peg jams in two-point contact.

F_z is bounded by the controller's insertion force plus its axial spring over the reference's whole travel, so the
a of each scenario is bounded below and above from the settings alone; the test first checks that its scenarios
lie on the predicted sides (insert at the tip, jam far behind), then that the simulated outcome (``outcome_of``:
from the motion and the contact state) is that prediction, with loop closure ≤ 1e-6 m, penetration ≤ 1e-4 m and
the contact solve converged at every stored step. One vmapped program runs the four insertions (two lateral
errors × two compliance centres); the full mode adds angular errors within the chamfer for the far centre.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import ckcm
from mrds_jax.ckcm import assembly as A
from mrds_jax.ckcm import whitney as W

P = ckcm.nominal()
DT, DURATION, DECIMATION = 2e-3, 0.4, 10
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
    """(Outcome of each (lateral, angular, centre), in one vmapped program."""
    batch = jax.tree.map(lambda *x: jnp.stack(x), *[task(*c) for c in cases])
    n_steps = int(round(DURATION / DT))

    def one(t):
        return A.outcome_of(A.insertion(P, t, DT, n_steps, DECIMATION), t)
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(one))(batch))


def predicted_ratio_bounds(lateral):
    """(min, max) of a = F_x/F_z over the insertion from the settings: F_x ≥ k_l (|ε| − c), ≤ k_l (|ε| + c);
    F_z between the insertion force and the insertion force plus the axial spring over the reference's travel."""
    peg, k = A.default_task().peg_hole, np.asarray(A.default_compliance().stiffness)
    k_lat, k_ax, c = k[3, 3], k[5, 5], float(peg.clearance)
    fz_max = FORCE + k_ax * SPEED * DURATION
    return k_lat * (abs(lateral) - c) / fz_max, k_lat * (abs(lateral) + c) / FORCE


def whitney_jam_ratio(lg):
    """The largest |a| at which the line b = −(L_g/r) a is still inside Whitney's parallelogram, over all depths of
    the hole (its largest λ, A.13): λ/(L_g/r − μ(1 + λ)), and whether the line is steeper than the two-point lines
    there (L_g/r > μ(1 + λ))."""
    peg = A.default_task().peg_hole
    r, mu = float(peg.peg_radius), float(peg.friction)
    lam = W.whitney_lambda(float(peg.hole_depth), r, mu)
    steeper = lg / r > mu * (1.0 + lam)
    return lam / (lg / r - mu * (1.0 + lam)), steeper


def check_throughout(o):
    assert np.all(o.closure <= 1e-6), o.closure
    assert np.all(o.penetration <= 1e-4), o.penetration
    assert np.all(o.converged), o.converged


LATERAL = (2e-3, -1.5e-3)     # within the chamfer (3 mm) plus the clearance


def test_rcc_at_the_tip_inserts_and_far_behind_it_jams():
    mu = float(A.default_task().peg_hole.friction)
    a_jam, steeper = whitney_jam_ratio(FAR)
    for e in LATERAL:
        a_lo, a_hi = predicted_ratio_bounds(e)
        assert a_hi < 1.0 / mu                      # at the tip: inside the one-point sides, predicted to insert
        assert steeper and a_lo > a_jam             # far behind: outside the parallelogram, predicted to jam
    cases = [(e, 0.0, c) for c in (AT_TIP, FAR) for e in LATERAL]
    o = outcomes(cases)
    check_throughout(o)
    names = np.array(A.OUTCOMES)[o.code]
    n = len(LATERAL)
    assert np.all(o.code[:n] == A.OUTCOMES.index("inserted")), names
    assert np.all(np.isin(o.code[n:], [A.OUTCOMES.index("jammed"), A.OUTCOMES.index("wedged")])), names
    assert np.all(o.depth[n:] < TARGET)


@pytest.mark.slow
def test_rcc_far_behind_the_tip_jams_with_angular_errors_too():
    """Full mode: angular errors θ₀ within the chamfer for the far centre. The compliance centre's lateral
    deflection is then ε + L_g sin θ₀ once the peg is aligned in the hole: cases where that has the sign of ε (and
    |ε + L_g sin θ₀| − c exceeds the bound of the lateral-only case) lie further outside the parallelogram."""
    a_jam, steeper = whitney_jam_ratio(FAR)
    cases = []
    for e, th in ((2e-3, np.radians(0.5)), (-1.5e-3, np.radians(-1.0)), (1e-3, np.radians(1.0))):
        deflection = abs(e + FAR * np.sin(th))
        assert steeper and predicted_ratio_bounds(deflection)[0] > a_jam
        cases.append((e, th, FAR))
    o = outcomes(cases)
    check_throughout(o)
    assert np.all(np.isin(o.code, [A.OUTCOMES.index("jammed"), A.OUTCOMES.index("wedged")])), o.code
