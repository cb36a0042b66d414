"""Step 2 of a rigid tree in ground coordinates (``mrds_jax/dynamics/ground.py``, the route ``module_terms`` and
``reference_terms`` take), float64:

* against Pinocchio on a random branching tree with every joint kind Pinocchio has (free base, revolute,
  prismatic, screw, universal, spherical): H, C v + G, the points' world-aligned Jacobians and J̇ v;
* against the link-coordinate recursions (two routes to one quantity) on a tree with all eight joint kinds
  (fixed and planar_free too), on both of their routes (unrolled, level scan): placements, velocities, H, C v + G,
  the points' placements, velocities, Jacobians, J̇ v and accelerations for a given q̈; and ``module_terms``'
  default route (ground coordinates on the level-scan route, link coordinates on the unrolled one) against its
  ``method="recursive"`` one (ABA, the O(N) Ψ), on that tree and on a planar module;
* Lilly & Orin's reference-member terms on both routes;
* invariance: moving the whole robot 10 km away changes neither H nor C v + G (the reason the moments are taken
  about a point on the robot).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax.dynamics import ground
from mrds_jax.dynamics.interface import module_terms, reference_terms
from mrds_jax.export.pinocchio import PinocchioConversion, to_pinocchio
from mrds_jax.model import ModuleBuilder
from robots import random_states, random_tree
from test_tree_scan import ALL_KINDS, PIN_KINDS, random_spec

N_STATES = 3
TOL = 1e-9


def _ground_quantities(module, frames):
    def f(q, v, a):
        g = ground.ground_terms(module, q, v, frames)
        return dict(H=g.H, bias=g.bias, R=g.points.R, p=g.points.p, xd=g.points.xd, J=g.points.J, dJv=g.point_bias,
                    xdd=ground.point_accelerations_at(module, g, a), world_R=g.kinematics.world_R,
                    world_p=g.kinematics.world_p)
    return jax.jit(jax.vmap(f))


def _link_coordinate_quantities(module, frames):
    def f(q, v, a):
        kin = mj.forward_kinematics(module, q, v)
        acc = mj.link_accelerations(module, kin, a)
        pl = [mj.frame_placement(module, kin, fr) for fr in frames]
        return dict(H=mj.mass_matrix(module, q), bias=mj.nonlinear_effects(module, q, v),
                    R=jnp.stack([x[0] for x in pl]), p=jnp.stack([x[1] for x in pl]),
                    xd=jnp.stack([mj.frame_velocity(module, kin, fr) for fr in frames]),
                    J=jnp.stack([mj.frame_jacobian(module, q, fr) for fr in frames]),
                    dJv=jnp.stack([mj.frame_bias_acceleration(module, q, v, fr) for fr in frames]),
                    xdd=jnp.stack([mj.dynamics.kinematics.frame_acceleration(module, kin, acc, fr) for fr in frames]),
                    world_R=jnp.stack(list(kin.world_R)), world_p=jnp.stack(list(kin.world_p)))
    return jax.jit(jax.vmap(f))


@pytest.fixture(scope="module")
def all_kinds_tree():
    rng = np.random.default_rng(21)
    module = random_tree(rng, random_spec(rng, 10, ALL_KINDS))
    q, v, a, _ = random_states(module, np.random.default_rng(8), N_STATES)
    frames = tuple(module.topology.frame_names[i] for i in (9, 4, 0))
    return module, frames, (q, v, a)


@pytest.mark.parametrize("recursion", ["unrolled", "level_scan"])
def test_ground_terms_equal_the_link_coordinate_recursions(all_kinds_tree, recursion):
    module, frames, states = all_kinds_tree
    module = module.with_recursion(recursion)
    ours = jax.tree.map(np.asarray, _ground_quantities(module, frames)(*states))
    ref = jax.tree.map(np.asarray, _link_coordinate_quantities(module, frames)(*states))
    assert ours.keys() == ref.keys()
    for key in ref:
        scale = max(1.0, float(np.abs(ref[key]).max()))
        np.testing.assert_allclose(ours[key], ref[key], atol=1e-11 * scale, rtol=0, err_msg=key)


@pytest.mark.parametrize("recursion", ["unrolled", "level_scan"])
def test_module_terms_default_route_equals_the_recursive_route(all_kinds_tree, recursion):
    """``method="direct"`` runs in ground coordinates on the level-scan route, link by link on the unrolled one."""
    module, frames, (q, v, _) = all_kinds_tree
    module = module.with_recursion(recursion)
    tau = np.random.default_rng(3).normal(size=q.shape[:1] + (module.nv,))

    def both(q, v, tau):
        return module_terms(module, q, v, tau, frames), module_terms(module, q, v, tau, frames, method="recursive")
    direct, recursive = jax.tree.map(np.asarray, jax.jit(jax.vmap(both))(q, v, tau))
    for name in direct._fields:
        a, b = getattr(direct, name), getattr(recursive, name)
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, atol=1e-10 * scale, rtol=0, err_msg=name)


def test_reference_terms_in_ground_coordinates_equal_the_link_coordinate_ones(all_kinds_tree):
    """Lilly & Orin's reference-member terms (H₀, C₀v + G₀, the points' placements, velocities, J̇v, Jacobians):
    ground coordinates (level-scan route) against link coordinates (unrolled route)."""
    module, frames, (q, v, _) = all_kinds_tree
    f = {r: jax.jit(jax.vmap(lambda q, v, r=r: reference_terms(module.with_recursion(r), q, v, frames)))
         for r in ("unrolled", "level_scan")}
    link, grounded = (jax.tree.map(np.asarray, f[r](q, v)) for r in ("unrolled", "level_scan"))
    for name in link._fields:
        a, b = getattr(grounded, name), getattr(link, name)
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, atol=1e-11 * scale, rtol=0, err_msg=name)


def _planar_module():
    b = ModuleBuilder(planar=True)
    b.add_link("upper", joint="revolute", position=(0.1, -0.2, 0.0), mass=1.3, com=(0.45, 0.02, 0),
               inertia=np.diag([0.002, 0.09, 0.089]))
    b.add_link("lower", parent="upper", joint="revolute", position=(0.9, 0, 0), mass=0.8, com=(0.35, 0, 0),
               inertia=np.diag([0.003, 0.033, 0.031]))
    b.add_link("slider", parent="lower", joint="prismatic", axis=(1, 0, 0), position=(0.7, 0, 0), mass=0.3,
               com=(0.05, 0, 0), inertia=np.diag([2e-4, 1e-3, 1e-3]))
    b.add_frame("tip", link="slider", position=(0.1, 0.02, 0))
    b.add_frame("elbow", link="lower", position=(0.0, 0.0, 0))
    return b.build()


@pytest.mark.parametrize("recursion", ["unrolled", "level_scan"])
def test_planar_module_terms_routes_agree(recursion):
    module = _planar_module().with_recursion(recursion)
    q, v, tau = jnp.array([0.3, -1.1, 0.05]), jnp.array([0.7, -0.4, 0.2]), jnp.array([1.0, -0.5, 2.0])
    direct, recursive = jax.jit(lambda q, v, tau: tuple(module_terms(module, q, v, tau, ("tip", "elbow"), method=m)
                                                        for m in ("direct", "recursive")))(q, v, tau)
    assert direct.J.shape == (6, 3)                                   # three task rows [ω_z, v_x, v_y] per point
    for name in direct._fields:
        np.testing.assert_allclose(getattr(direct, name), getattr(recursive, name), atol=1e-12, err_msg=name)


def test_ground_terms_match_pinocchio_on_a_branching_tree():
    rng = np.random.default_rng(13)
    module = random_tree(rng, random_spec(rng, 9, PIN_KINDS))
    pm = to_pinocchio(module).model
    conv = PinocchioConversion.of(module)
    frames = tuple(module.topology.frame_names[i] for i in (8, 3))
    q, v, a, _ = random_states(module, np.random.default_rng(4), N_STATES)
    ours = jax.tree.map(np.asarray, _ground_quantities(module, frames)(q, v, a))
    d = pm.createData()
    for k in range(N_STATES):
        qp, vp, ap = conv.q(q[k]), conv.v(v[k]), conv.v(a[k])
        H = np.array(pin.crba(pm, d, qp))
        H = np.triu(H) + np.triu(H, 1).T
        np.testing.assert_allclose(ours["H"][k], conv.P.T @ H @ conv.P, atol=TOL, rtol=0)
        np.testing.assert_allclose(ours["bias"][k], conv.P.T @ pin.nonLinearEffects(pm, d, qp, vp), atol=TOL, rtol=0)
        pin.forwardKinematics(pm, d, qp, vp, ap)
        pin.computeJointJacobians(pm, d, qp)
        pin.updateFramePlacements(pm, d)
        for i, fr in enumerate(frames):
            fid = pm.getFrameId(fr)
            J = np.array(pin.getFrameJacobian(pm, d, fid, pin.LOCAL_WORLD_ALIGNED))[[3, 4, 5, 0, 1, 2]] @ conv.P
            np.testing.assert_allclose(ours["J"][k, i], J, atol=TOL, rtol=0, err_msg=fr)
            acc = pin.getFrameClassicalAcceleration(pm, d, fid, pin.LOCAL_WORLD_ALIGNED)
            np.testing.assert_allclose(ours["xdd"][k, i], np.concatenate([acc.angular, acc.linear]), atol=TOL,
                                       rtol=0, err_msg=fr)
            np.testing.assert_allclose(ours["p"][k, i], d.oMf[fid].translation, atol=TOL, rtol=0)


def test_h_and_bias_do_not_change_when_the_robot_is_moved_10_km(all_kinds_tree):
    module, frames, (q, v, a) = all_kinds_tree
    assert module.topology.joint_kinds[0] == "free"
    far = q.copy()
    far[:, :3] += np.array([1e4, -7e3, 3e3])
    f = _ground_quantities(module, frames)
    near, moved = (jax.tree.map(np.asarray, f(x, v, a)) for x in (q, far))
    for key in ("H", "bias", "J", "dJv", "xdd"):
        scale = max(1.0, float(np.abs(near[key]).max()))
        np.testing.assert_allclose(moved[key], near[key], atol=1e-9 * scale, rtol=0, err_msg=key)
