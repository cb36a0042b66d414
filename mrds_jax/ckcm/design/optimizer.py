"""Gradient-based design optimisation: an augmented Lagrangian around optax's Adam or L-BFGS, every start of a
multi-start run advancing together, block by block, in one compiled function (``compiled_block``).

Method (Nocedal & Wright, Numerical Optimization, 2nd ed., §17.4, the bound-free form with inequality
multipliers, "PHR"): with the objective f(u) (demand relative to the start design) and the stacked, scaled
constraints g(u) ≤ 0 (``constraints.py``; tightened by ``tightening`` so the solution lands inside),

    L_ρ(u, λ) = f(u) + Σ_j [ (ρ/2) max(0, g_j(u) + λ_j/ρ)² − λ_j² / (2ρ) ],

minimised over the unconstrained coordinates u of the design box (``space.py``) for ``update_every``
optimiser steps, then λ_j ← max(0, λ_j + ρ g_j(u)); ρ ← min(ρ · growth, ρ_max) when the largest violation has
not fallen below a quarter of its previous value.  L-BFGS restarts its memory at every multiplier update
(the merit function changed).  The update after a block is made at the first step of the next block, from
that step's evaluation of the same design u: every step evaluates f and g with their pull-back in one pass
(forward mode, ``forward_jacobian``, for a few variables; reverse mode, ``jax.vjp``, for many:
``Settings.derivatives``), updates λ, ρ when due, then pulls L_ρ's cotangents back to its gradient, so the
design is evaluated once per step and the compiled block holds one copy of the dynamics.  A saved state
(``state.npz``) therefore holds the multipliers of the block just finished, with their update pending.

Safety (nothing is lost): every step records, per start, the best *feasible* design seen (all g ≤
−feasibility_margin at the task samples) and the least-violating one; a step whose merit, gradient or update is not
finite freezes that start at its last finite design and records the iteration (``diverged_at``).  After each
block of steps the host updates the progress bar and the log, and — with ``out_dir`` — writes the result so
far (``design.json``) and the optimiser's state (``state.npz``, :mod:`.checkpoint`), from which ``resume=True``
continues.
"""
from __future__ import annotations

import functools
import json
import sys
import time
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import jax
import jax.numpy as jnp
import optax

from ...pytree import replace
from ... import validation as check
from .constraints import GROUPS
from . import objectives as O
from .problem import Evaluation, Problem, ProblemData, design_inputs, design_params, evaluate, evaluate_forces
from .checkpoint import check_resumable, load_state, read_state, run_fingerprint, save_state, saved_run  # noqa: F401
from .optimizer_state import Carry
from .results import DesignResult, start_summary


class DesignWarning(UserWarning):
    """An optimisation that did not end cleanly: infeasible start, no feasible design, diverged starts."""


DERIVATIVES = ("auto", "forward", "reverse")
# Above this many design variables a step differentiates in reverse mode: on the 37-variable robust problem
# (paper model, 4 path samples, 4 draws) the forward Jacobian made an Adam step cost 45 evaluations
# (143 ms against 15.5 ms per step, block compilation 19 s against 38 s: docs/guide/optimize.md).
FORWARD_MAX_VARIABLES = 8


