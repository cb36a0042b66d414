"""MJCF import (``mrds_jax.load_mjcf``) against MuJoCo itself, an engine nobody here wrote.

* Trees: every joint type (hinge with ref and an off-origin axis, slide, ball, free, two hinges = universal),
  a jointless body merged, inertias computed by MuJoCo from geoms: mass matrix (mj_fullM) and forward
  dynamics (mj_forward's qacc) at random states, site placements.
* Loops: MuJoCo's constraints are soft, so its qacc differs from the exact one by M⁻¹Jᵀ Δf with J its
  constraint Jacobian (efc_J). Projected on the nullspace N of J, Nᵀ M q̈ does not depend on the constraint
  force: Nᵀ M (q̈_ours − q̈_mujoco) = 0 whatever force MuJoCo's soft solver found (to rounding). Together
  with the constraint holding exactly (MuJoCo's own residual efc_pos, differentiated twice along the
  motion), this determines q̈ — so both parts are checked against MuJoCo, at states that satisfy MuJoCo's
  constraints (where ours must hold too). Models: a four-bar closed by ``connect`` at a fixed pivot with a
  hinge locked by a ``joint`` equality (also equal to the same mechanism built by hand), and an arm
  welded to a free plate that is pinned to the ground (body ``weld``, site ``connect``).
* Round trip: export → load_mjcf gives the same dynamics to 1e-10.
* Unsupported elements: errors and warnings that name them.
"""
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.model import ModuleBuilder
from mrds_jax.loaders.mjcf import load_mjcf
from mujoco_states import consistent_states, qdd_to_mujoco, random_qpos, velocity_map

DATA = Path(__file__).parent / "data"


@jax.jit
def dynamics_and_errors(system, state, tau):
    """Forward dynamics and our position-level constraint errors, one compiled program per system."""
    return S.forward_dynamics(system, state, tau), S.constraint_errors(system, state).position


# ----------------------------------------------------------------------------------------------- trees
@pytest.fixture(scope="module")
def tree():
    system, mapping = load_mjcf(DATA / "mjcf_tree.xml", return_mapping=True)
    model = mujoco.MjModel.from_xml_path(str(DATA / "mjcf_tree.xml"))
    return system, mapping, model


def test_tree_structure(tree):
    system, mapping, model = tree
    assert system.module_names == ("upper", "yoke", "drone")
    kinds = [m.topology.joint_kinds for m in system.modules]
    assert kinds == [("revolute", "prismatic", "spherical"), ("universal",), ("free", "revolute")]
    # the jointless bracket is merged into "upper": its mass is there, and it stays an operational point
    upper = system.modules[0]
    assert "bracket" in upper.topology.frame_names and "bracket" not in upper.topology.link_names
    b = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in ("upper", "bracket")]
    np.testing.assert_allclose(float(upper.params.mass[0]), model.body_mass[b].sum(), rtol=1e-12)
    assert sum(m.nq for m in system.modules) == model.nq and sum(m.nv for m in system.modules) == model.nv


def test_tree_mass_matrix_dynamics_and_sites_equal_mujoco(tree):
    system, mapping, model = tree
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    site_names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in range(model.nsite)]

    @jax.jit
    def ours(modules, q, v, tau):
        """Block-diagonal mass matrix, ABA per module and every site's placement, in one compiled program."""
        sites = {}
        for m, qk in zip(modules, q):
            kin = mj.forward_kinematics(m, qk)
            sites.update({f: mj.frame_placement(m, kin, f) for f in site_names if f in m.topology.frame_names})
        return (jax.scipy.linalg.block_diag(*[mj.mass_matrix(m, qk) for m, qk in zip(modules, q)]),
                [mj.aba(*args) for args in zip(modules, q, v, tau)], [sites[f] for f in site_names])

    for _ in range(4):
        qpos = random_qpos(model, rng)
        qvel = rng.uniform(-2, 2, model.nv)
        state = mapping.state(qpos, qvel)
        tau = tuple(jnp.asarray(rng.uniform(-3, 3, m.nv)) for m in system.modules)
        data.qpos[:], data.qvel[:] = mapping.to_mujoco(state)
        data.qfrc_applied[:] = mapping.to_mujoco(S.SystemState(state.q, tau))[1]
        mujoco.mj_forward(model, data)
        M, qdd, sites = ours(system.modules, state.q, state.v, tau)
        # mass matrix: qvel = T v, so ours is Tᵀ M_mujoco T (block-diagonal over the modules)
        M_mj = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M_mj)
        T = velocity_map(mapping, state)
        np.testing.assert_allclose(M, T.T @ M_mj @ T, atol=1e-10)
        for a, e in zip(qdd, mapping.acceleration_from_mujoco(state, data.qacc)):
            np.testing.assert_allclose(a, e, atol=1e-9, rtol=1e-9)
        for s, (R, p) in enumerate(sites):
            np.testing.assert_allclose(p, data.site_xpos[s], atol=1e-12)
            np.testing.assert_allclose(R, data.site_xmat[s].reshape(3, 3), atol=1e-12)


