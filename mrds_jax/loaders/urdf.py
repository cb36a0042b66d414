"""URDF import through MuJoCo's own URDF parser (``mujoco.MjSpec.from_file``, read before MuJoCo's compiler fuses
fixed links or drops anything): one module per URDF tree.

Conventions follow Pinocchio's parser so the two can be compared link for link: links joined by ``fixed``
joints are merged into their parent (inertias summed, Featherstone §2.13) and kept as operational points;
the root link is fixed to the support (its mass does not move) unless ``floating=True`` gives it a free
joint (a root link named ``world`` is the support itself, as MuJoCo reads it, and cannot float); ``continuous`` is a revolute joint; mimic tags are ignored (joints stay independent). The position
limits of revolute and prismatic joints are kept in ``Topology.joint_limits`` (not enforced).
Every URDF link becomes an operational point of the same name.

Collision geometry (``return_collision=True``): each ``<collision>`` box, sphere or cylinder becomes a
:class:`~mrds_jax.collision.Geom` on its link's operational point at the element's ``<origin>`` (a box's
``size`` is full lengths, a cylinder's ``length`` too: MuJoCo halves them), named as the element (``<link>:collision<i>``
when unnamed); on links fixed to the support (the root when not ``floating``, and links welded to it) it is a
ground geom at its world pose. URDF has no friction, restitution or filter bits: friction 1 (MuJoCo's default),
restitution 0, contype = conaffinity = 1, so every pair collides except one link with itself or its parent
(:func:`~mrds_jax.collision.collision_model`'s filtering, as MuJoCo compiles a URDF). Meshes are named in a
:class:`~mrds_jax.collision.CollisionWarning` and left out.
"""
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import jax.numpy as jnp

from ..spatial import inertia_parameters, spatial_inertia, transform_inertia
from ..validation import ModelError, UnknownNameError
from ..model.builder import ModuleBuilder

SUPPORTED = ("continuous", "fixed", "floating", "prismatic", "revolute")      # the joint types read
OLDEST_MUJOCO = (3, 14)     # its MjSpec keeps an <inertial>'s rpy as iquat (tests/test_urdf_parser.py; pyproject.toml)


def _placement(pos, quat):
    """4x4 placement from a MuJoCo position and unit quaternion (w, x, y, z)."""
    import mujoco
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, np.asarray(quat, dtype=float))
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R.reshape(3, 3), np.asarray(pos, dtype=float)
    return T


def _inertia_of(body):
    """Spatial inertia of a link about its own origin: MuJoCo keeps the URDF ``<inertial>`` as the mass, the
    centre of mass ``ipos``, the frame ``iquat`` and the six moments ``fullinertia`` (xx, yy, zz, xy, xz, yz; NaN
    when only the diagonal ``inertia`` is set); a link without ``<inertial>`` has none."""
    if not body.explicitinertial:
        return np.zeros((6, 6))
    I6 = np.asarray(body.fullinertia, dtype=float)
    if np.isnan(I6[0]):
        I6 = np.concatenate([np.asarray(body.inertia, dtype=float), np.zeros(3)])
    xx, yy, zz, xy, xz, yz = I6
    I_c = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    T = _placement(body.ipos, body.iquat)
    R, c = T[:3, :3], T[:3, 3]
    return np.asarray(spatial_inertia(float(body.mass), jnp.asarray(c), jnp.asarray(R @ I_c @ R.T)))


def _unique(names, what, path):
    seen = set()
    for n in names:
        if n in seen:
            raise ModelError(f"{path}: {what} {n!r} is defined twice")
        seen.add(n)


def check_urdf_structure(path):
    """Read the URDF's XML and check what MuJoCo's parser would otherwise accept silently or report obscurely:
    the file exists and is well-formed XML (line and column of the error), a named ``<robot>`` root, named links
    and joints defined once each, every joint of a supported type (MuJoCo turns a ``planar`` joint into three)
    with its parent and child among the links, one root link. Returns the root link's name; raises
    :class:`~mrds_jax.validation.ModelError` naming the file and the item."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"no URDF file at {str(path)!r}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ModelError(f"{path}: not well-formed XML ({e})") from None
    if root.tag != "robot":
        raise ModelError(f"{path}: the root element is <{root.tag}>, a URDF needs <robot>")
    if not root.get("name"):
        raise ModelError(f"{path}: <robot> has no name attribute (URDF requires <robot name=...>)")
    links = [lk.get("name") for lk in root.findall("link")]
    joints = root.findall("joint")
    for i, n in enumerate(links):
        if not n:
            raise ModelError(f"{path}: link number {i} has no name")
    _unique(links, "link", path)
    _unique([j.get("name") for j in joints], "joint", path)
    children = [None if j.find("child") is None else j.find("child").get("link") for j in joints]
    for j, child in zip(joints, children):
        if child is not None and children.count(child) > 1:
            raise ModelError(f"{path}: link {child!r} is the child of more than one joint (a URDF is a tree; "
                             "close loops with contacts)")
    for j in joints:
        if j.get("type") not in SUPPORTED:
            raise ModelError(f"{path}: joint {j.get('name')!r} has unsupported type {j.get('type')!r} "
                             f"(supported: {sorted(SUPPORTED)})")
        for side in ("parent", "child"):
            el = j.find(side)
            target = None if el is None else el.get("link")
            if target not in links:
                raise ModelError(f"{path}: joint {j.get('name')!r}: {side} link {target!r} does not exist "
                                 f"(links: {links})")
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise ModelError(f"{path}: expected one root link (a link that is no joint's child), found {roots}")
    return roots[0]


def _armature_of_joints(path, armature, joints):
    """{joint name: armature} from ``load_urdf``'s argument: None, a number for every joint, or a dict."""
    if armature is None:
        return {}
    if isinstance(armature, dict):
        unknown = sorted(set(armature) - set(joints))
        if unknown:
            raise UnknownNameError(f"{path}: armature given for joints {unknown} that are not moving joints of the "
                                   f"file (joints: {joints})")
        return dict(armature)
    return {j: armature for j in joints}


