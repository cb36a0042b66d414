"""The constraint errors, the joint couplings' residuals and Bᶜ of a system at a state, in one compiled program:
what building a file reads (is the initial state consistent already? :func:`~.build.build`) and what checking it
reports (:func:`~.run.check_built`, ``mrds-jax check``). Both import it from here, so neither imports the other."""
import functools


def errors_and_constraint_matrix(system, state):
    """Constraint errors Φ_p, Φ_v, the joint couplings' g, G v and Bᶜ = J H⁻¹ Jᵀ (bordered by the couplings'
    rows) at a state."""
    from .. import system as S
    return S.constraint_errors(system, state), S.coupling_errors(system, state), S.constraint_matrix(system, state)


@functools.cache
def compiled_check():
    """The jitted :func:`errors_and_constraint_matrix`, one object for the process (its compilations are kept)."""
    import jax
    return jax.jit(errors_and_constraint_matrix)
