"""Lilly & Orin's simple closed chain (mrds_jax.system.lilly) against the general MRDS path and Pinocchio.

* Type 0: the CKCM Stewart platform (six U-P legs, spherical tips n_c = 3, stacked) and two 6-DOF arms
  rigidly grasping a box (n_c = 6): Lilly's 6x6 solve (eq. 45/46) == MRDS's n_C x n_C solve (1e-10). The
  states and MRDS answers are those of test_system_vs_pinocchio (shared cache: no second compilation of
  the general path).
* Type 1: a four-legged body standing on point contacts (legged_models.py): the general MRDS path (one
  module, four ground point contacts) and the Lilly path (trunk = reference member, legs re-rooted at the
  feet, actuated hip-roll tips with Fᵘ) both equal Pinocchio's constraintDynamics (1e-8) at 10 random
  consistent states.
* A reference member with 2 DOF (an arm) and five free bodies as chains on the P side of library contacts
  (screw φ ≠ ψ, universal with variable modes): == the general path.
* A system that is not a simple closed chain is refused with a message naming the contact or module.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.pytree import replace
from mrds_jax.system.lilly import chain_structure, lilly_forward_dynamics
from legged_models import (ROLL_TORQUE, leg_parameters, natural_module, natural_system, random_standing_state,
                           type1_system)
from mrds_jax.export import to_pinocchio
from system_models import null_space_velocity
from test_system_vs_pinocchio import N_STATES, TOL, equivalence_case, grasp_case, stewart_case

TOL_PATHS = 1e-10   # Lilly fast path vs general MRDS path


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@functools.lru_cache(maxsize=None)
def lilly_batched():
    """One compiled ``jit(vmap(lilly_forward_dynamics))`` per system structure (the system is an argument)."""
    return jax.jit(jax.vmap(lambda sy, q, v, tau: lilly_forward_dynamics(sy, S.SystemState(q, v), tau)))


def assert_paths_equal(lil, out, n_modules, n_contacts):
    for m in range(n_modules):
        np.testing.assert_allclose(lil.qdd[m], out.qdd[m], atol=TOL_PATHS, rtol=0, err_msg=f"module {m}")
    for i in range(n_contacts):
        scale = max(1.0, np.abs(out.F_EP[i]).max())
        np.testing.assert_allclose(lil.F_EP[i], out.F_EP[i], atol=TOL_PATHS * scale, rtol=0, err_msg=f"contact {i}")
        np.testing.assert_allclose(lil.F_c[i], out.F_c[i], atol=TOL_PATHS * scale, rtol=0, err_msg=f"contact {i}")
        assert np.abs(lil.constraint_velocity[i]).max() < 1e-12


def test_lilly_equals_mrds_stewart_platform():
    """Type 0, spherical tips (n_c = 3 < 6, 3-DOF legs whose 6x6 Λ⁻¹ is singular): exact."""
    system, cases, out = stewart_case()
    st = chain_structure(system, "payload")
    assert st.reference == 6 and st.groups == (tuple(range(6)),)          # the six legs stacked in one vmap
    qs, vs, taus = [], [], []
    for merged, _, qp, vp, taup in cases:
        qs.append(merged.split_q(qp)), vs.append(merged.split_v(vp)), taus.append(merged.split_v(taup))
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    systems = _stack([system] * N_STATES)
    lil = jax.tree.map(np.asarray, lilly_batched()(systems, stack(qs), stack(vs), stack(taus)))
    assert_paths_equal(lil, out, 7, 6)
    K = lil.K                                                               # eq. 46: symmetric positive definite
    assert np.abs(K - np.swapaxes(K, 1, 2)).max() < 1e-9 * np.abs(K).max() and np.linalg.eigvalsh(K).min() > 0


def test_lilly_equals_mrds_dual_arm_grasp():
    """Type 0, rigid grasps (n_c = 6, eq. 39's special case through the general formulas)."""
    pin_cases, out = grasp_case()
    contacts = [C.weld("grasp1", ("arm1", "op5"), ("box", "g1")), C.weld("grasp2", ("arm2", "op5"), ("box", "g2"))]
    systems, qs, vs, taus = [], [], [], []
    for merged, _, qp, vp, taup in pin_cases:
        systems.append(S.build_system(dict(zip(("arm1", "arm2", "box"), merged.modules)), contacts))
        qs.append(merged.split_q(qp)), vs.append(merged.split_v(vp)), taus.append(merged.split_v(taup))
    assert chain_structure(systems[0], "box").groups == ((0, 1),)          # identical arms stacked
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    lil = jax.tree.map(np.asarray, lilly_batched()(_stack(systems), stack(qs), stack(vs), stack(taus)))
    assert_paths_equal(lil, out, 3, 2)


def test_lilly_general_reference_and_library_tips():
    """The library-contact system of test_system_vs_pinocchio as a simple closed chain around the 2-DOF arm
    (a reference member that is not a rigid body: eq. 45 is N₀ x N₀ = 2 x 2) with five free bodies as
    chains on the P side of revolute, prismatic, screw (φ ≠ ψ), spherical and universal (variable modes,
    φ̇ ≠ 0) contacts, stacked by n_c and mode function: == the general path (which == Pinocchio's ABA of the tree)."""
    system, _, _, out, inputs = equivalence_case()
    st = chain_structure(system, "arm")
    assert st.reference == 0 and not any(is_E for _, _, is_E, _ in st.chains)
    assert st.groups == ((0, 1, 2), (3,), (4,))      # revolute, prismatic, screw (n_c = 5) stacked in one vmap
    lil = jax.tree.map(np.asarray, lilly_batched()(_stack([system] * N_STATES), *inputs))
    assert lil.K.shape == (N_STATES, 2, 2)
    assert_paths_equal(lil, out, 6, 5)


# ----------------------------------------------------------------------------- four legs on point contacts
@functools.lru_cache(maxsize=None)
def quadruped_case():
    rng = np.random.default_rng(13)
    legs = leg_parameters(rng)
    natural = natural_module(rng, legs)
    merged = to_pinocchio([natural])
    model = merged.model
    shank = [merged.joint_ids[0][3 + 3 * i] for i in range(4)]
    nat_sys, typ_sys, nat_x, typ_x, expect = [], [], [], [], []
    for _ in range(N_STATES):
        q = random_standing_state(rng)
        qp = merged.q([q])
        d = model.createData()
        pin.forwardKinematics(model, d, qp)
        feet = []
        for i in range(4):
            jid, P = merged.frame(0, f"foot{i}")
            feet.append((d.oMi[jid] * P).translation.copy())
        cms = [merged.constraint("3d", (0, f"foot{i}"), (None, pin.SE3(np.eye(3), feet[i]))) for i in range(4)]
        _, _, J = merged.constraint_dynamics(qp, np.zeros(18), np.zeros(18), cms)
        vp = null_space_velocity(J, rng, 18)
        v = merged.split_v(vp)[0]
        tau = np.zeros(18)
        for i in range(4):
            tau[6 + 3 * i] = ROLL_TORQUE[i]
            tau[7 + 3 * i:9 + 3 * i] = rng.uniform(-8, 8, 2)
        ddq, lam, J = merged.constraint_dynamics(qp, vp, merged.v([tau]), cms)
        assert np.abs(J @ vp).max() < 1e-12
        qdd = merged.split_v(ddq)[0]
        pin.forwardKinematics(model, d, qp, vp, ddq)
        nat_sys.append(natural_system(natural, feet))
        nat_x.append(((q,), (v,), (tau,)))
        # Type 1 coordinates: trunk as is; leg = [shank orientation (w-first), −knee, −hip pitch]
        t_q, t_v, t_tau, t_qdd = [q[:7]], [v[:6]], [np.zeros(6)], [qdd[:6]]
        for i in range(4):
            quat = pin.Quaternion(d.oMi[shank[i]].rotation)
            a = slice(7 + 3 * i, 10 + 3 * i)
            b = slice(6 + 3 * i, 9 + 3 * i)
            t_q.append(np.concatenate([[quat.w, quat.x, quat.y, quat.z], -q[a][:0:-1]]))
            t_v.append(np.concatenate([d.v[shank[i]].angular, -v[b][:0:-1]]))
            t_tau.append(np.concatenate([np.zeros(3), -tau[b][:0:-1]]))
            t_qdd.append(np.concatenate([d.a[shank[i]].angular, -qdd[b][:0:-1]]))
        typ_sys.append(type1_system(natural, legs, feet))
        typ_x.append((tuple(t_q), tuple(t_v), tuple(t_tau)))
        expect.append((qdd, lam, t_qdd))
    stack = lambda xs: tuple(jnp.asarray(np.array(x)) for x in zip(*xs))  # noqa: E731
    fd = jax.jit(jax.vmap(lambda sy, q, v, tau: S.forward_dynamics(sy, S.SystemState(q, v), tau)))
    nat = fd(_stack(nat_sys), *(stack([x[j] for x in nat_x]) for j in range(3)))
    typ = lilly_batched()(_stack(typ_sys), *(stack([x[j] for x in typ_x]) for j in range(3)))
    return typ_sys[0], jax.tree.map(np.asarray, nat), jax.tree.map(np.asarray, typ), expect


def test_quadruped_on_point_contacts_general_path():
    _, nat, _, expect = quadruped_case()
    for k, (qdd, lam, _) in enumerate(expect):
        np.testing.assert_allclose(nat.qdd[0][k], qdd, atol=TOL, rtol=0)
        for i in range(4):   # force by the ground (E, world axes) on the foot (P): Pinocchio's λ on joint1 = foot
            np.testing.assert_allclose(nat.F_EP[i][k][3:], lam[3 * i:3 * i + 3], atol=TOL, rtol=0)
            assert np.abs(nat.F_EP[i][k][:3]).max() < TOL                  # a point contact transmits no torque
    assert np.asarray(nat.residual).max() < 1e-10


def test_quadruped_type1_lilly_path():
    """Legs re-rooted at the feet (spherical foot joints), hip-roll tips with Fᵘ: Lilly == Pinocchio."""
    system, _, typ, expect = quadruped_case()
    st = chain_structure(system, "trunk")
    assert st.groups == ((0, 1, 2, 3),) and all(is_E for _, _, is_E, _ in st.chains)
    for k, (_, _, t_qdd) in enumerate(expect):
        for m in range(5):
            np.testing.assert_allclose(typ.qdd[m][k], t_qdd[m], atol=TOL, rtol=0, err_msg=f"module {m}")
        for i in range(4):
            np.testing.assert_allclose(typ.F_EP[i][k][0], -ROLL_TORQUE[i], atol=1e-12)   # ψᵘ Fᵘ about x (h_k)
            assert np.abs(typ.constraint_velocity[i][k]).max() < 1e-12


# ----------------------------------------------------------------------------- bad structure
def test_not_a_simple_closed_chain_is_refused():
    from mrds_jax.model import ModuleBuilder
    b = ModuleBuilder()
    b.add_link("body", joint="free")
    b.add_frame("a", "body")
    b.add_frame("b", "body", position=(0.1, 0, 0))
    body = b.build()
    b = ModuleBuilder()
    b.add_link("l", joint="revolute")
    b.add_frame("tip", "l")
    b.add_frame("tip2", "l", position=(0.2, 0, 0))
    arm = b.build()
    two = S.build_system({"body": body, "arm": arm}, [C.weld("w1", ("arm", "tip"), ("body", "a")),
                                                     C.spherical("w2", ("arm", "tip2"), ("body", "b"))])
    with pytest.raises(S.SystemDescriptionError, match="module 'arm' has 2 contacts"):
        chain_structure(two, "body")
    ground = S.build_system({"body": body, "arm": arm}, [C.weld("w1", ("arm", "tip"), ("body", "a")),
                                                        C.spherical("pin", None, ("body", "b"))])
    with pytest.raises(S.SystemDescriptionError, match="'pin' joins the reference member 'body' to the ground"):
        chain_structure(ground, "body")
    with pytest.raises(S.SystemDescriptionError, match="'pin' does not touch the reference member 'arm'"):
        chain_structure(ground, "arm")
    with pytest.raises(S.SystemDescriptionError, match="no module named 'box'"):
        chain_structure(ground, "box")


def test_path_selection_is_static_and_names_the_reason():
    """simulate's path="auto" takes the Lilly path exactly where Lilly & Orin's algorithm applies."""
    from mrds_jax.examples import dual_arm_grasp
    from mrds_jax.model import ModuleBuilder
    grasp, _ = dual_arm_grasp()
    assert S.simple_closed_chain_reference(grasp) == grasp.module_index("box")
    assert S.dynamics_path(grasp) == "lilly"
    assert S.dynamics_path(grasp, stabilisation=S.baumgarte(10.0)) == "lilly"        # Baumgarte: both paths
    assert S.dynamics_path(grasp, stabilisation=S.pd_suppression(1.0, 1.0)) == "general"
    assert S.dynamics_path(grasp, solver=S.SolverSettings(method="lstsq")) == "general"
    assert S.dynamics_path(grasp, "general") == "general"
    with pytest.raises(ValueError, match="unknown dynamics path 'fast'"):
        S.dynamics_path(grasp, "fast")
    # a 2-DOF chain on a spherical tip (nv < n_c): M_k of eq. 36 is singular, so auto stays general
    b = ModuleBuilder()
    b.add_link("body", joint="free")
    b.add_frame("a", "body")
    body = b.build()
    b = ModuleBuilder()
    b.add_link("l", joint="universal", axis=(1, 0, 0), axis2=(0, 1, 0))
    b.add_frame("tip", "l", position=(0, 0, 0.3))
    leg = b.build()
    short = S.build_system({"body": body, "leg": leg}, [C.spherical("ball", ("leg", "tip"), ("body", "a"))])
    assert S.simple_closed_chain_reference(short) is None and S.dynamics_path(short) == "general"
    with pytest.raises(S.SystemDescriptionError, match="not a simple closed chain"):
        S.dynamics_path(short, "lilly")


def test_simulate_auto_path_equals_general_path():
    """Two routes to one trajectory: simulate's default (Lilly & Orin's fast path, chosen automatically for
    the dual-arm grasp) and the general MRDS path, 20 RK4 steps in float64 (the arms fall under gravity)."""
    from mrds_jax.examples import dual_arm_grasp
    system, state = dual_arm_grasp()
    fast = S.simulate(system, state, 1e-3, 20, integration=S.Integration(integrator="rk4_compact"),
                      output=S.Output(decimation=10))
    slow = S.simulate(system, state, 1e-3, 20, integration=S.Integration(integrator="rk4_compact", path="general"),
                      output=S.Output(decimation=10))
    for a, b in zip(fast.q + fast.v, slow.q + slow.v):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=0)
    assert np.abs(np.asarray(fast.v[2][-1] - fast.v[2][0])).max() > 1e-4      # the box moved


