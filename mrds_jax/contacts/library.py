"""Ready contacts (Bonaventura §3.3.1, Bonaventura eq. 27-31; the planar models of §8.2, notes §5).

All modes are constant in frame E and ordered [angular; linear] (6-D) or [θ; x; y] (planar, ``planar=True``).
Axes and directions are given in frame E. Orthonormal models have ψ = φ; the screw joint has φ ≠ ψ
(Bonaventura eq. 29-31). Each function takes ``(name, E, P, ...)`` and the keyword arguments of
:func:`~mrds_jax.contacts.model.make_contact` (``ground_rotation``, ``ground_position``, ``excitation``,
``applied``).

Note (notes §1 ERRATUM): Bonaventura's printed revolute example (Bonaventura eq. 27-28) is written in [angular; linear]
order although the thesis is [linear; angular]; here every model is built from its axis, so there is no
ambiguity.
"""
import numpy as np

from .model import ContactError, make_contact


def _unit(v, name, label):
    v = np.asarray(v, dtype=float)
    n = np.linalg.norm(v)
    if v.shape != (3,) or n < 1e-12:
        raise ContactError(f"contact {name!r}: {label} must be a nonzero 3-vector, got {v}")
    return v / n


def _orthonormal_complement(a):
    """Two unit vectors completing the unit vector a to a right-handed orthonormal basis."""
    helper = np.array([1.0, 0, 0]) if abs(a[0]) < 0.9 else np.array([0, 1.0, 0])
    u1 = np.cross(a, helper)
    u1 /= np.linalg.norm(u1)
    return u1, np.cross(a, u1)


def _ang(v):
    return np.concatenate([v, np.zeros(3)])


def _lin(v):
    return np.concatenate([np.zeros(3), v])


def _cols(*vs, d=6):
    return np.stack(vs, axis=1) if vs else np.zeros((d, 0))


E3 = np.eye(3)
E6 = np.eye(6)


def weld(name, E, P, planar=False, **kw):
    """Rigid grasp: every direction constrained (n_c = 6, or 3 planar)."""
    d = 3 if planar else 6
    return make_contact(name, E, P, np.zeros((d, 0)), np.eye(d), kind="weld", **kw)


rigid_grasp = weld


def spherical(name, E, P, **kw):
    """Ball joint: the three rotations free, the three translations of P's origin constrained (n_c = 3)."""
    return make_contact(name, E, P, E6[:, :3], E6[:, 3:], kind="spherical", **kw)


def revolute(name, E, P, axis=(0.0, 0.0, 1.0), planar=False, **kw):
    """Revolute joint about ``axis`` (frame E, through P's origin): one rotation free, n_c = 5 (planar:
    the rotation θ free, x and y constrained, n_c = 2)."""
    if planar:
        return make_contact(name, E, P, E3[:, :1], E3[:, 1:], kind="revolute", dim=3, **kw)
    a = _unit(axis, name, "axis")
    u1, u2 = _orthonormal_complement(a)
    return make_contact(name, E, P, _cols(_ang(a)), _cols(_ang(u1), _ang(u2), *[_lin(e) for e in E3]),
                        kind="revolute", **kw)


def prismatic(name, E, P, axis=(0.0, 0.0, 1.0), planar=False, **kw):
    """Prismatic joint along ``axis`` (frame E): one translation free, n_c = 5 (planar: ``axis`` in the
    xy plane, n_c = 2)."""
    a = _unit(axis, name, "axis")
    if planar:
        if abs(a[2]) > 1e-12:
            raise ContactError(f"contact {name!r}: a planar prismatic axis must lie in the xy plane, got {a}")
        free = np.array([0.0, a[0], a[1]])
        return make_contact(name, E, P, _cols(free, d=3), _cols(E3[0], np.array([0.0, -a[1], a[0]]), d=3),
                            kind="prismatic", dim=3, **kw)
    u1, u2 = _orthonormal_complement(a)
    return make_contact(name, E, P, _cols(_lin(a)), _cols(*[_ang(e) for e in E3], _lin(u1), _lin(u2)),
                        kind="prismatic", **kw)


def cylindrical(name, E, P, axis=(0.0, 0.0, 1.0), **kw):
    """Cylindrical joint: rotation about and translation along ``axis`` free, n_c = 4."""
    a = _unit(axis, name, "axis")
    u1, u2 = _orthonormal_complement(a)
    return make_contact(name, E, P, _cols(_ang(a), _lin(a)), _cols(_ang(u1), _ang(u2), _lin(u1), _lin(u2)),
                        kind="cylindrical", **kw)


def screw(name, E, P, axis=(0.0, 0.0, 1.0), pitch=0.0, **kw):
    """Screw (helical) joint, translation ρθ along ``axis`` (Bonaventura eq. 29-31, pitch ρ in m/rad).

    φᵘ = [a; ρa] (Bonaventura eq. 30), φᶜ = the two perpendicular rotations and the three translations; the dual
    basis (Bonaventura eq. 31) then has ψᵘ = [a; 0] (a pure torque about the axis: power Fᵘ θ̇) and the constrained
    axial column [−ρa; a] (the workless wrench f = 1, n = −ρ): φ ≠ ψ.
    """
    a = _unit(axis, name, "axis")
    u1, u2 = _orthonormal_complement(a)
    rho = float(pitch)
    phi_u = _cols(np.concatenate([a, rho * a]))
    phi_c = _cols(_ang(u1), _ang(u2), _lin(u1), _lin(u2), _lin(a))
    psi_u = _cols(_ang(a))
    psi_c = _cols(_ang(u1), _ang(u2), _lin(u1), _lin(u2), np.concatenate([-rho * a, a]))
    return make_contact(name, E, P, phi_u, phi_c, psi_u, psi_c, kind="screw", **kw)


