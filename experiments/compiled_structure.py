"""Compiled-structure count of the acceleration-level step (contact off) on robot files: a 20-step float32 Euler
rollout under vmap (batch 64), built as the shared mjcf_speed.py --contact off builds it, and one float64
forward_dynamics alone. Prints per file: kernels (bench_gpu.count_kernels), fusions, optimised HLO instructions
and compile seconds (the counts are deterministic; the seconds depend on the machine's load).

    python experiments/compiled_structure.py tests/data/biped_fourbar.xml tests/data/cassie.xml
"""
import os, re, sys, time, json, warnings
os.environ.setdefault("JAX_ENABLE_X64", "1")
sys.path.insert(0, os.path.join(os.getcwd(), "experiments"))
import numpy as np, jax, jax.numpy as jnp, mujoco
import mrds_jax
from mrds_jax import system as S
from bench_gpu import count_kernels

def hlo_instructions(txt):
    return sum(1 for ln in txt.splitlines() if " = " in ln and not ln.lstrip().startswith("//"))

for xml in sys.argv[1:]:
    m = mujoco.MjModel.from_xml_path(xml); d = mujoco.MjData(m)
    if m.nkey: mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = mrds_jax.load_mjcf(xml, return_mapping=True, return_forces=True)
        st = S.make_consistent(system, mapping.state(np.array(d.qpos), np.zeros(m.nv)))[0]
    cast = lambda x, dt: jax.tree.map(lambda y: jnp.asarray(y, dt) if jnp.issubdtype(jnp.asarray(y).dtype, jnp.floating) else y, x)
    out = {"robot": os.path.basename(xml)}
    sys32, f32, st32 = cast(system, jnp.float32), cast(forces, jnp.float32), cast(st, jnp.float32)
    B = 64
    qb = tuple(jnp.broadcast_to(q, (B,) + q.shape) for q in st32.q)
    vb = tuple(jnp.zeros((B,) + v.shape, jnp.float32) for v in st32.v)
    def roll(q, v):
        tr = S.simulate(sys32, S.SystemState(tuple(q), tuple(v)), float(m.opt.timestep), 20, forces=f32,
                        integration=S.Integration(integrator="euler"), checks=S.Checks(enabled=False),
                        output=S.Output(decimation=20), contact=S.ContactStep(unilateral=False))
        return tuple(x[-1] for x in tr.q), tuple(x[-1] for x in tr.v)
    t0 = time.perf_counter(); c = jax.jit(jax.vmap(roll)).lower(qb, vb).compile(); out["rollout_compile_s"] = round(time.perf_counter() - t0, 1)
    txt = c.as_text(); k = count_kernels(txt)
    out.update(rollout_kernels=k["total"], rollout_fusions=k["fusion"], rollout_hlo=hlo_instructions(txt))
    fd = lambda s, system=system: S.forward_dynamics(system, s)
    t0 = time.perf_counter(); c = jax.jit(fd).lower(st).compile(); out["fd64_compile_s"] = round(time.perf_counter() - t0, 1)
    txt = c.as_text(); k = count_kernels(txt)
    out.update(fd64_kernels=k["total"], fd64_fusions=k["fusion"], fd64_hlo=hlo_instructions(txt))
    print(json.dumps(out), flush=True)
