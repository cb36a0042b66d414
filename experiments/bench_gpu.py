"""Batched closed-chain throughput (issue 6, item 3): the CKCM Stewart platform on CPU or GPU, next to MJX,
MuJoCo and Pinocchio, plus cost against the number of chains m and the DOF per chain N, the Lilly fast path
against general MRDS, scan against serial CRBA, XLA's flop and kernel counts next to Lilly & Orin's operation
counts (Tables 2-3), and the float32 accuracy of the Stewart rollout.

Sections (``--sections``, all by default):

- ``stewart``  forward simulation of ``mrds_jax.ckcm.multibody`` with ``nominal()`` (Nguyen & Pooran eq. 58), dt = 1 ms, in
  the scenario of ``stewart_setup`` (home pose, payload kicked with rates ``KICK``, legs pushing with the
  constant forces that hold the platform against gravity at home; MJX and MuJoCo run the same state and
  forces through ``ctrl``), integrators ``rk4_compact`` and ``euler`` (semi-implicit), float32 and float64: compile time (AOT
  lower+compile) and scenario-steps per second after compilation (``block_until_ready``; a ``--steps``-step
  ``lax.scan`` inside one jit, identical scenarios broadcast over the batch) for batch sizes 1 ... 10⁶
  (``--max-batch``); per configuration XLA's flop count and the number of kernels (fusions, custom calls,
  other non-trivial ops; static count from the compiled HLO text) of one compiled step.
- ``accuracy`` the same rollout for ``--seconds`` (default 1 s) stored at every step, float32 and float64:
  max ball-joint closure error over the run, relative energy drift max|E − E₀| / max(|E₀|, max T), and the
  float32 payload-position deviation from the float64 run of the same integrator (``float32_accuracy``).
- ``mjx``      MJX (``mujoco.mjx``, package ``mujoco-mjx``; the ``experiments`` extra) on
  ``../shared/bench/ckcm_stewart_mjx.xml`` with its default settings (float32, x64 off), ``jax.vmap`` over
  the batch: steps/s and max closure error (distance of the sites ``tip{i}`` and ``A{i}``) over ``--seconds``.
  Skipped with the reason printed when ``mujoco.mjx`` is not importable.
- ``peers``    MuJoCo ``mj_step`` and Pinocchio ``constraintDynamics`` per step on the host CPU (helpers of
  ``experiments/bench_closed_chain.py``), MuJoCo's max closure error over ``--seconds``.
- ``chains``   ``mrds_jax.examples.multi_arm_grasp(m, N)`` (m arms of N links holding one object at point
  contacts): general ``forward_dynamics`` and ``lilly_forward_dynamics`` per call (batch 1 and ``--chain-batch``),
  compile time, XLA flops and kernels per call, Lilly & Orin's multiplications + additions (Tables 2-3 with
  n_c = 3) for comparison.
- ``crba``     ``mass_matrix`` (serial) vs ``mass_matrix_parallel`` (associative scan) on ``serial_arm(N)``.

Each section runs in its own subprocess (a crash or an out-of-memory batch is recorded, not fatal); every
measurement is appended to ``experiments/out/bench_gpu_<platform>.jsonl`` as soon as it is taken and the
markdown ``bench_gpu_<platform>.md`` and the PNG plots are rewritten from it; ``--resume`` skips
measurements already in the jsonl (same key), so an interrupted run continues where it stopped.

    .venv/bin/python experiments/bench_gpu.py --quick             # CPU: small sizes (~25 min on 2 busy cores)
    python experiments/bench_gpu.py                               # GPU: batches up to 10⁶, N up to 1024
    options: --max-batch B  --batches 1,100,10000  --steps S  --dtypes float32,float64  --integrators rk4_compact,euler
             --sections stewart,accuracy,mjx,peers,chains,crba  --max-m M  --max-n N  --max-crba-n N
             --render-only  --profile DIR (jax.profiler trace of one call at batch 1 and at the largest batch per Stewart/MJX
             configuration, with the top events in the markdown)  --resume
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "out"
MJCF = ROOT.parent / "shared" / "bench" / "ckcm_stewart_mjx.xml"
DT = 1e-3
SECTIONS = ("stewart", "accuracy", "mjx", "peers", "chains", "crba")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CPU sizes: batches ≤ 64, m ≤ 8, N ≤ 12, CRBA N ≤ 128")
    ap.add_argument("--max-batch", type=int, default=None, help="largest batch (default 10⁶, quick 64)")
    ap.add_argument("--batches", default=None, help="explicit batch sizes, e.g. 1,100,10000,100000,1000000 "
                                                   "(default powers of 10 up to --max-batch; quick: 1,4,16,64)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed rollout (default 100, quick 20)")
    ap.add_argument("--seconds", type=float, default=1.0, help="simulated time of the accuracy runs")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--integrators", default="rk4_compact,euler")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--max-m", type=int, default=None, help="most arms in the chains section (default 64, quick 8)")
    ap.add_argument("--max-n", type=int, default=None, help="most links per arm (default 48, quick 12)")
    ap.add_argument("--chain-batch", type=int, default=None, help="batch of the chains section (default 4096, "
                                                                   "quick 64)")
    ap.add_argument("--max-crba-n", type=int, default=None, help="longest CRBA chain (default 1024, quick 128)")
    ap.add_argument("--max-call-s", type=float, default=120.0,
                    help="CPU: skip a batch whose predicted run time (the previous batch's, scaled linearly) "
                         "exceeds this (an accelerator's time grows far less than linearly: never skipped)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per section subprocess")
    ap.add_argument("--profile", type=Path, default=None, help="write jax.profiler traces under this folder")
    ap.add_argument("--resume", action="store_true", help="skip measurements already in the jsonl")
    ap.add_argument("--render-only", action="store_true", help="rewrite the markdown and plots from the jsonl")
    ap.add_argument("--out-dir", type=Path, default=OUT)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    q = a.quick
    a.max_batch = a.max_batch or (64 if q else 10**6)
    a.steps = a.steps or (20 if q else 100)
    a.max_m = a.max_m or (8 if q else 64)
    a.max_n = a.max_n or (12 if q else 48)
    a.chain_batch = a.chain_batch or (64 if q else 4096)
    a.max_crba_n = a.max_crba_n or (128 if q else 1024)
    a.dtypes = [d for d in a.dtypes.split(",") if d]
    a.integrators = [d for d in a.integrators.split(",") if d]
    a.sections = [s for s in a.sections.split(",") if s]
    return a


def too_long(jax, prev, batch, max_call_s):
    """Whether ``batch`` is predicted to run longer than ``max_call_s`` per call, from ``prev`` = (batch, call s):
    linear in the batch on a CPU; never on an accelerator (on the H100 a 32-fold batch took 15 times as long,
    where the linear guess from batch 1 skipped everything above it)."""
    return prev is not None and jax.default_backend() == "cpu" and prev[1] * batch / prev[0] > max_call_s


def batches(max_batch, explicit=None):
    if explicit:
        return [int(float(x)) for x in explicit.split(",") if x and int(float(x)) <= max_batch]
    out, b = [], 1
    while b <= max_batch:
        out.append(b)
        b *= 4 if max_batch <= 256 else 10
    return out


# ----------------------------------------------------------------------------- Lilly & Orin's counts
def lilly_orin_ops(m, N, n_c=3):
    """Multiplications and additions of one evaluation of Lilly & Orin's simple-closed-chain algorithm:
    m × (Table 2 total per chain, N-DOF revolute/prismatic chain, n_c constraints) + Table 3 (a₀).
    Table 2 totals: 656N − 767 + (n_c³/6 + 6½ n_c² + 41⅓ n_c + 46) mult, 546N − 659 + (n_c³/6 + 6 n_c² +
    36⅚ n_c − 14) add; Table 3: 86 mult, 27m + 71 add. (The per-chain rows for Ω, Λ⁻¹ are negative for
    N < 2: the formulas hold for the paper's N ≥ 6 chains; for the Stewart legs, N = 3, read them as rough.)"""
    mult = m * (656 * N - 767 + (n_c**3 / 6 + 6.5 * n_c**2 + (41 + 1 / 3) * n_c + 46)) + 86
    add = m * (546 * N - 659 + (n_c**3 / 6 + 6 * n_c**2 + (36 + 5 / 6) * n_c - 14)) + 27 * m + 71
    return round(mult), round(add)


# ----------------------------------------------------------------------------- HLO kernel count
_TRIVIAL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional", "call",
            "after-all", "partition-id", "replica-id", "opt-barrier", "domain", "add-dependency"}


