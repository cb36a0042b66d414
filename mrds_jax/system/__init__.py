"""Layer 5: systems of modules and contacts — Bonaventura's global level (MRDS Steps 2-4)."""
from .build import (Connectivity, System, SystemError, SystemState, build_system, global_connectivity, make_state,
                    modular_connectivity)
from .dynamics import (ConstraintSystem, ModuleTerms, SystemDynamics, constraint_system, contact_kinematics,
                       forward_dynamics, module_terms)
from .inverse import InverseDynamics, inverse_dynamics
from .lilly import ChainDynamics, ChainStructure, chain_structure, lilly_forward_dynamics
from .solve import METHODS as SOLVER_METHODS, SolverSettings, solve_constraint_system