@dataclass(frozen=True)
class Settings:
    """optimizer: "adam" or "lbfgs"; iterations: optimiser steps per start; learning_rate: Adam's step (in
    the box's logit coordinates); update_every: steps between multiplier updates; penalty, penalty_growth,
    penalty_max: ρ's start, growth factor and cap; tightening: the optimiser drives the constraints to
    g ≤ −tightening (scaled units); a design counts as feasible, and can become the best one, only at
    g ≤ −feasibility_margin (default: half the tightening), so that designs on a constraint's edge at the task
    samples do not cross it between them (the excess between samples falls as 1/K² with K samples per path:
    measured 3e-4 scaled units at K = 64 on the stroke; use K ≥ 64 or raise both); starts: designs optimised together (the start design plus random ones in the box);
    seed: for the random starts."""
    optimizer: str = "adam"
    iterations: int = 200
    learning_rate: float = 0.05
    update_every: int = 20
    penalty: float = 10.0
    penalty_growth: float = 4.0
    penalty_max: float = 1e5
    tightening: float = 2e-3
    feasibility_margin: float = 1e-3
    starts: int = 1
    seed: int = 0
    derivatives: str = "auto"

    def __post_init__(self):
        if self.optimizer not in ("adam", "lbfgs"):
            raise check.ArgumentError(f"Settings: unknown optimizer {self.optimizer!r}; use 'adam' or 'lbfgs'")
        if self.derivatives not in DERIVATIVES:
            raise check.ArgumentError(f"Settings: unknown derivatives {self.derivatives!r}; use one of "
                                      f"{list(DERIVATIVES)}")
        for name in ("iterations", "update_every", "starts"):
            if int(getattr(self, name)) < 1:
                raise check.ArgumentError(f"Settings.{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.feasibility_margin:
            raise check.ArgumentError(f"Settings.feasibility_margin must be >= 0, got {self.feasibility_margin}")
        for name in ("learning_rate", "penalty", "penalty_max"):
            if not getattr(self, name) > 0:
                raise check.ArgumentError(f"Settings.{name} must be > 0, got {getattr(self, name)}")

    @property
    def blocks(self):
        return -(-int(self.iterations) // int(self.update_every))


def make_optimizer(settings: Settings):
    """The optax transformation of ``settings.optimizer``.  L-BFGS uses a backtracking (Armijo) line search:
    on the paper-model ellipse problem (80 steps) it reached the same optimum as optax's default zoom line
    search (298.35 vs 298.30 N) in 93 s instead of 156 s of wall time, nearly all of it compilation (the zoom
    search traces the objective in several branches)."""
    if settings.optimizer == "adam":
        return optax.adam(settings.learning_rate)
    return optax.lbfgs(memory_size=10, linesearch=optax.scale_by_backtracking_linesearch(
        max_backtracking_steps=16, store_grad=True))


def _stacked(ev, tightening):
    return jnp.concatenate([ev.constraints[k].ravel() for k in GROUPS if k in ev.constraints]) + tightening


def augmented_lagrangian(f, g, lam, rho):
    """L_ρ = f + Σ (ρ/2) max(0, g + λ/ρ)² − λ²/(2ρ) (PHR; module docstring)."""
    return f + jnp.sum(0.5 * rho * jnp.maximum(0.0, g + lam / rho) ** 2 - lam**2 / (2 * rho))


def _objective_and_constraints(problem, settings, data, u):
    """((f, g), ev): the objective and the stacked, tightened constraints at u, and the whole evaluation."""
    ev = evaluate(problem, data, problem.space.to_box(u))
    return (ev.objective, _stacked(ev, settings.tightening)), ev


def _merit(problem, settings, data, u, lam, rho):
    (f, g), ev = _objective_and_constraints(problem, settings, data, u)
    return augmented_lagrangian(f, g, lam, rho), ev


def _all_finite(*trees):
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(trees)]))


def _where(c, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(c, x, y), a, b)


def _linesearch_steps(opt_state):
    n = optax.tree_utils.tree_get(opt_state, "num_linesearch_steps", None)
    return jnp.zeros((), jnp.int32) if n is None else jnp.asarray(n, jnp.int32)


def forward_jacobian(f, u):
    """(f(u), ∂f/∂u, aux) of a function with auxiliary output, by forward mode: one directional derivative per
    coordinate of u (the design has 4 to 7), vmapped, the primal computed once; the Jacobian's leaves carry
    a leading axis of size len(u).  XLA compiles this forward-over-forward program (τ of Nguyen & Pooran eq. 45 is itself a
    derivative of the energies, Nguyen & Pooran eq. 37) in about half the time of the reverse-mode one, and it gives the
    Jacobian of all constraints at once."""
    basis = jnp.eye(u.shape[-1], dtype=u.dtype)
    return jax.vmap(lambda t: jax.jvp(f, (u,), (t,), has_aux=True), out_axes=(None, 0, None))(basis)


def reverse_pullback(f, u):
    """(f(u), pull-back, aux) of a function with auxiliary output, by reverse mode: the pull-back maps the
    outputs' cotangents to ∂/∂u of their inner product with f, at the cost of a few evaluations whatever the
    size of u (``jax.vjp``)."""
    out, vjp, aux = jax.vjp(f, u, has_aux=True)
    return out, (lambda ct: vjp(ct)[0]), aux


