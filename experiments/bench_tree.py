"""Benchmark of the tree algorithms of mrds_jax against Pinocchio (CPU).

1. UR5 and Panda: ABA, CRBA (serial), CRBA (associative scan), Λ⁻¹ (direct, recursive): compile time and
   time per call after compilation, single call and ``jax.vmap`` batch, next to Pinocchio's per-call time
   (a Python loop over many states, divided) and a correctness column (max |Δ| against Pinocchio).
2. Serial vs scan CRBA on random revolute chains of N links (each link's parent is the previous link):
   compile times and single-call times; each (N, method) case runs in its own subprocess with a timeout
   so a compile blow-up is reported, not silently dropped.

3. ``--compile-scaling`` (run on its own, written to ``experiments/out/bench_compile.md``): compile time of
   forward kinematics, CRBA and ABA against N for serial chains on both tree recursions (``Topology.recursion``
   "unrolled" and "level_scan", each (N, recursion) in its own subprocess with a timeout; the unrolled one up
   to ``--unrolled-max-n``), their per-call times, tiago_dual's ABA compile time on both, and UR5/Panda ABA per
   scenario in a ``jit(vmap)`` batch next to Pinocchio's per-call ``pin.aba`` in the same run.

Usage:
    .venv/bin/python experiments/bench_tree.py            # full run (float64)
    .venv/bin/python experiments/bench_tree.py --compile-scaling   # section 3 only
    .venv/bin/python experiments/bench_tree.py --quick    # smoke test: few repeats, N ≤ 128, batch 128
    options: --max-n N  --float32  --batch B  --repeats R  --pin-states K  --compile-timeout S  --out PATH

Timings: "µs" columns are the median over ``--repeats`` repeats (min in parentheses where shown); each repeat
runs the call enough times to last ≥ 0.1 s, one ``jax.block_until_ready`` per call, so single-call times
include JAX's Python dispatch overhead (~25 µs on this machine). Compile times come from JAX's AOT path
(``jit(f).trace → lower → compile``, which fills the same cache the timed ``jit(f)`` calls hit): "compile"
is trace+lower+XLA compile, "XLA" is the XLA-compile part alone. The module is passed as a jit argument
(its parameters are traced arrays, not constants). Pinocchio's numbers include the Python→C++ call overhead
of its bindings, as a user calling it from Python would see.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few repeats, N up to 128, batch 128")
    ap.add_argument("--max-n", type=int, default=None, help="largest chain length (default 512, quick 128)")
    ap.add_argument("--float32", action="store_true", help="run in float32 (default float64)")
    ap.add_argument("--batch", type=int, default=None, help="vmap batch size (default 1024, quick 128)")
    ap.add_argument("--repeats", type=int, default=None, help="timing repeats (default 7, quick 3)")
    ap.add_argument("--pin-states", type=int, default=None, help="states in Pinocchio's loop (default 1000)")
    ap.add_argument("--compile-timeout", type=float, default=1800.0,
                    help="seconds allowed for one chain case (compile + timing) before it is killed")
    ap.add_argument("--skip-robots", action="store_true")
    ap.add_argument("--skip-chains", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "out" / "bench_tree.md")
    ap.add_argument("--compile-scaling", action="store_true",
                    help="only section 3: compile time against N on both tree recursions (bench_compile.md)")
    ap.add_argument("--unrolled-max-n", type=int, default=128, help="largest chain compiled on the unrolled route")
    ap.add_argument("--chain-batch", type=int, default=128, help="vmap batch of the chain ABA timings")
    ap.add_argument("--chain-ns", type=lambda x: [int(n) for n in x.split(",")], default=None,
                    help="with --compile-scaling: only these chain lengths, e.g. 1024 or 8,16")
    ap.add_argument("--chain-worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--chain-method", choices=("serial", "scan", "unrolled", "level_scan"), default=None,
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.compile_scaling and a.out == ROOT / "experiments" / "out" / "bench_tree.md":
        a.out = ROOT / "experiments" / "out" / "bench_compile.md"
        a.max_n = a.max_n if a.max_n is not None else 1024
    a.max_n = a.max_n if a.max_n is not None else (128 if a.quick else 512)
    a.batch = a.batch if a.batch is not None else (128 if a.quick else 1024)
    a.repeats = a.repeats if a.repeats is not None else (3 if a.quick else 7)
    a.pin_states = a.pin_states if a.pin_states is not None else (200 if a.quick else 1000)
    a.min_time = 0.03 if a.quick else 0.1
    return a


ARGS = parse_args()

import jax  # noqa: E402
import jaxlib  # noqa: E402

jax.config.update("jax_enable_x64", not ARGS.float32)
import jax.numpy as jnp  # noqa: E402
import pinocchio as pin  # noqa: E402

import mrds_jax  # noqa: E402
from mrds_jax.model.tree import level_schedule  # noqa: E402
from mrds_jax.loaders.urdf import load_urdf  # noqa: E402

DTYPE = np.float32 if ARGS.float32 else np.float64
ROBOTS = sysconfig.get_paths()["purelib"] + "/cmeel.prefix/share/example-robot-data/robots/"
URDFS = {
    "UR5": (ROBOTS + "ur_description/urdf/ur5_robot.urdf", "tool0"),
    "Panda": (ROBOTS + "panda_description/urdf/panda.urdf", "panda_hand_tcp"),
}
# ours: [angular; linear]; Pinocchio: [linear; angular]
SWAP6 = np.r_[3:6, 0:3]


# ---------------------------------------------------------------------------------------------- timing
def compile_aot(fn, args):
    """(jitted fn, trace+lower+compile seconds, XLA-compile seconds, instructions in the optimised HLO)."""
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    lowered = jitted.trace(*args).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    return jitted, t2 - t0, t2 - t1, hlo_instructions(compiled)


def hlo_instructions(compiled):
    try:
        return sum(1 for ln in compiled.as_text().splitlines() if " = " in ln and not ln.lstrip().startswith("//"))
    except Exception:  # noqa: BLE001
        return -1


def dispatch_floor(repeats, min_time):
    """µs per call of a jitted x + 1 on a 6-vector: JAX dispatch + one XLA kernel."""
    f = jax.jit(lambda x: x + 1)
    return time_jax(f, (jnp.zeros(6, dtype=DTYPE),), repeats, min_time)[0]


def time_jax(fn, args, repeats, min_time):
    """(median µs, min µs) per call of an already compiled function."""
    jax.block_until_ready(fn(*args))
    number = 1
    while True:
        t = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(fn(*args))
        dt = time.perf_counter() - t
        if dt >= min_time:
            break
        number = max(number * 2, int(number * min_time / max(dt, 1e-9) * 1.1))
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(fn(*args))
        ts.append((time.perf_counter() - t) / number * 1e6)
    return float(np.median(ts)), float(np.min(ts))


def time_pin_loop(call, states, repeats):
    """(median µs, min µs) per call of a Python loop over ``states`` (outputs discarded)."""
    for s in states[:10]:
        call(*s)
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for s in states:
            call(*s)
        ts.append((time.perf_counter() - t) / len(states) * 1e6)
    return float(np.median(ts)), float(np.min(ts))


def sym_upper(M):
    """Pinocchio's crba / computeMinverse fill the upper triangle only."""
    return np.triu(M) + np.triu(M, 1).T


