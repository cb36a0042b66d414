"""Contact in float32 (issue 51): gradients through the contact solve exist (finite) in float32 and equal central
differences in float64, on a table standing on four sphere feet (redundant: its foot forces are indeterminate) that is
pushed sideways, so its feet slide and then stick; the two sources of float32 NaN, each against its analytic value:
the rotation-vector exponential at zero rotation (a free body that does not turn) and the implicit derivative's
least-squares solve of a rank-deficient mode system (redundant feet)."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.spatial.rotation import quat_exp
from mrds_jax.system.ncp import NCPSettings, regularised_least_squares
from mrds_jax.system.timestepping import ContactSettings, contact_rollout

DT = 1e-3
N_STEPS = 10
FEET = ((0.2, 0.1), (0.2, -0.1), (-0.1, 0.15), (-0.1, -0.15))
TIGHT = ContactSettings(ncp=NCPSettings(tolerance=1e-12))


def as_dtype(tree, dtype):
    """Every floating leaf of ``tree`` (a system, a state) cast to ``dtype``."""
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x, tree)


def table():
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=3.0, inertia=np.diag([0.05, 0.06, 0.08]))
    b.add_frame("c", "body")
    feet = [C.sphere(f"foot{i}", "m", "c", 0.02, position=(x, y, -0.1)) for i, (x, y) in enumerate(FEET)]
    return S.build_system({"m": b.build()}, [], collision=[C.plane("floor", friction=0.5)] + feet)


def final_height_and_travel(system, v0, settings):
    """x + 10 z of the table after N_STEPS steps from standing (feet on the floor) with initial velocity v0
    (body frame: angular, then linear)."""
    dtype = v0.dtype
    q0 = jnp.array([0.0, 0.0, 0.12, 1.0, 0.0, 0.0, 0.0], dtype)
    tr = contact_rollout(system, (q0,), (v0,), jnp.asarray(DT, dtype), N_STEPS, N_STEPS, settings=settings)
    q = tr.q[0][-1]
    return q[0] + 10.0 * q[2]


@pytest.fixture(scope="module")
def system64():
    return table()


def test_reverse_mode_through_sliding_and_sticking_feet_is_finite_in_float32(system64):
    system32 = as_dtype(system64, jnp.float32)
    v0 = jnp.array([0.0, 0.0, 0.0, 0.05, 0.02, 0.0], jnp.float32)      # slides ~5 steps, then sticks
    g = np.asarray(jax.jit(jax.grad(lambda v: final_height_and_travel(system32, v, ContactSettings())))(v0))
    assert g.dtype == np.float32 and np.all(np.isfinite(g)), g
    # the same derivative as float64's to float32's resolution of the solve
    g64 = np.asarray(jax.jit(jax.grad(lambda v: final_height_and_travel(system64, v, TIGHT)))(v0.astype(float)))
    np.testing.assert_allclose(g, g64, rtol=1e-4, atol=1e-4 * np.abs(g64).max())


def test_reverse_mode_through_contact_equals_central_differences_in_float64(system64):
    f = jax.jit(lambda v: final_height_and_travel(system64, v, TIGHT))
    v0 = jnp.array([0.0, 0.0, 0.0, 0.05, 0.02, 0.0])
    g = np.asarray(jax.jit(jax.grad(f))(v0))
    h = 1e-6
    fd = np.array([(f(v0.at[i].add(h)) - f(v0.at[i].add(-h))) / (2 * h) for i in range(6)])
    assert np.all(np.isfinite(g))
    # the central difference's own rounding: f ≈ 1.2, so ε f / h ≈ 3e-10 absolute
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=5e-10)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_rotation_vector_exponential_has_its_derivative_at_zero(dtype):
    """d exp(ω)/dω at ω = 0 is [0; ½ I] (the quaternion exp(ω) = [cos ½|ω|, sin(½|ω|) ω/|ω|]): finite in float32,
    where 1e-300 (the old floor under |ω|²) is 0."""
    J = np.asarray(jax.jacfwd(quat_exp)(jnp.zeros(3, dtype)))
    Jr = np.asarray(jax.jacrev(quat_exp)(jnp.zeros(3, dtype)))
    expected = np.vstack([np.zeros((1, 3)), 0.5 * np.eye(3)])
    np.testing.assert_array_equal(J, expected)
    np.testing.assert_array_equal(Jr, expected)


def test_least_squares_of_a_rank_deficient_system_is_the_minimum_norm_one_in_float32():
    """Two copies of one row (two feet on one line carrying one load): MᵀM is singular, and 1e-12 of it is below
    float32's rounding; the solve is finite and gives the minimum-norm x = M⁺ b (here by numpy's pseudo-inverse of
    the float64 matrix)."""
    M = np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    b = np.array([1.0, 2.0, 3.0])
    x = np.asarray(regularised_least_squares(jnp.asarray(M, jnp.float32), jnp.asarray(b, jnp.float32), 1e-12, 1.0))
    assert np.all(np.isfinite(x))
    np.testing.assert_allclose(x, np.linalg.pinv(M) @ b, rtol=1e-5)
