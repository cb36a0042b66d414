"""Closed-chain forward dynamics (Bonaventura MRDS Steps 2-4) against Pinocchio, float64.

q̈ and constraint forces at >= 10 consistent random states equal Pinocchio's ``constraintDynamics``
(closed loops as ``RigidConstraintModel``) or its generic-Jacobian KKT ``forwardDynamics``:
  * a planar four-bar as ONE module closed by a Type B revolute contact (planar, n_c = 2), and the same
    mechanism as a spatial module with a spatial revolute (n_c = 5, redundant: Bᶜ singular, min-norm forces);
  * a planar two-link arm whose tip slides along a line fixed in the ground (n_c = 1);
  * two 6-DOF arms rigidly grasping one free box (two Type A weld contacts);
  * library contacts (revolute, prismatic, screw with φ ≠ ψ, spherical, universal with variable modes) joining
    an arm and a free body, against Pinocchio's ABA of the equivalent rigid tree.
Also: Bᶜ symmetric positive definite on non-redundant systems; bad input raises naming the contact.
Each system is jitted once (lru_cache) and evaluated on all states with one vmap.
"""
import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.model import ModuleBuilder
from robots import random_inertia, random_rotation, random_states, random_tree
from mrds_jax.export import to_pinocchio
from system_models import LWA, from_se3, null_space_velocity

N_STATES = 10
TOL = 1e-8
PROX = lambda: pin.ProximalSettings(1e-12, 1e-2, 200)  # noqa: E731  (redundant rows: min-norm λ)


def _batched(fn):
    return jax.jit(jax.vmap(fn))


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


# ----------------------------------------------------------------------------- planar four-bar (Type B)
G_X, L1, L2, L3 = 1.0, 0.4, 1.1, 0.7


def fourbar_module(planar, rng):
    """Two branches from the ground: k1-k2 hinged at the origin, k4 hinged at G; tips c1 (on k2) and c2 (on
    k4) meet at the loop-closing revolute."""
    b = ModuleBuilder(planar=planar, gravity=(0.0, -9.81, 0.0))
    for name, parent, pos, length in (("k1", None, (0, 0, 0), L1), ("k2", "k1", (L1, 0, 0), L2),
                                      ("k4", None, (G_X, 0, 0), L3)):
        b.add_link(name, parent=parent, joint="revolute", axis=(0, 0, 1), position=pos, mass=rng.uniform(0.5, 2),
                   com=(length * rng.uniform(0.3, 0.7), rng.uniform(-0.05, 0.05), 0.0), inertia=random_inertia(rng))
    b.add_frame("c1", "k2", position=(L2, 0, 0))
    b.add_frame("c2", "k4", position=(L3, 0, 0), rotation=random_rotation_z(rng))
    return b.build()


def random_rotation_z(rng):
    a = rng.uniform(-np.pi, np.pi)
    return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1.0]])


def fourbar_q(th1, elbow=1.0):
    B = L1 * np.array([np.cos(th1), np.sin(th1)])
    G = np.array([G_X, 0.0])
    dBG = np.linalg.norm(G - B)
    a = (L2 ** 2 - L3 ** 2 + dBG ** 2) / (2 * dBG)
    h = np.sqrt(L2 ** 2 - a ** 2)
    u = (G - B) / dBG
    Cp = B + a * u + elbow * h * np.array([-u[1], u[0]])
    phi2 = np.arctan2(*(Cp - B)[::-1])
    return np.array([th1, phi2 - th1, np.arctan2(*(Cp - G)[::-1])])


