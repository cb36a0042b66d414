"""Export a module or a system to Pinocchio: one ``pin.Model`` plus ``RigidConstraintModel``s for the contacts.

For peer comparisons against Pinocchio's ``aba``/``crba``/``constraintDynamics`` (the tests use it as the
independent reference for every rigid tree and closed chain) and for users moving to or from Pinocchio.

Mapping (:func:`to_pinocchio`): the modules sit side by side in one model, each hanging from the universe, in
system order (each module depth-first, as Pinocchio needs every subtree's joints contiguous). Joint placements
and link inertias are copied as they are (Pinocchio's body frame = our link frame), the joints' armature to
``model.armature`` (in Pinocchio's velocity order), joint limits to ``lower/upperPositionLimit``. Joints: revolute →
``RevoluteUnaligned``, prismatic → ``PrismaticUnaligned``, screw → ``HelicalUnaligned`` (pitch), universal →
``Universal``, spherical → ``Spherical``, free → ``FreeFlyer``; a fixed joint has no Pinocchio joint: its
link's inertia is appended to the parent's joint at the fixed placement and its frames move there.
``planar_free`` has no exact counterpart (Pinocchio's planar joint stores cos/sin) and raises.
Operational points become ``OP_FRAME`` frames named ``<module>/<frame>`` (just ``<frame>`` when a single module
is exported), joints ``<module>/<joint>``.

Contacts: ``spherical`` → ``CONTACT_3D``, ``weld`` → ``CONTACT_6D``, both ``LOCAL_WORLD_ALIGNED``, with
joint1 = the P side and joint2 = the E side, so that Pinocchio's ``lambda_c`` is the force *by E on P*
(world axes, at P's origin; [linear; angular] for welds) — our ``F_EP`` turned to world axes. Other kinds have
no exact ``RigidConstraintModel`` and raise (``contacts="skip"`` leaves them out, listed in ``skipped``);
build special cases with :meth:`PinocchioModel.constraint`.

Conventions (handled by :class:`PinocchioConversion`): quaternions (w, x, y, z) → Pinocchio's (x, y, z, w);
a free joint's velocity [ω; v] (body) → Pinocchio's [v; ω] (body).
"""
from dataclasses import dataclass, field

import numpy as np

from ..validation import InputError


class PinocchioExportError(InputError):
    """A module or contact with no Pinocchio counterpart; the message names it."""


def _pin():
    try:
        import pinocchio
    except ImportError:
        raise ImportError("to_pinocchio needs Pinocchio: pip install pin (or pip install 'mrds-jax[pinocchio]')") \
            from None
    return pinocchio


@dataclass(frozen=True)
class PinocchioConversion:
    """One module's coordinates in Pinocchio's order: ``q_pin = q[qperm]``, ``v_pin = v[vperm] = P v``."""
    qperm: np.ndarray
    vperm: np.ndarray

    @classmethod
    def of(cls, module):
        t = module.topology
        qperm, vperm = [], []
        for kind, qs, vs in zip(t.joint_kinds, t.q_slices, t.v_slices):
            qi, vi = list(range(qs.start, qs.stop)), list(range(vs.start, vs.stop))
            if kind == "spherical":
                qi = qi[1:] + qi[:1]
            elif kind == "free":
                qi = qi[:3] + qi[4:] + qi[3:4]
                vi = vi[3:] + vi[:3]
            qperm += qi
            vperm += vi
        return cls(np.array(qperm, dtype=int), np.array(vperm, dtype=int))

    @property
    def P(self):
        """Velocity permutation matrix: v_pin = P v."""
        return np.eye(len(self.vperm))[self.vperm]

    def q(self, q):
        return np.asarray(q)[self.qperm]

    def v(self, v):
        """Velocities, accelerations and generalized forces alike."""
        return np.asarray(v)[self.vperm]

    def q_from_pin(self, q_pin):
        return _unpermute(q_pin, self.qperm)

    def v_from_pin(self, v_pin):
        return _unpermute(v_pin, self.vperm)


def _unpermute(x, perm):
    out = np.empty(len(perm))
    out[perm] = np.asarray(x)
    return out


