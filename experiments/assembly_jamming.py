"""Whitney's jamming diagram, simulated (docs/guide/assembly.md §4): the capsule peg of mrds_jax.ckcm.assembly.peg_rig in
two-point contact at θ = 0.02 rad (r = 1 cm, c = 0.2 mm, μ = 0.3: ℓ = 2.01 cm, λ = 3.35), a constant applied wrench
(F_x, F_z, M) = F_z (a, 1, b r), F_z = 10 mN, at every point of a grid over the diagram, 10 ms of the library's
contact step from rest (one compiled batch). A point is *jammed* when the peg did not move (‖Δq‖ < 1e-7), else it
moved.

Drawn: the outcomes (filled: jammed, open: moved), the boundary of the exact jamming region of this two-point
contact (A.11), Whitney's small-angle two-point lines for both tilts (A.14) and his parallelogram (A.15). Printed:
how many grid points disagree with the exact region, overall and farther than 5 % of the diagram from its boundary.

    python experiments/assembly_jamming.py [--n 21] [--out docs/assembly_jamming.png]

The test tests/test_assembly_whitney.py runs the same function (mrds_jax.ckcm.assembly.peg_rig.jamming_grid) on an 11 × 11
grid.
"""
import argparse
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mrds_jax.ckcm.assembly import whitney as W  # noqa: E402
from mrds_jax.ckcm.assembly.peg_hole import PegHole  # noqa: E402
from mrds_jax.ckcm.assembly.peg_rig import Rig, jamming_grid, rig_system  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
P = PegHole(peg_radius=0.01, peg_length=0.06, clearance=2e-4, hole_depth=0.05, friction=0.3)
THETA = 0.02


def simulate(n):
    """(a, b) grid points (n², 2), moved (n²,), the exact region's jammed (n²,), the region, λ."""
    mu, r = P.friction, P.peg_radius
    a = np.linspace(-2.0 / mu, 2.0 / mu, n)
    b = np.linspace(-6.0, 12.0, n)
    ab = np.array([(x, y) for x in a for y in b])
    moved, _ = jamming_grid(rig_system(P, Rig()), P, THETA, ab[:, 0], ab[:, 1])
    geometry = W.two_point_contact(r, P.clearance, THETA)
    expected = np.asarray(jax.vmap(lambda x, y: W.jammed(geometry, mu, r, x, y))(ab[:, 0], ab[:, 1]))
    region = W.jamming_region(geometry, mu, r)
    return ab, moved, expected, region, W.whitney_lambda(float(geometry.depth), r, mu), (np.ptp(a), np.ptp(b))


def draw(ab, moved, region, lam, path):
    mu = P.friction
    fig, ax = plt.subplots(figsize=(7.0, 7.2))
    stuck = moved < 1e-7
    ax.scatter(ab[stuck, 0], ab[stuck, 1], s=22, c="tab:red", label="simulated: jammed (peg stays)")
    ax.scatter(ab[~stuck, 0], ab[~stuck, 1], s=22, facecolors="none", edgecolors="tab:blue",
               label="simulated: moved")
    far = 100.0
    (p_lo, p_hi), (d_lo, d_hi) = region.vertices, region.directions
    boundary = np.array([p_lo + far * d_lo, p_lo, p_hi, p_hi + far * d_hi])
    ax.plot(boundary[:, 0], boundary[:, 1], "k-", lw=1.8, label="exact two-point jamming boundary (A.11), θ > 0")
    x = np.linspace(-1 / mu, 1 / mu, 2)
    ax.plot(x, W.whitney_two_point_line(x, lam, mu), "g--", lw=1.2, label="Whitney's two-point lines (A.14)")
    ax.plot(x, -W.whitney_two_point_line(-x, lam, mu), "g--", lw=1.2)
    poly = W.whitney_parallelogram(lam, mu)
    ax.fill(poly[:, 0], poly[:, 1], color="g", alpha=0.08, label="Whitney's parallelogram (A.15)")
    ax.set_xlim(ab[:, 0].min() - 0.3, ab[:, 0].max() + 0.3)
    ax.set_ylim(ab[:, 1].min() - 0.5, ab[:, 1].max() + 0.5)
    ax.set_xlabel("a = F_x / F_z  (lateral force / insertion force)")
    ax.set_ylabel("b = M / (r F_z)  (moment about the tip / (radius × insertion force))")
    ax.set_title(f"Jamming diagram: two-point contact at θ = {THETA} rad, μ = {mu}, λ = {lam:.2f}")
    ax.axhline(0, color="0.7", lw=0.6)
    ax.axvline(0, color="0.7", lw=0.6)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=21, help="grid points per axis")
    parser.add_argument("--out", default=str(ROOT / "docs" / "assembly_jamming.png"))
    args = parser.parse_args()
    start = time.perf_counter()
    ab, moved, expected, region, lam, scale = simulate(args.n)
    stuck = moved < 1e-7
    far = W.boundary_distance(region, ab, scale) > 0.05
    print(f"{len(ab)} grid points in {time.perf_counter() - start:.0f} s (compilation included); jammed "
          f"{int(stuck.sum())}, exact region {int(expected.sum())}")
    print(f"disagreements with the exact region: {int((stuck != expected).sum())} in all, "
          f"{int((far & (stuck != expected)).sum())} of the {int(far.sum())} points farther than 5 % from its "
          f"boundary")
    draw(ab, moved, region, lam, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