# ---------------------------------------------------------------------------------------------- robots
def pin_calls(pm, pd, frame):
    """Per quantity: (timed call, reference call). The timed call is what a Pinocchio user runs; crba and
    computeMinverse fill only the upper triangle, so the timed Λ⁻¹ mirrors Minv with precomputed indices (cheap)
    while the timed CRBA returns Pinocchio's upper-triangular H as is; the reference calls (not timed) return
    full, copied, row-permuted results for the Δ columns."""
    fid = pm.getFrameId(frame)
    il = np.tril_indices(pm.nv, -1)

    def t_aba(q, v, tau):
        return pin.aba(pm, pd, q, v, tau)

    def t_crba(q, v, tau):
        return pin.crba(pm, pd, q)

    def t_osim(q, v, tau):
        pin.computeJointJacobians(pm, pd, q)
        J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)
        Minv = pin.computeMinverse(pm, pd, q)
        Minv[il] = Minv.T[il]
        return J @ Minv @ J.T

    def r_aba(q, v, tau):
        return np.array(t_aba(q, v, tau))

    def r_crba(q, v, tau):
        return sym_upper(np.array(pin.crba(pm, pd, q)))

    def r_osim(q, v, tau):
        pin.computeJointJacobians(pm, pd, q)
        J = np.array(pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED))
        Minv = sym_upper(np.array(pin.computeMinverse(pm, pd, q)))
        L = J @ Minv @ J.T
        return L[np.ix_(SWAP6, SWAP6)]

    return dict(aba=(t_aba, r_aba), crba=(t_crba, r_crba), osim=(t_osim, r_osim))