@functools.lru_cache(maxsize=None)
def fourbar_case(planar):
    rng = np.random.default_rng(11)
    module = fourbar_module(planar, rng)
    contact = (C.planar_revolute("loop", ("bar", "c1"), ("bar", "c2")) if planar
               else C.revolute("loop", ("bar", "c1"), ("bar", "c2"), axis=(0, 0, 1)))
    system = S.build_system({"bar": module}, [contact])
    merged = to_pinocchio([module])
    cm = merged.constraint("3d", (0, "c2"), (0, "c1"))       # joint1 = P side: λ = force on P
    states = []
    for _ in range(N_STATES):
        q = fourbar_q(rng.uniform(0.3, 2.5))
        _, _, J = merged.constraint_dynamics(q, np.zeros(3), np.zeros(3), [cm], PROX())
        v = null_space_velocity(J[:2], rng, 3)
        states.append((q, v, rng.uniform(-2, 2, 3)))
    q, v, tau = map(np.array, zip(*states))
    fd = _batched(lambda q, v, tau: S.forward_dynamics(system, S.SystemState((q,), (v,)), (tau,)))
    return system, merged, cm, (q, v, tau), jax.tree.map(np.asarray, fd(q, v, tau))


@pytest.mark.parametrize("planar", [True, False], ids=["planar_nc2", "spatial_nc5_redundant"])
def test_fourbar_type_b(planar):
    system, merged, cm, (q, v, tau), out = fourbar_case(planar)
    assert system.connectivity.GC == (("BB",),) and system.connectivity.MC == (("EP",),)
    for k in range(N_STATES):
        ddq, lam, J = merged.constraint_dynamics(q[k], v[k], tau[k], [cm], PROX())
        assert np.abs(J @ v[k]).max() < 1e-12                               # consistent state
        np.testing.assert_allclose(out.qdd[0][k], ddq, atol=TOL, rtol=0)
        # F_EP: force by E (c1) on P (c2), frame c1, at P; Pinocchio's λ: force on joint1 (= P), world axes
        R_E = pin_frame_rotation(merged, q[k], 0, "c1")
        F = out.F_EP[0][k]
        f_world = R_E[:2, :2] @ F[1:] if planar else R_E @ F[3:]
        np.testing.assert_allclose(f_world[:2], lam[:2], atol=TOL, rtol=0)
        if not planar:   # redundant directions (f_z, n_x, n_y) carry no force (minimum-norm solution)
            assert np.abs(F[[0, 1, 5]]).max() < TOL
        assert np.abs(out.constraint_velocity[0][k]).max() < 1e-12
    if planar:
        assert_spd(out.Bc)
    else:  # redundant: Bᶜ is singular (rank 2 of 5) yet the solve is finite and exact
        assert all(np.linalg.matrix_rank(B, tol=1e-10) == 2 for B in out.Bc)
        assert np.isfinite(out.F_c[0]).all() and np.asarray(out.residual).max() < 1e-9


def pin_frame_rotation(merged, q, k, name):
    jid, P = merged.frame(k, name)
    d = merged.model.createData()
    pin.forwardKinematics(merged.model, d, q)
    return (d.oMi[jid] * P).rotation


def assert_spd(Bc):
    Bc = np.asarray(Bc)
    assert np.abs(Bc - np.swapaxes(Bc, -1, -2)).max() < 1e-12 * max(1.0, np.abs(Bc).max())
    assert np.linalg.eigvalsh(Bc).min() > 0


# ----------------------------------------------------------------------------- planar arm, tip on a line
Y0, A1, A2 = 0.6, 1.0, 0.5


def slider_excitation(t):
    w = 2 * jnp.pi / 5
    return 0.1 * jnp.sin(w * t), 0.1 * w * jnp.cos(w * t)


def slider_force(t):
    return jnp.array([0.3, -0.7]) * jnp.cos(t)


