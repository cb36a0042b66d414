"""Batching, gradients, planar modules, ordering invariance and input validation of rigid-tree modules."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax.model import ModuleBuilder
from mrds_jax.loaders.urdf import load_urdf
from mrds_jax.spatial import rot_z
from mrds_jax.export import to_pinocchio
from robots import random_states, random_tree, tree_model


@functools.lru_cache(maxsize=None)
def branching():
    return tree_model("branching")


def test_vmap_over_64_states_matches_single_calls_and_pinocchio():
    module = tree_model("free_base")
    q, v, _, tau = random_states(module, np.random.default_rng(3), 64)
    f = jax.jit(lambda q, v, tau: (mj.aba(module, q, v, tau), mj.mass_matrix(module, q)))
    qdd, H = jax.jit(jax.vmap(f))(q, v, tau)
    assert qdd.shape == (64, module.nv) and H.shape == (64, module.nv, module.nv)
    twin = to_pinocchio(module)
    pm, conv = twin.model, twin.conversions[0]
    d = pm.createData()
    for k in range(0, 64, 9):
        np.testing.assert_allclose(qdd[k], f(q[k], v[k], tau[k])[0], atol=1e-12)
        np.testing.assert_allclose(qdd[k], conv.P.T @ pin.aba(pm, d, conv.q(q[k]), conv.v(v[k]), conv.v(tau[k])),
                                   atol=1e-9)


def test_vmap_over_8_parameter_sets():
    """Domain randomisation: one compiled function, vmapped over masses and joint placements."""
    module = branching()
    rng = np.random.default_rng(4)
    scale = jnp.asarray(rng.uniform(0.5, 2.0, (8, module.topology.n_links)))
    shift = jnp.asarray(rng.uniform(-0.05, 0.05, (8, module.topology.n_links, 3)))
    batch = jax.vmap(lambda s, d: module.with_params(mass=module.params.mass * s,
                                                     joint_p=module.params.joint_p + d))(scale, shift)
    q, v, _, tau = (jnp.asarray(x[0]) for x in random_states(module, rng, 1))
    qdd = jax.jit(jax.vmap(lambda m: mj.aba(m, q, v, tau)))(batch)
    for k in range(8):
        mk = jax.tree.map(lambda x: x[k], batch)
        twin = to_pinocchio(mk)
        pm, conv = twin.model, twin.conversions[0]
        expected = conv.P.T @ pin.aba(pm, pm.createData(), conv.q(q), conv.v(v), conv.v(tau))
        np.testing.assert_allclose(qdd[k], expected, atol=1e-9)


def _central_difference(f, x, eps=1e-5):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_aba_gradients_match_central_differences():
    """jax.grad of a scalar of ABA's q̈ w.r.t. link masses, joint positions and joint rotations."""
    module = branching()
    n = module.topology.n_links
    q, v, _, tau = (jnp.asarray(x[0]) for x in random_states(module, np.random.default_rng(5), 1))
    w = jnp.asarray(np.random.default_rng(6).normal(size=module.nv))

    def objective(mass, joint_p, yaw):
        joint_R = jnp.einsum("nij,njk->nik", module.params.joint_R, jax.vmap(rot_z)(yaw))
        m = module.with_params(mass=mass, joint_p=joint_p, joint_R=joint_R)
        return w @ mj.aba(m, q, v, tau)

    args = (module.params.mass, module.params.joint_p, jnp.zeros(n))
    grads = jax.jit(jax.grad(objective, argnums=(0, 1, 2)))(*args)
    f = jax.jit(objective)
    for i, g in enumerate(grads):
        def fi(x, i=i):
            a = list(args)
            a[i] = jnp.asarray(x)
            return float(f(*a))
        fd = _central_difference(fi, args[i])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


