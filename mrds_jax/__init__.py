"""mrds_jax: GPU-batched, differentiable closed-chain multibody dynamics in JAX.

Layers (docs/DESIGN.md), one subpackage each: ``spatial`` → ``model`` → ``dynamics`` (module level,
Bonaventura Step 2) → ``contacts`` (general joint model) → ``system`` (global level, Steps 3-4) →
``integrate`` (rollouts) → applications (``montecarlo``, ``ckcm``).
"""
from . import contacts, dynamics, export, integrate, model, montecarlo, spatial, system
from .dynamics import *  # noqa: F401,F403
from .model import Module, ModuleBuilder

__version__ = "0.1.0"
