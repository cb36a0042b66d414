"""Layer 1: spatial algebra, ordered [angular; linear] as in Lilly & Orin eq. 1-3 and Featherstone."""
from .linalg import cholesky, matmul, spd_solve, triangular_solve
from .algebra import cross_force, cross_force_matrix, cross_motion, cross_motion_matrix
from .inertia import inertia_parameters, kinetic_energy, spatial_inertia, transform_inertia
from .rotation import (axis_angle_rotation, cross, quat_derivative, quat_exp, quat_integrate, quat_multiply,
                       quat_to_rotation, rot_x, rot_y, rot_z, rotation_to_quat, rpy_rotation, skew, unskew)
from .transforms import (act_force, act_motion, compose, force_transform, inv_act_force, inv_act_motion,
                         inverse, motion_transform, rigid_body_transform, spatial_rotation)
