"""Run a built system file: ``check`` (no simulation) and ``simulate`` (trajectory, plots, animation).

Output of :func:`simulate_built` in the folder ``out`` (format documented in ``docs/system_files.md``):

* ``trajectory.npz`` — ``t`` (n,); per module ``q/<module>`` (n, nq) and ``v/<module>`` (n, nv); energies
  ``energy/kinetic``, ``energy/potential``, ``energy/elastic``, ``energy/total`` (n,); constraint errors
  ``constraint/position`` and ``constraint/velocity`` (n, n_C + n_J) (m or rad, m/s or rad/s): the contacts'
  directions, then one column per joint coupling (its g, G v);
* with the velocity-level step, ``contact/…`` (:func:`contact_arrays`): impulses, gaps at every stored state,
  forces, normals, active slots, slip speeds, points;
* ``trajectory.json`` — module names with their joint names, nq, nv; contact names with n_c; joint coupling names;
  the step that ran and its settings; energy drift, or with contact the energy lost; the contact columns' names;
* ``joint_motion.png``, ``constraint_error.png`` (with loops or couplings), ``energy.png``, ``contact.png`` (with
  contact, :func:`plot_contact`) (``output.plots``);
* ``animation.gif`` or ``animation.mp4`` (``output.animation``).
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

from .build import SystemFileError, key_name
from .constraints import compiled_check
from .locate import locate


def collision_report(system, state):
    """Geoms, candidate pairs and contact slots of the system's collision model and its gaps at ``state``
    (:func:`~mrds_jax.system.timestepping.contact_gaps`): the smallest gap (m; negative: penetration) with its pair,
    and the pairs that penetrate. None without geometry."""
    from ..system.timestepping import contact_gaps
    model = getattr(system, "collision", None)
    if model is None or not model.n_slots:
        return None
    per_pair = contact_gaps(system, state)
    closest = min(per_pair, key=per_pair.get)
    return dict(geoms=len(model.geoms), pairs=model.n_pairs, slots=model.n_slots, min_gap=per_pair[closest],
                closest_pair=closest, penetrating={n: g for n, g in per_pair.items() if g < -1e-9})


def check_built(built):
    """DOF, constraint count, consistency and conditioning of the initial state, without simulating: a dict.
    The rank of the constraints is that of Bᶜ = J H⁻¹ Jᵀ (H positive definite: rank Bᶜ = rank J); joint couplings
    count as one constraint each (their rows border Bᶜ), and their residuals |g|, |G v| join the errors by name.
    The joints with position limits are listed with their initial value (``joint_limits``; simulate enforces them),
    and the collision geometry with its gaps at the initial state (:func:`collision_report`)."""
    from ..system.couplings import constraint_rows
    from ..system.limits import joint_limits_at
    system, state = built.system, built.state
    nv = sum(m.nv for m in system.modules)
    n_C = system.connectivity.n_constraints + len(system.couplings)
    pos, vel, rank, cond = {}, {}, 0, 1.0
    if n_C:
        errors, (g, Gv), Bc = compiled_check()(system, state)
        names, _ = constraint_rows(system)          # contacts, then couplings
        pos = {n: float(np.abs(np.asarray(e)).max(initial=0.0)) for n, e in zip(names, tuple(errors.position) + tuple(g))}
        vel = {n: float(np.abs(np.asarray(e)).max(initial=0.0)) for n, e in zip(names, tuple(errors.velocity) + tuple(Gv))}
        w = np.linalg.eigvalsh(0.5 * (np.asarray(Bc) + np.asarray(Bc).T))
        rank = int(np.sum(w > 1e-10 * max(w.max(), np.finfo(float).tiny)))
        cond = float(w.max() / w.min()) if w.min() > 0 else float("inf")
    return dict(name=built.document.spec.name, modules={n: dict(nq=m.nq, nv=m.nv) for n, m in
                                                        zip(system.module_names, system.modules)},
                contacts={c.name: dict(kind=c.kind, n_c=int(c.n_c)) for c in system.contacts},
                couplings={c.name: dict(kind=c.kind, joints=[f"{m}.{j}" for m, j in c.joints],
                                        joints2=[f"{m}.{j}" for m, j in c.joints2]) for c in system.couplings},
                joint_limits=joint_limits_at(system, state),
                coordinates=nv, constraints=n_C, independent_constraints=rank, redundant_constraints=n_C - rank,
                dof=nv - rank, position_error=pos, velocity_error=vel,
                max_position_error=max(pos.values(), default=0.0), max_velocity_error=max(vel.values(), default=0.0),
                condition_number=cond, dtype=str(state.q[0].dtype), collision=collision_report(system, state))


def format_check(r):
    contacts = ", ".join(f"{n}: {c['kind']} n_c={c['n_c']}" for n, c in r["contacts"].items()) or "none"
    couplings = ", ".join(f"{n}: {c['kind']} {'+'.join(c['joints'])}" + (f" ~ {'+'.join(c['joints2'])}" if c["joints2"]
                                                                           else "") + f" |g| {r['position_error'][n]:.2e}"
                          for n, c in r["couplings"].items()) or "none"
    outside = [f"{n} q {lim['q']:.6g} outside [{lim['lower']:g}, {lim['upper']:g}]"
               for n, lim in r["joint_limits"].items() if not lim["inside"]]
    limits = ("outside at the initial state: " + ", ".join(outside)) if outside else "all inside at the initial state"
    lines = [f"system {r['name']!r}: {len(r['modules'])} modules, {r['coordinates']} velocity coordinates",
             f"  contacts: {len(r['contacts'])} ({contacts})",
             f"  joint couplings: {len(r['couplings'])} ({couplings})",
             f"  joint limits: {len(r['joint_limits'])} (enforced by simulate's contact step; {limits})",
             f"  constraints: {r['constraints']} ({r['independent_constraints']} independent, "
             f"{r['redundant_constraints']} redundant)",
             f"  degrees of freedom: {r['dof']}",
             f"  initial state: max position error {r['max_position_error']:.2e}, max velocity error "
             f"{r['max_velocity_error']:.2e}",
             f"  condition number of Bᶜ: {r['condition_number']:.3g}",
             f"  precision: {r['dtype']}"]
    c = r.get("collision")
    if c is not None:
        pen = ", ".join(f"{n} {g:.3g} m" for n, g in c["penetrating"].items()) or "none"
        lines.insert(3, f"  collision: {c['geoms']} geoms, {c['pairs']} candidate pairs ({c['slots']} contact slots); "
                        f"smallest gap {c['min_gap']:.3g} m ({c['closest_pair']}); penetrating at the start: {pen}")
    return "\n".join(lines)


def _chunks(n_steps, decimation, n_chunks=20):
    """Steps per block: a multiple of ``decimation``, about ``n_steps / n_chunks``."""
    per = max(decimation, int(round(n_steps / n_chunks / decimation)) * decimation)
    out = [per] * (n_steps // per)
    if n_steps % per:
        out.append(n_steps % per)
    return out


class InconsistentInitialState(SystemFileError):
    """The initial state violates the constraints: names the file, the ``[initial]`` line, the largest position
    and velocity errors with their contacts, and what to change."""


def _worst(errors):
    """(contact, error) of the largest entry of {contact: error}, or (None, 0.0)."""
    return max(errors.items(), key=lambda item: item[1], default=(None, 0.0))


def initial_state_error(built, report, tol=1e-6):
    """An :class:`InconsistentInitialState` when the initial state of ``report`` (:func:`check_built`) violates
    a contact by more than ``tol``, else None."""
    (cp, ep), (cv, ev) = _worst(report["position_error"]), _worst(report["velocity_error"])
    if ep <= tol and ev <= tol:
        return None
    doc = built.document
    if doc.spec.initial.make_consistent:
        advice = (f"make_consistent did not close the loops (residuals {built.position_residual:.2g}, "
                  f"{built.velocity_residual:.2g}): check that the contacts can hold together (their frames, "
                  "ground_position), or start [initial] q nearer a closed configuration")
        path = ("initial", "q")
    else:
        advice = "set make_consistent = true under [initial], or give q and v that satisfy every contact"
        path = ("initial", "make_consistent")
    line, _ = locate(doc.lines, path)
    return InconsistentInitialState(
        doc.path, line, key_name(path),
        f"the initial state violates the contacts: position error {ep:.3g}" + (f" ({cp})" if cp else "") +
        f", velocity error {ev:.3g}" + (f" ({cv})" if cv else "") + f", more than {tol:g}; {advice}")


def checked(built, part, t_start):
    """``part`` (a block of the run from ``t_start``), or a :class:`SystemFileError` at ``[simulation] dt`` when
    its state became non-finite: with the file's settings the simulation diverged."""
    from ..integrate import SimulationError, check_trajectory
    from ..integrate.rollout import nonfinite_description
    try:
        if not hasattr(part, "last_finite"):          # a velocity-level (contact) trajectory
            what = nonfinite_description(part)
            if what is not None:
                raise SimulationError(what)
            return part
        return check_trajectory(part)
    except SimulationError as e:
        raise built.document.error(("simulation", "dt"), f"the simulation diverged in the block from t = "
                                   f"{t_start:.4g} s: {e}; try a smaller dt (or set baumgarte under "
                                   "[simulation.integration])") from None