def count_kernels(hlo_text):
    """Static count of the ops that run as separate kernels in compiled HLO text: instructions of the entry
    computation and of the computations it reaches through while/conditional/call (not fusion bodies or
    reducers), less bookkeeping ops (parameter, tuple, bitcast, ...). A while body counts once (not per
    trip). Returns dict(fusion, custom_call, other, total, while_loops)."""
    comps, cur, entry = {}, None, None
    for ln in hlo_text.splitlines():
        if ln and not ln[0].isspace() and ln.rstrip().endswith("{"):
            name = ln.split()[1] if ln.startswith("ENTRY") else ln.split()[0]
            cur = name.lstrip("%")
            comps[cur] = []
            if ln.startswith("ENTRY"):
                entry = cur
        elif cur is not None and " = " in ln and not ln.lstrip().startswith("//"):
            comps[cur].append(ln)
    counts = dict(fusion=0, custom_call=0, other=0, total=0, while_loops=0)
    seen, todo = set(), [entry]
    while todo:
        c = todo.pop()
        if c is None or c in seen or c not in comps:
            continue
        seen.add(c)
        for ln in comps[c]:
            rhs = ln.split(" = ", 1)[1]
            m = re.search(r"\b([a-z][a-z0-9\-]*)\(", rhs)
            op = m.group(1) if m else "?"
            if op == "while":
                counts["while_loops"] += 1
                todo += [x.lstrip("%") for x in re.findall(r"(?:body|condition)=(%?[\w.\-]+)", rhs)]
            elif op == "conditional":
                todo += [x.strip().lstrip("%") for g in re.findall(r"branch_computations=\{([^}]*)\}", rhs)
                         for x in g.split(",")]
                todo += [x.lstrip("%") for x in re.findall(r"(?:true|false)_computation=(%?[\w.\-]+)", rhs)]
            elif op == "call" or op.startswith("async"):
                todo += [x.lstrip("%") for x in re.findall(r"(?:to_apply|calls)=(%?[\w.\-]+)", rhs)]
            if op in _TRIVIAL or op.startswith("async") or op.endswith("-done"):
                continue
            key = "fusion" if op == "fusion" else "custom_call" if op == "custom-call" else "other"
            counts[key] += 1
            counts["total"] += 1
    return counts


# ============================================================================= workers (subprocesses)
DONE = set()   # rec_key of measurements already in the jsonl (workers under --resume skip them)


def emit(rec):
    print("RESULT " + json.dumps(rec), flush=True)


def seen(**key):
    """True when a measurement with this key is already recorded (``--resume``)."""
    return rec_key(key) in DONE


def _jax(x64):
    import jax
    jax.config.update("jax_enable_x64", x64)
    return jax


def compile_aot(jax, f, *args):
    t0 = time.perf_counter()
    c = jax.jit(f).lower(*args).compile()
    return c, time.perf_counter() - t0


