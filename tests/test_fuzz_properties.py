"""Property-based tests (hypothesis, issue 13) over random trees and random closed-chain systems.

* ψᵀφ = 1 (Bonaventura eq. 24-25) for every library contact with random axes, normals and pitches, and for the
  universal joint's variable modes at random relative rotations;
* power balance: d/dt (T + V) = Σ τ·v, for trees and for closed chains at consistent moving states (ideal
  contacts do no work), by forward-mode autodiff of the energy along the computed accelerations;
* forward then inverse dynamics round trip: rnea(aba(τ)) = τ for trees; for closed chains, the square inverse
  dynamics (:func:`mrds_jax.system.inverse_dynamics`) of the forward dynamics' q̈ returns the applied τ;
* invariance: renumbering the links of a tree (any parent-first order), relabelling E and P of the contacts,
  reordering the modules and the contacts of a system.

Random *values* are drawn freely (hypothesis draws a seed for the NumPy generator that builds parameters and
states, and the axes of the contacts directly); random *structures* come from a small fixed set, because every
new structure is a new XLA compilation. The random closed chains are consistent by construction: two random
trees are joined tip to tip, and B's tip frame and the ground frame are placed where A's tip and B's root frame
are at the drawn configuration.

Bounded and derandomized in the suite (a fixed seed; ``MRDS_FUZZ_EXAMPLES`` scales the numbers of examples).
``python experiments/fuzz_properties.py`` runs them with many more examples and more structures and reports the
counts tried."""
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import mrds_jax as mj
from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.dynamics import forward_kinematics
from mrds_jax.model import ModuleBuilder, configuration_derivative
from robots import random_states, random_tree

SCALE = float(os.environ.get("MRDS_FUZZ_EXAMPLES", "1"))      # the experiment multiplies the example counts
EXTENDED = SCALE > 1


def fuzz(examples):
    """Hypothesis settings: derandomized (fixed seed), ``examples`` × SCALE examples, no deadline, no database."""
    return settings(max_examples=max(1, int(examples * SCALE)), derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


seeds = st.integers(min_value=0, max_value=2**32 - 1)
unit_vectors = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=3, max_size=3).filter(
    lambda v: np.linalg.norm(v) > 0.1)


# ----------------------------------------------------------------------------- ψᵀφ = 1 for every library contact
def _assert_dual(phi_u, phi_c, psi_u, psi_c):
    phi = np.concatenate([np.asarray(phi_u), np.asarray(phi_c)], axis=1)
    psi = np.concatenate([np.asarray(psi_u), np.asarray(psi_c)], axis=1)
    np.testing.assert_allclose(psi.T @ phi, np.eye(phi.shape[0]), atol=1e-12)


@fuzz(25)
@given(axis=unit_vectors, axis2=unit_vectors, pitch=st.floats(-0.5, 0.5), free=st.booleans(),
       angles=st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=2))
def test_every_library_contact_has_dual_bases(axis, axis2, pitch, free, angles):
    side = ("m", "tip")
    planar_axis = np.array([axis[0], axis[1], 0.0])
    contacts = [C.weld("c", side, None), C.spherical("c", side, None), C.revolute("c", side, None, axis=axis),
                C.prismatic("c", side, None, axis=axis), C.cylindrical("c", side, None, axis=axis),
                C.screw("c", side, None, axis=axis, pitch=pitch), C.planar_contact("c", side, None, normal=axis),
                C.point_on_plane("c", side, None, normal=axis, free_rotation=free),
                C.point_on_line("c", side, None, direction=axis, free_rotation=free),
                C.planar_weld("c", side, None), C.planar_revolute("c", side, None)]
    if np.linalg.norm(planar_axis) > 0.1:
        contacts += [C.prismatic("c", side, None, axis=planar_axis, planar=True),
                     C.point_on_line("c", side, None, direction=planar_axis, free_rotation=free, planar=True)]
    if np.linalg.norm(np.cross(axis, axis2)) > 0.1 * np.linalg.norm(axis) * np.linalg.norm(axis2):
        u = C.universal("c", side, None, axis=axis, axis2=axis2)
        contacts.append(u)
        # the variable modes at a relative rotation rot(axis, θ₁) rot(axis2, θ₂) of the joint itself
        from mrds_jax.spatial.rotation import axis_angle_rotation
        a1, a2 = (jnp.asarray(x / np.linalg.norm(x)) for x in (np.asarray(axis), np.asarray(axis2)))
        R = axis_angle_rotation(a1, angles[0]) @ axis_angle_rotation(a2, angles[1])
        _assert_dual(*u.modes(u, R, jnp.zeros(3)))
    for c in contacts:
        _assert_dual(c.phi_u, c.phi_c, c.psi_u, c.psi_c)


