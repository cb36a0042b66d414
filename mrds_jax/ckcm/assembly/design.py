"""Design through contact: the RCC (stiffnesses, compliance centre) and the end-effector's θA, θB chosen for robust
peg-in-hole insertion over a batch of misalignments, by gradient through the contact rollouts (``assembly.insertion``:
hard frictional contact, implicit derivatives of the contact solve), compared with CMA-ES on the same objective at
equal wall time, compilation included (issue 42, item 5).

**The design vector** x (6,) in a box (``DesignBox``; default ``BOX``):

    x = [ln k_θ (N m/rad), ln k_lat (N/m), ln k_ax (N/m), centre (m), θA (rad), θB (rad)]

the RCC's angular (tilt and torsion), lateral and axial stiffness as logarithms (K = diag(k_θ, k_θ, k_θ, k_lat,
k_lat, k_ax) is then positive definite for every finite x), the compliance centre's distance behind the tip, and the
attachment angles of Nguyen & Pooran eq. 2. The damping keeps the base task's damping ratios: d_i = d_i⁰ (k_i/k_i⁰)^½
(the base is critically damped: ``assembly.default_compliance``). The optimisers never leave the box: the gradient
optimiser works in the unconstrained coordinates u of x = lower + (upper − lower) σ(u) (``design.space``'s map),
CMA-ES in the box scaled to [0, 1] with the box as its bounds.

**The objective** J(x) (smooth in x wherever the rollouts' contact modes do not change), over a batch of B
misalignments i (``AssemblyTask`` stacked along a leading axis) and the stored states t of each rollout of duration T:

    J = −(1/B) Σ_i d̃_i / d* + w_c · P(‖f_c‖) / F_c + w_a · P(τ) / F_a,
    d̃_i = d* − s · softplus((d* − d_i(T)) / s)                      (the depth reached by T, saturating at d*)

d_i(T) the tip's depth below the mouth at T, d* the window's target depth, s its softness; P the smooth peak
(``design.objectives.soft_peak``: s/β logsumexp(β|y|/s), an upper bound of max |y| within s log(n)/β) over every run
and stored state of the total contact force on the peg (its norm made smooth at 0: (‖f‖² + ε²)^½ − ε) and of the six
actuator forces; F_c, F_a their scales and w_c, w_a the weights (``ObjectiveSettings``). Reported beside it
(``DesignMetrics``, not smooth): the inserted fraction (d_i(T) ≥ d*), the mean depth, the true peaks, and the
rollouts' worst loop closure, penetration and whether every contact solve converged.

**The comparison** (``timed_gradient_runs``, ``timed_cma_es_runs``; ``timed_gradient_run``, ``timed_cma_es_run``
for one start): the gradient optimiser is optax's Adam of the design package (``design.optimizer.make_optimizer``)
on J(box(u)) with the value and gradient of one compiled program (forward mode, ``forward_jacobian``: six
directional derivatives, vmapped, by default; ``jax.value_and_grad`` with ``RunSettings.derivative="reverse"``);
CMA-ES (Hansen's ``cmaes`` package, as ``experiments/ckcm_design.py``) evaluates each generation's population in one
compiled ``vmap``. Several starts advance together, one program call per Adam step or generation for all of them.
Each run gets the same wall-time budget, counted from before its first compilation (a run that reuses a program
compiled earlier in the process is charged that compilation's measured time: ``RunSettings.charge_s``); both keep
the best design they evaluated.
``experiments/ckcm_assembly_design.py`` runs it.

Bad input is named before anything compiles (``check_design``, ``design_problem``): a base task that
``assembly.check_task`` refuses (an interference fit, a non-positive-definite stiffness, a compliance centre that is
not finite, ...), a design vector with a non-finite entry (named by variable) or outside the box, a box that is
empty.
"""
from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .assembly import AssemblyTask, Misalignment, as_arrays, check_task, default_task, insertion
from .compliance import Compliance, rcc
from .design.objectives import soft_peak
from .design.optimizer import Settings as OptimizerSettings, make_optimizer
from .design.space import box_of_unconstrained, unconstrained_of_box
from .errors import CKCMInputError
from .params import CKCMParams, nominal

DEG = np.pi / 180
VARIABLES = ("log_k_angular", "log_k_lateral", "log_k_axial", "centre", "theta_A", "theta_B")
UNITS = ("ln(N m/rad)", "ln(N/m)", "ln(N/m)", "m", "rad", "rad")


