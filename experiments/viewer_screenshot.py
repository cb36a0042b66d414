"""A screenshot of the browser viewer playing the Stewart platform, taken in a headless Chromium.

    python experiments/viewer_screenshot.py [--out docs/viewer_stewart.png] [--html PATH]

Simulates the ready-made ``stewart`` system file (mrds_jax/data/systems/stewart.toml: the CKCM platform from
the package's builder, legs pushing against gravity), builds the stick scene with the constraint forces (red
arrows at the six ball joints), writes the self-contained viewer page and renders it in
``chromium-headless-shell`` (apt-get install chromium-headless-shell). The page plays the motion; the
screenshot is taken after the page's first seconds of virtual time.
"""
import argparse
import tempfile
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

from mrds_jax.sysfile import example_files, load_system_file, run_simulation  # noqa: E402
from mrds_jax.viz import scene  # noqa: E402
from mrds_jax.viz.viewer import screenshot, viewer_html  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "viewer_stewart.png"))
    ap.add_argument("--html", default=None, help="also keep the viewer page here (about 1 MB)")
    args = ap.parse_args()
    built = load_system_file(example_files()["stewart"])
    traj = run_simulation(built, progress=False)
    sc = scene(built.system, traj, forces=True, tau=built.tau)
    html = Path(args.html) if args.html else Path(tempfile.mkdtemp()) / "viewer_stewart.html"
    viewer_html(sc, html, title="Stewart platform (mrds_jax)")
    png = screenshot(html, args.out, size=(900, 700))
    print(f"wrote {png} (viewer page {html}); max constraint force {abs(sc.forces).max():.1f} N")


if __name__ == "__main__":
    main()
