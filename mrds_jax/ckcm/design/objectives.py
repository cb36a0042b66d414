"""Actuator demand of a design along a task: the six leg forces at every task sample through either dynamic
model, and the differentiable measures of demand a designer minimises.

Models (``MODELS``):

- ``"paper"``      Nguyen & Pooran's Lagrangian model, τ = C⁻ᵀ (D Φ̈ + H Φ̇Φ̇ + G) (Nguyen & Pooran eq. 45, 56 corrected;
                   ``lagrangian.actuator_forces``);
- ``"multibody"``  the MRDS model of the same machine: closed-chain inverse dynamics of six U-P-S legs and a
                   free payload (``multibody.inverse_dynamics_at``), leg masses by ``legs`` ("bench": two
                   cylinders per leg, or "paper": Nguyen & Pooran eq. 40's mass distribution).

Measures (``DEMANDS``; τ in N, l̇ = C Φ̇ in m/s, w the samples' time weights):

- ``"peak"``   smooth maximum of |τ_ik| over legs and samples, s/β · log Σ exp(β |τ_ik|_ε / s) with a fixed
               scale s (the start design's peak) and sharpness β: an upper bound of the peak that exceeds it
               by at most s·log(6K)/β (the optimiser minimises the bound; results report the true peak);
- ``"rms"``    (Σ_k w_k Σ_i τ_ik² / 6)^½, the force an actuator must sustain thermally;
- ``"power"``  Σ_k w_k Σ_i |τ_ik l̇_ik|_ε, the mean mechanical power the six actuators deliver (no
               regeneration: negative work is not credited).

|x|_ε = (x² + ε²)^½ − ε keeps every measure differentiable at zero force.

Several tasks at once (``task.COMBINE``): ``demand_per_path`` takes each measure over one path's samples only
(the soft peak over that path's forces; RMS force and power with the path's time weights renormalised to 1),
all paths at once from the same forces (no per-path recompilation: masks over the samples), and
``combine_demands`` combines them — the worst case max_p d_p or the weighted sum Σ_p w_p d_p.
"""
from __future__ import annotations

import functools

import numpy as np
import jax
import jax.numpy as jnp

from ...pytree import replace
from .. import lagrangian, multibody
from ..kinematics import jacobian
from ..params import CKCMParams
from .task import TaskSamples

MODELS = ("paper", "multibody")


def model_description(model, legs="bench"):
    """Which model a force figure comes from, in words (the CLI prints it next to every figure)."""
    if model == "paper":
        return "the paper's Lagrangian model (Nguyen & Pooran eq. 39-45)"
    return f"the MRDS multibody model ({'bench cylinder' if legs == 'bench' else 'Nguyen & Pooran eq. 40 point-mass'} legs)"
LEG_MODELS = ("bench", "paper")
DEMANDS = ("peak", "rms", "power")


def _force_at(params, model, legs):
    if model == "paper":
        return lambda q, qd, qdd: lagrangian.actuator_forces_total(params, q, qd, qdd)
    if model == "multibody":
        return lambda q, qd, qdd: multibody.inverse_dynamics_at(params, q, qd, qdd, legs).tau_actuated
    raise ValueError(f"unknown dynamic model {model!r}; use one of {list(MODELS)}")


def _force_with_payload(params, model, legs):
    """(Φ, Φ̇, Φ̈, c) ↦ τ of ``params`` carrying c times its payload (mass and inertia): a payload range."""
    return lambda q, qd, qdd, c: _force_at(params.replace(M=params.M * c, I_payload=params.I_payload * c),
                                           model, legs)(q, qd, qdd)


def actuator_forces(params: CKCMParams, samples: TaskSamples, model="paper", legs="bench", batch_size=16):
    """Leg forces τ (K, 6) in N at the task samples, through ``model`` (module docstring); with a payload range
    (``samples.payload_factor``) each sample at its own payload.  The samples go through ``jax.lax.map`` in
    vectorised batches of ``batch_size`` (compiles the dynamics once and stays clear of the jax 0.10 CPU
    deadlock of large vmapped factorisations)."""
    params = params.replace(M=samples.M, I_payload=samples.I_payload)
    n = min(int(batch_size), samples.size)
    if samples.payload_factor is not None:
        f = _force_with_payload(params, model, legs)
        return jax.lax.map(lambda x: f(*x), (samples.pose, samples.rate, samples.acc, samples.payload_factor),
                           batch_size=n)
    f = _force_at(params, model, legs)
    return jax.lax.map(lambda x: f(*x), (samples.pose, samples.rate, samples.acc), batch_size=n)


def actuator_speeds(params: CKCMParams, samples: TaskSamples):
    """Leg speeds l̇ = C(Φ) Φ̇ (K, 6) in m/s (Nguyen & Pooran eq. 26)."""
    return jax.vmap(lambda q, qd: jacobian(params, q) @ qd)(samples.pose, samples.rate)


def forces_and_speeds(params: CKCMParams, samples: TaskSamples, model="paper", legs="bench", batch_size=16):
    """(τ, l̇): ``actuator_forces`` and ``actuator_speeds`` at the task samples."""
    return actuator_forces(params, samples, model, legs, batch_size), actuator_speeds(params, samples)


