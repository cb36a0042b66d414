"""The 6-DOF CKCM robot end-effector of Nguyen & Pooran (1989): a modified Stewart platform.

- ``params``      design/inertial parameters as a pytree (Nguyen & Pooran eq. 2-4, 40-42, 58), validation
- ``kinematics``  inverse kinematics (Nguyen & Pooran eq. 18-19), Jacobians (Nguyen & Pooran eq. 26-36),
                  forward kinematics (Newton), workspace/stroke checks, the singular-pose warning
- ``lagrangian``  the paper's Lagrangian model F = D Φ̈ + H Φ̇Φ̇ + G (Nguyen & Pooran eq. 39-56), derived by
                  autodiff from the energies; actuator forces along the ellipse of Nguyen & Pooran eq. 55
- ``multibody``   the full MRDS model (six U-P-S legs, free payload) built from ``CKCMParams``, its public names
                  gathered from ``mechanism`` (the system), ``legs`` (leg mass models), ``states`` (consistent
                  states from a payload motion), ``paths``, ``inverse`` (closed-chain inverse dynamics:
                  actuator forces), ``controllers`` and ``tracking`` (forward simulation under computed-torque /
                  PD-feedforward / open-loop control)
- ``assembly``    peg-in-hole assembly, a package: the compliant force controller (``assembly.compliance``, an RCC
                  impedance through the six actuators; also ``mrds_jax.ckcm.compliance``), the peg and hole,
                  Whitney's analysis and its planar rig, the scene ``ckcm_peg_in_hole``, one insertion as a pure batched
                  function and its outcome (inserted, jammed, wedged), and design through contact
- ``design``      design optimisation of the parameters on a task
- ``errors``      the exceptions and the warning of bad input

Parameters the paper leaves open follow the MJCF model of the same mechanism that the speed benchmarks use (``params``).
"""
from . import (assembly, controllers, inverse, kinematics, lagrangian, legs, mechanism, multibody, params, paths, states,
               tracking)
from .assembly import compliance
from .errors import (AttachmentError, CKCMInputError, ComplianceCentreError, ComplianceError, DampingError,
                     StiffnessError, ForwardKinematicsError, SingularConfigurationError,
                     SingularPoseWarning, StrokeError, WorkspaceError)
from .kinematics import (FKResult, WorkspaceMargins, angular_acceleration_matrices, angular_velocity_matrix,
                         check_leg_lengths, check_pose, elevation_jacobian, euler_zyx, newton_forward_kinematics,
                         home_pose, inverse_kinematics, inverse_kinematics_checked, jacobian, leg_elevation,
                         leg_vectors, rotation, solve_forward_kinematics, workspace_margins)
from .lagrangian import (PAPER, EnergyModel, ForceSplit, actuator_forces, actuator_forces_along_path,
                         cartesian_forces, ellipse_path, gravity, kinetic_energy, mass_matrix,
                         period_for_max_actuator_speed, potential_energy, total_energy, velocity_product,
                         velocity_product_coefficients)
from .params import (CKCMParams, attachment_angles, base_points, make_params, nominal, payload_points,
                     validate_params)
from .multibody import (LegInertia, bench_legs, build_ckcm_system, computed_torque, consistent_state, ellipse,
                        motion_from_pose, open_loop, paper_legs, pd_feedforward, simulate_tracking, state_from_pose)
