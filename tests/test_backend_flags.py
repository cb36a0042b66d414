"""backend_flags: importing mrds_jax sets, before the backend starts, each XLA:CPU setting of backend_flags.FLAGS
that the installed jaxlib has (on 0.10: no YNNPACK fusion of reductions, the Stewart step is ~10x slower with it;
on 0.9 and 0.10: the older loop emitters, a quarter less compile time), keeps a user's own choice per flag, can be
switched off, and warns when it comes too late; the compiled Stewart step then holds no YNNPACK fusion, no custom call (no
LAPACK), and no more kernels than stated. Each case runs in a fresh interpreter (XLA reads XLA_FLAGS once)."""
import json
import os
import subprocess
import sys

import pytest

from mrds_jax import backend_flags

NEEDS_FLAG = backend_flags.jaxlib_version() in backend_flags.HAS_YNN_FLAG
DUE = [f for f in backend_flags.FLAGS if backend_flags.jaxlib_version() in f.jaxlibs]
# Ceilings on experiments/bench_gpu.count_kernels of a 20-step Euler rollout, float32, batch 64 (measured on
# jaxlib 0.10.2 / 0.9.2): Stewart on Lilly & Orin's path 241 / 232 (279 with YNNPACK on); Stewart on the
# general path 492 / 483; the dual-arm grasp (general path) 675 / 648.
KERNELS_MAX = {("stewart", "auto"): 270, ("stewart", "general"): 540, ("dual_arm", "general"): 740}