@functools.lru_cache(maxsize=None)
def slider_case():
    rng = np.random.default_rng(5)
    b = ModuleBuilder(planar=True)
    b.add_link("l1", joint="revolute", mass=0.448, com=(0.5, 0, 0), inertia=random_inertia(rng))
    b.add_link("l2", parent="l1", joint="revolute", position=(A1, 0, 0), mass=0.224, com=(0.25, 0, 0),
               inertia=random_inertia(rng))
    b.add_frame("tip", "l2", position=(A2, 0, 0))
    arm = b.build()
    # the line moves with System 3's base excitation (Bonaventura eq. 135, kinematically excited mode, here
    # across the line) and pushes the tip with a known free-direction force Fᵘ = [n_z, f_x] (Class I)
    line = C.point_on_line("slide", None, ("arm", "tip"), direction=(1, 0, 0), planar=True,
                           ground_position=(0.0, Y0, 0.0), excitation=slider_excitation, applied=slider_force)
    system = S.build_system({"arm": arm}, [line])
    model = to_pinocchio([arm]).model
    fid = model.addFrame(pin.Frame("tip", 2, pin.SE3(np.eye(3), np.array([A2, 0, 0])), pin.FrameType.OP_FRAME))
    states = []
    for _ in range(N_STATES):
        th1 = rng.uniform(0.2, 1.2)
        q = np.array([th1, np.arcsin((Y0 - A1 * np.sin(th1)) / A2) - th1])
        d = model.createData()
        pin.computeJointJacobians(model, d, q)
        pin.updateFramePlacements(model, d)
        Jy = pin.getFrameJacobian(model, d, fid, LWA)[1:2]
        states.append((q, null_space_velocity(Jy, rng, 2), rng.uniform(-2, 2, 2)))
    q, v, tau = map(np.array, zip(*states))
    fd = _batched(lambda q, v, tau: S.forward_dynamics(system, S.SystemState((q,), (v,)), (tau,)))
    return model, fid, (q, v, tau), jax.tree.map(np.asarray, fd(q, v, tau))


def test_planar_arm_tip_slides_along_line():
    model, fid, (q, v, tau), out = slider_case()
    for k in range(N_STATES):
        d = model.createData()
        pin.forwardKinematics(model, d, q[k], v[k], np.zeros(2))
        pin.computeJointJacobians(model, d, q[k])
        pin.updateFramePlacements(model, d)
        assert abs(d.oMf[fid].translation[1] - Y0) < 1e-12
        J = pin.getFrameJacobian(model, d, fid, LWA)[1:2]
        J6 = pin.getFrameJacobian(model, d, fid, LWA)
        gamma = pin.getFrameClassicalAcceleration(model, d, fid, LWA).linear[1:2]
        _, xdd_c = slider_excitation(0.0)
        F_u = np.asarray(slider_force(0.0))
        tau_eff = tau[k] + J6[[5, 0]].T @ F_u          # Fᵘ acts on the tip: about z and along x
        ddq = pin.forwardDynamics(model, d, q[k], v[k], tau_eff, J, gamma - float(xdd_c), 0.0).copy()
        np.testing.assert_allclose(out.qdd[0][k], ddq, atol=TOL, rtol=0)
        # λ = generalized-force multiplier of Jᵀ = y-force of the ground (E) on the tip (P): F_EP = [n, f_x, f_y]
        np.testing.assert_allclose(out.F_EP[0][k], [*F_u, d.lambda_c[0]], atol=TOL)
        np.testing.assert_allclose(out.F_c[0][k], d.lambda_c, atol=TOL)
        assert abs((J @ ddq + gamma)[0] - xdd_c) < 1e-10


# ----------------------------------------------------------------------------- two arms grasping a box
ARM_SPEC = [(-1, "revolute")] + [(i, "revolute") for i in range(5)]


def box_module(rng):
    b = ModuleBuilder()
    b.add_link("box", joint="free", mass=2.5, com=rng.uniform(-0.05, 0.05, 3), inertia=random_inertia(rng))
    b.add_frame("g1", "box", position=(0.2, 0.0, 0.0), rotation=random_rotation(rng))
    b.add_frame("g2", "box", position=(-0.2, 0.05, 0.0), rotation=random_rotation(rng))
    return b.build()


@functools.lru_cache(maxsize=None)
def grasp_case():
    systems, states, pin_cases = grasp_systems(N_STATES)
    sysb = _stack(systems)
    qb, vb, tb = (_stack([s[i] for s in states]) for i in range(3))
    fd = _batched(lambda sy, q, v, tau: S.forward_dynamics(sy, S.SystemState(q, v), tau))
    return pin_cases, jax.tree.map(np.asarray, fd(sysb, qb, vb, tb))


