"""The task a design is optimised for: one or more payload paths with their timing, and the payload; several
tasks at once, combined as the designer says.

A task is written as a JSON-able spec (saved with every result, so a design file says what it was optimised
for) and sampled once into fixed arrays (``TaskSamples``): the paths are Cartesian, so their samples do not
depend on the design, and the objective is a plain function of the design over those arrays.

Path kinds (``PATH_KINDS``):

- ``{"kind": "ellipse", "period": T, "semi_axes": [a, b], "z": z, "center": [x, y]}`` — Nguyen & Pooran eq. 55 (default
  semi-axes 5 and 2.5 cm, z = the design's home height), constant angular rate (``multibody.ellipse``);
- ``{"kind": "point_to_point", "start": Φ₀, "end": Φ₁, "duration": T}`` — a rest-to-rest minimum-jerk move
  (``multibody.point_to_point``);
- ``{"kind": "sweep", "x": [...], "y": [...], "z": [...], "alpha": [...], "beta": [...], "gamma": [...],
  "hold": h}`` — a workspace sweep: the grid (Cartesian product) of these offsets (m, rad; each axis
  optional, default [0]) from the design's home pose (0, 0, z_nominal, 0, 0, 0), every pose held statically
  (zero rate and acceleration: the forces are the static ones, the inverse dynamics at rest), each for ``hold``
  seconds (default 0.1 s; only its share in a ``pooled`` time average depends on it).  ``workspace_sweep``
  writes one.

Any path spec may carry ``"payload_masses": [M_1, ...]`` (kg): a payload range, the path evaluated once at
each mass (the payload's inertia scaled by M_j / M, the same shape; ``payload_range`` writes one).

Samples: ``samples_per_path`` instants per moving path, the ellipse's over one period without its endpoint, a
move's at the midpoints of equal sub-intervals; a sweep's grid poses; repeated once per mass of a payload range.
Each carries the time weight T_p / (n_p Σ_p T_p) (T_p the path's duration, times its number of masses; a
sweep's is ``hold`` × its poses) so that sums over samples are time averages over the whole task.

Several tasks at once (``Task.combine``, ``COMBINE``): every path is one task of its own, with its own demand
(``objectives.demand_per_path``), combined as

- ``"pooled"``    (default) one demand over all samples of all paths together (the time average above);
- ``"worst"``     the largest of the paths' demands (worst case);
- ``"weighted"``  Σ_p w_p d_p with the designer's ``weights`` w_p ≥ 0 (one per path).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

import numpy as np
import jax
import jax.numpy as jnp

from ...pytree import pytree_dataclass
from ...validation import InputError
from ..lagrangian import ELLIPSE_SEMI_AXES
from ..multibody import ellipse, point_to_point
from ..params import CKCMParams

PATH_KINDS = ("ellipse", "point_to_point", "sweep")
COMBINE = ("pooled", "worst", "weighted")
SWEEP_AXES = ("x", "y", "z", "alpha", "beta", "gamma")
DEFAULT_HOLD = 0.1  # s each sweep pose counts for in a pooled time average
DEFAULT_PERIOD = 0.5  # s: the paper's Table 2 loop (experiments/out/ckcm_reproduction.md)


class TaskError(InputError):
    """A task spec that does not describe a motion: unknown path kind, missing or bad fields."""


@pytree_dataclass
class TaskSamples:
    """The task as arrays: payload poses Φ, rates Φ̇ and accelerations Φ̈ (K, 6), time weights (K,) summing
    to 1, the path index of every sample (K,), and the payload's mass and principal inertia; with a payload
    range, ``payload_factor`` (K,): each sample's payload mass (and inertia) over M (None: 1 everywhere);
    ``path_weight`` (P,): the designer's weight of every path (``Task.combine`` "weighted"; ones otherwise)."""
    pose: jax.Array
    rate: jax.Array
    acc: jax.Array
    weight: jax.Array
    path_index: jax.Array
    M: jax.Array
    I_payload: jax.Array
    payload_factor: jax.Array | None = None
    path_weight: jax.Array | None = None

    @property
    def size(self):
        return self.pose.shape[0]


def _require(spec, key, i):
    if key not in spec:
        raise TaskError(f"path {i} ({spec.get('kind')!r}) needs {key!r}; got keys {sorted(spec)}")
    return spec[key]


def _positive(value, what):
    v = float(value)
    if not (np.isfinite(v) and v > 0):
        raise TaskError(f"{what} must be finite and > 0, got {value}")
    return v