def bench_robot(name, path, frame, args, log):
    module = load_urdf(path)
    assert frame in module.topology.frame_names, (frame, module.topology.frame_names)
    pm = pin.buildModelFromUrdf(path)
    pd = pm.createData()
    assert pm.nq == module.nq and pm.nv == module.nv
    rng = np.random.default_rng(0)
    lo, hi = pm.lowerPositionLimit, pm.upperPositionLimit
    lo = np.where(np.isfinite(lo), lo, -np.pi)
    hi = np.where(np.isfinite(hi), hi, np.pi)
    K = max(args.batch, args.pin_states)
    Q = rng.uniform(lo, hi, size=(K, pm.nq))
    V = rng.normal(size=(K, pm.nv))
    T = rng.normal(size=(K, pm.nv)) * 5.0
    Qj, Vj, Tj = (jnp.asarray(x[: args.batch], dtype=DTYPE) for x in (Q, V, T))
    single = tuple(jnp.asarray(x[0], dtype=DTYPE) for x in (Q, V, T))

    funcs = {
        "ABA": ("aba", lambda m, q, v, tau: mrds_jax.aba(m, q, v, tau)),
        "CRBA serial": ("crba", lambda m, q, v, tau: mrds_jax.mass_matrix(m, q)),
        "CRBA scan": ("crba", lambda m, q, v, tau: mrds_jax.mass_matrix_parallel(m, q)),
        "Λ⁻¹ direct": ("osim", lambda m, q, v, tau: mrds_jax.inverse_osim(m, q, (frame,), method="direct")),
        "Λ⁻¹ recursive": ("osim", lambda m, q, v, tau: mrds_jax.inverse_osim(m, q, (frame,), method="recursive")),
    }
    pcalls = pin_calls(pm, pd, frame)
    pin_states = [(Q[i], V[i], T[i]) for i in range(args.pin_states)]
    pin_time = {}
    for key, (call, ref_call) in pcalls.items():
        med, mn = time_pin_loop(call, pin_states, args.repeats)
        pin_time[key] = (med, mn, np.stack([ref_call(*s) for s in pin_states]))
        log(f"  [{name}] pinocchio {key}: {med:.2f} µs/call")

    rows = []
    nb = min(args.batch, args.pin_states)
    for label, (pkey, fn) in funcs.items():
        f1, c1, x1, h1 = compile_aot(fn, (module,) + single)
        fb, cb, xb, _ = compile_aot(jax.vmap(fn, in_axes=(None, 0, 0, 0)), (module, Qj, Vj, Tj))
        s_med, s_min = time_jax(f1, (module,) + single, args.repeats, args.min_time)
        b_med, b_min = time_jax(fb, (module, Qj, Vj, Tj), args.repeats, args.min_time)
        ref = pin_time[pkey][2]
        d1 = float(np.abs(np.asarray(f1(module, *single), dtype=np.float64) - ref[0]).max())
        db = float(np.abs(np.asarray(fb(module, Qj, Vj, Tj), dtype=np.float64)[:nb] - ref[:nb]).max())
        scale = float(np.abs(ref[:nb]).max())
        row = dict(fn=label, hlo=h1, compile1=c1, xla1=x1, compileb=cb, xlab=xb, single=(s_med, s_min),
                   batch=(b_med, b_min), per_state=b_med / args.batch, pin=pin_time[pkey][:2],
                   d1=d1, db=db, scale=scale)
        rows.append(row)
        log(f"  [{name}] {label}: compile {c1:.2f}s/{cb:.2f}s, single {s_med:.1f} µs, batch {b_med:.0f} µs "
            f"({b_med / args.batch:.3f} µs/state), pin {pin_time[pkey][0]:.2f} µs, max|Δ| {d1:.1e}/{db:.1e}")
    return module, pm, rows


def robot_table(name, module, pm, rows, args):
    out = [f"### {name} (nq = nv = {module.nv}, {module.topology.n_links} moving links; "
           f"Pinocchio nq = {pm.nq}; batch = {args.batch}; Pinocchio loop over {args.pin_states} states)", "",
           "| function | HLO instr. (single) | compile single s (XLA) | compile batch s (XLA) | single µs median (min) "
           "| batch µs median (min) | batch µs/state | Pinocchio µs/call median (min) "
           "| JAX batch speed-up (pin µs/call ÷ JAX µs/state; < 1 = slower) | max abs Δ vs pin, 1 state | max abs Δ vs pin, batch | max abs value |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| {r['fn']} | {r['hlo']} | {r['compile1']:.2f} ({r['xla1']:.2f}) | {r['compileb']:.2f} ({r['xlab']:.2f}) "
            f"| {r['single'][0]:.1f} ({r['single'][1]:.1f}) | {r['batch'][0]:.0f} ({r['batch'][1]:.0f}) "
            f"| {r['per_state']:.3f} | {r['pin'][0]:.2f} ({r['pin'][1]:.2f}) | {r['pin'][0] / r['per_state']:.1f}× "
            f"| {r['d1']:.1e} | {r['db']:.1e} | {r['scale']:.1e} |")
    return out