def grasp_systems(n, armature=None):
    """n dual-arm grasps at consistent states: (systems, our (q, v, τ), Pinocchio cases); ``armature``: a
    function of a random generator giving each arm's armature (6,), or None."""
    rng = np.random.default_rng(3)
    arm1, arm2, box = random_tree(rng, ARM_SPEC), random_tree(rng, ARM_SPEC), box_module(rng)
    if armature is not None:
        arm1, arm2 = (a.with_params(armature=jnp.asarray(armature(rng))) for a in (arm1, arm2))
    contacts = [C.weld("grasp1", ("arm1", "op5"), ("box", "g1")), C.weld("grasp2", ("arm2", "op5"), ("box", "g2"))]
    systems, states, pin_cases = [], [], []
    for _ in range(n):
        q1, q2 = rng.uniform(-1.5, 1.5, 6), rng.uniform(-1.5, 1.5, 6)
        m0 = to_pinocchio([arm1, arm2, box])
        d = m0.model.createData()
        pin.forwardKinematics(m0.model, d, np.concatenate([q1, q2, [0, 0, 0, 0, 0, 0, 1.0]]))
        j1, P1 = m0.frame(0, "op5")
        jg1, G1 = m0.frame(2, "g1")
        jg2, G2 = m0.frame(2, "g2")
        box_pose = d.oMi[j1] * P1 * G1.inverse()
        j2 = m0.joint_ids[1][5]
        E2 = d.oMi[j2].inverse() * box_pose * G2          # arm2's grasp frame: consistent by construction
        p2 = arm2.params
        arm2_k = arm2.with_params(frame_R=p2.frame_R.at[5].set(E2.rotation), frame_p=p2.frame_p.at[5].set(E2.translation))
        system = S.build_system({"arm1": arm1, "arm2": arm2_k, "box": box}, contacts)
        merged = to_pinocchio(system)   # two CONTACT_6D: joint1 = the box's grasp frame (P), joint2 = the arm's (E)
        cms = merged.constraints
        qs = [q1, q2, from_se3(box_pose)]
        qp = merged.q(qs)
        _, _, J = merged.constraint_dynamics(qp, np.zeros(18), np.zeros(18))
        vp = null_space_velocity(J, rng, 18)
        vs = merged.split_v(vp)
        taus = [rng.uniform(-5, 5, 6), rng.uniform(-5, 5, 6), rng.uniform(-1, 1, 6)]
        systems.append(system)
        states.append((tuple(jnp.asarray(x) for x in qs), tuple(jnp.asarray(x) for x in vs),
                       tuple(jnp.asarray(x) for x in taus)))
        pin_cases.append((merged, cms, qp, vp, merged.v(taus)))
    return systems, states, pin_cases


def test_dual_arm_rigid_grasp():
    pin_cases, out = grasp_case()
    for k, (merged, cms, qp, vp, taup) in enumerate(pin_cases):
        ddq, lam, J = merged.constraint_dynamics(qp, vp, taup, cms)
        assert np.abs(J @ vp).max() < 1e-12
        ours = merged.v([out.qdd[m][k] for m in range(3)])
        np.testing.assert_allclose(ours, ddq, atol=TOL, rtol=0)
        d = merged.model.createData()
        pin.forwardKinematics(merged.model, d, qp)
        for i, arm in enumerate((0, 1)):
            jid, P = merged.frame(arm, "op5")
            R_E = (d.oMi[jid] * P).rotation
            F = out.F_EP[i][k]                       # by the arm (E) on the box (P), frame E, at P
            np.testing.assert_allclose(np.concatenate([R_E @ F[3:], R_E @ F[:3]]), lam[6 * i:6 * i + 6],
                                       atol=TOL, rtol=0)
    assert_spd(out.Bc)
    assert np.asarray(out.residual).max() < 1e-12


# ----------------------------------------------------------------------------- library contacts vs rigid trees
EQUIV = {  # contact factory (name, E, P, axis, pitch, axis2), equivalent tree joint kind
    "revolute": (lambda n, E, P, a, h, a2: C.revolute(n, E, P, axis=a), "revolute"),
    "prismatic": (lambda n, E, P, a, h, a2: C.prismatic(n, E, P, axis=a), "prismatic"),
    "screw": (lambda n, E, P, a, h, a2: C.screw(n, E, P, axis=a, pitch=h), "screw"),
    "spherical": (lambda n, E, P, a, h, a2: C.spherical(n, E, P), "spherical"),
    # variable modes: φᵘ, φᶜ, ψ depend on ᴱR_P, and φ̇ enters yᶜ (eq. 85/90); random, non-orthogonal axes
    "universal": (lambda n, E, P, a, h, a2: C.universal(n, E, P, axis=a, axis2=a2), "universal"),
}


