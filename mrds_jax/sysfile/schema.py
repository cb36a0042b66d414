"""The schema of a system file (pydantic v2): every table and key, with units.

A system file is TOML (the format is documented in ``docs/system_files.md``). Quantities are plain numbers in
SI units (m, rad, kg, s, kg m², m/s², N or N m) or strings with a unit, ``"30 deg"``, ``"5 mm"``, ``"2 ms"``;
a unit of the wrong kind (``dt = "2 kg"``) is an error. Unknown keys are errors (``extra="forbid"``).
"""
import re
import typing
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

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


class Ckcm(Strict):
    """``[ckcm]``: Nguyen & Pooran's CKCM Stewart platform (``mrds_jax.ckcm``): Nguyen & Pooran eq. 58 with overrides."""
    legs: Literal["bench", "paper"] = "bench"
    pose: list[Union[Length, Angle]] = Field(default=[0.0, 0.0, 1.0, 0.0, 0.0, 0.0], min_length=6, max_length=6)
    theta_A: Optional[Angle] = None
    theta_B: Optional[Angle] = None
    r_A: Optional[Length] = None
    r_B: Optional[Length] = None
    m: Optional[Mass] = None
    m1: Optional[Mass] = None
    M: Optional[Mass] = None


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
    """``[[force]]``: ``spring_damper`` between points a and b, or ``joint_force`` (constant, one module)."""
    name: str
    kind: Literal["spring_damper", "joint_force"]
    a: Optional[str] = None
    b: Optional[str] = None
    stiffness: Stiffness = 0.0
    damping: Damping = 0.0
    rest_length: Length = 0.0
    module: Optional[str] = None
    values: list[Force] = []


class Initial(Strict):
    """``[initial]``: q and v per module (default: neutral / the MJCF's qpos0 / the CKCM pose, at rest)."""
    q: dict[str, list[float]] = {}
    v: dict[str, list[float]] = {}
    make_consistent: bool = True


class Simulation(Strict):
    """``[simulation]``."""
    dt: Time = 1e-3
    duration: Time = 1.0
    integrator: Literal["rk4_compact", "rk4", "euler"] = "rk4_compact"
    decimation: int = Field(default=10, ge=1)
    baumgarte: Optional[float] = Field(default=None, gt=0)
    precision: Literal["float64", "float32"] = "float64"


class Output(Strict):
    """``[output]``: what ``mrds-jax simulate`` writes besides ``trajectory.npz``."""
    plots: bool = True
    animation: Literal["gif", "mp4", "none"] = "gif"
    fps: int = Field(default=20, ge=1)


class SystemFile(Strict):
    """The whole file."""
    name: str
    description: str = ""
    mjcf: Optional[str] = None
    ckcm: Optional[Ckcm] = None
    module: list[Module] = []
    contact: list[Contact] = []
    force: list[ForceElement] = []
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