# ---------------------------------------------------------------------------------------------- chains
def random_rotation(rng):
    A = rng.normal(size=(3, 3))
    Qm, R = np.linalg.qr(A)
    Qm = Qm * np.sign(np.diag(R))
    if np.linalg.det(Qm) < 0:
        Qm[:, 0] = -Qm[:, 0]
    return Qm


def chain_links(n, seed=12345):
    """Random revolute chain: list of dicts (axis, joint R, p, mass, com, I_c), link i's parent is link i−1."""
    rng = np.random.default_rng(seed + n)
    links = []
    for _ in range(n):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        A = rng.normal(size=(3, 3)) * 0.05
        links.append(dict(axis=axis, R=random_rotation(rng), p=rng.uniform(-0.15, 0.15, 3),
                          mass=rng.uniform(0.5, 2.0), com=rng.uniform(-0.05, 0.05, 3),
                          I=A @ A.T + 1e-3 * np.eye(3)))
    return links


def chain_module(links):
    b = mrds_jax.ModuleBuilder()
    for i, lk in enumerate(links):
        b.add_link(f"l{i}", parent=None if i == 0 else f"l{i - 1}", joint="revolute", axis=lk["axis"],
                   position=lk["p"], rotation=lk["R"], mass=lk["mass"], com=lk["com"], inertia=lk["I"])
    return b.build()


def chain_pin(links):
    pm = pin.Model()
    parent = 0
    for i, lk in enumerate(links):
        jid = pm.addJoint(parent, pin.JointModelRevoluteUnaligned(lk["axis"]), pin.SE3(lk["R"], lk["p"]),
                          f"j{i}")
        pm.appendBodyToJoint(jid, pin.Inertia(lk["mass"], lk["com"], lk["I"]), pin.SE3.Identity())
        parent = jid
    return pm


def chain_worker(n, method, args):
    """Runs in a subprocess: prints one JSON line 'RESULT {...}'."""
    links = chain_links(n)
    module = chain_module(links)
    assert module.topology.is_chain() and module.topology.parents == tuple(range(-1, n - 1))
    pm = chain_pin(links)
    pd = pm.createData()
    rng = np.random.default_rng(7)
    Q = rng.uniform(-np.pi, np.pi, size=(args.pin_states, n))
    q1 = jnp.asarray(Q[0], dtype=DTYPE)
    fn = mrds_jax.mass_matrix if method == "serial" else mrds_jax.mass_matrix_parallel
    f, c, x, h = compile_aot(fn, (module, q1))
    med, mn = time_jax(f, (module, q1), args.repeats, args.min_time)
    H = np.asarray(f(module, q1), dtype=np.float64)
    Hp = sym_upper(np.array(pin.crba(pm, pd, Q[0])))
    pmed, pmin = time_pin_loop(lambda q: pin.crba(pm, pd, q), [(q,) for q in Q], args.repeats)
    res = dict(n=n, method=method, src=source_hash(), hlo=h, compile=c, xla=x, single=(med, mn), pin=(pmed, pmin),
               d=float(np.abs(H - Hp).max()), scale=float(np.abs(Hp).max()))
    print("RESULT " + json.dumps(res), flush=True)


PIN_MAX_LINKS = 512   # Pinocchio's Data for a 1024-joint chain takes > 19 GB here (the process gets killed)


