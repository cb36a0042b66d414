"""Cantilevered (clamped-free) Bernoulli-Euler mode shapes and the modal integrals of the assumed-modes
links (Bonaventura eq. 126-129, Appendix A).

A link of length L bends transversely by w(x, t) = Σⱼ σⱼ(x) q_fj(t) (Bonaventura eq. 126), x along the undeformed axis.
The mode shapes are the clamped-free eigenfunctions of the uniform beam,

    σⱼ(x) = cosh βⱼξ − cos βⱼξ − kⱼ (sinh βⱼξ − sin βⱼξ),   ξ = x / L,   kⱼ = (cosh βⱼ + cos βⱼ)/(sinh βⱼ + sin βⱼ),

with βⱼ the roots of 1 + cos β cosh β = 0 (βⱼ = 1.8751, 4.6941, 7.8548, ...). This normalisation gives
∫₀ᴸ σᵢσⱼ dx = L δᵢⱼ and tip values σ̄ⱼ = 2 (−1)ʲ⁺¹, σ̄'ⱼ L = 2.75301, −9.56156, 15.69733 — Appendix A's
numbers, which ``tests/test_flexible.py`` checks this module against. Everything here is in the unit
coordinate ξ ∈ [0, 1]; a link of length L scales it (σ'(x) = σ̂'(ξ)/L, dx = L dξ), so lengths stay
differentiable parameters of the module while the tables below are constants.

Integrals are by Gauss-Legendre quadrature on ``N_QUAD`` nodes (the integrands are smooth: exact to
rounding for the three modes the thesis uses). The foreshortening of Bonaventura eq. 129,
u(x) = −½ ∫₀ˣ w'² dx = −½ Σᵢⱼ q_fi q_fj Sᵢⱼ(x), needs Sᵢⱼ(x) = ∫₀ˣ σ̂ᵢ' σ̂ⱼ' dξ at every node: a nested
quadrature on [0, ξ_g].
"""
import functools
from typing import NamedTuple

import numpy as np

MAX_MODES = 5
N_QUAD = 32


@functools.lru_cache(maxsize=None)
def clamped_free_roots(n=MAX_MODES):
    """βⱼ L, the first ``n`` roots of the clamped-free frequency equation 1 + cos β cosh β = 0 (Newton from
    the asymptotic (j − ½)π)."""
    roots = []
    for j in range(1, n + 1):
        b = (j - 0.5) * np.pi
        for _ in range(50):
            f = 1.0 + np.cos(b) * np.cosh(b)
            df = -np.sin(b) * np.cosh(b) + np.cos(b) * np.sinh(b)
            b -= f / df
        roots.append(b)
    return np.array(roots)


def mode_shape(j, xi, derivative=0):
    """σ̂ⱼ and its ξ-derivatives (0-2) at ξ (numpy): the clamped-free mode j (1-based) of the unit beam."""
    b = clamped_free_roots()[j - 1]
    k = (np.cosh(b) + np.cos(b)) / (np.sinh(b) + np.sin(b))
    x = b * np.asarray(xi, dtype=float)
    if derivative == 0:
        return np.cosh(x) - np.cos(x) - k * (np.sinh(x) - np.sin(x))
    if derivative == 1:
        return b * (np.sinh(x) + np.sin(x) - k * (np.cosh(x) - np.cos(x)))
    if derivative == 2:
        return b ** 2 * (np.cosh(x) + np.cos(x) - k * (np.sinh(x) + np.sin(x)))
    raise ValueError(f"mode_shape: derivative must be 0, 1 or 2, got {derivative}")


class ModeTables(NamedTuple):
    """Constant tables of ``n`` modes on the unit beam (numpy): the quadrature nodes ``xi``/weights ``w``
    (N_QUAD), σ̂ at the nodes ``sigma`` (N_QUAD, n), the foreshortening integrals ``S`` (N_QUAD, n, n),
    tip values ``tip`` σ̂(1), ``tip_slope`` σ̂'(1), ``tip_S`` S(1) (= a₁₃ L of Appendix A), and the stiffness
    integrals ``K`` = ∫ σ̂ᵢ'' σ̂ⱼ'' dξ (= βⱼ⁴ δᵢⱼ)."""
    xi: np.ndarray
    w: np.ndarray
    sigma: np.ndarray
    S: np.ndarray
    tip: np.ndarray
    tip_slope: np.ndarray
    tip_S: np.ndarray
    K: np.ndarray


def _modes_at(n, xi, derivative=0):
    """(len(xi), n): σ̂ⱼ (or a derivative) of modes 1..n at the points xi."""
    xi = np.asarray(xi, dtype=float)
    if n == 0:
        return np.zeros(xi.shape + (0,))
    return np.stack([mode_shape(j, xi, derivative) for j in range(1, n + 1)], axis=-1).reshape(xi.shape + (n,))


@functools.lru_cache(maxsize=None)
def mode_tables(n):
    """:class:`ModeTables` for ``n`` modes (0 ≤ n ≤ MAX_MODES)."""
    if not 0 <= n <= MAX_MODES:
        raise ValueError(f"mode_tables: the number of modes must be in 0..{MAX_MODES}, got {n}")
    g, gw = np.polynomial.legendre.leggauss(N_QUAD)
    xi, w = 0.5 * (g + 1.0), 0.5 * gw
    sigma = _modes_at(n, xi)

    def S_at(x):                                     # ∫₀ˣ σ̂ᵢ' σ̂ⱼ' dξ on the nodes mapped to [0, x]
        d = _modes_at(n, x * xi, 1)
        return x * np.einsum("g,gi,gj->ij", w, d, d)

    S = np.stack([S_at(x) for x in xi]).reshape(N_QUAD, n, n)
    dd = _modes_at(n, xi, 2)
    return ModeTables(xi, w, sigma, S, _modes_at(n, 1.0), _modes_at(n, 1.0, 1), S_at(1.0),
                      np.einsum("g,gi,gj->ij", w, dd, dd))
