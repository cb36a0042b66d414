"""Kinematics of the CKCM end-effector (Nguyen & Pooran 1989, Section 3.1-3.2).

Pose (the paper's Cartesian coordinates Φ, Nguyen & Pooran eq. 20): ``pose = (x, y, z, α, β, γ)`` — the position ᴮd of
the payload centroid A in the base frame {B} (Nguyen & Pooran eq. 6) and the Z-Y-X Euler angles of {A} relative to {B}
(Nguyen & Pooran eq. 19): rotate by α about z_B, then β about the new y, then γ about the newest x, so
R = R_z(α) R_y(β) R_x(γ).  Euler angle *rates* are the generalized velocities (Nguyen & Pooran eq. 21); the angular
velocity in {B} is ω = V(Φ) Φ̇ (Nguyen & Pooran eq. 32-34).  Leg lengths l_i are the joint variables.

Pure, jittable functions of one scenario (``jax.vmap`` for batches):

- ``inverse_kinematics``  closed form, Nguyen & Pooran eq. 18
- ``jacobian``            C = ∂l/∂Φ written from Nguyen & Pooran eq. 26-27 (checked against ``jax.jacfwd`` in the tests)
- ``leg_elevation``, ``elevation_jacobian``   θ_i of Nguyen & Pooran eq. 28-29 and t_ik = ∂θ_i/∂φ_k of
  Nguyen & Pooran eq. 30-31
- ``angular_velocity_matrix`` (V, Nguyen & Pooran eq. 34), ``angular_acceleration_matrices`` (Q_k,
  Nguyen & Pooran eq. 35-36)
- ``newton_forward_kinematics``  Newton iteration with a fixed iteration count, implicit-function gradients
  (``jax.lax.custom_root``); returns a ``FKResult`` with the residual, the Jacobian's condition number and a
  ``converged`` flag instead of raising, so it can be jitted and vmapped.

Eager front doors that raise clear errors (``errors.py``) on bad input:
``solve_forward_kinematics``, ``inverse_kinematics_checked``, ``check_pose``, ``check_leg_lengths``.

Workspace (our definition, the paper gives none): a pose is inside when every leg length lies in the stroke
(``CKCMParams.stroke``), every leg points up and away from the vertical (q_iz > 0 and q_ip > 0: θ_i of
Nguyen & Pooran eq. 28 lies strictly between 0 and 90°, which Nguyen & Pooran eq. 31 needs), |β| < 90° (the Z-Y-X
parametrisation of Nguyen & Pooran eq. 32-34 is singular at |β| = 90°), and the Jacobian C is not numerically singular
(cond(C) ≤ max_condition). Joint angle limits of the universal and ball joints are not modelled (the paper gives none).

Printed-equation notes: Nguyen & Pooran eq. 18 and 27a-f agree with autodiff of Nguyen & Pooran eq. 9-11;
Nguyen & Pooran eq. 31e is printed with +c_i3 c_i5, the derivative of Nguyen & Pooran eq. 28 gives −c_i3 c_i5 (t_ik =
(∂q_iz/∂φ_k − c_i3 c_ik)/q_ip for all k); Nguyen & Pooran eq. 56 writes τ = Jᵀ F, which with the J = C of
Nguyen & Pooran eq. 26 must read τ = C⁻ᵀ F (see ``lagrangian.py``).

Accuracy: float64 reaches FK round-trip errors ~1e-15; float32 works too (the FK tolerance scales with
the dtype's eps): measured FK pose errors ≤ 3e-7 (m, rad) and residuals ≤ 2.4e-7 m at 20 random poses
near home; Nguyen & Pooran eq. 18 loses digits to cancellation (l² is a sum of O(1) terms), so do not expect better.
"""
from __future__ import annotations

import functools

import numpy as np
import jax
import jax.numpy as jnp

from ..pytree import pytree_dataclass
from ..spatial import dense
from .errors import (ForwardKinematicsError, SingularConfigurationError, SingularPoseWarning, StrokeError,
                     WorkspaceError)
from .params import CKCMParams, base_points, payload_points