def scaling_worker(n, recursion, args):
    """Runs in a subprocess: compile and time forward kinematics, CRBA and ABA of the chain of n links on one
    tree recursion; prints one JSON line 'RESULT {...}'."""
    links = chain_links(n)
    module = chain_module(links).with_recursion(recursion)
    rng = np.random.default_rng(7)
    B = args.chain_batch
    Q, V, T = rng.uniform(-np.pi, np.pi, (B, n)), rng.normal(size=(B, n)), rng.normal(size=(B, n))
    single = tuple(jnp.asarray(x[0], dtype=DTYPE) for x in (Q, V, T))
    funcs = {"FK": lambda m, q, v, tau: kinematics_arrays(mrds_jax.forward_kinematics(m, q, v)),
             "CRBA": lambda m, q, v, tau: mrds_jax.mass_matrix(m, q),
             "ABA": lambda m, q, v, tau: mrds_jax.aba(m, q, v, tau)}
    res = dict(n=n, method=recursion, src=source_hash())
    for label, fn in funcs.items():
        f, c, x, h = compile_aot(fn, (module,) + single)
        res[label] = dict(compile=c, xla=x, hlo=h, single=time_jax(f, (module,) + single, args.repeats, args.min_time))
    fb, c, x, _ = compile_aot(jax.vmap(funcs["ABA"], in_axes=(None, 0, 0, 0)),
                              (module,) + tuple(jnp.asarray(a, dtype=DTYPE) for a in (Q, V, T)))
    med, mn = time_jax(fb, (module,) + tuple(jnp.asarray(a, dtype=DTYPE) for a in (Q, V, T)), args.repeats, args.min_time)
    res["ABA"].update(batch_compile=c, per_state=(med / B, mn / B))
    res["ABA"]["d"], res["pin_aba"] = float("nan"), (float("nan"),) * 2
    if n <= PIN_MAX_LINKS:
        pm = chain_pin(links)
        pd = pm.createData()
        qdd = np.asarray(jax.jit(funcs["ABA"])(module, *single), dtype=np.float64)
        res["ABA"]["d"] = float(np.abs(qdd - pin.aba(pm, pd, Q[0], V[0], T[0])).max())
        res["pin_aba"] = time_pin_loop(lambda q, v, tau: pin.aba(pm, pd, q, v, tau), list(zip(Q, V, T)), args.repeats)
    print("RESULT " + json.dumps(res), flush=True)


def kinematics_arrays(kin):
    """The kinematics of either recursion as stacked arrays (what a benchmark returns, so nothing is dropped)."""
    return tuple(jnp.asarray(list(x) if isinstance(x, list) else x)
                 for x in (kin.world_R, kin.world_p, kin.velocity, kin.velocity_product))


def run_chain_case(n, method, args, log):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--chain-worker", str(n), "--chain-method", method,
           "--repeats", str(args.repeats), "--pin-states", str(args.pin_states), "--chain-batch", str(args.chain_batch)]
    if args.float32:
        cmd.append("--float32")
    if args.quick:
        cmd.append("--quick")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.compile_timeout)
    except subprocess.TimeoutExpired:
        log(f"  [chain N={n} {method}] killed after {args.compile_timeout:.0f} s")
        return dict(n=n, method=method, timeout=args.compile_timeout)
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            r["wall"] = wall
            if r.get("src") != args.src_hash:
                log(f"  [chain N={n} {method}] NOTE: mrds_jax source changed during the run "
                    f"(worker saw {r.get('src')}, run started with {args.src_hash})")
            if args.compile_scaling:
                log(f"  [chain N={n} {method}] " + ", ".join(
                    f"{k} compile {r[k]['compile']:.2f} s" for k in ("FK", "CRBA", "ABA")) + f" (wall {wall:.0f} s)")
                return r
            log(f"  [chain N={n} {method}] compile {r['compile']:.2f} s (XLA {r['xla']:.2f}), "
                f"{r['single'][0]:.1f} µs/call, pin {r['pin'][0]:.2f} µs, max|Δ| {r['d']:.1e} (wall {wall:.0f} s)")
            return r
    err = (p.stderr or "").strip().splitlines()[-5:]
    log(f"  [chain N={n} {method}] FAILED rc={p.returncode}: " + " | ".join(err))
    return dict(n=n, method=method, error=f"rc={p.returncode}: " + (err[-1] if err else ""))


def run_chain_cases(ns, methods, args, log, skip=lambda n, method: False):
    results = []
    for n in ns:
        for method in methods:
            if not skip(n, method):
                log(f"chain N={n} {method} …")
                results.append(run_chain_case(n, method, args, log))
    return results