@functools.lru_cache(maxsize=None)
def equivalence_case():
    """A 2-link arm carrying four free bodies, each joined to the arm's second link by one library contact
    (several Type A contacts on one module; the four bodies are stacked), == the branching rigid tree with
    those joints."""
    rng = np.random.default_rng(21)
    kinds = list(EQUIV)
    tree = random_tree(rng, [(-1, "revolute"), (0, "revolute")] + [(1, EQUIV[k][1]) for k in kinds])
    tree = tree.with_params(pitch=tree.params.pitch.at[4].set(0.15))
    p = tree.params
    arm_b = ModuleBuilder()
    for i in range(2):
        arm_b.add_link(f"link{i}", parent=None if i == 0 else "link0", joint="revolute", axis=np.asarray(p.axis[i]),
                       position=np.asarray(p.joint_p[i]), rotation=np.asarray(p.joint_R[i]), mass=float(p.mass[i]),
                       com=np.asarray(p.com[i]), inertia=np.asarray(p.inertia[i]))
    bodies, contacts = {}, []
    for j, kind in enumerate(kinds, start=2):
        arm_b.add_frame(f"E_{kind}", "link1", position=np.asarray(p.joint_p[j]), rotation=np.asarray(p.joint_R[j]))
        body_b = ModuleBuilder()
        body_b.add_link("body", joint="free", mass=float(p.mass[j]), com=np.asarray(p.com[j]),
                        inertia=np.asarray(p.inertia[j]))
        body_b.add_frame("P", "body")
        bodies[kind] = body_b.build()
        contacts.append(EQUIV[kind][0](kind, ("arm", f"E_{kind}"), (kind, "P"), np.asarray(p.axis[j]),
                                       float(p.pitch[j]), np.asarray(p.axis2[j])))
    system = S.build_system({"arm": arm_b.build(), **bodies}, contacts)
    ptree = to_pinocchio([tree])
    q_t, v_t, tau_t, qs, vs, taus = [], [], [], [], [], []
    for _ in range(N_STATES):
        q, v, _, tau = random_states(tree, rng, 1)
        q, v, tau = q[0], v[0], tau[0]
        tau[2:] = 0.0   # the contacts carry no applied free-direction force (Fᵘ = 0)
        d = ptree.model.createData()
        qp, vp = ptree.q([q]), ptree.v([v])
        pin.forwardKinematics(ptree.model, d, qp, vp)
        q_t.append(qp), v_t.append(vp), tau_t.append(ptree.v([tau]))
        q_s, v_s = [q[:2]], [v[:2]]
        for j in range(2, 2 + len(kinds)):
            body_v = d.v[ptree.joint_ids[0][j]].vector          # body twist, local frame, [v; ω]
            q_s.append(from_se3(d.oMi[ptree.joint_ids[0][j]]))
            v_s.append(np.concatenate([body_v[3:], body_v[:3]]))
        qs.append(q_s), vs.append(v_s), taus.append([tau[:2]] + [np.zeros(6)] * len(kinds))
    fd = _batched(lambda q, v, tau: S.forward_dynamics(system, S.SystemState(q, v), tau))
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    inputs = (stack(qs), stack(vs), stack(taus))     # our per-module coordinates (reused by test_lilly)
    out = jax.tree.map(np.asarray, fd(*inputs))
    return system, ptree, (np.array(q_t), np.array(v_t), np.array(tau_t)), out, inputs


