"""A design problem: design space, task, limits, dynamic model and demand measure, and the one pure
function everything else calls, ``evaluate(problem, data, x)``: objective, constraint values and the exact
metrics of the design vector x.

``Problem`` holds the static choices (hashable: it keys the compiled functions); ``ProblemData`` the arrays
(the start design, the sampled task, the scales).  ``make_problem`` builds and checks both.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import jax
import jax.numpy as jnp

from ...pytree import pytree_dataclass, replace
from ... import validation as check
from ..params import CKCMParams, nominal, validate_params
from . import objectives as O
from . import robust as R
from .constraints import (GROUPS, Limits, check_limits, constraint_values, limits_as_arrays, max_violations,
                          pair_distances)
from .space import DEFAULT_FREE, DesignSpace, DesignSpaceError, make_space, named_space
from .task import COMBINE, Task, TaskError, TaskSamples, ellipse_task


class InfeasibleBoundsError(DesignSpaceError):
    """The design box provably excludes every design that meets the limits."""


@dataclass(frozen=True)
class Problem:
    """Static choices of a design problem.

    The designer's limits are not here but in ``ProblemData`` (numbers: changing them does not recompile).
    model      "paper" or "multibody" (``objectives.MODELS``); legs: "bench" or "paper" (multibody only)
    demand     "peak", "rms", "power" (``objectives.DEMANDS``) or a callable (tau, speed, weight) -> scalar
    sharpness  β of the soft peak
    batch_size task samples (and Monte Carlo draws) evaluated as one vectorised batch; more run in sequence
               (``jax.lax.map``).  It changes the schedule, not the numbers: 16 suits a CPU; on a GPU a batch of
               all the draws runs them at once (more memory)
    robust     None (the nominal machine), "mean" or "quantile": the objective is that statistic of the soft
               peak force over the Monte Carlo draws of ``ProblemData.noise`` (``robust.py``; α = ``quantile``,
               kernel bandwidth ``quantile_width`` × the start design's peak force)
    combine    how the task's paths combine (``task.COMBINE``): "pooled" (one demand over all samples),
               "worst" (max of the paths' demands) or "weighted" (Σ w_p d_p, the weights in the task samples);
               ``make_problem`` takes it from the task
    """
    space: DesignSpace = field(default_factory=DesignSpace)
    model: str = "paper"
    legs: str = "bench"
    demand: str | Callable = "peak"
    sharpness: float = 100.0
    batch_size: int = 16
    robust: str | None = None
    quantile: float = 0.95
    quantile_width: float = 0.005
    combine: str = "pooled"

    def __post_init__(self):
        if self.model not in O.MODELS:
            raise ValueError(f"unknown dynamic model {self.model!r}; use one of {list(O.MODELS)}")
        if self.legs not in O.LEG_MODELS:
            raise ValueError(f"unknown leg mass model {self.legs!r}; use one of {list(O.LEG_MODELS)}")
        if not callable(self.demand) and self.demand not in O.DEMANDS:
            raise ValueError(f"unknown demand measure {self.demand!r}; use one of {list(O.DEMANDS)} "
                             "or a callable (tau, speed, weight) -> scalar")
        if not self.sharpness > 0:
            raise ValueError(f"sharpness must be > 0, got {self.sharpness}")
        object.__setattr__(self, "batch_size", check.count(self.batch_size, "batch_size", "Problem"))
        if self.robust is not None and self.robust not in R.STATISTICS:
            raise ValueError(f"unknown robust statistic {self.robust!r}; use one of {list(R.STATISTICS)} or None")
        if not 0 < self.quantile < 1:
            raise ValueError(f"quantile must lie in (0, 1), got {self.quantile}")
        if self.combine not in COMBINE:
            raise ValueError(f"unknown combination {self.combine!r} of the task's paths; use one of {list(COMBINE)}")

    @property
    def demand_name(self):
        return self.demand if isinstance(self.demand, str) else getattr(self.demand, "__name__", "custom")


@pytree_dataclass
class ProblemData:
    """Arrays of a design problem: the design the free variables are substituted into (``base``), the
    task samples, the designer's limits, the soft peak's scale (N) and the demand at the start design (the
    objective's unit); for a robust problem the Monte Carlo draws (S, ``robust.NOISE_SIZE``) and the
    ``robust.Tolerances``."""
    base: CKCMParams
    samples: TaskSamples
    limits: Limits
    force_scale: jax.Array
    demand_scale: jax.Array
    noise: jax.Array | None = None
    tolerances: R.Tolerances | None = None


@pytree_dataclass
class Evaluation:
    """``evaluate``'s output: objective (demand / demand at the start), demand (physical units),
    constraints {group: g ≤ 0}, violation {group: max g}, metrics {peak_force, rms_force, mean_power,
    max_condition, min_separation}."""
    objective: jax.Array
    demand: jax.Array
    constraints: dict
    violation: dict
    metrics: dict

    @property
    def max_violation(self):
        return jnp.max(jnp.stack(list(self.violation.values())))


def design_samples(space, samples: TaskSamples, base: CKCMParams, params: CKCMParams) -> TaskSamples:
    """The task samples as the design ``params`` sees them: with the payload mass M free, the payload is the
    design's (its inertia scaled by M / M_task: the same shape); with the nominal height free, every path moves
    with the home pose (z + z_nominal − z_nominal of the start design)."""
    changes = {}
    if "M" in space.free:
        changes.update(M=params.M, I_payload=samples.I_payload * (params.M / samples.M))
    if "z_nominal" in space.free:
        changes["pose"] = samples.pose.at[:, 2].add(params.z_nominal - base.z_nominal)
    return replace(samples, **changes) if changes else samples


def design_inputs(problem: Problem, data: ProblemData, x):
    """(``CKCMParams``, ``TaskSamples``) of design vector x (free variables of ``problem.space``): the design
    carrying its payload, and the task samples it flies (``design_samples``)."""
    params = problem.space.to_params(x, data.base)
    samples = design_samples(problem.space, data.samples, data.base, params)
    return params.replace(M=samples.M, I_payload=samples.I_payload), samples


def design_params(problem: Problem, data: ProblemData, x) -> CKCMParams:
    """The ``CKCMParams`` of design vector x (free variables of ``problem.space``), carrying the task's payload."""
    return design_inputs(problem, data, x)[0]


def forces_and_speeds(problem: Problem, params: CKCMParams, samples: TaskSamples):
    """(τ, l̇) of ``params`` at ``samples`` through the problem's model (``objectives.forces_and_speeds``)."""
    return O.forces_and_speeds(params, samples, problem.model, problem.legs, problem.batch_size)


def _demand(problem, tau, speed, weight, scale, demand=None):
    demand = problem.demand if demand is None else demand
    if callable(demand):
        return demand(tau, speed, weight)
    return O.demand(demand, tau, speed, weight, scale, problem.sharpness)


def path_demands(problem: Problem, tau, speed, samples: TaskSamples, scale, demand=None):
    """The demand of every path of the task on its own (P,) (``objectives.demand_per_path``; a callable demand
    gets the path's forces and speeds, zero elsewhere, and its renormalised weights)."""
    demand = problem.demand if demand is None else demand
    n_paths = samples.path_weight.shape[0]
    if callable(demand):
        mask, w = O.path_weights(samples.weight, samples.path_index, n_paths)
        return jax.vmap(lambda m, wp: demand(tau * m[:, None], speed * m[:, None], wp))(mask, w)
    return O.demand_per_path(demand, tau, speed, samples.weight, samples.path_index, n_paths, scale,
                          problem.sharpness)


def task_demand(problem: Problem, tau, speed, samples: TaskSamples, scale, demand=None):
    """The task's demand: over all samples pooled, or the paths' demands combined (``Problem.combine``)."""
    if problem.combine == "pooled":
        return _demand(problem, tau, speed, samples.weight, scale, demand)
    return O.combine_demands(path_demands(problem, tau, speed, samples, scale, demand), problem.combine,
                             samples.path_weight)


def evaluate(problem: Problem, data: ProblemData, x) -> Evaluation:
    """Objective, constraints and metrics of the design vector ``x`` (pure, jittable, differentiable)."""
    params, samples = design_inputs(problem, data, x)
    ev = evaluate_forces(problem, data, params, samples, *forces_and_speeds(problem, params, samples))
    return ev if problem.robust is None else robust_evaluation(problem, data, params, samples, ev)


def robust_peaks(problem: Problem, data: ProblemData, params: CKCMParams, samples: TaskSamples):
    """Soft peak force (N) of every Monte Carlo draw of the as-built machine (S,) (``robust.perturbed_params``;
    with several tasks combined, the paths' soft peaks combined as ``Problem.combine`` says); the draws go through ``jax.lax.map`` in batches of ``problem.batch_size``."""
    def peak(eps):
        tau = O.actuator_forces(R.perturbed_params(params, eps, data.tolerances), samples, problem.model,
                                problem.legs, problem.batch_size)
        return task_demand(problem, tau, None, samples, data.force_scale, "peak")
    return jax.lax.map(peak, data.noise, batch_size=min(problem.batch_size, data.noise.shape[0]))


def robust_evaluation(problem, data, params, samples, ev: Evaluation) -> Evaluation:
    """``ev`` (the nominal machine's evaluation) with the robust statistic of the peak force as demand and
    objective (metrics ``robust_peak`` and the draws' exact mean ``mean_peak``)."""
    peaks = robust_peaks(problem, data, params, samples)
    d = R.statistic(problem.robust, peaks, problem.quantile, problem.quantile_width * data.force_scale)
    metrics = dict(ev.metrics, robust_peak=d, mean_peak=jnp.mean(peaks))
    return Evaluation(d / data.demand_scale, d, ev.constraints, ev.violation, metrics)


def evaluate_forces(problem: Problem, data: ProblemData, params: CKCMParams, samples: TaskSamples, tau,
                    speed) -> Evaluation:
    """``evaluate`` of the design ``params`` given its leg forces τ and speeds l̇ at its task ``samples``."""
    metrics = O.demand_metrics(tau, speed, samples.weight)
    if problem.combine == "pooled":
        d = task_demand(problem, tau, speed, samples, data.force_scale)
    else:                                   # every path's demand reported (demand_path_<p>), then combined
        dp = path_demands(problem, tau, speed, samples, data.force_scale)
        metrics.update({f"demand_path_{i}": v for i, v in enumerate(dp)})
        d = O.combine_demands(dp, problem.combine, samples.path_weight)
    g = constraint_values(params, samples, metrics["peak_force"], data.limits)
    dA, dB = pair_distances(params)
    metrics["min_separation"] = jnp.minimum(jnp.min(dA), jnp.min(dB))
    metrics["max_condition"] = jnp.exp(jnp.log(data.limits.max_condition) * (1 + jnp.max(g["condition"])))
    return Evaluation(d / data.demand_scale, d, g, max_violations(g), metrics)


def check_bounds(problem: Problem, base: CKCMParams, lim: Limits):
    """Raise ``InfeasibleBoundsError`` when the box provably excludes every feasible design: the strength
    rule's fixed masses above the mass bounds (of any leg), a stroke narrower than twice its margin, or (Nguyen & Pooran eq. 2's
    pattern) attachment angles/radii whose most favourable corner still puts two joints closer than
    ``min_separation``."""
    space = problem.space
    lo = dict(zip(space.free, space.lower))
    hi = dict(zip(space.free, space.upper))

    def bound(side, name, leg=None):
        """The box's ``side`` (lo or hi) of ``name`` (of leg ``leg`` per leg), or the start design's value."""
        per_leg = f"{name}_{leg + 1}" if leg is not None else None
        if per_leg in side:
            return side[per_leg]
        if name in side:
            return side[name]
        from .space import variable_value
        return float(variable_value(base, per_leg, True) if per_leg else getattr(base, name))
    problems = []
    s = lim.strength
    for leg in (range(6) if space.per_leg else (None,)):
        which = "" if leg is None else f" (leg {leg + 1})"
        m1_hi, m_hi, m1_lo = bound(hi, "m1", leg), bound(hi, "m", leg), bound(lo, "m1", leg)
        if m1_hi < s.moving_fixed:
            problems.append(f"m1 <= {m1_hi:.4g} kg{which} but the strength rule needs m1 >= {s.moving_fixed:.4g} kg")
        if m_hi - m1_lo < s.stationary_fixed:
            problems.append(f"m - m1 <= {m_hi - m1_lo:.4g} kg{which} but the strength rule needs the stationary "
                            f"part >= {s.stationary_fixed:.4g} kg")
    l_s_hi = bound(hi, "l_s")
    width = min(l_s_hi, float(base.l_m))   # l_max - l_min = l_s + l_m - max(l_s, l_m)
    if width < 2 * lim.stroke_margin:
        problems.append(f"the stroke is at most {width:.4g} m wide, less than twice stroke_margin "
                        f"= {lim.stroke_margin:.4g} m")
    for name, r in (("theta_A", "r_A"), ("theta_B", "r_B")):
        if space.per_leg and name not in space.free:
            continue                        # per-leg angles: the start's separation is checked (check_start)
        # gaps between neighbours are θ and 120° − θ: the best θ in the box is the one nearest 60°
        th = float(np.clip(np.pi / 3, bound(lo, name), bound(hi, name)))
        gap = min(abs(np.sin(th / 2)), abs(np.sin((2 * np.pi / 3 - th) / 2)))
        d = 2 * bound(hi, r) * gap
        if d < lim.min_separation:
            problems.append(f"{name} in [{np.degrees(bound(lo, name)):.4g}, {np.degrees(bound(hi, name)):.4g}] deg "
                            f"with {r} <= {bound(hi, r):.4g} m puts two joints at most {d:.4g} m apart "
                            f"(< min_separation {lim.min_separation:.4g} m)")
    if problems:
        raise InfeasibleBoundsError("the design bounds exclude every feasible design: " + "; ".join(problems))


def check_start(problem: Problem, base: CKCMParams, task: Task, samples: TaskSamples, lim: Limits):
    """Refuse, before anything compiles, a start design that cannot fly its task (numpy, ``geometry``):
    attachment points closer than ``min_separation`` (``DesignSpaceError`` naming the points), two legs
    crossing — closer than ``min_leg_distance`` — at a task sample (naming the legs, the path and the sample),
    or a task pose outside the workspace of the start design (``TaskError`` naming the path, the sample and
    the legs beyond their stroke or not pointing up)."""
    from . import geometry as Gm
    try:
        validate_params(base, min_separation=lim.min_separation)
    except ValueError as e:
        raise DesignSpaceError(f"the start design: {e}") from None
    poses = np.asarray(samples.pose, float)
    lengths, up = Gm.leg_lengths_and_elevations(base, poses)
    l_min, l_max = (float(v) for v in base.stroke)
    for k in range(poses.shape[0]):
        bad = [f"leg {i + 1} {lengths[k, i]:.4g} m" for i in range(6) if not l_min <= lengths[k, i] <= l_max]
        bad += [f"leg {i + 1} not pointing up (sin elevation {up[k, i]:.3g})" for i in range(6) if not up[k, i] > 0]
        if bad:
            raise TaskError(f"{task.describe_sample(k)} at pose "
                            f"{np.round(poses[k], 4).tolist()} is outside the workspace of the start design "
                            f"(stroke [{l_min:.4g}, {l_max:.4g}] m): " + ", ".join(bad))
    d, (k, i, j) = Gm.closest_legs(base, poses)
    if d < float(lim.min_leg_distance):
        raise DesignSpaceError(f"legs {i + 1} and {j + 1} of the start design cross: {d:.4g} m apart "
                               f"(< min_leg_distance {float(lim.min_leg_distance):.4g} m) on "
                               f"{task.describe_sample(k)}; move their attachment points")


@functools.lru_cache(maxsize=None)
def _scales(problem: Problem):
    """jit of (τ, l̇, w) ↦ (peak |τ|, demand with the soft peak's scale at that peak): the start design's scales."""
    def scales(tau, speed, samples):
        peak = jnp.max(jnp.abs(tau))
        return peak, task_demand(problem, tau, speed, samples, peak)
    return jax.jit(scales)


def make_problem(task: Task | None = None, free=DEFAULT_FREE, bounds=None, limits: Limits | None = None,
                 model="paper", legs="bench", demand="peak", sharpness=100.0, base: CKCMParams | None = None,
                 batch_size=16, space=None, robust=None, robust_samples=256, tolerances=None, quantile=0.95,
                 seed=0):
    """(``Problem``, ``ProblemData``) for a task (default: the paper's ellipse, ``task.ellipse_task()``), from
    the start design ``base`` (default ``nominal()``, Nguyen & Pooran eq. 58).  Checks the space (``make_space``), the task,
    and that the bounds admit a feasible design (``check_bounds``), and the start design against its task
    (``check_start``), all before anything compiles.  ``space``: a ``DesignSpace``, or the name of one in
    ``space.SPACES`` ("paper", "symmetric", "full"; ``bounds`` override its defaults), instead of ``free``.
    The demand's scales are taken at ``base`` (objective 1 at the start)."""
    task = ellipse_task() if task is None else task
    base = validate_params(nominal() if base is None else base)
    if isinstance(space, str):
        space = named_space(space, bounds)
    problem = Problem(space if isinstance(space, DesignSpace) else make_space(free, bounds), model, legs, demand,
                      float(sharpness), batch_size, robust, float(quantile), combine=task.combine)
    if task.has_payload_range and "M" in problem.space.free:
        raise DesignSpaceError("the task has a payload range (payload_masses of path(s) "
                               f"{[i for i, p in enumerate(task.paths) if 'payload_masses' in p]}), which fixes the "
                               "payload mass: M cannot be a free design variable too; leave M out of the space")
    if robust is not None and int(robust_samples) < 2:
        raise ValueError(f"robust_samples must be >= 2, got {robust_samples}")
    limits = check_limits(Limits() if limits is None else limits)
    check_bounds(problem, base, limits)
    samples = task.samples(base)
    check_start(problem, task.with_payload(base), task, samples, limits)
    f = jnp.result_type(base.m)
    params = task.with_payload(base)
    tau, speed = O.jitted_forces_and_speeds(problem.model, problem.legs, problem.batch_size)(params, samples)
    peak, d0 = _scales(problem)(tau, speed, samples)
    if not np.isfinite(float(peak)):
        raise ValueError("the start design's actuator forces are not finite along the task: it is singular "
                         "somewhere on the path (check the path against the workspace with ckcm.check_pose)")
    noise, tol = None, None
    if robust is not None:
        noise = R.draw_noise(jax.random.PRNGKey(int(seed)), robust_samples, f)
        tol = jax.tree_util.tree_map(lambda v: jnp.asarray(v, f), R.Tolerances() if tolerances is None else tolerances)
    return problem, ProblemData(base, samples, limits_as_arrays(limits, f), jnp.asarray(peak, f), jnp.asarray(d0, f),
                                noise, tol)


__all__ = ["Problem", "ProblemData", "Evaluation", "InfeasibleBoundsError", "design_params", "evaluate",
           "evaluate_forces", "task_demand", "path_demands",
           "check_bounds", "check_start", "make_problem", "design_inputs", "design_samples", "forces_and_speeds", "GROUPS"]