def chain_table(results, args):
    out = ["| N | serial compile s (XLA); HLO instr. | scan compile s (XLA); HLO instr. | serial µs median (min) | scan µs median (min) "
           "| scan ÷ serial | Pinocchio crba µs/call median (min) | max abs Δ vs pin serial | max abs Δ vs pin scan "
           "| max abs H |",
           "|---|---|---|---|---|---|---|---|---|---|"]

    def comp(r):
        if "timeout" in r:
            return f"> {r['timeout']:.0f} (killed, not finished)"
        if "error" in r:
            return f"failed: {r['error']}"
        return f"{r['compile']:.2f} ({r['xla']:.2f}); {r['hlo']} instr."

    def tim(r):
        return f"{r['single'][0]:.1f} ({r['single'][1]:.1f})" if "single" in r else "—"

    notes = []
    for n in sorted({r["n"] for r in results}):
        s = next(r for r in results if r["n"] == n and r["method"] == "serial")
        c = next(r for r in results if r["n"] == n and r["method"] == "scan")
        ok = [r for r in (s, c) if "single" in r]
        ratio = f"{c['single'][0] / s['single'][0]:.2f}" if len(ok) == 2 else "—"
        pin_t = f"{ok[0]['pin'][0]:.2f} ({ok[0]['pin'][1]:.2f})" if ok else "—"
        scale = f"{ok[0]['scale']:.1e}" if ok else "—"
        changed = sorted({r["src"] for r in (s, c) if r.get("src") and r["src"] != args.src_hash})
        if changed:
            notes.append(f"N = {n}: measured with mrds_jax source {', '.join(changed)} (changed during the run)")
        out.append(f"| {n} | {comp(s)} | {comp(c)} | {tim(s)} | {tim(c)} | {ratio} | {pin_t} "
                   f"| {s.get('d', float('nan')):.1e} | {c.get('d', float('nan')):.1e} | {scale} |")
    return out + ([""] + [f"- {x}" for x in notes] if notes else [])


# ---------------------------------------------------------------------------------------------- main
def source_hash():
    """sha256 (first 12 hex digits) of mrds_jax/**/*.py: the library is edited concurrently, so record which
    source state was measured."""
    import hashlib
    h = hashlib.sha256()
    pkg = ROOT / "mrds_jax"
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def loadavg():
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def header(args):
    try:
        aff = len(os.sched_getaffinity(0))
    except AttributeError:
        aff = os.cpu_count()
    return [
        "# mrds_jax tree-algorithm benchmark",
        "",
        f"- command: `{' '.join([Path(sys.executable).name] + sys.argv)}`",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- device: {jax.devices()[0]} ({jax.devices()[0].device_kind}), backend {jax.default_backend()}",
        f"- jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
        f"pinocchio {pin.__version__}, numpy {np.__version__}, python {platform.python_version()}",
        f"- CPUs: os.cpu_count() = {os.cpu_count()}, usable (affinity) = {aff}; machine {platform.machine()}, "
        f"processor {platform.processor() or '?'}",
        f"- dtype: {'float32' if args.float32 else 'float64'}; XLA_FLAGS = {os.environ.get('XLA_FLAGS', '(unset)')}",
        f"- repeats = {args.repeats} (each ≥ {args.min_time} s), batch = {args.batch}, "
        f"Pinocchio loop = {args.pin_states} states, chains up to N = {args.max_n}",
        f"- mrds_jax source sha256[:12] (all .py files): {source_hash()} at start",
        f"- load average at start (1/5/15 min): {loadavg()} — other processes on this machine perturb the timings",
        f"- JAX dispatch floor (jitted x + 1 on a 6-vector, incl. block_until_ready): "
        f"{dispatch_floor(args.repeats, args.min_time):.1f} µs/call",
        "",
    ]


