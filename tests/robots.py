"""Test models: real robots from example-robot-data and random trees (their Pinocchio twins:
``mrds_jax.export.to_pinocchio``)."""
import numpy as np
import pinocchio as pin

from mrds_jax.model import ModuleBuilder
from mrds_jax.loaders.urdf import load_urdf
from conftest import URDFS


def random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def random_inertia(rng):
    """Physically valid rotational inertia (principal moments obey the triangle inequality)."""
    a, b = rng.uniform(0.02, 0.2, size=2)
    c = rng.uniform(abs(a - b) + 0.01, a + b)
    R = random_rotation(rng)
    return R @ np.diag([a, b, c]) @ R.T


def random_unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_tree(rng, spec, free_base=False):
    """spec: list of (parent index or -1, joint kind). Random placements, axes, inertias; one operational
    point at a random pose on every link."""
    b = ModuleBuilder()
    names = []
    for i, (parent, kind) in enumerate(spec):
        name = f"link{i}"
        b.add_link(name, parent=None if parent < 0 else names[parent], joint=kind, axis=random_unit(rng),
                   axis2=random_unit(rng), pitch=rng.uniform(-0.2, 0.2), position=rng.uniform(-0.5, 0.5, 3),
                   rotation=random_rotation(rng), mass=rng.uniform(0.5, 3.0), com=rng.uniform(-0.2, 0.2, 3),
                   inertia=random_inertia(rng))
        names.append(name)
    for i, name in enumerate(names):
        b.add_frame(f"op{i}", name, position=rng.uniform(-0.3, 0.3, 3), rotation=random_rotation(rng))
    return b.build()


TREE_SPECS = {
    # branching, revolute/prismatic/screw/universal, fixed base
    # (listed depth-first: Pinocchio needs every subtree's joints contiguous; our algorithms do not)
    "branching": [(-1, "revolute"), (0, "prismatic"), (1, "screw"), (1, "revolute"), (3, "prismatic"),
                  (0, "universal"), (5, "revolute")],
    # chain with prismatic, screw and spherical joints
    "prismatic_screw_spherical": [(-1, "prismatic"), (0, "spherical"), (1, "screw"), (2, "revolute"),
                                  (3, "spherical"), (4, "prismatic")],
    # free-floating base with two legs
    "free_base": [(-1, "free"), (0, "revolute"), (1, "spherical"), (0, "universal"), (3, "prismatic"),
                  (0, "screw")],
}


def tree_model(name, seed=1):
    return random_tree(np.random.default_rng(seed), TREE_SPECS[name])


def robot_model(name):
    return load_urdf(URDFS[name])


def pin_urdf_model(name):
    return pin.buildModelFromUrdf(str(URDFS[name]))


SIX_PERM = np.array([3, 4, 5, 0, 1, 2])  # [angular; linear] <-> [linear; angular]


def random_states(module, rng, n):
    """n random (q, v, a, tau) with unit quaternions."""
    t = module.topology
    qs, vs = [], []
    for _ in range(n):
        q = []
        for kind in t.kinds:
            if kind.name == "spherical":
                u = rng.normal(size=4)
                q.append(u / np.linalg.norm(u))
            elif kind.name == "free":
                u = rng.normal(size=4)
                q.append(np.concatenate([rng.uniform(-1, 1, 3), u / np.linalg.norm(u)]))
            else:
                q.append(rng.uniform(-1.5, 1.5, kind.nq))
        qs.append(np.concatenate(q))
    q = np.array(qs)
    v = rng.uniform(-2, 2, (n, t.nv))
    a = rng.uniform(-2, 2, (n, t.nv))
    tau = rng.uniform(-5, 5, (n, t.nv))
    return q, v, a, tau
