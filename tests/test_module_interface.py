"""The module interface (mrds_jax.dynamics.interface): a module given only by its energies (EnergyModule: H(q),
V(q) and point placements, everything else by autodiff) plugs into the system layer unchanged and gives the
same closed-chain dynamics as the same mechanism built as rigid trees — on the general MRDS path, with
identical energy modules stacked and vmapped, on Lilly & Orin's path with an energy module as chain and as
reference member, and along an RK4 trajectory; its parameter gradients match central differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.contacts.library import planar_revolute
from mrds_jax.dynamics import interface
from mrds_jax.dynamics.energy_module import EnergyModule
from mrds_jax.model import ModuleBuilder
from mrds_jax.pytree import replace
from mrds_jax.spatial import rot_z

G = 9.81
ARM = dict(m1=1.3, m2=0.8, l1=0.9, l2=0.7)
BASE_B = np.array([1.1, 0.2, 0.0])


def rod_inertia(m, l):
    return m * l ** 2 / 12.0


def rigid_arm(m1, m2, l1, l2, base=(0.0, 0.0, 0.0)):
    b = ModuleBuilder(planar=True)
    b.add_link("upper", joint="revolute", position=base, mass=m1, com=(l1 / 2, 0, 0),
               inertia=np.diag([1e-4, rod_inertia(m1, l1), rod_inertia(m1, l1)]))
    b.add_link("lower", parent="upper", joint="revolute", position=(l1, 0, 0), mass=m2, com=(l2 / 2, 0, 0),
               inertia=np.diag([1e-4, rod_inertia(m2, l2), rod_inertia(m2, l2)]))
    b.add_frame("tip", link="lower", position=(l2, 0, 0))
    return b.build()


def _arm_mass_matrix(p, q):
    """Planar two-rod arm, by hand (textbook double pendulum with distributed mass)."""
    c2 = jnp.cos(q[1])
    I1, I2 = rod_inertia(p["m1"], p["l1"]), rod_inertia(p["m2"], p["l2"])
    a2 = p["l2"] / 2
    h22 = I2 + p["m2"] * a2 ** 2
    h12 = h22 + p["m2"] * p["l1"] * a2 * c2
    h11 = I1 + p["m1"] * (p["l1"] / 2) ** 2 + h22 + p["m2"] * (p["l1"] ** 2 + 2 * p["l1"] * a2 * c2)
    return jnp.array([[h11, h12], [h12, h22]])


def _arm_potential(p, q):
    y1 = p["base"][1] + p["l1"] / 2 * jnp.sin(q[0])
    y2 = p["base"][1] + p["l1"] * jnp.sin(q[0]) + p["l2"] / 2 * jnp.sin(q[0] + q[1])
    return G * (p["m1"] * y1 + p["m2"] * y2)


def _arm_points(p, q):
    a = q[0] + q[1]
    tip = p["base"] + jnp.array([p["l1"] * jnp.cos(q[0]) + p["l2"] * jnp.cos(a),
                                 p["l1"] * jnp.sin(q[0]) + p["l2"] * jnp.sin(a), 0.0])
    return rot_z(a)[None], tip[None]


def energy_arm(m1, m2, l1, l2, base=(0.0, 0.0, 0.0)):
    params = dict(m1=jnp.asarray(m1), m2=jnp.asarray(m2), l1=jnp.asarray(l1), l2=jnp.asarray(l2),
                  base=jnp.asarray(base, dtype=float))
    return EnergyModule(params, _arm_mass_matrix, _arm_potential, _arm_points, ("tip",), nv=2, planar=True)


def five_bar(make):
    """Two identical two-rod arms from ground pivots 0 and BASE_B, tips joined by a planar revolute."""
    return S.build_system({"A": make(**ARM), "B": make(**ARM, base=tuple(BASE_B))},
                          [planar_revolute("tips", ("A", "tip"), ("B", "tip"))])


def four_bar(make_arm):
    """A two-rod arm (``make_arm``) and a rigid one-rod crank from BASE_B, tips joined."""
    b = ModuleBuilder(planar=True)
    b.add_link("crank", joint="revolute", position=tuple(BASE_B), mass=0.6, com=(0.45, 0, 0),
               inertia=np.diag([1e-4, rod_inertia(0.6, 0.9), rod_inertia(0.6, 0.9)]))
    b.add_frame("tip", link="crank", position=(0.9, 0, 0))
    return S.build_system({"arm": make_arm(**ARM), "crank": b.build()},
                          [planar_revolute("tips", ("arm", "tip"), ("crank", "tip"))])


def random_state(system, rng):
    q = tuple(jnp.asarray(rng.uniform(-1.0, 1.0, m.nq)) for m in system.modules)
    v = tuple(jnp.asarray(rng.normal(size=m.nv)) for m in system.modules)
    return S.SystemState(q, v)


def test_rigid_and_energy_modules_answer_the_interface_alike(rng):
    """Every interface function of the hand-written energy arm equals the rigid tree's (itself checked
    against Pinocchio elsewhere)."""
    rig, en = rigid_arm(**ARM), energy_arm(**ARM)
    assert interface.implements_interface(rig) and interface.implements_interface(en)
    assert not interface.implements_interface(object())
    q, v, tau = (jnp.asarray(rng.normal(size=2)) for _ in range(3))
    pts = ("tip",)
    for a, b in zip(interface.module_terms(rig, q, v, tau, pts), interface.module_terms(en, q, v, tau, pts)):
        np.testing.assert_allclose(a, b, atol=1e-10)
    np.testing.assert_allclose(interface.open_chain_acceleration(rig, q, v, tau),
                               interface.open_chain_acceleration(en, q, v, tau), atol=1e-10)
    np.testing.assert_allclose(interface.open_chain_inverse_dynamics(rig, q, v, tau), interface.open_chain_inverse_dynamics(en, q, v, tau),
                               atol=1e-10)
    np.testing.assert_allclose(interface.mass_matrix(rig, q), interface.mass_matrix(en, q), atol=1e-12)
    for a, b in zip(interface.point_motion(rig, q, v, pts), interface.point_motion(en, q, v, pts)):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(interface.point_jacobians(rig, q, pts), interface.point_jacobians(en, q, pts),
                               atol=1e-12)
    for a, b in zip(interface.reference_terms(rig, q, v, pts), interface.reference_terms(en, q, v, pts)):
        np.testing.assert_allclose(a, b, atol=1e-10)
    np.testing.assert_allclose(interface.kinetic_energy(rig, q, v), interface.kinetic_energy(en, q, v), atol=1e-12)
    # potentials differ by a constant only (datum): compare differences
    q2 = q + 0.3
    np.testing.assert_allclose(interface.potential_energy(rig, q2) - interface.potential_energy(rig, q),
                               interface.potential_energy(en, q2) - interface.potential_energy(en, q), atol=1e-12)


def test_unregistered_module_is_named():
    with pytest.raises(TypeError, match="dict does not implement the module interface"):
        interface.module_terms({}, None, None, None, ())
    with pytest.raises(S.SystemDescriptionError, match="module 'x' is not a module"):
        S.build_system({"x": object()}, [])


def test_energy_modules_stacked_in_a_five_bar_equal_rigid_trees(rng):
    sys_r, sys_e = five_bar(rigid_arm), five_bar(energy_arm)
    assert sys_e.connectivity.groups == ((0, 1),)            # identical energy modules are stacked
    fd = jax.jit(S.forward_dynamics)
    for _ in range(3):
        state = random_state(sys_r, rng)
        a, b = fd(sys_r, state), fd(sys_e, state)
        for x, y in zip(a.qdd + a.F_c, b.qdd + b.F_c):
            np.testing.assert_allclose(x, y, atol=1e-9)


def test_energy_module_on_lilly_path_as_chain_and_as_reference(rng):
    """Lilly & Orin's path with the energy arm as a chain (four-bar, reference: the rigid crank) and as the
    reference member (five-bar, chain: a rigid arm), against the general path of the all-rigid mechanisms;
    a 1-DOF chain on a 2-constraint contact is refused (eq. 36 singular)."""
    sys_r, sys_e = four_bar(rigid_arm), four_bar(energy_arm)
    state = random_state(sys_r, rng)
    ref = S.forward_dynamics(sys_r, state)
    for system in (sys_e, sys_r):
        out = S.lilly_forward_dynamics(system, state, reference="crank")
        for x, y in zip(out.qdd + out.F_c, ref.qdd + ref.F_c):
            np.testing.assert_allclose(x, y, atol=1e-9)
    with pytest.raises(S.SystemDescriptionError, match="chain 'crank' has 1 joint velocities"):
        S.lilly_forward_dynamics(sys_e, state, reference="arm")
    mixed = S.build_system({"A": energy_arm(**ARM), "B": rigid_arm(**ARM, base=tuple(BASE_B))},
                           [planar_revolute("tips", ("A", "tip"), ("B", "tip"))])
    state = random_state(mixed, rng)
    ref = S.forward_dynamics(five_bar(rigid_arm), state)
    for reference in ("A", "B"):
        out = S.lilly_forward_dynamics(mixed, state, reference=reference)
        for x, y in zip(out.qdd + out.F_c, ref.qdd + ref.F_c):
            np.testing.assert_allclose(x, y, atol=1e-9)


def test_energy_module_trajectory_equals_rigid_and_conserves_energy():
    sys_r, sys_e = four_bar(rigid_arm), four_bar(energy_arm)
    state0 = S.SystemState((jnp.asarray([0.9, -1.2]), jnp.asarray([0.0])), (jnp.zeros(2), jnp.zeros(1)))
    # place the crank's tip on the arm's tip: pick its angle and length from the arm's tip
    tip = np.asarray(_arm_points(energy_arm(**ARM).params, state0.q[0])[1][0])
    d = tip - BASE_B
    b = ModuleBuilder(planar=True)
    length = float(np.hypot(d[0], d[1]))
    b.add_link("crank", joint="revolute", position=tuple(BASE_B), mass=0.6, com=(length / 2, 0, 0),
               inertia=np.diag([1e-4, rod_inertia(0.6, length), rod_inertia(0.6, length)]))
    b.add_frame("tip", link="crank", position=(length, 0, 0))
    crank = b.build()
    contact = [planar_revolute("tips", ("arm", "tip"), ("crank", "tip"))]
    sys_r = S.build_system({"arm": rigid_arm(**ARM), "crank": crank}, contact)
    sys_e = S.build_system({"arm": energy_arm(**ARM), "crank": crank}, contact)
    state0 = S.SystemState((state0.q[0], jnp.asarray([np.arctan2(d[1], d[0])])), state0.v)
    tr_r = S.simulate(sys_r, state0, 1e-3, 300, output=S.Output(decimation=30))
    tr_e = S.simulate(sys_e, state0, 1e-3, 300, output=S.Output(decimation=30))
    for a, b in zip(tr_r.q + tr_r.v, tr_e.q + tr_e.v):
        np.testing.assert_allclose(a, b, atol=1e-10)
    E = [float(interface.kinetic_energy(m, tr_e.q[k][-1], tr_e.v[k][-1]) + interface.potential_energy(m, tr_e.q[k][-1])
               - interface.kinetic_energy(m, tr_e.q[k][0], tr_e.v[k][0]) - interface.potential_energy(m, tr_e.q[k][0]))
         for k, m in enumerate(sys_e.modules)]
    assert abs(sum(E)) < 1e-8 * 10.0          # passive mechanism: energy conserved (RK4, dt = 1 ms, 0.3 s)
    assert abs(float(tr_e.q[0][-1][0] - tr_e.q[0][0][0])) > 1e-2    # and it moved


def test_energy_module_parameter_gradient_matches_central_differences(rng):
    sys_e = four_bar(energy_arm)
    state = random_state(sys_e, rng)

    def f(m2):
        arm = replace(sys_e.modules[0], params=dict(sys_e.modules[0].params, m2=m2))
        out = S.forward_dynamics(replace(sys_e, modules=(arm, sys_e.modules[1])), state)
        return jnp.sum(out.qdd[0] ** 2) + jnp.sum(out.F_c[0])

    m2 = jnp.asarray(ARM["m2"])
    g = jax.grad(f)(m2)
    h = 1e-6
    np.testing.assert_allclose(g, (f(m2 + h) - f(m2 - h)) / (2 * h), rtol=1e-6)


def test_system_layer_asks_modules_only_through_the_interface():
    """Architecture: mrds_jax/system/*.py and mrds_jax/integrate/*.py import nothing from mrds_jax.dynamics
    but the module interface (so a new module type needs no change there)."""
    import ast
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1] / "mrds_jax"
    offenders = []
    for folder in ("system", "integrate"):
        for path in sorted((root / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 2 \
                        and node.module.split(".")[0] == "dynamics" and node.module != "dynamics.interface":
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} from ..{node.module}")
    assert not offenders, offenders