def run_simulation(built, progress=True, stream=None, tol=1e-6, timings=None):
    """Integrate the built system for ``simulation.duration``: a Trajectory. The initial state is checked
    first (:func:`check_built`, the program ``mrds-jax check`` runs); compilation is its own phase (timed and
    printed), then a progress bar over the steps, so its ETA is about the work. ``timings`` (a dict), if
    given, receives the seconds spent in ``"compile"`` (compiling and running the first block) and
    ``"simulate"`` (the other blocks)."""
    import jax
    import jax.numpy as jnp
    from tqdm import tqdm

    from .. import system as S
    from ..integrate import Trajectory
    stream = sys.stderr if stream is None else stream
    error = initial_state_error(built, check_built(built), tol)
    if error is not None:
        raise error
    sim = built.document.spec.simulation
    n_steps = max(1, int(round(sim.duration / sim.dt)))
    decimation = min(built.document.spec.output.decimation, n_steps)
    blocks = _chunks(n_steps, decimation)
    integration = S.Integration(integrator=sim.integration.integrator, stabilisation=built.stabilisation)
    settings = dict(forces=built.forces, tau=built.tau, checks=S.Checks(enabled=False),
                    output=S.Output(decimation=decimation), contact=S.ContactStep(settings=built.contact_settings))

    def block(state, n, t):
        """``n`` steps from ``state`` at time ``t`` (the checks are this function's own: :func:`checked`)."""
        return S.simulate(built.system, state, sim.dt, n, integration=integration._replace(t0=t), **settings)
    state, t, parts = built.state, 0.0, []
    t0 = time.perf_counter()
    print(f"compiling the {sum(m.nv for m in built.system.modules)}-coordinate system "
          f"({len(set(blocks))} block size{'s' if len(set(blocks)) > 1 else ''})...", file=stream, flush=True)
    first = checked(built, block(state, blocks[0], t), t)
    jax.block_until_ready(first.q)
    for n in sorted(set(blocks[1:]) - {blocks[0]}):     # compile the last, shorter block too
        block(state, n, t)
    t_compile = time.perf_counter() - t0
    print(f"compiled and ran the first block in {t_compile:.1f} s", file=stream, flush=True)
    t0 = time.perf_counter()
    parts.append(first)
    bar = tqdm(total=n_steps, initial=blocks[0], unit="step", disable=not progress, file=stream,
               desc="simulating")
    for n in blocks[1:]:
        last = parts[-1]
        state = S.SystemState(tuple(q[-1] for q in last.q), tuple(v[-1] for v in last.v))
        t = float(last.t[-1])
        parts.append(checked(built, block(state, n, t), t))
        bar.update(n)
    bar.close()
    if timings is not None:
        timings.update(compile=t_compile, simulate=time.perf_counter() - t0)
    cat = lambda xs: jnp.concatenate([xs[0]] + [x[1:] for x in xs[1:]])  # noqa: E731  (drop repeated starts)
    n_mod = len(built.system.modules)
    if not isinstance(first, Trajectory):             # velocity-level: the fields along the stored states, joined
        return first._replace(**{f: jax.tree.map(lambda *xs: cat(xs), *[getattr(p, f) for p in parts])
                                 for f in first._fields if f not in ("first_nonfinite", "dt")})
    traj = Trajectory(t=cat([p.t for p in parts]), q=tuple(cat([p.q[k] for p in parts]) for k in range(n_mod)),
                      v=tuple(cat([p.v[k] for p in parts]) for k in range(n_mod)),
                      first_nonfinite=parts[0].first_nonfinite)
    return traj