def scaling_table(results):
    out = ["| N | recursion | FK compile s (XLA) | CRBA compile s (XLA) | ABA compile s (XLA); HLO instr. "
           "| FK µs | CRBA µs | ABA µs (single call) | ABA µs/state, batch | Pinocchio aba µs/call | max abs Δ ABA vs pin |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r["n"], r["method"])):
        if "ABA" not in r:
            why = f"killed after {r['timeout']:.0f} s" if "timeout" in r else r.get("error", "?")
            out.append(f"| {r['n']} | {r['method']} | {why} | | | | | | | | |")
            continue
        c = " | ".join(f"{r[k]['compile']:.2f} ({r[k]['xla']:.2f})" for k in ("FK", "CRBA"))
        a = r["ABA"]
        out.append(f"| {r['n']} | {r['method']} | {c} | {a['compile']:.2f} ({a['xla']:.2f}); {a['hlo']} "
                   f"| {r['FK']['single'][1]:.1f} | {r['CRBA']['single'][1]:.1f} | {a['single'][1]:.1f} "
                   f"| {a['per_state'][1]:.2f} | {r['pin_aba'][1]:.2f} | {a['d']:.1e} |")
    return out


def robot_aba_rows(args, log):
    """tiago_dual ABA compile time, UR5/Panda ABA per state in a jit(vmap) batch, both recursions, and
    Pinocchio's pin.aba per call on the same states."""
    rows = []
    for name, (path, _) in URDFS.items():
        base = load_urdf(path)
        pm = pin.buildModelFromUrdf(path)
        pd = pm.createData()
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(pm.lowerPositionLimit), pm.lowerPositionLimit, -np.pi)
        hi = np.where(np.isfinite(pm.upperPositionLimit), pm.upperPositionLimit, np.pi)
        B = args.batch
        Q, V, T = rng.uniform(lo, hi, (B, pm.nq)), rng.normal(size=(B, pm.nv)), 5 * rng.normal(size=(B, pm.nv))
        batch = tuple(jnp.asarray(x, dtype=DTYPE) for x in (Q, V, T))
        pin_t = time_pin_loop(lambda q, v, tau: pin.aba(pm, pd, q, v, tau), list(zip(Q, V, T))[:args.pin_states],
                              args.repeats)
        ref = np.stack([pin.aba(pm, pd, q, v, tau) for q, v, tau in zip(Q, V, T)])
        for recursion in ("unrolled", "level_scan"):
            module = base.with_recursion(recursion)
            fn = lambda m, q, v, tau: mrds_jax.aba(m, q, v, tau)  # noqa: E731
            _, c1, x1, h1 = compile_aot(fn, (module,) + tuple(b[0] for b in batch))
            fb, cb, xb, _ = compile_aot(jax.vmap(fn, in_axes=(None, 0, 0, 0)), (module,) + batch)
            med, mn = time_jax(fb, (module,) + batch, args.repeats, args.min_time)
            d = float(np.abs(np.asarray(fb(module, *batch), dtype=np.float64) - ref).max())
            rows.append(dict(robot=name, n=base.topology.n_links, nv=base.nv, recursion=recursion, compile1=c1,
                             xla1=x1, hlo=h1, compileb=cb, per_state=(med / B, mn / B), pin=pin_t, d=d))
            log(f"  [{name} {recursion}] ABA compile {c1:.2f} s (batch {cb:.2f} s), {mn / B:.2f} µs/state "
                f"(best), pin.aba {pin_t[1]:.2f} µs/call (best), max|Δ| {d:.1e}")
    out = [f"| robot | links | nv | recursion | ABA compile s, single (XLA); HLO instr. | ABA compile s, batch {args.batch} "
           f"| ABA µs/state in the batch, median (best) | Pinocchio pin.aba µs/call, median (best) "
           "| best ÷ best (≤ 1: ours faster) | max abs Δ vs pin |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['robot']} | {r['n']} | {r['nv']} | {r['recursion']} | {r['compile1']:.2f} ({r['xla1']:.2f}); "
                   f"{r['hlo']} | {r['compileb']:.2f} | {r['per_state'][0]:.2f} ({r['per_state'][1]:.2f}) "
                   f"| {r['pin'][0]:.2f} ({r['pin'][1]:.2f}) | {r['per_state'][1] / r['pin'][1]:.2f} | {r['d']:.1e} |")
    return out


def tiago_compile_rows(args, log):
    base = load_urdf(ROBOTS + "tiago_description/robots/tiago_dual.urdf")
    q, v = jnp.asarray(np.asarray(base.neutral_configuration()), dtype=DTYPE), jnp.ones(base.nv, dtype=DTYPE)
    out = ["| recursion | links | nv | levels × widest level | ABA compile s (XLA); HLO instr. | ABA µs, single call |",
           "|---|---|---|---|---|---|"]
    sched = level_schedule(base.topology)
    for recursion in ("unrolled", "level_scan"):
        module = base.with_recursion(recursion)
        f, c, x, h = compile_aot(lambda m, q, v, tau: mrds_jax.aba(m, q, v, tau), (module, q, v, v))
        t = time_jax(f, (module, q, v, v), args.repeats, args.min_time)
        log(f"  [tiago_dual {recursion}] ABA compile {c:.2f} s, {t[1]:.1f} µs")
        out.append(f"| {recursion} | {base.topology.n_links} | {base.nv} | {sched.n_levels} × {sched.width} "
                   f"| {c:.2f} ({x:.2f}); {h} | {t[1]:.1f} |")
    return out