def _collision_geoms(path, body, link_name, owner, T_owner_link, geoms, left_out):
    """The collision primitives of a URDF link (module docstring), appended to ``geoms`` (meshes and other
    shapes: their names to ``left_out``). MuJoCo keeps a ``<collision>`` as a geom that collides (a ``<visual>``,
    kept only when the file's ``<mujoco>`` tag asks, collides with nothing), its sizes as MuJoCo's: half lengths."""
    import mujoco
    from .. import collision as C
    box, sphere, cylinder, mesh = (int(k) for k in (mujoco.mjtGeom.mjGEOM_BOX, mujoco.mjtGeom.mjGEOM_SPHERE,
                                                     mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_MESH))
    elements = [g for g in body.geoms if g.contype or g.conaffinity]
    for i, g in enumerate(elements):
        label = g.name or f"{link_name}:collision{i}"
        origin = _placement(g.pos, g.quat)
        T = origin if owner is not None else T_owner_link @ origin
        place = dict(position=T[:3, 3], rotation=T[:3, :3])
        module, frame = (None, None) if owner is None else (owner, link_name)
        size, kind = np.asarray(g.size, dtype=float), int(g.type)
        try:
            if kind == box:
                geoms.append(C.box(label, module, frame, size, **place))
            elif kind == sphere:
                geoms.append(C.sphere(label, module, frame, size[0], **place))
            elif kind == cylinder:
                geoms.append(C.cylinder(label, module, frame, size[0], size[1], **place))
            else:
                left_out.append(f"{label!r} ({'mesh' if kind == mesh else 'unknown shape'})")
        except C.CollisionError as e:
            raise ModelError(f"{path}: link {link_name!r}: {e}") from None