# ----------------------------------------------------------------------------------------------- loops
def mujoco_loop_checks(model, mapping, state, qdd, tau, h=2e-4):
    """(nullspace residual, constraint second difference) of our q̈ against MuJoCo: see the module
    docstring. Both are ~0 only for the exact constrained acceleration. ``qdd=None``: check MuJoCo's
    unconstrained acceleration qacc_smooth instead (which passes the first and fails the second)."""
    data = mujoco.MjData(model)
    qpos, qvel = mapping.to_mujoco(state)
    _, qfrc = mapping.to_mujoco(S.SystemState(state.q, tau))
    data.qpos[:], data.qvel[:], data.qfrc_applied[:] = qpos, qvel, qfrc
    mujoco.mj_forward(model, data)
    eq_rows = np.flatnonzero(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
    J = data.efc_J.reshape(-1, model.nv)[eq_rows]
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, M)
    _, s, Vt = np.linalg.svd(J)
    N = Vt[int(np.sum(s > 1e-9 * s.max())):].T          # basis of the nullspace of MuJoCo's J
    # our q̈ in MuJoCo's coordinates: qacc = d/dt qvel (free joints: v̇_world = R(v̇_body + ω × v_body))
    acc = np.array(data.qacc_smooth) if qdd is None else np.asarray(qdd_to_mujoco(mapping, state, qdd))
    nullspace = N.T @ M @ (acc - data.qacc)
    assert np.abs(data.efc_pos[eq_rows]).max() < 1e-9, "state is not consistent for MuJoCo's constraints"

    def second_difference(h):
        g = []
        for t in (-h, 0.0, h):
            q_t = qpos.copy()
            mujoco.mj_integratePos(model, q_t, qvel + 0.5 * t * acc, t)
            data.qpos[:] = q_t
            mujoco.mj_forward(model, data)
            g.append(np.array(data.efc_pos[eq_rows]))
        return (g[0] - 2 * g[1] + g[2]) / h ** 2
    # Richardson: the O(h²) truncation error cancels (accelerations reach 1e3 here)
    return nullspace, (4 * second_difference(h / 2) - second_difference(h)) / 3


# Four-bar in the xy plane (gravity along −y) as one chain crank → coupler → rocker, the rocker's tip
# connected to the fixed pivot G (a contact with the ground), closed at the reference configuration: crank
# and coupler at absolute angles A1, A2, the rocker pointing from the coupler's tip back to G.
A1, A2, L1, L2, G = 1.1, 0.2, 0.4, 1.1, np.array([1.0, -0.1, 0.0])
TIP = L1 * np.array([np.cos(A1), np.sin(A1), 0]) + L2 * np.array([np.cos(A2), np.sin(A2), 0])
L3, A3 = float(np.linalg.norm(G - TIP)), float(np.arctan2(*(G - TIP)[1::-1]))
BARS = dict(crank=(0.8, (L1 / 2, 0.01, 0), (0.002, 0.011, 0.012)),        # mass, centre of mass, inertia
            coupler=(1.5, (L2 / 2, -0.02, 0.0), (0.012, 0.15, 0.155)),
            rocker=(1.1, (L3 / 2, 0.0, 0.01), (0.002, 0.045, 0.047)),
            flag=(0.3, (0, 0.05, 0.02), (0.001, 0.001, 0.0015)))
