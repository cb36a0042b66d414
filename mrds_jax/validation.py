"""Checks of user input at the public entry points, and the exception types they raise.

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
    └── (elsewhere) SystemError, ContactError, CKCMInputError, TaskError, DesignSpaceError, DesignFileError,
                    SystemFileError (system files), PinocchioExportError; FlexibleModelError and MJCF import
                    failures are ModelErrors
"""
import difflib
import hashlib
import json
import os
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


class InputError(ValueError):
    """Bad input to mrds_jax: the message names the item and the offending value."""


class ModelError(InputError):
    """Bad module description: names the link, joint, operational point or file."""


class ArgumentError(InputError):
    """Bad argument of a function: names the function, the argument and its value."""


class UnknownNameError(InputError, KeyError):
    """A name (link, module, operational point, ...) that does not exist."""

    def __str__(self):          # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CheckpointError(InputError):
    """A checkpoint file that is damaged, foreign or missing; the message names the file."""


def is_traced(x):
    """True when ``x`` (any pytree) holds a JAX tracer: only static properties can be checked then."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


# ----------------------------------------------------------------------------- numbers and counts
def count(value, what, where, minimum=1):
    """An integer ``value`` ≥ ``minimum`` (n_steps, decimation, batch sizes, sample counts), returned as int."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{where}: {what} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ArgumentError(f"{where}: {what} must be >= {minimum}, got {value}")
    return int(value)


def positive(value, what, where, allow_zero=False):
    """A finite number > 0 (≥ 0 with ``allow_zero``): step sizes, periods, gains. Tracers pass unchecked."""
    if is_traced(value):
        return value
    try:
        x = float(np.asarray(value))
    except (TypeError, ValueError):
        raise ArgumentError(f"{where}: {what} must be a number, got {value!r}") from None
    if not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ArgumentError(f"{where}: {what} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return value


def ordered(low, high, what, where, strict=False):
    """Elementwise low ≤ high (< with ``strict``) for concrete bounds, e.g. a sampler's range."""
    if is_traced((low, high)):
        return
    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    bad = ~((lo < hi) if strict else (lo <= hi)) | ~np.isfinite(lo + hi)
    if np.any(bad):
        raise ArgumentError(f"{where}: {what} needs low {'<' if strict else '<='} high (finite), got low={low!r}, "
                            f"high={high!r}")


def nonnegative_array(value, what, where, strict=False):
    """Every entry ≥ 0 (> 0 with ``strict``) and finite, for concrete arrays (standard deviations, tolerances)."""
    if is_traced(value):
        return
    a = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(a)) or np.any(a < 0) or (strict and np.any(a == 0)):
        raise ArgumentError(f"{where}: {what} must be finite and {'> 0' if strict else '>= 0'}, got {value!r}")


def choice(value, options, what, where):
    """``value`` is one of ``options``."""
    if value not in options:
        raise ArgumentError(f"{where}: unknown {what} {value!r}; use one of {list(options)}")
    return value


# ----------------------------------------------------------------------------- arrays of a module
def vector(x, n, what, where, hint=""):
    """``x`` as an array of shape (n,) (lists and tuples are converted; tracers keep their shape check)."""
    try:
        a = x if isinstance(x, (jax.Array, jax.core.Tracer)) else jnp.asarray(x)
    except (TypeError, ValueError):
        raise ArgumentError(f"{where}: {what} must be an array of {n} numbers, got {type(x).__name__} {x!r}") from None
    if jnp.shape(a) != (n,):
        raise ArgumentError(f"{where}: {what} has shape {jnp.shape(a)}, needs ({n},){hint}")
    return a


_MODULE_SIZES = dict(q="nq", v="nv", qdd="nv", tau="nv")


def module_arrays(module, where, **arrays):
    """The per-module arrays of a dynamics call (q → nq, v/qdd/tau → nv entries) as arrays of the right
    shape, in the order given; None stays None. One scenario per call: batch with ``jax.vmap``."""
    hint = f" (module nq={module.nq}, nv={module.nv}; one scenario per call, batch with jax.vmap)"
    out = []
    for name, x in arrays.items():
        out.append(None if x is None else vector(x, getattr(module, _MODULE_SIZES[name]), name, where, hint))
    return out[0] if len(out) == 1 else tuple(out)


