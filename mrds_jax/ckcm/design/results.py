"""The outcome of a design optimisation: ``DesignResult`` (best design, before/after metrics, per-start
summaries, the per-step log), saved to and loaded from one JSON file, and its plots.

The file is the hand-over to simulation: ``load_design(path).params`` is a ``CKCMParams`` and
``load_design(path).task`` the task it was optimised for (``simulate_design`` runs it; ``mrds-jax simulate
--design path`` from the shell).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import jax.numpy as jnp

from ...validation import InputError
from ..params import CKCMParams

FORMAT = "mrds_jax.ckcm.design/1"
PARAM_FIELDS = ("r_A", "r_B", "theta_A", "theta_B", "m", "m1", "l_s", "l_m", "M", "I_payload", "g", "z_nominal")


class DesignFileError(InputError):
    """A file that is not a saved design result, or a damaged one."""


PER_LEG_FIELDS = ("leg_geometry", "leg_masses")   # optional: per-leg designs (the full space)


def params_to_json(p: CKCMParams):
    d = {k: np.asarray(getattr(p, k)).tolist() for k in PARAM_FIELDS}
    d.update({k: np.asarray(getattr(p, k)).tolist() for k in PER_LEG_FIELDS if getattr(p, k) is not None})
    return d


def _numbers(value, where):
    """``value`` when it is a finite number or a (nested) list of them; a DesignFileError naming ``where``
    (e.g. ``params.theta_A``) otherwise."""
    def ok(v):
        if isinstance(v, list):
            return bool(v) and all(ok(x) for x in v)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
    if not ok(value):
        raise DesignFileError(f"{where}: expected a finite number (or a list of them), got {json.dumps(value)[:60]}")
    return value


def _object(d, key, where="", required=()):
    """``d[key]`` when it is a JSON object holding ``required``; a DesignFileError naming the key otherwise."""
    name = f"{where}{key}"
    if key not in d:
        raise DesignFileError(f"the key {name!r} is missing")
    v = d[key]
    if not isinstance(v, dict):
        raise DesignFileError(f"{name}: expected a JSON object, got {type(v).__name__} {json.dumps(v)[:60]}")
    missing = [k for k in required if k not in v]
    if missing:
        raise DesignFileError(f"{name}: the key(s) {missing} are missing")
    return v


def params_from_json(d, where="params") -> CKCMParams:
    from ..params import make_params
    if not isinstance(d, dict):
        raise DesignFileError(f"{where}: design parameters must be a JSON object, got {type(d).__name__}")
    missing = [k for k in PARAM_FIELDS if k not in d]
    if missing:
        raise DesignFileError(f"{where}: design parameters lack {missing}")
    for k in PARAM_FIELDS + PER_LEG_FIELDS:
        if k in d:
            _numbers(d[k], f"{where}.{k}")
    from ..params import validate_params
    try:
        p = make_params(**{k: d[k] for k in PARAM_FIELDS}, validate=not any(k in d for k in PER_LEG_FIELDS))
        p = p.replace(**{k: d[k] for k in PER_LEG_FIELDS if k in d})
        return validate_params(p)
    except (ValueError, TypeError) as e:
        raise DesignFileError(f"{where}: {str(e).splitlines()[0]}") from None


def start_summary(space, i, x0, c, feasible):
    """One start's line of the result (``optimize.finish``)."""
    x = np.asarray(space.to_box(jnp.asarray(c.best_u[i] if feasible else c.least_u[i])))
    return {"start": i, "x0": space.describe(x0), "x": space.describe(x), "feasible": bool(feasible),
            "best_objective": float(c.best_objective[i]) if feasible else None,
            "best_iteration": int(c.best_iteration[i]), "least_violation": float(c.least_violation[i]),
            "diverged_at": int(c.diverged_at[i]), "evaluations": int(c.evaluations[i])}


