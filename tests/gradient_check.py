"""Forward-mode derivatives against central differences (test helper shared by the issue-25 tests)."""
import jax
import jax.numpy as jnp
import numpy as np


def assert_jvp_equals_central_differences(f, x0, h=1e-5, rtol=1e-6):
    """Every column of df/dx at x0 by ``jax.jvp`` == the central difference (f(x0 + h eᵢ) − f(x0 − h eᵢ)) / 2h, to
    ``rtol`` (and that much of the largest entry); one compiled program (vmap over points and tangents). Each column
    must be nonzero: a parameter that does not reach f is a failure, not a pass."""
    n = x0.size
    eye = jnp.eye(n)
    X = jnp.concatenate([jnp.broadcast_to(x0, (n, n)), x0 + h * eye, x0 - h * eye])
    T = jnp.concatenate([eye, jnp.zeros((2 * n, n))])
    values, tangents = jax.jit(jax.vmap(lambda x, t: jax.jvp(f, (x,), (t,))))(X, T)
    jac = np.asarray(tangents[:n]).T
    fd = (np.asarray(values[n:2 * n]) - np.asarray(values[2 * n:])).T / (2 * h)
    for j in range(n):
        assert np.abs(jac[:, j]).max() > 1e-3, f"column {j} does not depend on the parameter"
        np.testing.assert_allclose(jac[:, j], fd[:, j], rtol=rtol, atol=rtol * np.abs(fd).max(), err_msg=f"column {j}")
