"""The optimisers of the assembly design (:mod:`.design`'s objective J over the box), at equal wall time
(issue 42, item 5).

**The comparison** (``timed_gradient_runs``, ``timed_cma_es_runs``; ``timed_gradient_run``, ``timed_cma_es_run``
for one start): the gradient optimiser is optax's Adam of the design package (``mrds_jax.ckcm.design.optimizer.make_optimizer``)
on J(box(u)) with the value and gradient of one compiled program (forward mode, ``forward_jacobian``: six
directional derivatives, vmapped, by default; ``jax.value_and_grad`` with ``RunSettings.derivative="reverse"``);
CMA-ES (Hansen's ``cmaes`` package, as ``experiments/ckcm_design.py``) evaluates each generation's population in one
compiled ``vmap``. Several starts advance together, one program call per Adam step or generation for all of them.
Each run gets the same wall-time budget, counted from before its first compilation (a run that reuses a program
compiled earlier in the process is charged that compilation's measured time: ``RunSettings.charge_s``); both keep
the best design they evaluated.
``experiments/ckcm_assembly_design.py`` runs it.
"""
from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ...validation import require
from ..design.optimizer import Settings as OptimizerSettings, make_optimizer
from .design import (BOX, VARIABLES, AssemblyDesignError, DesignBox, DesignMetrics, DesignProblem, ObjectiveSettings,
                     check_box, check_design, evaluate, from_box, to_box)


class RunSettings(NamedTuple):
    """One optimiser run: ``budget_s`` of wall time from before its first compilation; Adam's ``learning_rate``
    (in the unconstrained coordinates u); CMA-ES's ``population`` and ``sigma`` (σ₀ in the box scaled to [0, 1]);
    the ``seed`` of CMA-ES's draws (start k of a batch of starts draws with ``seed + k``); ``charge_s``: seconds
    charged to the run's clock at its start — the compilation of its program measured in an earlier run of the
    same program in this process (the programs are cached per settings: ``gradient_step``,
    ``population_evaluation``), so that every run's wall time includes a compilation whether or not it paid it
    itself; ``max_evaluations``: stop after this many evaluations of J per start (a population counts as its size)
    even within the budget; ``derivative``: how the gradient's program differentiates the rollouts, "forward"
    (one directional derivative per design variable, vmapped: ``design.optimizer.forward_jacobian``; six
    variables, and XLA compiles it in a fraction of the reverse-mode program's time) or "reverse"
    (``jax.value_and_grad``)."""
    budget_s: float = 120.0
    learning_rate: float = 0.2
    population: int = 8
    sigma: float = 0.2
    seed: int = 0
    charge_s: float = 0.0
    max_evaluations: int = 10**9
    derivative: str = "forward"


class RunResult(NamedTuple):
    """A run's best design ``x`` and its ``metrics`` (as evaluated during the run), the ``evaluations`` of J
    (each a batch of B insertions), its ``wall_s`` (compilation included: paid or charged, ``RunSettings``),
    ``first_s`` (the clock at the end of its first call: compilation, charged or paid, and one evaluation), the
    objective at the start design ``start`` (NaN where the method does not evaluate it) and the trace
    [(wall s, best J so far, evaluations)]. Starts run together (``timed_gradient_runs``, ``timed_cma_es_runs``)
    share the clock: their ``wall_s`` and ``first_s`` are the batch's."""
    method: str
    x: np.ndarray
    metrics: DesignMetrics
    evaluations: int
    wall_s: float
    first_s: float
    start: float
    trace: list


def _host(metrics):
    return DesignMetrics(*(np.asarray(v) for v in metrics))


def _pick(metrics, k):
    return DesignMetrics(*(v[k] for v in metrics))


DERIVATIVES = ("forward", "reverse")


