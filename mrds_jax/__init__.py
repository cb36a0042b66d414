"""mrds_jax: GPU-batched, differentiable closed-chain multibody dynamics in JAX.

Modules are rigid kinematic trees; contacts close loops between their operational points (or the ground)
and are solved exactly (Bonaventura's MRDS, Lilly & Orin's fast path). Every function takes one scenario;
batch with ``jax.vmap``, differentiate with ``jax.grad``; enable ``jax_enable_x64`` for closed chains.

Start here (all available as ``mrds_jax.<name>``)::

    import jax; jax.config.update("jax_enable_x64", True)
    import mrds_jax as mj

    system, state = mj.examples.dual_arm_grasp()          # or mj.load_mjcf("robot.xml"), or build it:
    #   arm = mj.load_urdf("arm.urdf") / mj.ModuleBuilder() ... .build();  mj.contacts.weld(...)
    #   system = mj.build_system({"arm": arm, ...}, [contact, ...])
    out = mj.forward_dynamics(system, state)               # q̈ per module, constraint forces per contact
    traj = mj.simulate(system, state, dt=1e-3, n_steps=1000)

* building: :class:`ModuleBuilder`, :func:`load_urdf` (one module per URDF), :func:`load_mjcf` (MuJoCo MJCF:
  one module per kinematic tree, ``<equality connect/weld>`` → contacts), :mod:`contacts` (the contact
  library), :func:`build_system`, :func:`make_state`, :func:`make_consistent`, :mod:`examples`;
* dynamics: :func:`forward_dynamics`, :func:`lilly_forward_dynamics`, :func:`inverse_dynamics`,
  :func:`simulate`; per module (tree) ``aba``, ``rnea``, ``mass_matrix``, Jacobians, … (:mod:`dynamics`,
  also exported here);
* flexible links: :mod:`flexible` (assumed-modes beams, Bonaventura Ch. 7-8; ``examples.bonaventura_system``);
* system files: :func:`load_system_file` (TOML: modules, contacts, forces, initial state, settings; the
  ``mrds-jax check`` / ``mrds-jax simulate FILE`` commands), :mod:`sysfile`;
* out: :func:`to_mjcf` (MuJoCo/MJX comparisons and viewing), :func:`to_pinocchio` (a Pinocchio model with
  ``RigidConstraintModel`` loops), :mod:`viz` (animations, stick-figure scenes);
* precision: :mod:`console` (a one-time warning when a system is built in float32 without asking for it).

Layers, bottom to top (each imports only from itself and those below; ``docs/guide/layers.md``): ``spatial`` →
``model`` → ``dynamics`` (module level, Bonaventura Step 2) → ``contacts`` (general joint model) → ``integrate``
(rollouts of any state) → ``system`` (global level, Steps 3-4) → applications (``flexible``, ``ckcm``,
``montecarlo``) → front doors (``loaders``, ``sysfile``, ``export``, ``viz``, ``examples``, the CLI). The documentation site is built from the repository's ``docs/``
folder (``mkdocs build``; getting started, a guide per layer, the API reference from these docstrings); the
design is described on the site's pages, and
``docs/algorithm_notes.md`` digests the papers' algorithms with the errata found.
"""
# before anything starts JAX's CPU backend: the XLA:CPU flag the engine's speed depends on (backend_flags)
from . import backend_flags as _backend_flags

BACKEND_FLAGS = _backend_flags.apply()

import importlib

from . import contacts, dynamics, export, integrate, model, montecarlo, spatial, system  # noqa: F401
from .dynamics import *  # noqa: F401,F403
from .model import Module, ModuleBuilder  # noqa: F401

__version__ = "0.1.0"

# Loaded on first use (PEP 562), so `import mrds_jax` stays as fast as its layers: name -> (module, attribute)
_LAZY = {
    "load_urdf": (".loaders.urdf", "load_urdf"),
    "load_mjcf": (".loaders.mjcf", "load_mjcf"),
    "MjcfMapping": (".loaders.mjcf", "MjcfMapping"),
    "examples": (".examples", None),
    "loaders": (".loaders", None),
    "ckcm": (".ckcm", None),
    "flexible": (".flexible", None),
    "to_mjcf": (".export", "to_mjcf"),
    "load_system_file": (".sysfile", "load_system_file"),
    "sysfile": (".sysfile", None),
    "viz": (".viz", None),
    "console": (".console", None),
    "to_pinocchio": (".export", "to_pinocchio"),
    **{name: (".system", name) for name in (
        "System", "SystemState", "build_system", "make_state", "forward_dynamics", "lilly_forward_dynamics",
        "inverse_dynamics", "simulate", "make_consistent", "check_initial_state")},
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'mrds_jax' has no attribute {name!r}")
    where, attr = _LAZY[name]
    module = importlib.import_module(where, __name__)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
