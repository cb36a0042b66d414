"""Where the contact solve (:func:`mrds_jax.system.ncp.solve_ncp`) iterates and where it fails (issue 51): per-step
ADMM iterations and the fraction of converged steps, in float64 and float32, default settings, over a small batch of
perturbed starts (``jit(vmap(contact_rollout))``, every step stored).

Scenes (the smallest first):

* ``incline``: a 1 kg cube (0.2 m) sliding down a 35° incline, μ = 0.3, from rest; also reports the spin
  max |ω| (rad/s; exact Coulomb friction keeps it 0) and the travel against ½ g (sin θ − μ cos θ) t² of
  semi-implicit Euler, g (sin θ − μ cos θ) dt² n(n+1)/2;
* ``biped``: the four-loop biped on box feet dropped 3 cm (``experiments/biped_drop.py``), dt = 5e-4 s;
* ``cassie``: ``tests/data/cassie.xml`` on a floor colliding with every geom (``shared/bench/gpu_bench.py``'s
  ``cassie.xml+floor``, written before ``load_mjcf(..., floor=True)``'s plane met every collidable geom) from its
  keyframe ``home`` lowered to 2 cm above the floor (lands after 0.064 s), passive, its self-collisions on, dt = 5e-4 s.

Starts are perturbed by a uniform random base velocity of ±``--perturb`` m/s (and rad/s), seed 0.

    python experiments/ncp_convergence.py [--scenes incline biped cassie] [--dtype float64 float32]
                                          [--batch 8] [--steps 200] [--perturb 0.05] [--no-sliding-polish]

Each dtype runs in its own process (``jax_enable_x64`` is process-wide). Prints one line per scene and dtype:
steps converged (fraction of batch × steps), iterations per step mean / p99 / max, the worst primal residual,
and the step indices where the unconverged steps are.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", "--one" not in sys.argv or "float64" in sys.argv)   # --cassie-start: float64
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "experiments"))

import mrds_jax as mj  # noqa: E402
from mrds_jax import collision as C, system as S  # noqa: E402
from mrds_jax.system.timestepping import ContactSettings, contact_rollout  # noqa: E402

G0 = 9.81
THETA, MU_INCLINE = np.deg2rad(35.0), 0.3


def incline_scene(dtype):
    """(system, q0, v0, dt, forces): the cube on the 35° incline, resting on it."""
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=1.0, inertia=np.eye(3) * 0.08 / 12)
    b.add_frame("c", "body")
    c, s = np.cos(THETA), np.sin(THETA)
    R = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    system = S.build_system({"m": b.build()}, [],
                            collision=[C.plane("floor", rotation=R, friction=MU_INCLINE),
                                       C.box("cube", "m", "c", (0.1, 0.1, 0.1), friction=MU_INCLINE)])
    q0 = np.concatenate([0.1 * R[:, 2], [np.cos(THETA / 2), np.sin(THETA / 2), 0.0, 0.0]])
    return system, (jnp.asarray(q0, dtype),), (jnp.zeros(6, dtype),), 1e-3, ()


def biped_scene(dtype):
    from biped_drop import biped_on_floor_xml, dropped_state
    from mrds_jax.loaders.mjcf import load_mjcf
    system, mapping = load_mjcf(biped_on_floor_xml(), return_mapping=True)
    state = dropped_state(system, mapping, jnp.dtype(dtype))
    return system, state.q, state.v, 5e-4, ()


CASSIE_DROP = 0.02


def cassie_on_floor():
    """Cassie with a floor plane that collides with every geom (``load_mjcf(..., floor=True)``'s plane does not meet
    Cassie's contype/conaffinity; the floor of ``shared/bench/gpu_bench.py``'s ``cassie.xml+floor``)."""
    from mrds_jax.loaders.mjcf import load_mjcf
    src = (ROOT / "tests" / "data" / "cassie.xml").read_text()
    i = src.index("<worldbody>") + len("<worldbody>")
    src = (src[:i] + '\n    <geom name="bench_floor" type="plane" size="0 0 0.05" contype="15" conaffinity="15"/>'
           + src[i:])
    return load_mjcf(src, return_mapping=True)


def cassie_start():
    """Cassie's keyframe ``home`` made consistent (loops closed, in float64: its projection needs a 1e-9 residual) and
    lowered so that its lowest slot on the floor is CASSIE_DROP above it, at rest: q as a list."""
    from mrds_jax.system.timestepping import slot_kinematics
    system, mapping = cassie_on_floor()
    state = mapping.keyframe_state("home", system)
    names = system.collision.pair_names()
    on_floor = np.array(["bench_floor" in names[p] for p in system.collision.slot_pair])
    q = np.asarray(state.q[0]).copy()
    q[2] += CASSIE_DROP - float(np.min(np.asarray(slot_kinematics(system, state).gap)[on_floor]))
    return q.tolist()


def cassie_scene(dtype):
    system, _ = cassie_on_floor()
    if jax.config.jax_enable_x64:
        q = cassie_start()
    else:
        p = subprocess.run([sys.executable, __file__, "--cassie-start"], capture_output=True, text=True, check=True)
        q = json.loads([x for x in p.stdout.splitlines() if x.startswith("START ")][-1][len("START "):])
    nv = system.modules[0].nv
    return system, (jnp.asarray(q, dtype),), (jnp.zeros(nv, dtype),), 5e-4, ()


def quadruped_scene(dtype):
    """``tests/data/quadruped_contact.xml``: the quadruped dropped from its start (feet 3 cm above the floor), lands
    and stands."""
    from mrds_jax.loaders.mjcf import load_mjcf
    system, mapping = load_mjcf(str(ROOT / "tests" / "data" / "quadruped_contact.xml"), return_mapping=True)
    state = mapping.state()                                    # qpos0: the trunk at 0.38 m, feet 3 cm up
    return (system, tuple(jnp.asarray(x, dtype) for x in state.q), tuple(jnp.asarray(x, dtype) for x in state.v),
            5e-4, ())


def peg_scene(dtype):
    """The assembly scene ``ckcm_peg_in_hole`` (mrds_jax.ckcm.assembly, its default task): the CKCM end-effector
    sliding a peg into a hole under its compliance controller, with the scene's contact settings."""
    from mrds_jax.ckcm import assembly as A
    scene = A.peg_in_hole()
    cast = lambda xs: tuple(jnp.asarray(x, dtype) for x in xs)          # noqa: E731
    return scene.system, cast(scene.state.q), cast(scene.state.v), 2e-3, scene.forces, scene.settings


