"""The optimiser's per-start state (:class:`Carry`), what :mod:`.optimizer` advances block by block and
:mod:`.checkpoint` writes to ``state.npz``: its own file so that both import it and neither imports the other.
"""
import jax

from ...pytree import pytree_dataclass


@pytree_dataclass
class Carry:
    """Per-start optimiser state (all leaves; a leading start axis outside ``_block``)."""
    u: jax.Array
    opt_state: object
    lam: jax.Array
    rho: jax.Array
    prev_violation: jax.Array
    best_u: jax.Array
    best_objective: jax.Array
    best_iteration: jax.Array
    least_u: jax.Array
    least_violation: jax.Array
    evaluations: jax.Array
    diverged_at: jax.Array
    iteration: jax.Array


# the leaves of a Carry that the checkpoint saves by name (the optimiser's own state ``opt_state`` is saved leaf by leaf)
CARRY_FIELDS = ("u", "lam", "rho", "prev_violation", "best_u", "best_objective", "best_iteration", "least_u",
                "least_violation", "evaluations", "diverged_at", "iteration")