def run(code, *args, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MRDS_JAX_XLA_FLAGS")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=500, env=e,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


REPORT = "import json, os, mrds_jax; print(json.dumps([mrds_jax.BACKEND_FLAGS, os.environ.get('XLA_FLAGS', '')]))"


def test_import_sets_the_flags_where_the_jaxlib_has_them():
    (what, flags), _ = run(REPORT)
    assert what == ("set" if DUE else "not needed")
    assert sorted(flags.split()) == sorted(f.text for f in DUE)
    assert (backend_flags.FLAG in flags.split()) == NEEDS_FLAG
    assert (backend_flags.jaxlib_version() in backend_flags.LOOP_EMITTERS.jaxlibs) == (
        "--xla_cpu_use_fusion_emitters=false" in flags.split())


def test_a_users_choice_and_the_off_switch_are_kept():
    """A flag the user's XLA_FLAGS sets is left as the user wrote it; the others are still added."""
    users = "--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_REDUCE"
    (what, flags), _ = run(REPORT, XLA_FLAGS=users)
    others = [f.text for f in DUE if f is not backend_flags.NO_YNN_FUSIONS]
    assert flags.split() == [users] + others
    assert what == ("set" if others else "kept" if NEEDS_FLAG else "not needed")
    choices = {backend_flags.NO_YNN_FUSIONS: users, backend_flags.LOOP_EMITTERS: "--xla_cpu_use_fusion_emitters=true"}
    every = " ".join(choices[f] for f in DUE)
    (what, flags), _ = run(REPORT, XLA_FLAGS=every)
    assert flags == every and what == ("kept" if DUE else "not needed")
    (what, flags), _ = run(REPORT, MRDS_JAX_XLA_FLAGS="0")
    assert what == "off" and flags == ""


@pytest.mark.skipif(not NEEDS_FLAG, reason="this jaxlib has no YNNPACK fusion (nothing to be late for)")
def test_too_late_is_warned():
    (what, flags), err = run("import json, os, jax; jax.numpy.ones(2).block_until_ready(); import mrds_jax; "
                             "print(json.dumps([mrds_jax.BACKEND_FLAGS, os.environ.get('XLA_FLAGS', '')]))")
    assert what == "late" and "BackendFlagWarning" in err and "import mrds_jax before" in err.lower()


ONE_SCENARIO = r"""
import json, os, sys
import mrds_jax, jax, jax.numpy as jnp
from mrds_jax import backend_flags
allowed = sorted(os.sched_getaffinity(0))
core = backend_flags.one_scenario_runtime() if sys.argv[1] == "pin" else None
x = jnp.arange(64.0).reshape(8, 8)
y = jax.jit(lambda a: jnp.linalg.inv(a @ a.T + 8 * jnp.eye(8)) @ a)(x)
errors = []
try:
    backend_flags.one_scenario_runtime()
except backend_flags.RuntimeStartedError as e:
    errors.append(str(e))
try:
    backend_flags.one_scenario_runtime(core=10_000)
except ValueError as e:
    errors.append(str(e))
print(json.dumps(dict(core=core, allowed=allowed, now=sorted(os.sched_getaffinity(0)), threads=sorted(
    {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}),
    y=y.tolist(), errors=errors)))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_one_scenario_runtime_pins_every_thread_to_one_core():
    """one_scenario_runtime pins the process (XLA's pool threads started after it included: /proc/self/task) to one
    allowed core; results are those of the default runtime; called after a computation it names the started
    backend, and a core outside the allowed set is named."""
    pinned, _ = run(ONE_SCENARIO, "pin")
    plain, _ = run(ONE_SCENARIO, "plain")
    assert pinned["core"] == min(pinned["allowed"]) and pinned["now"] == [pinned["core"]]
    assert pinned["threads"] == [[pinned["core"]]]
    assert plain["now"] == plain["allowed"]
    assert pinned["y"] == plain["y"]
    for out in (pinned, plain):
        assert "already started" in out["errors"][0] and "before the first JAX computation" in out["errors"][0]
        assert "core 10000 is not one this process may run on" in out["errors"][1]


STEP = r"""
import json, sys
import jax, jax.numpy as jnp
from mrds_jax import system as S
MECHANISM, PATH = sys.argv[1], sys.argv[2]
f32 = lambda tree: jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)
if MECHANISM == "stewart":
    from mrds_jax.ckcm import multibody as MB
    from mrds_jax.ckcm.kinematics import home_pose
    from mrds_jax.ckcm.params import nominal
    params = f32(nominal())
    system = MB.build_ckcm_system(params)
    state = MB.state_from_pose(params, home_pose(params), jnp.asarray([0.02, -0.01, 0.01, 0.0, 0.0, 0.05], jnp.float32))
else:
    from mrds_jax.examples import dual_arm_grasp
    system, state = f32(dual_arm_grasp())
def roll(s):
    tr = S.simulate(system, s, jnp.asarray(1e-3, jnp.float32), 20,
                    integration=S.Integration(integrator="euler", path=PATH), checks=S.Checks(enabled=False),
                    output=S.Output(decimation=20))
    return tuple(q[-1] for q in tr.q)
batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (64,) + x.shape), state)
txt = jax.jit(jax.vmap(roll)).lower(batch).compile().as_text()
sys.path.insert(0, "experiments")
from bench_gpu import count_kernels
k = count_kernels(txt)
print(json.dumps(dict(kernels=k["total"], custom_calls=k["custom_call"], ynn=txt.count("__ynn_fusion"))))
"""


def run_step(mechanism, path, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MRDS_JAX_XLA_FLAGS")}
    e.update(env, MRDS_JAX_FLOAT32="1")
    out = subprocess.run([sys.executable, "-c", STEP, mechanism, path], capture_output=True, text=True, timeout=500,
                         env=e, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mechanism, path", [("stewart", "auto"), ("stewart", "general"), ("dual_arm", "general")])
def test_compiled_step_has_no_ynn_fusion_no_custom_call_and_few_kernels(mechanism, path):
    res = run_step(mechanism, path)
    assert res["ynn"] == 0, res
    assert res["custom_calls"] == 0, res
    assert res["kernels"] <= KERNELS_MAX[mechanism, path], res
    if NEEDS_FLAG and path == "auto":   # the check can fail: without the flag this jaxlib fuses reductions with YNNPACK
        off = run_step(mechanism, path, MRDS_JAX_XLA_FLAGS="0")
        assert off["ynn"] > 0, off