SCENES = {"incline": incline_scene, "biped": biped_scene, "cassie": cassie_scene, "quadruped": quadruped_scene,
          "peg": peg_scene}


class Capture:
    """Records the step problems that ``contact_step`` hands ``solve_ncp`` during a rollout (the format of
    ``shared/data/contact_problems``, its README), by wrapping ``timestepping.solve_ncp`` with a host callback: every
    problem whose solve took ``min_trips`` or more loop trips or did not converge, and every ``every``-th other one.
    A problem is stored on its active rows only (the inactive ones are decoupled and carry no impulse): contacts with
    an active row and the active one-sided rows, with their layout."""

    def __init__(self, min_trips=3, every=97):
        self.min_trips, self.every, self.seen, self.problems = min_trips, every, 0, []

    def record(self, G, g, layout, mu, active, lam0, lam, trips, converged):
        G, g, mu, active, lam0, lam = (np.asarray(x) for x in (G, g, mu, active, lam0, lam))
        self.seen += 1
        if not (int(trips) >= self.min_trips or not bool(converged) or self.seen % self.every == 0):
            return
        b, u, k = layout
        keep_c = active[b + u:].reshape(k, 3).any(axis=1)
        rows = np.concatenate([np.arange(b), b + np.flatnonzero(active[b:b + u]),
                               (b + u + 3 * np.flatnonzero(keep_c)[:, None] + np.arange(3)).reshape(-1)]).astype(int)
        self.problems.append(dict(G=G[np.ix_(rows, rows)], g=g[rows], mu=mu[keep_c], a=active[rows], l0=lam0[rows],
                                  l=lam[rows], its=int(trips), conv=bool(converged),
                                  layout=[b, int(active[b:b + u].sum()), int(keep_c.sum())]))

    def __enter__(self):
        from mrds_jax.system import timestepping as TS
        self._orig = TS.solve_ncp
        orig, record = self._orig, self.record

        def capturing(G, g, layout, mu, active, lam0, settings):
            sol = orig(G, g, layout, mu, active, lam0, settings)
            jax.debug.callback(lambda *xs: record(xs[0], xs[1], tuple(layout), *xs[2:]), G, g, mu, active, lam0,
                               sol.lam, sol.iterations, sol.converged)
            return sol
        TS.solve_ncp = capturing
        return self

    def __exit__(self, *exc):
        from mrds_jax.system import timestepping as TS
        TS.solve_ncp = self._orig

    def save(self, path, scene, dtype):
        recs = [json.dumps(dict(scene=scene, its=p["its"], conv=p["conv"], layout=p["layout"]))
                for p in self.problems]
        arrays = {f"{k}{i}": p[k] for i, p in enumerate(self.problems) for k in ("G", "g", "mu", "a", "l0", "l")}
        np.savez_compressed(path, recs=np.array(recs), **arrays)
        return len(recs)