def _pose(value, what):
    p = np.asarray(value, float)
    if p.shape != (6,) or not np.all(np.isfinite(p)):
        raise TaskError(f"{what} must be a finite pose (x, y, z, alpha, beta, gamma), got {value}")
    return p


def path_of(spec: dict, params: CKCMParams, i=0):
    """The pytree path (t ↦ Φ, Φ̇, Φ̈) of one path spec, and its duration (s)."""
    kind = spec.get("kind")
    if kind == "ellipse":
        T = _positive(_require(spec, "period", i), f"path {i}: period")
        axes = tuple(float(a) for a in spec.get("semi_axes", ELLIPSE_SEMI_AXES))
        if len(axes) != 2 or not all(np.isfinite(axes)):
            raise TaskError(f"path {i}: semi_axes must be two finite numbers, got {spec.get('semi_axes')}")
        z = spec.get("z")
        center = tuple(float(c) for c in spec.get("center", (0.0, 0.0)))
        return ellipse(params, T, None if z is None else float(z), axes, center), T
    if kind == "point_to_point":
        T = _positive(_require(spec, "duration", i), f"path {i}: duration")
        start = _pose(_require(spec, "start", i), f"path {i}: start")
        end = _pose(_require(spec, "end", i), f"path {i}: end")
        return point_to_point(start, end, T, jnp.result_type(params.m)), T
    if kind == "sweep":
        raise TaskError(f"path {i} is a sweep of static poses, not a motion: use sweep_poses")
    raise TaskError(f"path {i}: unknown kind {kind!r}; use one of {list(PATH_KINDS)}")


def _finite_list(value, what, positive=False):
    v = np.atleast_1d(np.asarray(value, float)) if np.ndim(value) <= 1 else None
    if v is None or v.size == 0:
        raise TaskError(f"{what} is empty or not a list of numbers, got {value}: give at least one")
    if not np.all(np.isfinite(v)) or (positive and np.any(v <= 0)):
        raise TaskError(f"{what} must be finite{' and > 0' if positive else ''}, got {value}")
    return v


def check_sweep(spec, i=0):
    """Raise ``TaskError`` naming a sweep spec's bad field: unknown keys, empty or non-finite offsets, hold ≤ 0."""
    unknown = sorted(set(spec) - set(SWEEP_AXES) - {"kind", "hold", "payload_masses"})
    if unknown:
        raise TaskError(f"path {i} (sweep): unknown key(s) {unknown}; use {list(SWEEP_AXES)}, 'hold', "
                        "'payload_masses'")
    for axis in SWEEP_AXES:
        _finite_list(spec.get(axis, [0.0]), f"path {i} (sweep): offsets {axis!r}")
    _positive(spec.get("hold", DEFAULT_HOLD), f"path {i} (sweep): hold")


def sweep_poses(spec, params: CKCMParams, i=0):
    """The poses (G, 6) of a sweep spec: the grid of its offsets about the home pose (0, 0, z_nominal, 0, 0, 0),
    x varying slowest."""
    check_sweep(spec, i)
    grids = np.meshgrid(*[_finite_list(spec.get(a, [0.0]), a) for a in SWEEP_AXES], indexing="ij")
    offsets = np.stack([g.ravel() for g in grids], axis=1)
    home = np.array([0.0, 0.0, float(params.z_nominal), 0.0, 0.0, 0.0])
    return home + offsets


def workspace_sweep(half_width=0.05, points=3, z_half_width=None, hold=DEFAULT_HOLD, **extra):
    """A sweep spec: ``points`` offsets per axis in [−half_width, half_width] (m) in x and y and in
    [−z_half_width, z_half_width] in z (default ``half_width``), level payload: points³ poses held statically."""
    if int(points) < 1:
        raise TaskError(f"a workspace sweep needs points >= 1 per axis, got {points}")
    zh = half_width if z_half_width is None else z_half_width
    axis = (lambda h: np.linspace(-h, h, int(points)).tolist() if int(points) > 1 else [0.0])
    return {"kind": "sweep", "x": axis(half_width), "y": axis(half_width), "z": axis(zh), "hold": hold, **extra}


def payload_range(spec: dict, masses) -> dict:
    """``spec`` (any path spec) evaluated at each payload mass of ``masses`` (kg): a payload range."""
    return {**dict(spec), "payload_masses": [float(m) for m in np.atleast_1d(masses)]}