def forward_pullback(f, u):
    """``reverse_pullback``'s result from the forward Jacobian (``forward_jacobian``): ct ↦ Σ ct · ∂f/∂u."""
    out, jac, aux = forward_jacobian(f, u)
    return out, (lambda ct: sum(jnp.tensordot(j, c, axes=c.ndim) for j, c in
                                zip(jax.tree_util.tree_leaves(jac), jax.tree_util.tree_leaves(ct)))), aux


def uses_reverse_mode(settings, size):
    """Whether a step of ``settings`` on a design of ``size`` variables differentiates in reverse mode."""
    return settings.derivatives == "reverse" or (settings.derivatives == "auto" and size > FORWARD_MAX_VARIABLES)


def _update_multipliers(settings, opt, c: Carry, g, due):
    """Where ``due``: λ ← max(0, λ + ρ g), ρ ← min(ρ · growth, ρ_max) unless the largest violation fell below a
    quarter of its previous one (module docstring), and L-BFGS's memory restarts."""
    viol = jnp.max(g)
    fine = due & _all_finite(g) & (c.diverged_at < 0)
    lam = jnp.where(fine, jnp.maximum(0.0, c.lam + c.rho * g), c.lam)
    grow = fine & (viol > 0) & (viol > 0.25 * c.prev_violation)
    rho = jnp.where(grow, jnp.minimum(c.rho * settings.penalty_growth, settings.penalty_max), c.rho)
    state = _where(due, opt.init(c.u), c.opt_state) if settings.optimizer == "lbfgs" else c.opt_state
    return replace(c, lam=lam, rho=rho, prev_violation=jnp.where(fine, viol, c.prev_violation), opt_state=state)


def _inner_step(problem, settings, opt, data, c: Carry, _):
    """One optimiser step at c.u.  At the first step of every block but the very first, the design's
    constraints first update the multipliers (the update due after the previous block, module docstring):
    f, g and their pull-back come from one pass (forward or reverse mode, ``uses_reverse_mode``), and the
    merit's gradient is the pull-back of its cotangents with the updated λ, ρ."""
    pullback = reverse_pullback if uses_reverse_mode(settings, c.u.shape[-1]) else forward_pullback
    (f, g), pull, ev = pullback(
        functools.partial(_objective_and_constraints, problem, settings, data), c.u)   # ev: the design at c.u
    c = _update_multipliers(settings, opt, c, g, (c.iteration > 0) & (c.iteration % settings.update_every == 0))
    val, (ct_f, ct_g) = jax.value_and_grad(augmented_lagrangian, argnums=(0, 1))(f, g, c.lam, c.rho)
    grad = pull((ct_f, ct_g))

    def merit(u):
        return _merit(problem, settings, data, u, c.lam, c.rho)[0]
    if settings.optimizer == "lbfgs":
        updates, state = opt.update(grad, c.opt_state, c.u, value=val, grad=grad, value_fn=merit)
        extra = _linesearch_steps(state)
    else:
        updates, state = opt.update(grad, c.opt_state, c.u)
        extra = jnp.zeros((), jnp.int32)
    u_new = optax.apply_updates(c.u, updates)
    evaluated = _all_finite(val, ev.objective, ev.max_violation)
    ok = evaluated & _all_finite(grad, u_new) & (c.diverged_at < 0)
    viol = ev.max_violation
    improve = evaluated & (viol <= -settings.feasibility_margin) & (ev.objective < c.best_objective)
    less = evaluated & (viol < c.least_violation)
    c2 = replace(
        c, u=jnp.where(ok, u_new, c.u), opt_state=_where(ok, state, c.opt_state),
        best_u=jnp.where(improve, c.u, c.best_u), best_objective=jnp.where(improve, ev.objective, c.best_objective),
        best_iteration=jnp.where(improve, c.iteration, c.best_iteration),
        least_u=jnp.where(less, c.u, c.least_u), least_violation=jnp.where(less, viol, c.least_violation),
        evaluations=c.evaluations + 1 + jnp.where(ok, extra, 0),
        diverged_at=jnp.where(~ok & (c.diverged_at < 0), c.iteration, c.diverged_at),
        iteration=c.iteration + 1)
    trace = {"objective": ev.objective, "violation": viol, "merit": val,
             **{f"violation_{k}": v for k, v in ev.violation.items()}, **ev.metrics}
    return c2, trace


