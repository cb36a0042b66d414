"""Eager numpy geometry of a design along its task, written independently of the differentiable constraints
(``constraints.py``): leg lengths and elevations (Nguyen & Pooran eq. 9-11, 28) and the distance between legs.  It checks a
start design before anything compiles (``problem.check_start``) and an optimum after the fact (``verify``).

The segment distance here enumerates the candidates of the convex problem min |p1 + s d1 − p2 − t d2| over
the unit square — the interior stationary point and the minimum along each of the four edges — and takes the
smallest; ``constraints.segment_distance`` clamps Ericson's closed form instead.
"""
from __future__ import annotations

import numpy as np

from ..params import CKCMParams, base_points, payload_points

PAIRS = np.triu_indices(6, 1)


def rotation_zyx(pose):
    """R = R_z(α) R_y(β) R_x(γ) of poses (..., 6) (Nguyen & Pooran eq. 19), numpy: (..., 3, 3)."""
    a, b, g = pose[..., 3], pose[..., 4], pose[..., 5]
    ca, sa, cb, sb, cg, sg = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(g), np.sin(g)
    return np.stack([np.stack([ca * cb, ca * sb * sg - sa * cg, ca * sb * cg + sa * sg], -1),
                     np.stack([sa * cb, sa * sb * sg + ca * cg, sa * sb * cg - ca * sg], -1),
                     np.stack([-sb, cb * sg, cb * cg], -1)], -2)


def leg_segments(params: CKCMParams, poses):
    """(B, A): the base joints (6, 3) and the payload joints (K, 6, 3) in {B} at poses (K, 6) (Nguyen & Pooran eq. 9-10)."""
    a = np.asarray(payload_points(params), float)
    b = np.asarray(base_points(params), float)
    poses = np.asarray(poses, float)
    A = np.einsum("kij,nj->kni", rotation_zyx(poses), a) + poses[:, None, :3]
    return b, A


def leg_lengths_and_elevations(params: CKCMParams, poses):
    """Leg lengths l_i (K, 6) and sin θ_i = q_iz / l_i (K, 6) at poses (K, 6) (Nguyen & Pooran eq. 11, 28)."""
    b, A = leg_segments(params, poses)
    q = A - b
    l = np.linalg.norm(q, axis=-1)
    return l, q[..., 2] / l


def _point_to_segment(p, a, d):
    """Parameter t in [0, 1] of the point of segment a + t d nearest p (..., 3)."""
    return np.clip(np.sum((p - a) * d, -1) / np.sum(d * d, -1), 0.0, 1.0)


def segment_distances(p1, q1, p2, q2):
    """Distances between segments p1 q1 and p2 q2 (..., 3) by candidate enumeration (module docstring)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b = np.sum(d1 * d1, -1), np.sum(d2 * d2, -1), np.sum(d1 * d2, -1)
    c, f = np.sum(d1 * r, -1), np.sum(d2 * r, -1)
    det = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s_in, t_in = (b * f - c * e) / det, (a * f - b * c) / det
    inside = (det > 1e-12 * a * e) & (s_in >= 0) & (s_in <= 1) & (t_in >= 0) & (t_in <= 1)
    cand = [np.where(inside, np.linalg.norm(r + np.nan_to_num(s_in)[..., None] * d1
                                            - np.nan_to_num(t_in)[..., None] * d2, axis=-1), np.inf)]
    for s_end in (0.0, 1.0):                     # edges s = 0, 1: nearest point of segment 2
        p = p1 + s_end * d1
        cand.append(np.linalg.norm(p - p2 - _point_to_segment(p, p2, d2)[..., None] * d2, axis=-1))
    for t_end in (0.0, 1.0):                     # edges t = 0, 1: nearest point of segment 1
        p = p2 + t_end * d2
        cand.append(np.linalg.norm(p - p1 - _point_to_segment(p, p1, d1)[..., None] * d1, axis=-1))
    return np.min(np.stack(cand), axis=0)


def leg_pair_distances(params: CKCMParams, poses):
    """Distances (K, 15) between every pair of legs (segments B_i A_i) at poses (K, 6)."""
    b, A = leg_segments(params, poses)
    i, j = PAIRS
    B = np.broadcast_to(b, A.shape)
    return segment_distances(B[:, i], A[:, i], B[:, j], A[:, j])


def closest_legs(params: CKCMParams, poses):
    """(distance, (sample k, leg i, leg j)) of the closest pair of legs over poses (K, 6), legs 0-based."""
    d = leg_pair_distances(params, poses)
    k, p = np.unravel_index(np.argmin(d), d.shape)
    return float(d[k, p]), (int(k), int(PAIRS[0][p]), int(PAIRS[1][p]))