# ----------------------------------------------------------------------------- trees
TREES = {
    "chain": [(-1, "revolute"), (0, "universal"), (1, "prismatic")],
    "branching": [(-1, "prismatic"), (0, "spherical"), (0, "screw"), (2, "revolute")],
    "free_base": [(-1, "free"), (0, "revolute"), (0, "spherical")],
}
SUITE_TREES = list(TREES) if EXTENDED else ["branching"]


@jax.jit
def tree_checks(module, q, v, tau):
    """(dE/dt, τ·v, rnea(q, v, aba(q, v, τ))) with E = T + V (mechanical_energy)."""
    qdd = mj.aba(module, q, v, tau)
    E = lambda q, v: mj.mechanical_energy(module, q, v)  # noqa: E731
    _, dE = jax.jvp(E, (q, v), (configuration_derivative(module, q, v), qdd))
    return dE, tau @ v, mj.rnea(module, q, v, qdd)


@fuzz(10)
@given(name=st.sampled_from(SUITE_TREES), seed=seeds)
def test_tree_power_balance_and_forward_inverse_round_trip(name, seed):
    rng = np.random.default_rng(seed)
    module = random_tree(rng, TREES[name])
    q, v, _, tau = (jnp.asarray(x[0]) for x in random_states(module, rng, 1))
    dE, power, tau_back = tree_checks(module, q, v, tau)
    scale = float(jnp.abs(tau).max() * jnp.abs(v).max() * module.nv) + 1.0
    assert abs(float(dE - power)) < 1e-9 * scale, (float(dE), float(power))
    np.testing.assert_allclose(tau_back, tau, atol=1e-9 * float(jnp.abs(tau).max() + 1.0))


def parent_first_order(parents, priority):
    """A listing of the links in which every parent comes before its children, ties broken by ``priority``."""
    order, placed = [], set()
    while len(order) < len(parents):
        ready = [i for i in range(len(parents)) if i not in placed and (parents[i] < 0 or parents[i] in placed)]
        nxt = min(ready, key=lambda i: priority[i])
        order.append(nxt)
        placed.add(nxt)
    return order


def renumbered(module, order):
    """The same tree with its links listed in ``order`` (names, joints and parameters carried over)."""
    t, p = module.topology, module.params
    b = ModuleBuilder(gravity=np.asarray(p.gravity))
    for old in order:
        parent = t.parents[old]
        b.add_link(t.link_names[old], None if parent < 0 else t.link_names[parent], t.joint_kinds[old],
                   joint_name=t.joint_names[old], axis=np.asarray(p.axis[old]), axis2=np.asarray(p.axis2[old]),
                   pitch=float(p.pitch[old]), position=np.asarray(p.joint_p[old]), rotation=np.asarray(p.joint_R[old]),
                   mass=float(p.mass[old]), com=np.asarray(p.com[old]), inertia=np.asarray(p.inertia[old]))
    return b.build()


def coordinates(module, order, which):
    """Index of every q (``which="q"``) or v coordinate of the renumbered module in the original's vector."""
    slices = module.topology.q_slices if which == "q" else module.topology.v_slices
    return np.concatenate([np.arange(slices[i].start, slices[i].stop) for i in order])