def _block(problem, settings, data, c: Carry):
    """``update_every`` optimiser steps (``_inner_step``); the multiplier and penalty update due at the end of
    the block happens at the start of the next one, on the same design (module docstring)."""
    opt = make_optimizer(settings)
    return jax.lax.scan(functools.partial(_inner_step, problem, settings, opt, data), c, None,
                        length=int(settings.update_every))


class CompiledBlock:
    """A jitted optimiser block that can be compiled ahead of its first call (:meth:`compile`), so that a
    caller can show compilation as its own phase; calls use the compiled executable for the arguments'
    shapes, or the jit otherwise."""

    def __init__(self, fn):
        self._fn, self._executables = fn, {}

    @staticmethod
    def _key(*args):
        leaves, tree = jax.tree_util.tree_flatten(args)
        return tree, tuple((np.shape(x), x.dtype if hasattr(x, "dtype") else np.result_type(x),
                            bool(getattr(x, "weak_type", False))) for x in leaves)

    def compile(self, data, carry):
        """Compile for these arguments' shapes (once; later calls return at once)."""
        key = self._key(data, carry)
        if key not in self._executables:
            self._executables[key] = self._fn.lower(data, carry).compile()

    def __call__(self, data, carry):
        exe = self._executables.get(self._key(data, carry))
        return exe(data, carry) if exe is not None else self._fn(data, carry)

    def compilations(self):
        """(ahead-of-time executables, programs the jit fallback compiled)."""
        return len(self._executables), self._fn._cache_size()


@functools.lru_cache(maxsize=None)
def compiled_block(problem: Problem, settings: Settings):
    """``_block`` of every start (``jax.lax.map`` over the carry's leading axis) in one jit, cached per (problem,
    settings) (a :class:`CompiledBlock`).  Mapping rather than vmapping the starts runs the same steps and
    compiles faster: the step, already batched over the task samples and the design directions, is traced and
    compiled for one start (measured on the 2-core CPU: ~25 % less tracing and compilation, no slower per
    block)."""
    block = functools.partial(_block, problem, settings)
    return CompiledBlock(jax.jit(lambda data, c: jax.lax.map(lambda one: block(data, one), c)))


@functools.lru_cache(maxsize=None)
def compiled_evaluate(problem: Problem):
    """``evaluate(problem, ·, ·)`` compiled in two parts: the dynamics, by the one compiled force kernel that
    problem set-up, the independent check and the plots share (``objectives.jitted_forces_and_speeds``),
    then the demand, constraints and metrics (``problem.evaluate_forces``, cheap to compile)."""
    if problem.robust is not None:
        return jax.jit(functools.partial(evaluate, problem))
    inputs = jax.jit(functools.partial(design_inputs, problem))
    forces = O.jitted_forces_and_speeds(problem.model, problem.legs, problem.batch_size)
    rest = jax.jit(functools.partial(evaluate_forces, problem))

    def run(data: ProblemData, x) -> Evaluation:
        p, s = inputs(data, x)
        return rest(data, p, s, *forces(p, s))
    return run


def initial_carry(problem: Problem, settings: Settings, data: ProblemData, x0) -> Carry:
    """The carry of every start (x0: (starts, n) designs strictly inside the box)."""
    u = problem.space.from_box(jnp.asarray(x0))
    n_g = _stacked(compiled_evaluate(problem)(data, x0[0]), 0.0).shape[0]
    S = u.shape[0]
    f = u.dtype
    opt = make_optimizer(settings)
    return Carry(u=u, opt_state=jax.vmap(opt.init)(u), lam=jnp.zeros((S, n_g), f),
                 rho=jnp.full((S,), settings.penalty, f), prev_violation=jnp.full((S,), jnp.inf, f),
                 best_u=u, best_objective=jnp.full((S,), jnp.inf, f), best_iteration=jnp.full((S,), -1, jnp.int32),
                 least_u=u, least_violation=jnp.full((S,), jnp.inf, f), evaluations=jnp.zeros((S,), jnp.int32),
                 diverged_at=jnp.full((S,), -1, jnp.int32), iteration=jnp.zeros((S,), jnp.int32))


def start_designs(problem: Problem, data: ProblemData, starts: int, seed=0, x0=None):
    """(starts, n) start designs: ``x0`` (default: the start design's free variables) first, then uniform draws
    from the middle 90 % of the box."""
    space = problem.space
    first = np.asarray(space.from_params(data.base) if x0 is None else x0, float)
    space.check_inside(first, "the start design")
    lo, hi = space.bounds()
    rng = np.random.default_rng(seed)
    extra = lo + (hi - lo) * rng.uniform(0.05, 0.95, (starts - 1, space.size))
    return np.concatenate([first[None], extra]).astype(np.asarray(data.base.m).dtype)


