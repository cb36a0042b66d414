"""Export a module or a system to MuJoCo MJCF, for peer comparisons (MuJoCo, MJX) and for viewing.

Mapping: each module is a chain of nested bodies under the world body; link frames become body frames
(``pos``/``quat`` = joint placement), inertias become ``<inertial>`` (mass, centre of mass, full inertia),
operational points become sites named ``<module>/<frame>``.
Joints: revolute → hinge, prismatic → slide, universal → two hinges in one body (MuJoCo applies them in
order, the second about the once-rotated axis, as ours), spherical → ball (quaternion w, x, y, z as
ours), free → free joint; a chain of massless links (several joints of one body, as ``load_mjcf`` reads them) →
one body with several joints, each at its anchor; nonzero armature → the joint's ``armature`` (one value per
MuJoCo joint); joint limits of hinges and slides → ``range``. Screw and planar_free joints have no MuJoCo equivalent and raise.
Contacts: ``weld`` → equality weld, ``spherical`` → equality connect (site-based); other kinds raise.
Joint couplings (:mod:`mrds_jax.contacts.coupling`, (u − u₀) = P(w − w₀)): one joint per side with coefficient 1
→ ``<equality joint joint1 joint2 polycoef>``, otherwise fixed tendons ``<coupling>/u`` and ``<coupling>/w``
(``coef`` = the measures' coefficients) and ``<equality tendon>``. MuJoCo measures both sides from its ``qpos0``
(``tendon_length0``), zero for the exported hinges and slides (no ``ref``), so the polynomial is re-expressed
about zero, Q(x) = u₀ + P(x − w₀) (:func:`polycoef_about_zero`); MuJoCo's residual ``efc_pos`` is then our g.
MuJoCo's constraints are soft (solref/solimp), so a closed loop exported here drifts and its accelerations
differ from the exact ones; open modules match exactly (tested).

Conventions differ for free joints (allowed at roots only, as in MuJoCo): MuJoCo's qpos is the body's
world pose (the joint placement is folded in), qvel = [v_world; ω_body], ours [ω_body; v_body];
:func:`mujoco_state` and :func:`from_mujoco_acceleration` convert.
"""
import numpy as np

from ..spatial import quat_to_rotation, rotation_to_quat

_JOINTS = {"revolute": "hinge", "prismatic": "slide"}


def _fmt(x):
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def _quat(R):
    return _fmt(np.asarray(rotation_to_quat(np.asarray(R))))


def _armature(arm, module=None, joint=None):
    """The ``armature`` attribute of an MJCF joint (empty when zero). MuJoCo has one armature per joint, the
    same for each of its degrees of freedom: a ball or free joint with unequal values raises."""
    arm = np.asarray(arm, dtype=float)
    if not np.any(arm):
        return ""
    if np.ptp(arm) != 0:
        raise ValueError(f"module {module!r}: joint {joint!r} has unequal armature {arm} on its degrees of freedom; "
                         "MuJoCo has one armature per joint")
    return f' armature="{arm[0]:.17g}"'


