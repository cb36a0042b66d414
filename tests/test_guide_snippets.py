"""Every fenced Python snippet of the guides (``docs/guide/*.md``) and of ``docs/getting_started.md`` runs as
written: each in a fresh interpreter, in an empty folder, as a reader who copies it would run it. The snippets
use only files the package ships (the ready-made MJCF four-bar, the two-link URDF arm, the system files), so
nothing is substituted. Among them: a URDF example and a Monte Carlo over the closed-chain dynamics.

The snippets that compile a simulation or a batched dynamics program (15-30 s each on two cores) run in the
full mode (``MRDS_SLOW=1``); the quick ones in every run.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "guide").glob("*.md")) + [ROOT / "docs" / "getting_started.md"]
# (page, index of the snippet on the page) that run in every run; the others in the full mode
QUICK = {("monte_carlo.md", 0), ("interop.md", 1)}


def snippets(pages=PAGES):
    """[(page name, index on the page, code)] of every ```python block."""
    return [(page.name, i, code) for page in pages
            for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M))]


SNIPPETS = snippets()


def _param(page, i, code):
    marks = () if (page, i) in QUICK else (pytest.mark.slow,)
    return pytest.param(code, id=f"{page}-{i}", marks=marks)


@pytest.mark.parametrize("code", [_param(*s) for s in SNIPPETS])
def test_snippet_runs_as_written(code, tmp_path):
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr


def test_the_snippets_cover_the_guides():
    """Found on every page that has one, none with a placeholder for a file the reader would have to bring, a URDF
    example and a Monte Carlo that calls the dynamics among them."""
    pages = {p for p, _, _ in SNIPPETS}
    assert {"getting_started.md", "interop.md", "monte_carlo.md", "viewing.md"} <= pages, pages
    code = [c for _, _, c in SNIPPETS]
    assert len(code) >= 8
    for c in code:
        lines = [ln.split("#")[0] for ln in c.splitlines()]
        assert not any(re.search(r"\"(robot|my_\w+|path/to)[^\"]*\"", ln) for ln in lines), c
    assert any("load_urdf" in c for c in code)
    assert any("run_monte_carlo" in c and "forward_dynamics" in c for c in code)
    assert all((p, i) in {(q, j) for q, j, _ in SNIPPETS} for p, i in QUICK)


def test_snippet_finder_reads_fenced_python_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n```python\na = 1\n```\n```bash\nls\n```\n  ```python\nindented\n  ```\n```python\nb = 2\n```\n")
    assert [(i, c) for _, i, c in snippets([page])] == [(0, "a = 1\n"), (1, "b = 2\n")]
