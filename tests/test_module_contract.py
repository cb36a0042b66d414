"""The module contract is an explicit type (``ModuleContract``): a module type written outside the package, by
hand, in under 40 lines (a planar free rigid body) runs in a closed chain — two rigid arms holding it, a simple
closed chain — on the general MRDS path and on Lilly & Orin's path, and equals the same mechanism with the body
built as a rigid tree by ``ModuleBuilder`` (float64, 1e-10); a contract method left out is an error that names
it when the class is instantiated or paired with a module type, and a missing attribute when the system is
built, before anything is traced."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.contacts.library import planar_revolute
from mrds_jax.dynamics.interface import ModuleContract, ModuleTerms, PointMotion, ReferenceTerms, implement
from mrds_jax.model import ModuleBuilder
from mrds_jax.pytree import pytree_dataclass, static
from mrds_jax.spatial import rot_z

G = 9.81
BODY = dict(m=2.0, inertia=0.15, offsets=((-0.5, 0.0), (0.5, 0.0)))


@pytree_dataclass
class Disc(ModuleContract):
    """A planar free rigid body, q = v = [x, y, θ], centre of mass at its origin, points at ``offsets``."""
    m: jnp.ndarray
    inertia: jnp.ndarray
    offsets: jnp.ndarray                                         # (n, 2) in the body frame
    frame_names: tuple = static()
    nq, nv, task_dim = 3, 3, 3
    def frame_index(self, name): return self.frame_names.index(name)
    def mass_matrix(self, q): return jnp.diag(jnp.stack([self.m, self.m, self.inertia]))
    def bias(self): return jnp.stack([0.0 * self.m, self.m * G, 0.0 * self.m])            # C v + G: gravity −y
    def open_chain_inverse_dynamics(self, q, v, qdd): return self.mass_matrix(q) @ qdd + self.bias()
    def open_chain_acceleration(self, q, v, tau): return (tau - self.bias()) / jnp.diag(self.mass_matrix(q))
    def kinetic_energy(self, q, v): return 0.5 * v @ self.mass_matrix(q) @ v
    def potential_energy(self, q): return self.m * G * q[1]
    def configuration_derivative(self, q, v): return v
    def integrate_configuration(self, q, v, dt): return q + dt * v
    def normalize_configuration(self, q): return q
    def jdot_v(self, q, v, points): return jax.jvp(lambda x: self.point_jacobians(x, points) @ v, (q,), (v,))[1]
    def point_motion(self, q, v, points): return PointMotion(*self.pose(q, points), self.point_jacobians(q, points) @ v)
    def pose(self, q, points):                                   # R (n, 3, 3), p (n, 3), world
        c = self.offsets[jnp.asarray([self.frame_index(f) for f in points])] @ rot_z(q[2])[:2, :2].T
        return jnp.broadcast_to(rot_z(q[2]), (len(c), 3, 3)), jnp.concatenate([q[:2] + c, 0 * c[:, :1]], axis=1)
    def point_jacobians(self, q, points):                        # rows [ω; ṗ], ω = θ̇ e_z
        w = jnp.zeros((len(points), 3, 3), q.dtype).at[:, 2, 2].set(1.0)
        return jnp.concatenate([w, jax.jacfwd(lambda x: self.pose(x, points)[1])(q)], axis=1)
    def reference_terms(self, q, v, points):
        J = self.point_jacobians(q, points)
        return ReferenceTerms(self.mass_matrix(q), self.bias(), *self.pose(q, points), J @ v,
                              self.jdot_v(q, v, points), J[:, 2:5])
    def module_terms(self, q, v, tau, points, method="direct"):
        J6, qdd = self.point_jacobians(q, points), self.open_chain_acceleration(q, v, tau)
        J = J6[:, 2:5].reshape(-1, 3)
        Psi = J.T / jnp.diag(self.mass_matrix(q))[:, None]
        return ModuleTerms(qdd, *self.pose(q, points), J6 @ v, J6 @ qdd + self.jdot_v(q, v, points), Psi, J @ Psi)

    def spatial_momentum(self, q, v):                            # about the world origin
        h = self.inertia * v[2] + self.m * (q[0] * v[1] - q[1] * v[0])
        return jnp.stack([0.0 * h, 0.0 * h, h, self.m * v[0], self.m * v[1], 0.0 * h])


def disc(m, inertia, offsets):
    return Disc(jnp.asarray(m), jnp.asarray(inertia), jnp.asarray(offsets), ("left", "right"))


def rigid_disc(m, inertia, offsets):
    """The same body as a rigid tree: one planar_free link."""
    b = ModuleBuilder(planar=True)
    b.add_link("body", None, "planar_free", mass=m, com=(0, 0, 0), inertia=np.diag([0.1, 0.1, inertia]))
    for name, (x, y) in zip(("left", "right"), offsets):
        b.add_frame(name, "body", position=(x, y, 0.0))
    return b.build()


def arm(base):
    """A rigid two-link planar arm from the ground point ``base``, operational point "tip"."""
    b = ModuleBuilder(planar=True)
    b.add_link("upper", None, "revolute", position=(base, 0.0, 0.0), mass=1.0, com=(0.5, 0, 0),
               inertia=np.diag([1e-3, 0.08, 0.08]))
    b.add_link("lower", "upper", "revolute", position=(1.0, 0, 0), mass=0.7, com=(0.5, 0, 0),
               inertia=np.diag([1e-3, 0.06, 0.06]))
    b.add_frame("tip", "lower", position=(1.0, 0, 0))
    return b.build()


def two_arms_holding(body):
    """Two arms from x = 0 and x = 2 holding ``body`` at its points "left" and "right": a simple closed chain
    with the body as Lilly & Orin's reference member."""
    contacts = [planar_revolute("grip_l", ("arm_l", "tip"), ("body", "left")),
                planar_revolute("grip_r", ("arm_r", "tip"), ("body", "right"))]
    return S.build_system({"arm_l": arm(0.0), "arm_r": arm(2.0), "body": body}, contacts)


