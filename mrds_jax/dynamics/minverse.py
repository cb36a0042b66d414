"""H⁻¹(q), two routes: the CRBA matrix solved along its tree sparsity (``crba.mass_matrix_solve``), or O(N) per
column by ABA with unit torques (Featherstone §7.4's unit-input method; what Pinocchio's computeMinverse computes in one sweep)."""
import jax
import jax.numpy as jnp

from ..validation import module_arrays
from .aba import articulated_inertias, articulated_solve
from .crba import mass_matrix, mass_matrix_solve
from .kinematics import forward_kinematics, on_one_link

METHODS = ("direct", "recursive")


def inverse_mass_matrix(module, q, method="direct"):
    q = module_arrays(module, "inverse_mass_matrix", q=q)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    nv = module.nv
    eye = jnp.eye(nv, dtype=q.dtype)
    if method == "direct":
        return mass_matrix_solve(module, mass_matrix(module, q), eye)
    kin = forward_kinematics(module, q)
    art = articulated_inertias(module, kin)
    zero6 = jnp.zeros(6, dtype=q.dtype)
    zeros = on_one_link(module, kin, None, zero6)

    def column(tau):
        return articulated_solve(module, kin, art, tau, zeros, zeros, zero6)[0]

    return jax.vmap(column, out_axes=1)(eye)
