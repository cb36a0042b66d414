"""Every URDF of example-robot-data through ``load_urdf`` against Pinocchio's own URDF parser (urdfdom), fixed and
floating base, float64: the mass matrix, the bias forces (RNEA at zero acceleration) and the forward dynamics at
random states, with ``<mimic>`` joints coupled (``load_urdf(..., return_couplings=True)`` into ``build_system``)
against ``pin.buildModelFromUrdf(path, mimic=True)``.

Coordinates are matched by joint name (a free base: ours [ω; v] and [p; w x y z], Pinocchio's [v; ω] and
[p; x y z w]; a ``continuous`` joint Pinocchio's (cos θ, sin θ)). With mimic joints, G maps Pinocchio's independent velocities to all of them (the mimic joint's
column the mimicked joint's, times the multiplier): Pinocchio's mimic model's CRBA must equal Gᵀ H G of ours,
and our constrained q̈ (the couplings exact rows of the constraint solve) G q̈ᵢ with
q̈ᵢ = H_mimic⁻¹ Gᵀ (τ − b) — Pinocchio's RNEA and ABA refuse mimic joints, so b (and H, full) are Pinocchio's
on its model without mimic. Errors are max |ours − Pinocchio| / max(1, max |Pinocchio|).

    python experiments/urdf_files.py                 # the table, every file (minutes)
    python experiments/urdf_files.py panda human     # files whose path contains one of the words
    python experiments/urdf_files.py --fixed         # fixed bases only
"""
import sys
import sysconfig
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"


def pinocchio_models(path, floating):
    """(Pinocchio's model with mimic joints, without) of the file: ``buildModelFromUrdf(path[, free flyer],
    mimic=...)``."""
    import pinocchio as pin
    root = (pin.JointModelFreeFlyer(),) if floating else ()
    return (pin.buildModelFromUrdf(str(path), *root, mimic=True), pin.buildModelFromUrdf(str(path), *root))


def velocity_map(module, full):
    """v index map: Pinocchio's (model ``full``, no mimic) v = ours[vi], by joint name."""
    t = module.topology
    vi = np.zeros(full.nv, dtype=int)
    for name, kind, vs in zip(t.joint_names, t.joint_kinds, t.v_slices):
        j = full.joints[full.getJointId(name)]
        v = list(range(vs.start, vs.stop))
        vi[j.idx_v:j.idx_v + j.nv] = v[3:] + v[:3] if kind == "free" else v
    return vi


def pinocchio_q(module, model, q):
    """Pinocchio's q of ``model`` (its joints by name; mimic joints have none) from ours: a free joint's
    [p; x y z w], an unbounded revolute (``continuous``: nq 2) as (cos θ, sin θ)."""
    t = module.topology
    out = np.zeros(model.nq)
    for name, kind, qs in zip(t.joint_names, t.joint_kinds, t.q_slices):
        if not model.existJointName(name):
            continue
        j = model.joints[model.getJointId(name)]
        if j.nq == 0:
            continue
        qj = np.asarray(q[qs])
        out[j.idx_q:j.idx_q + j.nq] = (np.concatenate([qj[:3], qj[4:], qj[3:4]]) if kind == "free" else
                                       [np.cos(qj[0]), np.sin(qj[0])] if j.nq == 2 else qj)
    return out


def mimic_map(mimic, full):
    """(G, offsets): Pinocchio's full velocities = G v_mimic, and each mimic joint's full v index with its offset
    (q_mimic = scaling·q_mimicked + offset), by joint name; one-coordinate mimic joints only (URDF's)."""
    G, off = np.zeros((full.nv, mimic.nv)), {}
    for jid in range(1, mimic.njoints):
        j, name = mimic.joints[jid], mimic.names[jid]
        f = full.joints[full.getJointId(name)]
        if j.shortname() == "JointModelMimic":
            e = j.extract()
            G[f.idx_v, j.idx_v] = e.scaling          # a mimic joint's indexes are its mimicked joint's
            off[f.idx_v] = e.offset
        else:
            G[f.idx_v:f.idx_v + f.nv, j.idx_v:j.idx_v + j.nv] = np.eye(f.nv)
    return G, off


