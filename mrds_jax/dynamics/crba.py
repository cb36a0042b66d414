"""Joint-space inertia matrix H(q) by the composite-rigid-body algorithm (Featherstone Table 6.2;
Amin-Javaheri & Orin Table 1), and the shared assembly of H from composite inertias."""
import jax
import jax.numpy as jnp
import numpy as np

from ..validation import module_arrays
from ..spatial import act_force, transform_inertia
from .common import link_inertias, with_armature
from .kinematics import forward_kinematics, is_stacked, world_motion_subspaces
from .levels import subtree_totals
from ..spatial.linalg import UNROLL_MAX, matmul, spd_solve, tree_spd_solve


def composite_inertias(module, kin):
    """Composite-rigid-body inertias Iᶜᵢ = Iᵢ + Σ_children ᶦX*_c Iᶜ_c ᶜXᵢ, link frames (Featherstone Table 6.2's
    backward pass, ``levels.subtree_totals``): a list link by link on the unrolled route, (n, 6, 6) from one
    inward level scan on the level-scan route."""
    inertias = link_inertias(module)
    if not is_stacked(kin):
        inertias = list(inertias)
    return subtree_totals(module.topology, inertias, kin.local_R, kin.local_p, transform_inertia)


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
    q = module_arrays(module, "mass_matrix", q=q)
    return mass_matrix_from_kinematics(module, forward_kinematics(module, q))


def mass_matrix_from_kinematics(module, kin):
    """H(q) from the placements and motion subspaces of ``kin`` (CRBA's backward pass and assembly).

    Unrolled route: Featherstone Table 6.2 in link frames — Fᵢ = Iᶜᵢ Sᵢ, Hᵢᵢ = Sᵢᵀ Fᵢ, then Fᵢ is carried up the
    ancestors j by ʲX*ᵢ (a force transform per column) and H_ji = S_jᵀ F. Level-scan route: the composite
    inertias are moved to the support frame and H assembled from world-frame subspaces in one product
    (:func:`assemble_mass_matrix`), which vectorises over a level but costs a 6x6 inertia transform per link.
    Both routes end with the joints' armature on the diagonal (:func:`~.common.with_armature`)."""
    Ic = composite_inertias(module, kin)
    if is_stacked(kin):
        Ic0 = jax.vmap(transform_inertia)(kin.world_R, kin.world_p, Ic)
        return with_armature(module, assemble_mass_matrix(module.topology, world_motion_subspaces(kin), Ic0))
    return with_armature(module, _mass_matrix_link_frames(module.topology, kin, Ic))


def _mass_matrix_link_frames(t, kin, Ic):
    nv = t.nv
    dtype = kin.local_p[0].dtype
    blocks = {}
    carry_up = jax.vmap(act_force, in_axes=(None, None, 1), out_axes=1)     # ʲX*ᵢ on each column
    for i, vs in enumerate(t.v_slices):
        if vs.stop == vs.start:
            continue
        F = matmul(Ic[i], kin.S[i])
        blocks[(i, i)] = matmul(kin.S[i].T, F)
        j = i
        while t.parents[j] >= 0:
            F = carry_up(kin.local_R[j], kin.local_p[j], F)
            j = t.parents[j]
            if t.v_slices[j].stop > t.v_slices[j].start:
                blocks[(j, i)] = matmul(kin.S[j].T, F)
    for (j, i), b in list(blocks.items()):
        blocks[(i, j)] = b.T
    links = [i for i, vs in enumerate(t.v_slices) if vs.stop > vs.start]
    if not links:
        return jnp.zeros((nv, nv), dtype=dtype)
    width = {i: t.v_slices[i].stop - t.v_slices[i].start for i in links}
    return jnp.concatenate([jnp.concatenate([blocks.get((j, i), jnp.zeros((width[j], width[i]), dtype))
                                             for i in links], axis=1) for j in links], axis=0)


def dof_parents(topology):
    """The dof parent array λ of Featherstone RBDA §6.5 (static tuple, -1 for a root dof): within a joint each
    coordinate's parent is the one before it (a multi-dof joint's block of H is dense), and a joint's first
    coordinate hangs from the last coordinate of the nearest ancestor link that has any. Links are listed parents
    first, so λ(i) < i."""
    out, last = [], {}
    for link, vs in enumerate(topology.v_slices):
        anc = topology.parents[link]
        while anc >= 0 and anc not in last:
            anc = topology.parents[anc]
        prev = last.get(anc, -1)
        for i in range(vs.start, vs.stop):
            out.append(prev)
            prev = i
        if vs.stop > vs.start:
            last[link] = vs.stop - 1
    return tuple(out)


def mass_matrix_solve(module, H, B):
    """H⁻¹ B for the module's joint-space inertia H (CRBA's, armature included), B (nv,) or (nv, m), along H's
    branch-induced sparsity: :func:`~mrds_jax.spatial.linalg.tree_spd_solve` with the module's
    :func:`dof_parents` for modules of more than ``UNROLL_MAX`` dofs (Featherstone RBDA §6.5's elimination order,
    block-wise: the legs of a biped are
    eliminated on their own, stacked, before the base; a chain is one dense block, inverted by Gauss-Jordan,
    :func:`~mrds_jax.spatial.linalg.spd_inverse`). The same answer as the dense Cholesky of
    :func:`~mrds_jax.spatial.linalg.spd_solve` to rounding (tests/test_dense_linalg.py)."""
    if module.nv <= UNROLL_MAX:         # small modules (arms, legs, payloads): the unrolled Cholesky, measured faster
        return spd_solve(H, B)          # there (the dual-arm grasp's rollout, 1.8-2.7x, loaded 2-core machine)
    return tree_spd_solve(H, dof_parents(module.topology), B)