@dataclass
class DesignResult:
    """status: "converged" (a feasible design was found), "infeasible" or "diverged"; message: one line for
    people; params / initial_params: the best and the start design (``CKCMParams``, the task's payload);
    x / x_initial: the free variables in display units (deg, kg, m); before / after: exact metrics and the
    largest scaled violation per constraint group; task: the task spec; problem, settings: what was solved
    how; history: per step, per start; starts: per-start summaries; evaluations: objective-and-gradient
    evaluations in all (line-search trials included); verification: ``verify_design``'s report, if run."""
    status: str
    message: str
    params: CKCMParams
    initial_params: CKCMParams
    x: dict
    x_initial: dict
    before: dict
    after: dict
    task: dict | None
    problem: dict
    settings: dict
    history: dict
    starts: list
    evaluations: int
    verification: dict | None = None

    @property
    def peak_reduction(self):
        """Relative reduction of the peak actuator force, 1 − after/before."""
        return 1 - self.after["peak_force"] / self.before["peak_force"]

    def task_object(self):
        from .task import Task
        return None if self.task is None else Task.from_json(self.task)

    def to_json(self):
        d = {k: getattr(self, k) for k in ("status", "message", "x", "x_initial", "before", "after", "task",
                                           "problem", "settings", "history", "starts", "evaluations",
                                           "verification")}
        d["params"], d["initial_params"] = params_to_json(self.params), params_to_json(self.initial_params)
        d["format"] = FORMAT
        return d

    def save(self, path):
        """Write the result as JSON (atomically: a crash never leaves a half-written file)."""
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1))
        os.replace(tmp, path)
        return path

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict):
            raise DesignFileError(f"not a design result (a JSON {type(d).__name__}, expected an object)")
        if d.get("format") != FORMAT:
            raise DesignFileError(f"not a design result (format {d.get('format')!r}, expected {FORMAT!r})")
        missing = [k for k in ("params", "initial_params", "x", "after", "problem") if k not in d]
        if missing:
            raise DesignFileError(f"not a complete design result: it lacks {missing}")
        for key in ("x", "x_initial", "before", "after"):            # what simulate and the reports read
            if key in d or key in ("x", "after"):
                for name, value in _object(d, key, required=("peak_force",) if key == "after" else ()).items():
                    _numbers(value, f"{key}.{name}")
        problem = _object(d, "problem", required=("model",))
        from .objectives import LEG_MODELS
        for key, known in (("model", ("paper", "multibody")), ("legs", LEG_MODELS)):
            if key in problem and problem[key] not in known:
                raise DesignFileError(f"problem.{key}: expected one of {list(known)}, got {json.dumps(problem[key])[:60]}")
        if d.get("status") is not None and not isinstance(d["status"], str):
            raise DesignFileError(f"status: expected a string, got {json.dumps(d['status'])[:60]}")
        kw = {k: d.get(k) for k in ("status", "message", "x", "x_initial", "before", "after", "task", "problem",
                                    "settings", "history", "starts", "evaluations", "verification")}
        result = cls(params=params_from_json(d["params"]),
                     initial_params=params_from_json(d["initial_params"], "initial_params"), **kw)
        if d.get("task") is not None:
            try:
                result.task_object()
            except InputError as e:
                raise DesignFileError(f"task: {e}") from None
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise DesignFileError(f"task: not a task description ({type(e).__name__}: {e})") from None
        return result


def load_design(path) -> DesignResult:
    """Read a result written by ``DesignResult.save`` / ``optimize(out_dir=...)``; raises ``DesignFileError``
    naming the file when it is missing, not JSON, or not a design result."""
    path = Path(path)
    if path.is_dir():
        path = path / "design.json"
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise DesignFileError(f"no design file at {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DesignFileError(f"{path}: not JSON ({e}); the file is damaged or cut short: write it again with "
                              "mrds-jax optimize") from None
    except OSError as e:
        raise DesignFileError(f"cannot read the design file {path}: {e.strerror}") from None
    try:
        return DesignResult.from_json(d)
    except DesignFileError as e:
        raise DesignFileError(f"{path}: {e}") from None


# --- plots ----------------------------------------------------------------------------------------------
def model_label(result):
    """The model the result's forces come from, in words."""
    from .objectives import model_description
    return model_description(result.problem["model"], result.problem.get("legs", "bench"))


