"""Level-scan tree recursions (``mrds_jax/dynamics/levels.py``), float64:

* against Pinocchio on a big real robot (TALOS, 44 links, example-robot-data; Pinocchio's joint order differs
  from ours, so coordinates are matched by joint name) and on a random branching tree with every joint kind
  Pinocchio has (revolute, prismatic, screw, universal, spherical, free base): H, RNEA, C v + G, ABA, frame
  Jacobians;
* against the unrolled recursions (two routes to one quantity) on a tree with all eight joint kinds (fixed
  and planar_free too): kinematics, link accelerations, Jacobians, RNEA, CRBA (serial and recursive doubling),
  ABA, H⁻¹, Ψ and Λ⁻¹ (O(N) routes), J̇v, energies and momentum;
* a gradient of ABA with respect to link masses and joint placements on the level-scan route against central
  differences.
Compiled functions are shared through module-scoped fixtures.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import mrds_jax as mj
from mrds_jax.dynamics.kinematics import StackedKinematics, TreeKinematics
from mrds_jax.dynamics.levels import LEVEL_SCAN_MIN_LINKS
from mrds_jax.model.tree import level_schedule
from mrds_jax.loaders.urdf import load_urdf
from conftest import ROBOTS
from mrds_jax.export.pinocchio import PinocchioConversion, to_pinocchio
from robots import random_states, random_tree
from test_tree_properties import _central_difference as central_difference

TOL = 1e-9
N_STATES = 4
TALOS = ROBOTS / "talos_data" / "robots" / "talos_full_v2.urdf"
PIN_KINDS = ("revolute", "prismatic", "screw", "universal", "spherical")
ALL_KINDS = PIN_KINDS + ("fixed", "planar_free")


def _sym(M):
    return np.triu(M) + np.triu(M, 1).T


def random_spec(rng, n, kinds, root="free"):
    """A random branching tree of n links listed depth-first (Pinocchio needs each subtree contiguous)."""
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    children = {i: [j for j in range(n) if parents[j] == i] for i in range(-1, n)}
    order, stack = [], [0]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children[i]))
    new = {old: k for k, old in enumerate(order)}
    kinds = [root] + [kinds[int(rng.integers(len(kinds)))] for _ in range(n - 1)]
    return [(-1 if parents[old] < 0 else new[parents[old]], kinds[old]) for old in order]


def quantities_vs_pinocchio(module, frames):
    """Everything compared with Pinocchio, for one state."""
    def f(q, v, a, tau):
        out = dict(H=mj.mass_matrix(module, q), rnea=mj.rnea(module, q, v, a), nle=mj.nonlinear_effects(module, q, v),
                   aba=mj.aba(module, q, v, tau))
        out["J"] = jnp.stack([mj.frame_jacobian(module, q, fr, "local") for fr in frames])
        return out
    return f


def pinocchio_reference(pm, frames, q, v, a, tau):
    d = pm.createData()
    J = []
    for fr in frames:
        pin.computeJointJacobians(pm, d, q)
        pin.updateFramePlacements(pm, d)
        J.append(np.array(pin.getFrameJacobian(pm, d, pm.getFrameId(fr), pin.LOCAL)))
    return dict(H=_sym(np.array(pin.crba(pm, d, q))), rnea=pin.rnea(pm, d, q, v, a), nle=pin.nonLinearEffects(pm, d, q, v),
                aba=np.array(pin.aba(pm, d, q, v, tau)), J=np.stack(J))


# --------------------------------------------------------------------------------------------- TALOS
@pytest.fixture(scope="module")
def talos():
    module = load_urdf(TALOS)
    assert module.topology.n_links >= LEVEL_SCAN_MIN_LINKS
    pm = pin.buildModelFromUrdf(str(TALOS))
    ours = list(module.topology.joint_names)
    # coordinate k of Pinocchio is coordinate perm[k] of ours (all joints revolute: nq = nv = 1 each)
    perm = np.array([ours.index(pm.names[j]) for j in range(1, pm.njoints)])
    assert pm.nv == module.nv == len(perm) and set(module.topology.joint_kinds) == {"revolute"}
    rng = np.random.default_rng(3)
    lo, hi = np.maximum(pm.lowerPositionLimit, -2), np.minimum(pm.upperPositionLimit, 2)
    q = rng.uniform(lo, hi, (N_STATES, pm.nq))[:, np.argsort(perm)]          # our order
    v, a, tau = (rng.uniform(-2, 2, (N_STATES, pm.nv)) for _ in range(3))
    frames = ("gripper_left_base_link", "leg_right_6_link", "head_2_link")
    return module, pm, perm, frames, (q, v, a, tau)


def test_talos_is_processed_by_levels(talos):
    module, *_ = talos
    sched = level_schedule(module.topology)
    assert sched.n_levels < module.topology.n_links
    assert isinstance(mj.forward_kinematics(module, jnp.zeros(module.nq)), StackedKinematics)
    assert isinstance(mj.forward_kinematics(module.with_recursion("unrolled"), jnp.zeros(module.nq)), TreeKinematics)


def test_talos_level_scan_matches_pinocchio(talos):
    module, pm, perm, frames, states = talos
    res = jax.tree.map(np.asarray, jax.jit(jax.vmap(quantities_vs_pinocchio(module, frames)))(*states))
    for k in range(N_STATES):
        q, v, a, tau = (x[k][perm] for x in states)
        ref = pinocchio_reference(pm, frames, q, v, a, tau)
        np.testing.assert_allclose(res["H"][k][np.ix_(perm, perm)], ref["H"], atol=TOL, rtol=0)
        for key in ("rnea", "nle", "aba"):
            np.testing.assert_allclose(res[key][k][perm], ref[key], atol=TOL * 10, rtol=0, err_msg=key)
        J = res["J"][k][:, :, perm][:, [3, 4, 5, 0, 1, 2]]                        # Pinocchio: [linear; angular]
        np.testing.assert_allclose(J, ref["J"], atol=TOL, rtol=0)


# --------------------------------------------------------------------------- random tree, all kinds
@pytest.fixture(scope="module")
def mixed_tree():
    rng = np.random.default_rng(11)
    module = random_tree(rng, random_spec(rng, 14, PIN_KINDS)).with_recursion("level_scan")
    return module, to_pinocchio(module).model, random_states(module, np.random.default_rng(5), N_STATES)


def test_random_tree_level_scan_matches_pinocchio(mixed_tree):
    module, pm, states = mixed_tree
    frames = (module.topology.frame_names[-1], module.topology.frame_names[5])
    conv = PinocchioConversion.of(module)
    res = jax.tree.map(np.asarray, jax.jit(jax.vmap(quantities_vs_pinocchio(module, frames)))(*states))
    for k in range(N_STATES):
        q, v, a, tau = states[0][k], states[1][k], states[2][k], states[3][k]
        ref = pinocchio_reference(pm, frames, conv.q(q), conv.v(v), conv.v(a), conv.v(tau))
        np.testing.assert_allclose(res["H"][k], conv.P.T @ ref["H"] @ conv.P, atol=TOL, rtol=0)
        for key in ("rnea", "nle", "aba"):
            np.testing.assert_allclose(res[key][k], conv.P.T @ ref[key], atol=TOL, rtol=0, err_msg=key)
        np.testing.assert_allclose(res["J"][k], ref["J"][:, [3, 4, 5, 0, 1, 2]] @ conv.P, atol=TOL, rtol=0)


# ------------------------------------------------------------------------ level scan vs unrolled
def every_route_quantity(module):
    """Every quantity the two recursions both compute, for one state (stacked for comparison)."""
    t = module.topology
    frames = (t.frame_names[-1], t.frame_names[3])

    def stack(xs):
        return jnp.stack(list(xs))

    def f(q, v, a, tau):
        kin = mj.forward_kinematics(module, q, v)
        acc = mj.link_accelerations(module, kin, a)
        art = mj.articulated_inertias(module, kin)
        out = dict(world_R=stack(kin.world_R), world_p=stack(kin.world_p), local_R=stack(kin.local_R),
                   velocity=stack(kin.velocity), velocity_product=stack(kin.velocity_product),
                   S=jnp.concatenate([kin.S[i] for i in range(t.n_links)], axis=1), acc=stack(acc),
                   Ia=stack(art.Ia), S0=mj.dynamics.kinematics.world_motion_subspaces(kin),
                   task_J=mj.task_jacobian(module, q, frames), H=mj.mass_matrix(module, q),
                   H_parallel=mj.mass_matrix_parallel(module, q),
                   rnea=mj.rnea(module, q, v, a), nle=mj.nonlinear_effects(module, q, v), aba=mj.aba(module, q, v, tau),
                   Minv=mj.inverse_mass_matrix(module, q, method="recursive"),
                   psi=mj.cross_space_inertia(module, q, frames, method="recursive"),
                   lam=mj.inverse_osim(module, q, frames, method="recursive"),
                   dJv=mj.frame_bias_acceleration(module, q, v, frames[0]),
                   energy=mj.mechanical_energy(module, q, v), momentum=mj.spatial_momentum(module, q, v))
        for ref in ("world_aligned", "local", "world"):
            out[f"J_{ref}"] = mj.frame_jacobian(module, q, frames[1], ref)
        return out
    return jax.jit(jax.vmap(f))


@pytest.fixture(scope="module")
def both_routes():
    rng = np.random.default_rng(2)
    module = random_tree(rng, random_spec(rng, 12, ALL_KINDS))
    states = random_states(module, np.random.default_rng(9), N_STATES)
    return {r: jax.tree.map(np.asarray, every_route_quantity(module.with_recursion(r))(*states))
            for r in ("unrolled", "level_scan")}


def test_level_scan_equals_unrolled(both_routes):
    unrolled, levels = both_routes["unrolled"], both_routes["level_scan"]
    assert unrolled.keys() == levels.keys()
    for key in unrolled:
        scale = max(1.0, float(np.abs(unrolled[key]).max()))
        np.testing.assert_allclose(levels[key], unrolled[key], atol=1e-10 * scale, rtol=0, err_msg=key)


# ------------------------------------------------------------------------------------- gradient
def test_aba_gradient_on_level_scan_matches_central_differences():
    """jax.grad of a scalar of ABA's q̈ w.r.t. link masses and joint positions (one flat vector θ)."""
    rng = np.random.default_rng(4)
    module = random_tree(rng, random_spec(rng, 8, PIN_KINDS)).with_recursion("level_scan")
    n = module.topology.n_links
    q, v, _, tau = (x[0] for x in random_states(module, np.random.default_rng(1), 1))
    w = np.random.default_rng(2).normal(size=module.nv)

    def objective(theta):
        changed = module.with_params(mass=theta[:n], joint_p=theta[n:].reshape(n, 3))
        return jnp.dot(w, mj.aba(changed, q, v, tau))

    theta = jnp.concatenate([module.params.mass, module.params.joint_p.ravel()])
    f = jax.jit(objective)
    fd = central_difference(lambda x: float(f(jnp.asarray(x))), theta)
    np.testing.assert_allclose(jax.jit(jax.grad(objective))(theta), fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


def test_recursion_choice():
    rng = np.random.default_rng(0)
    small = random_tree(rng, random_spec(rng, 4, PIN_KINDS))
    assert small.topology.recursion == "auto"
    assert isinstance(mj.forward_kinematics(small, small.neutral_configuration()), TreeKinematics)
    kin = mj.forward_kinematics(small.with_recursion("level_scan"), small.neutral_configuration())
    assert [kin.S[i].shape for i in range(4)] == [(6, k.nv) for k in small.topology.kinds]
    with pytest.raises(ValueError, match="unknown recursion"):
        small.with_recursion("sideways")
