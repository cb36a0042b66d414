"""Collision geometry: primitives attached to an operational point of a module, or to the ground.

A :class:`Geom` is a pytree whose leaves are its pose in its frame, its size, friction and restitution (so
``grad`` and ``vmap`` reach the geometry), and whose static fields name it, its kind, its module and frame and
its collision filter bits. Sizes follow MuJoCo's ``geom_size`` (MJCF reference, ``geom/@size``): sphere
``[r, 0, 0]``, capsule and cylinder ``[r, half_length, 0]`` along local z, box half-extents; a plane is the
infinite half-space below local z through ``position`` (MuJoCo's planes are infinite for collision too). A mesh is
collided by its convex hull, as MuJoCo collides meshes: its ``size`` is the (V, 3) array of the hull's vertices in
its frame (any points whose hull it is: a support function only needs the maximum over them).
"""
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, static
from ..spatial.transforms import compose
from ..validation import InputError, ModelError, finite_array, is_traced
from .closest_points import contact_frame

KINDS = ("plane", "sphere", "capsule", "box", "cylinder", "ellipsoid", "mesh")
MESH_MIN_VERTICES = 4        # a hull with volume: four points not in one plane


class CollisionError(InputError):
    """Bad collision input: the message names the geom (or pair) and the field."""


class CollisionWarning(UserWarning):
    """A geom or pair the library cannot collide (a mesh, plane–plane, ...): named, then left out."""


@pytree_dataclass
class Geom:
    """One collision primitive. ``module``/``frame`` name the operational point it rides on (both None: the
    ground, and ``position``/``rotation`` are then world coordinates). ``contype``/``conaffinity`` are
    MuJoCo's filter bits, ``priority`` MuJoCo's ``geom/@priority`` (friction of a pair: the higher priority's;
    equal: the larger)."""
    position: jax.Array          # (3,) in the frame
    rotation: jax.Array          # (3, 3) in the frame
    size: jax.Array              # (3,); a mesh's (V, 3) hull vertices
    friction: jax.Array          # () Coulomb coefficient, ≥ 0
    restitution: jax.Array       # () in [0, 1]
    name: str = static()
    kind: str = static()
    module: Optional[str] = static(default=None)
    frame: Optional[str] = static(default=None)
    contype: int = static(default=1)
    conaffinity: int = static(default=1)
    priority: int = static(default=0)

    @property
    def is_ground(self):
        return self.module is None


def _float(x):
    return x if is_traced(x) else jnp.asarray(np.asarray(x, dtype=float), dtype=jnp.zeros(0).dtype)


def _array(value, shape, field, where):
    """A float array of ``shape``; concrete values must be finite (:func:`~mrds_jax.validation.finite_array`)."""
    if is_traced(value):
        if jnp.shape(value) != shape:
            raise CollisionError(f"{where}: {field} has shape {jnp.shape(value)}, needs {shape}")
        return value
    try:
        return _float(finite_array(value, shape, field, where))
    except ModelError as e:
        raise CollisionError(str(e)) from None


def _rotation(value, where):
    R = _array(np.eye(3) if value is None else value, (3, 3), "rotation", where)
    if not is_traced(R):
        a = np.asarray(R)
        if not np.allclose(a @ a.T, np.eye(3), atol=1e-6) or np.linalg.det(a) <= 0:
            raise CollisionError(f"{where}: rotation is not a rotation matrix (RRᵀ = I, det R = +1): {a.tolist()}")
    return R


def _positive_size(value, field, where):
    x = _array(value, (), field, where)
    if not is_traced(x) and not float(x) > 0:
        raise CollisionError(f"{where}: {field} must be positive and finite, got {value!r}")
    return x


def _in_range(value, field, where, low, high=None):
    x = _array(value, (), field, where)
    if not is_traced(x) and not (low <= float(x) and (high is None or float(x) <= high)):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise CollisionError(f"{where}: {field} must be finite and {bound}, got {value!r}")
    return x


def _filter_bits(value, field, where):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise CollisionError(f"{where}: {field} must be a non-negative integer (a bit mask), got {value!r}")
    return int(value)