# a flag hinged on the crank (about its x axis, ref 0.1 rad) and locked by a joint equality at ref + 0.3 rad
FLAG_REF, FLAG_LOCK = 0.1, 0.3


def fourbar_xml():
    def inertial(name):
        m, c, d = BARS[name]
        return f'<inertial pos="{c[0]} {c[1]} {c[2]}" mass="{m}" diaginertia="{d[0]} {d[1]} {d[2]}"/>'
    return f"""<mujoco model="fourbar">
  <compiler angle="radian"/>
  <option gravity="0 -9.81 0"/>
  <worldbody>
    <body name="crank" euler="0 0 {A1!r}">
      <joint name="j1" axis="0 0 1"/> {inertial("crank")}
      <body name="coupler" pos="{L1!r} 0 0" euler="0 0 {A2 - A1!r}">
        <joint name="j2" axis="0 0 1"/> {inertial("coupler")}
        <body name="rocker" pos="{L2!r} 0 0" euler="0 0 {A3 - A2!r}">
          <joint name="j3" axis="0 0 1"/> {inertial("rocker")}
        </body>
      </body>
      <body name="flag" pos="{L1 / 2!r} 0 0.05">
        <joint name="jf" axis="1 0 0" ref="{FLAG_REF!r}"/> {inertial("flag")}
      </body>
    </body>
    <body name="pivot" pos="{float(G[0])!r} {float(G[1])!r} 0"/>
  </worldbody>
  <equality>
    <connect name="loop" body1="rocker" body2="pivot" anchor="{L3!r} 0 0"/>
    <joint name="lock" joint1="jf" polycoef="{FLAG_LOCK!r} 0 0 0 0"/>
  </equality>
</mujoco>"""


def fourbar_by_hand():
    """The same mechanism through our builders and contact library. Its names (joints, operational
    points) are those load_mjcf gives, so both systems share one compiled program; the numbers
    are independent."""
    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    def rx(a):
        return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])

    b = ModuleBuilder(gravity=(0, -9.81, 0))
    for name, joint, parent, pos, R, axis in (("crank", "j1", None, (0, 0, 0), rz(A1), (0, 0, 1)),
                                              ("coupler", "j2", "crank", (L1, 0, 0), rz(A2 - A1), (0, 0, 1)),
                                              ("rocker", "j3", "coupler", (L2, 0, 0), rz(A3 - A2), (0, 0, 1)),
                                              # our q is MuJoCo's qpos: the ref turns the placement back
                                              ("flag", "jf", "crank", (L1 / 2, 0, 0.05), rx(-FLAG_REF), (1, 0, 0))):
        m, c, d = BARS[name]
        b.add_link(name, parent, "revolute", joint_name=joint, axis=axis, position=pos, rotation=R,
                   mass=m, com=c, inertia=np.diag(d))
    for name in BARS:
        b.add_frame(name, name)
    b.add_frame("loop:E", "rocker", position=(L3, 0, 0))
    # the lock: the flag's rotation about x relative to the crank, held where the flag is turned by FLAG_LOCK
    b.add_frame("lock:E", "crank", position=(L1 / 2, 0, 0.05), rotation=rx(FLAG_LOCK))
    b.add_frame("lock:P", "flag")
    locked = np.array([[1.0, 0, 0, 0, 0, 0]]).T
    lock = C.make_contact("lock", ("crank", "lock:E"), ("crank", "lock:P"), np.eye(6)[:, 1:], locked, kind="joint_lock")
    return S.build_system({"crank": b.build()},
                          [C.spherical("loop", ("crank", "loop:E"), None, ground_position=G), lock])


@pytest.fixture(scope="module")
def fourbar():
    xml = fourbar_xml()
    system, mapping = load_mjcf(xml, return_mapping=True)
    return system, mapping, mujoco.MjModel.from_xml_string(xml), fourbar_by_hand()