class AssemblyDesignError(CKCMInputError):
    """Bad input to the assembly design: a design vector that is not finite or lies outside its box, an empty box,
    misalignments of the wrong shape."""


class DesignBox(NamedTuple):
    """The box of the design vector (module docstring), in ``VARIABLES``' order: ``lower`` and ``upper`` (6,)."""
    lower: tuple
    upper: tuple


BOX = DesignBox(lower=(np.log(20.0), np.log(2e3), np.log(1e2), -0.05, 15 * DEG, 79 * DEG),
                upper=(np.log(2e3), np.log(2e5), np.log(1e4), 0.4, 45 * DEG, 109 * DEG))
"""k_θ in [20, 2000] N m/rad, k_lat in [2e3, 2e5] N/m, k_ax in [1e2, 1e4] N/m (a decade each side of the scene's RCC),
the centre from 5 cm beyond the tip to 0.4 m behind it, θA and θB ±15° about the paper's 30° and 94° (Nguyen & Pooran eq. 58)."""


class ObjectiveSettings(NamedTuple):
    """The rollouts and the objective's terms (module docstring): step ``dt`` (s), ``n_steps`` steps stored every
    ``decimation``-th (the window T = n_steps dt), the window's ``target_depth`` d* (m) and its ``softness`` s (m);
    the contact and actuator peaks' ``contact_scale`` F_c and ``actuator_scale`` F_a (N), their weights, and the
    smooth peaks' ``sharpness`` β."""
    dt: float = 2e-3
    n_steps: int = 50
    decimation: int = 5
    target_depth: float = 1.5e-3
    softness: float = 2e-4
    contact_scale: float = 100.0
    actuator_scale: float = 1000.0
    contact_weight: float = 0.1
    actuator_weight: float = 0.1
    sharpness: float = 20.0


class DesignProblem(NamedTuple):
    """What the objective reads besides the design: the base ``params`` (θA, θB replaced by the design's), the
    ``tasks`` (an ``AssemblyTask`` with a leading batch axis: one per misalignment; the compliance replaced by the
    design's), and ``base`` the base task's compliance (its stiffness and damping set the damping ratios)."""
    params: CKCMParams
    tasks: AssemblyTask
    base: Compliance


class DesignMetrics(NamedTuple):
    """The objective and what a design is judged by (module docstring): the inserted fraction, the mean depth at
    T (m), the true peaks of the contact and actuator forces (N), the worst loop closure and penetration (m), whether
    every contact solve converged, and the contact mode (touching slots) of every run at every stored state."""
    objective: jax.Array
    inserted_fraction: jax.Array
    mean_depth: jax.Array
    peak_contact: jax.Array
    peak_actuator: jax.Array
    closure: jax.Array
    penetration: jax.Array
    converged: jax.Array
    touching: jax.Array          # (B, n_out): touching contact slots of each run at each stored state (its mode)


# ----------------------------------------------------------------------------- the design vector
def check_box(box: DesignBox, where="design box") -> DesignBox:
    """Named error (``AssemblyDesignError``) for a box that is not six finite, non-empty intervals."""
    lo, hi = np.asarray(box.lower, float), np.asarray(box.upper, float)
    if lo.shape != (len(VARIABLES),) or hi.shape != lo.shape:
        raise AssemblyDesignError(f"{where}: lower and upper must have {len(VARIABLES)} entries {VARIABLES}")
    bad = [n for n, a, b in zip(VARIABLES, lo, hi) if not (np.isfinite(a) and np.isfinite(b) and a < b)]
    if bad:
        raise AssemblyDesignError(f"{where}: the bounds of {bad} are not finite or empty (lower >= upper)")
    return box