def compiled_costs(c):
    """(XLA flops, kernel counts) of a compiled function."""
    try:
        ca = c.cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        flops = float(ca.get("flops", float("nan")))
    except Exception:  # noqa: BLE001
        flops = float("nan")
    try:
        kernels = count_kernels(c.as_text())
    except Exception:  # noqa: BLE001
        kernels = {}
    return flops, kernels


def run_time(jax, c, args, repeats=3):
    """Median seconds per call of a compiled function (one warm-up call; one repeat when a call is > 2 s)."""
    import numpy as np
    t0 = time.perf_counter()
    jax.block_until_ready(c(*args))
    first = time.perf_counter() - t0
    if first > 2.0:
        repeats = 1
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(c(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def profile_call(jax, args_ns, name, c, args):
    """With ``--profile DIR``: a jax.profiler trace of one call under DIR/name; returns (path, top events)."""
    if args_ns.profile is None:
        return None
    d = Path(args_ns.profile) / name
    d.mkdir(parents=True, exist_ok=True)
    with jax.profiler.trace(str(d)):
        jax.block_until_ready(c(*args))
    return dict(path=str(d), top=summarize_trace(d))


def summarize_trace(folder, top=12):
    """The ``top`` event names by total duration in the Chrome-trace file(s) under ``folder``, with their count
    per traced call: [(name, count, total µs)] — on a GPU the device rows show each kernel launch."""
    import gzip
    totals = {}
    for f in Path(folder).rglob("*.trace.json.gz"):
        with gzip.open(f, "rt") as fh:
            events = json.load(fh).get("traceEvents", [])
        for e in events:
            n = str(e.get("name", "?"))[:80]
            # skip Python frames, the CPU runtime's wrappers around all thunks, and duplicate end markers
            if n.startswith(("$", "ThunkExecutor", "PjitFunction", "end: ")):
                continue
            if e.get("ph") == "X" and "dur" in e:
                c, t = totals.get(n, (0, 0.0))
                totals[n] = (c + 1, t + float(e["dur"]))
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])
    allc, allt = sum(c for _, (c, _) in ranked), sum(t for _, (_, t) in ranked)
    return [("(all events above the filter; nested events count twice)", allc, round(allt, 1))] + \
        [(n, c, round(t, 1)) for n, (c, t) in ranked[:top]]


KICK = (0.02, -0.01, 0.01, 0.0, 0.0, 0.05)   # initial payload rates Φ̇ (m/s, rad/s): ẋ, ẏ, ż, α̇, β̇, γ̇


def stewart_setup(dtype):
    """The benchmark scenario in ``dtype``: the CKCM Stewart platform (``nominal()``, bench legs) at the home
    pose, moving with payload rates ``KICK``, held by the constant actuator forces that balance gravity at
    the home pose (static closed-chain inverse dynamics). Returns (system, state, params, taus, tau0):
    ``taus`` the per-module joint forces for ``system_acceleration``, ``tau0`` the six leg forces (N)."""
    import jax
    import jax.numpy as jnp
    from mrds_jax.ckcm import multibody as MB
    from mrds_jax.ckcm.kinematics import home_pose
    from mrds_jax.ckcm.params import nominal
    params = jax.tree.map(lambda x: jnp.asarray(x, dtype), nominal())
    system = MB.build_ckcm_system(params)
    home = home_pose(params)
    zero = jnp.zeros(6, dtype)
    state = MB.state_from_pose(params, home, jnp.asarray(KICK, dtype))
    tau0 = MB.inverse_dynamics_at(params, home, zero, zero).tau_actuated
    taus = tuple(jnp.zeros(3, dtype).at[2].set(tau0[i]) for i in range(6)) + (jnp.zeros(6, dtype),)
    return system, state, params, taus, tau0


def mujoco_state(state):
    """(qpos, qvel) of ``ckcm_stewart_mjx.xml`` for a state of ``stewart_setup``: payload free joint first
    (qvel = world linear velocity, body angular velocity), then per leg (u1, u2, slide) — the same joint
    conventions as ours (shared/bench/README.md)."""
    import numpy as np
    from mrds_jax.spatial.rotation import quat_to_rotation
    qp, vp = np.asarray(state.q[-1], float), np.asarray(state.v[-1], float)
    R = np.asarray(quat_to_rotation(state.q[-1]), float)
    qpos = np.concatenate([qp] + [np.asarray(q, float) for q in state.q[:6]])
    qvel = np.concatenate([R @ vp[3:], vp[:3]] + [np.asarray(v, float) for v in state.v[:6]])
    return qpos, qvel


def stewart_rollout(system, taus, n_steps, integrator, store_every=None):
    """f(state) -> Trajectory of ``n_steps`` steps (dt = 1 ms) under the constant joint forces ``taus``,
    storing every ``store_every``-th state (default: only the last)."""
    import jax.numpy as jnp
    from mrds_jax import system as S
    from mrds_jax.integrate import rollout
    acc = S.system_acceleration(system, tau=taus)
    dt = jnp.asarray(DT, taus[0].dtype)   # an array, so float32 stays float32 when x64 is on

    def f(state):
        return rollout(system.modules, acc, state.q, state.v, dt, n_steps, store_every or n_steps, integrator)
    return f