def test_fourbar_connect_and_joint_lock_equal_hand_built_and_mujoco(fourbar):
    system, mapping, model, by_hand = fourbar
    assert [c.kind for c in system.contacts] == ["spherical", "joint_lock"] and system.module_names == ("crank",)
    assert system.contacts[0].P is None      # the pivot is fixed: a contact with the ground
    rng = np.random.default_rng(1)
    for state in consistent_states(model, mapping, rng, 3):
        tau = tuple(jnp.asarray(rng.uniform(-2, 2, m.nv)) for m in system.modules)
        (out, errors), (ref, _) = dynamics_and_errors(system, state, tau), dynamics_and_errors(by_hand, state, tau)
        # MuJoCo's constraints hold at this state, so ours must (the pivot, and the lock at its target)
        assert max(float(jnp.abs(e).max()) for e in errors) < 1e-10
        for a, b in zip(out.qdd, ref.qdd):
            np.testing.assert_allclose(a, b, atol=1e-10)
        for a, b in zip(out.F_c, ref.F_c):
            np.testing.assert_allclose(a, b, atol=1e-9)
        assert_mujoco_agrees(model, mapping, state, out.qdd, tau)


def assert_mujoco_agrees(model, mapping, state, qdd, tau):
    nullspace, second_difference = mujoco_loop_checks(model, mapping, state, qdd, tau)
    assert np.abs(nullspace).max() < 1e-10
    assert np.abs(second_difference).max() < 1e-6
    # the second check has teeth: MuJoCo's unconstrained accelerations pass the first, not it
    nullspace, second_difference = mujoco_loop_checks(model, mapping, state, None, tau)
    assert np.abs(nullspace).max() < 1e-10 and np.abs(second_difference).max() > 1e-2


@pytest.fixture(scope="module")
def weld_loop():
    system, mapping = load_mjcf(DATA / "mjcf_weld_loop.xml", return_mapping=True)
    return system, mapping, mujoco.MjModel.from_xml_path(str(DATA / "mjcf_weld_loop.xml"))


def test_weld_loop_equals_mujoco(weld_loop):
    """Body weld (anchor, relative pose from qpos0), site connect to the ground; a free body, a ball joint,
    jointless bodies merged or fixed. (The round trip below exercises site welds.)"""
    system, mapping, model = weld_loop
    assert system.module_names == ("left1", "plate")
    assert [c.kind for c in system.contacts] == ["weld", "spherical"]
    assert system.contacts[1].P is None      # the hook is fixed: a contact with the ground
    rng = np.random.default_rng(2)
    for state in consistent_states(model, mapping, rng, 2):
        tau = tuple(jnp.asarray(rng.uniform(-2, 2, m.nv)) for m in system.modules)
        out, position_errors = dynamics_and_errors(system, state, tau)
        # MuJoCo's constraints hold at this state, so ours must (positions: same anchors and targets)
        assert max(float(jnp.abs(e).max()) for e in position_errors) < 1e-10
        assert max(float(jnp.abs(e).max()) for e in out.constraint_velocity) < 1e-10
        assert float(out.residual) < 1e-10
        assert_mujoco_agrees(model, mapping, state, out.qdd, tau)


def test_round_trip_export_then_load(weld_loop):
    """to_mjcf (our exporter) then load_mjcf: the same system, the same dynamics to 1e-10."""
    system, mapping, model = weld_loop
    back = load_mjcf(mj.export.to_mjcf(system))
    assert [m.nv for m in back.modules] == [m.nv for m in system.modules]
    assert [(c.name, c.kind) for c in back.contacts] == [(c.name, c.kind) for c in system.contacts]
    rng = np.random.default_rng(3)
    for state in consistent_states(model, mapping, rng, 2):
        tau = tuple(jnp.asarray(rng.uniform(-2, 2, m.nv)) for m in system.modules)
        a, b = dynamics_and_errors(system, state, tau)[0], dynamics_and_errors(back, state, tau)[0]
        for x, y in zip(a.qdd, b.qdd):
            np.testing.assert_allclose(x, y, atol=1e-10)
        for x, y in zip(a.F_c, b.F_c):
            np.testing.assert_allclose(x, y, atol=1e-9)


