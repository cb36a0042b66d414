"""Layer 3: module dynamics (Bonaventura's modular level, Step 2). One file per algorithm."""
from .aba import aba, articulated_inertias
from .crba import composite_inertias, mass_matrix
from .crba_parallel import mass_matrix_parallel
from .energy import kinetic_energy, mechanical_energy, potential_energy, spatial_momentum
from .minverse import inverse_mass_matrix
from .kinematics import (forward_kinematics, frame_acceleration, frame_bias_acceleration, frame_jacobian,
                         frame_placement, frame_velocity, link_accelerations, task_jacobian)
from .operational import (cross_space_inertia, inverse_osim, open_chain_accelerations, relative_jacobian)
from .rnea import generalized_gravity, nonlinear_effects, rnea
from . import energy_module, tree_module  # noqa: F401,E402  (pair EnergyModule and the rigid tree with the contract)