def test_library_contacts_equal_rigid_tree():
    """revolute, prismatic, screw (φ ≠ ψ, eq. 29-31), spherical and universal (variable modes, φ̇ ≠ 0)
    contacts == the same joints in a tree."""
    system, ptree, (q, v, tau), out, _ = equivalence_case()
    assert system.connectivity.groups[1] == tuple(range(1, 1 + len(EQUIV)))   # the free bodies are stacked
    assert system.connectivity.MC[0] == ("E",) * len(EQUIV)
    for k in range(N_STATES):
        d = ptree.model.createData()
        ddq = pin.aba(ptree.model, d, q[k], v[k], tau[k]).copy()
        pin.forwardKinematics(ptree.model, d, q[k], v[k], ddq)
        np.testing.assert_allclose(out.qdd[0][k], ddq[:2], atol=TOL, rtol=0)
        for b, jid in enumerate(ptree.joint_ids[0][2:], start=1):
            a_body = d.a[jid].vector                   # body spatial acceleration, local, [lin; ang]
            np.testing.assert_allclose(out.qdd[b][k], np.concatenate([a_body[3:], a_body[:3]]), atol=TOL, rtol=0,
                                       err_msg=system.contact_names[b - 1])


# ----------------------------------------------------------------------------- bad input
def test_bad_bases_raise_naming_the_contact():
    phi_u, phi_c = np.eye(6)[:, :1], np.eye(6)[:, 1:]
    with pytest.raises(C.ContactError, match="'hinge'.*not dual"):
        C.make_contact("hinge", ("a", "f"), None, phi_u, phi_c, psi_u=phi_u * 2.0, psi_c=phi_c)
    with pytest.raises(C.ContactError, match="'flat'.*not a basis"):
        C.make_contact("flat", ("a", "f"), None, phi_u, np.eye(6)[:, [0, 2, 3, 4, 5]])
    with pytest.raises(C.ContactError, match="'x'.*both sides"):
        C.weld("x", None, None)
    good = C.make_contact("ok", ("a", "f"), None, phi_u, phi_c)
    np.testing.assert_allclose(np.asarray(good.psi_u).T @ np.asarray(good.phi_u), [[1.0]])
    # a screw contact has φ ≠ ψ but is dual
    sc = C.screw("s", ("a", "f"), None, axis=(0, 0, 1), pitch=0.3)
    assert not np.allclose(sc.phi_u, sc.psi_u)
    # bad bases slipped into a built contact are caught when the system is built
    b = ModuleBuilder()
    b.add_link("l", joint="revolute")
    b.add_frame("f", "l")
    m = b.build()
    bad = C.Contact(**{**good.__dict__, "psi_c": good.psi_c * 1.5})
    with pytest.raises(S.SystemDescriptionError, match="'ok'.*not dual"):
        S.build_system({"a": m}, [bad])
    with pytest.raises(S.SystemDescriptionError, match="'ok'.*no operational point 'g'"):
        S.build_system({"a": m}, [C.make_contact("ok", ("a", "g"), None, phi_u, phi_c)])
    with pytest.raises(S.SystemDescriptionError, match="'ok'.*no module named 'b'"):
        S.build_system({"a": m}, [C.make_contact("ok", ("b", "f"), None, phi_u, phi_c)])
    with pytest.raises(S.SystemDescriptionError, match="'pl'.*task dimension 3"):
        S.build_system({"a": m}, [C.planar_revolute("pl", ("a", "f"), None)])