def _geom(kind, name, module, frame, size, position, rotation, friction, restitution, contype, conaffinity,
          priority):
    if not isinstance(name, str) or not name:
        raise CollisionError(f"a {kind} geom needs a non-empty name, got {name!r}")
    where = f"geom {name!r} ({kind})"
    if (module is None) != (frame is None):
        raise CollisionError(f"{where}: give both module and frame (an operational point on that module), or "
                             f"neither (a ground geom); got module={module!r}, frame={frame!r}")
    if not isinstance(priority, (int, np.integer)) or isinstance(priority, bool):
        raise CollisionError(f"{where}: priority must be an integer, got {priority!r}")
    return Geom(position=_array(position, (3,), "position", where), rotation=_rotation(rotation, where),
                size=_float(size), friction=_in_range(friction, "friction", where, 0.0),
                restitution=_in_range(restitution, "restitution", where, 0.0, 1.0), name=name, kind=kind,
                module=module, frame=frame, contype=_filter_bits(contype, "contype", where),
                conaffinity=_filter_bits(conaffinity, "conaffinity", where), priority=int(priority))


def _size(*fields, where):
    """The (3,) size vector of named positive fields, zero-padded (traced entries allowed)."""
    parts = [_positive_size(v, f, where) for f, v in fields]
    zero = jnp.zeros((), dtype=jnp.result_type(*parts))
    return jnp.stack([jnp.asarray(p, dtype=zero.dtype) for p in parts] + [zero] * (3 - len(parts)))


def normal_rotation(normal, where="plane"):
    """A rotation whose third column is the unit ``normal`` (first two columns: the tangents of
    :func:`~.closest_points.contact_frame`); a zero or non-finite normal raises a CollisionError."""
    n = _array(normal, (3,), "normal", where)
    if not is_traced(n):
        length = float(np.linalg.norm(np.asarray(n)))
        if not length > 1e-12:
            raise CollisionError(f"{where}: normal is the zero vector {np.asarray(n).tolist()}; a plane needs a "
                                 "direction")
    n = n / jnp.linalg.norm(n)
    frame = contact_frame(n)
    return jnp.stack([frame[1], frame[2], frame[0]], axis=1)


def plane(name, module=None, frame=None, position=(0.0, 0.0, 0.0), normal=None, rotation=None, friction=1.0,
          restitution=0.0, contype=1, conaffinity=1, priority=0):
    """A plane through ``position`` with unit normal ``normal`` (default +z), or the local +z of ``rotation``
    (give one of them). Solid below: geoms above it have a positive gap."""
    where = f"geom {name!r} (plane)"
    if normal is not None and rotation is not None:
        raise CollisionError(f"{where}: give normal or rotation, not both")
    if rotation is None:
        rotation = normal_rotation((0.0, 0.0, 1.0) if normal is None else normal, where)
    return _geom("plane", name, module, frame, jnp.zeros(3, dtype=jnp.zeros(0).dtype), position, rotation,
                 friction, restitution, contype, conaffinity, priority)


def sphere(name, module, frame, radius, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0, restitution=0.0,
           contype=1, conaffinity=1, priority=0):
    """A sphere of ``radius`` centred at ``position`` in the frame (module None and frame None: the ground)."""
    size = _size(("radius", radius), where=f"geom {name!r} (sphere)")
    return _geom("sphere", name, module, frame, size, position, rotation, friction, restitution, contype,
                 conaffinity, priority)


def _round(kind, name, module, frame, radius, half_length, position, rotation, friction, restitution, contype,
           conaffinity, priority):
    size = _size(("radius", radius), ("half_length", half_length), where=f"geom {name!r} ({kind})")
    return _geom(kind, name, module, frame, size, position, rotation, friction, restitution, contype, conaffinity,
                 priority)


def capsule(name, module, frame, radius, half_length, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0,
            restitution=0.0, contype=1, conaffinity=1, priority=0):
    """A capsule: the points within ``radius`` of the segment |z| ≤ ``half_length`` on the local z axis."""
    return _round("capsule", name, module, frame, radius, half_length, position, rotation, friction, restitution,
                  contype, conaffinity, priority)


def cylinder(name, module, frame, radius, half_length, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0,
             restitution=0.0, contype=1, conaffinity=1, priority=0):
    """A solid cylinder of ``radius`` between the caps z = ±``half_length`` (local)."""
    return _round("cylinder", name, module, frame, radius, half_length, position, rotation, friction, restitution,
                  contype, conaffinity, priority)