def describe_violations(problem: Problem, ev) -> str:
    """The violated constraint groups of an evaluation, worst first, with amounts in scaled units."""
    v = {k: float(x) for k, x in ev.violation.items() if float(x) > 0}
    return ", ".join(f"{k} (g = {x:.3g})" for k, x in sorted(v.items(), key=lambda kv: -kv[1])) or "none"


def optimize(problem: Problem, data: ProblemData, settings: Settings | None = None, task=None, x0=None,
             out_dir=None, resume=False, progress=True, log=None, on_block=None) -> DesignResult:
    """Optimise the design of ``problem`` (module docstring) and return a ``DesignResult``: the best feasible
    design over all starts (or, when none was feasible, the least-violating one with ``status =
    "infeasible"``), before/after metrics, per-start summaries and the per-step log.

    ``x0``: the first start (default: the problem's start design), further starts random in the box.
    ``out_dir``: write ``design.json`` (the result so far, after every block) and ``state.npz`` there;
    ``resume=True`` continues from them (same problem and settings, checked).  ``log``: a callable receiving a
    line of text per block (default: none; the progress bar shows the same).  ``on_block``: a callable
    receiving (steps done, best feasible objective so far over the starts, ``inf`` while none) after every
    block (``experiments/ckcm_design.py --compare`` times the optimisers' traces with it); a true return value
    stops the run after that block (a wall-time budget).
    Warns (``DesignWarning``) on an infeasible start, on diverged starts and when no feasible design was found.
    """
    settings = Settings() if settings is None else settings
    task_json = None if task is None else task.to_json()
    out = None if out_dir is None else check.output_dir(out_dir, "out_dir")
    fp = None if out is None else run_fingerprint(problem, settings, data, task_json)
    saved = check_resumable(out, fp) if resume else None     # before anything is compiled
    xs = start_designs(problem, data, int(settings.starts), settings.seed, x0)
    evaluate_j = compiled_evaluate(problem)
    ev0 = evaluate_j(data, jnp.asarray(xs[0]))
    if not np.isfinite(float(ev0.objective)):
        raise ValueError("the objective is not finite at the start design: the design is singular on the task "
                         "(check the path against the workspace with ckcm.check_pose)")
    if float(ev0.max_violation) > 0:
        warnings.warn(f"the start design is infeasible: {describe_violations(problem, ev0)}; the optimiser first "
                      "seeks a feasible design (the result keeps the best feasible design found, if any)",
                      DesignWarning, stacklevel=2)
    carry = initial_carry(problem, settings, data, jnp.asarray(xs))
    history, done = {}, 0
    if out is not None:
        if saved is not None:
            carry, done, history = load_state(out / "state.npz", saved, carry)
        (out / "fingerprint.json").write_text(json.dumps(fp))
    block = compiled_block(problem, settings)
    # compilation is its own phase: the progress bar and its ETA count only the optimiser's steps
    if progress:
        print(f"compiling the optimiser block ({settings.optimizer}, {problem.model}) ...", file=sys.stderr,
              flush=True)
    t_compile = time.perf_counter()
    block.compile(data, carry)
    ready = (f"optimiser block ready in {time.perf_counter() - t_compile:.1f} s (tracing and compilation, or "
             "the compilation cache)")
    if progress:
        print(ready, file=sys.stderr, flush=True)
    if log is not None:
        log(ready)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=settings.blocks * int(settings.update_every), initial=done * int(settings.update_every),
                   desc=f"optimise ({settings.optimizer}, {problem.model})", unit="step")
    result = None
    try:
        for b in range(done, settings.blocks):
            carry, trace = block(data, carry)
            for k, v in trace.items():      # (starts, steps) -> steps rows of (starts,)
                history.setdefault(k, []).extend(np.asarray(v).T)
            done = b + 1
            best = float(np.min(np.asarray(carry.best_objective)))
            line = (f"step {done * settings.update_every}: objective {np.asarray(trace['objective'])[:, -1].min():.5g}, "
                    f"max violation {np.asarray(trace['violation'])[:, -1].min():.3g}, best feasible {best:.5g}")
            if bar is not None:
                bar.update(int(settings.update_every))
                bar.set_postfix_str(line.split(": ", 1)[1])
            if log is not None:
                log(line)
            stop = on_block is not None and bool(on_block(done * int(settings.update_every), best))
            if out is not None:
                save_state(out, carry, done, history)
                result = finish(problem, data, settings, carry, history, xs, task_json, done)
                result.save(out / "design.json")
            if stop:
                break
    finally:
        if bar is not None:
            bar.close()
    result = finish(problem, data, settings, carry, history, xs, task_json, done)
    if out is not None:
        result.save(out / "design.json")
    if result.status != "converged" or any(s["diverged_at"] >= 0 for s in result.starts):
        warnings.warn(result.message, DesignWarning, stacklevel=2)
    return result


