"""Whether an XLA:CPU setting earns its place among ``mrds_jax.backend_flags.FLAGS``: compile time, kernels and time
per scenario-step of real robots' rollouts with the setting and without it, each in a fresh interpreter (XLA reads
``XLA_FLAGS`` once per process), on the jax this interpreter runs (run it again with a jax 0.9.2 interpreter).

For each robot file and each variant, a child process loads the file through the public API (as
``../shared/bench/mjcf_speed.py`` does: ``load_mjcf``, the first keyframe made consistent, small random velocities),
compiles ``jit(vmap(simulate))`` of a 20-step float32 semi-implicit Euler rollout at the batch given, and reports:
the compile time (lower + compile) as wall seconds and as this process's CPU seconds (all threads: less disturbed by
other work on a shared machine), the static kernel count (``bench_gpu.count_kernels``), and the best of five timed
rollouts as CPU and wall µs per scenario-step. The variants alternate (``--rounds``), so a change of load hits both.

Variants: "default" (``import mrds_jax`` sets every flag of ``FLAGS`` this jaxlib has) and, for each such flag,
"without NAME" (the user's ``XLA_FLAGS`` sets it to the XLA default, which ``backend_flags`` keeps).

    python experiments/bench_backend_flags.py [--robots tests/data/biped_fourbar.xml:off:1024 ...] [--rounds 2]
        [--out experiments/out/backend_flags.md]

ROBOT:CONTACT:BATCH, CONTACT "off" (the acceleration-level path, no limits or contact) or "file" (as the file says).
Appends its table to ``--out``.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
XLA_DEFAULTS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_REDUCE",
                "xla_cpu_use_fusion_emitters": "true"}

CHILD = r"""
import json, os, sys, time, warnings
os.environ.setdefault("JAX_ENABLE_X64", "1")
import numpy as np
import mrds_jax
import jax, jax.numpy as jnp, mujoco
from mrds_jax import system as S
sys.path.insert(0, os.path.join(sys.argv[4], "experiments"))
from bench_gpu import count_kernels
xml, contact, B, steps = sys.argv[1], sys.argv[2] == "file", int(sys.argv[3]), 20
m = mujoco.MjModel.from_xml_path(xml); d = mujoco.MjData(m)
if m.nkey:
    mujoco.mj_resetDataKeyframe(m, d, 0)
mujoco.mj_forward(m, d)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    system, mapping, forces = mrds_jax.load_mjcf(xml, return_mapping=True, return_forces=True)
    state = S.make_consistent(system, mapping.state(np.array(d.qpos), np.zeros(m.nv)))[0]
f32 = lambda t: jax.tree.map(lambda y: jnp.asarray(y, jnp.float32) if jnp.issubdtype(jnp.asarray(y).dtype, jnp.floating) else y, t)
system, forces, state = f32(system), f32(forces), f32(state)
rng = np.random.default_rng(0)
qb = tuple(jnp.broadcast_to(q, (B,) + q.shape) for q in state.q)
vb = tuple(jnp.asarray(1e-3 * rng.standard_normal((B,) + v.shape), jnp.float32) for v in state.v)
def roll(q, v):
    tr = S.simulate(system, S.SystemState(tuple(q), tuple(v)), float(m.opt.timestep), steps, forces=forces,
                    integration=S.Integration(integrator="euler"), checks=S.Checks(enabled=False),
                    output=S.Output(decimation=steps), contact=S.ContactStep(unilateral=contact))
    return tuple(x[-1] for x in tr.q), tuple(x[-1] for x in tr.v)
f = jax.jit(jax.vmap(roll))
c0, t0 = time.process_time(), time.perf_counter()
c = f.lower(qb, vb).compile()
compile_cpu, compile_wall = time.process_time() - c0, time.perf_counter() - t0
jax.block_until_ready(c(qb, vb))
cpu, wall = 1e9, 1e9
for _ in range(5):
    c0, t0 = time.process_time(), time.perf_counter()
    jax.block_until_ready(c(qb, vb))
    cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - t0)
print(json.dumps(dict(compile_cpu=compile_cpu, compile_wall=compile_wall, kernels=count_kernels(c.as_text())["total"],
                      cpu_us=1e6 * cpu / (B * steps), wall_us=1e6 * wall / (B * steps), load=os.getloadavg()[0],
                      jax=jax.__version__, xla_flags=os.environ.get("XLA_FLAGS", ""))))
"""


def variants():
    """(label, XLA_FLAGS) pairs: the library's defaults, then each due flag put back to XLA's default."""
    sys.path.insert(0, str(ROOT))
    from mrds_jax import backend_flags
    version = backend_flags.jaxlib_version()
    out = [("default", None)]
    for flag in backend_flags.FLAGS:
        if version in flag.jaxlibs:
            out.append((f"without {flag.name}", f"--{flag.name}={XLA_DEFAULTS[flag.name]}"))
    return out


def run_child(xml, contact, batch, xla_flags):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MRDS_JAX_XLA_FLAGS")}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-c", CHILD, xml, contact, str(batch), str(ROOT)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=1200)
    if out.returncode:
        raise SystemExit(f"{xml} [{xla_flags}] failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["tests/data/biped_fourbar.xml:off:1024",
                                                    "tests/data/cassie.xml:off:1024",
                                                    "tests/data/quadruped_contact.xml:file:256"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "out" / "backend_flags.md"))
    args = ap.parse_args()
    rows = []
    for spec in args.robots:
        xml, contact, batch = spec.rsplit(":", 2)
        for r in range(args.rounds):
            for label, flags in variants():
                res = run_child(xml, contact, int(batch), flags)
                rows.append((Path(xml).name, contact, batch, label, r + 1, res))
                print(Path(xml).name, label, json.dumps(res), flush=True)
    jax_version = rows[0][-1]["jax"]
    lines = [f"\n## {datetime.date.today()}: jax {jax_version}, {platform.machine()}, {os.cpu_count()} cores\n",
             f"`python experiments/bench_backend_flags.py --rounds {args.rounds}` (float32, 20-step Euler rollout; "
             "CPU = this process's CPU seconds over all threads; the load average when each child ended)\n",
             "| robot | contact | batch | variant | round | compile CPU s | compile wall s | kernels | CPU µs/scen.-step | "
             "wall µs/scen.-step | load |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, contact, batch, label, r, res in rows:
        lines.append(f"| {name} | {contact} | {batch} | {label} | {r} | {res['compile_cpu']:.2f} | "
                     f"{res['compile_wall']:.2f} | {res['kernels']} | {res['cpu_us']:.2f} | {res['wall_us']:.2f} | "
                     f"{res['load']:.1f} |")
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        text = "# XLA:CPU settings of `mrds_jax.backend_flags`: with and without\n" + text
    with open(out, "a") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
