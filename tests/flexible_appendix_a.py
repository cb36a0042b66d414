"""Bonaventura Appendix A.1 transcribed: the consistently linearised equations of motion of the two-link
flexible module, τ = H q̈ + C + K q (+ Jᵀ F), written out term by term from the thesis (not from our code),
as the independent reference for :mod:`mrds_jax.flexible.chain`.

Transcription notes: y₂ is printed as Σ (ρ₂ a₂₁(j) + M σ̄₂(j)) q_f2(j); it enters only Coriolis terms
(A₅ L₁ T₂ in C₁, A₅ σ̄₁ T₂ in C_f1), whose dimensions need a rate, so it is read as Σ (…) q̇_f2(j).
"""
import numpy as np

from mrds_jax.flexible.modes import mode_shape, mode_tables


def _int(fn):
    """∫₀¹ fn(ξ) dξ by the module's quadrature nodes (fn vectorised over ξ)."""
    t = mode_tables(0)
    return np.einsum("g,g...->...", t.w, fn(t.xi))


def unit_integrals(n):
    """The dimensionless mode integrals of Appendix A (their printed values are checked in the tests)."""
    s = lambda x: np.stack([mode_shape(j, x) for j in range(1, n + 1)], -1)          # noqa: E731
    d = lambda x: np.stack([mode_shape(j, x, 1) for j in range(1, n + 1)], -1)       # noqa: E731
    return dict(
        int_x_sigma=_int(lambda x: x[:, None] * s(x)),                                 # a12 / (ρ L²), a22 / L²
        int_sigma=_int(s),                                                             # a21 / L, n21 / (ρ L)
        int_1mx2_dd=_int(lambda x: (1 - x ** 2)[:, None, None] * d(x)[:, :, None] * d(x)[:, None, :]),
        int_1mx_dd=_int(lambda x: (1 - x)[:, None, None] * d(x)[:, :, None] * d(x)[:, None, :]),   # a23, n23/ρ
        int_dd=_int(lambda x: d(x)[:, :, None] * d(x)[:, None, :]),                    # a13 L
        tip=np.array([mode_shape(j, 1.0) for j in range(1, n + 1)]),
        tip_slope=np.array([mode_shape(j, 1.0, 1) for j in range(1, n + 1)]),
        beta4=np.diag(mode_tables(n).K))


def two_link_equations(q, qd, L1, L2, rho1, rho2, EI1, EI2, M, n):
    """(H, C, K) of Appendix A.1 at (q, q̇) for NF1 = NF2 = n modes; q = [q1, q2, q_f1, q_f2]."""
    u = unit_integrals(n)
    q1d, q2d = qd[0], qd[1]
    qf1, qf2, qf1d, qf2d = q[2:2 + n], q[2 + n:], qd[2:2 + n], qd[2 + n:]
    c2, s2 = np.cos(q[1]), np.sin(q[1])
    sb1, sb2 = u["tip"], u["tip"]                                  # σ̄ (same modes on both links)
    a12 = rho1 * L1 ** 2 * u["int_x_sigma"]
    a13 = u["int_dd"] / L1
    a14 = rho1 * L1 * np.eye(n)
    a15 = 0.5 * rho1 * L1 * u["int_1mx2_dd"]
    a16 = EI1 * np.diag(u["beta4"]) / L1 ** 3
    a21 = L2 * u["int_sigma"]
    a22 = L2 ** 2 * u["int_x_sigma"]
    a23 = u["int_1mx_dd"]
    a24 = L2 * np.eye(n)
    a25 = L2 * u["int_1mx2_dd"]
    a26 = EI2 * np.diag(u["beta4"]) / L2 ** 3
    b23 = u["int_dd"] / L2
    w1, w1d, w2 = sb1 @ qf1, sb1 @ qf1d, sb2 @ qf2
    z1, z2, z3 = rho2 * L2 + M, rho2 * L2 / 2 + M, rho2 * L2 / 3 + M
    z4 = rho2 * a21 + M * sb2
    z5 = rho2 * a22 + M * L2 * sb2
    z6 = rho2 * a24 + M * np.outer(sb2, sb2)
    P1, P2, P3, P4 = rho1 * L1 ** 3 / 3, z3 * L2 ** 2, z1 * L1, z1 * L1 ** 2
    P5 = z1 * np.outer(sb1, sb1)
    T1, T2, T3 = (2 * q1d + q2d) * q2d, q1d + q2d, (q1d + q2d) ** 2
    d13, d21 = a13 @ qf1, a21 @ qf2
    y1 = rho2 * d21 + M * w2
    y2 = z4 @ qf2d                                                  # see the module docstring
    y3 = 0.5 * rho2 * a25 + M * L2 * b23 - (rho2 * a24 + M * np.outer(sb2, sb2))
    y4 = rho2 * a23 + M * b23
    y5 = y4 @ qf2
    A1 = z2 * (L1 * L2 * c2 + w1 * L2 * s2) - y1 * L1 * s2
    A2 = 2 * z2 * L2 * s2 * w1d
    A4 = z2 * (L1 * L2 * s2 - w1 * L2 * c2) + y1 * L1 * c2
    A5 = -2 * y2 * s2
    A6 = z2 * L2 * c2
    A18 = z1 * w1 * sb1
    A19 = z2 * d13 * L2 - y1 * sb1
    A110 = -z2 * L2 * s2 * sb1
    A27 = z4 * L1 * c2 + z5
    A28 = z4 * L1 * s2
    A29 = 2 * z4 * w1d * s2
    A210 = z4 * w1 - y5 * L1
    N = 2 + 2 * n
    f1, f2 = slice(2, 2 + n), slice(2 + n, N)
    H = np.zeros((N, N))
    H[0, 0] = P1 + P2 + P4 + 2 * A1
    H[0, 1] = H[1, 0] = P2 + A1
    H[0, f1] = a12 + (P3 + A6) * sb1
    H[0, f2] = A27
    H[1, 1] = P2
    H[1, f1] = A6 * sb1
    H[1, f2] = z5
    H[f1, 0] = H[0, f1] + A19 * s2
    H[f1, 1] = H[1, f1] + A19 * s2
    H[f1, f1] = a14 + P5
    H[f1, f2] = np.outer(sb1, z4 * c2)
    H[f2, 0] = H[0, f2] + A210 * s2
    H[f2, 1] = H[1, f2]
    H[f2, f1] = H[f1, f2].T
    H[f2, f2] = z6
    C = np.concatenate([[A2 * q1d + A5 * L1 * T2 - A4 * T1, q1d * (A2 + A4 * q1d)],
                        T3 * A110 + A5 * sb1 * T2 - q1d ** 2 * A18, q1d * (A29 + q1d * A28)])
    K = np.zeros((N, N))
    K[f1, f1] = a16 + T3 * A6 * a13 + q1d ** 2 * (a15 - a14 + P3 * a13)
    K[f1, f2] = -T3 * c2 * np.outer(sb1, z4)
    K[f2, f1] = -q1d ** 2 * c2 * np.outer(z4, sb1)
    K[f2, f2] = a26 + T3 * y3 + q1d ** 2 * c2 * L1 * y4
    return H, C, K