@fuzz(4)
@given(name=st.sampled_from(SUITE_TREES), seed=seeds, priority=st.permutations(range(4)))
def test_renumbering_links_permutes_the_dynamics(name, seed, priority):
    """Eager calls (each renumbered tree is a new structure: no compilation per example)."""
    rng = np.random.default_rng(seed)
    spec = TREES[name]
    module = random_tree(rng, spec)
    order = parent_first_order([p for p, _ in spec], list(priority) + list(range(4, len(spec))))
    other = renumbered(module, order)
    q, v, _, tau = (np.asarray(x[0]) for x in random_states(module, rng, 1))
    iq, iv = coordinates(module, order, "q"), coordinates(module, order, "v")
    qdd_a = mj.aba(module, jnp.asarray(q), jnp.asarray(v), jnp.asarray(tau))
    qdd_b = mj.aba(other, jnp.asarray(q[iq]), jnp.asarray(v[iv]), jnp.asarray(tau[iv]))
    np.testing.assert_allclose(np.asarray(qdd_b), np.asarray(qdd_a)[iv], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(mj.mechanical_energy(other, jnp.asarray(q[iq]), jnp.asarray(v[iv])),
                               mj.mechanical_energy(module, jnp.asarray(q), jnp.asarray(v)), rtol=1e-12)


# ----------------------------------------------------------------------------- closed chains
def random_planar_chain(rng, n):
    """A planar chain of ``n`` revolute links at random in-plane placements, with an operational point on every
    link (``op<i>``), like :func:`robots.random_tree` for the plane."""
    b = ModuleBuilder(planar=True)
    for i in range(n):
        th = rng.uniform(-np.pi, np.pi)
        b.add_link(f"link{i}", None if i == 0 else f"link{i - 1}", "revolute",
                   position=(rng.uniform(0.2, 0.6) if i else 0.0, 0.0, 0.0),
                   rotation=np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1.0]]),
                   mass=rng.uniform(0.5, 2.0), com=(*rng.uniform(-0.2, 0.2, 2), 0.0),
                   inertia=np.diag(rng.uniform(0.03, 0.05, 3)))
    for i in range(n):
        b.add_frame(f"op{i}", f"link{i}", position=(*rng.uniform(-0.4, 0.4, 2), 0.0))
    return b.build()


def _module(rng, name):
    return random_planar_chain(rng, 3) if name == "planar3" else random_tree(rng, TREES[name])


# tree A, tree B, kind of the contact joining their tips, link of B whose point joins the ground and its kind;
# E/P-symmetric joint kinds only (the joint is fixed in both bodies), at points that leave the mechanism mobile.
# The first dofs of A (as many as the mechanism has) are the actuated ones of the square inverse dynamics: the
# structures are chosen so that they drive it (no internal motion left to the constraints, e.g. a link on a
# spherical joint pinned at one point keeps a spin that no actuator of A reaches).
CHAINS = {
    "planar": ("planar3", "planar3", "planar_revolute", 1, "planar_revolute"),
    "spatial": ("chain", "chain", "spherical", 1, "spherical"),
    "spatial_branching": ("branching", "chain", "spherical", 1, "spherical"),
}
SUITE_CHAINS = list(CHAINS) if EXTENDED else ["planar"]


def _contact(kind, axis, name, E, P, **kw):
    if kind == "revolute":
        return C.revolute(name, E, P, axis=axis, **kw)
    return getattr(C, kind)(name, E, P, **kw)


def _world_frame(module, q, frame):
    kin = forward_kinematics(module, jnp.asarray(q))
    link = module.topology.frame_links[frame]
    R_l, p_l = np.asarray(kin.world_R[link]), np.asarray(kin.world_p[link])
    return R_l @ np.asarray(module.params.frame_R[frame]), R_l @ np.asarray(module.params.frame_p[frame]) + p_l


def closed_chain(config, rng):
    """(system, the same with E and P of both contacts swapped, the same with modules and contacts listed in
    reverse, q, actuated dofs) for a random closed chain, consistent at q by construction: B's tip frame is
    placed on A's tip frame and the ground frame on B's point, at the drawn configuration."""
    name_a, name_b, kind1, link0, kind2 = CHAINS[config]
    A, B = _module(rng, name_a), _module(rng, name_b)
    qa, qb = (np.asarray(random_states(m, rng, 1)[0][0]) for m in (A, B))
    tip_a, tip_b = A.topology.n_links - 1, B.topology.n_links - 1
    R_w, p_w = _world_frame(A, qa, tip_a)
    kin_b = forward_kinematics(B, jnp.asarray(qb))
    R_l, p_l = np.asarray(kin_b.world_R[tip_b]), np.asarray(kin_b.world_p[tip_b])
    B = B.with_params(frame_R=B.params.frame_R.at[tip_b].set(R_l.T @ R_w),
                      frame_p=B.params.frame_p.at[tip_b].set(R_l.T @ (p_w - p_l)))
    R_0, p_0 = _world_frame(B, qb, link0)
    ea, eb, e0 = ("a", f"op{tip_a}"), ("b", f"op{tip_b}"), ("b", f"op{link0}")
    ground = dict(ground_rotation=R_0, ground_position=p_0)
    ax1, ax2 = rng.normal(size=3), rng.normal(size=3)   # frames E and P coincide at q: swapping E and P keeps
    c1, c1_swapped = _contact(kind1, ax1, "tips", ea, eb), _contact(kind1, ax1, "tips", eb, ea)   # the joint
    c2, c2_swapped = _contact(kind2, ax2, "root", e0, None, **ground), _contact(kind2, ax2, "root", None, e0, **ground)
    system = S.build_system({"a": A, "b": B}, [c1, c2])
    swapped = S.build_system({"a": A, "b": B}, [c1_swapped, c2_swapped])
    reordered = S.build_system({"b": B, "a": A}, [c2, c1])
    n_actuated = A.nv + B.nv - system.connectivity.n_constraints
    actuated = (("a", tuple(range(min(n_actuated, A.nv)))), ("b", tuple(range(max(0, n_actuated - A.nv)))))
    return system, swapped, reordered, (jnp.asarray(qa), jnp.asarray(qb)), actuated


