"""The notebooks run from top to bottom in a fresh kernel: fast mode (fewer samples, no long simulation) always,
full mode with MRDS_SLOW=1 (minutes)."""
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


SLOW = pytest.mark.slow                   # full-mode notebook (minutes): MRDS_SLOW=1

# per notebook: (fast-mode switch, output-folder variable, least number of images, files it must write in
# fast / full mode (name -> minimum size in bytes))
NOTEBOOK_SETUP = {
    "ckcm_end_effector.ipynb": dict(
        fast_env="CKCM_NOTEBOOK_FAST", out_env="CKCM_NOTEBOOK_OUT",
        images=5,                                   # geometry, IK, forces, trends, animation
        files={True: {"ckcm_platform_fast.gif": 10_000}, False: {"ckcm_platform.gif": 10_000}}),
    "ckcm_monte_carlo.ipynb": dict(
        fast_env="CKCM_MC_FAST", out_env="CKCM_MC_OUT",
        images=2,                                   # histograms, sensitivities
        files={fast: {"peak_force_histogram.png": 5_000, "sensitivities.png": 5_000, "summary.json": 100}
               for fast in (True, False)}),
    "ckcm_design_optimisation.ipynb": dict(
        fast_env="CKCM_DESIGN_FAST", out_env="CKCM_DESIGN_OUT",
        images=4,                                   # task path, history, forces, geometry
        files={fast: {"run/design.json": 5_000, "history.png": 5_000, "forces.png": 5_000, "geometry.png": 5_000}
               for fast in (True, False)}),
    "contact_monte_carlo.ipynb": dict(
        fast_env="CONTACT_MC_FAST", out_env="CONTACT_MC_OUT",
        images=2,                                   # slide/mass/force scatter, histograms
        files={fast: {"touchdown_monte_carlo.png": 5_000, "touchdown_histograms.png": 5_000, "summary.json": 100}
               for fast in (True, False)}),
    "ckcm_assembly.ipynb": dict(
        fast_env="ASM_NOTEBOOK_FAST", out_env="ASM_NOTEBOOK_OUT",
        images=1,                                   # the insertion (full mode: and the design steps)
        files={True: {"insertion.png": 5_000}, False: {"insertion.png": 5_000, "design_steps.png": 5_000}}),
    "flexible_links.ipynb": dict(
        fast_env="FLEX_NOTEBOOK_FAST", out_env="FLEX_NOTEBOOK_OUT",
        images=4,                                   # modes, System 2a, System 6a, animation
        files={True: {"flexible_fast.gif": 10_000}, False: {"flexible.gif": 10_000}}),
}


@pytest.mark.parametrize("fast", [True, pytest.param(False, marks=SLOW)], ids=["fast", "full"])
@pytest.mark.parametrize("name", list(NOTEBOOK_SETUP))
def test_notebook_executes(name, fast, tmp_path, monkeypatch):
    setup = NOTEBOOK_SETUP[name]
    monkeypatch.setenv(setup["fast_env"], "1" if fast else "0")
    monkeypatch.setenv(setup["out_env"], str(tmp_path))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300 if fast else 3600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {}) or "image/gif" in o.get("data", {})]
    assert len(images) >= setup["images"]
    for fname, size in setup["files"][fast].items():
        assert (tmp_path / fname).stat().st_size > size, fname
