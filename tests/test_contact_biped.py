"""Loops and contact in one solve (issue 34): the four-loop biped (``tests/data/biped_fourbar.xml``) given box feet
that collide, a floor and ranges on its knees and ankles, dropped 3 cm and left passive for 1 s at dt = 5e-4 s
(``experiments/biped_drop.py``, float64): loop closure ≤ 1e-6 m, penetration ≤ 1e-3 m, total energy never above its
start by more than 1e-4 of the start's potential energy, every limit respected. Full mode (about a minute)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "experiments"))


@pytest.mark.slow
def test_biped_dropped_on_its_feet_keeps_its_loops_limits_and_energy():
    import biped_drop
    r = biped_drop.run("float64", duration=1.0, dt=5e-4)
    assert r["finite"] and r["touched"]
    for key, bound in biped_drop.BOUNDS["float64"].items():
        assert r[key] <= bound, (key, r[key], bound)
    assert r["energy_lost"] > 0.01            # the landing (restitution 0) dissipates: the check is not vacuous
