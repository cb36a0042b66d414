"""mrds_jax: GPU-batched, differentiable closed-chain multibody dynamics in JAX.

Layers (see docs/DESIGN.md): ``spatial`` → ``model`` → ``dynamics`` (module level) → contacts/system.
"""
from . import dynamics, model, spatial
from .dynamics import *  # noqa: F401,F403
from .model import Module, ModuleBuilder

__version__ = "0.1.0"