DEFAULT_MAX_CONDITION = 1e6
DEFAULT_FK_ITERATIONS = 20


# --- orientation ------------------------------------------------------------------------------------------
def euler_zyx(alpha, beta, gamma):
    """R_zyx(α, β, γ) = R_z(α) R_y(β) R_x(γ), the orientation of {A} in {B} (Nguyen & Pooran eq. 19)."""
    ca, sa, cb, sb, cg, sg = (jnp.cos(alpha), jnp.sin(alpha), jnp.cos(beta), jnp.sin(beta),
                              jnp.cos(gamma), jnp.sin(gamma))
    return jnp.stack([
        jnp.stack([ca * cb, ca * sb * sg - sa * cg, ca * sb * cg + sa * sg], -1),
        jnp.stack([sa * cb, sa * sb * sg + ca * cg, sa * sb * cg - ca * sg], -1),
        jnp.stack([-sb, cb * sg, cb * cg], -1)], -2)


def rotation(pose):
    """ᴮ_A R of Nguyen & Pooran eq. 7 for ``pose = (x, y, z, α, β, γ)`` (Nguyen & Pooran eq. 19)."""
    return euler_zyx(pose[3], pose[4], pose[5])


def home_pose(params: CKCMParams):
    """The nominal pose: payload centroid ``z_nominal`` above the base centroid, level, no yaw."""
    z = jnp.asarray(params.z_nominal)
    return jnp.zeros(6, z.dtype).at[2].set(z)


# --- inverse kinematics -----------------------------------------------------------------------------------
def leg_vectors(params: CKCMParams, pose):
    """ᴮq_i = ᴮ_A R ᴬa_i + ᴮd − ᴮb_i, the vector from B_i to A_i in {B} (Nguyen & Pooran eq. 9-10).  Shape (6, 3)."""
    R = rotation(pose)
    return payload_points(params) @ R.T + pose[:3] - base_points(params)


def inverse_kinematics(params: CKCMParams, pose):
    """Leg lengths l_i, i = 1..6, in closed form (Nguyen & Pooran eq. 18).

    l_i² = x² + y² + z² + r_A² + r_B² + 2(r11 a_ix + r12 a_iy)(x − b_ix) + 2(r21 a_ix + r22 a_iy)(y − b_iy)
           + 2(r31 a_ix + r32 a_iy) z − 2(x b_ix + y b_iy),
    which uses a_iz = b_iz = 0 (Nguyen & Pooran eq. 15) and |a_i| = r_A, |b_i| = r_B (Nguyen & Pooran eq. 16-17).
    Equals |ᴮq_i| of Nguyen & Pooran eq. 11.
    """
    x, y, z = pose[0], pose[1], pose[2]
    R = rotation(pose)
    a, b = payload_points(params), base_points(params)
    ax, ay, bx, by = a[:, 0], a[:, 1], b[:, 0], b[:, 1]
    l2 = (x**2 + y**2 + z**2 + params.r_A**2 + params.r_B**2
          + 2 * (R[0, 0] * ax + R[0, 1] * ay) * (x - bx)
          + 2 * (R[1, 0] * ax + R[1, 1] * ay) * (y - by)
          + 2 * (R[2, 0] * ax + R[2, 1] * ay) * z
          - 2 * (x * bx + y * by))
    return jnp.sqrt(l2)