STEWART = Path(__file__).resolve().parents[2] / "shared" / "bench" / "ckcm_stewart_mjx.xml"


@pytest.mark.skipif(not STEWART.exists(), reason="the shared benchmark MJCF is not beside the repository")
def test_stewart_platform_mjcf_is_the_native_ckcm_build():
    """shared/bench's Stewart platform (six U-P legs, a free payload, six site connects) imports as the same
    model as mrds_jax.ckcm's native build: every parameter and contact point to rounding. The same dynamics at
    10 consistent states (q̈ and constraint forces to 1e-8) is checked by
    test_system_vs_pinocchio.py::test_stewart_mjcf_import_has_the_native_ckcm_dynamics, next to the native
    build's own Pinocchio comparison (its states and compiled program)."""
    from mrds_jax import ckcm
    with pytest.warns(UserWarning, match="actuators .*leg1_force.*: not applied"):
        system = load_mjcf(STEWART)
    native = ckcm.multibody.build_ckcm_system(ckcm.nominal())
    order = [system.module_names.index(n) for n in ("leg1_lower", "leg2_lower", "leg3_lower", "leg4_lower",
                                                    "leg5_lower", "leg6_lower", "payload")]
    for k, m in zip(order, native.modules):
        ours = system.modules[k]
        assert ours.topology.joint_kinds == m.topology.joint_kinds
        axes = () if m.topology.joint_kinds == ("free",) else ("axis", "axis2")   # a free joint has none
        for field in ("joint_R", "joint_p", "mass", "com", "inertia", "gravity") + axes:
            np.testing.assert_allclose(getattr(ours.params, field), getattr(m.params, field), atol=1e-12)
    for c, n in zip(system.contacts, native.contacts):
        assert c.kind == n.kind == "spherical"
        for (mod, frame), (nmod, nframe) in ((c.E, n.E), (c.P, n.P)):
            a, b = system.modules[system.module_index(mod)], native.modules[native.module_index(nmod)]
            i, j = a.topology.frame_index(frame), b.topology.frame_index(nframe)
            assert a.topology.frame_links[i] == b.topology.frame_links[j]
            np.testing.assert_allclose(a.params.frame_p[i], b.params.frame_p[j], atol=1e-12)


# ----------------------------------------------------------------------------------------------- errors
def arm_xml(extra="", body_extra="", equality="", default='<geom contype="0" conaffinity="0"/>'):
    """A two-body arm (hinge, then ``body_extra`` in the second body) with optional extra elements."""
    return f"""<mujoco>
  <default>{default}</default>
  <worldbody>
    <site name="anchor" pos="0 0 -1"/><site name="anchor2" pos="0 0 -2"/>
    <body name="a">
      <joint name="ja" axis="0 1 0"/><geom name="ga" size="0.1"/>
      <body name="b" pos="0 0 -0.5">
        <joint name="jb" axis="0 1 0"/><geom name="gb" size="0.1"/><site name="tip" pos="0 0 -0.5"/>{body_extra}
      </body>
    </body>
  </worldbody>{extra}
  <equality>{equality}</equality>
</mujoco>"""


def test_missing_file_and_malformed_xml_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.xml"):
        load_mjcf(tmp_path / "nowhere.xml")
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body></worldbody></mujoco>")
    with pytest.raises(ValueError, match=r"bad\.xml: MuJoCo could not load the MJCF: .*XML"):
        load_mjcf(bad)
    with pytest.raises(ValueError, match=r"<MJCF string>: MuJoCo could not load the MJCF: .*unrecognized"):
        load_mjcf("<mujoco><worldbody><bogus/></worldbody></mujoco>")