def test_tree_order_does_not_matter():
    """Our recursions accept any parent-first order; Pinocchio needs depth-first. The same tree listed
    breadth-first gives the same dynamics, permuted."""
    spec_dfs = [(-1, "revolute"), (0, "prismatic"), (1, "revolute"), (0, "universal"), (3, "screw")]
    order = [0, 1, 3, 2, 4]  # breadth-first listing of the same links
    m1 = random_tree(np.random.default_rng(9), spec_dfs)
    inverse = np.argsort(order)
    spec_bfs = [(-1 if spec_dfs[o][0] < 0 else int(inverse[spec_dfs[o][0]]), spec_dfs[o][1]) for o in order]
    p = m1.params
    b = ModuleBuilder()
    for new, old in enumerate(order):
        parent = spec_bfs[new][0]
        b.add_link(f"link{old}", None if parent < 0 else f"link{order[parent]}", spec_bfs[new][1],
                   axis=np.asarray(p.axis[old]), axis2=np.asarray(p.axis2[old]), pitch=float(p.pitch[old]),
                   position=np.asarray(p.joint_p[old]), rotation=np.asarray(p.joint_R[old]),
                   mass=float(p.mass[old]), com=np.asarray(p.com[old]), inertia=np.asarray(p.inertia[old]))
    b.add_frame("tip", "link4", position=(0.1, 0.2, 0.3))
    m2 = b.build()
    # velocity coordinates of m2 in m1's order
    perm = np.concatenate([np.arange(s.start, s.stop) for s in
                           (m2.topology.v_slices[int(inverse[i])] for i in range(5))])
    q1, v1, _, tau1 = (jnp.asarray(x[0]) for x in random_states(m1, np.random.default_rng(2), 1))
    q2, v2, tau2 = (jnp.zeros(m2.nv).at[perm].set(x) for x in (q1, v1, tau1))
    np.testing.assert_allclose(mj.aba(m2, q2, v2, tau2)[perm], mj.aba(m1, q1, v1, tau1), atol=1e-12)
    np.testing.assert_allclose(mj.mass_matrix_parallel(m2, q2)[np.ix_(perm, perm)], mj.mass_matrix(m1, q1),
                               atol=1e-12)


def _planar_pair():
    """A planar three-link module on a planar free base, and the same bodies as a spatial module with a
    free base."""
    rng = np.random.default_rng(11)
    mods = []
    for planar in (True, False):
        b = ModuleBuilder(planar=planar, gravity=(0.0, -9.81, 0.0))
        b.add_link("base", None, "planar_free" if planar else "free", mass=2.0, com=(0.1, 0.05, 0.0),
                   inertia=(0.1, 0.2, 0.25))
        b.add_link("l1", "base", "revolute", position=(0.3, 0.0, 0.0), mass=1.0, com=(0.2, 0.0, 0.0),
                   inertia=(0.01, 0.05, 0.05))
        b.add_link("l2", "l1", "revolute", position=(0.4, 0.0, 0.0), mass=0.7, com=(0.15, 0.02, 0.0),
                   inertia=(0.01, 0.03, 0.03))
        b.add_frame("tip", "l2", position=(0.35, 0.0, 0.0))
        mods.append(b.build())
    return mods


def test_planar_module_is_the_spatial_one_restricted_to_the_plane():
    """τ_planar = Gᵀ τ_spatial for the spatial motion v3 = G(q) v, a3 = G q̈ + Ġ v (virtual work), where
    G maps the planar base velocity (ẋ, ẏ, θ̇) to the free joint's body twist."""
    planar, spatial = _planar_pair()
    rng = np.random.default_rng(12)
    q = jnp.asarray(rng.uniform(-1, 1, 5))
    v, qdd = jnp.asarray(rng.normal(size=5)), jnp.asarray(rng.normal(size=5))
    kind = planar.topology.kinds[0]

    def G(q):
        S = kind.motion_subspace(q[:3], None, None, None)
        return jax.scipy.linalg.block_diag(S, jnp.eye(2))

    th = q[2]
    q3 = jnp.concatenate([jnp.array([q[0], q[1], 0.0, jnp.cos(th / 2), 0.0, 0.0, jnp.sin(th / 2)]), q[3:]])
    v3 = G(q) @ v
    a3 = G(q) @ qdd + jax.jvp(G, (q,), (v,))[1] @ v
    tau = mj.rnea(planar, q, v, qdd)
    np.testing.assert_allclose(G(q).T @ mj.rnea(spatial, q3, v3, a3), tau, atol=1e-11)
    np.testing.assert_allclose(mj.aba(planar, q, v, tau), qdd, atol=1e-10)
    # planar task space: 3x3 Λ⁻¹ from both routes, and the planar Jacobian is the spatial one's rows
    J = mj.task_jacobian(planar, q, ["tip"])
    assert J.shape == (3, 5)
    np.testing.assert_allclose(J, (mj.frame_jacobian(spatial, q3, "tip") @ G(q))[2:5], atol=1e-12)
    lam = mj.inverse_osim(planar, q, ["tip"])
    assert lam.shape == (3, 3)
    np.testing.assert_allclose(lam, J @ np.linalg.solve(mj.mass_matrix(planar, q), J.T), atol=1e-12)
    np.testing.assert_allclose(mj.inverse_osim(planar, q, ["tip"], method="recursive"), lam, atol=1e-12)


