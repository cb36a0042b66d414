"""Test systems (modules + contacts) and their Pinocchio twins for closed-loop checks."""
import numpy as np
import pinocchio as pin

from robots import Conversion, _pin_joint

LWA = pin.LOCAL_WORLD_ALIGNED
C3, C6 = pin.ContactType.CONTACT_3D, pin.ContactType.CONTACT_6D


class Merged:
    """One Pinocchio model holding several modules side by side (each hanging from the world), in module
    order (each module depth-first, hence the whole model too)."""

    def __init__(self, modules, gravity=None):
        m = pin.Model()
        m.gravity.linear = np.asarray(modules[0].params.gravity if gravity is None else gravity, dtype=float)
        self.jids, self.convs = [], []
        for module in modules:
            t, p = module.topology, module.params
            jids = []
            for i in range(t.n_links):
                parent = 0 if t.parents[i] < 0 else jids[t.parents[i]]
                placement = pin.SE3(np.asarray(p.joint_R[i]), np.asarray(p.joint_p[i]))
                jm = _pin_joint(t.joint_kinds[i], np.asarray(p.axis[i]), np.asarray(p.axis2[i]), np.asarray(p.pitch[i]))
                jid = m.addJoint(parent, jm, placement, f"m{len(self.jids)}_{t.joint_names[i]}")
                m.appendBodyToJoint(jid, pin.Inertia(float(p.mass[i]), np.asarray(p.com[i]),
                                                     np.asarray(p.inertia[i])), pin.SE3.Identity())
                jids.append(jid)
            self.jids.append(jids)
            self.convs.append(Conversion(module))
        self.model = m
        self.modules = modules

    def frame(self, k, name):
        """(joint id, placement in that joint) of module k's operational point ``name``."""
        t, p = self.modules[k].topology, self.modules[k].params
        f = t.frame_index(name)
        return self.jids[k][t.frame_links[f]], pin.SE3(np.asarray(p.frame_R[f]), np.asarray(p.frame_p[f]))

    def q(self, qs):
        return np.concatenate([c.q(q) for c, q in zip(self.convs, qs)])

    def v(self, vs):
        return np.concatenate([c.v(v) for c, v in zip(self.convs, vs)])

    def _split(self, x_pin, perm):
        out, i = [], 0
        for c in self.convs:
            p = getattr(c, perm)
            inv = np.empty(len(p), dtype=int)
            inv[p] = np.arange(len(p))
            out.append(np.asarray(x_pin[i:i + len(p)])[inv])
            i += len(p)
        return out

    def split_v(self, v_pin):
        """Pinocchio velocity-like vector -> our per-module vectors."""
        return self._split(v_pin, "vperm")

    def split_q(self, q_pin):
        """Pinocchio configuration -> our per-module q."""
        return self._split(q_pin, "qperm")


def constraint_model(merged, kind, side1, side2, ref=LWA):
    """RigidConstraintModel between (k, frame) side1 (pin joint1) and side2 (k or None, frame or SE3)."""
    j1, P1 = merged.frame(*side1)
    if side2[0] is None:
        j2, P2 = 0, side2[1]
    else:
        j2, P2 = merged.frame(*side2)
    return pin.RigidConstraintModel(kind, merged.model, j1, P1, j2, P2, ref)


def pin_constraint_dynamics(model, q, v, tau, cms, prox=None):
    data = model.createData()
    cds = [cm.createData() for cm in cms]
    pin.initConstraintDynamics(model, data, cms, cds)
    prox = pin.ProximalSettings() if prox is None else prox
    ddq = pin.constraintDynamics(model, data, q, v, tau, cms, cds, prox).copy()
    J = np.concatenate([pin.getConstraintJacobian(model, data, cm, cd) for cm, cd in zip(cms, cds)])
    return ddq, data.lambda_c.copy(), J


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
