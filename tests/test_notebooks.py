"""The notebooks run from top to bottom in a fresh kernel: fast mode (fewer samples, no long simulation) always,
full mode with MRDS_SLOW=1 (minutes)."""
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


SLOW = pytest.mark.skipif(not os.environ.get("MRDS_SLOW"), reason="set MRDS_SLOW=1: full-mode notebook (minutes)")


@pytest.mark.parametrize("fast", [True, pytest.param(False, marks=SLOW)], ids=["fast", "full"])
@pytest.mark.parametrize("name", ["ckcm_end_effector.ipynb"])
def test_notebook_executes(name, fast, tmp_path, monkeypatch):
    monkeypatch.setenv("CKCM_NOTEBOOK_FAST", "1" if fast else "0")
    monkeypatch.setenv("CKCM_NOTEBOOK_OUT", str(tmp_path))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300 if fast else 1200, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {}) or "image/gif" in o.get("data", {})]
    assert len(images) >= 5                                   # geometry, IK, forces, trends, animation
    gif = "ckcm_platform_fast.gif" if fast else "ckcm_platform.gif"
    assert (tmp_path / gif).stat().st_size > 10_000
