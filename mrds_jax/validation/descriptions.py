"""Checks of a module description (``ModuleBuilder.add_link``, URDF/MJCF import, ``Module.with_params``):
finite arrays, unit axes, positive masses, physical rotational inertias."""
import numpy as np

from .errors import ModelError


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


def rotational_inertia(inertia, where, rtol=1e-9, triangle=True):
    """A rotational inertia about the centre of mass that a body can have: symmetric, positive semi-definite (no
    negative principal moment; zero ones are a point mass's or a thin rod's, kept: whether the mass matrix stays
    positive definite is a property of the module, checked by the loaders, :mod:`mrds_jax.loaders.mass`), and with
    ``triangle`` its principal moments obey the triangle inequality Iₐ + I_b ≥ I_c (they are sums of second moments
    of mass: I_xx = ∫(y² + z²) dm etc.; Featherstone §2.13). ``triangle=False`` accepts moments that break it
    (positive semi-definite, so every kinetic energy stays ≥ 0: as Pinocchio, which simulates them): use
    :func:`breaks_triangle_inequality` to name them. Accepts a (3,) diagonal or a (3, 3) matrix."""
    a = np.asarray(inertia, dtype=float)
    a = np.diag(a) if a.shape == (3,) else a
    I = finite_array(a, (3, 3), "rotational inertia", where)
    scale = max(1.0, np.abs(I).max())
    if not np.allclose(I, I.T, rtol=rtol, atol=1e-12 * scale):
        raise ModelError(f"{where}: rotational inertia is not symmetric: {I.tolist()}")
    eig = np.linalg.eigvalsh(0.5 * (I + I.T))
    if eig.min() < -1e-12 * scale:         # (rounding of a point mass's zeros lumped through rotations: kept)
        raise ModelError(f"{where}: rotational inertia has a negative principal moment (eigenvalues {eig.tolist()}): "
                         "no body has it, and it makes some kinetic energies negative")
    if triangle and breaks_triangle_inequality(I):
        raise ModelError(f"{where}: rotational inertia breaks the triangle inequality: principal moments "
                         f"{eig.tolist()} have {eig[0]:.6g} + {eig[1]:.6g} < {eig[2]:.6g} (no mass distribution "
                         "has them)")
    return I


def breaks_triangle_inequality(inertia):
    """Whether the principal moments of a symmetric rotational inertia break Iₐ + I_b ≥ I_c (relative 1e-6)."""
    eig = np.linalg.eigvalsh(0.5 * (inertia + np.transpose(inertia)))
    return bool(eig[0] + eig[1] < eig[2] * (1 - 1e-6))


def positive_mass(mass, where):
    try:
        m = float(mass)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: mass must be a number, got {mass!r}") from None
    if not np.isfinite(m) or m <= 0:
        raise ModelError(f"{where}: mass must be positive and finite, got {mass!r}")
    return m


def link_inertia(mass, inertia, where, rtol=1e-9, triangle=True):
    """The rotational inertia of a link of ``mass``: physical (:func:`rotational_inertia`, zero moments of a point
    mass included; 1e-3·I when None; ``triangle=False`` accepts moments that break the triangle inequality) for a
    positive mass, zero for a *massless* link (mass exactly 0: a joint frame between two joints, as the
    intermediate frames of several joints on one MuJoCo body or the massless links of a URDF). A massless link must
    have a zero inertia (or None) and, in a module, a child link (checked by ``mrds_jax.model.tree.validate``), so
    that every articulated inertia the recursions divide by carries the mass of a link below it (Featherstone
    §7.3); whether it does, and whether point masses leave the mass matrix positive definite, the loaders check
    (:mod:`mrds_jax.loaders.mass`)."""
    try:
        massless = float(mass) == 0.0
    except (TypeError, ValueError):
        massless = False
    if not massless:
        positive_mass(mass, where)
        return rotational_inertia(np.eye(3) * 1e-3 if inertia is None else inertia, where, rtol, triangle)
    if inertia is None:
        return np.zeros((3, 3))
    a = np.asarray(inertia, dtype=float)
    I = finite_array(np.diag(a) if a.shape == (3,) else a, (3, 3), "rotational inertia", where)
    if np.any(I != 0):
        raise ModelError(f"{where}: a massless link (mass 0) needs a zero rotational inertia, got {I.tolist()}")
    return I


def link_description(name, axis, axis2, position, rotation, mass, com, inertia, triangle=True):
    """Everything ``ModuleBuilder.add_link`` is given, checked: returns (unit axis, unit axis2, inertia); mass 0
    makes a massless link (:func:`link_inertia`; ``triangle`` as there)."""
    where = f"link {name!r}"
    if not isinstance(name, str) or not name:
        raise ModelError(f"a link needs a non-empty name, got {name!r}")
    finite_array(position, (3,), "position", where)
    finite_array(com, (3,), "centre of mass", where)
    if rotation is not None:
        finite_array(rotation, (3, 3), "rotation", where)
    I = link_inertia(mass, inertia, where, triangle=triangle)
    return unit_axis(axis, "axis", where), unit_axis(axis2, "axis2", where), I