def test_relative_jacobian_is_the_relative_twist():
    """eq. 71: ᴱJ_EP v = twist of P relative to E (at P, in E's axes), checked by finite differences of
    the relative placement."""
    module = branching()
    q, v, _, _ = (jnp.asarray(x[0]) for x in random_states(module, np.random.default_rng(8), 1))
    E, P = "op4", "op6"
    JR = mj.relative_jacobian(module, q, E, P)

    def rel(t):
        kin = mj.forward_kinematics(module, q + t * v)
        RE, pE = mj.frame_placement(module, kin, E)
        RP, pP = mj.frame_placement(module, kin, P)
        return RE.T @ (pP - pE), RE.T @ RP

    (dp, dR) = jax.jvp(rel, (0.0,), (1.0,))[1]
    _, R_EP = rel(0.0)
    omega = np.array([dR @ R_EP.T][0][[2, 0, 1], [1, 2, 0]])  # vee of Ṙ Rᵀ
    np.testing.assert_allclose(JR @ v, np.concatenate([omega, dp]), atol=1e-10)


# --- bad input -----------------------------------------------------------------------------------------

def test_unsupported_urdf_joint_is_named(tmp_path):
    urdf = tmp_path / "bad.urdf"
    urdf.write_text("""<robot name="r"><link name="a"><inertial><mass value="1"/>
      <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>
      </inertial></link>
      <joint name="slider_plane" type="planar"><parent link="a"/><child link="b"/></joint></robot>""")
    with pytest.raises(ValueError, match="slider_plane.*planar"):
        load_urdf(urdf)


def test_missing_frame_and_link_are_named():
    module = branching()
    q = module.neutral_configuration()
    with pytest.raises(KeyError, match="no_such_frame"):
        mj.frame_jacobian(module, q, "no_such_frame")
    b = ModuleBuilder()
    b.add_link("a")
    with pytest.raises(KeyError, match="ghost"):
        b.add_frame("tip", "ghost")
    with pytest.raises(KeyError, match="ghost"):
        b.add_link("c", parent="ghost")


@pytest.mark.parametrize("mass", [0.0, -1.0, float("nan")])
def test_non_positive_mass_is_named(mass):
    """A negative or NaN mass is named when the link is added; mass 0 (a massless link: a frame between two joints)
    when the module is built and the link has no child to carry a mass."""
    with pytest.raises(ValueError, match="forearm.*mass"):
        builder = ModuleBuilder()
        builder.add_link("forearm", mass=mass)
        builder.build()


@pytest.mark.parametrize("inertia", [np.diag([1.0, 1.0, -0.1]), np.array([[1, 2, 0], [0, 1, 0], [0, 0, 1.0]])])
def test_bad_inertia_is_named(inertia):
    with pytest.raises(ValueError, match="wrist.*inertia"):
        ModuleBuilder().add_link("wrist", inertia=inertia)


def test_unknown_joint_kind_is_named():
    with pytest.raises(ValueError, match="helicoidal.*elbow"):
        ModuleBuilder().add_link("elbow", joint="helicoidal")


def test_wrong_state_shape_is_named():
    module = branching()
    with pytest.raises(ValueError, match="aba: q has shape"):
        mj.aba(module, jnp.zeros(3), jnp.zeros(module.nv), jnp.zeros(module.nv))
    with pytest.raises(ValueError, match="v has shape"):
        mj.rnea(module, module.neutral_configuration(), jnp.zeros(2), jnp.zeros(module.nv))


