"""The precision policy and the machine-keyed XLA cache (mrds_jax.console).

Run in child processes, because the suite enables x64 for itself: without ``jax_enable_x64``, building two
systems warns exactly once (Float32Warning, naming the fix); with ``allow_float32()`` or x64, not at all.
"""
import subprocess
import sys

from mrds_jax import console

BUILD_TWO = """
import warnings
warnings.simplefilter("always")
{setup}
from mrds_jax import ModuleBuilder, build_system, contacts
b = ModuleBuilder()
b.add_link("arm", joint="revolute")
b.add_frame("tip", "arm", position=(0.5, 0, 0))
arm = b.build()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        build_system({"arm": arm}, [contacts.spherical("pin", ("arm", "tip"), None, ground_position=(0.5, 0, 0))])
print(sum("jax_enable_x64 is off" in str(w.message) and w.category.__name__ == "Float32Warning" for w in caught))
"""


def _count(setup):
    run = subprocess.run([sys.executable, "-c", BUILD_TWO.replace("{setup}", setup)], capture_output=True, text=True,
                         timeout=300, env={"PATH": "", "XLA_FLAGS": "--xla_backend_optimization_level=0",
                                           "PYTHONPATH": ":".join(sys.path)})
    assert run.returncode == 0, run.stderr
    return int(run.stdout.strip().splitlines()[-1])


def test_float32_without_asking_warns_once_and_never_when_asked():
    assert _count("") == 1
    assert _count("import mrds_jax.console as c; c.allow_float32()") == 0
    assert _count("import jax; jax.config.update('jax_enable_x64', True)") == 0


def test_compilation_cache_is_keyed_by_machine(tmp_path):
    path = console.compilation_cache_dir(tmp_path)
    assert path.parent == tmp_path and path.name == console.machine_key()
    assert path.name.startswith(__import__("platform").machine() + "-") and len(path.name.split("-")[-1]) == 12
