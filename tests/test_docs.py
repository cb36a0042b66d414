"""The documentation site builds with warnings as errors (``mkdocs build --strict``): every page, the API
reference generated from the docstrings (mkdocstrings), the benchmark tables included from experiments/out;
the README links it."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_strict(tmp_path):
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    site = tmp_path / "site"
    for page in ("index.html", "getting_started/index.html", "system_files/index.html", "api/system/index.html",
                 "benchmarks/index.html"):
        assert (site / page).exists(), page
    api = (site / "api" / "system" / "index.html").read_text()
    assert "forward_dynamics" in api and "Steps 2-4" in api          # generated from the docstrings
    assert "steps/s" in (site / "benchmarks" / "index.html").read_text()


def test_readme_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert "mkdocs" in readme and "docs/getting_started.md" in readme
