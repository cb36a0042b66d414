"""Joint models of all links at once, one vectorised evaluation per joint *kind* (so the traced program grows
with the number of distinct kinds, not of links), and per-link motion subspaces padded to a common width —
the per-link data the level scans (``levels.py``) consume.

Padding: a joint with nvᵢ < w coordinates gets w − nvᵢ zero columns in Sᵢ and zero entries in its padded
velocity/force coordinates; ABA adds the identity on the padded diagonal of Dᵢ = SᵢᵀIᴬᵢSᵢ, so padded
accelerations come out exactly zero and never reach a real coordinate.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..model.joints import velocity_product
from ..model.tree import joint_groups
from ..spatial import compose, motion_transform
from ..spatial.linalg import matmul


@jax.tree_util.register_pytree_node_class
class PaddedSubspaces:
    """Motion subspaces of every link, ``padded`` (n, 6, w); ``S[i]`` is link i's (6, nvᵢ) subspace, as in the
    unrolled route's list."""

    def __init__(self, padded, widths):
        self.padded, self.widths = padded, widths

    def __getitem__(self, i):
        return self.padded[i, :, :self.widths[i]]

    def __len__(self):
        return len(self.widths)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def module_columns(self, per_link):
        """(6, nv) from per-link padded columns (n, 6, w), e.g. the subspaces themselves or X Sᵢ."""
        return dofs_of_links(self.widths, jnp.swapaxes(per_link, 1, 2)).T

    def in_frames(self, R, p):
        """(6, nv): every subspace moved to the frame in which link i's frame has placement (Rᵢ, pᵢ),
        ⁰Xᵢ Sᵢ (Plücker coordinates at that frame's origin)."""
        return self.module_columns(matmul(jax.vmap(motion_transform)(R, p), self.padded))

    def tree_flatten(self):
        return (self.padded,), self.widths

    @classmethod
    def tree_unflatten(cls, widths, children):
        return cls(children[0], widths)


def _per_kind(module, fn, q, v):
    """fn(kind, qᵢ, vᵢ, axisᵢ, axis2ᵢ, pitchᵢ) for every link, ``vmap``-ped over the links of each kind and
    put back in link order (a pytree of (n, ...) arrays)."""
    t, par = module.topology, module.params
    groups = joint_groups(t)
    outs = [jax.vmap(functools.partial(fn, kind))(q[q_index], v[v_index], par.axis[links], par.axis2[links],
                                                  par.pitch[links])
            for kind, links, q_index, v_index in groups.kinds]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs)[groups.order], *outs)


def _joint_motion(width, kind, q, v, axis, axis2, pitch):
    R, p = kind.transform(q, axis, axis2, pitch)
    S = kind.motion_subspace(q, axis, axis2, pitch)
    return R, p, jnp.pad(S, ((0, 0), (0, width - kind.nv)))


def joint_motions(module, q):
    """(local_R, local_p, S) of every link: the link frame in its parent's (joint placement ∘ joint motion,
    (n, 3, 3), (n, 3)) and the motion subspaces (:class:`PaddedSubspaces`)."""
    t, par = module.topology, module.params
    groups = joint_groups(t)
    RJ, pJ, S = _per_kind(module, functools.partial(_joint_motion, groups.width), q, jnp.zeros(t.nv, q.dtype))
    R, p = jax.vmap(compose)(par.joint_R, par.joint_p, RJ, pJ)
    return R, p, PaddedSubspaces(S, tuple(k.nv for k in t.kinds))


def joint_velocity_products(module, q, v):
    """c_J = S̊ v of every joint (Featherstone eq. 4.38), (n, 6)."""
    return _per_kind(module, velocity_product, q, v)


def link_coordinates(topology, x):
    """Per-link padded coordinates (n, w) of a velocity-like vector x (nv,); zeros in padding columns."""
    return jnp.concatenate([x, jnp.zeros(1, x.dtype)])[joint_groups(topology).v_padded]


@functools.lru_cache(maxsize=64)
def _dof_positions(widths, width):
    return np.array([i * width + c for i, w in enumerate(widths) for c in range(w)], dtype=int)


def dofs_of_links(widths, per_link):
    """Inverse of :func:`link_coordinates`: per-link padded columns (n, w, ...) back to (nv, ...), for joints
    of ``widths`` = (nv₀, nv₁, ...) coordinates."""
    n, w = per_link.shape[:2]
    return per_link.reshape((n * w,) + per_link.shape[2:])[_dof_positions(widths, w)]


def module_coordinates(topology, per_link):
    """:func:`dofs_of_links` for a topology's joints."""
    return dofs_of_links(tuple(k.nv for k in topology.kinds), per_link)


def padding_identity(topology, dtype):
    """(n, w, w) with ones on the diagonal of every padding column: added to Dᵢ = SᵢᵀIᴬᵢSᵢ in ABA."""
    pad = ~joint_groups(topology).column_valid
    return jnp.asarray(pad[:, :, None] & np.eye(pad.shape[1], dtype=bool), dtype=dtype)