def write_outputs(built, traj, out, animation=None, viewer=False):
    """trajectory.npz / .json, plots and the animation (as ``[output]`` asks, or ``animation`` = "gif", "mp4",
    "none" instead), and with ``viewer`` the browser viewer page ``viewer.html``
    (:func:`mrds_jax.viz.viewer.viewer_html`); returns (written paths, metadata)."""
    from .. import system as S
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    system = built.system
    diag = S.trajectory_diagnostics(system, traj, built.forces, built.stabilisation)
    arrays = {"t": np.asarray(traj.t)}
    for name, q, v in zip(system.module_names, traj.q, traj.v):
        arrays[f"q/{name}"], arrays[f"v/{name}"] = np.asarray(q), np.asarray(v)
    for field in ("kinetic", "potential", "elastic", "total"):
        arrays[f"energy/{field}"] = np.asarray(getattr(diag.energy, field))
    arrays["constraint/position"] = np.asarray(diag.position_error).reshape(len(arrays["t"]), -1)
    arrays["constraint/velocity"] = np.asarray(diag.velocity_error).reshape(len(arrays["t"]), -1)
    contact = hasattr(traj, "impulses")               # the velocity-level step: contact impulses, gaps, active set
    if contact:
        arrays.update(contact_arrays(system, traj))
    np.savez(out / "trajectory.npz", **arrays)
    spec = built.document.spec
    simulation = spec.simulation.model_dump()
    simulation["decimation"] = spec.output.decimation
    if contact:                                       # the velocity-level step has no integrator to choose
        simulation["integration"].pop("integrator")
    else:                                             # nor has the acceleration-level step a contact solver
        simulation.pop("contact")
    E = arrays["energy/total"]
    meta = dict(name=spec.name, source=str(built.document.path),
                modules={n: dict(nq=m.nq, nv=m.nv, joints=list(m.topology.joint_names))
                         for n, m in zip(system.module_names, system.modules)},
                contacts=[dict(name=c.name, kind=c.kind, n_c=int(c.n_c)) for c in system.contacts],
                couplings=[c.name for c in system.couplings],
                step=STEP_NAMES["contact" if contact else simulation["integration"]["integrator"]],
                simulation=simulation, dtype=str(traj.q[0].dtype),
                max_position_error=float(np.abs(arrays["constraint/position"]).max(initial=0.0)))
    if contact:     # energy leaves through friction and impacts: report what was lost, and any gain as a defect
        meta.update(contact_names(system), energy_lost=float(E[0] - E[-1]),
                    max_energy_gain=float(max(np.max(E - E[0]), 0.0)))
    else:
        meta.update(energy_drift=float(np.abs(E - E[0]).max()))
    (out / "trajectory.json").write_text(json.dumps(meta, indent=2))
    written = [out / "trajectory.npz", out / "trajectory.json"]
    if spec.output.plots:
        written += plot_trajectory(arrays, system, out, contact)
        if contact:
            written += plot_contact(arrays, meta, out)
    animation = animation or spec.output.animation
    if animation != "none" or viewer:
        from ..viz import animate, scene
        sc = scene(system, traj, forces=viewer, tau=built.tau)    # the run's joint forces for the contact forces
    if animation != "none":
        written.append(animate(sc, out / f"animation.{animation}", fps=spec.output.fps, title=spec.name))
    if viewer:
        from ..viz.viewer import viewer_html
        viewer_html(sc, out / "viewer.html", fps=spec.output.fps, title=spec.name)
        written.append(out / "viewer.html")
    return written, meta