@functools.lru_cache(maxsize=None)
def gradient_step(settings: ObjectiveSettings, box: DesignBox = BOX, derivative: str = "forward"):
    """(problem, us (S, 6)) ↦ ((J (S,), metrics), ∂J/∂u (S, 6)) at the designs box(u) of S starts: one compiled
    program (``vmap`` over the starts) of forward mode (``design.optimizer.forward_jacobian``) or reverse mode
    (``jax.value_and_grad``) through the rollouts (``derivative``), cached per (settings, box, derivative)."""
    from ..design.optimizer import forward_jacobian
    if derivative not in DERIVATIVES:
        raise AssemblyDesignError(f"gradient_step: derivative must be one of {DERIVATIVES}, got {derivative!r}")

    def f(problem, u):
        m = evaluate(problem, to_box(u, box), settings)
        return m.objective, m

    def forward(problem, u):
        value, jac, m = forward_jacobian(lambda y: f(problem, y), u)
        return (value, m), jac
    one = forward if derivative == "forward" else jax.value_and_grad(f, argnums=1, has_aux=True)
    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


@functools.lru_cache(maxsize=None)
def population_evaluation(settings: ObjectiveSettings):
    """(problem, xs (P, 6)) ↦ the metrics of P designs: ``evaluate`` under one compiled ``vmap``, cached per
    settings."""
    return jax.jit(jax.vmap(functools.partial(evaluate, settings=settings), in_axes=(None, 0)))


def _starts(x0s, box, where):
    """The start designs as an (S, 6) array, each checked (``check_design``)."""
    x0s = np.asarray(x0s, float)
    if x0s.ndim != 2:
        raise AssemblyDesignError(f"{where}: the start designs must be an (S, {len(VARIABLES)}) array, got shape "
                                  f"{x0s.shape}")
    return np.stack([check_design(x, box, f"{where}: start design {k}") for k, x in enumerate(x0s)])


def timed_gradient_runs(problem: DesignProblem, x0s, settings: ObjectiveSettings = ObjectiveSettings(),
                        run: RunSettings = RunSettings(), box: DesignBox = BOX) -> list:
    """Adam (``design.optimizer.make_optimizer``) on J(box(u)) from each of the S start designs ``x0s`` (S, 6), all
    advancing together (one call of ``gradient_step`` per step: the S starts' values and gradients), for
    ``run.budget_s`` s of wall time, compilation included; the run stops at the first step that ends past the
    budget (so it takes at least one). A start whose gradient is not finite stops moving. One ``RunResult`` per
    start."""
    check_box(box)
    x0s = _starts(x0s, box, "timed_gradient_runs")
    opt = make_optimizer(OptimizerSettings(optimizer="adam", learning_rate=run.learning_rate))
    t0 = time.perf_counter() - run.charge_s
    step = gradient_step(settings, box, run.derivative)
    update = jax.jit(opt.update)
    S = x0s.shape[0]
    u = from_box(jnp.asarray(x0s, jnp.result_type(float)), box)
    state = opt.init(u)
    best_j, best_x, best_m = np.full(S, np.inf), x0s.copy(), [None] * S
    traces, n, first, start = [[] for _ in range(S)], 0, None, None
    going = np.ones(S, bool)
    while True:
        (values, metrics), g = step(problem, u)
        values, g, metrics, xs = np.asarray(values, float), np.asarray(g), _host(metrics), np.asarray(to_box(u, box))
        n += 1
        if first is None:
            first, start = time.perf_counter() - t0, values.copy()
        for k in range(S):
            if going[k] and np.isfinite(values[k]) and values[k] < best_j[k]:
                best_j[k], best_x[k], best_m[k] = values[k], xs[k], _pick(metrics, k)
        going &= np.all(np.isfinite(g), axis=1)
        clock = time.perf_counter() - t0
        for k in range(S):
            traces[k].append((clock, best_j[k], n))
        if not going.any() or clock >= run.budget_s or n >= run.max_evaluations:
            break
        updates, state = update(jnp.asarray(np.where(going[:, None], g, 0.0)), state, u)
        u = jnp.where(jnp.asarray(going)[:, None], optax.apply_updates(u, updates), u)
    wall = time.perf_counter() - t0
    return [RunResult(f"gradient (Adam, {run.derivative} mode)", best_x[k], best_m[k], n, wall, first,
                      float(start[k]), traces[k]) for k in range(S)]


