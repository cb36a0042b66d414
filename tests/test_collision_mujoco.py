"""The narrow phase against MuJoCo's own (``mujoco`` package, its mjc_* collision functions), float64.

For every pair kind both engines collide: seeded random sizes and poses, a two-geom MJCF (free bodies, a plane in
the world body; margin 0.3 so that separated pairs within 0.3 are reported too), ``mj_forward``, and MuJoCo's
``data.contact`` against our slots: the minimum gap, the normal at it (MuJoCo's ``frame[:3]`` points from its
geom1 to its geom2, as ours does; flipped where MuJoCo orders the pair the other way) and the point at it (the
midpoint of the surface points in both). Both compute exact distances, so they agree to round-off.

Box–box: MuJoCo's separating-axis result is exact when the boxes penetrate (its depth is the least translation
that separates them, as ours), but for separated boxes it reports the largest axis separation, a lower bound of
the distance; separated box pairs are therefore checked against the exact distance of two boxes as a bounded
least-squares problem (``scipy.optimize.lsq_linear``: min |R1 u + p1 - R2 w - p2| over u, w in the boxes).
"""
import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.optimize import lsq_linear

from mrds_jax.collision import PRECISE, collide

COLLIDE = jax.jit(functools.partial(collide, settings=PRECISE), static_argnums=(0, 1))   # the 1e-9 route
MARGIN = 0.3
CASES = 40
PAIRS = [("plane", "sphere"), ("plane", "capsule"), ("plane", "box"), ("plane", "cylinder"), ("sphere", "sphere"),
         ("sphere", "capsule"), ("sphere", "box"), ("sphere", "cylinder"), ("capsule", "capsule"),
         ("capsule", "box"), ("box", "capsule"), ("cylinder", "sphere")]
SIZE_MASK = {"plane": (0, 0, 0), "sphere": (1, 0, 0), "capsule": (1, 1, 0), "cylinder": (1, 1, 0), "box": (1, 1, 1),
             "ellipsoid": (1, 1, 1)}


def _mjcf(k1, s1, k2, s2, option=""):
    """Two geoms in MuJoCo's XML (the first fixed if a plane, else free), with an ``<option>`` element if given."""
    def geom(n, kind, size):
        used = " ".join(repr(float(x)) for x, m in zip(size, SIZE_MASK[kind]) if m) or "0 0 1"
        return f'<geom name="g{n}" type="{kind}" size="{used}" margin="{MARGIN}"/>'
    first = geom(1, k1, s1) if k1 == "plane" else f"<body><freejoint/>{geom(1, k1, s1)}</body>"
    return f"<mujoco>{option}<worldbody>{first}<body><freejoint/>{geom(2, k2, s2)}</body></worldbody></mujoco>"


def _rotation(q):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, q)
    return R.reshape(3, 3)


def _ours(k1, k2, R1, p1, s1, R2, p2, s2):
    out = COLLIDE(k1, k2, *(jnp.asarray(x) for x in (R1, p1, s1, R2, p2, s2)))
    gap = np.where(np.asarray(out.valid), np.asarray(out.gap), np.inf)
    k = int(np.argmin(gap))
    return gap[k], np.asarray(out.frame[k, 0]), np.asarray(out.point[k])


def _mujoco(k1, s1, k2, s2, pose1, pose2):
    model = mujoco.MjModel.from_xml_string(_mjcf(k1, s1, k2, s2))
    data = mujoco.MjData(model)
    data.qpos[:] = pose2 if k1 == "plane" else np.r_[pose1, pose2]
    mujoco.mj_forward(model, data)
    if data.ncon == 0:
        return None
    contacts = data.contact[:data.ncon]
    j = int(np.argmin([c.dist for c in contacts]))
    flip = -1.0 if contacts[j].geom1 != model.geom("g1").id else 1.0
    return contacts[j].dist, flip * contacts[j].frame[:3], contacts[j].pos.copy()


def _sample(rng, k1, k2):
    s1 = rng.uniform(0.1, 0.5, 3) * SIZE_MASK[k1]
    s2 = rng.uniform(0.1, 0.5, 3) * SIZE_MASK[k2]
    q1, q2 = (q / np.linalg.norm(q) for q in rng.normal(size=(2, 4)))
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    p1 = rng.normal(size=3) * 0.1
    if k1 == "plane":
        q1, p1, direction = np.array([1.0, 0, 0, 0]), np.zeros(3), np.array([0.0, 0.0, 1.0])
    return s1, s2, q1, q2, p1, direction