def load_urdf(path, floating=False, gravity=(0.0, 0.0, -9.81), armature=None, return_forces=False, name=None,
              return_collision=False):
    """Module from a URDF file. ``armature`` (URDF has no tag for it): rotor inertia added to the diagonal of
    the joint-space inertia, a number for every joint of the file (not the free root joint ``floating`` adds),
    or a dict joint name → number (as Pinocchio's ``model.armature``, MuJoCo's joint ``armature``).
    ``return_forces=True`` returns ``(module, forces)``: the joints' ``<dynamics damping>`` as one
    :class:`~mrds_jax.system.JointSpringDamper` on the module named ``name`` (default: the robot's name; the key
    the module gets in ``build_system``), or no element when no joint has damping (:func:`urdf_joint_damping`);
    ``<dynamics friction>`` (Coulomb, non-smooth) is not modelled and warned about.
    ``return_collision=True`` adds, last, the :class:`~mrds_jax.collision.CollisionModel` of the ``<collision>``
    primitives (module docstring), its geoms on the module named ``name`` (default: the robot's name: build the
    system with the module under that name).
    Raises ModelError (a ValueError) naming the file and the item: malformed XML,
    a missing robot name, links or joints defined twice, a joint whose parent or child link does not exist
    (:func:`check_urdf_structure`), an unsupported joint type, a zero joint axis, a moving link without
    positive mass or with an unphysical inertia, a robot without moving links."""
    from .mjcf import _mujoco
    mujoco = _mujoco("load_urdf")
    if tuple(int(x) for x in mujoco.__version__.split(".")[:2]) < OLDEST_MUJOCO:
        raise ImportError(f"load_urdf needs mujoco {'.'.join(map(str, OLDEST_MUJOCO))} or later (older versions "
                          f"read a URDF <inertial>'s orientation otherwise), found {mujoco.__version__}: "
                          "pip install -U mujoco")

    root = check_urdf_structure(path)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as e:      # the parser's own errors (attributes it cannot read), named with the file
        raise ModelError(f"{path}: MuJoCo cannot read the URDF ({e})") from None
    # MuJoCo makes a root link named "world" its world body: the support itself
    root_body = next((b for b in spec.worldbody.bodies if b.name == root), spec.worldbody)
    if floating and root_body is spec.worldbody:
        raise ModelError(f"{path}: the root link is named 'world', the support itself: it cannot float "
                         "(floating=True); rename it or leave floating off")
    kinds = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic",
             int(mujoco.mjtJoint.mjJNT_FREE): "free"}       # (ints: MuJoCo 3.3 gives some of these fields as ints)
    unlimited = int(mujoco.mjtLimited.mjLIMITED_FALSE)

    # walk the tree: every link gets (owner moving link or None for the support, placement in the owner)
    bodies = []  # dicts: name, parent (moving body name or None), kind, joint, axis, T (placement), limits, ...
    frames = []  # (frame name, owner body name or None, 4x4 placement in owner)
    lumped = {}

    geoms, left_out = [], []
    name = spec.modelname if name is None else name

    def visit(body, link_name, owner, T_owner_link):
        frames.append((link_name, owner, T_owner_link))
        if return_collision:
            _collision_geoms(path, body, link_name, None if owner is None else name, T_owner_link, geoms, left_out)
        if owner is not None:
            R, p = T_owner_link[:3, :3], T_owner_link[:3, 3]
            lumped[owner] = lumped[owner] + np.asarray(transform_inertia(jnp.asarray(R), jnp.asarray(p),
                                                                         jnp.asarray(_inertia_of(body))))
        for child in body.bodies:
            T_child = T_owner_link @ _placement(child.pos, child.quat)
            if not child.joints:                                    # a fixed joint: merged into the owner
                visit(child, child.name, owner, T_child)
                continue
            (j,) = child.joints                                     # one per link (planar refused above)
            kind = kinds[int(j.type)]
            limited = kind != "free" and int(j.limited) != unlimited
            bodies.append(dict(name=child.name, parent=owner, kind=kind, joint=j.name,
                               axis=np.asarray(j.axis, dtype=float), T=T_child,
                               limits=(float(j.range[0]), float(j.range[1])) if limited else None,
                               damping=float(np.ravel(j.damping)[0]), friction=float(j.frictionloss)))
            lumped[child.name] = np.zeros((6, 6))
            visit(child, child.name, child.name, np.eye(4))

    if floating:
        bodies.append(dict(name=root, parent=None, kind="free", joint="root_joint",
                           axis=np.array([0.0, 0.0, 1.0]), T=np.eye(4)))
        lumped[root] = np.zeros((6, 6))
        visit(root_body, root, root, np.eye(4))
    else:
        visit(root_body, root, None, np.eye(4))

    if not bodies:
        raise ModelError(f"{path}: the robot has no moving links (every joint is fixed); pass floating=True to "
                         "give its root a free joint")
    rotor = _armature_of_joints(path, armature, [body["joint"] for body in bodies if body["kind"] != "free"])
    b = ModuleBuilder(gravity=gravity)
    for body in bodies:
        mass, com, I_c = (np.asarray(x) for x in inertia_parameters(jnp.asarray(lumped[body["name"]])))
        if not mass > 0:
            raise ModelError(f"{path}: moving link {body['name']!r} (joint {body['joint']!r}) has no positive "
                             f"mass after merging fixed children (mass {mass})")
        try:
            b.add_link(body["name"], parent=body["parent"], joint=body["kind"], joint_name=body["joint"],
                       axis=body["axis"], position=body["T"][:3, 3], rotation=body["T"][:3, :3],
                       mass=mass, com=com, inertia=0.5 * (I_c + I_c.T), armature=rotor.get(body["joint"], 0.0),
                       limits=body.get("limits"))
        except ModelError as e:
            raise ModelError(f"{path}: joint {body['joint']!r}, {e}") from None
    for frame, owner, T in frames:
        if owner is not None:
            b.add_frame(frame, owner, position=T[:3, 3], rotation=T[:3, :3])
    module = b.build()
    out = (module,)
    if return_forces:
        out += (urdf_joint_damping(path, module, bodies, name),)
    if return_collision:
        from .. import collision as C
        if left_out:
            import warnings
            warnings.warn(f"{path}: collision geometry left out, the narrow phase has no such primitive: "
                          f"{', '.join(left_out)}", C.CollisionWarning, stacklevel=2)
        out += (C.collision_model(geoms, {name: module}),)
    return out if len(out) > 1 else module


def urdf_joint_damping(path, module, bodies, name):
    """The ``<dynamics damping>`` of the moving joints as a per-degree-of-freedom damper (Pinocchio's
    ``model.damping``; the free root joint: none): a tuple with one
    :class:`~mrds_jax.system.JointSpringDamper` named ``damping`` on module ``name``, or () without damping.
    Warns about ``<dynamics friction>`` (Coulomb friction, non-smooth: not modelled)."""
    import warnings
    from ..system.forces import joint_spring_damper
    damping, friction = [], []
    for body in bodies:
        nv = 6 if body["kind"] == "free" else 1
        damping += [0.0 if body["kind"] == "free" else body["damping"]] * nv      # floating=True's root: none
        if body.get("friction", 0.0) != 0:
            friction.append(body["joint"])
    if friction:
        warnings.warn(f"{path}: joint friction of {friction} is ignored (non-smooth)", UserWarning, stacklevel=3)
    if not any(damping):
        return ()
    return (joint_spring_damper("damping", name, damping=np.array(damping), nq=module.nq, nv=module.nv),)
