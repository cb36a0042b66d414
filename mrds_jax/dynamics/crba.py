"""Joint-space inertia matrix H(q) by the composite-rigid-body algorithm (Featherstone Table 6.2;
Amin-Javaheri & Orin Table 1), and the shared assembly of H from composite inertias."""
import jax
import jax.numpy as jnp
import numpy as np

from ..model.tree import check_state
from ..spatial import transform_inertia
from .common import link_inertias
from .kinematics import forward_kinematics, is_stacked, world_motion_subspaces
from .levels import subtree_totals
from ..spatial.linalg import matmul


def composite_inertias(module, kin):
    """Composite-rigid-body inertias Iᶜᵢ = Iᵢ + Σ_children ᶦX*_c Iᶜ_c ᶜXᵢ, link frames (backward pass): a
    Python loop over links on the unrolled route (list), one inward level scan on the level-scan route
    ((n, 6, 6); ``levels.subtree_totals``)."""
    t = module.topology
    if is_stacked(kin):
        return subtree_totals(t, link_inertias(module), kin.local_R, kin.local_p, transform_inertia)
    Ic = list(link_inertias(module))
    for i in reversed(range(t.n_links)):
        parent = t.parents[i]
        if parent >= 0:
            Ic[parent] = Ic[parent] + transform_inertia(kin.local_R[i], kin.local_p[i], Ic[i])
    return Ic


def assemble_mass_matrix(topology, S0, Ic0):
    """H from world-frame motion subspaces S0 (6, nv) and world-frame composite inertias Ic0 (n, 6, 6):
    H_ij = S0_iᵀ Iᶜ0_{link(j)} S0_j whenever link(i) is link(j) or one of its ancestors, mirrored for the
    other triangle, zero for dofs on different branches."""
    dof_link = topology.dof_links()
    A = matmul(S0.T, matmul(Ic0[dof_link], S0.T[:, :, None])[:, :, 0].T)   # (Iᶜ0 S0)_j column by column
    anc = topology.ancestor_mask()[np.ix_(dof_link, dof_link)]
    lower_only = anc.T & ~anc
    return jnp.where(anc, A, 0.0) + jnp.where(lower_only, A.T, 0.0)


def mass_matrix(module, q):
    """H(q), serial CRBA: composite inertias by the backward recursion, then assembly."""
    check_state(module, q, None, "mass_matrix")
    kin = forward_kinematics(module, q)
    Ic = composite_inertias(module, kin)
    if is_stacked(kin):
        Ic0 = jax.vmap(transform_inertia)(kin.world_R, kin.world_p, Ic)
    else:
        Ic0 = jnp.stack([transform_inertia(R, p, I) for R, p, I in zip(kin.world_R, kin.world_p, Ic)])
    return assemble_mass_matrix(module.topology, world_motion_subspaces(kin), Ic0)
