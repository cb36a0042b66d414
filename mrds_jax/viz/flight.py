"""What ``mrds-jax simulate --design`` writes: the optimised CKCM end-effector flying its task, seen.

For each path the multibody plant flew (:func:`mrds_jax.ckcm.design.simulation.simulate_design`), in ``out``:

* ``actuator_forces.png``: the six legs' applied forces (N) against time (s), with the optimiser's peak force
  (its own model, at its path samples) as dashed lines, so both peaks are on one labelled plot;
* ``tracking_error.png``: the payload's position error and the largest ball-joint gap (m, log scale);
* ``animation.gif`` (or ``.mp4``): the six legs and the payload in 3-D with the time;
* with ``viewer=True``, ``viewer.html``: the same in the browser viewer (:func:`mrds_jax.viz.viewer.viewer_html`);
* ``flight.npz``: ``t``, ``forces`` (n, 6) N, ``position_error`` (n,) m, ``closure_error`` (n, 6) m.

A task of several paths writes one set per path, the files' names ending in ``_path<k>``.
"""
from pathlib import Path

import numpy as np

MAX_FRAMES = 60


def _plot_forces(t, forces, peak_optimiser, designed_with, plant, path):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for i in range(forces.shape[1]):
        ax.plot(t, forces[:, i], lw=1.2, label=f"leg {i + 1}")
    for sign in (1, -1):
        ax.axhline(sign * peak_optimiser, color="k", ls="--", lw=0.8,
                   label=f"± {peak_optimiser:.1f} N:\noptimiser's peak" if sign > 0 else None)
    peak = float(np.abs(forces).max())
    ax.set(xlabel="t (s)", ylabel="actuator force (N)")
    ax.set_title(f"actuator forces flying the task: peak {peak:.1f} N in the plant, {plant}\n"
                 f"dashed: the optimiser's peak, {designed_with}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_errors(t, position_error, closure_error, path):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4), sharex=True)
    ax[0].semilogy(t, np.maximum(position_error, 1e-16), color="C0", label="payload position error")
    ax[0].set(xlabel="t (s)", ylabel="|position error| (m)", title="tracking: payload vs the task")
    ax[1].semilogy(t, np.maximum(closure_error.max(axis=1), 1e-18), color="C3", label="largest of the six")
    ax[1].set(xlabel="t (s)", ylabel="ball-joint gap (m)", title="loop closure: the six ball joints")
    for a in ax:
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_flight(design, runs, out, animation="gif", viewer=False, fps=20):
    """Write the plots, the animation (``animation``: "gif", "mp4" or "none"), the data and, with ``viewer``,
    the browser viewer page of ``runs`` (``simulate_design(design)``) into the folder ``out``; returns the
    written paths."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from ..ckcm import multibody as MB
    from ..ckcm.design import model_description
    from . import animate, scene
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    legs = design.problem.get("legs", "bench")
    designed_with = model_description(design.problem["model"], legs)
    plant = f"{model_description('multibody', legs)}, computed torque"
    system = MB.build_ckcm_system(design.params, legs)
    written = []
    for k, run in enumerate(runs):
        r = run["result"]
        suffix = f"_path{k}" if len(runs) > 1 else ""
        t = np.asarray(r.t)
        forces, pos, gap = (np.asarray(x) for x in (r.forces, r.position_error, r.closure_error))
        np.savez(out / f"flight{suffix}.npz", t=t, forces=forces, position_error=pos, closure_error=gap)
        written.append(out / f"flight{suffix}.npz")
        written.append(_plot_forces(t, forces, design.after["peak_force"], designed_with, plant,
                                    out / f"actuator_forces{suffix}.png"))
        written.append(_plot_errors(t, pos, gap, out / f"tracking_error{suffix}.png"))
        if animation == "none" and not viewer:
            continue
        sc = scene(system, r.trajectory)
        every = max(1, len(sc.t) // MAX_FRAMES)     # at most MAX_FRAMES frames: the page and the GIF stay small
        sc = sc.subsampled(every)
        title = f"optimised CKCM end-effector ({', '.join(f'{n} {v:.3g}' for n, v in design.x.items())})"
        if animation != "none":
            written.append(animate(sc, out / f"animation{suffix}.{animation}", fps=fps, title="optimised CKCM"))
        if viewer:
            from .viewer import viewer_html
            viewer_html(sc, out / f"viewer{suffix}.html", fps=fps, title=title)
            written.append(out / f"viewer{suffix}.html")
    return written