def _three_sizes(kind, name, label, values):
    """A geom's three positive sizes ``values`` (a box's half extents, an ellipsoid's radii), checked and named."""
    where = f"geom {name!r} ({kind})"
    v = _array(values, (3,), label, where)
    return _size(*((f"{label}[{i}]", v[i]) for i in range(3)), where=where)


def box(name, module, frame, half_extents, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0, restitution=0.0,
        contype=1, conaffinity=1, priority=0):
    """A box with ``half_extents`` (3,) along its local axes."""
    size = _three_sizes("box", name, "half_extents", half_extents)
    return _geom("box", name, module, frame, size, position, rotation, friction, restitution, contype,
                 conaffinity, priority)


def ellipsoid(name, module, frame, radii, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0, restitution=0.0,
              contype=1, conaffinity=1, priority=0):
    """A solid ellipsoid with semi-axes ``radii`` (3,) along its local axes."""
    size = _three_sizes("ellipsoid", name, "radii", radii)
    return _geom("ellipsoid", name, module, frame, size, position, rotation, friction, restitution, contype,
                 conaffinity, priority)


def _hull_vertices(name, vertices):
    """A mesh's vertices as a (V, 3) float array: finite, at least :data:`MESH_MIN_VERTICES`, spanning a volume
    (not all in one plane: the support function of a flat set has no interior, GJK and EPA need one)."""
    where = f"geom {name!r} (mesh)"
    if is_traced(vertices):
        if jnp.ndim(vertices) != 2 or jnp.shape(vertices)[1] != 3:
            raise CollisionError(f"{where}: vertices have shape {jnp.shape(vertices)}, need (V, 3)")
        return vertices
    v = np.asarray(vertices, dtype=float) if np.ndim(vertices) else np.zeros(0)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < MESH_MIN_VERTICES:
        raise CollisionError(f"{where}: vertices must be a (V, 3) array with V >= {MESH_MIN_VERTICES}, got shape "
                             f"{v.shape}")
    if not np.all(np.isfinite(v)):
        raise CollisionError(f"{where}: vertices must be finite; row {int(np.argmax(~np.isfinite(v).all(1)))} is "
                             f"{v[~np.isfinite(v).all(1)][0].tolist()}")
    spread = np.linalg.svd(v - v.mean(axis=0), compute_uv=False)
    if not spread[2] > 1e-9 * max(spread[0], 1e-300):
        raise CollisionError(f"{where}: the vertices lie in one plane (or line); a mesh geom needs a hull with volume")
    return _float(v)


def mesh(name, module, frame, vertices, position=(0.0, 0.0, 0.0), rotation=None, friction=1.0, restitution=0.0,
         contype=1, conaffinity=1, priority=0):
    """A convex mesh: the convex hull of ``vertices`` (V, 3) in its frame (MuJoCo collides every mesh geom by its
    hull; give the hull's vertices, or any points whose hull it is)."""
    return _geom("mesh", name, module, frame, _hull_vertices(name, vertices), position, rotation, friction,
                 restitution, contype, conaffinity, priority)


def geom_world_pose(geom, frame_R=None, frame_p=None):
    """The world pose (R, p) of ``geom`` given the world pose of its frame (an operational point's rotation and
    position, e.g. from ``point_motion``): R = R_f R_g, p = R_f p_g + p_f. A ground geom's own pose is already
    in the world (the frame arguments are ignored and may be None)."""
    if geom.is_ground:
        return geom.rotation, geom.position
    return compose(frame_R, frame_p, geom.rotation, geom.position)


def stacked_sizes(sizes):
    """The sizes of one pair kind's geoms stacked for one ``vmap``: meshes' (V, 3) vertex arrays padded to the
    group's largest V by repeating their last vertex (which changes no maximum over vertices); primitives' sizes padded with zeros to the longest."""
    if jnp.ndim(sizes[0]) < 2:                         # primitives of several kinds (one group): zeros to the longest
        count = max(jnp.shape(s)[0] for s in sizes)
        return jnp.stack([jnp.concatenate([s, jnp.zeros(count - jnp.shape(s)[0], jnp.result_type(s))]) for s in sizes])
    count = max(jnp.shape(s)[0] for s in sizes)
    return jnp.stack([jnp.concatenate([s, jnp.repeat(s[-1:], count - jnp.shape(s)[0], axis=0)]) for s in sizes])
