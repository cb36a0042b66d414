"""Robust design under manufacturing tolerances: the peak actuator force as a random
variable of the as-built machine, and its mean or a smooth high quantile as the objective, from Monte Carlo
samples drawn once (fixed standard normals ε, so the objective is a smooth deterministic function of the
design and its gradient the reparameterised one: d/dx E[f(x + σε)] ≈ mean_s ∇f(x + σε_s)).

The as-built machine (``perturbed_params``): every attachment point moved in its platform's plane by
independent normal errors of standard deviation ``point_sd`` (m) radially and tangentially (the tangential
one as an angle error point_sd/r, Nguyen & Pooran eq. 2-4), and every leg's moving and stationary masses scaled by
(1 + ``mass_sd`` ε) independently (Nguyen & Pooran eq. 42).  Always per leg: a symmetric design stops being symmetric.

The smooth quantile (``smooth_quantile``): q_α solves mean_s Φ((q − y_s)/h) = α with the logistic Φ and
bandwidth h (a kernel estimate of the distribution function; Nadaraya 1964).  q is found by bisection with its
gradient from the implicit-function theorem, dq/dy_s = Φ'_s / Σ_t Φ'_t — not by differentiating the bisection.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ...pytree import pytree_dataclass
from ..params import CKCMParams, per_leg_geometry, per_leg_masses

NOISE_SIZE = 36   # 24 attachment coordinates (λ, Λ, r_A, r_B per leg) + 12 masses (moving, stationary per leg)
STATISTICS = ("mean", "quantile")


@pytree_dataclass
class Tolerances:
    """Manufacturing tolerances (standard deviations): attachment points ``point_sd`` m in each in-plane
    direction, leg part masses ``mass_sd`` (fraction)."""
    point_sd: float = 1e-3
    mass_sd: float = 0.02


def draw_noise(key, samples, dtype=jnp.float64):
    """Standard normals (samples, ``NOISE_SIZE``): the fixed Monte Carlo draws of the robust objective."""
    return jax.random.normal(key, (int(samples), NOISE_SIZE), dtype)


def perturbed_params(params: CKCMParams, eps, tol: Tolerances) -> CKCMParams:
    """The as-built machine of draw ``eps`` (``NOISE_SIZE``,) (module docstring); differentiable in
    ``params`` (reparameterised) and ``tol``."""
    G = per_leg_geometry(params)
    e = eps[:24].reshape(4, 6)
    radii = G[2:]
    G = jnp.concatenate([G[:2] + tol.point_sd * e[:2] / radii, radii + tol.point_sd * e[2:]])
    m, m1 = per_leg_masses(params)
    moving = m1 * (1 + tol.mass_sd * eps[24:30])
    stationary = (m - m1) * (1 + tol.mass_sd * eps[30:36])
    return params.replace(leg_geometry=G, leg_masses=jnp.stack([moving + stationary, moving]))


def smooth_quantile(y, alpha, width, iterations=60):
    """Kernel-smoothed α-quantile of the samples y (S,) with logistic kernel of bandwidth ``width``
    (module docstring); exact implicit gradient."""
    y0 = jax.lax.stop_gradient(y)

    def cdf(q):
        return jnp.mean(jax.nn.sigmoid((q - y0) / width))

    def bisect(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < alpha
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)
    lo, hi = jax.lax.fori_loop(0, iterations, bisect, (jnp.min(y0) - 40 * width, jnp.max(y0) + 40 * width))
    q = 0.5 * (lo + hi)
    dens = jax.nn.sigmoid((q - y0) / width) * (1 - jax.nn.sigmoid((q - y0) / width))
    w = dens / jnp.sum(dens)
    return q + jnp.sum(w * (y - y0))


def statistic(name, y, alpha=0.95, width=1.0):
    """The robust statistic ``name`` ("mean" or "quantile", ``STATISTICS``) of the samples y."""
    if name == "mean":
        return jnp.mean(y)
    if name == "quantile":
        return smooth_quantile(y, alpha, width)
    raise ValueError(f"unknown robust statistic {name!r}; use one of {list(STATISTICS)}")
