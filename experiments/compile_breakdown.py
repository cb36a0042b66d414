"""Where a program's compile time goes, by the library's source: a robot file's velocity-level (contact) or
acceleration-level rollout, forward and reverse mode, lowered and compiled; its StableHLO operations attributed to
the functions of ``mrds_jax`` on their call stacks (the lowering's debug locations), so that a change of the
program's size can be traced to the function that made it (issue 53: the contact step's unrolled factorisations,
the kinematics traced four times, the cross product).

Per program: lower and compile seconds (load-dependent), StableHLO operations and optimised HLO instructions
(deterministic), then the functions with the most operations inclusively (an operation counts for every library
function on its stack) and the files with the most operations exclusively (the innermost library frame).

    python experiments/compile_breakdown.py tests/data/quadruped_contact.xml [--contact off] [--batch 8]
        [--steps 5] [--grad] [--lower-only] [--top 25]

``--grad``: also ∂/∂v₀ of Σ q(T)² through the rollout (the program ``../shared/bench/gpu_grad_mc.py`` times);
``--lower-only``: no XLA compile (the operation counts only, in seconds). The state is the file's keyframe after
MuJoCo settles it for 1 s (as ``mjcf_speed.py --settle 1``), float32, the file's force elements.
"""
import argparse
import ast
import collections
import functools
import os
import platform
import re
import time
import warnings

os.environ.setdefault("JAX_ENABLE_X64", "1")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import mrds_jax  # noqa: E402
from mrds_jax import system as S  # noqa: E402

LOC = re.compile(r"^(#loc\d*) = loc\((.*)\)$")


@functools.lru_cache(None)
def _functions(path):
    """(first line, last line, name) of every function defined in the file at ``path``."""
    try:
        tree = ast.parse(open(path).read())
    except (OSError, SyntaxError):
        return ()
    return tuple((n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def enclosing_function(path, line):
    """The innermost function of the file ``path`` that holds ``line`` ("<module>" outside any)."""
    best = None
    for first, last, name in _functions(path):
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, name)
    return best[1] if best else "<module>"


def library_frames(text):
    """A function ``#locN`` → tuple of (file under mrds_jax/, function) frames, innermost first, for the lowered
    module's debug locations ``text`` (``Lowered.as_text(debug_info=True)``)."""
    defs = {m.group(1): m.group(2) for m in map(LOC.match, text.splitlines()) if m}

    @functools.lru_cache(None)
    def frames(ref):
        body = defs.get(ref, "unknown")
        m = re.match(r'^callsite\((#loc\d*) at (#loc\d*)\)$', body)
        if m:
            return frames(m.group(1)) + frames(m.group(2))
        m = re.match(r'^"[^"]*"\((#loc\d*)\)$', body)
        if m:
            return frames(m.group(1))
        m = re.match(r'^"([^"]+\.py)":(\d+)', body)
        if m and "mrds_jax/" in m.group(1):
            return ((m.group(1).split("mrds_jax/")[-1], enclosing_function(m.group(1), int(m.group(2)))),)
        return ()
    return frames


def attribute(text):
    """(operations, inclusive Counter by (file, function), exclusive Counter by file) of a lowered module."""
    frames = library_frames(text)
    inclusive, by_file, total = collections.Counter(), collections.Counter(), 0
    for line in text.splitlines():
        if line.startswith("#loc") or "stablehlo." not in line:
            continue
        m = re.search(r'loc\((#loc\d*)\)\s*$', line)
        if not m:
            continue
        total += 1
        stack = frames(m.group(1))
        by_file[stack[0][0] if stack else "(outside mrds_jax)"] += 1
        for frame in set(stack):
            inclusive[frame] += 1
    return total, inclusive, by_file


def settled_state(path, settle=1.0):
    """The file's system, force elements and MuJoCo's state after ``settle`` s from its first keyframe, float32."""
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    for _ in range(int(round(settle / m.opt.timestep))):
        mujoco.mj_step(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, mapping, forces = mrds_jax.load_mjcf(path, return_mapping=True, return_forces=True)
        state = S.make_consistent(system, mapping.state(np.array(d.qpos), np.zeros(m.nv)))[0]
    cast = lambda x: jax.tree.map(  # noqa: E731
        lambda y: jnp.asarray(y, jnp.float32) if jnp.issubdtype(jnp.asarray(y).dtype, jnp.floating) else y, x)
    return cast(system), cast(forces), cast(state), float(m.opt.timestep)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("robot")
    ap.add_argument("--contact", choices=["file", "off"], default="file")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--lower-only", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    system, forces, st, dt = settled_state(a.robot)
    qb = tuple(jnp.broadcast_to(q, (a.batch,) + q.shape) for q in st.q)
    vb = tuple(jnp.broadcast_to(v, (a.batch,) + v.shape) for v in st.v)

    def final(q, v):
        tr = S.simulate(system, S.SystemState(tuple(q), tuple(v)), jnp.asarray(dt, jnp.float32), a.steps,
                        forces=forces, integration=S.Integration(integrator="euler"), checks=S.Checks(enabled=False),
                        output=S.Output(decimation=a.steps), contact=S.ContactStep(unilateral=a.contact == "file"))
        return sum(jnp.sum(x[-1] ** 2) for x in tr.q)

    forward = lambda qb, vb: jnp.sum(jax.vmap(final)(qb, vb))  # noqa: E731
    programs = [("forward", forward)] + ([("reverse mode", jax.grad(forward, argnums=1))] if a.grad else [])
    print(f"# {os.path.basename(a.robot)}: {a.steps}-step rollout, contact {a.contact}, batch {a.batch}, float32 "
          f"(jax {jax.__version__}, {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    for name, fn in programs:
        t0 = time.perf_counter()
        lowered = jax.jit(fn).lower(qb, vb)
        lower_s = time.perf_counter() - t0
        total, inclusive, by_file = attribute(lowered.as_text(debug_info=True))
        line = f"\n## {name}: lower {lower_s:.1f} s, {total} StableHLO operations"
        if not a.lower_only:
            t0 = time.perf_counter()
            compiled = lowered.compile()
            line += (f", compile {time.perf_counter() - t0:.1f} s, "
                     f"{sum(1 for x in compiled.as_text().splitlines() if ' = ' in x)} optimised HLO instructions")
        print(line)
        print("\n| operations (inclusive) | function |\n|---:|---|")
        for (path, func), n in inclusive.most_common(a.top):
            print(f"| {n} | {path}:{func} |")
        print("\n| operations (innermost library frame) | file |\n|---:|---|")
        for path, n in by_file.most_common(12):
            print(f"| {n} | {path} |")


if __name__ == "__main__":
    main()