# ----------------------------------------------------------------------------- CKCM Stewart platform
@functools.lru_cache(maxsize=None)
def stewart_case():
    from mrds_jax import ckcm
    from system_models import ckcm_leg_q
    rng = np.random.default_rng(8)
    system = ckcm.multibody.build_ckcm_system(ckcm.nominal())   # the package builder: legs leg1..6, payload
    legs, payload = list(system.modules[:6]), system.modules[6]
    merged = to_pinocchio(system)   # six CONTACT_3D: joint1 = payload point A_i (P), joint2 = leg tip (E)
    cms = merged.constraints
    cases, qs, vs, taus = [], [], [], []
    for _ in range(N_STATES):
        small = pin.exp3(rng.uniform(-0.2, 0.2, 3))
        pose = pin.SE3(small, np.array([0, 0, 1.0]) + rng.uniform(-0.1, 0.1, 3))
        A_world = [pose.act(np.asarray(payload.params.frame_p[i])) for i in range(6)]
        q = [ckcm_leg_q(legs[i], A_world[i]) for i in range(6)] + [from_se3(pose)]
        qp = merged.q(q)
        _, _, J = merged.constraint_dynamics(qp, np.zeros(24), np.zeros(24), cms)
        vp = null_space_velocity(J, rng, 24)
        tau = [np.concatenate([rng.uniform(-20, 20, 2), rng.uniform(-300, 300, 1)]) for _ in range(6)] + [np.zeros(6)]
        cases.append((merged, cms, qp, vp, merged.v(tau)))
        qs.append(tuple(q)), vs.append(tuple(merged.split_v(vp))), taus.append(tuple(tau))
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    fd = _batched(lambda q, v, tau: S.forward_dynamics(system, S.SystemState(q, v), tau))
    return system, cases, jax.tree.map(np.asarray, fd(stack(qs), stack(vs), stack(taus)))


def test_stewart_platform_ckcm():
    system, cases, out = stewart_case()
    assert system.connectivity.groups[0] == tuple(range(6))     # the six legs are stacked and vmapped
    for k, (merged, cms, qp, vp, taup) in enumerate(cases):
        ddq, lam, J = merged.constraint_dynamics(qp, vp, taup, cms)
        assert np.abs(J @ vp).max() < 1e-12
        np.testing.assert_allclose(merged.v([out.qdd[m][k] for m in range(7)]), ddq, atol=TOL, rtol=0)
        d = merged.model.createData()
        pin.forwardKinematics(merged.model, d, qp)
        for i in range(6):
            jid, P = merged.frame(i, "tip")
            R_E = (d.oMi[jid] * P).rotation
            np.testing.assert_allclose(R_E @ out.F_EP[i][k][3:], lam[3 * i:3 * i + 3], atol=TOL, rtol=0)
    assert_spd(out.Bc)


# ----------------------------------------------------------------------------- gradients through the solve
@pytest.mark.parametrize("planar", [False], ids=["spatial_nc5_redundant"])
def test_gradient_through_singular_solve_matches_finite_differences(planar):
    """d(q̈, Fᶜ)/d(masses, centres of mass, joint placements) through the proximal solve of a singular Bᶜ
    (redundant revolute closing a planar loop) equals central finite differences."""
    system, merged, cm, (q, v, tau), _ = fourbar_case(planar)
    state = S.SystemState((jnp.asarray(q[0]),), (jnp.asarray(v[0]),))
    w_q, w_f = np.random.default_rng(1).normal(size=(2, 5))

    def objective(mass, com, joint_p):
        m = system.modules[0].with_params(mass=mass, com=com, joint_p=joint_p)
        out = S.forward_dynamics(S.System((m,), system.contacts, system.connectivity), state, (jnp.asarray(tau[0]),))
        return jnp.dot(w_q[:3], out.qdd[0]) + jnp.dot(w_f, out.F_c[0])

    p = system.modules[0].params
    args = (p.mass, p.com, p.joint_p)
    vg = jax.jit(jax.value_and_grad(objective, argnums=(0, 1, 2)))
    val, grads = vg(*args)
    f = lambda *a: vg(*a)[0]  # noqa: E731  (one compilation serves the differences too)
    h = 1e-6
    for a, (arg, g) in enumerate(zip(args, grads)):
        flat = np.asarray(arg).ravel()
        for j in range(flat.size):
            e = np.zeros_like(flat)
            e[j] = h
            plus = [*args]
            minus = [*args]
            plus[a] = jnp.asarray((flat + e).reshape(np.shape(arg)))
            minus[a] = jnp.asarray((flat - e).reshape(np.shape(arg)))
            fd = (f(*plus) - f(*minus)) / (2 * h)
            assert np.isfinite(np.asarray(g).ravel()[j])
            np.testing.assert_allclose(np.asarray(g).ravel()[j], fd, rtol=1e-6, atol=1e-6 * max(1.0, abs(float(val))))


