"""Gradient-based design optimisation of the CKCM end-effector.

Nguyen & Pooran (1989) change one parameter at a time (Figs. 8-11); here all of them move at once, by
gradient, through either dynamic model (the paper's Lagrangian one or the MRDS multibody one), subject to
what a designer insists on.  One file per concern:

- ``space``        free variables (θA, θB, m, m1; optionally r_A, r_B, l_s, z_nominal, M; per leg: the
                   38-variable ``full`` space) and their box; named spaces ``SPACES``
- ``geometry``     eager numpy leg lengths and leg-to-leg distances (start checks, independent verification)
- ``task``         payload paths with their timing, workspace sweeps of static poses, payload ranges, and
                   how several of them combine (pooled, worst case, weighted), sampled into arrays
- ``robust``       manufacturing tolerances: the as-built machine, the smooth quantile (robust objective)
- ``objectives``   actuator forces through either model; demand measures (smooth peak, RMS, power)
- ``constraints``  attachment separation, Jacobian conditioning, stroke, leg elevation, strength rule
- ``problem``      ``make_problem`` and the pure ``evaluate(problem, data, x)``
- ``optimizer``    augmented Lagrangian around optax Adam / L-BFGS, multi-start in one compiled block, resumable
- ``optimizer_state``  the optimiser's per-start state ``Carry`` (what the optimiser advances and the checkpoint saves)
- ``checkpoint``   the optimiser's state files (``state.npz``, ``fingerprint.json``) that ``resume=True`` reads
- ``results``      ``DesignResult``: JSON save/load (``load_design``), plots
- ``verify``       independent after-the-fact check of a design against the limits
- ``simulation``   forward simulation of a saved design on its task (``simulate_design``)

Typical use::

    from mrds_jax.ckcm import design as D
    problem, data = D.make_problem(D.ellipse_task(period=0.5), model="paper", demand="peak")
    result = D.optimize(problem, data, D.Settings(optimizer="lbfgs", iterations=200, starts=4),
                        task=D.ellipse_task(period=0.5), out_dir="runs/ckcm")
    params = D.load_design("runs/ckcm/design.json").params

    # the full space: every leg its own (38 variables), the plant's model, the 95th percentile under tolerances
    problem, data = D.make_problem(D.ellipse_task(period=0.5), space="full", model="multibody",
                                   robust="quantile", robust_samples=256, tolerances=D.Tolerances(1e-3, 0.02))
"""
from .constraints import GROUPS, Limits, StrengthRule, constraint_values, pair_distances
from .objectives import DEMANDS, MODELS, model_description, actuator_forces, actuator_speeds, demand_metrics, soft_peak
from .optimizer import DesignWarning, Settings, augmented_lagrangian, optimize
from .problem import (Evaluation, InfeasibleBoundsError, Problem, ProblemData, check_bounds, check_start, design_params,
                      evaluate, make_problem)
from .results import (DesignFileError, DesignResult, load_design, plot_force_distribution, plot_forces, plot_geometry,
                      plot_geometry_3d, plot_history)
from .space import (DEFAULT_BOUNDS, DEFAULT_FREE, FULL_FREE, SPACES, VARIABLES, DesignSpace, DesignSpaceError,
                    make_space, named_space)
from .task import COMBINE, PATH_KINDS, Task, TaskError, TaskSamples, ellipse_task, payload_range, workspace_sweep
from .robust import Tolerances, smooth_quantile
from .verify import format_report, verify_design
from .simulation import simulate_design