def jacobian(params: CKCMParams, pose):
    """C = ∂l/∂Φ, the (6, 6) matrix of Nguyen & Pooran eq. 26-27: l̇_i = Σ_k c_ik φ̇_k, written from the printed
    formulas.

    c_i1..3 = q_ix/l_i, q_iy/l_i, q_iz/l_i                                                    (27a-c)
    c_i4 = [−(r21 a_ix + r22 a_iy)(x − b_ix) + (r11 a_ix + r12 a_iy)(y − b_iy)] / l_i             (27d)
    c_i5 = [Cα(r31 a_ix + r32 a_iy)(x − b_ix) + Sα(r31 a_ix + r32 a_iy)(y − b_iy)
            − (Cβ a_ix + Sβ Sγ a_iy) z] / l_i                                                     (27e)
    c_i6 = a_iy [r13 (x − b_ix) + r23 (y − b_iy) + r33 z] / l_i                                   (27f)
    """
    x, y, z, al, be, ga = (pose[k] for k in range(6))
    R = rotation(pose)
    a, b = payload_points(params), base_points(params)
    ax, ay, bx, by = a[:, 0], a[:, 1], b[:, 0], b[:, 1]
    q = leg_vectors(params, pose)
    l = inverse_kinematics(params, pose)
    dx, dy = x - bx, y - by
    r3a = R[2, 0] * ax + R[2, 1] * ay
    c4 = -(R[1, 0] * ax + R[1, 1] * ay) * dx + (R[0, 0] * ax + R[0, 1] * ay) * dy
    c5 = (jnp.cos(al) * r3a * dx + jnp.sin(al) * r3a * dy
          - (jnp.cos(be) * ax + jnp.sin(be) * jnp.sin(ga) * ay) * z)
    c6 = ay * (R[0, 2] * dx + R[1, 2] * dy + R[2, 2] * z)
    return jnp.stack([q[:, 0], q[:, 1], q[:, 2], c4, c5, c6], axis=-1) / l[:, None]


def leg_elevation(params: CKCMParams, pose):
    """θ_i, the angle between leg i and its projection on the base plane: tan θ_i = q_iz / q_ip with
    q_ip = (q_ix² + q_iy²)^½ (Nguyen & Pooran eq. 28-29).  Shape (6,)."""
    q = leg_vectors(params, pose)
    return jnp.arctan2(q[:, 2], jnp.sqrt(q[:, 0]**2 + q[:, 1]**2))


def elevation_jacobian(params: CKCMParams, pose):
    """T = ∂θ/∂Φ, the t_ik of Nguyen & Pooran eq. 30-31 (θ̇_i = Σ_k t_ik φ̇_k), from the formulas, with 31e corrected.

    All six follow from differentiating Nguyen & Pooran eq. 28: t_ik = (∂q_iz/∂φ_k − c_i3 c_ik) / q_ip, with ∂q_iz/∂φ_k
    = (0, 0, 1, 0, −(a_ix Cβ + a_iy Sβ Sγ), a_iy r33).  The paper prints 31e with "+ c_i3 c_i5"; the sign is
    wrong (the tests show it against ``jax.jacfwd``)."""
    C = jacobian(params, pose)
    q = leg_vectors(params, pose)
    qp = jnp.sqrt(q[:, 0]**2 + q[:, 1]**2)
    a = payload_points(params)
    be, ga = pose[4], pose[5]
    R = rotation(pose)
    dqz = jnp.zeros_like(C)
    dqz = dqz.at[:, 2].set(1.0)
    dqz = dqz.at[:, 4].set(-(a[:, 0] * jnp.cos(be) + a[:, 1] * jnp.sin(be) * jnp.sin(ga)))
    dqz = dqz.at[:, 5].set(a[:, 1] * R[2, 2])
    return (dqz - C[:, 2:3] * C) / qp[:, None]


def angular_velocity_matrix(pose):
    """V (3, 6) with ᴮΩ = V Φ̇ (Nguyen & Pooran eq. 32-34): ω = (−Sα β̇ + CαCβ γ̇, Cα β̇ + SαCβ γ̇, α̇ − Sβ γ̇)."""
    al, be = pose[3], pose[4]
    ca, sa, cb, sb = jnp.cos(al), jnp.sin(al), jnp.cos(be), jnp.sin(be)
    o, i = jnp.zeros_like(al), jnp.ones_like(al)
    rot = jnp.stack([jnp.stack([o, -sa, ca * cb]),
                     jnp.stack([o, ca, sa * cb]),
                     jnp.stack([i, o, -sb])])
    return jnp.concatenate([jnp.zeros((3, 3), rot.dtype), rot], axis=1)


