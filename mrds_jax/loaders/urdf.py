"""URDF import through MuJoCo's own URDF parser (``mujoco.MjSpec.from_file``, read before MuJoCo's compiler fuses
fixed links or drops anything): one module per URDF tree.

Conventions follow Pinocchio's parser so the two can be compared link for link: links joined by ``fixed``
joints are merged into their parent (inertias summed, Featherstone §2.13) and kept as operational points;
the root link is fixed to the support (its mass does not move) unless ``floating=True`` gives it a free
joint (a root link named ``world`` is the support itself, as MuJoCo reads it, and cannot float); ``continuous`` is a revolute joint. The position
limits of revolute and prismatic joints are kept in ``Topology.joint_limits`` (enforced by ``simulate``'s contact
step). Every URDF link becomes an operational point of the same name.

What Pinocchio simulates is taken: links without ``<inertial>`` or with mass 0 between two joints are massless
links, links with mass and a zero (or singular) rotational inertia point masses (or thin rods), and rotational
inertias whose principal moments break the triangle inequality are kept as written and named in one warning —
wherever the mass matrix stays positive definite (:mod:`mrds_jax.loaders.mass`; a
:class:`~mrds_jax.loaders.mass.SingularMassMatrixError` names the joints and links where it does not). ``<mimic>``
tags (q = multiplier·q_mimicked + offset) are joint couplings (:func:`~mrds_jax.contacts.coupling.joint_coupling`,
MuJoCo's ``<equality joint>``, as MuJoCo's URDF parser reads them), exact rows of the constraint solve, returned
with ``return_couplings=True`` for ``build_system(..., couplings=...)``; without it a warning names the mimic joints
(they are then independent). Values the physics cannot use are a ModelError naming the file, the element and the
value: a negative or non-finite mass, joint limits with lower > upper, a rotational inertia with a negative
principal moment.

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
from ..validation import ModelError, UnknownNameError, breaks_triangle_inequality
from ..model.builder import ModuleBuilder
from .mass import check_mass_matrix

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
    check_urdf_values(path, root)
    return roots[0]


def _number(path, element, text, what):
    """A URDF attribute's number; ModelError naming the file and element for text that is not one."""
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ModelError(f"{path}: {element}: {what} {text!r} is not a number") from None


def check_urdf_values(path, root):
    """The values of the XML that the physics cannot use, each a ModelError naming the file, the element and the
    value (MuJoCo's parser reads them without a word): a negative or non-finite ``<mass value>``, and a revolute or
    prismatic joint's ``<limit>`` with lower > upper (URDF's defaults: 0)."""
    for link in root.findall("link"):
        mass = link.find("inertial/mass")
        if mass is not None:
            m = _number(path, f"link {link.get('name')!r}", mass.get("value"), "<mass value>")
            if not np.isfinite(m) or m < 0:
                raise ModelError(f"{path}: link {link.get('name')!r}: <mass value=\"{mass.get('value')}\"> must be "
                                 "finite and >= 0 (0: a massless link)")
    for j in root.findall("joint"):
        limit = j.find("limit")
        if limit is None or j.get("type") not in ("revolute", "prismatic"):
            continue
        where = f"joint {j.get('name')!r}"
        lo, hi = (_number(path, where, limit.get(k, "0"), f"<limit {k}>") for k in ("lower", "upper"))
        if not lo <= hi:
            raise ModelError(f"{path}: {where}: <limit lower=\"{limit.get('lower', '0')}\" "
                             f"upper=\"{limit.get('upper', '0')}\">: lower > upper (no position satisfies them)")


