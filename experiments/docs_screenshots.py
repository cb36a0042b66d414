"""Screenshots of the documentation site as a reader sees it, taken in a headless Chromium.

    python experiments/docs_screenshots.py [--out docs/screenshots] [--site PATH]

Builds the site (``mkdocs build --strict``, MathJax served from the site itself) into a temporary folder (or
uses ``--site``), then renders three pages with their scripts run: the benchmarks page (the tables included from
experiments/out), one API page (docstring roles as links) and the algorithm notes (formulas typeset by MathJax).
Needs Chromium (``apt-get install chromium``) and the docs extra (``pip install '.[docs]'``).
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mrds_jax.viz.viewer import screenshot

ROOT = Path(__file__).resolve().parents[1]
# (page, PNG name, window size)
PAGES = (("benchmarks/index.html", "benchmarks.png", (1280, 1600)),
         ("api/system/index.html", "api_system.png", (1280, 1400)),
         ("algorithm_notes/index.html", "algorithm_notes.png", (1280, 1400)))


def build_site(site):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if run.returncode:
        sys.exit(f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}")
    return site


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--site", default=None, help="an already built site (default: build one)")
    args = ap.parse_args()
    site = Path(args.site) if args.site else build_site(Path(tempfile.mkdtemp()) / "site")
    for page, name, size in PAGES:
        png = screenshot(site / page, Path(args.out) / name, size=size, wait_ms=8000, webgl=False)
        print(f"wrote {png}")


if __name__ == "__main__":
    main()
