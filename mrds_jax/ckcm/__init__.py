"""The 6-DOF CKCM robot end-effector of Nguyen & Pooran (1989, seed 002): a modified Stewart platform.

- ``params``      design/inertial parameters as a pytree (eq. 2-4, 40-42, 58), validation
- ``kinematics``  inverse kinematics (eq. 18-19), Jacobians (eq. 26-36), forward kinematics (Newton),
                  workspace/stroke checks

Parameters the paper leaves open follow ``shared/bench/README.md`` (the MJCF model of the same mechanism).
"""
from . import kinematics, params
from .errors import (AttachmentError, CKCMInputError, ForwardKinematicsError, SingularConfigurationError,
                     StrokeError, WorkspaceError)
from .kinematics import (FKResult, WorkspaceMargins, angular_acceleration_matrices, angular_velocity_matrix,
                         check_leg_lengths, check_pose, elevation_jacobian, euler_zyx, forward_kinematics,
                         home_pose, inverse_kinematics, inverse_kinematics_checked, jacobian, leg_elevation,
                         leg_vectors, rotation, solve_forward_kinematics, workspace_margins)
from .params import (CKCMParams, attachment_angles, base_points, make_params, nominal, payload_points,
                     validate_params)