def check_design(x, box: DesignBox = BOX, where="design") -> np.ndarray:
    """Named errors (``AssemblyDesignError``) for a concrete design vector: wrong shape, a non-finite entry or one
    outside the open box, each named by its variable. Traced vectors pass unchecked."""
    from ..validation import is_traced
    if is_traced(x):
        return x
    x = np.asarray(x, float)
    if x.shape != (len(VARIABLES),):
        raise AssemblyDesignError(f"{where}: a design vector has {len(VARIABLES)} entries {VARIABLES}, got shape "
                                  f"{x.shape}")
    bad = [f"{n} = {float(v)}" for n, v in zip(VARIABLES, x) if not np.isfinite(v)]
    if bad:
        raise AssemblyDesignError(f"{where}: not finite: {', '.join(bad)}")
    lo, hi = np.asarray(box.lower, float), np.asarray(box.upper, float)
    out = [f"{n} = {v:.6g} {u} not in ({a:.6g}, {b:.6g})" for n, u, v, a, b in zip(VARIABLES, UNITS, x, lo, hi)
           if not a < v < b]
    if out:
        raise AssemblyDesignError(f"{where}: outside the design box: {'; '.join(out)}")
    return x


def design_of(compliance: Compliance, params: CKCMParams) -> jax.Array:
    """The design vector (module docstring) of an RCC (diagonal stiffness) and the end-effector's parameters."""
    k = jnp.diagonal(compliance.stiffness)
    return jnp.stack([jnp.log(k[0]), jnp.log(k[3]), jnp.log(k[5]), compliance.centre, params.theta_A,
                      params.theta_B])


def compliance_of(x, base: Compliance) -> Compliance:
    """The RCC of design ``x``: stiffness diag(k_θ, k_θ, k_θ, k_lat, k_lat, k_ax) = exp of x's logarithms, the
    base's damping ratios (d_i = d_i⁰ (k_i/k_i⁰)^½), the centre x[3]; tip, insertion force and speed of ``base``
    (``compliance.rcc``: checked when concrete)."""
    k_theta, k_lat, k_ax = jnp.exp(x[0]), jnp.exp(x[1]), jnp.exp(x[2])
    k = jnp.stack([k_theta, k_theta, k_theta, k_lat, k_lat, k_ax])
    k0, d0 = jnp.diagonal(base.stiffness), jnp.diagonal(base.damping)
    return rcc(k_theta, k_lat, k_ax, torsional=k_theta, damping=d0 * jnp.sqrt(k / k0), centre=x[3], tip=base.tip,
               insertion_force=base.insertion_force, insertion_speed=base.insertion_speed)


def params_of(x, base: CKCMParams) -> CKCMParams:
    """``base`` with θA = x[4], θB = x[5]."""
    return base.replace(theta_A=x[4], theta_B=x[5])


def to_box(u, box: DesignBox = BOX):
    """The design x of unconstrained coordinates u (``design.space.box_of_unconstrained``)."""
    return box_of_unconstrained(u, box.lower, box.upper)


def from_box(x, box: DesignBox = BOX):
    """The unconstrained coordinates u of a design x strictly inside the box."""
    return unconstrained_of_box(x, box.lower, box.upper)


# ----------------------------------------------------------------------------- the problem
def misalignment_batch(n, seed=0, lateral=2e-3, angular=1.0 * DEG, standoff=3e-3) -> Misalignment:
    """``n`` initial errors drawn uniformly (numpy, ``seed``): lateral in [−lateral, lateral] (m), angular in
    [−angular, angular] (rad), every standoff ``standoff`` (m); arrays (n,). The default 3 mm starts the scene's
    peg clear of its chamfer for every lateral error up to 2 mm (``peg_hole.start_clearance`` ≥ 0.16 mm; at 1 mm
    the end sphere of a tip 1.9 mm off the axis started 0.8 mm inside the chamfer, and the position correction
    pushed it out over the first steps: the 8.2e-4 m of penetration the design comparison once reported)."""
    rng = np.random.default_rng(seed)
    f = jnp.result_type(float)
    return Misalignment(jnp.asarray(rng.uniform(-lateral, lateral, n), f),
                        jnp.asarray(rng.uniform(-angular, angular, n), f), jnp.full((n,), standoff, f))


