"""Front door: exports to other engines' formats."""
from .mjcf import from_mujoco_acceleration, mujoco_state, to_mjcf
from .pinocchio import PinocchioExportError, PinocchioModel, to_pinocchio