@pytest.fixture(scope="module")
def systems():
    return two_arms_holding(disc(**BODY)), two_arms_holding(rigid_disc(**BODY))


@pytest.fixture(scope="module")
def state0(systems):
    guess = S.make_state(systems[1], [np.array([2.0, -1.7]), np.array([1.1, 1.7]), np.array([1.0, 1.2, 0.1])],
                         [np.array([0.3, 0.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0, 0.0])])
    state, rp, rv = S.make_consistent(systems[1], guess)
    assert rp < 1e-12 and rv < 1e-12
    return state


def assert_same(a, b, atol=1e-10):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=atol)


def test_the_module_type_is_written_in_under_40_lines():
    assert len(inspect.getsource(Disc).splitlines()) < 40
    assert not Disc.__abstractmethods__


def test_hand_written_module_answers_like_the_rigid_tree(rng):
    mine, tree = disc(**BODY), rigid_disc(**BODY)
    q, v, tau = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))
    from mrds_jax.dynamics import interface as I
    pts = ("left", "right")
    for name in ("module_terms", "reference_terms", "point_motion"):
        assert_same(getattr(I, name)(mine, q, v, *((tau,) if name == "module_terms" else ()), pts),
                    getattr(I, name)(tree, q, v, *((tau,) if name == "module_terms" else ()), pts))
    assert_same(I.open_chain_inverse_dynamics(mine, q, v, tau), I.open_chain_inverse_dynamics(tree, q, v, tau))
    assert_same(I.spatial_momentum(mine, q, v), I.spatial_momentum(tree, q, v))
    assert_same(I.potential_energy(mine, q) + I.kinetic_energy(mine, q, v),
                I.potential_energy(tree, q) + I.kinetic_energy(tree, q, v))


@pytest.mark.parametrize("path", ["general", "lilly"])
def test_closed_chain_with_the_new_module_equals_the_rigid_tree(systems, state0, path):
    mine, tree = systems
    assert S.dynamics_path(mine) == "lilly"                      # a simple closed chain
    a = S.simulate(mine, state0, dt=1e-3, n_steps=200, integration=S.Integration(path=path),
                   output=S.Output(decimation=50))
    b = S.simulate(tree, state0, dt=1e-3, n_steps=200, integration=S.Integration(path=path),
                   output=S.Output(decimation=50))
    assert_same((a.q, a.v), (b.q, b.v))
    assert np.abs(np.asarray(a.q[2][-1]) - np.asarray(a.q[2][0])).max() > 1e-3         # it moved
    fd = S.forward_dynamics if path == "general" else lambda s, x: S.lilly_forward_dynamics(s, x, reference="body")
    x = S.SystemState(tuple(q[-1] for q in a.q), tuple(v[-1] for v in a.v))
    assert_same(fd(mine, x), fd(tree, x), atol=1e-9)


class Incomplete(ModuleContract):
    """A contract with methods left out."""
    def mass_matrix(self, q):
        return q


def test_a_missing_method_is_named_at_construction_and_at_pairing():
    with pytest.raises(TypeError, match="spatial_momentum"):
        Incomplete()
    with pytest.raises(TypeError, match="missing .*module_terms.*spatial_momentum"):
        implement(dict, Incomplete)


def test_a_missing_attribute_is_named_when_the_system_is_built():
    class NoFrameIndex(Disc):
        @property
        def frame_index(self):
            raise AttributeError("frame_index")

    with pytest.raises(S.SystemDescriptionError, match="lacks the module attribute.*frame_index"):
        S.build_system({"x": NoFrameIndex(*disc(**BODY).__dict__.values())}, [])
