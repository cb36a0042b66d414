"""The schema of a system file (pydantic v2): every table and key, with units.

A system file is TOML (the format is documented in ``docs/system_files.md``). Quantities are plain numbers in
SI units (m, rad, kg, s, kg m², m/s², N or N m) or strings with a unit, ``"30 deg"``, ``"5 mm"``, ``"2 ms"``;
a unit of the wrong kind (``dt = "2 kg"``) is an error. Unknown keys are errors (``extra="forbid"``).
"""
import math
import re
import typing
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

# unit -> (dimension, factor to SI)
UNITS = {
    "m": ("length", 1.0), "cm": ("length", 1e-2), "mm": ("length", 1e-3),
    "rad": ("angle", 1.0), "deg": ("angle", 0.017453292519943295),
    "kg": ("mass", 1.0), "g": ("mass", 1e-3),
    "s": ("time", 1.0), "ms": ("time", 1e-3),
    "kg m^2": ("inertia", 1.0), "kg*m^2": ("inertia", 1.0), "kg m2": ("inertia", 1.0),
    "m/s^2": ("acceleration", 1.0), "N": ("force", 1.0), "N m": ("force", 1.0), "N*m": ("force", 1.0),
    "N/m": ("stiffness", 1.0), "N s/m": ("damping", 1.0), "N*s/m": ("damping", 1.0),
}
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def _quantity(dimension):
    def parse(value):
        if isinstance(value, bool):
            raise ValueError(f"expected a number or a {dimension} with a unit, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            m = _QUANTITY.match(value)
            if not m:
                raise ValueError(f"{value!r} is not a number with a unit (e.g. \"30 deg\", \"5 mm\")")
            number, unit = float(m.group(1)), m.group(2)
            if not unit:
                return number
            if unit not in UNITS:
                known = sorted(u for u, (d, _) in UNITS.items() if d == dimension)
                raise ValueError(f"unknown unit {unit!r} in {value!r} (a {dimension} takes {known})")
            dim, factor = UNITS[unit]
            if dim != dimension:
                raise ValueError(f"inconsistent units: {value!r} is a {dim}, a {dimension} is needed")
            return number * factor
        raise ValueError(f"expected a number or a {dimension} with a unit, got {value!r}")
    return Annotated[float, BeforeValidator(parse)]


Length, Angle, Mass, Time = (_quantity(d) for d in ("length", "angle", "mass", "time"))
Inertia, Acceleration, Force = (_quantity(d) for d in ("inertia", "acceleration", "force"))
Stiffness, Damping = _quantity("stiffness"), _quantity("damping")


def _vector(q, n):
    return Annotated[list[q], Field(min_length=n, max_length=n)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


JOINTS = ("revolute", "prismatic", "screw", "universal", "spherical", "fixed", "free", "planar_free")
CONTACTS = ("weld", "spherical", "revolute", "prismatic", "cylindrical", "screw", "universal", "point_on_plane",
            "point_on_line", "planar_contact", "planar_weld", "planar_revolute")


class Link(Strict):
    """``[[module.link]]``: a link and the joint to its parent (the builder's ``add_link``)."""
    name: str
    parent: Optional[str] = None
    joint: Literal[JOINTS] = "revolute"
    axis: _vector(float, 3) = [0.0, 0.0, 1.0]
    axis2: _vector(float, 3) = [0.0, 1.0, 0.0]
    pitch: Length = 0.0
    position: _vector(Length, 3) = [0.0, 0.0, 0.0]
    rpy: _vector(Angle, 3) = [0.0, 0.0, 0.0]
    mass: Annotated[Mass, Field(gt=0)] = 1.0
    com: _vector(Length, 3) = [0.0, 0.0, 0.0]
    inertia: Annotated[list[Inertia], Field(min_length=3, max_length=6)] = [1e-3, 1e-3, 1e-3]
    limits: Optional[_vector(Union[Angle, Length], 2)] = None   # [lower, upper] of a one-coordinate joint's q

    @field_validator("limits")
    @classmethod
    def _ordered_limits(cls, limits):
        if limits is not None:
            lo, hi = limits
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
                raise ValueError(f"limits [{lo:g}, {hi:g}] need finite lower <= upper")
        return limits


class Frame(Strict):
    """``[[module.frame]]``: an operational point on a link."""
    name: str
    link: str
    position: _vector(Length, 3) = [0.0, 0.0, 0.0]
    rpy: _vector(Angle, 3) = [0.0, 0.0, 0.0]


class Module(Strict):
    """``[[module]]``: a kinematic tree from a URDF file or from links and frames."""
    name: str
    urdf: Optional[str] = None
    planar: bool = False
    gravity: Optional[_vector(Acceleration, 3)] = None
    link: list[Link] = []
    frame: list[Frame] = []


class PegInHole(Strict):
    """``[ckcm.peg_in_hole]``: the CKCM carries a capsule peg into a chamfered slot on the base under compliant force
    control (``mrds_jax.ckcm.assembly``): the peg and hole (``mrds_jax.ckcm.assembly.peg_hole.PegHole``), the initial errors
    (the tip's offset along x, the tilt about y), the remote centre of compliance behind the tip and the commanded
    insertion force and speed. Its geoms, controller and initial pose replace ``[ckcm]``'s pose."""
    peg_radius: Annotated[Length, Field(gt=0)] = 0.01
    peg_length: Annotated[Length, Field(gt=0)] = 0.06
    clearance: Length = 2e-4
    hole_depth: Annotated[Length, Field(gt=0)] = 0.05
    friction: Annotated[float, Field(ge=0)] = 0.3
    chamfer: Annotated[Length, Field(gt=0)] = 0.003
    target_depth: Annotated[Length, Field(gt=0)] = 0.03
    lateral_error: Length = 0.0
    angular_error: Angle = 0.0
    standoff: Length = 0.005
    compliance_centre: Length = 0.0
    insertion_force: Force = 30.0
    insertion_speed: Annotated[float, Field(ge=0)] = 0.05


class Ckcm(Strict):
    """``[ckcm]``: Nguyen & Pooran's CKCM Stewart platform (``mrds_jax.ckcm``): Nguyen & Pooran eq. 58 with overrides;
    ``[ckcm.peg_in_hole]`` adds the peg-in-hole assembly scene."""
    legs: Literal["bench", "paper"] = "bench"
    pose: list[Union[Length, Angle]] = Field(default=[0.0, 0.0, 1.0, 0.0, 0.0, 0.0], min_length=6, max_length=6)
    theta_A: Optional[Angle] = None
    theta_B: Optional[Angle] = None
    r_A: Optional[Length] = None
    r_B: Optional[Length] = None
    m: Optional[Mass] = None
    m1: Optional[Mass] = None
    M: Optional[Mass] = None
    peg_in_hole: Optional[PegInHole] = None


class Contact(Strict):
    """``[[contact]]``: a library contact between E and P (``"module/frame"`` or ``"ground"``)."""
    name: str
    kind: Literal[CONTACTS]
    E: str
    P: str
    axis: Optional[_vector(float, 3)] = None
    axis2: Optional[_vector(float, 3)] = None
    pitch: Optional[Length] = None
    normal: Optional[_vector(float, 3)] = None
    direction: Optional[_vector(float, 3)] = None
    ground_position: Optional[_vector(Length, 3)] = None   # default: where the other side is initially
    ground_rpy: Optional[_vector(Angle, 3)] = None


class ForceElement(Strict):
    """``[[force]]``: ``spring_damper`` between points a and b, ``joint_force`` (constant, one module),
    ``joint_spring_damper`` (per-joint springs of ``stiffness`` about the initial configuration, or ``springref``,
    and dampers of ``damping`` on the one-coordinate ``joints`` of ``module``, default all of them) or
    ``point_force`` (a world-axes ``force`` at point ``a``, ramped linearly from zero at ``start`` to its full value
    at ``start + ramp``, then held; ``ramp = 0``: a step at ``start``)."""
    name: str
    kind: Literal["spring_damper", "joint_force", "joint_spring_damper", "point_force"]
    a: Optional[str] = None
    b: Optional[str] = None
    stiffness: Stiffness = 0.0
    damping: Damping = 0.0
    rest_length: Length = 0.0
    module: Optional[str] = None
    values: list[Force] = []
    joints: Optional[list[str]] = None
    springref: Optional[list[float]] = None
    force: Optional[_vector(Force, 3)] = None
    start: Annotated[Time, Field(ge=0, allow_inf_nan=False)] = 0.0
    ramp: Annotated[Time, Field(ge=0, allow_inf_nan=False)] = 0.0


GEOMS = ("plane", "sphere", "capsule", "box", "cylinder")
_SIZES = {"plane": (), "sphere": ("radius",), "capsule": ("radius", "half_length"),
          "cylinder": ("radius", "half_length"), "box": ("half_extents",)}
PositiveLength = Annotated[Length, Field(gt=0, allow_inf_nan=False)]
Friction = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Restitution = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class Geom(Strict):
    """``[[geom]]``: a collision primitive on an operational point (``on = "module/frame"``) or on the ground
    (``on = "ground"``, world coordinates), with its pose in that frame (``position``, ``rpy``; a plane may give
    its ``normal`` instead of ``rpy``) and its size: sphere ``radius``; capsule and cylinder ``radius`` and
    ``half_length`` along local z; box ``half_extents``; a plane none (the half-space below its local z).
    ``friction`` (Coulomb, ≥ 0), ``restitution`` (in [0, 1]), MuJoCo's ``contype``/``conaffinity`` filter bits
    and ``priority`` (mrds_jax.collision)."""
    name: str
    kind: Literal[GEOMS]
    on: str = "ground"
    position: _vector(Length, 3) = [0.0, 0.0, 0.0]
    rpy: Optional[_vector(Angle, 3)] = None
    normal: Optional[_vector(float, 3)] = None
    radius: Optional[PositiveLength] = None
    half_length: Optional[PositiveLength] = None
    half_extents: Optional[_vector(PositiveLength, 3)] = None
    friction: Friction = 1.0
    restitution: Restitution = 0.0
    contype: Annotated[int, Field(ge=0)] = 1
    conaffinity: Annotated[int, Field(ge=0)] = 1
    priority: int = 0

    @model_validator(mode="after")
    def _sizes_of_the_kind(self):
        need = _SIZES[self.kind]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.kind} geom needs {' and '.join(repr(k) for k in missing)}")
        extra = [k for k in ("radius", "half_length", "half_extents") if k not in need and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"a {self.kind} geom has no {' or '.join(repr(k) for k in extra)} (it takes "
                             f"{list(need) or 'no size'})")
        if self.normal is not None:
            if self.kind != "plane":
                raise ValueError("only a plane takes 'normal' (other geoms: 'rpy')")
            if self.rpy is not None:
                raise ValueError("give a plane's 'normal' or its 'rpy', not both")
        return self

    @field_validator("normal")
    @classmethod
    def _direction(cls, normal):
        if normal is not None and (not all(math.isfinite(x) for x in normal) or sum(x * x for x in normal) <= 1e-24):
            raise ValueError(f"a plane's normal must be a finite non-zero direction, got {normal}")
        return normal


class Pair(Strict):
    """``[[collision.pair]]``: two geoms that collide whatever the filters say (MuJoCo ``<pair>``), optionally
    with their own ``friction`` and ``restitution``."""
    geoms: _vector(str, 2)
    friction: Optional[Friction] = None
    restitution: Optional[Restitution] = None


class Exclude(Strict):
    """``[[collision.exclude]]``: two bodies (``"module/link"`` or ``"ground"``) or two geoms that never collide
    (MuJoCo ``<exclude>``); give ``bodies`` or ``geoms``."""
    bodies: Optional[_vector(str, 2)] = None
    geoms: Optional[_vector(str, 2)] = None

    @model_validator(mode="after")
    def _one_of(self):
        if (self.bodies is None) == (self.geoms is None):
            raise ValueError("an exclude gives either 'bodies' or 'geoms'")
        return self


class Collision(Strict):
    """``[collision]``: explicit pairs and excludes and MuJoCo's parent–child filter (the velocity-level step's
    settings are ``[simulation.contact]``, :class:`ContactStep`)."""
    pair: list[Pair] = []
    exclude: list[Exclude] = []
    filter_parent: bool = True


class Initial(Strict):
    """``[initial]``: q and v per module (default: neutral / the MJCF's qpos0 / the CKCM pose, at rest)."""
    q: dict[str, list[float]] = {}
    v: dict[str, list[float]] = {}
    make_consistent: bool = True


class Integration(Strict):
    """``[simulation.integration]``: ``simulate``'s :class:`~mrds_jax.system.Integration`: the ``integrator`` and
    the constraint stabilisation, Baumgarte at the rate ``baumgarte`` (1/s; off by default)."""
    integrator: Literal["rk4_compact", "rk4", "euler"] = "rk4_compact"
    baumgarte: Optional[float] = Field(default=None, gt=0)


class ContactStep(Strict):
    """``[simulation.contact]``: ``simulate``'s :class:`~mrds_jax.system.ContactStep` settings, the velocity-level
    step's (mrds_jax.system.timestepping.ContactSettings): ``baumgarte`` (the fraction of a loop's position error
    removed per step), ``stages`` and ``iterations`` (the caps) and ``tolerance`` of the NCP solver, and the
    ``margin`` (m) within which a slot enters a step's problem."""
    baumgarte: Annotated[float, Field(ge=0, le=1)] = 0.2
    stages: Annotated[int, Field(ge=1)] = 8
    iterations: Annotated[int, Field(ge=1)] = 50
    tolerance: Annotated[float, Field(gt=0)] = 1e-7
    margin: Annotated[float, Field(ge=0)] = 1e-3


class Simulation(Strict):
    """``[simulation]``: the step ``dt``, the ``duration``, the ``precision``, and ``simulate``'s settings grouped as
    in ``simulate``: ``[simulation.integration]`` and ``[simulation.contact]`` (its ``output`` is ``[output]``)."""
    dt: Time = 1e-3
    duration: Time = 1.0
    precision: Literal["float64", "float32"] = "float64"
    integration: Integration = Integration()
    contact: ContactStep = ContactStep()


class Output(Strict):
    """``[output]``: ``simulate``'s :class:`~mrds_jax.system.Output` (``decimation``: store every n-th step) and what
    ``mrds-jax simulate`` writes besides ``trajectory.npz``."""
    decimation: int = Field(default=10, ge=1)
    plots: bool = True
    animation: Literal["gif", "mp4", "none"] = "gif"
    fps: int = Field(default=20, ge=1)


# the keys of files written before simulate's settings were grouped (issue 54): old place -> new place; such a key
# is an error naming the new place (read_system_file), never read silently
MOVED_KEYS = {
    ("simulation", "integrator"): ("simulation", "integration", "integrator"),
    ("simulation", "baumgarte"): ("simulation", "integration", "baumgarte"),
    ("simulation", "decimation"): ("output", "decimation"),
    **{("collision", key): ("simulation", "contact", key)
       for key in ("baumgarte", "stages", "iterations", "tolerance", "margin")},
}


class SystemFile(Strict):
    """The whole file."""
    name: str
    description: str = ""
    mjcf: Optional[str] = None
    ckcm: Optional[Ckcm] = None
    module: list[Module] = []
    contact: list[Contact] = []
    force: list[ForceElement] = []
    geom: list[Geom] = []
    collision: Collision = Collision()
    initial: Initial = Initial()
    simulation: Simulation = Simulation()
    output: Output = Output()


def _inner(annotation):
    """The model (or None) an annotation holds: ``Optional[Ckcm]`` → Ckcm, ``list[Link]`` → Link."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_inner, typing.get_args(annotation)) if m is not None), None)


def keys_at(path):
    """The key names a table at ``path`` (a located error's path without its last key, e.g.
    ``("module", 0, "link", 1)``) accepts; empty where ``path`` leads to no table of the schema."""
    model = SystemFile
    for part in path:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        model = _inner(field.annotation) if field is not None else None
        if model is None:
            return []
    return list(model.model_fields)