@dataclass
class PinocchioModel:
    """A Pinocchio twin of modules (and contacts): see the module docstring.

    ``model``: the ``pin.Model``; ``constraints``: ``RigidConstraintModel`` per exported contact (names in
    ``constraint_names``; ``skipped``: contacts left out); ``joint_ids[k][i]``: Pinocchio joint carrying
    module k's link i (a fixed link: its parent's); ``conversions[k]``: module k's coordinate map."""
    model: object
    module_names: tuple
    modules: tuple
    joint_ids: tuple
    link_placements: tuple     # per module, per link: placement of our link frame in its Pinocchio joint
    conversions: tuple
    constraints: list = field(default_factory=list)
    constraint_names: tuple = ()
    skipped: tuple = ()

    # -- names and frames
    def module_index(self, key):
        if isinstance(key, (int, np.integer)):
            return int(key)
        if key not in self.module_names:
            raise PinocchioExportError(f"no module named {key!r}; modules are {list(self.module_names)}")
        return self.module_names.index(key)

    def frame(self, module, name):
        """(joint id, placement in that joint) of ``module``'s operational point ``name``."""
        k = self.module_index(module)
        pin = _pin()
        t, p = self.modules[k].topology, self.modules[k].params
        f = t.frame_index(name)
        link = t.frame_links[f]
        return self.joint_ids[k][link], self.link_placements[k][link] * pin.SE3(np.asarray(p.frame_R[f], float),
                                                                               np.asarray(p.frame_p[f], float))

    # -- coordinates: lists with one array per module <-> Pinocchio vectors
    def q(self, qs):
        return np.concatenate([c.q(q) for c, q in zip(self.conversions, qs)])

    def v(self, vs):
        return np.concatenate([c.v(v) for c, v in zip(self.conversions, vs)])

    def split_q(self, q_pin):
        """Pinocchio configuration → our per-module q."""
        return self._split(q_pin, "qperm", "q_from_pin")

    def split_v(self, v_pin):
        """Pinocchio velocity-like vector (v, a, τ) → our per-module vectors."""
        return self._split(v_pin, "vperm", "v_from_pin")

    def _split(self, x, perm, convert):
        out, i = [], 0
        for c in self.conversions:
            n = len(getattr(c, perm))
            out.append(getattr(c, convert)(np.asarray(x)[i:i + n]))
            i += n
        return out

    # -- constraints
    def constraint(self, kind, side1, side2, reference=None):
        """A ``RigidConstraintModel`` of ``kind`` ("3d", "6d" or a ``pin.ContactType``) between side1 (joint1)
        and side2 (joint2); a side is ``(module, frame)`` or ``(None, pin.SE3)`` (a placement in the world)."""
        pin = _pin()
        kind = {"3d": pin.ContactType.CONTACT_3D, "6d": pin.ContactType.CONTACT_6D}.get(kind, kind)
        reference = pin.LOCAL_WORLD_ALIGNED if reference is None else reference
        (j1, P1), (j2, P2) = (self._side(s) for s in (side1, side2))
        return pin.RigidConstraintModel(kind, self.model, j1, P1, j2, P2, reference)

    def _side(self, side):
        module, where = side
        return (0, where) if module is None else self.frame(module, where)

    def constraint_dynamics(self, q, v, tau, constraints=None, prox=None):
        """Pinocchio's ``constraintDynamics`` at Pinocchio-ordered (q, v, τ): (q̈, λ, constraint Jacobian)."""
        pin = _pin()
        cms = self.constraints if constraints is None else constraints
        data = self.model.createData()
        cds = [cm.createData() for cm in cms]
        pin.initConstraintDynamics(self.model, data, cms, cds)
        prox = pin.ProximalSettings() if prox is None else prox
        ddq = pin.constraintDynamics(self.model, data, q, v, tau, cms, cds, prox).copy()
        J = np.concatenate([pin.getConstraintJacobian(self.model, data, cm, cd) for cm, cd in zip(cms, cds)])
        return ddq, data.lambda_c.copy(), J


def _pin_joint(pin, kind, axis, axis2, pitch, where):
    axis, axis2 = np.asarray(axis, float), np.asarray(axis2, float)
    if kind == "revolute":
        return pin.JointModelRevoluteUnaligned(*axis)
    if kind == "prismatic":
        return pin.JointModelPrismaticUnaligned(*axis)
    if kind == "screw":
        return pin.JointModelHelicalUnaligned(axis, float(pitch))
    if kind == "universal":
        return pin.JointModelUniversal(axis, axis2)
    if kind == "spherical":
        return pin.JointModelSpherical()
    if kind == "free":
        return pin.JointModelFreeFlyer()
    raise PinocchioExportError(f"{where}: joint kind {kind!r} has no Pinocchio counterpart")


def _modules_of(source):
    """(names, modules, contacts) of a System, a Module, a dict name → Module or a sequence of modules."""
    if hasattr(source, "modules") and hasattr(source, "contacts"):
        return tuple(source.module_names), tuple(source.modules), tuple(source.contacts)
    if hasattr(source, "topology") and hasattr(source, "params"):
        return (None,), (source,), ()
    if isinstance(source, dict):
        return tuple(source), tuple(source.values()), ()
    modules = tuple(source)
    return tuple(f"m{k}" for k in range(len(modules))), modules, ()