# what each demand is, in the optimiser's message: the smooth peak is an upper bound of the peak force (it is not
# a second peak: objectives.soft_peak), the others are the measures themselves
DEMAND_LABELS = {"peak": ("smooth peak (a log-sum-exp upper bound of max |τ|)", " N"), "rms": ("RMS force", " N"),
                 "power": ("mean power", " W")}


def finish(problem, data, settings, carry: Carry, history, xs, task_json, blocks_done) -> DesignResult:
    """Assemble the ``DesignResult`` from the optimiser state (host side)."""
    space = problem.space
    c = jax.tree_util.tree_map(np.asarray, carry)
    feasible = np.isfinite(c.best_objective)
    evaluate_j = compiled_evaluate(problem)
    x_start = jnp.asarray(xs[0])
    if feasible.any():
        k = int(np.argmin(np.where(feasible, c.best_objective, np.inf)))
        u, status = c.best_u[k], "converged"
    else:
        k = int(np.argmin(c.least_violation))
        u, status = c.least_u[k], "infeasible"
    x = np.asarray(space.to_box(jnp.asarray(u)))
    before, after = evaluate_j(data, x_start), evaluate_j(data, jnp.asarray(x))
    starts = [start_summary(space, i, xs[i], c, feasible[i]) for i in range(len(xs))]
    diverged = [s for s in starts if s["diverged_at"] >= 0]
    if status == "converged":
        d = float(before.metrics["peak_force"] - after.metrics["peak_force"])
        label, unit = DEMAND_LABELS.get(problem.demand_name, (f"demand {problem.demand_name!r}", ""))
        msg = (f"best feasible design from start {k} (step {int(c.best_iteration[k])}): the minimised {label} "
               f"{float(after.demand):.6g}{unit} (start {float(before.demand):.6g}{unit}); the peak force itself "
               f"{float(after.metrics['peak_force']):.6g} N ({-d:+.4g} N)")
    else:
        msg = (f"no feasible design found in {blocks_done * settings.update_every} steps from {len(xs)} start(s); "
               f"the least-violating design (start {k}) still violates: {describe_violations(problem, after)}. "
               "Relax the limits or widen the bounds.")
    if diverged:
        msg += "; " + "; ".join(
            f"start {s['start']} diverged at step {s['diverged_at']} (non-finite objective or gradient): "
            + (f"its best feasible design (step {s['best_iteration']}) was kept" if s["feasible"]
               else "it had found no feasible design") for s in diverged)
        if status == "infeasible" and len(diverged) == len(xs):
            status = "diverged"
    return DesignResult(
        status=status, message=msg, params=design_params(problem, data, jnp.asarray(x)),
        initial_params=design_params(problem, data, x_start), x=space.describe(x), x_initial=space.describe(xs[0]),
        before=_metrics(before), after=_metrics(after), task=task_json,
        problem={"model": problem.model, "legs": problem.legs, "demand": problem.demand_name,
                 "sharpness": problem.sharpness, "free": list(space.free), "lower": list(space.lower),
                 "upper": list(space.upper), "limits": asdict(jax.tree_util.tree_map(float, data.limits))},
        settings=asdict(settings), history={k: np.asarray(v).tolist() for k, v in history.items()},
        starts=starts, evaluations=int(np.sum(c.evaluations)))


def _metrics(ev):
    out = {k: float(v) for k, v in ev.metrics.items()}
    out.update({"objective": float(ev.objective), "demand": float(ev.demand)})
    out.update({f"violation_{k}": float(v) for k, v in ev.violation.items()})
    return out