def test_lilly_gradients_equal_general_path_and_finite_differences():
    """Differentiating through the fast path: d q̈ / d(link masses of both arms and the box) of the dual-arm
    grasp by ``jax.jacfwd`` through Lilly & Orin's 6x6 solve equals the same derivative through the general
    MRDS solve (1e-8 relative) and central differences (1e-6 relative)."""
    pin_cases, _ = grasp_case()
    merged, _, qp, vp, taup = pin_cases[0]
    contacts = [C.weld("grasp1", ("arm1", "op5"), ("box", "g1")), C.weld("grasp2", ("arm2", "op5"), ("box", "g2"))]
    names = ("arm1", "arm2", "box")
    state = S.SystemState(merged.split_q(qp), merged.split_v(vp))
    tau = merged.split_v(taup)
    masses0 = jnp.concatenate([m.params.mass for m in merged.modules])
    sizes = np.cumsum([0] + [m.params.mass.shape[0] for m in merged.modules])

    def qdd(masses, solver):
        mods = [replace(m, params=replace(m.params, mass=masses[sizes[i]:sizes[i + 1]]))
                for i, m in enumerate(merged.modules)]
        return jnp.concatenate(solver(S.build_system(dict(zip(names, mods)), contacts), state, tau).qdd)

    J_lilly = np.asarray(jax.jit(jax.jacfwd(lambda m: qdd(m, lilly_forward_dynamics)))(masses0))
    J_general = np.asarray(jax.jit(jax.jacfwd(lambda m: qdd(m, S.forward_dynamics)))(masses0))
    scale = np.abs(J_general).max()
    np.testing.assert_allclose(J_lilly, J_general, rtol=0, atol=1e-8 * scale)
    f = jax.jit(lambda m: qdd(m, lilly_forward_dynamics))
    m0 = np.asarray(masses0)
    for k in range(len(m0)):
        h = 1e-6 * m0[k]
        e = np.zeros_like(m0)
        e[k] = h
        fd = (np.asarray(f(jnp.asarray(m0 + e))) - np.asarray(f(jnp.asarray(m0 - e)))) / (2 * h)
        np.testing.assert_allclose(J_lilly[:, k], fd, rtol=0, atol=1e-6 * scale, err_msg=f"mass {k}")


def test_auto_path_falls_back_to_general_at_a_singular_chain():
    """Bonaventura's System 4 (rigid here: 0 modes) starts fully extended: the two-link robot, a chain of the
    simple closed chain, cannot move its tip along its own axis, so Lilly's M_k (eq. 36) is singular and the
    Lilly path returns NaN at step 1. ``path="auto"`` must not hand that to the user: it warns and reruns on
    the general path, whose trajectory it returns (equal to asking for the general path directly)."""
    from mrds_jax.flexible import bonaventura_system
    sc = bonaventura_system("4", n_modes=0)
    assert S.dynamics_path(sc.system) == "lilly"
    run = functools.partial(S.simulate, sc.system, sc.state, 1e-3, 300, forces=sc.forces,
                            output=S.Output(decimation=100))
    with pytest.warns(S.SingularConfigurationWarning, match=r"Lilly & Orin's path .* failed \(the state became "
                                                               r"NaN/inf at step 1 .* reran on the general path"):
        auto = run()
    general = run(integration=S.Integration(path="general"))
    moved = max(float(np.abs(np.asarray(q[-1] - q[0])).max()) for q in general.q)
    assert moved > 1e-6
    for a, g in zip(auto.q + auto.v, general.q + general.v):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(g))