def _add_module(pin, model, name, module):
    """Append one module's joints, bodies and frames; (joint ids, link placements) per link."""
    t, p = module.topology, module.params
    prefix = "" if name is None else f"{name}/"
    where = "module" if name is None else f"module {name!r}"
    if not hasattr(t, "joint_kinds"):
        raise PinocchioExportError(f"{where}: only rigid-tree modules can be exported (got {type(module).__name__})")
    jids, placements = [], []
    for i in range(t.n_links):
        parent = t.parents[i]
        parent_jid = 0 if parent < 0 else jids[parent]
        parent_M = pin.SE3.Identity() if parent < 0 else placements[parent]
        M = parent_M * pin.SE3(np.asarray(p.joint_R[i], float), np.asarray(p.joint_p[i], float))
        kind = t.joint_kinds[i]
        if kind == "fixed":
            jid, link_M = parent_jid, M
        else:
            jid = model.addJoint(parent_jid, _pin_joint(pin, kind, p.axis[i], p.axis2[i], p.pitch[i],
                                                        f"{where}, joint {t.joint_names[i]!r}"),
                                 M, prefix + t.joint_names[i])
            link_M = pin.SE3.Identity()
        model.appendBodyToJoint(jid, pin.Inertia(float(p.mass[i]), np.asarray(p.com[i], float),
                                                 np.asarray(p.inertia[i], float)), link_M)
        jids.append(jid)
        placements.append(link_M)
    for f, frame in enumerate(t.frame_names):
        link = t.frame_links[f]
        M = placements[link] * pin.SE3(np.asarray(p.frame_R[f], float), np.asarray(p.frame_p[f], float))
        model.addFrame(pin.Frame(prefix + frame, jids[link], M, pin.FrameType.OP_FRAME))
    return tuple(jids), tuple(placements)


def _contact_sides(twin, contact):
    """(side1 = P, side2 = E) for :meth:`PinocchioModel.constraint`: ground sides become world placements."""
    pin = _pin()
    ground = (None, pin.SE3(np.asarray(contact.ground_R, float), np.asarray(contact.ground_p, float)))
    return tuple(ground if s is None else s for s in (contact.P, contact.E))


_CONTACT_TYPES = {"spherical": "3d", "weld": "6d"}


def to_pinocchio(source, contacts="all", gravity=None):
    """Pinocchio twin of ``source`` (a System, a Module, a dict name → Module, or a sequence of modules):
    a :class:`PinocchioModel` (see the module docstring for the mapping).

    ``contacts``: "all" (a System's contacts must all be spherical or weld, else
    :class:`PinocchioExportError` naming the contact), "skip" (others left out, named in ``skipped``) or
    "none". ``gravity``: defaults to the first module's."""
    pin = _pin()
    names, modules, system_contacts = _modules_of(source)
    if contacts not in ("all", "skip", "none"):
        raise PinocchioExportError(f"contacts must be 'all', 'skip' or 'none', got {contacts!r}")
    model = pin.Model()
    g = modules[0].params.gravity if gravity is None else gravity
    model.gravity.linear = np.asarray(g, dtype=float)
    jids, placements = zip(*[_add_module(pin, model, n, m) for n, m in zip(names, modules)])
    twin = PinocchioModel(model, names, modules, jids, placements,
                          tuple(PinocchioConversion.of(m) for m in modules))
    model.armature = twin.v([np.asarray(m.params.armature, dtype=float) for m in modules])
    lower, upper = np.array(model.lowerPositionLimit), np.array(model.upperPositionLimit)
    q_at = np.cumsum([0] + [m.nq for m in modules])
    for k, m in enumerate(modules):
        t = getattr(m, "topology", None)
        for j, lim in enumerate(getattr(t, "joint_limits", ()) or ()):
            if lim is not None:     # a one-coordinate joint: its q keeps its place in Pinocchio's order
                i = int(np.flatnonzero(twin.conversions[k].qperm == t.q_slices[j].start)[0]) + q_at[k]
                lower[i], upper[i] = lim
    model.lowerPositionLimit, model.upperPositionLimit = lower, upper
    cms, kept, skipped = [], [], []
    for c in system_contacts if contacts != "none" else ():
        if c.kind not in _CONTACT_TYPES:
            if contacts == "skip":
                skipped.append(c.name)
                continue
            raise PinocchioExportError(f"contact {c.name!r} of kind {c.kind!r} has no Pinocchio RigidConstraintModel "
                                       f"(only {sorted(_CONTACT_TYPES)}); pass contacts='skip' to leave it out")
        if c.excitation is not None or c.applied is not None:
            raise PinocchioExportError(f"contact {c.name!r}: excited modes or applied free-direction forces have no "
                                       "Pinocchio RigidConstraintModel counterpart")
        cms.append(twin.constraint(_CONTACT_TYPES[c.kind], *_contact_sides(twin, c)))
        kept.append(c.name)
    couplings = tuple(c.name for c in getattr(source, "couplings", ())) if contacts != "none" else ()
    if couplings and contacts == "all":
        raise PinocchioExportError(f"joint couplings {list(couplings)} have no Pinocchio RigidConstraintModel; pass "
                                   "contacts='skip' to leave them out")
    twin.constraints, twin.constraint_names, twin.skipped = cms, tuple(kept), tuple(skipped) + couplings
    return twin