def compare(path, floating, n_states=3, seed=0):
    """A row of the table: dict with the file, base, DOF (ours independent / Pinocchio's mimic model), the mimic
    couplings, and the relative errors of H, b and q̈ (or ``error``: what refused the file)."""
    import pinocchio as pin
    import mrds_jax as mj
    from mrds_jax import system as S
    from mrds_jax.loaders.urdf import load_urdf
    row = dict(file=str(Path(path).relative_to(ROBOTS)) if ROBOTS in Path(path).parents else str(path),
               base="floating" if floating else "fixed")
    try:
        mimic, full = pinocchio_models(path, floating)
    except Exception as e:          # Pinocchio refuses the file: nothing to compare with
        return dict(row, error=f"Pinocchio: {type(e).__name__}: {str(e)[:70]}")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module, couplings = load_urdf(path, floating=floating, return_couplings=True, name="robot")
    except Exception as e:
        return dict(row, error=f"ours: {type(e).__name__}: {str(e)[len(str(path)) + 2:][:90]}")
    row.update(load_s=time.perf_counter() - t0, nv=module.nv - len(couplings), nv_pin=mimic.nv,
               mimic=len(couplings))
    from mrds_jax.model.configuration import integrate_configuration
    vi = velocity_map(module, full)
    G, off = mimic_map(mimic, full)
    system = S.build_system({"robot": module}, [], couplings=couplings) if couplings else None
    dm, df = mimic.createData(), full.createData()
    rng = np.random.default_rng(seed)

    def terms(q, v, tau):
        """(H, RNEA at zero acceleration, q̈) of ours: one compiled program per file."""
        if system is None:
            qdd = mj.aba(module, q, v, tau)
        else:
            qdd = S.forward_dynamics(system, S.SystemState((q,), (v,)), (tau,)).qdd[0]
        return mj.mass_matrix(module, q), mj.rnea(module, q, v, jnp.zeros_like(v)), qdd

    def rel(a, e):
        return float(np.max(np.abs(a - e)) / max(1.0, np.max(np.abs(e)))) if np.size(e) else 0.0

    states, ours = [], []
    for _ in range(n_states):        # a configuration on the couplings: q = neutral moved along G v, plus offsets
        step, v, tau = np.zeros(module.nv), np.zeros(module.nv), np.zeros(module.nv)
        step[vi], v[vi] = G @ rng.uniform(-1, 1, mimic.nv), G @ rng.uniform(-1, 1, mimic.nv)
        for k, o in off.items():
            step[vi[k]] += o                    # one-coordinate mimic joints: q = v for a unit step
        q = np.asarray(integrate_configuration(module, module.neutral_configuration(), jnp.asarray(step), 1.0))
        tau_p = rng.uniform(-1, 1, full.nv)
        tau[vi] = tau_p
        q_m, q_p, v_p = pinocchio_q(module, mimic, q), pinocchio_q(module, full, q), v[vi]
        states.append((q_m, q_p, v_p, tau_p))
        ours.append((q, v, tau))
    Hs, bs, qdds = (np.asarray(x) for x in jax.jit(jax.vmap(terms))(*(jnp.asarray(np.stack(x)) for x in zip(*ours))))
    errs = dict(H=0.0, b=0.0, qdd=0.0, H_mimic=0.0)
    for (q_m, q_p, v_p, tau_p), H, b, qdd in zip(states, Hs, bs, qdds):
        H, b, qdd = H[np.ix_(vi, vi)], b[vi], qdd[vi]
        Hp = pin.crba(full, df, q_p)
        Hp = np.triu(Hp) + np.triu(Hp, 1).T
        Hm = pin.crba(mimic, dm, q_m)
        Hm = np.triu(Hm) + np.triu(Hm, 1).T
        bp = pin.rnea(full, df, q_p, v_p, np.zeros(full.nv))
        qdd_p = G @ np.linalg.solve(Hm, G.T @ (tau_p - bp))
        errs = dict(H=max(errs["H"], rel(H, Hp)), b=max(errs["b"], rel(b, bp)), qdd=max(errs["qdd"], rel(qdd, qdd_p)),
                    H_mimic=max(errs["H_mimic"], rel(G.T @ H @ G, Hm)))
    return dict(row, **errs)


def table(rows):
    lines = ["| file | base | DOF ours / Pinocchio | mimic | H | b | q̈ | Gᵀ H G | load s |", "|---" * 9 + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['file']} | {r['base']} | — | — | {r['error']} | | | | |")
        else:
            lines.append(f"| {r['file']} | {r['base']} | {r['nv']} / {r['nv_pin']} | {r['mimic']} | {r['H']:.1e} | "
                         f"{r['b']:.1e} | {r['qdd']:.1e} | {r['H_mimic']:.1e} | {r['load_s']:.1f} |")
    return "\n".join(lines)


def main(args):
    bases = (False,) if "--fixed" in args else (False, True)
    words = [a for a in args if not a.startswith("--")]
    files = sorted(p for p in ROBOTS.rglob("*.urdf") if not words or any(w in str(p) for w in words))
    rows = []
    for floating in bases:                     # every file fixed first, then floating
        for path in files:
            rows.append(compare(path, floating))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    ok = [r for r in rows if "error" not in r]
    print(f"\n{len(ok)} of {len(rows)} runs compared; worst H {max(r['H'] for r in ok):.1e}, b "
          f"{max(r['b'] for r in ok):.1e}, q̈ {max(r['qdd'] for r in ok):.1e}, Gᵀ H G "
          f"{max(r['H_mimic'] for r in ok):.1e}; DOF differ in {sum(r['nv'] != r['nv_pin'] for r in ok)}")


if __name__ == "__main__":
    main(sys.argv[1:])
