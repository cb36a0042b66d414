"""Whether a loaded module's joint-space mass matrix H(q) is positive definite, checked at load.

Links with a positive mass and a positive definite rotational inertia make H positive definite at every
configuration (H = Jᵀ diag(Iᵢ) J with J of full column rank: each joint's motion subspace moves its own link).
Massless links (a joint frame between two joints) and point masses or thin rods (a singular rotational inertia)
keep it so wherever the links below carry inertia along every joint's motion — as Pinocchio and MuJoCo simulate
them — but not always: a massless leaf, a point mass on its joint's axis, dependent slide axes on one body
(MuJoCo's ``general_dyntype.xml``). Where a module has such links, H is evaluated at a few random configurations
(float64, numpy) and a singular one is a :class:`SingularMassMatrixError` naming the joints and links whose
combined motion moves no mass; forward dynamics (H⁻¹) does not exist there.
"""
import functools
from typing import NamedTuple

import numpy as np

from ..validation import ModelError


class SingularMassMatrixError(ModelError):
    """The joint-space mass matrix is singular: the message names the file, the joints and their links."""


class MassMatrixCheck(NamedTuple):
    """Settings of :func:`check_mass_matrix`: how many random configurations, their seed, and the smallest
    eigenvalue of the unit-diagonal scaled H, D^-½ H D^-½, that counts as positive definite."""
    configurations: int = 2
    seed: int = 0
    tolerance: float = 1e-10


def singular_inertia_links(module, rtol=1e-12):
    """Indices of the links whose spatial inertia is singular: mass 0, or a rotational inertia with a zero
    principal moment (a point mass, a thin rod)."""
    mass, inertia = np.asarray(module.params.mass), np.asarray(module.params.inertia)
    out = []
    for i, (m, I) in enumerate(zip(mass, inertia)):
        eig = np.linalg.eigvalsh(0.5 * (I + I.T))
        if m == 0 or eig[0] <= rtol * max(eig[-1], 1e-300):
            out.append(i)
    return out


def random_configurations(module, n, seed):
    """``n`` configurations of the module: the neutral one moved along random velocities (unit scale)."""
    from ..model.configuration import integrate_configuration
    rng = np.random.default_rng(seed)
    q0 = module.neutral_configuration()
    return [np.asarray(integrate_configuration(module, q0, rng.uniform(-1.5, 1.5, module.nv), 1.0)) for _ in range(n)]


def dependent_joints(H, tolerance):
    """(indices of the degrees of freedom in H's null space, the smallest scaled eigenvalue) or None when H is
    positive definite (the unit-diagonal scaled H's smallest eigenvalue above ``tolerance``)."""
    d = np.diag(H).copy()
    zero = np.flatnonzero(~(d > 0))
    if zero.size:
        return zero, 0.0
    s = 1.0 / np.sqrt(d)
    eig, vec = np.linalg.eigh(s[:, None] * H * s[None, :])
    if eig[0] > tolerance:
        return None
    v = np.abs(vec[:, 0])
    return np.flatnonzero(v > 0.2 * v.max()), float(eig[0])


@functools.lru_cache(maxsize=None)
def _mass_matrices():
    """H at a batch of configurations, compiled once per module structure: on the level-scan recursion, whose
    program compiles several times faster than the unrolled one (MuJoCo's humanoid: 15 s against about 100 s on a
    busy 2-core CPU; eager evaluation 40 s a configuration)."""
    import jax
    from ..dynamics.crba import mass_matrix
    return jax.jit(jax.vmap(mass_matrix, (None, 0)))


def check_mass_matrix(module, where, check=MassMatrixCheck()):
    """``module`` when its mass matrix is positive definite (module docstring); raises
    :class:`SingularMassMatrixError` naming ``where`` (the file), the joints in H's null space and their links
    otherwise. Only modules with massless or point-mass links are evaluated (the others are positive definite)."""
    if not singular_inertia_links(module):
        return module
    import jax
    t = module.topology
    dof_link = t.dof_links()
    with jax.ensure_compile_time_eval():     # concrete even when loaded inside a trace
        qs = np.stack(random_configurations(module, check.configurations, check.seed))
        Hs = np.asarray(_mass_matrices()(module.with_recursion("level_scan"), qs), dtype=float)
        for H in Hs:
            found = dependent_joints(H, check.tolerance)
            if found is None:
                continue
            dofs, eig = found
            links = sorted({int(dof_link[d]) for d in dofs})
            joints = [t.joint_names[i] for i in links]
            raise SingularMassMatrixError(
                f"{where}: the mass matrix is singular (at a random configuration, smallest eigenvalue of the "
                f"unit-diagonal H {eig:.3g}): joints {joints} (links {[t.link_names[i] for i in links]}) together "
                "move no mass — a massless or point-mass link without mass below it along its joint, or joint axes "
                "that depend on each other; forward dynamics does not exist. Give those links mass and inertia, "
                "armature to the joints, or remove a dependent joint")
    return module
