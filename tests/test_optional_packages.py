"""Optional packages are asked for before the work that needs them (issue 53, item 4): validation.require names the
feature, the package and the pip command; a study that needs CMA-ES (experiments/ckcm_assembly.py, which used to
simulate for 17 minutes and then stop on the missing package) refuses at its start, having written nothing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrds_jax.validation import install_hint, require
from mrds_jax.validation.packages import missing

ROOT = Path(__file__).resolve().parents[1]


def test_require_names_the_feature_the_packages_and_the_pip_commands():
    require(["numpy", "jax"], "nothing")                           # installed: no error
    with pytest.raises(ModuleNotFoundError, match=r"^the study needs 'no_such_pkg_x', which is not installed "
                                                  r"\('no_such_pkg_x': pip install no_such_pkg_x\)$") as err:
        require("no_such_pkg_x", "the study")
    assert err.value.name == "no_such_pkg_x"
    assert install_hint("cmaes") == "pip install 'mrds-jax[experiments]' (or pip install cmaes)"
    assert install_hint("pinocchio") == "pip install 'mrds-jax[pinocchio]' (or pip install pin)"
    assert missing(["numpy", "no_such_pkg_x.sub", "no_such_pkg_y"]) == ["no_such_pkg_x.sub", "no_such_pkg_y"]


def test_the_assembly_study_without_cmaes_stops_before_computing(tmp_path):
    out = tmp_path / "report" / "ckcm_assembly.md"
    code = ("import runpy, sys; sys.modules['cmaes'] = None; "         # cmaes hidden, installed or not
            f"sys.argv = ['ckcm_assembly.py', '--quick', '--out', {str(out)!r}]; "
            f"runpy.run_path({str(ROOT / 'experiments' / 'ckcm_assembly.py')!r}, run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert run.returncode != 0
    assert "ModuleNotFoundError: ckcm_assembly.py's design comparison (CMA-ES; --no-design leaves it out) needs " \
           "'cmaes', which is not installed ('cmaes': pip install 'mrds-jax[experiments]' (or pip install cmaes))" \
        in run.stderr, run.stderr[-2000:]
    assert not out.parent.exists()                                  # nothing written, nothing simulated