def angular_acceleration_matrices(pose):
    """Q_k (3, 6, 6) with ω̇_k = Σ_n v_kn φ̈_n + Σ_{n,l} q_k,nl φ̇_n φ̇_l (Nguyen & Pooran eq. 35-36)."""
    al, be = pose[3], pose[4]
    ca, sa, cb, sb = jnp.cos(al), jnp.sin(al), jnp.cos(be), jnp.sin(be)
    Q = jnp.zeros((3, 6, 6), jnp.result_type(al))
    Q = Q.at[0, 3, 4].set(-ca).at[0, 3, 5].set(-sa * cb).at[0, 4, 5].set(-ca * sb)
    Q = Q.at[1, 3, 4].set(-sa).at[1, 3, 5].set(ca * cb).at[1, 4, 5].set(-sa * sb)
    Q = Q.at[2, 4, 5].set(-cb)
    return Q


def condition_number(C):
    """2-norm condition number σ_max/σ_min of a square matrix (inf when singular), by one-sided Jacobi
    (``spatial.dense``: no LAPACK call under vmap)."""
    return dense.condition_number(C)


# --- workspace -------------------------------------------------------------------------------------------
@pytree_dataclass
class WorkspaceMargins:
    """Signed margins of a pose; the pose is inside the workspace when all are > 0 (and cond ≤ limit).

    below_max    l_max − l_i (6,)          above_min   l_i − l_min (6,)
    elevation    q_iz / l_i = sin θ_i (6,)  projection  q_ip / l_i = cos θ_i (6,)
    cos_beta     cos β (Z-Y-X singularity at 0)
    lengths      l_i (6,)                   condition   2-norm condition number of C (Nguyen & Pooran eq. 27)
    """
    below_max: jax.Array
    above_min: jax.Array
    elevation: jax.Array
    projection: jax.Array
    cos_beta: jax.Array
    lengths: jax.Array
    condition: jax.Array


def workspace_margins(params: CKCMParams, pose) -> WorkspaceMargins:
    """The quantities that define the workspace (module docstring), jittable."""
    l = inverse_kinematics(params, pose)
    q = leg_vectors(params, pose)
    l_min, l_max = params.stroke
    return WorkspaceMargins(
        below_max=l_max - l, above_min=l - l_min, elevation=q[:, 2] / l,
        projection=jnp.sqrt(q[:, 0]**2 + q[:, 1]**2) / l, cos_beta=jnp.cos(pose[4]), lengths=l,
        condition=condition_number(jacobian(params, pose)))


@functools.lru_cache(maxsize=None)
def _jitted(name):
    return jax.jit({"margins": workspace_margins, "ik": inverse_kinematics}[name])


def _as_pose(pose):
    pose = np.asarray(pose, dtype=float)
    if pose.shape != (6,):
        raise WorkspaceError(f"pose must be (x, y, z, alpha, beta, gamma), shape (6,); got shape {pose.shape}")
    if not np.all(np.isfinite(pose)):
        raise WorkspaceError(f"pose has non-finite entries: {pose}")
    return pose


def _stroke_text(params):
    l_min, l_max = (float(v) for v in params.stroke)
    return (f"stroke [{l_min:.6g}, {l_max:.6g}] m = [max(l_s, l_m), l_s + l_m] with l_s = "
            f"{float(params.l_s):.6g} m, l_m = {float(params.l_m):.6g} m")