def worker_stewart(a, dtype_name, integrator):
    jax = _jax(dtype_name == "float64")
    import jax.numpy as jnp
    from mrds_jax.integrate import INTEGRATORS
    dtype = jnp.dtype(dtype_name)
    system, state, _, taus, _ = stewart_setup(dtype)
    key = dict(section="stewart", dtype=dtype_name, integrator=integrator)
    # one step, batch 1: flops and kernels (rk4_compact's stages are a while loop: XLA's cost analysis counts
    # its body once, so the flops of the unrolled "rk4" step are reported too)
    from mrds_jax import system as S
    acc = S.system_acceleration(system, tau=taus)
    for integ in (integrator, "rk4") if integrator == "rk4_compact" else (integrator,):
        step = lambda q, v, integ=integ: INTEGRATORS[integ](system.modules, acc, q, v, 0.0,
                                                                      jnp.asarray(DT, dtype))  # noqa: E731
        c, tc = compile_aot(jax, step, state.q, state.v)
        flops, kernels = compiled_costs(c)
        emit(dict(key, kind="step_costs", step_integrator=integ, flops=flops, kernels=kernels, compile_s=tc))
    f = stewart_rollout(system, taus, a.steps, integrator)
    prev = None
    for b in batches(a.max_batch, a.batches):
        if seen(**key, kind="batch", batch=b):
            continue
        if too_long(jax, prev, b, a.max_call_s):
            emit(dict(key, kind="batch", batch=b, skipped=f"predicted > {a.max_call_s:g} s per call"))
            continue
        bstate = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), state)
        try:
            c, tc = compile_aot(jax, jax.vmap(f), bstate)
            t = run_time(jax, c, (bstate,))
            out = c(bstate)
            ok = bool(jnp.all(out.first_nonfinite < 0)) and out.q[0].dtype == dtype
            prof = profile_call(jax, a, f"stewart_{dtype_name}_{integrator}_b{b}", c, (bstate,)) \
                if b in (1, batches(a.max_batch, a.batches)[-1]) else None
        except Exception as e:  # noqa: BLE001 — e.g. out of memory at the largest batches
            emit(dict(key, kind="batch", batch=b, error=f"{type(e).__name__}: {str(e)[:300]}"))
            break
        prev = (b, t)
        emit(dict(key, kind="batch", batch=b, compile_s=tc, call_s=t, steps=a.steps,
                  steps_per_s=a.steps * b / t, finite_and_dtype_ok=ok, profile=prof))


