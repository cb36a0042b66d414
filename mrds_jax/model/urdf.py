"""URDF import through ``yourdfpy`` (a maintained parser): one module per URDF tree.

Conventions follow Pinocchio's parser so the two can be compared link for link: links joined by ``fixed``
joints are merged into their parent (inertias summed, Featherstone §2.13) and kept as operational points;
the root link is fixed to the support (its mass does not move) unless ``floating=True`` gives it a free
joint; ``continuous`` is a revolute joint; mimic tags are ignored (joints stay independent).
Every URDF link becomes an operational point of the same name.
"""
import numpy as np
import jax.numpy as jnp

from ..spatial import inertia_parameters, spatial_inertia, transform_inertia
from .builder import ModuleBuilder

SUPPORTED = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed",
             "floating": "free"}


def _inertia_of(link):
    if link.inertial is None or link.inertial.mass is None:
        return np.zeros((6, 6))
    T = np.eye(4) if link.inertial.origin is None else np.asarray(link.inertial.origin, dtype=float)
    I_c = np.zeros((3, 3)) if link.inertial.inertia is None else np.asarray(link.inertial.inertia, dtype=float)
    R, c = T[:3, :3], T[:3, 3]
    return np.asarray(spatial_inertia(float(link.inertial.mass), jnp.asarray(c), jnp.asarray(R @ I_c @ R.T)))


def load_urdf(path, floating=False, gravity=(0.0, 0.0, -9.81)):
    """Module from a URDF file. Raises ValueError naming the joint for an unsupported joint type, and the
    link for a moving link without positive mass."""
    import yourdfpy

    robot = yourdfpy.URDF.load(str(path), build_scene_graph=False, load_meshes=False,
                               build_collision_scene_graph=False, load_collision_meshes=False).robot
    links = {lk.name: lk for lk in robot.links}
    children = {}
    for j in robot.joints:
        if j.type not in SUPPORTED:
            raise ValueError(f"{path}: joint {j.name!r} has unsupported type {j.type!r} "
                             f"(supported: {sorted(SUPPORTED)})")
        children.setdefault(j.parent, []).append(j)
    child_names = {j.child for j in robot.joints}
    roots = [name for name in links if name not in child_names]
    if len(roots) != 1:
        raise ValueError(f"{path}: expected one root link, found {roots}")

    # walk the tree: every link gets (owner moving link or None for the support, placement in the owner)
    bodies = []  # dicts: name, parent (moving body name or None), kind, joint, axis, T (placement), inertia
    frames = []  # (frame name, owner body name or None, 4x4 placement in owner)
    lumped = {}

    def visit(link_name, owner, T_owner_link):
        frames.append((link_name, owner, T_owner_link))
        I_link = _inertia_of(links[link_name])
        if owner is not None:
            R, p = T_owner_link[:3, :3], T_owner_link[:3, 3]
            lumped[owner] = lumped[owner] + np.asarray(transform_inertia(jnp.asarray(R), jnp.asarray(p),
                                                                         jnp.asarray(I_link)))
        for j in children.get(link_name, []):
            T_j = np.eye(4) if j.origin is None else np.asarray(j.origin, dtype=float)
            T_child = T_owner_link @ T_j
            kind = SUPPORTED[j.type]
            if kind == "fixed":
                visit(j.child, owner, T_child)
                continue
            axis = np.array([1.0, 0.0, 0.0]) if j.axis is None else np.asarray(j.axis, dtype=float)
            bodies.append(dict(name=j.child, parent=owner, kind=kind, joint=j.name, axis=axis, T=T_child))
            lumped[j.child] = np.zeros((6, 6))
            visit(j.child, j.child, np.eye(4))

    if floating:
        bodies.append(dict(name=roots[0], parent=None, kind="free", joint="root_joint",
                           axis=np.array([0.0, 0.0, 1.0]), T=np.eye(4)))
        lumped[roots[0]] = np.zeros((6, 6))
        visit_root_owner = roots[0]
    else:
        visit_root_owner = None
    visit(roots[0], visit_root_owner, np.eye(4))

    b = ModuleBuilder(gravity=gravity)
    for body in bodies:
        mass, com, I_c = (np.asarray(x) for x in inertia_parameters(jnp.asarray(lumped[body["name"]])))
        if not mass > 0:
            raise ValueError(f"{path}: moving link {body['name']!r} (joint {body['joint']!r}) has no positive "
                             f"mass after merging fixed children (mass {mass})")
        b.add_link(body["name"], parent=body["parent"], joint=body["kind"], joint_name=body["joint"],
                   axis=body["axis"], position=body["T"][:3, 3], rotation=body["T"][:3, :3],
                   mass=mass, com=com, inertia=0.5 * (I_c + I_c.T))
    for name, owner, T in frames:
        if owner is not None:
            b.add_frame(name, owner, position=T[:3, 3], rotation=T[:3, :3])
    return b.build()
