"""Forward simulation of a saved design on the task it was optimised for: the hand-over from the optimiser
to the simulator (``mrds-jax simulate --design``).

Each moving path of the task is flown by the MRDS multibody plant (``multibody.simulate_tracking``) under
computed torque, starting on the path (a workspace sweep has no motion to fly; a payload range is flown with
the design's own payload); the actuator forces the controller applies are recorded.  With an exact model and
the plant starting on the path, these forces are the closed-chain inverse dynamics along the path, so their
peak is a second route to the optimiser's peak force (equal when the design was optimised with the
multibody model; the paper's model differs from the multibody one by its simplified leg kinetic energy).
"""
from __future__ import annotations

import numpy as np

from .. import multibody as MB
from .results import DesignResult, load_design
from .task import Task


def simulate_design(design, dt=1e-3, controller=None, omega=20.0, legs=None):
    """Simulate every path of ``design`` (a ``DesignResult`` or a path to its file) once through.

    Returns a list (one entry per path) of dicts: ``result`` (``multibody.TrackingResult``), ``peak_force``
    (max |τ| applied, N), ``max_position_error`` (m), ``max_closure_error`` (m), ``steps``, ``dt``.
    ``legs``: the multibody leg mass model (default: the one the design was optimised with, "bench" for the
    paper model)."""
    result = design if isinstance(design, DesignResult) else load_design(design)
    params = result.params
    task = result.task_object() or Task()
    legs = legs or result.problem.get("legs", "bench")
    controller = MB.computed_torque(omega) if controller is None else controller
    leg_inertia = MB.leg_model(params, legs)
    out = []
    for path, T in task.path_objects(params):
        n = max(int(round(T / dt)), 1)
        pose, rate, _ = path(0.0)
        state0 = MB.consistent_state(params, np.asarray(pose), np.asarray(rate))
        run = MB.jitted_simulate(n, record_forces=True)
        r = run(params, path, state0, T / n, controller, leg_inertia)
        MB.check_simulation(r)
        out.append({"result": r, "peak_force": float(np.max(np.abs(np.asarray(r.forces)))),
                    "max_position_error": float(np.max(np.asarray(r.position_error))),
                    "max_closure_error": float(np.max(np.asarray(r.closure_error))), "steps": n, "dt": T / n})
    return out