def _finish(fig, path):
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_history(result: DesignResult, path=None):
    """Objective, largest constraint violation and peak force per step, every start (matplotlib Figure)."""
    import matplotlib.pyplot as plt
    h = {k: np.asarray(v) for k, v in result.history.items()}
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    steps = np.arange(len(h["objective"]))
    starts = [f"start {k}" for k in range(np.shape(h["objective"])[1])] if np.ndim(h["objective"]) == 2 else "start"
    ax[0].plot(steps, h["objective"], lw=1, label=starts)
    ax[0].legend(fontsize=8)
    ax[0].set(xlabel="step", ylabel=f"{result.problem['demand']} / its value at the start (1)",
              title="objective (the smooth measure minimised)")
    ax[1].semilogy(steps, np.maximum(h["violation"], 1e-6), lw=1, label=starts)
    ax[1].legend(fontsize=8)
    ax[1].axhline(1e-6, color="k", lw=0.5)
    ax[1].set(xlabel="step", ylabel="largest scaled violation max(g, 1e-6) (1)",
              title="constraint violation (≤ 0: feasible)")
    ax[2].plot(steps, h["peak_force"], lw=1, label=starts)
    ax[2].axhline(result.after["peak_force"], color="k", ls="--", lw=0.8, label="best feasible design")
    ax[2].set(xlabel="step", ylabel="peak actuator force (N)", title="peak actuator force (exact)")
    ax[2].legend()
    fig.suptitle(f"{result.settings['optimizer']} + augmented Lagrangian, {model_label(result)}, "
                 f"{len(result.starts)} start(s)")
    return _finish(fig, path)


def force_histories(result: DesignResult, dense=4):
    """(t, τ_before, τ_after): actuator forces (K, 6) of the start and the best design along the task at the
    samples of ``verify.dense_task`` (``dense`` times finer than the optimiser's), through the problem's model."""
    from .objectives import forces_in_chunks
    from .task import Task
    from .verify import dense_task
    sparse = result.task_object() or Task()
    task = dense_task(sparse, dense)
    model = (result.problem["model"], result.problem["legs"])
    s = task.samples(result.params)
    before = forces_in_chunks(result.initial_params, task.samples(result.initial_params), sparse.size, *model)[0]
    after = forces_in_chunks(result.params, s, sparse.size, *model)[0]
    total = sum(task.durations(result.params))
    dt = np.asarray(s.weight) * total
    return np.cumsum(dt) - dt, before, after


def plot_forces(result: DesignResult, path=None, dense=4):
    """Actuator force histories before and after along the task, six legs (matplotlib Figure)."""
    import matplotlib.pyplot as plt
    t, before, after = force_histories(result, dense)
    fig, ax = plt.subplots(2, 3, figsize=(13, 6), sharex=True)
    for i in range(6):
        a = ax.flat[i]
        a.plot(t, before[:, i], label="start design", color="C0")
        a.plot(t, after[:, i], label="optimised", color="C3")
        a.set(title=f"leg {i + 1}", xlabel="t (s)", ylabel="force (N)")
    ax.flat[0].legend()
    fig.suptitle(f"actuator forces along the task: peak {result.before['peak_force']:.1f} N → "
                 f"{result.after['peak_force']:.1f} N ({100 * result.peak_reduction:.1f} % less; {model_label(result)})")
    return _finish(fig, path)


