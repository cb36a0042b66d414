"""Checks of user input at the public entry points, and the exception types they raise; one concern per file:
:mod:`.errors` (the exception types), :mod:`.arguments` (numbers, counts, choices, per-module arrays),
:mod:`.descriptions` (module descriptions), :mod:`.systems` (per-module arguments, states, ``simulate``'s
arguments), :mod:`.checkpoints` (output folders and checkpoint files), :mod:`.packages` (optional packages, checked before the
work that needs them). Everything is importable from here.

Every entry point (builders, URDF import, the module-level dynamics functions, ``build_system``,
``simulate``, samplers, Monte Carlo, design optimisation, the command line) calls one of the functions below
on its first line. They look only at static structure (shapes, names, counts) and at concrete Python/NumPy
values; a traced value (inside ``jit``/``vmap``/``grad``) is only checked for its shape, so no check costs a
host sync or runs inside compiled code.

Exception family (all ``ValueError``, so older ``except ValueError`` clauses keep working)::

    InputError                 bad input; the message names the item (link, joint, argument, file, ...)
    ├── ModelError             a module description (link, joint, operational point, URDF file)
    ├── ArgumentError          an argument of a function (shape, range, type, unknown key)
    ├── UnknownNameError       a name that does not exist (also a KeyError)
    ├── CheckpointError        a damaged, foreign or missing checkpoint file (names the file)
    ├── (elsewhere) SystemDescriptionError (formerly SystemDescriptionError), ContactError, CollisionError (geoms, pairs),
                    CKCMInputError, TaskError, DesignSpaceError, DesignFileError, SystemFileError (system files),
                    PinocchioExportError; FlexibleModelError and MJCF import failures are ModelErrors
"""
from .errors import (ArgumentError, CheckpointError, InputError, ModelError, SingularConfigurationWarning,
                     UnknownNameError)
from .arguments import (choice, count, finite, is_traced, module_arrays, nonnegative_array, ordered, positive,
                        vector)
from .descriptions import (breaks_triangle_inequality, finite_array, link_description, link_inertia, positive_mass,
                           rotational_inertia, unit_axis)
from .systems import constraint_conditioning, did_you_mean, known_keys, per_module, simulation, system_state
from .checkpoints import array_checksum, output_dir, read_json, read_npz
from .packages import install_hint, require