def check_pose(params: CKCMParams, pose, max_condition=DEFAULT_MAX_CONDITION, min_projection=1e-6):
    """Raise ``WorkspaceError`` if ``pose`` lies outside the workspace, naming every violated condition
    (leg lengths outside the stroke, legs not pointing up, |β| ≥ 90°); ``SingularConfigurationError`` if
    cond(C) > ``max_condition``.  Eager (call outside ``jit``); returns the ``WorkspaceMargins``."""
    pose = _as_pose(pose)
    w = jax.tree_util.tree_map(np.asarray, _jitted("margins")(params, jnp.asarray(pose)))
    problems = []
    l_min, l_max = (float(v) for v in params.stroke)
    for i in range(6):
        if not w.below_max[i] >= 0:
            problems.append(f"leg {i + 1} would be {w.lengths[i]:.6g} m long, beyond l_max = {l_max:.6g} m")
        if not w.above_min[i] >= 0:
            problems.append(f"leg {i + 1} would be {w.lengths[i]:.6g} m long, short of l_min = {l_min:.6g} m")
        if not w.elevation[i] > 0:
            problems.append(f"leg {i + 1} does not point up from the base (q_iz/l_i = {w.elevation[i]:.3g})")
        elif not w.projection[i] > min_projection:
            problems.append(f"leg {i + 1} is vertical (q_ip/l_i = {w.projection[i]:.3g}; "
                            "Nguyen & Pooran eq. 28-31 need q_ip > 0)")
    if not abs(w.cos_beta) > 1e-9:
        problems.append(f"beta = {np.degrees(pose[4]):.6g} deg is the Z-Y-X Euler singularity (|beta| = 90 deg)")
    if problems:
        raise WorkspaceError(f"pose {pose.tolist()} is outside the CKCM workspace ({_stroke_text(params)}): "
                             + "; ".join(problems))
    if not w.condition <= max_condition:
        raise SingularConfigurationError(
            f"pose {pose.tolist()} is (near) singular: cond(C) = {w.condition:.3g} > max_condition = "
            f"{max_condition:.3g} (C = dl/dPhi, Nguyen & Pooran eq. 26-27)")
    return w


def inverse_kinematics_checked(params: CKCMParams, pose, max_condition=DEFAULT_MAX_CONDITION):
    """``inverse_kinematics`` after ``check_pose`` (eager; raises on a pose outside the workspace)."""
    w = check_pose(params, pose, max_condition=max_condition)
    return jnp.asarray(w.lengths)


def check_leg_lengths(params: CKCMParams, lengths):
    """Raise ``StrokeError`` if any leg length lies outside the stroke (eager).  Returns them as an array."""
    lengths = np.asarray(lengths, dtype=float)
    if lengths.shape != (6,):
        raise StrokeError(f"expected six leg lengths, got shape {lengths.shape}")
    l_min, l_max = (float(v) for v in params.stroke)
    bad = [f"leg {i + 1}: {v:.6g} m" for i, v in enumerate(lengths) if not l_min <= v <= l_max]
    if bad:
        raise StrokeError(f"leg length(s) outside the actuator {_stroke_text(params)}: " + ", ".join(bad))
    return jnp.asarray(lengths)


# --- forward kinematics ----------------------------------------------------------------------------------
def warn_if_singular(params: CKCMParams, pose, where, max_condition=DEFAULT_MAX_CONDITION):
    """Warn :class:`SingularPoseWarning` naming ``where``, the pose and cond(C) (C = ∂l/∂Φ,
    Nguyen & Pooran eq. 26-27) when concrete inputs put the platform at a (near) singular pose: there the
    actuator forces C⁻ᵀ F blow up (3e8 N at cond 3.5e6).  Traced inputs (jit, vmap, grad) are not checked: no host
    sync."""
    from ..validation import is_traced
    if is_traced((params, pose)):
        return
    cond = float(np.linalg.cond(np.asarray(jacobian(params, jnp.asarray(pose)))))
    if not cond <= max_condition:
        import warnings
        warnings.warn(f"{where}: pose {np.asarray(pose).tolist()} is (near) singular: cond(C) = {cond:.3g} > "
                      f"{max_condition:.3g}; the actuator forces there are unreliable (C = dl/dPhi, "
                      "Nguyen & Pooran eq. 26-27)", SingularPoseWarning, stacklevel=3)


@pytree_dataclass
class FKResult:
    """pose (6,); residual = max_i |l_i(pose) − l_i*| in m; condition = cond(C) at the pose;
    converged = residual ≤ tol and all finite."""
    pose: jax.Array
    residual: jax.Array
    condition: jax.Array
    converged: jax.Array


def _default_tol(dtype):
    return 100 * float(jnp.finfo(dtype).eps) * 2.0  # m, for leg lengths of order 1 m


