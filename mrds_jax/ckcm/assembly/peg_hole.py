"""A rigid peg and a hole of collision primitives, for assembly with friction (Whitney 1982; docs/guide/assembly.md).

The **peg** is a capsule (the narrow phase's capsule–box pair, exact while the capsule's axis stays outside the
boxes): radius r, a straight part of length L along the local +z of the frame it rides on, whose lower axis end
— the centre of the end sphere, Whitney's *peg tip* — is the frame's origin. Against a wall the end sphere touches
at r from the tip, where Whitney's sharp peg has its corner; against the hole's mouth edge the capsule's side
touches at r from the axis, as Whitney's peg side does.

The **hole** is made of boxes fixed to the ground (the pair kinds the narrow phase handles exactly): a planar
*slot* (two walls, the motion in the x–z plane of the hole) or a *square* hole (four walls), of half-width
R = r + c (c the radial clearance), depth D below the mouth, an optional floor, and an optional 45° chamfer of
width w at the mouth (then each wall is three boxes: below the chamfer, beside it, and the chamfer's wedge). The
hole's frame: the mouth's centre at ``position``, the hole's axis (out of the hole) along the local +z of
``rotation``; the slot's walls face ±x.

Every number of :class:`PegHole` — radius, length, clearance, depth, friction, chamfer width — is a leaf of the
geoms (their positions and sizes) and of the collision model's pair friction: :func:`with_peg_hole` puts a new
:class:`PegHole` (traced, batched under ``vmap``) into a built system without recompiling. What is static
(:class:`HoleLayout`): the slot or the square, whether there is a floor and a chamfer (that is the number of
geoms), and the walls' thickness and span as multiples of the hole's size.
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ...collision import box, capsule
from ...collision.model import CollisionModel
from ...pytree import replace
from ...validation import is_traced
from ..errors import CKCMInputError


class PegHoleError(CKCMInputError):
    """Bad peg-in-hole input: an interference fit (clearance ≤ 0, the peg wider than the hole's mouth), a size
    that is not positive and finite, a friction coefficient < 0, a chamfer the walls cannot hold."""


class PegHole(NamedTuple):
    """The traced numbers of a peg and its hole (SI units).

    ``peg_radius`` r; ``peg_length`` L, the capsule's straight part (its axis segment; the peg's total length is
    L + 2r); ``clearance`` c = R − r, the radial clearance (the hole's half-width R = r + c; Whitney's
    dimensionless clearance is c/R); ``hole_depth`` D, mouth to floor; ``friction`` μ (Coulomb, peg on hole);
    ``chamfer`` w, the width of a 45° chamfer at the mouth (0: a sharp mouth edge; its presence is static, see
    :class:`HoleLayout`)."""
    peg_radius: float = 0.01
    peg_length: float = 0.06
    clearance: float = 2e-4
    hole_depth: float = 0.05
    friction: float = 0.3
    chamfer: float = 0.0


class HoleLayout(NamedTuple):
    """The static shape of a hole: ``shape`` "slot" (two walls facing ±x, the peg moving in the x–z plane) or
    "square" (four walls); ``floor``: a bottom at the hole's depth; ``chamfer``: the mouth chamfered (then
    :attr:`PegHole.chamfer` > 0); ``wall``: the walls' thickness in peg radii (≥ 1.5 chamfer widths);
    ``span``: the slot walls' length along y in hole half-widths (the square's walls span the hole)."""
    shape: str = "slot"
    floor: bool = True
    chamfer: bool = False
    wall: float = 2.0
    span: float = 4.0


SHAPES = ("slot", "square")


# ----------------------------------------------------------------------------- validation
def _concrete(value, field, where):
    try:
        x = float(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise PegHoleError(f"{where}: {field} must be a real number, got {value!r}") from None
    if not np.isfinite(x):
        raise PegHoleError(f"{where}: {field} must be finite, got {value!r}")
    return x


def validate_layout(layout, where="peg_hole"):
    """The :class:`HoleLayout`, checked: a known shape, booleans, wall > 0 and span > 1."""
    if not isinstance(layout, HoleLayout):
        raise PegHoleError(f"{where}: layout must be a HoleLayout, got {type(layout).__name__}")
    if layout.shape not in SHAPES:
        raise PegHoleError(f"{where}: HoleLayout.shape must be one of {SHAPES}, got {layout.shape!r}")
    for field in ("floor", "chamfer"):
        if not isinstance(getattr(layout, field), (bool, np.bool_)):
            raise PegHoleError(f"{where}: HoleLayout.{field} must be True or False, got {getattr(layout, field)!r}")
    if not _concrete(layout.wall, "HoleLayout.wall", where) > 0:
        raise PegHoleError(f"{where}: HoleLayout.wall (the walls' thickness in peg radii) must be > 0, got "
                           f"{layout.wall!r}")
    if not _concrete(layout.span, "HoleLayout.span", where) > 1:
        raise PegHoleError(f"{where}: HoleLayout.span (the slot's length in hole half-widths) must be > 1, got "
                           f"{layout.span!r}")
    return layout


def validate_peg_hole(p, layout=HoleLayout(), where="peg_hole"):
    """``p`` (a :class:`PegHole`) checked against ``layout`` (None: ``p`` alone) before anything compiles; a traced field is checked
    for its shape only. Raises :class:`PegHoleError` naming the field: a non-finite value, a radius, length or
    depth ≤ 0, a clearance ≤ 0 (an interference fit: the peg as wide as or wider than the hole's mouth), a
    friction coefficient < 0, a chamfer < 0, a chamfer in a layout without one (or none in a layout with one),
    a chamfer wider than 2/3 of the walls' thickness or deeper than 2/3 of the hole."""
    if not isinstance(p, PegHole):
        raise PegHoleError(f"{where}: expected a PegHole, got {type(p).__name__}")
    if layout is not None:
        validate_layout(layout, where)
    for field, value in p._asdict().items():
        if jnp.shape(value) != ():
            raise PegHoleError(f"{where}: PegHole.{field} must be a scalar, has shape {jnp.shape(value)} (batch a "
                               "PegHole with jax.vmap over its fields)")
    values = {f: (None if is_traced(v) else _concrete(v, f"PegHole.{f}", where)) for f, v in p._asdict().items()}
    for field in ("peg_radius", "peg_length", "hole_depth"):
        if values[field] is not None and not values[field] > 0:
            raise PegHoleError(f"{where}: PegHole.{field} must be > 0, got {values[field]!r}")
    c, r = values["clearance"], values["peg_radius"]
    if c is not None and not c > 0:
        width = "" if r is None else f" (peg 2r = {2 * r:g} m, hole's mouth 2R = {2 * (r + c):g} m)"
        what = "wider than the hole's mouth" if c < 0 else "exactly as wide as the hole's mouth"
        raise PegHoleError(f"{where}: PegHole.clearance = {c!r} ≤ 0 is an interference fit: the peg is {what}"
                           f"{width}; a rigid peg needs a clearance > 0")
    if values["friction"] is not None and not values["friction"] >= 0:
        raise PegHoleError(f"{where}: PegHole.friction must be ≥ 0, got {values['friction']!r}")
    w = values["chamfer"]
    if w is not None:
        if w < 0:
            raise PegHoleError(f"{where}: PegHole.chamfer must be ≥ 0, got {w!r}")
    if w is not None and layout is not None:
        if layout.chamfer and not w > 0:
            raise PegHoleError(f"{where}: HoleLayout(chamfer=True) needs PegHole.chamfer > 0, got {w!r}")
        if not layout.chamfer and w > 0:
            raise PegHoleError(f"{where}: PegHole.chamfer = {w!r} but HoleLayout.chamfer is False (the chamfer's "
                               "geoms are static: build with HoleLayout(chamfer=True))")
        if layout.chamfer and r is not None and not 1.5 * w <= layout.wall * r:
            raise PegHoleError(f"{where}: PegHole.chamfer = {w!r} needs walls at least 1.5 w thick; they are "
                               f"HoleLayout.wall · r = {layout.wall * r:g} m")
        if layout.chamfer and values["hole_depth"] is not None and not 1.5 * w <= values["hole_depth"]:
            raise PegHoleError(f"{where}: PegHole.chamfer = {w!r} is deeper than 2/3 of hole_depth = "
                               f"{values['hole_depth']!r}")
    return p


# ----------------------------------------------------------------------------- geometry
def _rot_y(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rot_z(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def hole_half_width(p):
    """R = r + c."""
    return p.peg_radius + p.clearance


def _wall_boxes(p, layout, R, length):
    """The boxes of the wall facing −x at x = R (in the hole's frame, before turning it to its side): (suffix,
    centre (3,), half-extents (3,), rotation (3, 3) numpy). ``length``: the wall's half-extent along y."""
    T = layout.wall * p.peg_radius
    D = p.hole_depth
    if not layout.chamfer:
        return [("", jnp.stack([R + T / 2, 0.0 * R, -D / 2]), jnp.stack([T / 2, length, D / 2]), np.eye(3))]
    w = p.chamfer
    t = w / np.sqrt(2.0)                       # the wedge's thickness: its far corners lie in the two boxes
    wedge_centre = jnp.stack([R + w / 2 + t / 2 / np.sqrt(2.0), 0.0 * R, -w / 2 - t / 2 / np.sqrt(2.0)])
    wedge_rotation = _rot_y(-np.pi / 4)        # local x along the chamfer, up and out; local z its normal, into
    # the hole and up (the wedge's face z = +t/2 is the chamfer surface)
    return [("_low", jnp.stack([R + T / 2, 0.0 * R, -(D + w) / 2]), jnp.stack([T / 2, length, (D - w) / 2]),
             np.eye(3)),
            ("_top", jnp.stack([R + w / 2 + T / 2, 0.0 * R, -w / 2]), jnp.stack([(T - w) / 2, length, w / 2]),
             np.eye(3)),
            ("_chamfer", wedge_centre, jnp.stack([w / np.sqrt(2.0), length, t / 2]), wedge_rotation)]


def hole_boxes(p, layout=HoleLayout()):
    """Every box of the hole in its own frame (mouth centre at the origin, axis +z): a list of (name suffix,
    centre (3,), half-extents (3,), rotation (3, 3)) with traced centres and half-extents; the slot's walls are
    "_px" (at x = +R) and "_mx", the square's add "_py" and "_my" (between the x walls), then "_floor"."""
    R = hole_half_width(p)
    T = layout.wall * p.peg_radius
    if layout.shape == "slot":
        sides = (("_px", 0.0, layout.span * R), ("_mx", np.pi, layout.span * R))
    else:
        sides = (("_px", 0.0, R + T), ("_mx", np.pi, R + T), ("_py", np.pi / 2, R), ("_my", -np.pi / 2, R))
    out = []
    for side, angle, length in sides:
        turn = _rot_z(angle)
        for suffix, centre, half, rotation in _wall_boxes(p, layout, R, length):
            out.append((side + suffix, jnp.asarray(turn) @ centre, half, turn @ rotation))
    if layout.floor:
        half_y = layout.span * R if layout.shape == "slot" else R + T
        out.append(("_floor", jnp.stack([0.0 * R, 0.0 * R, -p.hole_depth - T / 2]),
                    jnp.stack([R + T, half_y, T / 2]), np.eye(3)))
    return out


def _distance_to_wall(x, z, R, w):
    """Distance (numpy) from the point (x, z) inside the hole's half-plane x < R + w to the profile of the wall
    facing −x in the x–z plane (the hole's frame, mouth at z = 0): its top face z = 0 (x ≥ R + w), the 45° chamfer
    from (R + w, 0) to (R, −w) (w = 0: the sharp mouth edge) and its face x = R below (z ≤ −w)."""
    top = np.hypot(np.maximum(R + w - x, 0.0), np.where(x >= R + w, np.maximum(z, 0.0), z))
    s = np.clip(((x - R) + (z + w)) * w / np.maximum(2 * w * w, 1e-300), 0.0, 1.0)   # along (R, −w) → (R + w, 0)
    chamfer = np.hypot(x - R - s * w, z + w - s * w)
    face = np.hypot(np.maximum(R - x, 0.0), np.maximum(z + w, 0.0))
    return np.minimum(np.minimum(top, chamfer), face)


def start_clearance(p, lateral, standoff, layout=HoleLayout()):
    """The gap (m, numpy; < 0: an overlap) between the peg's end sphere and the hole's walls when the tip, the
    sphere's centre, is ``lateral`` from the hole's axis along x and ``standoff`` above the mouth: the distance from
    the tip to the nearest wall's profile (:func:`_distance_to_wall`: top face, chamfer, face) minus r. The end
    sphere is the peg's lowest part while the tip is above the mouth and the tilt small (the straight part rises
    from it), so this is the peg's gap at the start of an insertion; concrete numbers (arrays broadcast)."""
    r, R, w = (np.asarray(v, float) for v in (p.peg_radius, hole_half_width(p), p.chamfer))
    w = w if layout.chamfer else 0.0 * w
    x, z = np.asarray(lateral, float), np.asarray(standoff, float)
    d = np.minimum(_distance_to_wall(x, z, R, w), _distance_to_wall(-x, z, R, w))
    if layout.shape == "square":                      # the walls facing ±y, the tip on the x–z plane (y = 0)
        d = np.minimum(d, _distance_to_wall(np.zeros_like(x), z, R, w))
    return d - r


def _placed(position, rotation, where, names=("position", "rotation")):
    """(p (3,), R (3, 3)) of a placement; R must be a rotation and p finite (checked when concrete)."""
    R = np.eye(3) if rotation is None else rotation
    if not is_traced(R):
        R = np.asarray(R, dtype=float)
        if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) <= 0:
            raise PegHoleError(f"{where}: {names[1]} must be a 3×3 rotation matrix, got "
                               f"{np.asarray(rotation).tolist()}")
    if not is_traced(position):
        position = np.asarray(position, dtype=float)
        if position.shape != (3,) or not np.all(np.isfinite(position)):
            raise PegHoleError(f"{where}: {names[0]} must be a finite (3,) vector, got {position.tolist()}")
    return jnp.asarray(position), jnp.asarray(R)


def peg_geom(p, module, frame, name="peg", tip=(0.0, 0.0, 0.0), rotation=None):
    """The peg: a capsule of radius r and straight part L on ``module``'s operational point ``frame``, its lower axis
    end (Whitney's tip; the end sphere's centre) at ``tip`` in the frame and its axis (from the tip up the peg) the
    local +z of ``rotation`` (default: the frame's +z at its origin)."""
    where = f"peg_geom {name!r}"
    validate_peg_hole(p, None, where)
    origin, turn = _placed(tip, rotation, where, ("tip", "rotation"))
    half = 0.5 * jnp.asarray(p.peg_length)
    return capsule(name, module, frame, p.peg_radius, half, position=origin + half * turn[:, 2], rotation=turn,
                   friction=p.friction)


def hole_geoms(p, layout=HoleLayout(), position=(0.0, 0.0, 0.0), rotation=None, name="hole"):
    """The hole's boxes (:func:`hole_boxes`) fixed to the ground, named ``name`` + suffix ("hole_px", ...), with
    its mouth's centre at ``position`` and its axis (out of the hole) along the local +z of ``rotation``;
    friction μ. ``p`` is checked first (:func:`validate_peg_hole`)."""
    where = f"hole_geoms {name!r}"
    validate_peg_hole(p, layout, where)
    origin, turn = _placed(position, rotation, where)
    return [box(name + suffix, None, None, half, position=turn @ centre + origin, rotation=turn @ rotation_,
                friction=p.friction)
            for suffix, centre, half, rotation_ in hole_boxes(p, layout)]


def peg_hole_geoms(p, module, frame, layout=HoleLayout(), position=(0.0, 0.0, 0.0), rotation=None, peg="peg",
                   hole="hole", tip=(0.0, 0.0, 0.0), tip_rotation=None):
    """[the peg (:func:`peg_geom`, its tip at ``tip`` and axis ``tip_rotation`` in the frame), the hole's boxes
    (:func:`hole_geoms`, mouth at ``position``, axis ``rotation``)]: the ``collision`` argument of
    :func:`~mrds_jax.system.build_system` (add the scene's other geoms to the list)."""
    validate_peg_hole(p, layout, "peg_hole_geoms")
    return [peg_geom(p, module, frame, peg, tip, tip_rotation)] + hole_geoms(p, layout, position, rotation, hole)


def with_peg_hole(system, p, layout=HoleLayout(), position=(0.0, 0.0, 0.0), rotation=None, peg="peg",
                  hole="hole"):
    """``system`` (built with :func:`peg_hole_geoms`) with the peg and hole of ``p``: the geoms' positions and sizes
    and the friction of every peg–hole pair replaced. ``p`` may be traced: one compiled program serves a batch of
    radii, lengths, clearances, depths, friction coefficients and chamfer widths (``jax.vmap`` over a PegHole of
    arrays). ``layout``, ``position``, ``rotation`` and the names must be those the system was built with (the peg's
    tip and axis in its frame are read from the built peg); a geom of that layout missing from the system raises
    :class:`PegHoleError`."""
    model = getattr(system, "collision", None)
    if not isinstance(model, CollisionModel):
        raise PegHoleError("with_peg_hole: the system has no collision model; build it with "
                           "collision=peg_hole_geoms(...)")
    old = _peg(model, peg)
    tip = old.position - old.size[1] * old.rotation[:, 2]           # the built peg's tip and axis in its frame
    new = {g.name: g for g in [peg_geom(p, old.module, old.frame, peg, tip, old.rotation)]
           + hole_geoms(p, layout, position, rotation, hole)}
    names = model.geom_names
    missing = sorted(set(new) - set(names))
    if missing:
        raise PegHoleError(f"with_peg_hole: the system has no geoms {missing} of the layout {layout}; its geoms are "
                           f"{list(names)}")
    geoms = tuple(new.get(g.name, g) for g in model.geoms)
    peg_index = names.index(peg)
    hole_index = {names.index(n) for n in new if n != peg}
    touched = np.array([(i == peg_index and j in hole_index) or (j == peg_index and i in hole_index)
                        for i, j in model.pairs], dtype=bool)
    friction = jnp.where(touched, jnp.asarray(p.friction, model.friction.dtype), model.friction)
    return replace(system, collision=replace(model, geoms=geoms, friction=friction))


def _peg(model, peg):
    for g in model.geoms:
        if g.name == peg:
            if g.kind != "capsule" or g.is_ground:
                raise PegHoleError(f"with_peg_hole: geom {peg!r} is a {g.kind} on "
                                   f"{'the ground' if g.is_ground else g.module!r}; the peg is a capsule on a module")
            return g
    raise PegHoleError(f"with_peg_hole: no geom named {peg!r}; the geoms are {list(model.geom_names)}")
