"""Helpers of experiments/bench_gpu.py and the system family it sweeps (mrds_jax.examples.multi_arm_grasp)."""
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from mrds_jax import system as S
from mrds_jax.examples import multi_arm_grasp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import bench_gpu  # noqa: E402


def test_lilly_orin_counts_match_the_printed_tables():
    # Table 2, columns N = 6, n_c = 3: 3402 mult, 2772 add per chain; Table 3, m = 3: 86 mult, 152 add
    assert bench_gpu.lilly_orin_ops(3, 6) == (3 * 3402 + 86, 3 * 2772 + 152)


def test_kernel_count_sees_loop_bodies_and_skips_fusion_bodies():
    def f(x):
        return jax.lax.fori_loop(0, 5, lambda i, y: jnp.sin(y) * 2.0 + jnp.cos(y), x).sum()
    text = jax.jit(f).lower(jnp.ones(7)).compile().as_text()
    k = bench_gpu.count_kernels(text)
    assert k["while_loops"] == 1
    assert k["total"] == k["fusion"] + k["custom_call"] + k["other"] >= 1
    # an instruction count of the whole text (fusion bodies included) is larger
    assert sum(1 for ln in text.splitlines() if " = " in ln) > k["total"]


def test_multi_arm_grasp_is_consistent_and_a_simple_closed_chain():
    system, state = multi_arm_grasp(4, 3)
    assert len(system.modules) == 5 and len(system.contacts) == 4
    err = S.constraint_errors(system, state)
    assert max(float(np.abs(e).max()) for e in err.position) < 1e-12
    general = jax.jit(lambda s: S.forward_dynamics(system, s).qdd)(state)
    fast = jax.jit(lambda s: S.lilly_forward_dynamics(system, s).qdd)(state)
    scale = max(float(np.abs(a).max()) for a in general)
    assert scale > 0
    for a, b in zip(general, fast):
        np.testing.assert_allclose(a, b, atol=1e-10 * scale)
