"""Screenshots for the documentation, taken in a headless Chromium.

    python experiments/docs_screenshots.py [--out docs/screenshots] [--site PATH] [--only site|contact]

* the site as a reader sees it: builds it (``mkdocs build --strict``, MathJax served from the site itself) into a
  temporary folder (or uses ``--site``), then renders three pages with their scripts run: the benchmarks page
  (the tables included from experiments/out), one API page (docstring roles as links) and the algorithm notes
  (formulas typeset by MathJax);
* the three ready-made contact scenes in the browser viewer (``contact_<name>.png``): each run as shipped by
  ``mrds-jax simulate NAME --viewer``, its page held at one frame, checked as tests/test_viewer.py checks it (the
  contact points and force arrows drawn are the slots that touch at that frame; planes at their pose) before the
  screenshot is kept.

Needs Chromium (``apt-get install chromium``) and the docs extra (``pip install '.[docs]'``) for the site (the
viewer needs no package beyond the plain install).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from mrds_jax.viz.viewer import render_viewer, screenshot

ROOT = Path(__file__).resolve().parents[1]
# (page, PNG name, window size)
PAGES = (("benchmarks/index.html", "benchmarks.png", (1280, 1600)),
         ("api/system/index.html", "api_system.png", (1280, 1400)),
         ("algorithm_notes/index.html", "algorithm_notes.png", (1280, 1400)))
# (ready-made contact scene, the frame shown: 20 stored states per simulated second)
CONTACT_SCENES = (("box_incline", 50),                     # t = 0.5 s: sliding down the 20° incline on 4 corners
                  ("dual_arm_friction_grasp", 20),         # t = 0.2 s: held by friction
                  ("quadruped_ground", 90))                # t = 0.9 s: pushed past the friction limit, sliding


def build_site(site):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if run.returncode:
        sys.exit(f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}")
    return site


def contact_screenshot(name, frame, out, work):
    """Run the ready-made scene ``name`` with ``--viewer`` into ``work``, hold its page at ``frame`` in headless
    Chromium and keep the screenshot as ``out/contact_<name>.png`` once what it drew is what the run says."""
    from mrds_jax.cli import main
    folder = Path(work) / name
    if main(["simulate", name, "--viewer", "--out", str(folder), "--animation", "none", "--no-progress"]):
        sys.exit(f"mrds-jax simulate {name} failed")
    png, drawn = render_viewer(folder / "viewer.html", Path(out) / f"contact_{name}.png", frame=frame, size=(800, 600))
    active = np.load(folder / "trajectory.npz")["contact/active"][frame]
    assert json.loads((folder / "trajectory.json").read_text())["contacts"] == [], name     # markers = slots
    if drawn["contacts"] != np.flatnonzero(active).tolist() or drawn["others"] or drawn["grid"]:
        sys.exit(f"{name}: the page drew {drawn['contacts']} for the touching slots {np.flatnonzero(active)}")
    planes = {g: np.round(d["pose"][:3, 2], 4).tolist() for g, d in drawn["geoms"].items() if d["box"][1][2] < 1e-2}
    print(f"wrote {png}: frame {frame}, {len(drawn['contacts'])} of {active.size} slots touching, "
          f"geoms {sorted(drawn['geoms'])}, plane normals {planes}")
    return png


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--site", default=None, help="an already built site (default: build one)")
    ap.add_argument("--only", choices=("site", "contact"), default=None, help="only the site's pages or the scenes")
    args = ap.parse_args()
    if args.only != "contact":
        site = Path(args.site) if args.site else build_site(Path(tempfile.mkdtemp()) / "site")
        for page, name, size in PAGES:
            png = screenshot(site / page, Path(args.out) / name, size=size, wait_ms=8000, webgl=False)
            print(f"wrote {png}")
    if args.only != "site":
        import jax
        jax.config.update("jax_enable_x64", True)
        work = tempfile.mkdtemp()
        for name, frame in CONTACT_SCENES:
            contact_screenshot(name, frame, args.out, work)


if __name__ == "__main__":
    main()
