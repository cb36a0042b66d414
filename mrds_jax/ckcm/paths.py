"""Payload paths of the CKCM as pytrees t ↦ (Φ, Φ̇, Φ̈): the paper's ellipse (Nguyen & Pooran eq. 55) and a
minimum-jerk point-to-point move; one compiled simulation serves every path of a kind."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass
from .lagrangian import ELLIPSE_SEMI_AXES
from .params import CKCMParams


@pytree_dataclass
class EllipsePath:
    """The ellipse of Nguyen & Pooran eq. 55 as a pytree path t ↦ (Φ, Φ̇, Φ̈): x = c_x + a cos(2πt/T), y = c_y + b
    sin(2πt/T) at height z, level (constant angular rate; see ``lagrangian.ellipse_path``)."""
    period: jax.Array
    a: jax.Array
    b: jax.Array
    z: jax.Array
    center: jax.Array

    def __call__(self, t):
        w = 2 * jnp.pi / self.period
        s = w * t
        c, sn = jnp.cos(s), jnp.sin(s)
        o = jnp.zeros_like(s)
        q = jnp.stack([self.center[0] + self.a * c, self.center[1] + self.b * sn, o + self.z, o, o, o])
        qd = jnp.stack([-self.a * w * sn, self.b * w * c, o, o, o, o])
        qdd = jnp.stack([-self.a * w**2 * c, -self.b * w**2 * sn, o, o, o, o])
        return q, qd, qdd


def ellipse(params: CKCMParams, period, z=None, semi_axes=ELLIPSE_SEMI_AXES, center=(0.0, 0.0)) -> EllipsePath:
    """``EllipsePath`` of Nguyen & Pooran eq. 55 (semi-axes 5 and 2.5 cm) at height ``z`` (default
    ``params.z_nominal``)."""
    f = jnp.result_type(params.m)
    z = params.z_nominal if z is None else z
    return EllipsePath(*(jnp.asarray(x, f) for x in (period, semi_axes[0], semi_axes[1], z, center)))


@pytree_dataclass
class PointToPointPath:
    """A rest-to-rest move between two poses in ``duration`` seconds along a straight line in pose space with
    the minimum-jerk (quintic) timing s(τ) = 10τ³ − 15τ⁴ + 6τ⁵, τ = t/T clipped to [0, 1]:
    Φ = Φ₀ + s (Φ₁ − Φ₀), zero rate and acceleration at both ends (a pytree path t ↦ (Φ, Φ̇, Φ̈))."""
    start: jax.Array
    end: jax.Array
    duration: jax.Array

    @property
    def period(self):
        return self.duration

    def __call__(self, t):
        T = self.duration
        tau = jnp.clip(t / T, 0.0, 1.0)
        s = tau**3 * (10 - 15 * tau + 6 * tau**2)
        sd = 30 * tau**2 * (1 - tau)**2 / T
        sdd = 60 * tau * (1 - tau) * (1 - 2 * tau) / T**2
        d = self.end - self.start
        return self.start + s * d, sd * d, sdd * d


def point_to_point(start, end, duration, dtype=None) -> PointToPointPath:
    """``PointToPointPath`` from pose ``start`` to pose ``end`` (x, y, z, α, β, γ) in ``duration`` s."""
    f = jnp.result_type(float) if dtype is None else dtype
    return PointToPointPath(jnp.asarray(start, f), jnp.asarray(end, f), jnp.asarray(duration, f))


__all__ = ["EllipsePath", "ellipse", "PointToPointPath", "point_to_point"]