def test_moving_support_equals_prescribed_free_base():
    """A module on a moving support (Bonaventura Ch. 6: kinematic base excitation) is the same as the
    subtree of a free-base module whose base moves with that twist and acceleration (base at the
    identity joint motion: the support frame is the base link frame, in which gravity is R₀ᵀ g).
    Checks RNEA, ABA and ẍᵒᵖᵉⁿ of a point."""
    free = tree_model("free_base")
    t, p = free.topology, free.params
    b = ModuleBuilder(gravity=np.asarray(p.joint_R[0]).T @ np.asarray(p.gravity))
    for i in range(1, t.n_links):
        parent = t.parents[i]
        b.add_link(t.link_names[i], None if parent == 0 else t.link_names[parent], t.joint_kinds[i],
                   axis=np.asarray(p.axis[i]), axis2=np.asarray(p.axis2[i]), pitch=float(p.pitch[i]),
                   position=np.asarray(p.joint_p[i]), rotation=np.asarray(p.joint_R[i]), mass=float(p.mass[i]),
                   com=np.asarray(p.com[i]), inertia=np.asarray(p.inertia[i]))
    f = t.frame_index("op4")
    b.add_frame("op4", t.link_names[4], position=np.asarray(p.frame_p[f]), rotation=np.asarray(p.frame_R[f]))
    fixed = b.build()
    rng = np.random.default_rng(21)
    q_free, v_free, a_free, _ = (jnp.asarray(x[0]) for x in random_states(free, rng, 1))
    q_free = q_free.at[:7].set(jnp.array([0, 0, 0, 1.0, 0, 0, 0]))
    q, v, a = q_free[7:], v_free[6:], a_free[6:]
    vb, ab = v_free[:6], a_free[:6]
    tau = mj.rnea(fixed, q, v, a, support_velocity=vb, support_acceleration=ab)
    np.testing.assert_allclose(tau, mj.rnea(free, q_free, v_free, a_free)[6:], atol=1e-10)
    qdd, xdd = mj.open_chain_accelerations(fixed, q, v, tau, ["op4"], reference="local", support_velocity=vb,
                                           support_acceleration=ab)
    np.testing.assert_allclose(qdd, a, atol=1e-10)
    kin = mj.forward_kinematics(free, q_free, v_free)
    acc = mj.link_accelerations(free, kin, a_free)
    np.testing.assert_allclose(xdd, mj.frame_acceleration(free, kin, acc, "op4", "local"), atol=1e-10)


def test_massless_link_between_two_hinges_is_a_universal_joint():
    """Two routes to one mechanism: a universal joint, and two revolute joints through the same point with a massless
    link between them (how load_mjcf reads several joints on one MuJoCo body). Same H, bias and ABA to 1e-12."""
    def arm(split):
        b = ModuleBuilder(gravity=(0.1, -0.2, -9.81))
        b.add_link("base", None, "revolute", axis=(0, 0, 1), mass=1.2, com=(0.2, 0, 0),
                   inertia=np.diag([1, 2, 2.5]) * 1e-2)
        place = dict(position=(0.4, 0.05, 0), rotation=np.asarray(rot_z(0.3)))
        body = dict(mass=0.8, com=(0.1, 0.02, -0.03), inertia=np.diag([3, 4, 5]) * 1e-3)
        if split:
            b.add_link("wrist:1", "base", "revolute", axis=(1, 0, 0), mass=0.0, **place)
            b.add_link("wrist", "wrist:1", "revolute", axis=(0, 0.6, 0.8), **body)
        else:
            b.add_link("wrist", "base", "universal", axis=(1, 0, 0), axis2=(0, 0.6, 0.8), **place, **body)
        return b.build()
    universal, chain = arm(False), arm(True)
    rng = np.random.default_rng(4)
    for _ in range(3):
        q, v, tau = (jnp.asarray(rng.uniform(-2, 2, 3)) for _ in range(3))
        for f in (mj.mass_matrix, lambda m, q: mj.nonlinear_effects(m, q, v), lambda m, q: mj.aba(m, q, v, tau)):
            np.testing.assert_allclose(f(chain, q), f(universal, q), atol=1e-12, rtol=0)