def design_problem(misalignments: Misalignment, base_task: AssemblyTask | None = None,
                   params: CKCMParams | None = None) -> DesignProblem:
    """The ``DesignProblem`` of a batch of ``misalignments`` (fields (B,)) from ``base_task`` (default
    ``assembly.default_task()``; checked first: ``assembly.check_task``'s named errors) and ``params`` (default
    ``nominal()``)."""
    base_task = default_task() if base_task is None else as_arrays(base_task)
    check_task(base_task, where="assembly design base task")
    m = Misalignment(*(jnp.asarray(v, jnp.result_type(float)) for v in misalignments))
    shapes = {np.shape(v) for v in m}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise AssemblyDesignError(f"assembly design: the misalignments' fields must be (B,) arrays of one length, "
                                  f"got shapes {[np.shape(v) for v in m]}")
    for i in range(m.lateral.shape[0]):
        check_task(base_task._replace(misalignment=Misalignment(*(v[i] for v in m))),
                   where=f"assembly design misalignment {i}")
    B = m.lateral.shape[0]
    tasks = jax.tree.map(lambda v: jnp.broadcast_to(v, (B,) + jnp.shape(v)), base_task._replace(misalignment=None))
    return DesignProblem(nominal() if params is None else params, tasks._replace(misalignment=m),
                         base_task.compliance)


def smooth_norm(v, eps):
    """(‖v‖² + ε²)^½ − ε over the last axis: differentiable at 0, within ε of ‖v‖."""
    return jnp.sqrt(jnp.sum(v * v, axis=-1) + eps * eps) - eps


def evaluate(problem: DesignProblem, x, settings: ObjectiveSettings = ObjectiveSettings()) -> DesignMetrics:
    """J(x) and its metrics (module docstring): the batch's insertions (``assembly.insertion`` under ``vmap``)
    with the design's RCC and θA, θB. Pure and differentiable in x (``jax.grad``, ``jax.jacfwd``); ``settings``
    static."""
    s = settings
    params = params_of(x, problem.params)
    compliance = compliance_of(x, problem.base)

    def one(task):
        return insertion(params, task._replace(compliance=compliance), s.dt, s.n_steps, s.decimation)
    runs = jax.vmap(one)(problem.tasks)
    d = runs.depth[:, -1]
    reached = s.target_depth - s.softness * jax.nn.softplus((s.target_depth - d) / s.softness)
    contact = smooth_norm(runs.contact_force, 1e-6 * s.contact_scale)
    J = (-jnp.mean(reached) / s.target_depth
         + s.contact_weight * soft_peak(contact, s.contact_scale, s.sharpness) / s.contact_scale
         + s.actuator_weight * soft_peak(runs.forces, s.actuator_scale, s.sharpness) / s.actuator_scale)
    return DesignMetrics(J, jnp.mean(d >= s.target_depth), jnp.mean(d),
                         jnp.max(jnp.linalg.norm(runs.contact_force, axis=-1)), jnp.max(jnp.abs(runs.forces)),
                         jnp.max(runs.closure), jnp.max(runs.penetration), jnp.all(runs.converged), runs.touching)


def objective(problem: DesignProblem, x, settings: ObjectiveSettings = ObjectiveSettings()):
    """J(x) alone (``evaluate``'s first field): what ``jax.grad`` differentiates."""
    return evaluate(problem, x, settings).objective


def checked_evaluate(problem: DesignProblem, x, settings: ObjectiveSettings = ObjectiveSettings(),
                     box: DesignBox = BOX) -> DesignMetrics:
    """``evaluate`` of a concrete design after ``check_design`` and the RCC's own check (named errors before
    anything compiles), compiled once per settings."""
    check_box(box)
    x = check_design(x, box)
    compliance_of(jnp.asarray(x), problem.base)          # rcc -> check_compliance on concrete numbers
    return _evaluate_jit(settings)(problem, jnp.asarray(x))


@functools.lru_cache(maxsize=None)
def _evaluate_jit(settings):
    return jax.jit(functools.partial(evaluate, settings=settings))


# ----------------------------------------------------------------------------- the optimisers, at equal wall time
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
    from .design.optimizer import forward_jacobian
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
    try:
        from cmaes import CMA
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError("timed_cma_es_runs needs the cmaes package: pip install 'mrds_jax[experiments]' "
                                  "(or pip install cmaes)") from err
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


__all__ = ["VARIABLES", "UNITS", "AssemblyDesignError", "DesignBox", "BOX", "ObjectiveSettings", "DesignProblem",
           "DesignMetrics", "check_box", "check_design", "design_of", "compliance_of", "params_of", "to_box",
           "from_box", "misalignment_batch", "design_problem", "smooth_norm", "evaluate", "objective",
           "checked_evaluate", "RunSettings", "RunResult", "DERIVATIVES", "gradient_step", "population_evaluation",
           "timed_gradient_runs", "timed_gradient_run", "timed_cma_es_runs", "timed_cma_es_run"]