STEP_NAMES = {
    "contact": "velocity-level Moreau-Jean step with hard contact and limits (mrds_jax.system.timestepping)",
    "rk4_compact": "RK4 on the compact (independent-coordinate) state, acceleration level",
    "rk4": "RK4 on the full state, acceleration level",
    "euler": "explicit Euler on the full state, acceleration level"}


def contact_arrays(system, traj):
    """The contact part of ``trajectory.npz``: impulses (N s, every row), gaps (m or rad, at every stored state,
    limit rows then slots), each slot's force (N, world axes, mean over the step), whether it carries load, its
    slip speed (m/s) and point (m)."""
    n = len(np.asarray(traj.t))
    slots = int(np.asarray(traj.points).shape[1])
    return {"contact/impulses": np.asarray(traj.impulses), "contact/gaps": np.asarray(traj.gaps),
            "contact/forces": np.asarray(traj.contact_forces(system)),
            "contact/active": np.asarray(traj.active_set(system)),
            "contact/slip": np.asarray(traj.slip_speeds(system)) if slots else np.zeros((n, 0)),
            "contact/points": np.asarray(traj.points), "contact/normals": np.asarray(traj.frames)[:, :, 0, :]}


def contact_names(system):
    """The names behind the contact arrays' columns: per slot its collision pair (``geom1/geom2``); the limited
    joints, and per limit row (the gap columns before the slots') its joint and side: ``module.joint (lower)``,
    ``(upper)`` or ``(cone)`` (a spherical joint's cone limit)."""
    from ..system.timestepping import collision_model_of, limit_rows
    model = collision_model_of(system)
    pairs = [] if model is None else [f"{model.geoms[i].name}/{model.geoms[j].name}" for i, j in model.pairs]
    slot_pair = [] if model is None else [int(k) for k in np.asarray(model.slot_pair)]
    limits = limit_rows(system)
    return dict(collision_pairs=pairs, slot_pair=slot_pair,
                limited_joints=[j[-1] for j in limits.joints] + [c[-1] for c in limits.cones] +
                [t[-1] for t in limits.tendons],
                limit_rows=limits.row_names())


