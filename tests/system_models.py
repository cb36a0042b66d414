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

    def split_v(self, v_pin):
        """Pinocchio velocity-like vector -> our per-module vectors."""
        out, i = [], 0
        for c in self.convs:
            n = len(c.vperm)
            inv = np.empty(n, dtype=int)
            inv[c.vperm] = np.arange(n)
            out.append(np.asarray(v_pin[i:i + n])[inv])
            i += n
        return out


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
