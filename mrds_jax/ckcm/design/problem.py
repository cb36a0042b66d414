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

from ...pytree import pytree_dataclass
from ..params import CKCMParams, nominal, validate_params
from . import objectives as O
from .constraints import (GROUPS, Limits, check_limits, constraint_values, limits_as_arrays, max_violations,
                          pair_distances)
from .space import DEFAULT_FREE, DesignSpace, DesignSpaceError, make_space
from .task import Task, TaskSamples, ellipse_task


class InfeasibleBoundsError(DesignSpaceError):
    """The design box provably excludes every design that meets the limits."""


@dataclass(frozen=True)
class Problem:
    """Static choices of a design problem.

    The designer's limits are not here but in ``ProblemData`` (numbers: changing them does not recompile).
    model      "paper" or "multibody" (``objectives.MODELS``); legs: "bench" or "paper" (multibody only)
    demand     "peak", "rms", "power" (``objectives.DEMANDS``) or a callable (tau, speed, weight) -> scalar
    sharpness  β of the soft peak
    """
    space: DesignSpace = field(default_factory=DesignSpace)
    model: str = "paper"
    legs: str = "bench"
    demand: str | Callable = "peak"
    sharpness: float = 100.0
    batch_size: int = 16

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

    @property
    def demand_name(self):
        return self.demand if isinstance(self.demand, str) else getattr(self.demand, "__name__", "custom")


@pytree_dataclass
class ProblemData:
    """Arrays of a design problem: the design the free variables are substituted into (``base``), the
    task samples, the designer's limits, the soft peak's scale (N) and the demand at the start design (the
    objective's unit)."""
    base: CKCMParams
    samples: TaskSamples
    limits: Limits
    force_scale: jax.Array
    demand_scale: jax.Array


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


def design_params(problem: Problem, data: ProblemData, x) -> CKCMParams:
    """The ``CKCMParams`` of design vector x (free variables of ``problem.space``), carrying the task's payload."""
    return problem.space.to_params(x, data.base).replace(M=data.samples.M, I_payload=data.samples.I_payload)


def forces_and_speeds(problem: Problem, params: CKCMParams, samples: TaskSamples):
    """(τ, l̇) of ``params`` at ``samples`` through the problem's model (``objectives.forces_and_speeds``)."""
    return O.forces_and_speeds(params, samples, problem.model, problem.legs, problem.batch_size)


def _demand(problem, tau, speed, weight, scale):
    if callable(problem.demand):
        return problem.demand(tau, speed, weight)
    return O.demand(problem.demand, tau, speed, weight, scale, problem.sharpness)


def evaluate(problem: Problem, data: ProblemData, x) -> Evaluation:
    """Objective, constraints and metrics of the design vector ``x`` (pure, jittable, differentiable)."""
    params = design_params(problem, data, x)
    return evaluate_forces(problem, data, params, *forces_and_speeds(problem, params, data.samples))


def evaluate_forces(problem: Problem, data: ProblemData, params: CKCMParams, tau, speed) -> Evaluation:
    """``evaluate`` of the design ``params`` given its leg forces τ and speeds l̇ at the task samples."""
    d = _demand(problem, tau, speed, data.samples.weight, data.force_scale)
    metrics = O.demand_metrics(tau, speed, data.samples.weight)
    g = constraint_values(params, data.samples, metrics["peak_force"], data.limits)
    dA, dB = pair_distances(params)
    metrics["min_separation"] = jnp.minimum(jnp.min(dA), jnp.min(dB))
    metrics["max_condition"] = jnp.exp(jnp.log(data.limits.max_condition) * (1 + jnp.max(g["condition"])))
    return Evaluation(d / data.demand_scale, d, g, max_violations(g), metrics)