@pytest.mark.parametrize("equality, match", [
    ('<joint name="gear" joint1="u1" joint2="jb" polycoef="0 2 0 0 0"/>',
     r"joint 'gear'.*'u1' is not a hinge or slide joint of its own \(a ball, free or universal joint\); only those "
     r"can be coupled"),
    ('<joint name="lk" joint1="u1"/>', r"'lk'.*'u1' is not a hinge or slide joint of its own.*can be locked"),
    ('<weld name="w" body1="b" torquescale="0"/>', r"weld 'w': torquescale 0.0 leaves the rotation free"),
    ('<connect name="c" site1="anchor" site2="anchor2"/>', r"connect 'c': both sides are fixed to the world"),
])
def test_unsupported_equalities_raise_naming_them(equality, match):
    xml = arm_xml(extra='<tendon><fixed name="t"><joint joint="ja" coef="1"/></fixed></tendon>',
                  body_extra='<body name="c"><joint name="u1" axis="1 0 0"/><joint name="u2"/>'
                             '<geom size="0.05"/></body>', equality=equality)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the tendon itself is reported by a warning
        with pytest.raises(ValueError, match=match):
            load_mjcf(xml)


def test_hinge_and_slide_on_one_body_are_two_joints():
    """Once an error; every layout MuJoCo accepts is read (tests/test_mjcf_joint_layouts.py checks them)."""
    xml = arm_xml(body_extra='<body name="c"><joint name="h" axis="1 0 0"/><joint name="s" type="slide"/>'
                             '<geom size="0.05"/></body>')
    topology = load_mjcf(xml).modules[0].topology
    assert topology.joint_names[-2:] == ("h", "s") and topology.link_names[-2:] == ("c:h", "c")


def test_ignored_elements_are_named_in_warnings():
    xml = arm_xml(body_extra='<body name="c"><joint name="jlim" axis="1 0 0" range="-1 1" damping="0.1" '
                             'armature="0.01"/><geom size="0.05"/></body>',
                  extra='<actuator><motor name="m1" joint="ja"/></actuator><sensor><jointpos name="s1" joint="ja"/>'
                        '</sensor><tendon><fixed name="t"><joint joint="ja" coef="1"/></fixed></tendon>', default="")
    with pytest.warns(UserWarning) as record:
        system = load_mjcf(xml, collision=False)        # the geoms' contacts are read by default (test_contact_*)
    text = "\n".join(str(w.message) for w in record)
    for expected in ("actuators (m1): not applied: load_mjcf(..., return_forces=True)",
                     "joint damping of jlim is not applied", "sensors (s1) are ignored"):
        assert expected in text, (expected, text)
    assert "contacts between geoms" not in text and "collision=True" not in text   # left out as asked: no word
    assert "(t)" not in text                         # a tendon that acts on nothing (MuJoCo's too) is not named
    assert system.module_names == ("a",) and system.modules[0].topology.link_names == ("a", "b", "c")
    assert "armature" not in text and float(system.modules[0].params.armature[-1]) == 0.01   # read, not warned
    assert "joint limits" not in text                                # kept (in radians: the file is in degrees)
    np.testing.assert_allclose(system.modules[0].topology.joint_limits[-1], np.deg2rad([-1.0, 1.0]), rtol=1e-15)


def test_missing_mujoco_gives_install_hint(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ImportError, match="pip install mujoco"):
        load_mjcf("<mujoco/>")


# ----------------------------------------------------------------------------------------------- top level
def test_top_level_api_is_discoverable_and_lazy():
    import subprocess
    import sys
    assert mj.load_mjcf is load_mjcf and mj.System is S.System and mj.forward_dynamics is S.forward_dynamics
    assert mj.load_urdf is mj.loaders.urdf.load_urdf and mj.ModuleBuilder is ModuleBuilder
    assert callable(mj.examples.dual_arm_grasp) and mj.to_mjcf is mj.export.to_mjcf
    assert {"load_mjcf", "load_urdf", "simulate", "build_system", "examples"} <= set(dir(mj))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        mj.nonexistent
    # importing the package loads neither MuJoCo (the MJCF and URDF parser) nor the loaders nor the examples
    code = ("import sys, mrds_jax; print(sorted(m for m in ('mujoco', 'mrds_jax.examples', 'mrds_jax.loaders.mjcf', "
            "'mrds_jax.loaders.urdf') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"