@functools.partial(jax.jit, static_argnames=("actuated",))
def closed_chain_checks(system, swapped, reordered, q, w, tau, actuated):
    """At the consistent moving state with the velocities w projected onto the constraints: position errors,
    Bᶜ, dE/dt and Σ τ·v, the square inverse dynamics of the forward dynamics' q̈, and q̈ of the system with E/P
    swapped and with modules and contacts reordered."""
    state, _ = S.project_velocities(system, S.SystemState(q, w))
    out = S.forward_dynamics(system, state, tau)

    def energy(q, v):
        return S.system_energy(system, S.SystemState(q, v)).total
    qd = tuple(configuration_derivative(m, qq, vv) for m, qq, vv in zip(system.modules, state.q, state.v))
    _, dE = jax.jvp(energy, (state.q, state.v), (qd, out.qdd))
    power = sum(t @ v for t, v in zip(tau, state.v))
    inverse = S.inverse_dynamics(system, state, out.qdd, {k: list(v) for k, v in actuated})
    qdd_swapped = S.forward_dynamics(swapped, state, tau).qdd
    rev = S.SystemState(state.q[::-1], state.v[::-1])
    qdd_reordered = S.forward_dynamics(reordered, rev, tau[::-1]).qdd[::-1]
    errors = jnp.concatenate(S.constraint_errors(system, state).position)
    return dict(errors=errors, Bc=out.Bc, dE=dE, power=power, tau_back=inverse.tau_actuated, qdd=out.qdd,
                qdd_swapped=qdd_swapped, qdd_reordered=qdd_reordered)


@fuzz(10)
@given(config=st.sampled_from(SUITE_CHAINS), seed=seeds)
def test_closed_chain_power_balance_round_trip_and_relabelling(config, seed):
    rng = np.random.default_rng(seed)
    system, swapped, reordered, q, actuated = closed_chain(config, rng)
    w = tuple(jnp.asarray(rng.normal(size=m.nv)) for m in system.modules)
    tau = tuple(jnp.zeros(m.nv).at[jnp.asarray(dofs, int)].set(rng.normal(size=len(dofs)) * 5)
                for m, (_, dofs) in zip(system.modules, actuated))
    r = {k: jax.tree.map(np.asarray, v) for k, v in closed_chain_checks(system, swapped, reordered, q, w, tau,
                                                                         actuated).items()}
    assert np.abs(r["errors"]).max() < 1e-9                        # consistent by construction
    eig = np.linalg.eigvalsh(r["Bc"])
    assume(eig[0] > 1e-8 * eig[-1])                                 # not at a singular configuration
    scale = 1.0 + sum(float(np.abs(t).max()) for t in tau)
    assert abs(float(r["dE"] - r["power"])) < 1e-8 * scale * 10, (r["dE"], r["power"])
    applied = np.concatenate([np.asarray(t)[list(dofs)] for t, (_, dofs) in zip(tau, actuated)])
    np.testing.assert_allclose(r["tau_back"], applied, atol=1e-7 * scale)
    for a, b, c in zip(r["qdd"], r["qdd_swapped"], r["qdd_reordered"]):
        np.testing.assert_allclose(b, a, atol=1e-8 * (1 + np.abs(a).max()))
        np.testing.assert_allclose(c, a, atol=1e-10 * (1 + np.abs(a).max()))
