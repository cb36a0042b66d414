"""Read, validate and build a system file: TOML → :class:`~.schema.SystemFile` → a System, its initial state,
force elements and settings. Every error is a :class:`SystemFileError` naming the file, the line and the key.
"""
import functools
import json
import re
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from ..validation import InputError, did_you_mean
from . import schema
from .constraints import compiled_check
from .locate import key_lines, locate


class SystemFileError(InputError):
    """A bad system file: ``file:line: key: message``."""

    def __init__(self, file, line, key, message):
        self.file, self.line, self.key, self.message = str(file), line, key, message
        where = f"{file}:{line}" if line else str(file)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


def key_name(path):
    """("contact", 2, "P") → "contact[2].P"."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


@dataclass
class Document:
    """A parsed, validated system file and where its keys are."""
    path: Path
    spec: schema.SystemFile
    lines: dict

    def error(self, path, message):
        """A :class:`SystemFileError` at ``path`` (its line, or its nearest located parent's)."""
        line, _ = locate(self.lines, path)
        return SystemFileError(self.path, line, key_name(path), message)

    def resolve(self, name, path):
        """A file named in the document, relative to the document's folder; must exist."""
        p = Path(name)
        p = p if p.is_absolute() else self.path.parent / p
        if not p.exists():
            raise self.error(path, f"file {name!r} not found (looked for {p})")
        return p


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def schema_message(err):
    """One pydantic error of the schema in words: the offending value and, for a misspelt key or choice, the
    closest valid one."""
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        return (f"unknown key {loc[-1]!r} (= {_short(err['input'])})"
                f"{did_you_mean(loc[-1], schema.keys_at(loc[:-1]))}")
    if err["type"] == "missing":
        return f"missing key {loc[-1]!r}"
    msg = err["msg"].removeprefix("Value error, ")
    value = _short(err["input"])
    if value not in msg:
        msg += f", got {value}"
    if err["type"] == "literal_error":
        msg += did_you_mean(err["input"], re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", "")))
    return msg


def _read_text(path):
    if not path.exists():
        raise SystemFileError(path, None, None, "no such system file")
    if path.is_dir():
        raise SystemFileError(path, None, None, "is a folder, not a system file (a TOML file)")
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise SystemFileError(path, None, None, "is not a text file (a system file is TOML)") from None
    except OSError as e:
        raise SystemFileError(path, None, None, f"cannot be read ({e.strerror})") from None


def read_system_file(path):
    """Parse and validate a system file: a :class:`Document`, or :class:`SystemFileError` (one line; further
    errors of the same file follow on it after "; also")."""
    path = Path(path)
    text = _read_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        raise SystemFileError(path, int(m.group(1)) if m else None, None, f"not valid TOML: {e}") from None
    lines = key_lines(text)
    moved = moved_key_errors(path, data, lines)
    if moved:
        raise _one_error(moved)
    try:
        spec = schema.SystemFile.model_validate(data)
    except ValidationError as e:
        raise _one_error([SystemFileError(path, locate(lines, err["loc"])[0], key_name(err["loc"]),
                                          schema_message(err)) for err in e.errors()]) from None
    return Document(path, spec, lines)


def _one_error(errors):
    """The first of ``errors`` with the others following on its line after "; also"."""
    first = errors[0]
    if len(errors) > 1:
        first.args = (str(first) + "".join(f"; also {x.line}: {x.key}: {x.message}" for x in errors[1:]),)
    return first


def moved_key_errors(path, data, lines):
    """A :class:`SystemFileError` for every key of ``data`` (a parsed file) that :data:`~.schema.MOVED_KEYS` moved when
    ``simulate``'s settings were grouped, naming the table it belongs in now and the line to write there."""
    errors = []
    for old, new in schema.MOVED_KEYS.items():
        table = data.get(old[0])
        if isinstance(table, dict) and old[1] in table:
            errors.append(SystemFileError(path, locate(lines, old)[0], key_name(old), (
                f"moved to [{'.'.join(new[:-1])}] (grouped as simulate's settings are): write "
                f"{new[-1]} = {json.dumps(table[old[1]])} under [{'.'.join(new[:-1])}]")))
    return errors


# ----------------------------------------------------------------------------------------------- building
@dataclass
class Built:
    """What a system file describes, ready to simulate."""
    document: Document
    system: object
    state: object
    forces: tuple
    tau: tuple
    stabilisation: object
    position_residual: float = 0.0
    velocity_residual: float = 0.0
    contact_settings: object = None     # mrds_jax.system.timestepping.ContactSettings of [simulation.contact]


def _rotation(rpy):
    """R = R_z(yaw) R_y(pitch) R_x(roll), as URDF's rpy."""
    from ..spatial import rpy_rotation
    return np.asarray(rpy_rotation(np.asarray(rpy, dtype=float)))


def _inertia(values):
    v = list(values)
    if len(v) == 3:
        return np.diag(v)
    if len(v) == 6:
        ixx, iyy, izz, ixy, ixz, iyz = v
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    raise ValueError(f"inertia needs 3 (diagonal) or 6 (ixx iyy izz ixy ixz iyz) values, got {len(v)}")


# phrases of the builder's link errors (mrds_jax.validation.link_description) -> the key of [[module.link]]
_LINK_PHRASES = (("centre of mass", "com"), ("rotational inertia", "inertia"), ("axis2", "axis2"), ("axis", "axis"),
                 ("mass", "mass"), ("position", "position"), ("rotation", "rpy"), ("parent", "parent"),
                 ("joint", "joint"), ("defined twice", "name"))


def link_key(message):
    """The key of a ``[[module.link]]`` table a builder error is about (its line is the one to name)."""
    about = re.sub(r"^link '[^']*'", "", message)           # not the link's own name ("mass_block")
    return next((key for phrase, key in _LINK_PHRASES if phrase in about), "name")


def _built_module(doc, k, spec):
    from ..model import ModuleBuilder
    if spec.urdf is not None:
        if spec.link or spec.frame:
            raise doc.error(("module", k, "urdf"), "give either a URDF file or links/frames, not both")
        from ..loaders.urdf import load_urdf
        return load_urdf(doc.resolve(spec.urdf, ("module", k, "urdf")))
    if not spec.link:
        raise doc.error(("module", k), f"module {spec.name!r} has neither a URDF file nor links")
    b = ModuleBuilder(planar=spec.planar, gravity=spec.gravity)
    for j, link in enumerate(spec.link):
        try:
            b.add_link(link.name, link.parent, link.joint, axis=link.axis, axis2=link.axis2, pitch=link.pitch,
                       position=link.position, rotation=_rotation(link.rpy), mass=link.mass, com=link.com,
                       inertia=_inertia(link.inertia), limits=link.limits)
        except (KeyError, ValueError) as e:
            message = str(e).strip("'\"")
            raise doc.error(("module", k, "link", j, link_key(message)), message) from None
    for j, frame in enumerate(spec.frame):
        try:
            b.add_frame(frame.name, frame.link, position=frame.position, rotation=_rotation(frame.rpy))
        except (KeyError, ValueError) as e:
            raise doc.error(("module", k, "frame", j, "link"), str(e).strip("'\"")) from None
    try:
        return b.build()
    except (KeyError, ValueError) as e:
        raise doc.error(("module", k), str(e)) from None


def _imported(doc):
    """(modules dict, contacts, q dict, joint couplings, collision models, force elements) of the file's ``mjcf`` and
    ``ckcm`` entries."""
    modules, contacts, q0, couplings, geoms, forces = {}, [], {}, [], [], []
    spec = doc.spec
    if spec.mjcf is not None:
        from ..loaders.mjcf import load_mjcf
        path = doc.resolve(spec.mjcf, ("mjcf",))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                system, mapping = load_mjcf(path, return_mapping=True)
            except ValueError as e:
                raise doc.error(("mjcf",), str(e)) from None
        for w in caught:
            warnings.warn(f"{doc.path}: mjcf: {w.message}", w.category, stacklevel=3)
        state = mapping.state()
        modules.update(zip(system.module_names, system.modules))
        contacts += list(system.contacts)
        couplings += list(system.couplings)
        if system.collision is not None:
            geoms.append(system.collision)
        q0.update(zip(system.module_names, state.q))
    if spec.ckcm is not None:
        from .. import ckcm
        c = spec.ckcm
        overrides = {k: v for k, v in c.model_dump().items() if k not in ("legs", "pose", "peg_in_hole") and v is not None}
        try:
            params = ckcm.nominal(**overrides)
        except ValueError as e:
            raise doc.error(("ckcm",), str(e)) from None
        if c.peg_in_hole is None:
            system = ckcm.multibody.build_ckcm_system(params, c.legs)
            state = ckcm.multibody.state_from_pose(params, np.asarray(c.pose, dtype=float))
        else:
            system, state, scene_forces = _peg_in_hole(doc, params, c)
            forces += list(scene_forces)
            geoms.append(system.collision)
        clash = set(system.module_names) & set(modules)
        if clash:
            raise doc.error(("ckcm",), f"module names {sorted(clash)} are already taken")
        modules.update(zip(system.module_names, system.modules))
        contacts += list(system.contacts)
        q0.update(zip(system.module_names, state.q))
    return modules, contacts, q0, couplings, geoms, forces


def _peg_in_hole(doc, params, c):
    """(system, state, forces) of ``[ckcm.peg_in_hole]`` (``mrds_jax.ckcm.assembly.peg_in_hole``)."""
    from ..ckcm import assembly as A
    from ..ckcm.assembly.peg_hole import PegHole
    s = c.peg_in_hole
    task = A.default_task()
    task = A.as_arrays(task._replace(
        peg_hole=PegHole(s.peg_radius, s.peg_length, s.clearance, s.hole_depth, s.friction, s.chamfer),
        compliance=task.compliance._replace(centre=s.compliance_centre, insertion_force=s.insertion_force,
                                            insertion_speed=s.insertion_speed),
        misalignment=A.Misalignment(s.lateral_error, s.angular_error, s.standoff), target_depth=s.target_depth))
    try:
        scene = A.peg_in_hole(params, task, c.legs)
    except ValueError as e:
        raise doc.error(("ckcm", "peg_in_hole"), str(e)) from None
    return scene.system, scene.state, scene.forces


def _ground_or_member(doc, path, text, modules, kind, noun, plural, names_of):
    """"ground" → None, "module/<kind>" → (module, name), the name checked against ``names_of(module)``."""
    if text == "ground":
        return None
    module, sep, name = text.partition("/")
    if not sep or not module or not name:
        raise doc.error(path, f"{text!r} is neither 'ground' nor 'module/{kind}'")
    names = names_of(_module_of(doc, path, module, modules))
    if name not in names:
        raise doc.error(path, f"module {module!r} has no {noun} {name!r} (its {plural}: {list(names)})"
                              f"{did_you_mean(name, names)}")
    return (module, name)


def _side(doc, path, text, modules):
    """"ground" → None, "module/frame" → (module, frame), checked against the modules."""
    return _ground_or_member(doc, path, text, modules, "frame", "operational point", "points",
                             lambda m: m.topology.frame_names)


def _frame_pose(module, q, frame):
    from ..dynamics import forward_kinematics, frame_placement
    R, p = frame_placement(module, forward_kinematics(module, q), frame)
    return np.asarray(R), np.asarray(p)


_CONTACT_KEYS = ("axis", "axis2", "pitch", "normal", "direction")


def _contact(doc, i, spec, modules, q):
    from .. import contacts as C
    E = _side(doc, ("contact", i, "E"), spec.E, modules)
    P = _side(doc, ("contact", i, "P"), spec.P, modules)
    kw = {k: getattr(spec, k) for k in _CONTACT_KEYS if getattr(spec, k) is not None}
    if E is None or P is None:
        other = P if E is None else E
        if spec.ground_position is None:      # the ground frame where the other side is at the initial state
            R, p = _frame_pose(modules[other[0]], q[other[0]], other[1])
        else:
            R = _rotation(spec.ground_rpy or (0.0, 0.0, 0.0))
            p = np.asarray(spec.ground_position)
        kw.update(ground_rotation=R, ground_position=p)
    try:
        return getattr(C, spec.kind)(spec.name, E, P, **kw)
    except (TypeError, ValueError) as e:
        raise doc.error(("contact", i), str(e)) from None


def _initial_q(doc, modules, q0):
    q = {}
    for name, m in modules.items():
        if name in doc.spec.initial.q:
            x = np.asarray(doc.spec.initial.q[name], dtype=float)
            if x.shape != (m.nq,):
                raise doc.error(("initial", "q", name), f"module {name!r} has nq = {m.nq}, got {x.size} values")
            q[name] = x
        else:
            q[name] = np.asarray(q0[name]) if name in q0 else np.asarray(m.neutral_configuration())
    for table in ("q", "v"):
        for name in getattr(doc.spec.initial, table):
            if name not in modules:
                raise doc.error(("initial", table, name), f"no module named {name!r} (modules: {sorted(modules)})")
    return q


def _initial_v(doc, modules):
    v = {}
    for name, m in modules.items():
        x = np.asarray(doc.spec.initial.v.get(name, np.zeros(m.nv)), dtype=float)
        if x.shape != (m.nv,):
            raise doc.error(("initial", "v", name), f"module {name!r} has nv = {m.nv}, got {x.size} values")
        v[name] = x
    return v


def _ramp(t, state, params):
    """A world force rising linearly from 0 at ``start`` to ``force`` at ``start + ramp``, then held (``ramp`` 0: a
    step to ``force`` at ``start``)."""
    import jax.numpy as jnp
    force, start, ramp = params
    rising = jnp.clip((t - start) / jnp.where(ramp > 0, ramp, 1.0), 0.0, 1.0)
    return force * jnp.where(ramp > 0, rising, 1.0) * (t >= start)


def _module_of(doc, path, name, modules):
    if name not in modules:
        raise doc.error(path, f"no module named {name!r} (modules: {sorted(modules)}){did_you_mean(name, modules)}")
    return modules[name]


def _joint_spring(doc, i, f, modules, q):
    """A :func:`~mrds_jax.system.joint_spring_damper` on the one-coordinate ``joints`` of ``module`` (default all),
    about ``springref`` (default: the initial configuration)."""
    from ..model.tree import ONE_COORDINATE
    from ..system import joint_spring_damper
    module = _module_of(doc, ("force", i, "module"), f.module, modules)
    t = module.topology
    one = [j for j, kind in enumerate(t.joint_kinds) if kind in ONE_COORDINATE]
    if f.joints is None:
        chosen = one
    else:
        chosen = []
        for j, name in enumerate(f.joints):
            if name not in t.joint_names:
                raise doc.error(("force", i, "joints", j), f"module {f.module!r} has no joint {name!r}"
                                f"{did_you_mean(name, t.joint_names)}")
            if t.joint_names.index(name) not in one:
                raise doc.error(("force", i, "joints", j), f"joint {name!r} is {t.joint_kinds[t.joint_names.index(name)]}"
                                f"; joint springs act on one-coordinate joints ({', '.join(ONE_COORDINATE)})")
            chosen.append(t.joint_names.index(name))
    k, d = np.zeros(module.nv), np.zeros(module.nv)
    for j in chosen:
        k[t.v_slices[j]], d[t.v_slices[j]] = f.stiffness, f.damping
    ref = q[f.module] if f.springref is None else np.asarray(f.springref, dtype=float)
    if ref.shape != (module.nq,):
        raise doc.error(("force", i, "springref"), f"module {f.module!r} has nq = {module.nq}, got {ref.size} values")
    if f.stiffness < 0 or f.damping < 0:
        raise doc.error(("force", i, "stiffness" if f.stiffness < 0 else "damping"), "must be >= 0")
    return joint_spring_damper(f.name, f.module, k, d, springref=ref)


def _forces(doc, system, modules, q=None):
    import jax.numpy as jnp

    from ..system import point_force, spring_damper
    forces, tau = [], {n: np.zeros(m.nv) for n, m in modules.items()}
    for i, f in enumerate(doc.spec.force):
        if f.kind == "joint_spring_damper":
            forces.append(_joint_spring(doc, i, f, modules, q))
        elif f.kind == "point_force":
            if f.a is None or f.force is None:
                raise doc.error(("force", i), f"point_force {f.name!r} needs keys 'a' (module/frame) and 'force'")
            side = _side(doc, ("force", i, "a"), f.a, modules)
            if side is None:
                raise doc.error(("force", i, "a"), "a point force acts on a module's point, not on the ground")
            params = (jnp.asarray(f.force, dtype=float), jnp.asarray(f.start), jnp.asarray(f.ramp))
            forces.append(point_force(f.name, side, _ramp, params))
        elif f.kind == "spring_damper":
            sides = []
            for key in ("a", "b"):
                if getattr(f, key) is None:
                    raise doc.error(("force", i), f"spring_damper {f.name!r} needs key {key!r}")
                sides.append(_side(doc, ("force", i, key), getattr(f, key), modules))
            forces.append(spring_damper(f.name, *sides, f.stiffness, f.damping, f.rest_length))
        else:
            if f.module not in modules:
                raise doc.error(("force", i, "module"), f"no module named {f.module!r} (modules: {sorted(modules)})")
            if len(f.values) != modules[f.module].nv:
                raise doc.error(("force", i, "values"), f"module {f.module!r} has nv = {modules[f.module].nv}, "
                                f"got {len(f.values)} values")
            tau[f.module] = tau[f.module] + np.asarray(f.values)
    return tuple(forces), tuple(tau[n] for n in system.module_names)


@functools.cache
def _compiled_make_consistent():
    import jax

    from .. import system as S
    return jax.jit(S.make_consistent)


def _consistent(system, state, tol=1e-12):
    """Whether every contact and joint coupling holds to ``tol`` already (then there is nothing to project)."""
    errors, couplings, _ = compiled_check()(system, state)
    return all(float(np.abs(np.asarray(e)).max(initial=0.0)) <= tol
               for e in errors.position + errors.velocity + tuple(couplings))


def _geom(doc, i, spec, modules):
    """A :class:`~mrds_jax.collision.Geom` of a ``[[geom]]`` table."""
    from .. import collision as C
    path = ("geom", i)
    side = _side(doc, path + ("on",), spec.on, modules)
    module, frame = (None, None) if side is None else side
    common = dict(position=spec.position, friction=spec.friction, restitution=spec.restitution, contype=spec.contype,
                  conaffinity=spec.conaffinity, priority=spec.priority)
    rotation = None if spec.rpy is None else _rotation(spec.rpy)
    try:
        if spec.kind == "plane":
            return C.plane(spec.name, module, frame, normal=spec.normal, rotation=rotation, **common)
        if spec.kind == "sphere":
            return C.sphere(spec.name, module, frame, spec.radius, rotation=rotation, **common)
        if spec.kind == "box":
            return C.box(spec.name, module, frame, spec.half_extents, rotation=rotation, **common)
        return getattr(C, spec.kind)(spec.name, module, frame, spec.radius, spec.half_length, rotation=rotation,
                                     **common)
    except C.CollisionError as e:
        raise doc.error(path, str(e)) from None


def _body(doc, path, text, modules):
    """"ground" → None, "module/link" → (module, link name), checked."""
    return _ground_or_member(doc, path, text, modules, "link", "link", "links",
                             lambda m: getattr(getattr(m, "topology", None), "link_names", ()))


def _collision(doc, modules, imported):
    """The system's :class:`~mrds_jax.collision.CollisionModel` (None without geometry): the ``[[geom]]`` tables
    with ``[collision]``'s pairs and excludes, and the collision model an MJCF file brought (its pairs kept as
    they are: its candidate pairs become explicit pairs, every other pair of its geoms is excluded)."""
    from .. import collision as C
    spec = doc.spec
    geoms = [_geom(doc, i, g, modules) for i, g in enumerate(spec.geom)]
    if not geoms and not spec.collision.pair and not spec.collision.exclude:
        return imported[0] if imported else None
    pairs, excludes = [], []
    for model in imported:
        names = model.geom_names
        kept = set(model.pairs)
        for k, (i, j) in enumerate(model.pairs):
            pairs.append((names[i], names[j], {"friction": model.friction[k], "restitution": model.restitution[k]}))
        excludes += [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))
                     if (i, j) not in kept and (j, i) not in kept]
        geoms = list(model.geoms) + geoms
    seen = {}
    for i, g in enumerate(geoms):
        if g.name in seen:
            raise doc.error(("geom", i - (len(geoms) - len(spec.geom))), f"geom name {g.name!r} is already taken")
        seen[g.name] = i
    for k, pair in enumerate(spec.collision.pair):
        for j, name in enumerate(pair.geoms):
            if name not in seen:
                raise doc.error(("collision", "pair", k, "geoms"), f"no geom named {name!r} (geoms: {list(seen)})"
                                f"{did_you_mean(name, seen)}")
        options = {key: getattr(pair, key) for key in ("friction", "restitution") if getattr(pair, key) is not None}
        pairs.append((*pair.geoms, options))
    for k, ex in enumerate(spec.collision.exclude):
        path = ("collision", "exclude", k)
        if ex.geoms is not None:
            for name in ex.geoms:
                if name not in seen:
                    raise doc.error(path + ("geoms",), f"no geom named {name!r} (geoms: {list(seen)})"
                                    f"{did_you_mean(name, seen)}")
            excludes.append(tuple(ex.geoms))
        else:
            excludes.append(tuple(_body(doc, path + ("bodies",), b, modules) for b in ex.bodies))
    try:
        return C.collision_model(geoms, modules, pairs=pairs, excludes=excludes,
                                 filter_parent=spec.collision.filter_parent)
    except C.CollisionError as e:
        raise doc.error(("collision",) if not spec.geom else ("geom",), str(e)) from None