def _module_bodies(name, module, indent):
    t, p = module.topology, module.params
    children = {i: [] for i in range(-1, t.n_links)}
    for i, parent in enumerate(t.parents):
        children[parent].append(i)
    frames = {i: [] for i in range(t.n_links)}
    for f, link in enumerate(t.frame_links):
        frames[link].append(f)
    lines = []

    def chain_of(i):
        """Links [i, …] written as one MuJoCo body: i and, while the last is massless (a frame between several
        joints of one body: MuJoCo wants mass in every moving body), its only child, placed without rotation
        (MuJoCo composes a body's joints with no fixed rotation between them), the last one with mass."""
        chain = [i]
        while float(p.mass[chain[-1]]) == 0.0:
            last = chain[-1]
            below = children[last]
            if len(below) != 1 or frames[last] or not np.allclose(np.asarray(p.joint_R[below[0]]), np.eye(3),
                                                                   rtol=0, atol=1e-12):
                raise ValueError(f"module {name!r}: massless link {t.link_names[last]!r} cannot be written as part "
                                 "of one MuJoCo body with several joints: it needs exactly one child link, placed "
                                 "without rotation, and no operational point (MuJoCo requires mass in every moving "
                                 "body)")
            chain.append(below[0])
        return chain

    def joint_lines(i, pad, anchor):
        """The MJCF joint(s) of link i, about ``anchor`` in the body frame."""
        kind = t.joint_kinds[i]
        jname = f"{name}/{t.joint_names[i]}"
        arm = np.asarray(p.armature)[t.v_slices[i]]
        pos = f' pos="{_fmt(anchor)}"' if np.any(anchor != 0) else ""
        if kind in _JOINTS:
            lim = t.joint_limits[i] if t.joint_limits else None
            rng = "" if lim is None else f' limited="true" range="{_fmt(lim)}"'
            lines.append(f'{pad}  <joint name="{jname}" type="{_JOINTS[kind]}"{pos} axis="{_fmt(p.axis[i])}"'
                         f'{_armature(arm)}{rng}/>')
        elif kind == "universal":
            lines.append(f'{pad}  <joint name="{jname}_1" type="hinge"{pos} axis="{_fmt(p.axis[i])}"'
                         f'{_armature(arm[:1])}/>')
            lines.append(f'{pad}  <joint name="{jname}_2" type="hinge"{pos} axis="{_fmt(p.axis2[i])}"'
                         f'{_armature(arm[1:])}/>')
        elif kind == "spherical":
            lines.append(f'{pad}  <joint name="{jname}" type="ball"{pos}{_armature(arm, name, t.joint_names[i])}/>')
        elif kind == "free":
            if t.parents[i] >= 0:
                raise ValueError(f"module {name!r}: free joint {t.joint_names[i]!r} is not at a root; MuJoCo "
                                 "allows free joints only on top-level bodies")
            lines.append(f'{pad}  <joint name="{jname}" type="free"{_armature(arm, name, t.joint_names[i])}/>')
        elif kind != "fixed":
            raise ValueError(f"module {name!r}: joint {t.joint_names[i]!r} of kind {kind!r} has no MJCF equivalent")

    def body(i, depth, shift):
        """Links ``chain_of(i)`` as one body. MuJoCo composes its joints in order, each about its anchor pₖ in the
        body frame (``mj_kinematics``): T = B Πₖ Trans(pₖ) Jₖ Trans(−pₖ); link k of the chain sits at
        Trans(tₖ) after link k − 1, so p₀ = 0, pₖ = pₖ₋₁ + tₖ, and the body frame is the last link's moved by
        −p_last (its inertial, sites and children shift by +p_last; ``shift`` is the parent body's)."""
        pad = " " * (indent + 2 * depth)
        chain = chain_of(i)
        last = chain[-1]
        lines.append(f'{pad}<body name="{name}/{t.link_names[last]}" pos="{_fmt(np.asarray(p.joint_p[i]) + shift)}" '
                     f'quat="{_quat(p.joint_R[i])}">')
        anchor = np.zeros(3)
        for k, link in enumerate(chain):
            anchor = anchor + (np.asarray(p.joint_p[link], dtype=float) if k else 0.0)
            joint_lines(link, pad, anchor)
        I = np.asarray(p.inertia[last])
        lines.append(f'{pad}  <inertial pos="{_fmt(np.asarray(p.com[last]) + anchor)}" '
                     f'mass="{float(p.mass[last]):.17g}" '
                     f'fullinertia="{_fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])}"/>')
        for f in frames[last]:
            lines.append(f'{pad}  <site name="{name}/{t.frame_names[f]}" '
                         f'pos="{_fmt(np.asarray(p.frame_p[f]) + anchor)}" quat="{_quat(p.frame_R[f])}"/>')
        for c in children[last]:
            body(c, depth + 1, anchor)
        lines.append(f"{pad}</body>")

    for root in children[-1]:
        body(root, 0, np.zeros(3))
    return lines


def to_mjcf(modules, contacts=(), timestep=1e-3, gravity=None, model_name="mrds_jax"):
    """MJCF text for modules (a dict name → Module, or a System) and contacts."""
    couplings = ()
    if hasattr(modules, "modules") and hasattr(modules, "contacts"):
        system = modules
        couplings = tuple(getattr(system, "couplings", ()))
        modules = dict(zip(system.module_names, system.modules))
        contacts = system.contacts
    if not isinstance(modules, dict):
        modules = {f"m{k}": m for k, m in enumerate(modules)}
    first = next(iter(modules.values()))
    g = np.asarray(first.params.gravity) if gravity is None else np.asarray(gravity)
    lines = [f'<mujoco model="{model_name}">', '  <compiler angle="radian" autolimits="true"/>',
             f'  <option timestep="{timestep:g}" gravity="{_fmt(g)}"/>', "  <worldbody>"]
    ground_sites, eq = [], []
    for c in contacts:
        sides = []
        for which, side in (("E", c.E), ("P", c.P)):
            if side is None:
                site = f"ground/{c.name}_{which}"
                ground_sites.append(f'    <site name="{site}" pos="{_fmt(c.ground_p)}" quat="{_quat(c.ground_R)}"/>')
            else:
                mod = side[0] if isinstance(side[0], str) else list(modules)[side[0]]
                site = f"{mod}/{side[1]}"
            sides.append(site)
        if c.kind in ("weld", "rigid_grasp"):
            eq.append(f'    <weld name="{c.name}" site1="{sides[0]}" site2="{sides[1]}"/>')
        elif c.kind == "spherical":
            eq.append(f'    <connect name="{c.name}" site1="{sides[0]}" site2="{sides[1]}"/>')
        else:
            raise ValueError(f"contact {c.name!r} of kind {c.kind!r} has no MJCF equality equivalent")
    lines += ground_sites
    for name, module in modules.items():
        lines += _module_bodies(name, module, 4)
    lines.append("  </worldbody>")
    tendons = []
    for c in couplings:
        t, e = _coupling_elements(c, modules)
        tendons += t
        eq.append(e)
    if tendons:
        lines += ["  <tendon>"] + tendons + ["  </tendon>"]
    if eq:
        lines += ["  <equality>"] + eq + ["  </equality>"]
    lines.append("</mujoco>")
    return "\n".join(lines)