def check_bounds(problem: Problem, base: CKCMParams, lim: Limits):
    """Raise ``InfeasibleBoundsError`` when the box provably excludes every feasible design: the strength
    rule's fixed masses above the mass bounds, a stroke narrower than twice its margin, or attachment
    angles/radii whose most favourable corner still puts two joints closer than ``min_separation``."""
    space = problem.space
    lo = dict(zip(space.free, space.lower))
    hi = dict(zip(space.free, space.upper))

    def upper(name):
        return hi.get(name, float(getattr(base, name)))

    def lower(name):
        return lo.get(name, float(getattr(base, name)))
    problems = []
    s = lim.strength
    if upper("m1") < s.moving_fixed:
        problems.append(f"m1 <= {upper('m1'):.4g} kg but the strength rule needs m1 >= {s.moving_fixed:.4g} kg")
    if upper("m") - lower("m1") < s.stationary_fixed:
        problems.append(f"m - m1 <= {upper('m') - lower('m1'):.4g} kg but the strength rule needs the stationary "
                        f"part >= {s.stationary_fixed:.4g} kg")
    l_s_hi = upper("l_s")
    width = min(l_s_hi, float(base.l_m))   # l_max - l_min = l_s + l_m - max(l_s, l_m)
    if width < 2 * lim.stroke_margin:
        problems.append(f"the stroke is at most {width:.4g} m wide, less than twice stroke_margin "
                        f"= {lim.stroke_margin:.4g} m")
    for name, r in (("theta_A", "r_A"), ("theta_B", "r_B")):
        # gaps between neighbours are θ and 120° − θ: the best θ in the box is the one nearest 60°
        th = float(np.clip(np.pi / 3, lower(name), upper(name)))
        gap = min(abs(np.sin(th / 2)), abs(np.sin((2 * np.pi / 3 - th) / 2)))
        d = 2 * upper(r) * gap
        if d < lim.min_separation:
            problems.append(f"{name} in [{np.degrees(lower(name)):.4g}, {np.degrees(upper(name)):.4g}] deg with "
                            f"{r} <= {upper(r):.4g} m puts two joints at most {d:.4g} m apart "
                            f"(< min_separation {lim.min_separation:.4g} m)")
    if problems:
        raise InfeasibleBoundsError("the design bounds exclude every feasible design: " + "; ".join(problems))


@functools.lru_cache(maxsize=None)
def _scales(problem: Problem):
    """jit of (τ, l̇, w) ↦ (peak |τ|, demand with the soft peak's scale at that peak): the start design's scales."""
    def scales(tau, speed, weight):
        peak = jnp.max(jnp.abs(tau))
        return peak, _demand(problem, tau, speed, weight, peak)
    return jax.jit(scales)


def make_problem(task: Task | None = None, free=DEFAULT_FREE, bounds=None, limits: Limits | None = None,
                 model="paper", legs="bench", demand="peak", sharpness=100.0, base: CKCMParams | None = None,
                 batch_size=16):
    """(``Problem``, ``ProblemData``) for a task (default: the paper's ellipse, ``task.ellipse_task()``), from
    the start design ``base`` (default ``nominal()``, eq. 58).  Checks the space (``make_space``), the task,
    and that the bounds admit a feasible design (``check_bounds``).  The demand's scales are taken at
    ``base`` (objective 1 at the start)."""
    task = ellipse_task() if task is None else task
    base = validate_params(nominal() if base is None else base)
    problem = Problem(make_space(free, bounds), model, legs, demand, float(sharpness), int(batch_size))
    limits = check_limits(Limits() if limits is None else limits)
    check_bounds(problem, base, limits)
    samples = task.samples(base)
    f = jnp.result_type(base.m)
    params = task.with_payload(base)
    tau, speed = O.jitted_forces_and_speeds(problem.model, problem.legs, problem.batch_size)(params, samples)
    peak, d0 = _scales(problem)(tau, speed, samples.weight)
    if not np.isfinite(float(peak)):
        raise ValueError("the start design's actuator forces are not finite along the task: it is singular "
                         "somewhere on the path (check the path against the workspace with ckcm.check_pose)")
    return problem, ProblemData(base, samples, limits_as_arrays(limits, f), jnp.asarray(peak, f), jnp.asarray(d0, f))


__all__ = ["Problem", "ProblemData", "Evaluation", "InfeasibleBoundsError", "design_params", "evaluate",
           "evaluate_forces",
           "check_bounds", "make_problem", "forces_and_speeds", "GROUPS"]
