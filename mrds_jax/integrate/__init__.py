"""Layer 6: integration — RK4 and semi-implicit Euler steps, ``lax.scan`` rollouts."""
from .integrators import INTEGRATORS, rk4_compact_step, rk4_step, semi_implicit_euler_step
from .rollout import SimulationError, Trajectory, check_trajectory, rollout