def _place(distance_of, target):
    """The distance t along the sampled direction at which ``distance_of(t)`` (increasing there) = target."""
    lo, hi = 0.0, 3.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if distance_of(mid) < target else (lo, mid)
    return lo


@pytest.mark.parametrize("k1,k2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_narrow_phase_matches_mujoco(k1, k2):
    rng = np.random.default_rng(sum(map(ord, k1 + k2)))
    worst, signs = np.zeros(3), set()
    for _ in range(CASES):
        s1, s2, q1, q2, p1, direction = _sample(rng, k1, k2)
        R1, R2 = _rotation(q1), _rotation(q2)
        if "box" in (k1, k2) and "capsule" in (k1, k2):
            # exact while the capsule's axis stays out of the box (penetration below its radius)
            radius = (s1 if k1 == "capsule" else s2)[0]
            t = _place(lambda t: _ours(k1, k2, R1, p1, s1, R2, p1 + t * direction, s2)[0],
                       rng.uniform(-0.5 * radius, 0.2))
        else:
            t = rng.uniform(0.0, 1.0)
        p2 = p1 + t * direction
        reference = _mujoco(k1, s1, k2, s2, np.r_[p1, q1], np.r_[p2, q2])
        gap, normal, point = _ours(k1, k2, R1, p1, s1, R2, p2, s2)
        if reference is None:
            assert gap > MARGIN - 1e-9
            continue
        dist, mj_normal, mj_point = reference
        signs.add(bool(dist < 0))
        worst = np.maximum(worst, [abs(gap - dist), np.linalg.norm(normal - mj_normal),
                                   np.linalg.norm(point - mj_point)])
    assert signs == {True, False}, "both separated and penetrating cases"
    assert np.all(worst < 1e-9), f"{k1}-{k2}: worst |Δgap|, |Δnormal|, |Δpoint| = {worst}"


def _box_separation(R1, p1, h1, R2, p2, h2):
    """The largest separation over the 15 axes of the separating-axis test (exact signed distance when < 0)."""
    a, b = R1.T, R2.T
    best = -np.inf
    for u in list(a) + list(b) + [np.cross(x, y) for x in a for y in b]:
        if np.linalg.norm(u) > 1e-9:
            u = u / np.linalg.norm(u)
            best = max(best, abs(u @ (p2 - p1)) - h1 @ np.abs(a @ u) - h2 @ np.abs(b @ u))
    return best


def test_box_box_matches_mujoco_penetrating_and_exact_distance_separated():
    rng = np.random.default_rng(7)
    worst_mj, worst_lsq, counts = np.zeros(2), 0.0, [0, 0]
    for case in range(2 * CASES):
        s1, s2, q1, q2, p1, direction = _sample(rng, "box", "box")
        R1, R2 = _rotation(q1), _rotation(q2)
        target = rng.uniform(-0.05, -0.001) if case % 2 else rng.uniform(0.001, 0.2)
        p2 = p1 + _place(lambda t: _box_separation(R1, p1, s1, R2, p1 + t * direction, s2), target) * direction
        gap, normal, _ = _ours("box", "box", R1, p1, s1, R2, p2, s2)
        if target < 0:
            dist, mj_normal, _ = _mujoco("box", s1, "box", s2, np.r_[p1, q1], np.r_[p2, q2])
            worst_mj = np.maximum(worst_mj, [abs(gap - dist), np.linalg.norm(normal - mj_normal)])
        else:
            fit = lsq_linear(np.hstack([R1, -R2]), p2 - p1, bounds=(-np.r_[s1, s2], np.r_[s1, s2]), tol=1e-15,
                             lsmr_tol="auto", method="bvls")
            worst_lsq = max(worst_lsq, abs(gap - np.linalg.norm(fit.fun)))
        counts[target < 0] += 1
    assert worst_mj[0] < 1e-9 and worst_mj[1] < 1e-9, worst_mj
    assert worst_lsq < 1e-9, worst_lsq