def plot_geometry(result: DesignResult, path=None):
    """Top view of the attachment points of both platforms, start and optimised (matplotlib Figure)."""
    import matplotlib.pyplot as plt
    from ..params import base_points, payload_points
    fig, ax = plt.subplots(1, 2, figsize=(9, 4.5))
    for a, p, title in ((ax[0], result.initial_params, "start"), (ax[1], result.params, "optimised")):
        A, B = np.asarray(payload_points(p)), np.asarray(base_points(p))
        for i in range(6):
            a.plot([B[i, 0], A[i, 0]], [B[i, 1], A[i, 1]], color="0.6", lw=1)
        a.plot(*np.append(B, B[:1], 0)[:, :2].T, "o-", color="C0", label="base B_i")
        a.plot(*np.append(A, A[:1], 0)[:, :2].T, "s-", color="C3", label="payload A_i")
        for i in range(6):                      # the point numbers beside their markers, outwards
            for P, c in ((A, "C3"), (B, "C0")):
                d = P[i, :2] / max(np.linalg.norm(P[i, :2]), 1e-9)
                a.annotate(str(i + 1), P[i, :2], xytext=tuple(9 * d), textcoords="offset points", color=c,
                           ha="center", va="center", fontsize=8)
        a.margins(0.12)
        a.set(aspect="equal", xlabel="x (m)", ylabel="y (m)",
              title=f"{title}: θA = {np.degrees(float(p.theta_A)):.1f}°, θB = {np.degrees(float(p.theta_B)):.1f}°")
        a.plot([], [], color="0.6", lw=1, label="leg B_i → A_i (home pose)")
    fig.suptitle("attachment points seen from above (numbers: leg i)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(*ax[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_geometry_3d(result: DesignResult, path=None):
    """The machine in 3-D at its home pose, start and optimised side by side: base joints B_i, payload joints
    A_i and the six legs B_i A_i (Nguyen & Pooran eq. 9-10), per-leg geometry included (matplotlib Figure)."""
    import matplotlib.pyplot as plt
    from ..kinematics import home_pose, leg_vectors
    from ..params import base_points
    fig = plt.figure(figsize=(11, 5))
    for k, (p, title) in enumerate(((result.initial_params, "start"), (result.params, "optimised"))):
        a = fig.add_subplot(1, 2, k + 1, projection="3d")
        B = np.asarray(base_points(p))
        A = B + np.asarray(leg_vectors(p, home_pose(p)))
        for i in range(6):
            a.plot(*np.stack([B[i], A[i]]).T, color=f"C{i}", lw=2.5, label=f"leg {i + 1}")
        for P, c, name in ((B, "0.3", "base"), (A, "C3", "payload")):
            ring = np.append(P, P[:1], 0)
            a.plot(*ring.T, "o-", color=c, ms=4, lw=1)
            a.text(*P.mean(0), name, color=c)
        a.set(xlabel="x (m)", ylabel="y (m)", zlabel="z (m)",
              title=f"{title}: peak force {result.before['peak_force'] if k == 0 else result.after['peak_force']:.1f} N")
        from matplotlib.ticker import MaxNLocator
        for axis in (a.xaxis, a.yaxis, a.zaxis):           # few ticks: the labels do not run into each other
            axis.set_major_locator(MaxNLocator(4))
        a.tick_params(labelsize=7)
        a.set_box_aspect((1, 1, 0.9))
    fig.axes[0].legend(loc="upper left", fontsize=7)
    fig.suptitle(f"the machine at its home pose ({model_label(result)})")
    return _finish(fig, path)


def plot_force_distribution(result: DesignResult, path=None, dense=4, draws=None):
    """How the actuator forces are distributed, start against optimised: |τ| over every leg and task sample
    (``force_histories``), and, given ``draws`` = (peaks before, peaks after) (N) of the as-built machines of
    a robust problem (``problem.robust_peaks``), the distribution of their peak force (matplotlib Figure)."""
    import matplotlib.pyplot as plt
    _, before, after = force_histories(result, dense)
    fig, ax = plt.subplots(1, 1 if draws is None else 2, figsize=(6 if draws is None else 12, 3.8), squeeze=False)
    bins = np.linspace(0, max(np.abs(before).max(), np.abs(after).max()), 50)
    ax[0, 0].hist(np.abs(before).ravel(), bins, alpha=0.6, label="start design", color="C0")
    ax[0, 0].hist(np.abs(after).ravel(), bins, alpha=0.6, label="optimised", color="C3")
    ax[0, 0].set(xlabel="|actuator force| (N), every leg and task sample", ylabel="count",
                 title=f"forces along the task ({result.problem['model']} model)")
    ax[0, 0].legend()
    if draws is not None:
        b, a = (np.asarray(d, float) for d in draws)
        bins = np.linspace(min(b.min(), a.min()), max(b.max(), a.max()), 40)
        for d, c, label in ((b, "C0", "start design"), (a, "C3", "optimised")):
            ax[0, 1].hist(d, bins, alpha=0.6, color=c, label=f"{label}: 95th percentile {np.quantile(d, 0.95):.1f} N")
        ax[0, 1].set(xlabel="peak actuator force of one as-built machine (N, soft peak)", ylabel="machines",
                     title=f"manufacturing tolerances: {b.size} as-built machines")
        ax[0, 1].legend(fontsize=8)
    return _finish(fig, path)
