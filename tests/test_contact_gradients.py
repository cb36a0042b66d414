"""Gradients of rollouts with contact (implicit differentiation at each step's solution, mrds_jax.system.ncp) against
central differences (float64, 1e-6 relative) and analytic values, reverse mode against forward mode, under vmap, and
finite at mode switches: a box sliding down an incline (travel in μ and θ), a three-legged stool standing on the floor
(its foot forces in the body's mass: three feet carry a rigid body statically determinately, so each foot's force is
unique), a dropped sphere (resting height in its radius, through the touch-down)."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.system.ncp import NCPSettings
from mrds_jax.system.timestepping import ContactSettings, contact_rollout, row_layout

DT = 1e-3
G0 = 9.81
TIGHT = ContactSettings(ncp=NCPSettings(stages=8, iterations=50, tolerance=1e-12))   # converged to rounding: central differences
N_SLIDE = 200


def free_body(mass, inertia):
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=mass, inertia=inertia)
    b.add_frame("c", "body")
    return b.build()


def slide_travel(params):
    """Travel down the incline after N_SLIDE steps of a 1 kg cube starting at rest; params = (θ, μ), traced."""
    theta, mu = params[0], params[1]
    c, s = jnp.cos(theta), jnp.sin(theta)
    R = jnp.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    system = S.build_system({"m": free_body(1.0, np.eye(3) * 0.08 / 12)}, [],
                            collision=[C.plane("floor", rotation=R, friction=mu),
                                       C.box("cube", "m", "c", (0.1, 0.1, 0.1), friction=mu)])
    q0 = jnp.concatenate([0.1 * R[:, 2], jnp.stack([jnp.cos(theta / 2), jnp.sin(theta / 2), 0.0 * c, 0.0 * c])])
    tr = contact_rollout(system, (q0,), (jnp.zeros(6),), DT, N_SLIDE, N_SLIDE, settings=TIGHT)
    return jnp.dot(tr.q[0][-1, :3] - q0[:3], -jnp.array([0.0, c, s]))


@pytest.fixture(scope="module")
def slide():
    return jax.jit(slide_travel), jax.jit(jax.grad(slide_travel)), jax.jit(jax.jacfwd(slide_travel))


def central(f, x, h=1e-6):
    x = jnp.asarray(x)
    return np.array([(f(x.at[i].add(h)) - f(x.at[i].add(-h))) / (2 * h) for i in range(x.shape[0])])


def test_sliding_box_travel_gradient_in_friction_and_slope(slide):
    f, rev, fwd = slide
    p = jnp.array([0.3, 0.2])
    g_rev, g_fwd, g_fd = np.asarray(rev(p)), np.asarray(fwd(p)), central(f, p)
    # travel = g (sin θ − μ cos θ) dt² n(n+1)/2 for semi-implicit Euler from rest
    k = G0 * DT ** 2 * N_SLIDE * (N_SLIDE + 1) / 2
    analytic = np.array([k * (np.cos(0.3) + 0.2 * np.sin(0.3)), -k * np.cos(0.3)])
    np.testing.assert_allclose(g_fd, analytic, rtol=1e-6)
    np.testing.assert_allclose(g_rev, g_fd, rtol=1e-6)
    np.testing.assert_allclose(g_rev, g_fwd, rtol=1e-10)
    np.testing.assert_allclose(g_rev, analytic, rtol=1e-8)


def test_gradient_is_finite_at_the_stick_slip_switch_and_batches(slide):
    """At μ = tan θ the cube is on the boundary between sticking and sliding: the derivative is one of the two
    one-sided ones (docs/guide/contact.md), finite; vmap of the reverse-mode gradient over a batch of (θ, μ)
    equals the one-by-one gradients."""
    _, rev, _ = slide
    g = np.asarray(rev(jnp.array([0.3, np.tan(0.3)])))
    assert np.all(np.isfinite(g))
    batch = jnp.array([[0.3, 0.2], [0.25, 0.1], [0.3, 0.5]])
    together = np.asarray(jax.jit(jax.vmap(jax.grad(slide_travel)))(batch))
    one_by_one = np.stack([np.asarray(rev(x)) for x in batch])
    np.testing.assert_allclose(together, one_by_one, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(together[2], 0.0, atol=1e-12)          # sticking: no travel, no sensitivity


FEET = ((0.2, 0.0), (-0.1, 0.15), (-0.1, -0.15))


def stool_foot_impulses(mass):
    """Normal impulses of the three feet in the last of 20 steps of a stool of ``mass`` (centre of mass 5 cm off the
    feet's centroid) standing on the floor."""
    body = free_body(1.0, np.diag([0.05, 0.06, 0.08])).with_params(mass=jnp.reshape(mass, (1,)),
                                                                     com=jnp.array([[0.05, 0.02, 0.0]]))
    feet = [C.sphere(f"foot{i}", "m", "c", 0.02, position=(x, y, -0.1)) for i, (x, y) in enumerate(FEET)]
    system = S.build_system({"m": body}, [], collision=[C.plane("floor", friction=0.9)] + feet)
    q0 = jnp.array([0.0, 0.0, 0.12, 1.0, 0.0, 0.0, 0.0])
    tr = contact_rollout(system, (q0,), (jnp.zeros(6),), DT, 20, 20, settings=TIGHT)
    start = row_layout(system).contact_start
    return tr.impulses[-1, start:].reshape(-1, 3)[:, 0]


def test_stool_foot_forces_gradient_in_body_mass():
    f = jax.jit(stool_foot_impulses)
    lam = np.asarray(f(3.0))
    np.testing.assert_allclose(lam.sum(), 3.0 * G0 * DT, rtol=1e-10)
    jac = np.asarray(jax.jit(jax.jacfwd(stool_foot_impulses))(3.0))
    rev = np.asarray(jax.jit(jax.jacrev(stool_foot_impulses))(3.0))
    fd = (np.asarray(f(3.0 + 1e-6)) - np.asarray(f(3.0 - 1e-6))) / 2e-6
    np.testing.assert_allclose(jac, fd, rtol=1e-6)
    np.testing.assert_allclose(rev, jac, rtol=1e-10)
    # statics: the feet carry the weight in proportion fixed by the geometry, so λ/m is constant
    np.testing.assert_allclose(jac, lam / 3.0, rtol=1e-8)


def test_dropped_sphere_rest_height_gradient_in_radius_through_touch_down():
    def rest_height(r):
        system = S.build_system({"m": free_body(1.0, np.eye(3) * 0.004)}, [],
                                collision=[C.plane("floor"), C.sphere("ball", "m", "c", r)])
        q0 = jnp.array([0.0, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0])
        tr = contact_rollout(system, (q0,), (jnp.zeros(6),), DT, 300, 300, settings=TIGHT)
        return tr.q[0][-1, 2]
    g = float(jax.jit(jax.grad(rest_height))(0.1))
    assert np.isfinite(g)
    np.testing.assert_allclose(g, 1.0, rtol=1e-9)      # resting on the floor: height = radius