@jax.jit
def _sample_path(path, t):
    """(Φ, Φ̇, Φ̈) of a pytree path at the times t, compiled once per path kind and sample count."""
    return jax.vmap(path)(t)


def _sample_times(kind, T, n):
    if kind == "ellipse":
        return T * np.arange(n) / n
    return T * (np.arange(n) + 0.5) / n


@dataclass(frozen=True)
class Task:
    """A design task: ``paths`` (list of path specs, module docstring), the payload (``payload_mass`` kg and
    ``payload_inertia`` (I_1, I_2, I_3) kg m²; ``None`` keeps the design's), ``samples_per_path``."""
    paths: tuple = field(default_factory=lambda: ({"kind": "ellipse", "period": DEFAULT_PERIOD},))
    payload_mass: float | None = None
    payload_inertia: tuple | None = None
    samples_per_path: int = 64
    combine: str = "pooled"
    weights: tuple | None = None

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(copy.deepcopy(dict(p)) for p in self.paths))
        if not self.paths:
            raise TaskError("a task needs at least one path")
        for i, spec in enumerate(self.paths):
            if spec.get("kind") == "sweep":
                check_sweep(spec, i)
            if "payload_masses" in spec:
                _finite_list(spec["payload_masses"], f"path {i} ({spec.get('kind')}): payload_masses (kg)", True)
        if self.combine not in COMBINE:
            raise TaskError(f"unknown combination {self.combine!r} of the task's paths; use one of {list(COMBINE)}")
        if self.weights is not None:
            if self.combine != "weighted":
                raise TaskError(f"weights {list(self.weights)} are given but the paths are combined "
                                f"{self.combine!r}: weights need combine='weighted'")
            w = np.asarray(self.weights, float)
            if w.shape != (len(self.paths),):
                raise TaskError(f"weights: one per path ({len(self.paths)}: "
                                f"{[p.get('kind') for p in self.paths]}), got {list(self.weights)}")
            bad = [f"path {i} ({self.paths[i].get('kind')}) {self.weights[i]}" for i in range(w.size)
                   if not (np.isfinite(w[i]) and w[i] >= 0)]
            if bad:
                raise TaskError("weights must be finite and >= 0: " + ", ".join(bad))
            if not np.sum(w) > 0:
                raise TaskError(f"weights are all zero ({list(self.weights)}): give at least one path a weight > 0")
            object.__setattr__(self, "weights", tuple(float(v) for v in w))
        if int(self.samples_per_path) < 4:
            raise TaskError(f"samples_per_path must be >= 4, got {self.samples_per_path}")
        if self.payload_mass is not None:
            _positive(self.payload_mass, "payload_mass")
        if self.payload_inertia is not None:
            I = np.asarray(self.payload_inertia, float)
            if I.shape != (3,) or not np.all(np.isfinite(I)) or np.any(I <= 0):
                raise TaskError(f"payload_inertia must be three finite moments > 0, got {self.payload_inertia}")

    def path_sizes(self):
        """[(samples per payload mass, payload masses or None)] per path: ``samples_per_path`` for a moving
        path, the grid's size for a sweep."""
        out = []
        for spec in self.paths:
            if spec.get("kind") == "sweep":
                n = int(np.prod([len(np.atleast_1d(spec.get(a, [0.0]))) for a in SWEEP_AXES]))
            else:
                n = int(self.samples_per_path)
            masses = spec.get("payload_masses")
            out.append((n, None if masses is None else [float(m) for m in np.atleast_1d(masses)]))
        return out

    @property
    def size(self):
        """The number of samples of ``samples()``: ``samples_per_path`` per moving path, a sweep's poses, each
        times the path's number of payload masses."""
        return sum(n * (1 if m is None else len(m)) for n, m in self.path_sizes())

    @property
    def has_payload_range(self):
        return any("payload_masses" in p for p in self.paths)

    def describe_sample(self, k):
        """Where sample ``k`` of ``samples()`` lies, in words: 'path 1 (sweep), pose 3' or 'path 0 (ellipse at
        payload 50 kg), sample 7'."""
        k = int(k)
        for i, ((n, masses), spec) in enumerate(zip(self.path_sizes(), self.paths)):
            count = n * (1 if masses is None else len(masses))
            if k < count:
                at = "" if masses is None else f" at payload {masses[k // n]:.4g} kg"
                what = "pose" if spec.get("kind") == "sweep" else "sample"
                return f"path {i} ({spec.get('kind')}{at}), {what} {k % n}"
            k -= count
        raise IndexError(f"sample {k} beyond the task's {self.size}")

    def with_payload(self, params: CKCMParams) -> CKCMParams:
        """``params`` carrying this task's payload."""
        changes = {}
        if self.payload_mass is not None:
            changes["M"] = self.payload_mass
        if self.payload_inertia is not None:
            changes["I_payload"] = self.payload_inertia
        return params.replace(**changes) if changes else params

    def path_objects(self, params: CKCMParams):
        """[(path, duration)] of the moving paths for the design ``params`` (the ellipse's default height is its
        home height); a sweep has no motion and no entry."""
        return [path_of(spec, params, i) for i, spec in enumerate(self.paths) if spec.get("kind") != "sweep"]

    def durations(self, params: CKCMParams):
        """Each path's duration (s) in the task's time average: its period or move time (a sweep's ``hold`` ×
        poses), times its number of payload masses."""
        out = []
        for i, ((n, masses), spec) in enumerate(zip(self.path_sizes(), self.paths)):
            T = (_positive(spec.get("hold", DEFAULT_HOLD), f"path {i} (sweep): hold") * n
                 if spec.get("kind") == "sweep" else path_of(spec, params, i)[1])
            out.append(T * (1 if masses is None else len(masses)))
        return out

    def _path_arrays(self, spec, params, i):
        """(Φ, Φ̇, Φ̈) (n, 6) of one path at its samples: a sweep's poses at rest, a motion's sampled."""
        f = jnp.result_type(params.m)
        if spec.get("kind") == "sweep":
            q = jnp.asarray(sweep_poses(spec, params, i), f)
            return q, jnp.zeros_like(q), jnp.zeros_like(q)
        path, T = path_of(spec, params, i)
        return _sample_path(path, jnp.asarray(_sample_times(spec["kind"], T, int(self.samples_per_path)), f))

    def samples(self, params: CKCMParams) -> TaskSamples:
        """The task sampled into ``TaskSamples`` (eager; raises ``TaskError`` on a bad spec)."""
        params = self.with_payload(params)
        durations = self.durations(params)
        total = sum(durations)
        poses, rates, accs, weights, index, factor = [], [], [], [], [], []
        for i, ((n, masses), spec, T) in enumerate(zip(self.path_sizes(), self.paths, durations)):
            q, qd, qdd = self._path_arrays(spec, params, i)
            c = [1.0] if masses is None else [m / float(params.M) for m in masses]
            poses += [q] * len(c)
            rates += [qd] * len(c)
            accs += [qdd] * len(c)
            weights.append(np.full(n * len(c), T / (n * len(c) * total)))
            index.append(np.full(n * len(c), i))
            factor.append(np.repeat(c, n))
        f = jnp.result_type(params.m)
        w = np.ones(len(self.paths)) if self.weights is None else np.asarray(self.weights)
        return TaskSamples(jnp.concatenate(poses), jnp.concatenate(rates), jnp.concatenate(accs),
                           jnp.asarray(np.concatenate(weights), f), jnp.asarray(np.concatenate(index)),
                           params.M, params.I_payload,
                           jnp.asarray(np.concatenate(factor), f) if self.has_payload_range else None,
                           jnp.asarray(w, f))

    def to_json(self):
        return {"paths": [dict(p) for p in self.paths], "payload_mass": self.payload_mass,
                "payload_inertia": None if self.payload_inertia is None else list(self.payload_inertia),
                "samples_per_path": int(self.samples_per_path), "combine": self.combine,
                "weights": None if self.weights is None else list(self.weights)}

    @classmethod
    def from_json(cls, d):
        return cls(paths=tuple(d["paths"]), payload_mass=d.get("payload_mass"),
                   payload_inertia=None if d.get("payload_inertia") is None else tuple(d["payload_inertia"]),
                   samples_per_path=int(d.get("samples_per_path", 64)), combine=d.get("combine", "pooled"),
                   weights=None if d.get("weights") is None else tuple(d["weights"]))

    def describe(self):
        return json.dumps(self.to_json())


def ellipse_task(period=DEFAULT_PERIOD, samples_per_path=64, payload_mass=None, **ellipse_spec) -> Task:
    """The paper's task (Nguyen & Pooran eq. 55): one loop of the ellipse in ``period`` seconds."""
    return Task(paths=({"kind": "ellipse", "period": period, **ellipse_spec},), payload_mass=payload_mass,
                samples_per_path=samples_per_path)
