import os
import sysconfig
from pathlib import Path

# Tests compile many small programs and run them once: cheaper XLA backend optimisation halves compile time.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
URDFS = {
    "ur5": ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf",
    "panda": ROBOTS / "panda_description" / "urdf" / "panda.urdf",
}


@pytest.fixture
def rng():
    return np.random.default_rng(0)