def perturbed_starts(v0, batch, perturb, seed=0):
    """(batch, nv) base velocities: v0 plus a uniform ±perturb on the first module's first six velocities (the
    floating base; all of them where it has fewer, as the peg's planar end-effector), except scenario 0, which starts
    as given."""
    rng = np.random.default_rng(seed)
    v = np.repeat(np.asarray(v0[0])[None], batch, axis=0)
    n = min(6, v.shape[1])
    v[1:, :n] += rng.uniform(-perturb, perturb, (batch - 1, n))      # scenario 0: the unperturbed start
    return jnp.asarray(v, v0[0].dtype)


def run(scene, dtype, batch, steps, perturb, sliding_polish=True, method="newton", capture=None, only=None):
    if dtype == "float32":
        from mrds_jax.console import allow_float32
        allow_float32()
    system, q0, v0, dt, forces, *own = SCENES[scene](dtype)
    base = own[0] if own else ContactSettings()
    settings = base._replace(ncp=base.ncp._replace(sliding_polish=sliding_polish, method=method))
    vb = perturbed_starts(v0, batch, perturb)
    if only:                                # the batch's scenarios of these indices (to capture a few of a big run)
        vb = vb[jnp.asarray(only)]

    def one(v_base):
        v = (v_base,) + tuple(v0[1:])
        tr = contact_rollout(system, q0, v, dt, steps, 1, forces=forces, settings=settings)
        out = dict(iterations=tr.iterations_max[1:], converged=tr.converged[1:], primal=tr.primal[1:],
                   comp=tr.complementarity[1:], finite=tr.first_nonfinite < 0, q=tr.q[0], v=tr.v[0])
        return out

    f = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    if capture:
        with Capture() as cap:
            r = jax.tree.map(np.asarray, jax.block_until_ready(f(vb)))
        n = cap.save(capture, scene, dtype)
        print(f"captured {n} of {cap.seen} problems into {capture}", file=sys.stderr)
        return dict(scene=scene, dtype=dtype, captured=n, seen=cap.seen)
    r = jax.tree.map(np.asarray, jax.block_until_ready(f(vb)))
    compile_and_run = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(f(vb))
    run_s = time.perf_counter() - t0
    its, conv = r["iterations"], r["converged"]
    bad_steps = np.flatnonzero(~conv.all(axis=0))
    out = dict(scene=scene, dtype=dtype, batch=batch, steps=steps, converged=float(conv.mean()),
               scenarios_all_converged=float(conv.all(axis=1).mean()),
               it_mean=float(its.mean()), it_p99=float(np.percentile(its, 99)), it_max=int(its.max()),
               primal_max=float(np.nanmax(r["primal"])), finite=bool(r["finite"].all()),
               bad_steps=bad_steps[:12].tolist(), n_bad_steps=int(bad_steps.size),
               bad_scenarios=np.flatnonzero(~conv.all(axis=1))[:12].tolist(),
               compile_and_run_s=compile_and_run, run_s=run_s)
    if scene == "incline":
        # the unperturbed start (scenario 0): spin, the angular velocity (the free joint's first three velocity
        # entries, body frame), and travel, exact for semi-implicit Euler
        out["spin_max"] = float(np.abs(r["v"][0, :, :3]).max())
        n = steps
        travel_exact = G0 * (np.sin(THETA) - MU_INCLINE * np.cos(THETA)) * dt ** 2 * n * (n + 1) / 2
        downhill = -np.array([0.0, np.cos(THETA), np.sin(THETA)])
        travel = (r["q"][0, -1, :3] - r["q"][0, 0, :3]) @ downhill
        out["travel_error"] = float(abs(travel - travel_exact))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", nargs="+", default=list(SCENES))
    ap.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--perturb", type=float, default=0.05)
    ap.add_argument("--one", action="store_true", help="run the one scene and dtype given, print JSON")
    ap.add_argument("--no-sliding-polish", action="store_true", help="NCPSettings(sliding_polish=False)")
    ap.add_argument("--method", default="newton", choices=["newton", "admm"], help="NCPSettings.method")
    ap.add_argument("--capture", default=None, metavar="DIR",
                    help="write the step problems (Capture) to DIR/SCENE_DTYPE.npz instead of timing")
    ap.add_argument("--only", type=int, nargs="+", default=None, metavar="I",
                    help="run only these scenarios of the batch (their perturbed starts as in the whole batch)")
    ap.add_argument("--cassie-start", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cassie_start:
        print("START " + json.dumps(cassie_start()))
        return
    if args.one:
        capture = (None if args.capture is None
                   else str(Path(args.capture) / f"{args.scenes[0]}_{args.dtype[0]}.npz"))
        print("RESULT " + json.dumps(run(args.scenes[0], args.dtype[0], args.batch, args.steps, args.perturb,
                                         not args.no_sliding_polish, args.method, capture, args.only)))
        return
    for scene in args.scenes:
        for dtype in args.dtype:
            p = subprocess.run([sys.executable, __file__, "--one", "--scenes", scene, "--dtype", dtype, "--batch",
                                str(args.batch), "--steps", str(args.steps), "--perturb", str(args.perturb)]
                               + ["--no-sliding-polish"] * args.no_sliding_polish + ["--method", args.method]
                               + (["--capture", args.capture] if args.capture else [])
                               + (["--only", *map(str, args.only)] if args.only else []),
                               capture_output=True, text=True, env=os.environ)
            lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode or not lines:
                print(f"{scene} {dtype}: FAILED\n{p.stderr[-2000:]}", flush=True)
                continue
            r = json.loads(lines[-1][len("RESULT "):])
            if args.capture:
                print(f"{scene:9s} {dtype}: captured {r['captured']} of {r['seen']} step problems", flush=True)
                continue
            extra = (f" spin {r['spin_max']:.1e} rad/s travel err {r['travel_error']:.1e} m"
                     if scene == "incline" else "")
            print(f"{scene:8s} {dtype}: converged {100 * r['converged']:.1f} % of steps "
                  f"({100 * r['scenarios_all_converged']:.0f} % scenarios all), iterations mean {r['it_mean']:.1f} "
                  f"p99 {r['it_p99']:.0f} max {r['it_max']}, primal max {r['primal_max']:.1e}, finite "
                  f"{r['finite']}, unconverged steps {r['n_bad_steps']} {r['bad_steps']} in scenarios "
                  f"{r['bad_scenarios']}{extra}, "
                  f"compile+run {r['compile_and_run_s']:.1f} s run {r['run_s']:.2f} s", flush=True)


if __name__ == "__main__":
    main()