def polycoef_about_zero(coupling):
    """MuJoCo's five ``polycoef`` b₀ … b₄ of Q(x) = u₀ + P(x − w₀), the coupling (u − u₀) = P(w − w₀) as
    u = Q(w) (both measured from zero): bₖ = Σₙ₌ₖ aₙ C(n, k) (−w₀)ⁿ⁻ᵏ, plus u₀ in b₀ (binomial expansion)."""
    from math import comb
    a = np.asarray(coupling.polycoef, dtype=float)
    u0, w0 = (float(x) for x in np.asarray(coupling.reference, dtype=float))
    b = np.zeros(5)
    for n, an in enumerate(a):
        for k in range(n + 1):
            b[k] += an * comb(n, k) * (-w0) ** (n - k)
    b[0] += u0
    return b


def _joint_side(joints, modules):
    names = list(modules)
    return [f"{m if isinstance(m, str) else names[m]}/{j}" for m, j in joints]


def _coupling_elements(c, modules):
    """(``<fixed>`` tendon lines, the ``<equality>`` line) of one joint coupling (module docstring)."""
    poly = f'polycoef="{_fmt(polycoef_about_zero(c))}"'
    j1, j2 = _joint_side(c.joints, modules), _joint_side(c.joints2, modules)
    coef, coef2 = np.asarray(c.coef, dtype=float), np.asarray(c.coef2, dtype=float)
    if len(j1) == 1 and len(j2) <= 1 and np.all(coef == 1) and np.all(coef2 == 1):
        second = f' joint2="{j2[0]}"' if j2 else ""
        return [], f'    <joint name="{c.name}" joint1="{j1[0]}"{second} {poly}/>'
    tendons = []
    for side, joints, cs in (("u", j1, coef), ("w", j2, coef2)):
        if joints:
            tendons.append(f'    <fixed name="{c.name}/{side}">')
            tendons += [f'      <joint joint="{j}" coef="{float(x):.17g}"/>' for j, x in zip(joints, cs)]
            tendons.append("    </fixed>")
    second = f' tendon2="{c.name}/w"' if j2 else ""
    return tendons, f'    <tendon name="{c.name}" tendon1="{c.name}/u"{second} {poly}/>'


def _free_roots(module, q):
    """(index, q slice, v slice, world rotation) of every free root joint (joint placement folded in)."""
    t, p = module.topology, module.params
    for i, (kind, qs, vs) in enumerate(zip(t.joint_kinds, t.q_slices, t.v_slices)):
        if kind == "free":
            yield i, qs, vs, np.asarray(p.joint_R[i]) @ np.asarray(quat_to_rotation(q[qs][3:]))


def mujoco_state(module, q, v):
    """(qpos, qvel) in MuJoCo's conventions for one exported module's (q, v); also maps generalized
    forces (pass them as ``v``: the free-joint force [n_body; f_body] becomes [f_world; n_body])."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    qpos, qvel = q.copy(), v.copy()
    p = module.params
    for i, qs, vs, R in _free_roots(module, q):
        pos = np.asarray(p.joint_R[i]) @ q[qs][:3] + np.asarray(p.joint_p[i])
        qpos[qs] = np.concatenate([pos, np.asarray(rotation_to_quat(R))])
        qvel[vs] = np.concatenate([R @ v[vs][3:], v[vs][:3]])
    return qpos, qvel


def from_mujoco_acceleration(module, q, v, qacc):
    """Our q̈ from MuJoCo's qacc: its free-joint part is [v̇_world; ω̇_body]; ours [ω̇_body; v̇_body] with
    v_body = Rᵀ v_world, so v̇_body = Rᵀ v̇_world − ω × v_body."""
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    out = np.array(qacc, dtype=float)
    for _, qs, vs, R in _free_roots(module, q):
        w, v_body = v[vs][:3], v[vs][3:]
        out[vs] = np.concatenate([qacc[vs][3:], R.T @ qacc[vs][:3] - np.cross(w, v_body)])
    return out
