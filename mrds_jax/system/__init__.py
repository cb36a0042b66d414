"""Layer 5: systems of modules and contacts — Bonaventura's global level (MRDS Steps 2-4)."""
from .build import (Connectivity, System, SystemDescriptionError, SystemState, build_system, global_connectivity,
                    make_state, modular_connectivity)
from ..dynamics.interface import ModuleTerms, module_terms
from .constraint_space import ConstraintSystem, constraint_system, contact_kinematics
from .dynamics import SystemDynamics, forward_dynamics
from .couplings import coupling_errors, coupling_jacobian
from .inverse import InverseDynamics, inverse_dynamics
from .lilly import (ChainDynamics, ChainStructure, chain_structure, lilly_forward_dynamics,
                    simple_closed_chain_reference)
from .solve import METHODS as SOLVER_METHODS, ConstraintSolve, SolverSettings, solve_constraint_system
from .stabilisation import (ConstraintErrors, Stabilisation, baumgarte, constraint_errors, constraint_jacobian,
                            pd_suppression)
from .forces import (Actuators, ContactForce, JointSpringDamper, JointTorque, PointForce, SpringDamper, actuators,
                     applied_power, contact_force, dissipated_power, force_potential_energy, generalized_forces,
                     joint_spring_damper, joint_torque, point_force, sinusoidal_torques, spring_damper, spring_state,
                     with_control)
from .actuation import (ActivationDynamics, FixedTendon, TendonSpringDamper, actuator_state, activation_rate,
                        fixed_tendon, next_activation, tendon_length, tendon_spring_damper, with_activation)
from .limits import JointLimitWarning, LimitExit, joint_limits_at, limit_exits
from .ncp import NCPSettings, NCPSolution, RowLayout, ncp_residuals, project_friction_cone, solve_ncp
from .timestepping import (ContactSettings, ContactTrajectory, StepReport, contact_rollout, contact_step, row_layout,
                           slot_kinematics)
from .options import Checks, ContactStep, Integration, MovedKeywordWarning, Output
from .simulate import (ContactSolveWarning, Diagnostics, Energies, InconsistentStateError, SingularConfigurationError,
                       SingularConfigurationWarning, StateReport, check_initial_state, all_constraint_errors, constraint_matrix,
                       default_stabilisation, dynamics_path, make_consistent, project_positions, report_solve,
                       project_velocities, simulate, system_acceleration, system_energy, total_momentum,
                       trajectory_diagnostics, trajectory_states)


def __getattr__(name):
    """``SystemError``: the deprecated name of :class:`SystemDescriptionError` (it shadowed Python's built-in)."""
    if name == "SystemError":
        import warnings
        warnings.warn("mrds_jax.system.SystemError is deprecated (it shadows Python's built-in SystemError): use "
                      "mrds_jax.system.SystemDescriptionError", DeprecationWarning, stacklevel=2)
        return SystemDescriptionError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
