"""The engine's hot path, inspected: the vmapped Stewart step has no product at default precision (float32
dots default to TF32 on NVIDIA GPUs: loop closure ~400x worse) and no LAPACK/cuSOLVER call (a kernel per
factorisation, and jax 0.10.x deadlocks in batched LAPACK on 2-core CPUs); and it runs at a batch of 1024 in a
child process without hanging."""
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from mrds_jax import system as S
from mrds_jax.ckcm import multibody as MB
from mrds_jax.ckcm.kinematics import home_pose
from mrds_jax.ckcm.params import nominal

FACTORISATION_CALLS = re.compile(r"custom_call\s*@\w*(lapack|cusolver|hipsolver|potrf|getrf|trsm|syevd|gesdd)",
                                 re.IGNORECASE)


def default_precision_dots(stablehlo):
    """dot_general ops of a lowered (StableHLO) program that do not ask for HIGHEST precision."""
    dots = [ln for ln in stablehlo.splitlines() if "stablehlo.dot_general" in ln]
    return [ln.strip() for ln in dots if "precision = [HIGHEST, HIGHEST]" not in ln]


def stewart_step(dtype, path):
    params = jax.tree.map(lambda x: jnp.asarray(x, dtype), nominal())
    system = MB.build_ckcm_system(params)
    state = MB.state_from_pose(params, home_pose(params), jnp.asarray([0.02, -0.01, 0.01, 0.0, 0.0, 0.05], dtype))

    def step(s):
        tr = S.simulate(system, s, jnp.asarray(1e-3, dtype), 2,
                        integration=S.Integration(integrator="euler", path=path), checks=S.Checks(enabled=False),
                        output=S.Output(decimation=2))
        return tuple(q[-1] for q in tr.q)
    return step, state


def test_the_checker_flags_a_default_precision_dot_and_a_factorisation():
    a = jnp.ones((4, 16, 16), jnp.float32)
    plain = jax.jit(jax.vmap(lambda x: x @ x)).lower(a).as_text()
    assert default_precision_dots(plain)
    factor = jax.jit(jax.vmap(jnp.linalg.cholesky)).lower(a + 16 * jnp.eye(16)).as_text()
    assert FACTORISATION_CALLS.search(factor)


@pytest.mark.parametrize("path", ["auto", "general"])
def test_stewart_step_has_no_default_precision_dot_and_no_factorisation_call(path):
    step, state = stewart_step(jnp.float32, path)
    batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (8,) + x.shape), state)
    text = jax.jit(jax.vmap(step)).lower(batch).as_text()
    assert "stablehlo" in text
    assert default_precision_dots(text) == []
    assert FACTORISATION_CALLS.search(text) is None


CHILD = r"""
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import sys; sys.path.insert(0, "tests")
from test_engine_step import stewart_step
step, state = stewart_step(jnp.float64, "auto")
batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (1024,) + x.shape), state)
f = jax.jit(jax.vmap(step))
for _ in range(3):
    out = jax.block_until_ready(f(batch))
assert all(bool(jnp.isfinite(x).all()) for x in out)
print("done", jax.__version__)
"""


def test_our_batched_step_does_not_hang():
    """The pattern that deadlocks jax 0.10.x on 2-core CPUs (batched factorisations under jit(vmap), batch
    >= ~120) is absent from our step; this runs it at batch 1024 in a child process with a timeout."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "done" in out.stdout
