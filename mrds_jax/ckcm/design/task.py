"""The task a design is optimised for: one or more payload paths with their timing, and the payload.

A task is written as a JSON-able spec (saved with every result, so a design file says what it was optimised
for) and sampled once into fixed arrays (``TaskSamples``): the paths are Cartesian, so their samples do not
depend on the design, and the objective is a plain function of the design over those arrays.

Path kinds (``PATH_KINDS``):

- ``{"kind": "ellipse", "period": T, "semi_axes": [a, b], "z": z, "center": [x, y]}`` — Nguyen & Pooran eq. 55 (default
  semi-axes 5 and 2.5 cm, z = the design's home height), constant angular rate (``multibody.ellipse``);
- ``{"kind": "point_to_point", "start": Φ₀, "end": Φ₁, "duration": T}`` — a rest-to-rest minimum-jerk move
  (``multibody.point_to_point``).

Samples: ``samples_per_path`` instants per path, the ellipse's over one period without its endpoint, a move's
at the midpoints of equal sub-intervals; each carries the time weight T_p / (n_p Σ_p T_p) so that sums over
samples are time averages over the whole task.
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

PATH_KINDS = ("ellipse", "point_to_point")
DEFAULT_PERIOD = 0.5  # s: the paper's Table 2 loop (experiments/out/ckcm_reproduction.md)


class TaskError(InputError):
    """A task spec that does not describe a motion: unknown path kind, missing or bad fields."""


@pytree_dataclass
class TaskSamples:
    """The task as arrays: payload poses Φ, rates Φ̇ and accelerations Φ̈ (K, 6), time weights (K,) summing
    to 1, the path index of every sample (K,), and the payload's mass and principal inertia."""
    pose: jax.Array
    rate: jax.Array
    acc: jax.Array
    weight: jax.Array
    path_index: jax.Array
    M: jax.Array
    I_payload: jax.Array

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
    raise TaskError(f"path {i}: unknown kind {kind!r}; use one of {list(PATH_KINDS)}")


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

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(copy.deepcopy(dict(p)) for p in self.paths))
        if not self.paths:
            raise TaskError("a task needs at least one path")
        if int(self.samples_per_path) < 4:
            raise TaskError(f"samples_per_path must be >= 4, got {self.samples_per_path}")
        if self.payload_mass is not None:
            _positive(self.payload_mass, "payload_mass")
        if self.payload_inertia is not None:
            I = np.asarray(self.payload_inertia, float)
            if I.shape != (3,) or not np.all(np.isfinite(I)) or np.any(I <= 0):
                raise TaskError(f"payload_inertia must be three finite moments > 0, got {self.payload_inertia}")

    @property
    def size(self):
        """The number of samples of ``samples()``: ``samples_per_path`` per path."""
        return int(self.samples_per_path) * len(self.paths)

    def with_payload(self, params: CKCMParams) -> CKCMParams:
        """``params`` carrying this task's payload."""
        changes = {}
        if self.payload_mass is not None:
            changes["M"] = self.payload_mass
        if self.payload_inertia is not None:
            changes["I_payload"] = self.payload_inertia
        return params.replace(**changes) if changes else params

    def path_objects(self, params: CKCMParams):
        """[(path, duration)] for the design ``params`` (the ellipse's default height is its home height)."""
        return [path_of(spec, params, i) for i, spec in enumerate(self.paths)]

    def samples(self, params: CKCMParams) -> TaskSamples:
        """The task sampled into ``TaskSamples`` (eager; raises ``TaskError`` on a bad spec)."""
        params = self.with_payload(params)
        n = int(self.samples_per_path)
        paths = self.path_objects(params)
        total = sum(T for _, T in paths)
        poses, rates, accs, weights, index = [], [], [], [], []
        for i, ((path, T), spec) in enumerate(zip(paths, self.paths)):
            t = jnp.asarray(_sample_times(spec["kind"], T, n), jnp.result_type(params.m))
            q, qd, qdd = _sample_path(path, t)
            poses.append(q), rates.append(qd), accs.append(qdd)
            weights.append(np.full(n, T / (n * total)))
            index.append(np.full(n, i))
        f = jnp.result_type(params.m)
        return TaskSamples(jnp.concatenate(poses), jnp.concatenate(rates), jnp.concatenate(accs),
                           jnp.asarray(np.concatenate(weights), f), jnp.asarray(np.concatenate(index)),
                           params.M, params.I_payload)

    def to_json(self):
        return {"paths": [dict(p) for p in self.paths], "payload_mass": self.payload_mass,
                "payload_inertia": None if self.payload_inertia is None else list(self.payload_inertia),
                "samples_per_path": int(self.samples_per_path)}

    @classmethod
    def from_json(cls, d):
        return cls(paths=tuple(d["paths"]), payload_mass=d.get("payload_mass"),
                   payload_inertia=None if d.get("payload_inertia") is None else tuple(d["payload_inertia"]),
                   samples_per_path=int(d.get("samples_per_path", 64)))

    def describe(self):
        return json.dumps(self.to_json())


def ellipse_task(period=DEFAULT_PERIOD, samples_per_path=64, payload_mass=None, **ellipse_spec) -> Task:
    """The paper's task (Nguyen & Pooran eq. 55): one loop of the ellipse in ``period`` seconds."""
    return Task(paths=({"kind": "ellipse", "period": period, **ellipse_spec},), payload_mass=payload_mass,
                samples_per_path=samples_per_path)
