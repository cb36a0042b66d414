"""The full MRDS multibody model of the CKCM end-effector (Nguyen & Pooran 1989), built from ``CKCMParams`` and
differentiable with respect to every parameter (θA, θB, masses, l_s, ...).  This module gathers its public
names; each concern has its file:

- ``mechanism``    the seven modules and six ball joints as an MRDS ``System`` (``build_ckcm_system``)
- ``legs``         leg mass models (``bench_legs``, ``paper_legs``) and what the paper's model leaves out
- ``states``       consistent system states from a payload motion (Φ, Φ̇, Φ̈), and payload poses from states
- ``paths``        payload paths: the ellipse of Nguyen & Pooran eq. 55, point-to-point moves
- ``inverse``      closed-chain inverse dynamics: actuator forces split like the paper's Tables 1-2
- ``controllers``  tracking laws: computed torque, PD plus feedforward, open loop
- ``tracking``     forward simulation under a controller (``simulate_tracking``, ``jitted_simulate``)

Accuracy, measured (``tests/test_ckcm_multibody.py``, ``experiments/out/ckcm_reproduction.md``): in float64 the
inverse dynamics' actuator forces make Pinocchio's ``constraintDynamics`` reproduce the prescribed
accelerations to < 1e-8 (asserted; round-off level in practice); static forces equal the Lagrangian model's to
~1e-12 N with ``paper_legs``; the open-loop inverse-dynamics forces keep the payload on the 17 cm/s ellipse to
3.8e-9 m over one loop in RK4 with 160 steps (1.6e-9 m with 200; the error is RK4's, ∝ dt⁴).  float32 works:
actuator forces to 7e-7 relative at a random state.
"""
from .controllers import (Controller, computed_torque, open_loop, payload_pose_error, pd_feedforward,
                          tracking_forces)
from .errors import CKCMStateError, SingularPoseWarning
from .inverse import actuator_forces, actuator_forces_along_path, cartesian_forces, inverse_dynamics_at
from .kinematics import warn_if_singular
from .legs import LEG_MODELS, LegInertia, bench_legs, check_legs, leg_model, one_leg, paper_legs
from .mechanism import (ACTUATED, LEG_NAMES, LEG_TOPOLOGY, MODULE_NAMES, PAYLOAD, PAYLOAD_TOPOLOGY, ball_joints,
                        build_ckcm_system, leg_frames, leg_module, payload_module)
from .paths import EllipsePath, PointToPointPath, ellipse, point_to_point
from .states import (check_ckcm_state, closure_errors, consistent_state, euler_from_rotation, euler_to_quat,
                     leg_coordinates, leg_lengths, motion_from_pose, payload_twist, pose_from_state, state_from_pose)
from .tracking import TrackingResult, check_simulation, default_integrator, jitted_simulate, simulate_tracking

__all__ = ["LEG_NAMES", "PAYLOAD", "MODULE_NAMES", "ACTUATED", "LegInertia", "bench_legs", "paper_legs",
           "LEG_MODELS", "leg_model", "check_legs", "leg_frames", "leg_module", "payload_module", "ball_joints",
           "build_ckcm_system", "euler_to_quat", "leg_coordinates", "payload_twist", "state_from_pose",
           "motion_from_pose", "euler_from_rotation", "pose_from_state", "leg_lengths", "closure_errors",
           "consistent_state", "check_ckcm_state", "CKCMStateError", "SingularPoseWarning", "warn_if_singular",
           "inverse_dynamics_at", "actuator_forces",
           "cartesian_forces", "actuator_forces_along_path", "EllipsePath", "ellipse", "PointToPointPath",
           "point_to_point", "Controller",
           "computed_torque", "pd_feedforward", "open_loop", "payload_pose_error", "tracking_forces",
           "TrackingResult", "default_integrator", "simulate_tracking", "jitted_simulate", "check_simulation"]