def float32_accuracy(seconds=1.0, integrators=("rk4_compact", "euler")):
    """The float32 accuracy statement of the Stewart forward simulation (needs x64 enabled): for each
    integrator, the rollout of ``seconds`` (dt = 1 ms) of the ``stewart_setup`` scenario in float64 and float32,
    every state stored. Returns one dict per (integrator, dtype): max ball-joint closure error over the run
    (m), relative energy drift max|E − E₀| / max(|E₀|, max T) with E = T + V_gravity − Σ τ0_i p_i (the constant
    leg forces are conservative), and the max payload-position deviation from
    the float64 run of the same integrator (m)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from mrds_jax import system as S
    from mrds_jax.ckcm import multibody as MB
    from mrds_jax.system import SystemState
    if not jax.config.jax_enable_x64:
        raise RuntimeError("float32_accuracy compares with float64: enable jax_enable_x64 first")
    n = int(round(seconds / DT))
    rows, ref = [], {}
    for integ in integrators:
        for dname in ("float64", "float32"):
            system, state, params, taus, tau0 = stewart_setup(jnp.dtype(dname))
            traj = jax.jit(stewart_rollout(system, taus, n, integ, store_every=1))(state)
            if traj.q[0].dtype != jnp.dtype(dname):
                raise RuntimeError(f"{dname} rollout returned {traj.q[0].dtype}: an op promoted the dtype")

            def diag(q, v):
                st = SystemState(tuple(q), tuple(v))
                e = S.system_energy(system, st)
                # the constant leg forces are conservative: potential −Σ τ0_i p_i (p_i the prismatic coordinate)
                work = sum(tau0[i] * q[i][2] for i in range(6))
                return MB.closure_errors(params, st).max(), e.total - work, e.kinetic
            closure, E, T = (np.asarray(x, float) for x in jax.jit(jax.vmap(diag))(traj.q, traj.v))
            drift = float(np.abs(E - E[0]).max() / max(abs(E[0]), T.max()))
            pos = np.asarray(traj.q[-1][:, :3], float)
            if dname == "float64":
                ref[integ] = pos
            dev = float(np.abs(pos - ref[integ]).max())
            rows.append(dict(integrator=integ, dtype=dname, seconds=seconds, max_closure_m=float(closure.max()),
                             energy_drift=drift, payload_travel_m=float(np.abs(pos - pos[0]).max()),
                             dev_from_float64_m=dev, nonfinite=int(traj.first_nonfinite)))
    return rows


def worker_accuracy(a):
    _jax(True)
    for r in float32_accuracy(a.seconds, tuple(a.integrators)):
        emit(dict(section="accuracy", kind="accuracy", **r))


def worker_mjx(a):
    jax = _jax(False)   # MJX's default: float32
    try:
        import mujoco
        from mujoco import mjx
    except Exception as e:  # noqa: BLE001
        emit(dict(section="mjx", kind="skipped", reason=f"mujoco.mjx not importable ({type(e).__name__}: {e}); "
                  "pip install -e '.[experiments]'"))
        return
    import jax.numpy as jnp
    import numpy as np
    mm = mujoco.MjModel.from_xml_path(str(MJCF))
    mx = mjx.put_model(mm)
    _, state, _, _, tau0 = stewart_setup(jnp.float32)
    qpos, qvel = mujoco_state(state)
    d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(qpos, jnp.float32), qvel=jnp.asarray(qvel, jnp.float32),
                                   ctrl=jnp.asarray(tau0, jnp.float32))
    tips = [mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_SITE, f"tip{i + 1}") for i in range(6)]
    pts = [mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_SITE, f"A{i + 1}") for i in range(6)]
    settings = dict(solver=int(mm.opt.solver), integrator=int(mm.opt.integrator), iterations=int(mm.opt.iterations),
                    ls_iterations=int(mm.opt.ls_iterations), timestep=float(mm.opt.timestep),
                    dtype=str(d0.qpos.dtype), mujoco=mujoco.__version__)
    emit(dict(section="mjx", kind="settings", **settings))

    def closure(d):
        x = d.site_xpos
        return jnp.linalg.norm(x[jnp.array(tips)] - x[jnp.array(pts)], axis=-1).max()

    def accuracy_run(d):
        def body(d, _):
            d = mjx.step(mx, d)
            return d, closure(d)
        d, errs = jax.lax.scan(body, d, None, length=int(round(a.seconds / mm.opt.timestep)))
        return errs, d.qpos
    errs, qpos = jax.jit(accuracy_run)(d0)
    emit(dict(section="mjx", kind="accuracy", seconds=a.seconds, max_closure_m=float(np.max(errs)),
              final_closure_m=float(errs[-1]), payload_travel_m=float(np.abs(np.asarray(qpos[:3]) -
                                                                            np.asarray(d0.qpos[:3])).max())))

    def roll(d):
        return jax.lax.fori_loop(0, a.steps, lambda i, d: mjx.step(mx, d), d)
    prev = None
    for b in batches(a.max_batch, a.batches):
        if seen(section="mjx", kind="batch", batch=b):
            continue
        if too_long(jax, prev, b, a.max_call_s):
            emit(dict(section="mjx", kind="batch", batch=b, skipped=f"predicted > {a.max_call_s:g} s per call"))
            continue
        try:
            bd = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape) if isinstance(x, jax.Array) else x, d0)
            c, tc = compile_aot(jax, jax.vmap(roll), bd)
            t = run_time(jax, c, (bd,))
            prof = profile_call(jax, a, f"mjx_b{b}", c, (bd,)) \
                if b in (1, batches(a.max_batch, a.batches)[-1]) else None
        except Exception as e:  # noqa: BLE001
            emit(dict(section="mjx", kind="batch", batch=b, error=f"{type(e).__name__}: {str(e)[:300]}"))
            break
        prev = (b, t)
        emit(dict(section="mjx", kind="batch", batch=b, compile_s=tc, call_s=t, steps=a.steps,
                  steps_per_s=a.steps * b / t, profile=prof))


def worker_peers(a):
    sys.path.insert(0, str(ROOT / "experiments"))
    import bench_closed_chain as bcc   # float64, its default
    import mujoco
    import numpy as np
    system, state, merged, cms, mj_model, mj_system = bcc.stewart()
    t_pin, _ = bcc.pinocchio_time(merged, cms, state)   # timing at bench_closed_chain's state (rest)
    emit(dict(section="peers", kind="pinocchio", us_per_step=t_pin * 1e6,
              note="constraintDynamics per call (one semi-implicit Euler step's dynamics), Python loop"))
    t_mj = bcc.mujoco_step_time(mj_model, mj_system, state)
    import jax.numpy as jnp
    _, ours, _, _, tau0 = stewart_setup(jnp.float64)
    d = mujoco.MjData(mj_model)
    d.qpos[:], d.qvel[:] = mujoco_state(ours)
    d.ctrl[:] = np.asarray(tau0)
    mujoco.mj_forward(mj_model, d)
    tips = [mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_SITE, f"tip{i + 1}") for i in range(6)]
    pts = [mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_SITE, f"A{i + 1}") for i in range(6)]
    worst = 0.0
    for _ in range(int(round(a.seconds / mj_model.opt.timestep))):
        mujoco.mj_step(mj_model, d)
        mujoco.mj_kinematics(mj_model, d)
        worst = max(worst, float(np.linalg.norm(d.site_xpos[tips] - d.site_xpos[pts], axis=-1).max()))
    emit(dict(section="peers", kind="mujoco", us_per_step=t_mj * 1e6, max_closure_m=worst, seconds=a.seconds,
              integrator=int(mj_model.opt.integrator)))


def worker_chains(a):
    jax = _jax(True)
    import jax.numpy as jnp
    from mrds_jax import system as S
    from mrds_jax.examples import multi_arm_grasp
    cases = [(m, 6) for m in (2, 4, 8, 16, 32, 64) if m <= a.max_m]
    cases += [(3, n) for n in (3, 6, 12, 24, 48) if n <= a.max_n]
    for m, n in dict.fromkeys(cases):
        system, state = multi_arm_grasp(m, n)
        bstate = jax.tree.map(lambda x: jnp.broadcast_to(x, (a.chain_batch,) + x.shape), state)
        mult, add = lilly_orin_ops(m, n)
        for method, fd in (("general", S.forward_dynamics), ("lilly", S.lilly_forward_dynamics)):
            key = dict(section="chains", m=m, N=n, method=method)
            if seen(**key, kind="chain", batch=a.chain_batch, lilly_orin_mult=mult, lilly_orin_add=add):
                continue
            try:
                f = lambda st, fd=fd: fd(system, st).qdd  # noqa: E731
                c1, tc = compile_aot(jax, f, state)
                flops, kernels = compiled_costs(c1)
                t1 = run_time(jax, c1, (state,), repeats=5)
                cb, tcb = compile_aot(jax, jax.vmap(f), bstate)
                tb = run_time(jax, cb, (bstate,))
            except Exception as e:  # noqa: BLE001
                emit(dict(key, kind="chain", error=f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            emit(dict(key, kind="chain", compile_s=tc, us_single=t1 * 1e6, batch=a.chain_batch,
                      us_per_scenario=tb / a.chain_batch * 1e6, flops=flops, kernels=kernels,
                      lilly_orin_mult=mult, lilly_orin_add=add))


def worker_crba(a):
    jax = _jax(True)
    import jax.numpy as jnp
    import numpy as np
    from mrds_jax.dynamics import mass_matrix, mass_matrix_parallel
    from mrds_jax.examples import serial_arm
    n = 8
    while n <= a.max_crba_n:
        module = serial_arm(n, link_length=1.0 / n, mass_decay=0.99)
        q = jnp.asarray(np.random.default_rng(n).uniform(-1, 1, n))
        res = {}
        for method, fn in (("serial", mass_matrix), ("scan", mass_matrix_parallel)):
            try:
                c, tc = compile_aot(jax, lambda mod, q, fn=fn: fn(mod, q), module, q)
                res[method] = c(module, q)
                t = run_time(jax, c, (module, q), repeats=5)
                _, kernels = compiled_costs(c)
                emit(dict(section="crba", kind="crba", N=n, method=method, compile_s=tc, us=t * 1e6,
                          kernels=kernels))
            except Exception as e:  # noqa: BLE001
                emit(dict(section="crba", kind="crba", N=n, method=method, error=f"{type(e).__name__}: {e}"[:300]))
        if len(res) == 2:
            emit(dict(section="crba", kind="crba_check", N=n,
                      max_diff=float(jnp.abs(res["serial"] - res["scan"]).max())))
        n *= 4 if a.quick else 2


def worker(a):
    name, *rest = a.worker.split(":")
    if a.resume:
        import jax
        jsonl = a.out_dir / f"bench_gpu_{jax.default_backend()}.jsonl"
        if jsonl.exists():
            DONE.update(rec_key(json.loads(x)) for x in jsonl.read_text().splitlines() if x.strip())
    {"stewart": lambda: worker_stewart(a, *rest), "accuracy": lambda: worker_accuracy(a),
     "mjx": lambda: worker_mjx(a), "peers": lambda: worker_peers(a), "chains": lambda: worker_chains(a),
     "crba": lambda: worker_crba(a)}[name]()


# ============================================================================= driver: records -> markdown, plots
def rec_key(r):
    skip = {"compile_s", "call_s", "steps_per_s", "steps", "us", "us_single", "us_per_scenario", "flops", "kernels",
            "max_closure_m", "energy_drift", "dev_from_float64_m", "payload_travel_m", "final_closure_m",
            "us_per_step", "profile", "finite_and_dtype_ok", "error", "skipped", "max_diff", "nonfinite"}
    return json.dumps({k: v for k, v in sorted(r.items()) if k not in skip})


def fmt(x, spec=".3g"):
    if x is None:
        return ""
    if isinstance(x, float) and x != x:
        return "n/a"
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def kern(k):
    if not k:
        return ""
    s = f"{k['total']} ({k['fusion']} fusions, {k['custom_call']} custom calls, {k['other']} other)"
    w = k.get("while_loops", 0)
    return s + (f", {w} while loop{'s' if w > 1 else ''}" if w else "")


def render(recs, path_md, a):
    L = ["# Batched closed-chain throughput: mrds_jax vs MJX, MuJoCo, Pinocchio", ""]
    for i, h in enumerate(r for r in recs if r.get("kind") == "header"):
        L += ([] if i == 0 else ["- resumed (`--resume`):"]) + h["lines"]
    L.append("- timings are wall-clock after compilation with `block_until_ready`; on a shared CPU expect ±50 %")
    by = lambda **kw: [r for r in recs if all(r.get(k) == v for k, v in kw.items())]  # noqa: E731
    skipped = by(section="mjx", kind="skipped")
    acc_rows = {(r["integrator"], r["dtype"]): r for r in by(section="accuracy", kind="accuracy")}
    mjx_acc = by(section="mjx", kind="accuracy")
    if by(section="stewart") or by(section="mjx"):
        L += ["", "## CKCM Stewart platform: scenario-steps per second against batch size", "",
              f"Home pose, payload kicked with Φ̇ = {KICK}, constant gravity-holding leg forces (`stewart_setup`), "
              f"dt = 1 ms, {a.steps}-step scan per call; "
              "compile = AOT lower + compile of that call; steps/s = steps × batch / run time after compilation. "
              "Closure = max ball-joint closure error over a "
              f"{a.seconds:g} s run (batch 1, section `accuracy`).", "",
              "| engine | dtype | integrator | batch | compile s | run s per call | steps/s | max closure (m) |",
              "|---|---|---|---|---|---|---|---|"]
        for r in by(section="stewart", kind="batch"):
            ac = acc_rows.get((r["integrator"], r["dtype"]), {})
            if "error" in r or "skipped" in r:
                L.append(f"| mrds_jax | {r['dtype']} | {r['integrator']} | {r['batch']} | | | "
                         f"{r.get('error') or r.get('skipped')} | |")
                continue
            L.append(f"| mrds_jax | {r['dtype']} | {r['integrator']} | {r['batch']} | {fmt(r['compile_s'], '.1f')} | "
                     f"{fmt(r['call_s'])} | {fmt(r['steps_per_s'], '.4g')} | {fmt(ac.get('max_closure_m'), '.2e')} |")
        settings = (by(section="mjx", kind="settings") or [{}])[-1]
        for r in by(section="mjx", kind="batch"):
            if "error" in r or "skipped" in r:
                L.append(f"| MJX | {settings.get('dtype', '')} | default | {r['batch']} | | | "
                         f"{r.get('error') or r.get('skipped')} | |")
                continue
            L.append(f"| MJX {settings.get('mujoco', '')} | {settings.get('dtype', '')} | Euler (default) | "
                     f"{r['batch']} | {fmt(r['compile_s'], '.1f')} | {fmt(r['call_s'])} | "
                     f"{fmt(r['steps_per_s'], '.4g')} | "
                     f"{fmt(mjx_acc[-1]['max_closure_m'], '.2e') if mjx_acc else ''} |")
        for r in by(section="peers"):
            if r["kind"] == "mujoco":
                L.append(f"| MuJoCo mj_step (CPU, 1 thread) | float64 | Euler (default) | 1 | | "
                         f"{fmt(r['us_per_step'] * 1e-6)} per step | {fmt(1e6 / r['us_per_step'], '.4g')} | "
                         f"{fmt(r['max_closure_m'], '.2e')} |")
            elif r["kind"] == "pinocchio":
                L.append(f"| Pinocchio constraintDynamics (CPU, per call) | float64 | (dynamics only) | 1 | | "
                         f"{fmt(r['us_per_step'] * 1e-6)} per call | {fmt(1e6 / r['us_per_step'], '.4g')} | "
                         "exact per call (no integrator here) |")
        if skipped:
            L += ["", f"MJX skipped: {skipped[-1]['reason']}"]
        if settings:
            L += ["", "MJX settings (model defaults): " + ", ".join(f"{k} {v}" for k, v in settings.items()
                                                                    if k not in ("section", "kind"))]
        costs = by(section="stewart", kind="step_costs")
        if costs:
            L += ["", "### One compiled step (batch 1): XLA flops and kernels", "",
                  "Kernels: ops that run as separate kernels in the compiled HLO (entry computation and loop "
                  "bodies, a loop body counted once; fusions, custom calls such as LAPACK/cuSOLVER, other "
                  "unfused ops). XLA's cost analysis counts a while-loop body once, so `rk4_compact` "
                  "(stages in a scan) under-reports its flops; the unrolled `rk4` row gives the full step. "
                  "Lilly & Orin (Tables 2-3, m = 6 legs, N = 3, n_c = 3) per dynamics evaluation: "
                  "{} mult + {} add = {} (×4 per RK4 step).".format(*lilly_orin_ops(6, 3), sum(lilly_orin_ops(6, 3))),
                  "", "| dtype | integrator (timed) | step compiled | XLA flops per step | kernels per step |",
                  "|---|---|---|---|---|"]
            for r in costs:
                L.append(f"| {r['dtype']} | {r['integrator']} | {r['step_integrator']} | {fmt(r['flops'], '.4g')} | "
                         f"{kern(r['kernels'])} |")
    if acc_rows or mjx_acc:
        L += ["", f"## float32 accuracy of the Stewart forward simulation ({a.seconds:g} s, dt = 1 ms, `stewart_setup`)", "",
              "Energy drift = max|E − E₀| / max(|E₀|, max T), E = kinetic + gravity − Σ τ0_i p_i (the constant leg "
              "forces' potential); deviation = max payload-position difference from the "
              "float64 run of the same integrator over the run; travel = how far the payload moved.", "",
              "| engine | integrator | dtype | max closure error (m) | energy drift | deviation from float64 (m) "
              "| payload travel (m) |", "|---|---|---|---|---|---|---|"]
        for (integ, dname), r in acc_rows.items():
            L.append(f"| mrds_jax | {integ} | {dname} | {fmt(r['max_closure_m'], '.2e')} | "
                     f"{fmt(r['energy_drift'], '.2e')} | {fmt(r['dev_from_float64_m'], '.2e')} | "
                     f"{fmt(r['payload_travel_m'], '.3f')} |")
        for r in mjx_acc:
            L.append(f"| MJX (defaults) | Euler | float32 | {fmt(r['max_closure_m'], '.2e')} (final "
                     f"{fmt(r['final_closure_m'], '.2e')}) | | | {fmt(r['payload_travel_m'], '.3f')} |")
    ch = by(section="chains", kind="chain")
    if ch:
        L += ["", "## Cost against the number of chains m and the DOF per chain N",
              "", "`multi_arm_grasp(m, N)`: m arms of N revolute links holding one free object at point contacts "
              "(n_c = 3), zero velocity, float64. µs per forward-dynamics call (batch 1) and per scenario in a "
              f"vmapped batch of {a.chain_batch}; XLA flops and kernels of one call; Lilly & Orin's operation "
              "count (Tables 2-3) for the same m, N, n_c.", "",
              "| m | N | method | compile s | µs, batch 1 | µs per scenario, batched | XLA flops | L&O mult + add "
              "| kernels |", "|---|---|---|---|---|---|---|---|---|"]
        for r in ch:
            if "error" in r:
                L.append(f"| {r['m']} | {r['N']} | {r['method']} | {r['error']} | | | | | |")
                continue
            L.append(f"| {r['m']} | {r['N']} | {r['method']} | {fmt(r['compile_s'], '.1f')} | "
                     f"{fmt(r['us_single'], '.4g')} | {fmt(r['us_per_scenario'], '.4g')} | {fmt(r['flops'], '.4g')} | "
                     f"{r['lilly_orin_mult']} + {r['lilly_orin_add']} = {r['lilly_orin_mult'] + r['lilly_orin_add']} "
                     f"| {kern(r['kernels'])} |")
    cr = by(section="crba", kind="crba")
    if cr:
        chk = {r["N"]: r["max_diff"] for r in by(section="crba", kind="crba_check")}
        L += ["", "## Serial CRBA vs associative-scan CRBA (`serial_arm(N)`, float64, one call)", "",
              "| N | method | compile s | µs per call | kernels | max |H_serial − H_scan| |", "|---|---|---|---|---|---|"]
        for r in cr:
            if "error" in r:
                L.append(f"| {r['N']} | {r['method']} | {r['error']} | | | |")
                continue
            L.append(f"| {r['N']} | {r['method']} | {fmt(r['compile_s'], '.1f')} | {fmt(r['us'], '.4g')} | "
                     f"{kern(r['kernels'])} | {fmt(chk.get(r['N']), '.1e')} |")
    profs = [r for r in recs if r.get("profile")]
    if profs:
        L += ["", "## Profiles (`--profile`; open the traces with TensorBoard or Perfetto)"]
        for r in profs:
            what = (f"mrds_jax {r['dtype']} {r['integrator']}" if r["section"] == "stewart" else "MJX") + \
                f", batch {r['batch']}, {r['steps']} steps"
            L += ["", f"{what}: `{r['profile']['path']}`; top events by total time in one call:", "",
                  "| event | count | total µs |", "|---|---|---|"]
            L += [f"| `{n}` | {c} | {t:.0f} |" for n, c, t in r["profile"]["top"]]
    errs = [r for r in recs if r.get("kind") == "worker_failed"]
    for r in errs:
        L += ["", f"Section `{r['worker']}` failed: {r['error']}"]
    path_md.write_text("\n".join(L) + "\n")


def _save_figure(fig, path):
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plots(recs, prefix):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    ok = lambda r: "steps_per_s" in r  # noqa: E731
    series = {}
    for r in recs:
        if r.get("kind") == "batch" and ok(r):
            label = f"mrds_jax {r['dtype']} {r['integrator']}" if r["section"] == "stewart" else "MJX (defaults)"
            series.setdefault(label, []).append((r["batch"], r["steps_per_s"]))
    if series:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for label, pts in series.items():
            pts = sorted(dict(pts).items())
            ax.loglog(*zip(*pts), "o-", label=label)
        ax.set_xlabel("batch (scenarios)")
        ax.set_ylabel("scenario-steps per second")
        ax.set_title("CKCM Stewart platform, dt = 1 ms")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        made.append(_save_figure(fig, f"{prefix}_throughput.png"))
    ch = [r for r in recs if r.get("kind") == "chain" and "us_single" in r]
    if ch:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, var, fixed in ((axes[0], "m", ("N", 6)), (axes[1], "N", ("m", 3))):
            for method in ("general", "lilly"):
                pts = sorted((r[var], r["us_single"], r["us_per_scenario"]) for r in ch
                             if r["method"] == method and r[fixed[0]] == fixed[1])
                if pts:
                    x, y1, yb = zip(*pts)
                    ax.loglog(x, y1, "o-", label=f"{method}, batch 1")
                    ax.loglog(x, yb, "s--", label=f"{method}, per scenario (batched)")
            ax.set_xlabel(var)
            ax.set_ylabel("µs per forward-dynamics call")
            ax.set_title(f"{fixed[0]} = {fixed[1]}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        made.append(_save_figure(fig, f"{prefix}_chains.png"))
    cr = [r for r in recs if r.get("kind") == "crba" and "us" in r]
    if cr:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for method in ("serial", "scan"):
            pts = sorted((r["N"], r["us"]) for r in cr if r["method"] == method)
            if pts:
                ax.loglog(*zip(*pts), "o-", label=method)
        ax.set_xlabel("N (links)")
        ax.set_ylabel("µs per mass matrix")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        made.append(_save_figure(fig, f"{prefix}_crba.png"))
    return made


def main(a):
    import jax
    platform_name = jax.default_backend()
    dev = jax.devices()[0]
    a.out_dir.mkdir(parents=True, exist_ok=True)
    stem = a.out_dir / f"bench_gpu_{platform_name}"
    jsonl = stem.with_suffix(".jsonl")
    keep = a.resume or a.render_only
    recs = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()] if (keep and jsonl.exists()) else []
    if a.render_only:
        render(recs, stem.with_suffix(".md"), a)
        print("wrote", stem.with_suffix(".md"), *plots(recs, str(stem)))
        return
    if not a.resume:
        jsonl.write_text("")
    done = {rec_key(r) for r in recs}
    try:
        import mujoco
        mj = mujoco.__version__
    except Exception:  # noqa: BLE001
        mj = "not installed"
    header = [f"- command: `python experiments/bench_gpu.py {' '.join(sys.argv[1:])}`",
              f"- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; device: {dev.device_kind} "
              f"({platform_name}, {jax.device_count()} device(s)); jax {jax.__version__}; mujoco {mj}; "
              f"host {os.cpu_count()} CPUs ({platform.machine()}), load average {os.getloadavg()[0]:.1f} at start"]
    print("\n".join(header), flush=True)
    r = dict(kind="header", lines=header)
    recs.append(r)
    with jsonl.open("a") as fh:
        fh.write(json.dumps(r) + "\n")
    jobs = []
    for s in a.sections:
        if s == "stewart":
            jobs += [f"stewart:{d}:{i}" for d in a.dtypes for i in a.integrators]
        elif s in SECTIONS:
            jobs.append(s)
        else:
            raise SystemExit(f"unknown section {s!r}; use {SECTIONS}")
    base = [sys.executable, str(Path(__file__).resolve())] + sys.argv[1:]
    for job in jobs:
        print(f"\n== {job}", flush=True)
        t0 = time.time()
        proc = subprocess.Popen(base + ["--worker", job], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=str(ROOT))
        tail = []
        try:
            for line in proc.stdout:
                if time.time() - t0 > a.timeout:
                    proc.kill()
                    tail.append(f"killed after {a.timeout:g} s")
                    break
                if not line.startswith("RESULT "):
                    tail = (tail + [line.rstrip()])[-5:]
                    continue
                r = json.loads(line[7:])
                if rec_key(r) in done:      # re-measured after --resume: keep the newer one
                    recs = [x for x in recs if rec_key(x) != rec_key(r)]
                recs.append(r)
                with jsonl.open("a") as fh:
                    fh.write(json.dumps(r) + "\n")
                print("  " + json.dumps(r), flush=True)
                render(recs, stem.with_suffix(".md"), a)
        finally:
            proc.wait()
        if proc.returncode != 0:
            r = dict(kind="worker_failed", worker=job, error=f"exit {proc.returncode}: " + " | ".join(tail)[-500:])
            recs.append(r)
            with jsonl.open("a") as fh:
                fh.write(json.dumps(r) + "\n")
            print("  " + json.dumps(r), flush=True)
    render(recs, stem.with_suffix(".md"), a)
    made = plots(recs, str(stem))
    print(f"\nwrote {stem.with_suffix('.md')}, {jsonl}, " + ", ".join(made))


if __name__ == "__main__":
    ARGS = parse_args()
    sys.path.insert(0, str(ROOT))
    if ARGS.worker:
        worker(ARGS)
    else:
        main(ARGS)