def compile_scaling(args, lines, log):
    ns = args.chain_ns or [n for n in (8, 16, 32, 64, 128, 256, 512, 1024) if n <= args.max_n]
    results = run_chain_cases(ns, ("unrolled", "level_scan"), args, log,
                              skip=lambda n, recursion: recursion == "unrolled" and n > args.unrolled_max_n)
    tab = ["## 3. Compile time against the number of links: unrolled vs level-scan tree recursions", "",
           "Serial chains of random revolute joints (as in section 2), `Topology.recursion` forced to each route; "
           "each (N, recursion) compiled and timed in its own subprocess (timeout "
           f"{args.compile_timeout:.0f} s), the unrolled route up to N = {args.unrolled_max_n}. Compile = "
           "trace + lower + XLA compile of one call (module passed as an argument); µs = best of "
           f"{args.repeats} repeats, single call (includes ~25 µs JAX dispatch) and per state in a jit(vmap) "
           f"batch of {args.chain_batch}. FK = `forward_kinematics` with v (placements, twists, velocity products).",
           ""] + scaling_table(results) + ["", f"Load average after the chains: {loadavg()}", "",
           "## 4. Robots: ABA on both recursions next to Pinocchio (same run, same states)", "",
           f"Per-state time = best batch time ÷ {args.batch}; Pinocchio = a Python loop of `pin.aba` over "
           f"{args.pin_states} states (includes the binding's call overhead), divided.", ""]
    if args.skip_robots:
        tab += ["(skipped: --skip-robots)"]
    else:
        tab += robot_aba_rows(args, log) + ["", "tiago_dual (example-robot-data; Pinocchio models its wheels' continuous "
                                        "joints with (cos, sin) coordinates, so no Pinocchio column): ABA of one state",
                                        ""] + tiago_compile_rows(args, log)
    tab += ["", f"Pinocchio columns stop at N = {PIN_MAX_LINKS}: its Data for longer chains did not fit in memory."]
    tab += ["", f"Load average at the end: {loadavg()}", ""]
    for ln in tab:
        print(ln, flush=True)
    lines += tab


def main(args):
    if args.chain_worker is not None:
        if args.chain_method in ("unrolled", "level_scan"):
            scaling_worker(args.chain_worker, args.chain_method, args)
        else:
            chain_worker(args.chain_worker, args.chain_method, args)
        return
    args.src_hash = source_hash()
    lines = header(args)
    for ln in lines:
        print(ln, flush=True)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.compile_scaling:
        compile_scaling(args, lines, log)
    if not args.skip_robots and not args.compile_scaling:
        intro = ["## 1. Robots: time per call after compilation", "",
                  "Pinocchio (timed): `pin.aba`; `pin.crba` for both CRBA rows (its native output, upper triangle "
                  "only; mirroring it with `np.triu` would cost ~30 µs of numpy overhead here); Λ⁻¹ = "
                  "`computeJointJacobians` + `getFrameJacobian(LOCAL_WORLD_ALIGNED)` + `computeMinverse` (+ mirror "
                  "with precomputed indices) + `J @ Minv @ J.T`. Δ columns (reference calls, untimed: full "
                  "symmetric matrices, Λ⁻¹ rows permuted to our [angular; linear] order): max abs difference "
                  "to Pinocchio for state 0 (single call) and over the first "
                  f"{min(args.batch, args.pin_states)} batch states.", ""]
        for ln in intro:
            print(ln, flush=True)
        lines += intro
        for name, (path, frame) in URDFS.items():
            log(f"robot {name} …")
            module, pm, rows = bench_robot(name, path, frame, args, log)
            tab = robot_table(name + f" — operational point `{frame}`", module, pm, rows, args) + [
                "", f"Load average after {name}: {loadavg()}", ""]
            for ln in tab:
                print(ln, flush=True)
            lines += tab
    if not args.skip_chains and not args.compile_scaling:
        ns = [n for n in (8, 32, 128, 512) if n <= args.max_n]
        if args.max_n not in ns and args.max_n > 8:
            ns.append(args.max_n)
        results = run_chain_cases(ns, ("serial", "scan"), args, log)
        tab = ["## 2. Random revolute chains: serial CRBA vs associative-scan CRBA (single call)", "",
               "Random unit axes, random joint placements (rotation + offset ≤ 0.15 m), masses in [0.5, 2] kg, "
               "random SPD inertias; link i's parent is link i−1. Each (N, method) is compiled and timed in its "
               f"own subprocess (timeout {args.compile_timeout:.0f} s). Pinocchio: the same chain built with "
               "`JointModelRevoluteUnaligned`, `pin.crba` per call (loop over "
               f"{args.pin_states} states).", ""] + chain_table(results, args) + [
               "", f"Load average after the chains: {loadavg()}", ""]
        for ln in tab:
            print(ln, flush=True)
        lines += tab
    end_hash = source_hash()
    if end_hash != args.src_hash:
        lines += [f"NOTE: mrds_jax source changed during the run ({args.src_hash} → {end_hash}).", ""]
        print(lines[-2], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"(written to {args.out})", flush=True)


if __name__ == "__main__":
    main(ARGS)