def contact_settings(doc, system):
    """The velocity-level step's :class:`~mrds_jax.system.timestepping.ContactSettings` of ``[simulation.contact]``;
    None for a system the step does not run on (no collision geometry or joint limits)."""
    from ..system.ncp import NCPSettings
    from ..system.timestepping import ContactSettings, has_unilateral_rows
    if not has_unilateral_rows(system):
        return None
    c = doc.spec.simulation.contact
    return ContactSettings(ncp=NCPSettings(stages=c.stages, iterations=c.iterations, tolerance=c.tolerance),
                           baumgarte=c.baumgarte, margin=c.margin)


def build(doc):
    """A :class:`Built` from a :class:`Document` (errors name the key and line)."""
    import jax
    import jax.numpy as jnp

    from .. import system as S
    modules, contacts, q0, couplings, imported_geoms, imported_forces = _imported(doc)
    for k, spec in enumerate(doc.spec.module):
        if spec.name in modules:
            raise doc.error(("module", k, "name"), f"module name {spec.name!r} is already taken")
        modules[spec.name] = _built_module(doc, k, spec)
    if not modules:
        raise doc.error(("module",), "the file defines no module (give mjcf, ckcm or [[module]] tables)")
    q = _initial_q(doc, modules, q0)
    contacts += [_contact(doc, i, c, modules, q) for i, c in enumerate(doc.spec.contact)]
    collision = _collision(doc, modules, imported_geoms)
    try:
        system = S.build_system(modules, contacts, couplings=couplings, collision=collision)
    except ValueError as e:
        raise doc.error(("contact",), str(e)) from None
    v = _initial_v(doc, modules)
    state = S.make_state(system, [jnp.asarray(q[n]) for n in system.module_names],
                         [jnp.asarray(v[n]) for n in system.module_names])
    rp = rv = 0.0
    if doc.spec.initial.make_consistent and (system.contacts or system.couplings) and not _consistent(system, state):
        state, rp, rv = _compiled_make_consistent()(system, state)    # one compiled Gauss-Newton, not op by op
        rp, rv = float(rp), float(rv)
    forces, tau = _forces(doc, system, modules, q)
    forces = tuple(imported_forces) + forces
    sim = doc.spec.simulation
    stab = None if sim.integration.baumgarte is None else S.baumgarte(sim.integration.baumgarte)
    if sim.precision == "float32":
        cast = lambda x: jnp.asarray(x, jnp.float32) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x  # noqa: E731
        system, state, forces = jax.tree.map(cast, (system, state, forces))
        tau = tuple(np.asarray(t, np.float32) for t in tau)
    return Built(doc, system, state, forces, tuple(jnp.asarray(t) for t in tau), stab, rp, rv, contact_settings(doc, system))