def jitted_forces_and_speeds(model="paper", legs="bench", batch_size=16):
    """A cached ``jax.jit`` of ``forces_and_speeds``: problem set-up, evaluation, verification and plots share
    its compilations (``forces_in_chunks`` keeps them at one sample count)."""
    return _jitted_forces_and_speeds(model, legs, int(batch_size))


@functools.lru_cache(maxsize=None)
def _jitted_forces_and_speeds(model, legs, batch_size):
    return jax.jit(functools.partial(forces_and_speeds, model=model, legs=legs, batch_size=batch_size))


def forces_in_chunks(params: CKCMParams, samples: TaskSamples, chunk, model="paper", legs="bench", batch_size=16):
    """(τ, l̇) of ``forces_and_speeds`` at any number of samples, through the compiled kernel of ``chunk``
    samples (``jitted_forces_and_speeds``): the samples go in chunks of ``chunk``, the last one padded by
    repeating its final sample (the padding's forces are dropped).  The denser checks (``verify``, the plots)
    so reuse the kernel the optimiser's own sample count compiled.  Eager; numpy arrays out."""
    K = samples.size
    n = -(-K // int(chunk)) * int(chunk)
    fields = ("pose", "rate", "acc", "weight", "path_index") + (
        ("payload_factor",) if samples.payload_factor is not None else ())
    padded = {f: np.concatenate([np.asarray(getattr(samples, f))] + [np.asarray(getattr(samples, f))[-1:]] * (n - K))
              for f in fields}
    f = jitted_forces_and_speeds(model, legs, batch_size)
    out = [f(params, replace(samples, **{k: jnp.asarray(v[i:i + chunk]) for k, v in padded.items()}))
           for i in range(0, n, int(chunk))]
    return tuple(np.concatenate([np.asarray(o[j]) for o in out])[:K] for j in range(2))


def smooth_abs(x, eps):
    """|x|_ε = (x² + ε²)^½ − ε: differentiable everywhere, within ε of |x|."""
    return jnp.sqrt(x * x + eps * eps) - eps


def soft_peak(tau, scale, sharpness=100.0, mask=None):
    """s/β · logsumexp(β |τ|_ε / s): a smooth upper bound of max |τ| (module docstring); over the samples
    where ``mask`` (K,) is true only, when given."""
    a = smooth_abs(tau, 1e-6 * scale) / scale
    b = None if mask is None else jnp.broadcast_to(mask[:, None], tau.shape).ravel().astype(a.dtype)
    return scale * jax.nn.logsumexp(sharpness * a.ravel(), b=b) / sharpness


def rms_force(tau, weight):
    """(Σ_k w_k Σ_i τ_ik² / 6)^½ with Σ w = 1."""
    return jnp.sqrt(jnp.sum(weight[:, None] * tau * tau) / tau.shape[-1])


def mean_power(tau, speed, weight, eps=1e-9):
    """Σ_k w_k Σ_i |τ_ik l̇_ik|_ε in W (eps in W)."""
    return jnp.sum(weight[:, None] * smooth_abs(tau * speed, eps))


def demand(name, tau, speed, weight, scale, sharpness=100.0):
    """The demand measure ``name`` (``DEMANDS``) of forces ``tau`` and speeds ``speed``; ``scale`` (N) sets the
    soft peak's temperature and is ignored by the others."""
    if name == "peak":
        return soft_peak(tau, scale, sharpness)
    if name == "rms":
        return rms_force(tau, weight)
    if name == "power":
        return mean_power(tau, speed, weight)
    raise ValueError(f"unknown demand measure {name!r}; use one of {list(DEMANDS)}")


def path_weights(weight, path_index, n_paths):
    """(masks (P, K), weights (P, K)): which samples belong to each path, and the time weights of each path's
    samples renormalised to sum to 1 over that path (zero elsewhere)."""
    mask = path_index[None, :] == jnp.arange(n_paths)[:, None]
    w = jnp.where(mask, weight[None, :], 0.0)
    return mask, w / jnp.sum(w, axis=1, keepdims=True)


def demand_per_path(name, tau, speed, weight, path_index, n_paths, scale, sharpness=100.0):
    """The demand measure ``name`` of every path on its own (P,): ``demand`` over that path's samples."""
    mask, w = path_weights(weight, path_index, n_paths)
    if name == "peak":
        return jax.vmap(lambda m: soft_peak(tau, scale, sharpness, m))(mask)
    return jax.vmap(lambda wp: demand(name, tau, speed, wp, scale, sharpness))(w)


def combine_demands(d, how, weights):
    """The task's demand from its paths' demands d (P,): ``"worst"`` max_p d_p, ``"weighted"`` Σ_p w_p d_p."""
    if how == "worst":
        return jnp.max(d)
    if how == "weighted":
        return jnp.sum(weights * d)
    raise ValueError(f"unknown combination {how!r} of per-path demands; use 'worst' or 'weighted'")


def demand_metrics(tau, speed, weight):
    """The exact (non-smoothed) measures a report quotes: peak |τ| (N), RMS force (N), mean power (W)."""
    return {"peak_force": jnp.max(jnp.abs(tau)), "rms_force": rms_force(tau, weight),
            "mean_power": jnp.sum(weight[:, None] * jnp.abs(tau * speed))}
