"""Layer 2: module descriptions — static topology, parameters as a pytree of arrays."""
from .builder import ModuleBuilder
from .configuration import (configuration_derivative, integrate_configuration, normalize_configuration)
from .joints import JOINT_KINDS, JointKind
from .tree import Module, Topology, TreeParams, check_module_state, validate
