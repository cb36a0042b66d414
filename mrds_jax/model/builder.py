"""Programmatic construction of modules.

>>> b = ModuleBuilder()
>>> b.add_link("upper", parent=None, joint="revolute", axis=(0, 0, 1), mass=1.0, com=(0.5, 0, 0),
...            inertia=np.diag([1e-3, 1e-2, 1e-2]))
>>> b.add_frame("tip", link="upper", position=(1.0, 0, 0))
>>> module = b.build()
"""
import jax
import jax.numpy as jnp
import numpy as np

from .joints import joint_kind
from ..validation import ModelError, UnknownNameError, finite_array, link_description
from .tree import ONE_COORDINATE, Module, Topology, TreeParams, validate


class ModuleBuilder:
    def __init__(self, planar=False, gravity=None):
        """``planar`` modules live in the xy plane (task space [ω_z, v_x, v_y]); their default gravity is
        −9.81 m/s² along y, that of spatial modules −9.81 m/s² along z."""
        self.planar = planar
        if gravity is None:
            gravity = (0.0, -9.81, 0.0) if planar else (0.0, 0.0, -9.81)
        self.gravity = finite_array(gravity, (3,), "gravity", "ModuleBuilder")
        self._links = []
        self._frames = []

    def add_link(self, name, parent=None, joint="revolute", joint_name=None, axis=(0.0, 0.0, 1.0),
                 axis2=(0.0, 1.0, 0.0), pitch=0.0, position=(0.0, 0.0, 0.0), rotation=None,
                 mass=1.0, com=(0.0, 0.0, 0.0), inertia=None, armature=0.0, limits=None, cone_limit=None,
                 triangle_inequality=True):
        """Add a link attached to ``parent`` (a link name, or None for the support) by a joint whose frame
        sits at ``position``/``rotation`` in the parent link frame. ``armature``: rotor inertia of the joint's
        degrees of freedom (a number for all of them, or one per degree of freedom), added to the diagonal of
        the joint-space inertia. ``limits``: (lower, upper) of a one-coordinate joint's q, kept in the model
        (``Topology.joint_limits``) and enforced by ``simulate``'s contact step (one-sided rows;
        ``ContactStep(unilateral=False)`` leaves them to be reported only). ``cone_limit``: the largest rotation
        angle (rad) of a spherical joint from its reference (MuJoCo's ball joint range), kept in the model
        (``Topology.cone_limits``) and enforced the same way. ``mass=0`` (with ``inertia``
        None or zero) makes a massless link, a joint frame between two joints; it must get a child link. A
        rotational inertia may be singular (a point mass: zeros; a thin rod) but not have a negative principal
        moment; ``triangle_inequality=False`` accepts principal moments that break Iₐ + I_b ≥ I_c (no mass
        distribution has them, but every kinetic energy stays ≥ 0: Pinocchio simulates them; the URDF loader
        names them in a warning). Returns the link index."""
        axis, axis2, inertia = link_description(name, axis, axis2, position, rotation, mass, com, inertia,
                                                triangle=triangle_inequality)
        names = [lk["name"] for lk in self._links]
        if name in names:
            raise ModelError(f"link {name!r} is defined twice")
        if parent is None:
            parent_index = -1
        elif parent in names:
            parent_index = names.index(parent)
        else:
            raise UnknownNameError(f"link {name!r}: parent link {parent!r} does not exist (links so far: {names})")
        nv = joint_kind(joint, f" (link {name!r})").nv
        armature = _armature(armature, nv, name, joint)
        if limits is not None:
            lo, hi = (float(x) for x in np.asarray(limits, dtype=float).reshape(2))
            if joint not in ONE_COORDINATE or not lo <= hi:
                raise ModelError(f"link {name!r}: limits ({lo}, {hi}) need lower <= upper on a one-coordinate joint "
                                 f"({', '.join(ONE_COORDINATE)}), the joint is {joint}")
            limits = (lo, hi)
        if cone_limit is not None:
            cone_limit = float(cone_limit)
            if joint != "spherical" or not cone_limit > 0:
                raise ModelError(f"link {name!r}: a cone limit {cone_limit} needs a positive angle on a spherical "
                                 f"joint, the joint is {joint}")
        joint_name = joint_name or f"{name}_joint"
        if joint_name in [lk["joint_name"] for lk in self._links]:
            raise ModelError(f"link {name!r}: joint {joint_name!r} is defined twice")
        self._links.append(dict(
            name=name, parent=parent_index, kind=joint, joint_name=joint_name,
            axis=axis, axis2=axis2, pitch=float(pitch),
            R=np.eye(3) if rotation is None else np.asarray(rotation, dtype=float),
            p=np.asarray(position, dtype=float), mass=float(mass), com=np.asarray(com, dtype=float),
            inertia=inertia, armature=armature, limits=limits, cone_limit=cone_limit))
        return len(self._links) - 1

    def add_frame(self, name, link, position=(0.0, 0.0, 0.0), rotation=None):
        """Add an operational point on ``link`` at ``position``/``rotation`` in the link frame."""
        names = [lk["name"] for lk in self._links]
        if link not in names:
            raise UnknownNameError(f"operational point {name!r}: link {link!r} does not exist (links: {names})")
        if name in [f["name"] for f in self._frames]:
            raise ModelError(f"operational point {name!r} is defined twice")
        finite_array(position, (3,), "position", f"operational point {name!r}")
        self._frames.append(dict(name=name, link=names.index(link),
                                 R=np.eye(3) if rotation is None else np.asarray(rotation, dtype=float),
                                 p=np.asarray(position, dtype=float)))
        return len(self._frames) - 1

    def build(self, dtype=None):
        if not self._links:
            raise ModelError("ModuleBuilder.build: the module has no links; a module needs at least one moving link "
                             "(add_link)")
        L, F = self._links, self._frames
        topo = Topology(
            link_names=tuple(lk["name"] for lk in L), parents=tuple(lk["parent"] for lk in L),
            joint_names=tuple(lk["joint_name"] for lk in L), joint_kinds=tuple(lk["kind"] for lk in L),
            frame_names=tuple(f["name"] for f in F), frame_links=tuple(f["link"] for f in F),
            planar=self.planar,
            joint_limits=_per_joint(L, "limits"), cone_limits=_per_joint(L, "cone_limit"))
        with jax.ensure_compile_time_eval():  # concrete arrays even when called inside a jit trace
            return self._build(topo, dtype)

    def _build(self, topo, dtype):
        L, F = self._links, self._frames
        dtype = dtype or jnp.zeros(0).dtype

        def arr(x, shape):
            return jnp.asarray(np.asarray(x, dtype=float).reshape(shape), dtype=dtype)

        n, nf = len(L), len(F)
        params = TreeParams(
            joint_R=arr([lk["R"] for lk in L], (n, 3, 3)), joint_p=arr([lk["p"] for lk in L], (n, 3)),
            axis=arr([lk["axis"] for lk in L], (n, 3)), axis2=arr([lk["axis2"] for lk in L], (n, 3)),
            pitch=arr([lk["pitch"] for lk in L], (n,)), mass=arr([lk["mass"] for lk in L], (n,)),
            com=arr([lk["com"] for lk in L], (n, 3)), inertia=arr([lk["inertia"] for lk in L], (n, 3, 3)),
            frame_R=arr([f["R"] for f in F], (nf, 3, 3)), frame_p=arr([f["p"] for f in F], (nf, 3)),
            gravity=arr(self.gravity, (3,)),
            armature=arr(np.concatenate([lk["armature"] for lk in L]), (topo.nv,)))
        return validate(Module(params=params, topology=topo))


def _per_joint(links, key):
    """The links' ``key`` values as a per-joint tuple, or () when none is set (Topology's optional columns)."""
    values = tuple(lk[key] for lk in links)
    return values if any(v is not None for v in values) else ()


def _armature(value, nv, link, joint):
    """A joint's armature as (nv,) floats, each finite and >= 0; ModelError naming the link otherwise."""
    a = np.asarray(value, dtype=float)
    if a.ndim == 0:
        a = np.full(nv, float(a))
    if a.shape != (nv,):
        raise ModelError(f"link {link!r}: armature has shape {a.shape}; a {joint} joint needs one number or {nv}")
    if not np.all(np.isfinite(a) & (a >= 0)):
        raise ModelError(f"link {link!r}: armature (rotor inertia) must be finite and >= 0, got {value!r}")
    return a
