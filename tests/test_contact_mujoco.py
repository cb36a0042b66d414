"""MuJoCo as an outer bound of the rigid contact step (issue 34), float64: the quadruped of
tests/data/quadruped_contact.xml (free trunk, four sprung two-joint legs, sphere feet, mu = 1) dropped 3 cm onto the
floor, loaded by ``load_mjcf`` for us and by ``mujoco`` for MuJoCo, same file, same dt (0.5 ms). MuJoCo's contact is
made near-rigid in the file (solref 0.002 1, elliptic cones, 10 noslip iterations; Euler with eulerdamp disabled so
that joint damping is explicit in both; the file's comment says why). The poses are compared through MuJoCo's own
forward kinematics of both qpos vectors: every body's origin and every foot centre, and every body's orientation as
the displacement it causes 0.25 m (the trunk's half length) from the body's origin.

* default run: the same file with the leg joints removed (a rigid four-footed table on its sphere feet), 0.4 s;
* slow: the sprung quadruped, 1 s: it touches down, the legs flex, the trunk pitches and slides back by 7 mm while
  the feet slip during the impact, and settles (|v| < 1e-4 at 1 s). Within 1 mm of MuJoCo all the way, and at
  rest (1 s) within 0.1 mm.
"""
import re
from pathlib import Path

import numpy as np
import pytest

import jax

mujoco = pytest.importorskip("mujoco")

from mrds_jax.loaders.mjcf import load_mjcf  # noqa: E402
from mrds_jax.system import SystemState  # noqa: E402
from mrds_jax.system.timestepping import contact_rollout  # noqa: E402

XML = Path(__file__).parent / "data" / "quadruped_contact.xml"
ARM = 0.25          # m: orientation errors are reported as the displacement of a point this far from the origin
FEET = ("foot_FL", "foot_FR", "foot_HL", "foot_HR")


def rigid_table_xml():
    """The quadruped with its hip and knee joints removed: one rigid body standing on four sphere feet."""
    text = XML.read_text()
    out = re.sub(r'\s*<joint name="(hip|knee)_[A-Z]{2}"/>', "", text)
    assert out.count("<joint") == 1          # the default class's <joint .../> stays; no joints left in the bodies
    return out


def mujoco_path(xml, dt, n_steps, every):
    m = mujoco.MjModel.from_xml_string(xml)
    assert abs(m.opt.timestep - dt) < 1e-15
    d = mujoco.MjData(m)
    qs = [d.qpos.copy()]
    for k in range(1, n_steps + 1):
        mujoco.mj_step(m, d)
        if k % every == 0:
            qs.append(d.qpos.copy())
    return m, np.array(qs), d.qvel.copy()


def our_path(xml, dt, n_steps, every):
    system, mapping, forces = load_mjcf(xml, return_mapping=True, return_forces=True)
    s0 = mapping.state()
    roll = jax.jit(lambda system, forces, q, v: contact_rollout(system, q, v, dt, n_steps, every, forces=forces))
    tr = roll(system, forces, s0.q, s0.v)
    assert int(tr.first_nonfinite) == -1
    qs = [mapping.to_mujoco(SystemState(tuple(q[k] for q in tr.q), tuple(v[k] for v in tr.v)))[0]
          for k in range(len(tr.t))]
    v_last = mapping.to_mujoco(SystemState(tuple(q[-1] for q in tr.q), tuple(v[-1] for v in tr.v)))[1]
    return np.array(qs), np.asarray(v_last), tr


def pose_errors(m, qa, qb):
    """Largest distance (m) between the two qpos' body origins and foot centres, and largest orientation error as
    the displacement of a point ARM from each body's origin, both by MuJoCo's forward kinematics."""
    da, db = mujoco.MjData(m), mujoco.MjData(m)
    da.qpos[:], db.qpos[:] = qa, qb
    mujoco.mj_kinematics(m, da)
    mujoco.mj_kinematics(m, db)
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f) for f in FEET]
    pos = np.concatenate([da.xpos[1:] - db.xpos[1:], da.geom_xpos[feet] - db.geom_xpos[feet]])
    rot = (da.xmat[1:] - db.xmat[1:]).reshape(-1, 3, 3)
    return float(np.max(np.linalg.norm(pos, axis=-1))), ARM * float(np.max(np.linalg.norm(rot, ord=2, axis=(1, 2))))


def compare(xml, t_end, every):
    dt = 5e-4
    n = int(round(t_end / dt))
    m, q_mj, v_mj = mujoco_path(xml, dt, n, every)
    q_us, v_us, tr = our_path(xml, dt, n, every)
    errs = np.array([pose_errors(m, a, b) for a, b in zip(q_us, q_mj)])
    return m, q_mj, q_us, errs, v_mj, v_us, tr


def test_rigid_table_lands_like_mujoco():
    m, q_mj, q_us, errs, v_mj, v_us, tr = compare(rigid_table_xml(), 0.4, 40)
    assert q_mj[0][2] - q_mj[-1][2] > 0.029                   # it fell its 3 cm and stands
    assert np.all(errs < 1e-3), errs
    assert np.all(errs[-1] < 1e-4), errs[-1]
    assert float(np.max(tr.primal)) < 1e-8


@pytest.mark.slow
def test_sprung_quadruped_settles_like_mujoco():
    m, q_mj, q_us, errs, v_mj, v_us, tr = compare(XML.read_text(), 1.0, 100)
    # it touched down and flexed: the trunk ends ~3.3 cm lower (3 cm drop, the rest the legs' spring deflection)
    # and several mm back (the bent legs push it back while the feet slip at touch-down), at rest
    assert 0.031 < q_mj[0][2] - q_mj[-1][2] < 0.036
    assert q_mj[-1][0] < -5e-3
    assert np.max(np.abs(v_mj)) < 1e-4 and np.max(np.abs(v_us)) < 1e-3
    assert np.all(errs < 1e-3), errs                            # within 1 mm all the way
    assert np.all(errs[-1] < 1e-4), errs[-1]                   # and at rest within 0.1 mm
    # every step solved to the solve's own tolerance (NCPSettings.tolerance = 1e-7 × max|g|, g the free constraint
    # velocities: 0.77 m/s at the touch-down), which the solve now stops on: the landing's worst step leaves 3.1e-8
    # m/s (the ADMM loop that used to run on to its cap left less; issue 58)
    assert np.all(np.asarray(tr.converged))
    assert float(np.max(tr.primal)) < 1e-7