def timed_gradient_run(problem: DesignProblem, x0, settings: ObjectiveSettings = ObjectiveSettings(),
                       run: RunSettings = RunSettings(), box: DesignBox = BOX) -> RunResult:
    """``timed_gradient_runs`` from one start design ``x0`` (6,)."""
    check_box(box)
    return timed_gradient_runs(problem, check_design(x0, box, "the start design")[None], settings, run, box)[0]


def timed_cma_es_runs(problem: DesignProblem, x0s, settings: ObjectiveSettings = ObjectiveSettings(),
                      run: RunSettings = RunSettings(), box: DesignBox = BOX) -> list:
    """CMA-ES (``cmaes.CMA``: population ``run.population``, σ₀ ``run.sigma`` of the box scaled to [0, 1], mean at
    the start design, the box as its bounds; as ``experiments/ckcm_design.py``'s baseline) from each of the S start
    designs ``x0s`` (S, 6) (start k draws with seed ``run.seed + k``), every generation of all S in one call of
    ``population_evaluation`` (S × population designs), for ``run.budget_s`` s of wall time, compilation
    included; stops at the first generation that ends past the budget. One ``RunResult`` per start."""
    check_box(box)
    x0s = _starts(x0s, box, "timed_cma_es_runs")
    require("cmaes", "timed_cma_es_runs (the CMA-ES baseline)")      # after the input's checks, before any work
    from cmaes import CMA
    lo, hi = np.asarray(box.lower, float), np.asarray(box.upper, float)
    t0 = time.perf_counter() - run.charge_s
    population = population_evaluation(settings)
    S, P = x0s.shape[0], run.population
    cmas = [CMA(mean=(x - lo) / (hi - lo), sigma=run.sigma, bounds=np.tile([0.0, 1.0], (lo.size, 1)),
                seed=run.seed + k, population_size=P) for k, x in enumerate(x0s)]
    best_j, best_x, best_m = np.full(S, np.inf), x0s.copy(), [None] * S
    traces, n, first = [[] for _ in range(S)], 0, None
    while True:
        zs = np.array([[cma.ask() for _ in range(P)] for cma in cmas])                 # (S, P, 6)
        xs = lo + (hi - lo) * zs
        metrics = _host(population(problem, jnp.asarray(xs.reshape(S * P, -1))))
        n += P
        first = time.perf_counter() - t0 if first is None else first
        values = np.where(np.isfinite(metrics.objective), metrics.objective, np.inf).reshape(S, P)
        clock = time.perf_counter() - t0
        for k, cma in enumerate(cmas):
            cma.tell(list(zip(zs[k], np.minimum(values[k], 1e30))))
            i = int(np.argmin(values[k]))
            if values[k, i] < best_j[k]:
                best_j[k], best_x[k], best_m[k] = float(values[k, i]), xs[k, i], _pick(metrics, k * P + i)
            traces[k].append((clock, best_j[k], n))
        if clock >= run.budget_s or n >= run.max_evaluations:
            break
    wall = time.perf_counter() - t0
    return [RunResult("CMA-ES", best_x[k], best_m[k], n, wall, first, np.nan, traces[k]) for k in range(S)]


def timed_cma_es_run(problem: DesignProblem, x0, settings: ObjectiveSettings = ObjectiveSettings(),
                     run: RunSettings = RunSettings(), box: DesignBox = BOX) -> RunResult:
    """``timed_cma_es_runs`` from one start design ``x0`` (6,)."""
    check_box(box)
    return timed_cma_es_runs(problem, check_design(x0, box, "the start design")[None], settings, run, box)[0]


__all__ = ["RunSettings", "RunResult", "DERIVATIVES", "gradient_step", "population_evaluation",
           "timed_gradient_runs", "timed_gradient_run", "timed_cma_es_runs", "timed_cma_es_run"]