def coordinate_names(module):
    """One label per position coordinate: the joint's name, with an index where a joint has several (a ball
    joint's quaternion: ``coupler[0]`` ... ``coupler[3]``)."""
    labels = []
    for joint, sl in zip(module.topology.joint_names, module.topology.q_slices):
        n = sl.stop - sl.start
        labels += [joint] if n == 1 else [f"{joint}[{i}]" for i in range(n)]
    return labels


# per joint kind, each position coordinate's quantity and its label suffix: angles, lengths and the (unitless)
# quaternion components each get their own axis
ANGLE, LENGTH, QUATERNION = "joint angle (rad)", "joint position (m)", "quaternion component (1)"
COORDINATES = {"revolute": [(ANGLE, "")], "screw": [(ANGLE, "")], "prismatic": [(LENGTH, "")],
               "universal": [(ANGLE, "[0]"), (ANGLE, "[1]")],
               "spherical": [(QUATERNION, f".{c}") for c in "wxyz"],
               "free": [(LENGTH, f".{c}") for c in "xyz"] + [(QUATERNION, f".q{c}") for c in "wxyz"],
               "planar_free": [(LENGTH, ".x"), (LENGTH, ".y"), (ANGLE, ".θ")]}


def coordinate_groups(module):
    """{quantity: [(column, label)]} of a module's position coordinates, in the order angle, length,
    quaternion (a joint kind this table does not know keeps its columns under "q (as the joint defines it)")."""
    groups = {}
    kinds = getattr(module.topology, "joint_kinds", ())
    for j, (joint, sl) in enumerate(zip(module.topology.joint_names, module.topology.q_slices)):
        n = sl.stop - sl.start
        table = COORDINATES.get(kinds[j] if j < len(kinds) else None)
        if table is None or len(table) != n:
            table = [("q (as the joint defines it)", f"[{i}]" if n > 1 else "") for i in range(n)]
        for i, (quantity, suffix) in enumerate(table):
            groups.setdefault(quantity, []).append((sl.start + i, joint + suffix))
    order = [ANGLE, LENGTH, QUATERNION]
    return dict(sorted(groups.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def plot_trajectory(arrays, system, out, contact=False):
    """joint_motion.png (one axis per module and quantity: angles, positions, quaternion components),
    constraint_error.png (where the system has loops or couplings to close), energy.png (with ``contact``, also the
    energy lost since the start: friction and impacts dissipate it)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    t = arrays["t"]
    paths = []
    rows = [(name, quantity, cols) for name, module in zip(system.module_names, system.modules)
            for quantity, cols in coordinate_groups(module).items()]
    fig, axes = plt.subplots(max(len(rows), 1), 1, figsize=(9, 0.6 + 2.1 * max(len(rows), 1)), squeeze=False,
                             sharex=True)
    for ax, (name, quantity, cols) in zip(axes[:, 0], rows):
        for k, label in cols:
            ax.plot(t, arrays[f"q/{name}"][:, k], label=label)
        ax.set_ylabel(quantity, fontsize=8)
        ax.set_title(f"module {name!r}", fontsize=9, loc="left")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1 + len(cols) // 9)
    axes[-1, 0].set_xlabel("t (s)")
    fig.suptitle("joint motion")
    fig.tight_layout()
    paths.append(out / "joint_motion.png")
    fig.savefig(paths[-1], dpi=90)
    plt.close(fig)
    err = np.abs(arrays["constraint/position"])
    if err.shape[1]:                                  # nothing to close, nothing to plot
        fig, ax = plt.subplots(figsize=(7, 3))
        slices = system.connectivity.constraint_slices()
        for c, sl in zip(system.contacts, slices):
            ax.semilogy(t, np.maximum(err[:, sl].max(axis=1), 1e-18), label=c.name)
        ax.set(xlabel="t (s)", ylabel="largest position error (m or rad)",
               title="constraint error per contact (loop closure, log scale)")
        ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        paths.append(out / "constraint_error.png")
        fig.savefig(paths[-1], dpi=90)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3))
    for field in ("kinetic", "potential", "elastic", "total"):
        ax.plot(t, arrays[f"energy/{field}"], label=field)
    title = "energy: kinetic, potential, elastic and their total"
    if contact:
        E = arrays["energy/total"]
        ax.plot(t, E[0] - E, "k--", label="lost since t = 0: E(0) − E(t)")
        title += ";\nfriction and impacts dissipate, applied forces add their work"
    ax.set(xlabel="t (s)", ylabel="energy (J)", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out / "energy.png")
    fig.savefig(paths[-1], dpi=90)
    plt.close(fig)
    return paths


def _by_pair(values, slot_pair, n_pairs, reduce):
    """(n, n_pairs) ``reduce`` (np.sum, np.max, np.min) over each pair's slots of ``values`` (n, n_slots)."""
    return np.stack([reduce(values[:, slot_pair == k], axis=1) for k in range(n_pairs)], axis=1) \
        if n_pairs else np.zeros((values.shape[0], 0))


def contact_series(arrays, meta):
    """Per collision pair, at each stored state: normal force (N), friction force (N, the magnitude of the pair's
    tangential force), slip speed (m/s, the fastest of its slots that carry load) and smallest gap (m); each the
    mean over the step that produced the state. A dict of (n, n_pairs) arrays."""
    slot_pair = np.asarray(meta["slot_pair"], dtype=int)
    n_pairs, n_slots = len(meta["collision_pairs"]), len(slot_pair)
    lam = arrays["contact/impulses"][:, arrays["contact/impulses"].shape[1] - 3 * n_slots:].reshape(-1, n_slots, 3)
    force = arrays["contact/forces"]
    normal = lam[:, :, 0] / meta["simulation"]["dt"]
    tangential = force - normal[..., None] * arrays["contact/normals"]
    friction = np.stack([np.linalg.norm(tangential[:, slot_pair == k].sum(axis=1), axis=-1)
                         for k in range(n_pairs)], axis=1) if n_pairs else np.zeros((len(force), 0))
    gap = arrays["contact/gaps"][:, arrays["contact/gaps"].shape[1] - n_slots:]
    slip = np.where(arrays["contact/active"], arrays["contact/slip"], 0.0)
    return dict(normal=_by_pair(normal, slot_pair, n_pairs, np.sum), friction=friction,
                slip=_by_pair(slip, slot_pair, n_pairs, np.max), gap=_by_pair(gap, slot_pair, n_pairs, np.min))


MAX_PAIRS_PLOTTED = 10


def plot_contact(arrays, meta, out):
    """contact.png: per collision pair that carries load (the :data:`MAX_PAIRS_PLOTTED` most loaded), its normal and
    friction forces (:func:`contact_series`) and slip speed; for the pairs that come nearest, the smallest gap; where
    the system has joint limits, the smallest margin of the nearest ones. Axes labelled with units."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    t, pairs = arrays["t"], meta["collision_pairs"]
    series = contact_series(arrays, meta) if pairs else {}
    loaded = [k for k in range(len(pairs)) if series["normal"][:, k].max() > 0.0] if pairs else []
    loaded = sorted(loaded, key=lambda k: -series["normal"][:, k].max())[:MAX_PAIRS_PLOTTED]
    near = (sorted(range(len(pairs)), key=lambda k: series["gap"][:, k].min())[:MAX_PAIRS_PLOTTED] if pairs else [])
    joints = meta["limited_joints"]
    panels = []
    if pairs:
        panels += [("normal", "normal force (N)", loaded), ("friction", "friction force (N)", loaded),
                   ("slip", "slip speed (m/s)", loaded), ("gap", "smallest gap (m); < 0: penetration", near)]
    if joints:
        panels.append(("limits", "smallest margin to a joint limit (rad or m)", joints))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.6 + 2.0 * len(panels)), squeeze=False, sharex=True)
    for ax, (key, label, which) in zip(axes[:, 0], panels):
        if key == "limits":
            rows = meta["limit_rows"]
            gaps = arrays["contact/gaps"][:, :len(rows)]
            margin = np.stack([gaps[:, [r for r, name in enumerate(rows) if name.rsplit(" (", 1)[0] == joint]]
                               .min(axis=1) for joint in joints], axis=1)
            for j in sorted(range(len(joints)), key=lambda j: margin[:, j].min())[:MAX_PAIRS_PLOTTED]:
                ax.plot(t, margin[:, j], label=joints[j])
            ax.axhline(0.0, color="k", lw=0.6)
        else:
            for k in which:
                ax.plot(t, series[key][:, k], label=pairs[k])
            if key == "gap":
                ax.axhline(0.0, color="k", lw=0.6)
            if not which:
                ax.text(0.5, 0.5, "no pair carried load", transform=ax.transAxes, ha="center", va="center")
        ax.set_ylabel(label, fontsize=8)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("t (s)")
    fig.suptitle("contact per collision pair (forces: mean over each step) and joint-limit margins" if pairs and joints
                 else "contact per collision pair (forces: mean over each step)" if pairs else "joint-limit margins")
    fig.tight_layout()
    path = out / "contact.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]