# ----------------------------------------------------------------------------- closed-chain inverse dynamics
def test_stewart_inverse_dynamics_recovers_actuator_and_constraint_forces():
    """Forward dynamics with actuator forces on the six prismatic joints, then inverse dynamics of the
    resulting motion: the same actuator forces and contact forces come back (CKCM: 24 equations,
    6 actuators + 18 spherical-contact components)."""
    system, cases, _ = stewart_case()
    actuated = {f"leg{i + 1}": [2] for i in range(6)}
    state = stewart_state(system, cases[3])
    rng = np.random.default_rng(4)
    tau_a = rng.uniform(-300, 300, 6)
    tau = tuple(jnp.zeros(3).at[2].set(tau_a[i]) for i in range(6)) + (jnp.zeros(6),)
    # one state: run eagerly, compiling these two programs would cost more than running them op by op
    fwd = S.forward_dynamics(system, state, tau)
    inv = S.inverse_dynamics(system, state, fwd.qdd, actuated)
    assert float(inv.residual) < 1e-12
    np.testing.assert_allclose(inv.tau_actuated, tau_a, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(np.concatenate(inv.F_c), np.concatenate(fwd.F_c), rtol=1e-9, atol=1e-8)


def stewart_state(system, case):
    """Our per-module (q, v) from one of ``stewart_case``'s Pinocchio states."""
    merged, _, qp, vp, _ = case
    return S.SystemState(tuple(jnp.asarray(q) for q in merged.split_q(qp)),
                         tuple(jnp.asarray(v) for v in merged.split_v(vp)))


# ----------------------------------------------------------------------------- the same platform from MJCF
STEWART_MJCF = Path(__file__).resolve().parents[2] / "shared" / "bench" / "ckcm_stewart_mjx.xml"


@pytest.mark.skipif(not STEWART_MJCF.exists(), reason="the shared benchmark MJCF is not beside the repository")
def test_stewart_mjcf_import_has_the_native_ckcm_dynamics():
    """shared/bench's Stewart MJCF (six U-P legs, a free payload, six ``connect`` equalities) imported by
    ``load_mjcf``: at ``stewart_case``'s 10 consistent states, Pinocchio's ``constraintDynamics`` on
    ``to_pinocchio`` of the imported system gives the native CKCM build's q̈ and world-axes constraint forces
    to 1e-8 (the native build's own equality with Pinocchio is test_stewart_platform_ckcm). Our engine on the
    imported system itself: ``python experiments/mjcf_stewart_check.py`` (compiling that seven-module program
    costs ~80 s at the suite's optimisation level, more than this file's budget)."""
    from mrds_jax.loaders.mjcf import load_mjcf
    system, cases, native = stewart_case()
    with pytest.warns(UserWarning, match="actuators"):
        imported = load_mjcf(STEWART_MJCF)
    names = [f"leg{i + 1}_lower" for i in range(6)] + ["payload"]
    order = [imported.module_names.index(n) for n in names]          # imported index of native module k
    E_module = [names.index(c.E[0]) for c in imported.contacts]       # native leg of each imported contact
    assert sorted(E_module) == list(range(6)) and all(c.kind == "spherical" for c in imported.contacts)
    twin = to_pinocchio(imported)
    for k, (merged, _, qp, vp, taup) in enumerate(cases):
        per_module = [merged.split_q(qp), merged.split_v(vp), merged.split_v(taup)]
        q, v, tau = ([x[names.index(imported.module_names[j])] for j in range(7)] for x in per_module)
        ddq, lam, _ = twin.constraint_dynamics(twin.q(q), twin.v(v), twin.v(tau))
        qdd = twin.split_v(ddq)
        for m in range(7):
            np.testing.assert_allclose(qdd[order[m]], native.qdd[m][k], atol=TOL, rtol=0)
        d = merged.model.createData()
        pin.forwardKinematics(merged.model, d, qp)
        for i, leg in enumerate(E_module):
            jid, P = merged.frame(leg, "tip")
            expected = (d.oMi[jid] * P).rotation @ native.F_EP[leg][k][3:]
            np.testing.assert_allclose(lam[3 * i:3 * i + 3], expected, atol=TOL * max(1.0, np.abs(expected).max()),
                                       rtol=0)