def universal(name, E, P, axis=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0), **kw):
    """Universal (Hooke) joint with variable modes (B §3.3.1): rotation about ``axis`` (fixed in E, frame E)
    and about ``axis2`` (fixed in P, frame P) free, so ᴱR_P = rot(axis, θ₁) rot(axis2, θ₂) (the tree
    joint ``universal``); P's origin stays at E's (n_c = 4). The modes depend on ᴱR_P
    (:func:`~mrds_jax.contacts.variable.universal_modes`); the stored bases are those at ᴱR_P = 1. The
    axes need not be orthogonal, but must not be parallel."""
    from .variable import universal_modes
    a1, a2 = _unit(axis, name, "axis"), _unit(axis2, name, "axis2")
    c = np.cross(a1, a2)
    if np.linalg.norm(c) < 1e-6:
        raise ContactError(f"contact {name!r}: the universal joint's axes {a1} and {a2} are parallel")
    return make_contact(name, E, P, _cols(_ang(a1), _ang(a2)), _cols(_ang(c), *[_lin(e) for e in E3]),
                        kind="universal", modes=universal_modes, **kw)


def planar_contact(name, E, P, normal=(0.0, 0.0, 1.0), **kw):
    """Planar joint in 3-D: rotation about ``normal`` and translations in the plane free, n_c = 3."""
    n = _unit(normal, name, "normal")
    t1, t2 = _orthonormal_complement(n)
    return make_contact(name, E, P, _cols(_ang(n), _lin(t1), _lin(t2)), _cols(_ang(t1), _ang(t2), _lin(n)),
                        kind="planar", **kw)


def point_on_plane(name, E, P, normal=(0.0, 0.0, 1.0), free_rotation=True, **kw):
    """P's origin slides on the plane through E's origin with ``normal`` (frame E): n_c = 1 with free
    rotation (a frictionless point contact held on), n_c = 4 without (rotation locked)."""
    n = _unit(normal, name, "normal")
    t1, t2 = _orthonormal_complement(n)
    if free_rotation:
        return make_contact(name, E, P, _cols(*[_ang(e) for e in E3], _lin(t1), _lin(t2)), _cols(_lin(n)),
                            kind="point_on_plane", **kw)
    return make_contact(name, E, P, _cols(_lin(t1), _lin(t2)), _cols(*[_ang(e) for e in E3], _lin(n)),
                        kind="point_on_plane", **kw)


def point_on_line(name, E, P, direction=(1.0, 0.0, 0.0), free_rotation=True, planar=False, **kw):
    """P's origin slides along the line through E's origin with ``direction`` (frame E).

    3-D: n_c = 2 with free rotation, n_c = 5 without (= prismatic). Planar (the thesis' "x-translation,
    free rotation" of System 2c, notes §5): ``direction`` in the xy plane; n_c = 1 with free rotation,
    2 without.
    """
    a = _unit(direction, name, "direction")
    if planar:
        if abs(a[2]) > 1e-12:
            raise ContactError(f"contact {name!r}: a planar line direction must lie in the xy plane, got {a}")
        along, across = np.array([0.0, a[0], a[1]]), np.array([0.0, -a[1], a[0]])
        if free_rotation:
            return make_contact(name, E, P, _cols(E3[0], along, d=3), _cols(across, d=3), kind="point_on_line",
                                dim=3, **kw)
        return make_contact(name, E, P, _cols(along, d=3), _cols(E3[0], across, d=3), kind="point_on_line",
                            dim=3, **kw)
    u1, u2 = _orthonormal_complement(a)
    if free_rotation:
        return make_contact(name, E, P, _cols(*[_ang(e) for e in E3], _lin(a)), _cols(_lin(u1), _lin(u2)),
                            kind="point_on_line", **kw)
    return make_contact(name, E, P, _cols(_lin(a)), _cols(*[_ang(e) for e in E3], _lin(u1), _lin(u2)),
                        kind="point_on_line", **kw)


def planar_weld(name, E, P, **kw):
    """Planar rigid grasp (n_c = 3)."""
    return weld(name, E, P, planar=True, **kw)


def planar_revolute(name, E, P, **kw):
    """Planar revolute (θ free, x and y constrained, n_c = 2)."""
    return revolute(name, E, P, planar=True, **kw)


LIBRARY = dict(weld=weld, rigid_grasp=rigid_grasp, spherical=spherical, revolute=revolute, prismatic=prismatic,
               cylindrical=cylindrical, screw=screw, universal=universal, planar=planar_contact,
               point_on_plane=point_on_plane, point_on_line=point_on_line)