def newton_forward_kinematics(params: CKCMParams, lengths, guess=None, iterations=DEFAULT_FK_ITERATIONS, tol=None):
    """Pose Φ with l(Φ) = ``lengths`` by Newton's method, Φ ← Φ − C(Φ)⁻¹ (l(Φ) − l*) (Nguyen & Pooran eq. 18, 26-27),
    for a fixed number of ``iterations`` (static) from ``guess`` (default: ``home_pose``).

    The paper notes that no closed form exists (Section 3.3, ref. [15]).  Gradients w.r.t. ``lengths`` and
    ``params`` come from the implicit-function theorem (``jax.lax.custom_root``: dΦ = C⁻¹ (dl* − ∂l/∂p dp)),
    not from unrolling the iteration.  A step that is not finite (singular C) is skipped.  Never raises:
    check ``FKResult.converged`` / ``condition``, or use ``solve_forward_kinematics`` for errors.
    """
    lengths = jnp.asarray(lengths)
    x0 = home_pose(params).astype(lengths.dtype) if guess is None else jnp.asarray(guess, lengths.dtype)
    tol = _default_tol(lengths.dtype) if tol is None else tol

    def f(pose):
        return inverse_kinematics(params, pose) - lengths

    def newton(f, x0):
        def body(_, x):
            step = dense.solve(jacobian(params, x), f(x))
            ok = jnp.all(jnp.isfinite(step))
            return jnp.where(ok, x - jnp.where(ok, step, 0.0), x)
        return jax.lax.fori_loop(0, iterations, body, x0)

    def tangent_solve(g, y):
        return dense.solve(jax.jacfwd(g)(y), y)

    pose = jax.lax.custom_root(f, x0, newton, tangent_solve)
    p0 = jax.lax.stop_gradient(pose)
    res = jnp.max(jnp.abs(jax.lax.stop_gradient(f(p0))))
    cond = condition_number(jax.lax.stop_gradient(jacobian(params, p0)))
    converged = (res <= tol) & jnp.all(jnp.isfinite(p0))
    return FKResult(pose=pose, residual=res, condition=cond, converged=converged)


@functools.lru_cache(maxsize=None)
def _jitted_fk(iterations):
    return jax.jit(functools.partial(newton_forward_kinematics, iterations=iterations))


def solve_forward_kinematics(params: CKCMParams, lengths, guess=None, iterations=DEFAULT_FK_ITERATIONS,
                             tol=None, max_condition=DEFAULT_MAX_CONDITION, check_stroke=True):
    """Eager, checked forward kinematics: ``check_leg_lengths``, then ``newton_forward_kinematics`` (jitted), then

    - ``ForwardKinematicsError`` if Newton did not converge (residual, iterations, guess, cond(C) reported),
    - ``SingularConfigurationError`` if cond(C) at the solution exceeds ``max_condition``,
    - ``WorkspaceError`` if the solution found is not a workspace pose (legs not pointing up, |β| ≥ 90°);
      skipped, with the stroke check, when ``check_stroke=False``.

    Returns the pose (6,)."""
    if check_stroke:
        lengths = check_leg_lengths(params, lengths)
    lengths = jnp.asarray(lengths)
    x0 = home_pose(params) if guess is None else jnp.asarray(guess, lengths.dtype)
    r = _jitted_fk(int(iterations))(params, lengths, x0, tol=tol)
    res, cond = float(r.residual), float(r.condition)
    if not bool(r.converged):
        raise ForwardKinematicsError(
            f"forward kinematics did not converge: after {iterations} Newton iterations from "
            f"{np.asarray(x0).tolist()} the leg-length residual is {res:.3g} m "
            f"(tol {_default_tol(lengths.dtype) if tol is None else tol:.3g} m); cond(C) = {cond:.3g}"
            + (" — the Jacobian is (near) singular" if not cond <= max_condition else "")
            + f". Lengths {np.asarray(lengths).tolist()} may not be assemblable; try a closer guess.")
    if not cond <= max_condition:
        raise SingularConfigurationError(
            f"forward kinematics converged to a (near) singular pose {np.asarray(r.pose).tolist()}: "
            f"cond(C) = {cond:.3g} > max_condition = {max_condition:.3g} (C = dl/dPhi, Nguyen & Pooran eq. 26-27)")
    if check_stroke:
        check_pose(params, np.asarray(r.pose), max_condition=np.inf)
    return r.pose
