"""The project pins jax < 0.10 because jax/jaxlib 0.10.x deadlocks in batched LAPACK factorisations inside
jit(vmap) on 2-core CPUs from a batch of ~120 (../shared/bench/jax_cpu_deadlock_repro.py). This test runs
that pattern at batch 256 in a child process with a timeout, so a regression fails instead of hanging."""
import subprocess
import sys

import jax

CHILD = r"""
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
B, n = 256, 24
rng = np.random.default_rng(0)
A = rng.random((B, n, n)); A = A @ A.transpose(0, 2, 1) + n * np.eye(n)
def one(a):
    c = jax.scipy.linalg.cho_factor(a)
    return jax.scipy.linalg.cho_solve(c, a[:, 0]), jnp.linalg.solve(a, a[:, 1])
f = jax.jit(jax.vmap(one))
for _ in range(20):
    jax.block_until_ready(f(jnp.asarray(A)))
print("done")
"""


def test_installed_jax_is_the_pinned_one():
    major, minor = (int(x) for x in jax.__version__.split(".")[:2])
    assert (major, minor) < (0, 10), f"jax {jax.__version__} is in the range that deadlocks on 2-core CPUs"


def test_batched_factorisation_does_not_hang():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "done" in out.stdout