def mimic_couplings(path, root, spec, module_name, moving_joints):
    """The ``<mimic>`` tags as :func:`~mrds_jax.contacts.coupling.joint_coupling` s named as the mimic joint
    (q_mimic = multiplier·q_joint + offset: MuJoCo's parser makes each an ``<equality joint>``, ``data`` =
    (offset, multiplier, …)), and the tags that cannot be (the mimic or the mimicked joint is not a moving
    revolute or prismatic joint: MuJoCo's parser drops those) as 'joint (why)' strings."""
    from ..contacts.coupling import joint_coupling
    import mujoco
    read = {}
    for eq in spec.equalities:
        if int(eq.type) == int(mujoco.mjtEq.mjEQ_JOINT) and eq.name1 in moving_joints and eq.name2 in moving_joints:
            read[eq.name1] = joint_coupling(eq.name1, (module_name, eq.name1), (module_name, eq.name2),
                                            polycoef=np.asarray(eq.data[:5], dtype=float), reference=(0.0, 0.0))
    dropped = []
    for j in root.findall("joint"):
        mimic = j.find("mimic")
        if mimic is None or j.get("name") in read:
            continue
        target = mimic.get("joint")
        why = (f"a {j.get('type')} joint" if j.get("type") not in ("revolute", "prismatic", "continuous")
               else f"{target!r} is not a moving one-coordinate joint")
        dropped.append(f"{j.get('name')!r} ({why})")
    return tuple(read.values()), dropped


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
              return_collision=False, return_couplings=False):
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
    ``return_couplings=True`` adds, last, the ``<mimic>`` tags as a tuple of
    :class:`~mrds_jax.contacts.coupling.JointCoupling` on the module named ``name`` (module docstring; () without
    mimic tags): ``build_system({name: module}, [], couplings=couplings)`` couples the joints exactly, as
    Pinocchio's ``buildModelFromUrdf(path, mimic=True)`` (its degrees of freedom the independent joints).
    Raises ModelError (a ValueError) naming the file and the item: malformed XML,
    a missing robot name, links or joints defined twice, a joint whose parent or child link does not exist
    (:func:`check_urdf_structure`), a negative mass or reversed limits (:func:`check_urdf_values`), an unsupported
    joint type, a zero joint axis, a rotational inertia with a negative principal moment, a massless link with
    rotational inertia, a mass matrix that is singular (:class:`~mrds_jax.loaders.mass.SingularMassMatrixError`),
    a robot without moving links. Warns (``UserWarning``) naming the links whose inertias break the triangle
    inequality (kept), the mimic joints when ``return_couplings`` is False, and mimic tags that cannot be read."""
    from .mjcf import _mujoco
    mujoco = _mujoco("load_urdf")
    if tuple(int(x) for x in mujoco.__version__.split(".")[:2]) < OLDEST_MUJOCO:
        raise ImportError(f"load_urdf needs mujoco {'.'.join(map(str, OLDEST_MUJOCO))} or later (older versions "
                          f"read a URDF <inertial>'s orientation otherwise), found {mujoco.__version__}: "
                          "pip install -U mujoco")

    root = check_urdf_structure(path)
    robot = ET.parse(path).getroot()
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
    unphysical = []
    for body in bodies:
        mass, com, I_c = link_parameters(lumped[body["name"]])
        if breaks_triangle_inequality(I_c) and mass > 0:
            unphysical.append(body["name"])
        try:
            b.add_link(body["name"], parent=body["parent"], joint=body["kind"], joint_name=body["joint"],
                       axis=body["axis"], position=body["T"][:3, 3], rotation=body["T"][:3, :3],
                       mass=mass, com=com, inertia=I_c, armature=rotor.get(body["joint"], 0.0),
                       limits=body.get("limits"), triangle_inequality=False)
        except ModelError as e:
            raise ModelError(f"{path}: joint {body['joint']!r}, {e}") from None
    for frame, owner, T in frames:
        if owner is not None:
            b.add_frame(frame, owner, position=T[:3, 3], rotation=T[:3, :3])
    try:
        module = b.build()
    except ModelError as e:
        raise ModelError(f"{path}: {e}") from None
    check_mass_matrix(module, path)
    import warnings
    if unphysical:
        warnings.warn(f"{path}: the rotational inertias of links {unphysical} break the triangle inequality (no mass "
                      "distribution has their principal moments); kept as written, as Pinocchio simulates them",
                      UserWarning, stacklevel=2)
    couplings, dropped = mimic_couplings(path, robot, spec, name, [body["joint"] for body in bodies])
    if dropped:
        warnings.warn(f"{path}: <mimic> tags left out (MuJoCo's parser drops them; the joints stay as they are): "
                      f"{', '.join(dropped)}", UserWarning, stacklevel=2)
    if couplings and not return_couplings:
        warnings.warn(f"{path}: joints {[c.name for c in couplings]} mimic others (<mimic>) and are independent joints "
                      "here; load_urdf(..., return_couplings=True) returns them as joint couplings for "
                      "build_system(..., couplings=...)", UserWarning, stacklevel=2)
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
    if return_couplings:
        out += (couplings,)
    return out if len(out) > 1 else module


def link_parameters(I):
    """(mass, centre of mass, symmetric rotational inertia about it) of a lumped 6x6 spatial inertia; a massless
    link's (mass 0) centre of mass is its origin and its rotational inertia what is left about it."""
    I = np.asarray(I, dtype=float)
    if I[5, 5] == 0:
        return 0.0, np.zeros(3), 0.5 * (I[:3, :3] + I[:3, :3].T)
    mass, com, I_c = (np.asarray(x) for x in inertia_parameters(jnp.asarray(I)))
    return float(mass), com, 0.5 * (I_c + I_c.T)


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
