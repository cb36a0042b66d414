"""Helpers for closed-loop checks against Pinocchio (the Pinocchio twins themselves: ``mrds_jax.export.to_pinocchio``)."""
import numpy as np
import pinocchio as pin

LWA = pin.LOCAL_WORLD_ALIGNED


def null_space_velocity(J, rng, nv):
    _, s, Vt = np.linalg.svd(J)
    N = Vt[(s > 1e-9).sum():].T
    return N @ (N.T @ rng.standard_normal(nv))


def to_pin_quat(q_wxyz):
    return np.concatenate([q_wxyz[1:], q_wxyz[:1]])


def from_se3(M):
    """Our free-joint q = [x, y, z, w, qx, qy, qz] of a placement."""
    xyzq = pin.SE3ToXYZQUAT(M)
    return np.concatenate([xyzq[:3], xyzq[6:], xyzq[3:6]])


# ----------------------------------------------------------------------------- CKCM Stewart platform
def ckcm_geometry():
    """Nguyen & Pooran eq. 2-4, 58 as in /work/shared/bench/README.md: base points B_i (r_B = 0.8 m,
    Λ = 0, 94, 120, 214, 240, 334 deg), payload points A_i (r_A = 0.7 m, λ = 0, 30, 120, 150, 240, 270 deg),
    nominal height 1 m."""
    lam_B = np.deg2rad([0, 94, 120, 214, 240, 334])
    lam_A = np.deg2rad([0, 30, 120, 150, 240, 270])
    B = np.stack([0.8 * np.cos(lam_B), 0.8 * np.sin(lam_B), np.zeros(6)], axis=1)
    A = np.stack([0.7 * np.cos(lam_A), 0.7 * np.sin(lam_A), np.zeros(6)], axis=1)
    return B, A, 1.0


def leg_frame(B_i, A_i_world):
    """Leg frame at B_i: z along the nominal leg, x horizontal (x = normalize(e_z x u))."""
    u = (A_i_world - B_i) / np.linalg.norm(A_i_world - B_i)
    x = np.cross([0, 0, 1.0], u)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(u, x), u], axis=1)


def ckcm_modules():
    """(six leg modules, payload module) of the package builder ``mrds_jax.ckcm.multibody.build_ckcm_system`` at
    the nominal parameters (the bench model): legs universal (x then y) + prismatic (z) from the base, tip frame
    at A_i; payload free, 30 kg disc, operational points A1..A6."""
    from mrds_jax import ckcm
    system = ckcm.multibody.build_ckcm_system(ckcm.nominal())
    return list(system.modules[:6]), system.modules[6]


def ckcm_leg_q(leg, A_world):
    """Universal angles and prismatic coordinate that put a leg's tip at A_world."""
    p = leg.params
    R0, B = np.asarray(p.joint_R[0]), np.asarray(p.joint_p[0])
    u = R0.T @ (A_world - B)
    n = u / np.linalg.norm(u)
    b, a = np.arcsin(n[0]), np.arctan2(-n[1], n[2])
    return np.array([a, b, np.linalg.norm(u) - float(p.joint_p[1][2])])
