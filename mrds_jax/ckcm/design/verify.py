"""Independent after-the-fact check of a design against the designer's limits.

It does not reuse the smooth constraint functions the optimiser saw (``constraints.py``): attachment
separations come from ``params.validate_params`` (closest pair of the actual points, numpy), the workspace
from ``kinematics.check_pose`` (leg lengths, elevations, cond(C) by SVD) at ``dense`` times more task
samples than the optimiser used, shifted off its grid, the legs' mutual distances from ``geometry`` (numpy
candidate enumeration, not the optimiser's clamped closed form) at those samples, and the strength rule from
the peak force over those dense samples (every leg's masses with per-leg designs).  Each check reports its worst value next to its limit.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import jax

from ..errors import AttachmentError
from ..kinematics import check_pose
from ..params import (CKCMParams, _closest_pair_of_points, base_points, payload_points, per_leg_masses,
                      validate_params)
from .constraints import Limits
from .geometry import closest_legs
from .objectives import forces_in_chunks
from .task import Task


def dense_task(task: Task, dense):
    """``task`` with ``dense`` times as many samples plus one, so that the samples fall off the original grid."""
    return dataclasses.replace(task, samples_per_path=task.samples_per_path * dense + 1)


def verify_design(params: CKCMParams, task: Task, limits: Limits, model="paper", legs="bench", dense=4):
    """{check: {"ok", "worst", "limit", "where"}} for separation, stroke (with margin), elevation, condition and
    strength, plus "all_ok".  Eager; ``params`` carries the task's payload (``DesignResult.params`` does)."""
    limits = jax.tree_util.tree_map(float, limits)
    report = {}
    closest = min((float(_closest_pair_of_points(np.asarray(pts(params))[:, :2])[0]), name)
                  for pts, name in ((payload_points, "payload points A_i"), (base_points, "base points B_i")))
    try:
        validate_params(params, min_separation=limits.min_separation)
        report["separation"] = {"ok": True, "worst": closest[0], "limit": limits.min_separation,
                                "where": f"closest pair: {closest[1]}"}
    except AttachmentError as e:
        report["separation"] = {"ok": False, "worst": closest[0], "limit": limits.min_separation, "where": str(e)}
    t = dense_task(task, dense)
    samples = t.samples(params)
    poses = np.asarray(samples.pose)
    l_min, l_max = (float(v) for v in params.stroke)
    worst = {"stroke": (np.inf, ""), "elevation": (np.inf, ""), "condition": (0.0, "")}
    for k, pose in enumerate(poses):
        try:
            w = check_pose(params, pose, max_condition=np.inf)
        except Exception as e:            # outside the workspace altogether: the stroke check reports it
            worst["stroke"] = (-np.inf, f"sample {k}: {e}")
            continue
        margin = min(float(np.min(w.below_max)), float(np.min(w.above_min)))
        if margin < worst["stroke"][0]:
            worst["stroke"] = (margin, f"sample {k}, legs {np.round(w.lengths, 4).tolist()} m")
        elev = float(np.degrees(np.arcsin(np.min(w.elevation))))
        if elev < worst["elevation"][0]:
            worst["elevation"] = (elev, f"sample {k}")
        if float(w.condition) > worst["condition"][0]:
            worst["condition"] = (float(w.condition), f"sample {k}")
    report["stroke"] = {"ok": worst["stroke"][0] >= limits.stroke_margin, "worst": worst["stroke"][0],
                        "limit": limits.stroke_margin, "where": worst["stroke"][1] + f" (stroke [{l_min:.4g}, {l_max:.4g}] m)"}
    report["elevation"] = {"ok": worst["elevation"][0] >= limits.min_elevation_deg, "worst": worst["elevation"][0],
                           "limit": limits.min_elevation_deg, "where": worst["elevation"][1]}
    report["condition"] = {"ok": worst["condition"][0] <= limits.max_condition, "worst": worst["condition"][0],
                           "limit": limits.max_condition, "where": worst["condition"][1]}
    d, (k, i, j) = closest_legs(params, poses)
    report["crossing"] = {"ok": d >= limits.min_leg_distance, "worst": d, "limit": limits.min_leg_distance,
                          "where": f"legs {i + 1} and {j + 1}, sample {k}"}
    tau = forces_in_chunks(params, samples, task.size, model, legs)[0]   # the optimiser's compiled kernel
    peak = float(np.max(np.abs(tau)))
    m1_req, ms_req = (float(v) for v in limits.strength.required_masses(params, peak))
    m, m1 = (np.asarray(v, float) for v in per_leg_masses(params))
    report["strength"] = {"ok": bool(np.all(m1 >= m1_req) and np.all(m - m1 >= ms_req)),
                          "worst": {"m1": float(m1.min()), "m - m1": float((m - m1).min())},
                          "limit": {"m1": m1_req, "m - m1": ms_req}, "where": f"peak force {peak:.6g} N"}
    report["peak_force_dense"] = peak
    report["all_ok"] = all(v["ok"] for v in report.values() if isinstance(v, dict))
    return report


# check -> (what is measured, its unit, the direction of the limit: ">=" the worst value must reach the limit
# from above, "<=" from below)
CHECKS = {"separation": ("closest attachment points in a platform", "m", ">="),
          "stroke": ("leg length inside its stroke, least margin to either end", "m", ">="),
          "elevation": ("least leg elevation above the base plane", "deg", ">="),
          "condition": ("largest cond(C) along the path", "", "<="),
          "crossing": ("closest two legs along the path", "m", ">="),
          "strength": ("leg part masses against the strength rule at the dense peak force", "kg", ">=")}


def _margin(worst, limit, direction):
    """How far inside its limit a check's worst value lies (negative: violated)."""
    return worst - limit if direction == ">=" else limit - worst


def format_report(report) -> str:
    """One line per check: ok/VIOLATED, what is measured, its worst value, the direction (≥ or ≤) and the limit,
    and the margin (how far inside the limit; negative when violated)."""
    lines = []
    for k, v in report.items():
        if not isinstance(v, dict):
            continue
        what, unit, direction = CHECKS.get(k, (k, "", ">="))
        sign, u = ("≥" if direction == ">=" else "≤"), (f" {unit}" if unit else "")
        if isinstance(v["worst"], dict):        # several quantities against their own limits (strength)
            parts = [f"{q} {v['worst'][q]:.4g}{u} {sign} {v['limit'][q]:.4g}{u} (margin "
                     f"{_margin(v['worst'][q], v['limit'][q], direction):+.3g}{u})" for q in v["worst"]]
            numbers = "; ".join(parts)
        else:
            numbers = (f"worst {v['worst']:.4g}{u} {sign} limit {v['limit']:.4g}{u} "
                       f"(margin {_margin(v['worst'], v['limit'], direction):+.3g}{u})")
        lines.append(f"  {k:<11}{'ok ' if v['ok'] else 'VIOLATED'}  {what}: {numbers}"
                     + (f"; {v['where']}" if v["where"] else ""))
    return "\n".join(lines)
