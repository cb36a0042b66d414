"""Design through contact: the RCC (stiffnesses, compliance centre) and the end-effector's θA, θB chosen for robust
peg-in-hole insertion over a batch of misalignments, by gradient through the contact rollouts (``insertion``:
hard frictional contact, implicit derivatives of the contact solve): the design vector, its box and the objective
(issue 42, item 5).

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

The optimisers that minimise J (Adam through the rollouts and CMA-ES, at equal wall time) are in
:mod:`.optimizers`.

Bad input is named before anything compiles (``check_design``, ``design_problem``): a base task that
``assembly.check_task`` refuses (an interference fit, a non-positive-definite stiffness, a compliance centre that is
not finite, ...), a design vector with a non-finite entry (named by variable) or outside the box, a box that is
empty.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .insertion import insertion
from .task import AssemblyTask, Misalignment, as_arrays, check_task, default_task
from .compliance import Compliance, rcc
from ..design.objectives import soft_peak
from ..design.space import box_of_unconstrained, unconstrained_of_box
from ..errors import CKCMInputError
from ..params import CKCMParams, nominal

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
    from ...validation import is_traced
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


__all__ = ["VARIABLES", "UNITS", "AssemblyDesignError", "DesignBox", "BOX", "ObjectiveSettings", "DesignProblem",
           "DesignMetrics", "check_box", "check_design", "design_of", "compliance_of", "params_of", "to_box",
           "from_box", "misalignment_batch", "design_problem", "smooth_norm", "evaluate", "objective",
           "checked_evaluate"]