# ----------------------------------------------------------------------------- model description
def finite_array(x, shape, what, where):
    """A concrete float array of ``shape`` with finite entries (numpy), for module descriptions."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be numeric, got {x!r}") from None
    if a.shape != shape:
        raise ModelError(f"{where}: {what} has shape {a.shape}, needs {shape}")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{where}: {what} is not finite: {a.tolist()}")
    return a


def unit_axis(axis, what, where):
    """A finite, nonzero 3-vector, returned normalised."""
    a = finite_array(axis, (3,), what, where)
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise ModelError(f"{where}: {what} is the zero vector {a.tolist()}; a joint axis needs a direction")
    return a / n


def rotational_inertia(inertia, where, rtol=1e-9):
    """A physical rotational inertia about the centre of mass: symmetric, positive definite, and its principal
    moments obey the triangle inequality Iₐ + I_b ≥ I_c (they are sums of second moments of mass:
    I_xx = ∫(y² + z²) dm etc.; Featherstone §2.13). Accepts a (3,) diagonal or a (3, 3) matrix."""
    a = np.asarray(inertia, dtype=float)
    a = np.diag(a) if a.shape == (3,) else a
    I = finite_array(a, (3, 3), "rotational inertia", where)
    scale = max(1.0, np.abs(I).max())
    if not np.allclose(I, I.T, rtol=rtol, atol=1e-12 * scale):
        raise ModelError(f"{where}: rotational inertia is not symmetric: {I.tolist()}")
    eig = np.linalg.eigvalsh(0.5 * (I + I.T))
    if eig.min() <= 0:
        raise ModelError(f"{where}: rotational inertia is not positive definite (eigenvalues {eig.tolist()})")
    if eig[0] + eig[1] < eig[2] * (1 - 1e-6):
        raise ModelError(f"{where}: rotational inertia breaks the triangle inequality: principal moments "
                         f"{eig.tolist()} have {eig[0]:.6g} + {eig[1]:.6g} < {eig[2]:.6g} (no mass distribution "
                         "has them)")
    return I


def positive_mass(mass, where):
    try:
        m = float(mass)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: mass must be a number, got {mass!r}") from None
    if not np.isfinite(m) or m <= 0:
        raise ModelError(f"{where}: mass must be positive and finite, got {mass!r}")
    return m


def link_description(name, axis, axis2, position, rotation, mass, com, inertia):
    """Everything ``ModuleBuilder.add_link`` is given, checked: returns (unit axis, unit axis2, inertia)."""
    where = f"link {name!r}"
    if not isinstance(name, str) or not name:
        raise ModelError(f"a link needs a non-empty name, got {name!r}")
    finite_array(position, (3,), "position", where)
    finite_array(com, (3,), "centre of mass", where)
    if rotation is not None:
        finite_array(rotation, (3, 3), "rotation", where)
    positive_mass(mass, where)
    I = rotational_inertia(np.eye(3) * 1e-3 if inertia is None else inertia, where)
    return unit_axis(axis, "axis", where), unit_axis(axis2, "axis2", where), I


# ----------------------------------------------------------------------------- dictionaries and systems
def did_you_mean(name, options):
    """``"; did you mean 'mass'?"`` for the closest of ``options`` to a misspelt ``name`` (difflib), or ``""``."""
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def known_keys(mapping, allowed, what, where):
    """Every key of ``mapping`` names something that exists (a misspelt key must not be ignored silently)."""
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        raise UnknownNameError(f"{where}: {what} has entries for {unknown}, which do not exist; known: "
                               f"{list(allowed)}{did_you_mean(unknown[0], allowed)}")


def per_module(system, value, what, size, where):
    """A per-module argument (joint forces ``tau``, states' ``q``/``v``): None, a dict by module name or a
    sequence with one entry per module, each of shape (module.<size>,)."""
    if value is None:
        return
    names = system.module_names
    if isinstance(value, dict):
        known_keys(value, names, what, where)
        items = [(n, m, value[n]) for n, m in zip(names, system.modules) if n in value]
    else:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise ArgumentError(f"{where}: {what} must be a dict by module name or one array per module, "
                                f"got {type(value).__name__}")
        if len(value) != len(names):
            raise ArgumentError(f"{where}: {what} has {len(value)} entries, the system has {len(names)} modules "
                                f"{list(names)} (give one array per module, or a dict by module name)")
        items = list(zip(names, system.modules, value))
    for n, m, x in items:
        if x is not None:
            vector(x, getattr(m, size), f"{what} of module {n!r}", where)


def system_state(system, state, where):
    """A :class:`~mrds_jax.system.SystemState` with one q and one v per module, of the modules' sizes."""
    if not (hasattr(state, "q") and hasattr(state, "v")):
        raise ArgumentError(f"{where}: state must be a SystemState (mrds_jax.system.make_state), got "
                            f"{type(state).__name__}")
    per_module(system, tuple(state.q), "state.q", "nq", where)
    per_module(system, tuple(state.v), "state.v", "nv", where)


def simulation(system, state0, dt, n_steps, decimation, integrator, integrators, t_end=None):
    """The arguments of ``simulate``: a state that fits the system, dt > 0, n_steps ≥ 1 a multiple of
    decimation ≥ 1 (or no n_steps and an end time ``t_end``), a known integrator."""
    where = "simulate"
    system_state(system, state0, where)
    positive(dt, "dt", where)
    count(decimation, "decimation", where)
    choice(integrator, integrators, "integrator", where)
    if n_steps is None:
        if t_end is None:
            raise ArgumentError(f"{where}: give n_steps or an end time t_end")
        return
    count(n_steps, "n_steps", where)
    if n_steps % decimation:
        raise ArgumentError(f"{where}: n_steps ({n_steps}) must be a multiple of decimation ({decimation})")


# ----------------------------------------------------------------------------- files
def output_dir(path, what="output folder"):
    """A folder we can write into (created if missing), checked before any compilation."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ArgumentError(f"{what} {str(p)!r} is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ArgumentError(f"{what} {str(p)!r} cannot be created: {e.strerror}") from None
    probe = p / f".mrds_jax_write_test_{os.getpid()}"
    try:                            # a real write: os.access says yes to root on a read-only file system
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ArgumentError(f"{what} {str(p)!r} is not writable ({e.strerror})") from None
    return p


def read_json(path, what):
    """JSON from ``path``; CheckpointError naming the file when it is missing, truncated or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{what} {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{what} {str(path)!r} is damaged (not JSON: {e})") from None


def read_npz(path, what):
    """All arrays of an .npz file as a dict; CheckpointError naming the file when it is damaged or truncated."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CheckpointError(f"{what} {str(path)!r} does not exist") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"{what} {str(path)!r} is damaged ({type(e).__name__}: {e})") from None


def array_checksum(arrays):
    """SHA-256 over names, dtypes, shapes and bytes of a dict of arrays (sorted by name)."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()
