"""Compliant force control of the CKCM end-effector: a Cartesian impedance of the payload about a remote centre of
compliance (RCC), commanded through the six leg actuators.

The law (Hogan 1985's impedance control; Whitney 1982 §2 and §5's compliant support, whose elastic centre is the
"remote centre"): the controller acts on the payload as a spring and damper between a material point of the
payload, the **compliance centre** c, and a reference frame that moves along an insertion direction d:

    c = p + R c_A,   c_A = tip + centre · e_z           (a point on the tool axis z_A, ``centre`` behind the tip)
    δ = [θ; Rᵣᵀ(c − c_r(t))],   θ: Rᵣ exp(θ) = R         (rotation vector of Rᵣᵀ R; position error; reference axes)
    δ̇ = [Rᵣᵀ ω; Rᵣᵀ(ċ − ċ_r)],   c_r(t) = c_r(0) + s t d,   ċ_r = s d   (s: the insertion speed)
    W_c = Rᵣ⁶ (−K δ − D δ̇) + [0; f_ins d]                (world axes, [torque; force] at c, f_ins: the insertion force)

with K, D 6 × 6 in the reference's axes ([rotation; translation], the project's spatial order). The wrench at the
payload's origin is W_A = [n_c + (c − p) × f_c; f_c] and the six actuator forces τ = J_wᵀ⁻¹ W_A + τ_g, with J_w the
leg (wrench) Jacobian l̇ = J_w [ω; v] (``wrench_jacobian``) and τ_g the static closed-chain forces that hold the
legs and payload against gravity at the measured configuration (``gravity_forces``: the multibody inverse dynamics
at rest; or, cheaper, a constant feed-forward such as τ_g at the reference pose). So in free space the payload is
in equilibrium under an external wrench W at c exactly when K δ = Rᵣ⁶ᵀ W: the deflection is K⁻¹ W
(tests/test_assembly_controller.py). With K block-diagonal a force at c causes no rotation, a torque about c no
translation — Whitney's RCC property. A soft axial stiffness with an insertion force is (nearly) force control along
d, a stiff axis with an insertion speed is position control: the hybrid force/position law is the choice of K's
diagonal (K stays positive definite: ``check_compliance``).

Settings in ``Compliance`` (a NamedTuple of arrays: batched with ``vmap``, differentiated with ``grad``), the
reference in ``ComplianceReference``; ``check_compliance`` raises named errors before anything compiles;
``compliance_actuators`` makes the controller a force element of the system layer (``mrds_jax.system.Actuators``,
u = τ) for ``contact_rollout`` and ``simulate``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...spatial import cross, dense, quat_to_rotation, rotation_to_quat
from ...system import SystemState, actuators, inverse_dynamics
from ...system.forces import _quat_difference
from ...validation import is_traced
from ..errors import ComplianceCentreError, ComplianceError, DampingError, StiffnessError
from ..legs import leg_model
from ..mechanism import ACTUATED, LEG_NAMES, build_ckcm_system
from ..params import CKCMParams, base_points, payload_points


class Compliance(NamedTuple):
    """Settings of the RCC impedance law (module docstring); every field an array (a pytree: ``vmap``, ``grad``).

    stiffness         K (6, 6): [rotation; translation] in the reference's axes, about the compliance centre
                      (N m/rad, N/m; N/rad and N off the diagonal blocks); symmetric positive definite
    damping           D (6, 6), same layout (N m s/rad, N s/m); its symmetric part positive semidefinite
    centre            () the compliance centre's distance behind the tool tip along the tool axis z_A (m):
                      0 puts it at the tip (Whitney's RCC), larger values towards the payload
    tip               (3,) the tool tip in the payload frame {A} (m)
    insertion_force   () commanded force along the insertion direction (N)
    insertion_speed   () speed of the reference along the insertion direction (m/s)
    """
    stiffness: jax.Array
    damping: jax.Array
    centre: jax.Array
    tip: jax.Array
    insertion_force: jax.Array
    insertion_speed: jax.Array


class ComplianceReference(NamedTuple):
    """Where the compliance frame is asked to be: ``position`` (3,) of the compliance centre at t = 0 (world, m),
    ``rotation`` (3, 3) of the payload frame, ``direction`` (3,) the unit insertion direction (world), and
    ``feedforward`` (6,) actuator forces added as they are (N; e.g. ``gravity_forces`` at the reference, when the
    law is run without the gravity forces at the measured configuration: ``exact_gravity=False``)."""
    position: jax.Array
    rotation: jax.Array
    direction: jax.Array
    feedforward: jax.Array = None


def rcc(angular, lateral, axial, torsional=None, damping=None, centre=0.0, tip=(0.0, 0.0, 0.0),
        insertion_force=0.0, insertion_speed=0.0) -> Compliance:
    """A diagonal RCC (``Compliance``): stiffness diag(angular, angular, torsional, lateral, lateral, axial)
    (N m/rad, N/m; ``torsional`` default ``angular``) in the reference's axes with z the tool axis; ``damping``
    six numbers in the same order, or None for zero. Checked by ``check_compliance``."""
    f = jnp.result_type(float)
    torsional = angular if torsional is None else torsional
    k = jnp.asarray([angular, angular, torsional, lateral, lateral, axial], f)
    d = jnp.zeros(6, f) if damping is None else jnp.broadcast_to(jnp.asarray(damping, f), (6,))
    settings = Compliance(jnp.diag(k), jnp.diag(d), jnp.asarray(centre, f), jnp.asarray(tip, f),
                          jnp.asarray(insertion_force, f), jnp.asarray(insertion_speed, f))
    return check_compliance(settings, "rcc")


def check_compliance(settings: Compliance, where="compliance") -> Compliance:
    """Named errors (``ComplianceError`` subclasses) for settings that cannot describe a compliant support, on
    concrete values before anything compiles (leading batch dimensions allowed; the first bad scenario is named):
    a stiffness that is not symmetric positive definite (``StiffnessError``), a damping whose symmetric part has a
    negative eigenvalue (``DampingError``), a compliance centre that is not finite (``ComplianceCentreError``),
    wrong shapes or non-finite numbers elsewhere (``ComplianceError``). Traced settings pass unchecked."""
    if not isinstance(settings, Compliance):
        raise ComplianceError(f"{where}: settings must be a Compliance (see mrds_jax.ckcm.assembly.compliance.rcc), got "
                              f"{type(settings).__name__}")
    if is_traced(settings):
        return settings
    K, D = np.asarray(settings.stiffness, float), np.asarray(settings.damping, float)
    for name, A, error in (("stiffness", K, StiffnessError), ("damping", D, DampingError)):
        if A.shape[-2:] != (6, 6):
            raise error(f"{where}: {name} must be a (6, 6) matrix [rotation; translation], got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            raise error(f"{where}: {name} has non-finite entries")
    c = np.asarray(settings.centre, float)
    if not np.all(np.isfinite(c)):
        raise ComplianceCentreError(f"{where}: the compliance centre's distance behind the tip must be finite, got "
                                    f"{_first_bad(c, ~np.isfinite(c))}")
    asym = np.abs(K - np.swapaxes(K, -1, -2)).max(axis=(-2, -1))
    bad = asym > 1e-9 * np.maximum(np.abs(K).max(axis=(-2, -1)), 1e-300)
    if np.any(bad):
        raise StiffnessError(f"{where}: the stiffness must be symmetric (a spring's), max |K - K^T| = "
                             f"{_first_bad(asym, bad):.3g}")
    lowest = np.linalg.eigvalsh(0.5 * (K + np.swapaxes(K, -1, -2)))[..., 0]
    if np.any(lowest <= 0):
        raise StiffnessError(f"{where}: the stiffness must be positive definite, its smallest eigenvalue is "
                             f"{_first_bad(lowest, lowest <= 0):.6g}: some deflection would meet no restoring force")
    lowest = np.linalg.eigvalsh(0.5 * (D + np.swapaxes(D, -1, -2)))[..., 0]
    scale = np.maximum(np.abs(D).max(axis=(-2, -1)), 1e-300)
    if np.any(lowest < -1e-12 * scale):
        raise DampingError(f"{where}: the damping must not be negative (symmetric part positive semidefinite), its "
                           f"smallest eigenvalue is {_first_bad(lowest, lowest < -1e-12 * scale):.6g}: it would feed "
                           "energy in")
    for name, shape in (("tip", (3,)), ("insertion_force", ()), ("insertion_speed", ())):
        x = np.asarray(getattr(settings, name), float)
        if x.shape[x.ndim - len(shape):] != shape or not np.all(np.isfinite(x)):
            raise ComplianceError(f"{where}: {name} must be finite with shape {shape} (per scenario), got {x}")
    return settings


def _first_bad(x, bad):
    """The first entry of ``x`` where ``bad`` holds (the scalar itself when ``x`` is one)."""
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else float(x[np.unravel_index(np.argmax(bad), bad.shape)])


def check_reference(reference: ComplianceReference, where="compliance") -> ComplianceReference:
    """Named errors (``ComplianceError``) for a reference that is not a pose and a unit direction (concrete values)."""
    if is_traced(reference):
        return reference
    R = np.asarray(reference.rotation, float)
    d = np.asarray(reference.direction, float)
    p = np.asarray(reference.position, float)
    if R.shape[-2:] != (3, 3) or not np.all(np.isfinite(R)) or \
            not np.allclose(R @ np.swapaxes(R, -1, -2), np.eye(3), atol=1e-9) or np.any(np.linalg.det(R) <= 0):
        raise ComplianceError(f"{where}: the reference rotation must be a (3, 3) rotation matrix")
    unit = np.allclose(np.linalg.norm(d, axis=-1), 1.0, atol=1e-9) if d.shape[-1:] == (3,) else False
    if d.shape[-1:] != (3,) or not np.all(np.isfinite(d)) or not unit:
        raise ComplianceError(f"{where}: the insertion direction must be a unit 3-vector, got {d}")
    if p.shape[-1:] != (3,) or not np.all(np.isfinite(p)):
        raise ComplianceError(f"{where}: the reference position must be a finite 3-vector, got {p}")
    if reference.feedforward is not None:
        ff = np.asarray(reference.feedforward, float)
        if ff.shape[-1:] != (6,) or not np.all(np.isfinite(ff)):
            raise ComplianceError(f"{where}: the feedforward must be six finite actuator forces, got {ff}")
    return reference


# ----------------------------------------------------------------------------- kinematics of the law
def payload_motion(state: SystemState):
    """(R, p, ω, v) of the payload frame {A}: rotation, origin, and the world-axes angular velocity and velocity of
    the origin (the payload module's q = [p; quaternion], v = body twist [ω; v])."""
    q, v = state.q[-1], state.v[-1]
    R = quat_to_rotation(q[3:] / jnp.linalg.norm(q[3:]))
    return R, q[:3], R @ v[:3], R @ v[3:]


def centre_in_payload(settings: Compliance):
    """c_A = tip + centre · e_z: the compliance centre in {A} (m)."""
    return settings.tip + settings.centre * jnp.zeros(3, settings.tip.dtype).at[2].set(1.0)


def deflection(settings: Compliance, reference: ComplianceReference, state: SystemState, t):
    """(δ, δ̇) (6,) each: the compliance frame's rotation vector and position error from the reference, and their
    rates, in the reference's axes ([rotation; translation], module docstring)."""
    R, p, w, v = payload_motion(state)
    Rr = reference.rotation
    arm = R @ centre_in_payload(settings)
    c, c_dot = p + arm, v + cross(w, arm)
    s = settings.insertion_speed
    theta = _quat_difference(state.q[-1][3:], rotation_to_quat(Rr))
    delta = jnp.concatenate([theta, Rr.T @ (c - reference.position - s * t * reference.direction)])
    rate = jnp.concatenate([Rr.T @ w, Rr.T @ (c_dot - s * reference.direction)])
    return delta, rate


def compliance_wrench(settings: Compliance, reference: ComplianceReference, state: SystemState, t):
    """W_c (6,) [torque; force], world axes, at the compliance centre: the wrench the law asks of the actuators on the
    payload besides gravity, Rᵣ⁶(−K δ − D δ̇) + [0; f_ins d] (module docstring)."""
    delta, rate = deflection(settings, reference, state, t)
    w = -settings.stiffness @ delta - settings.damping @ rate
    Rr = reference.rotation
    return jnp.concatenate([Rr @ w[:3], Rr @ w[3:] + settings.insertion_force * reference.direction])


def shift_wrench(wrench, r):
    """The wrench [n; f] at a point moved to a point −r from it (r: from the new point to the old): [n + r × f; f]."""
    return jnp.concatenate([wrench[:3] + cross(r, wrench[3:]), wrench[3:]])


def wrench_jacobian(params: CKCMParams, R, p):
    """J_w (6, 6), row i = [(R a_i) × u_i, u_i]: the leg rates l̇ = J_w [ω; v] of a payload twist (world axes, at the
    origin of {A}), u_i the unit leg vector B_i → A_i. By virtual work the actuator forces τ put the wrench
    J_wᵀ τ on the payload at its origin (Merlet, *Parallel Robots* 2006, §3.1; the twist form of the matrix
    C = ∂l/∂Φ of Nguyen & Pooran eq. 26-27: C = J_w [V; I 0], V of Nguyen & Pooran eq. 32-34)."""
    a = payload_points(params) @ R.T
    leg = p + a - base_points(params)
    u = leg / jnp.linalg.norm(leg, axis=-1, keepdims=True)
    return jnp.concatenate([jnp.cross(a, u), u], axis=-1)


def leg_forces_of_wrench(params: CKCMParams, R, p, wrench):
    """τ (6,) with J_wᵀ τ = ``wrench`` ([torque; force] at the origin of {A}, world axes): the actuator forces that
    put that wrench on the payload through massless legs (``wrench_jacobian``)."""
    return dense.solve(wrench_jacobian(params, R, p).T, wrench)


def gravity_forces(system, state: SystemState):
    """τ_g (6,): the actuator forces that hold the whole mechanism (legs and payload) at rest in the configuration
    of ``state`` against gravity: the closed-chain inverse dynamics (``mrds_jax.system.inverse_dynamics``) with zero
    velocities and accelerations."""
    zeros = tuple(jnp.zeros_like(v) for v in state.v)
    return inverse_dynamics(system, SystemState(tuple(state.q), zeros), zeros, ACTUATED).tau_actuated


def compliance_forces(system, params: CKCMParams, settings: Compliance, reference: ComplianceReference,
                      state: SystemState, t, exact_gravity=True):
    """τ (6,), the six actuator forces of the law (module docstring): J_wᵀ⁻¹ W_A + τ_g + the reference's feedforward,
    W_A the wrench ``compliance_wrench`` moved from the compliance centre to the payload's origin; τ_g the gravity
    forces at the measured configuration (``gravity_forces``) with ``exact_gravity`` (static), else none (give
    them as the reference's feedforward, e.g. at the reference pose: one inverse dynamics per run instead of one
    per step)."""
    R, p, _, _ = payload_motion(state)
    W = shift_wrench(compliance_wrench(settings, reference, state, t), R @ centre_in_payload(settings))
    tau = leg_forces_of_wrench(params, R, p, W)
    if reference.feedforward is not None:
        tau = tau + reference.feedforward
    return tau + gravity_forces(system, state) if exact_gravity else tau


class ComplianceControl(NamedTuple):
    """The traced arguments of the controller as a force element (``compliance_actuators``)."""
    params: CKCMParams
    legs: object
    settings: Compliance
    reference: ComplianceReference


def _control_exact_gravity(t, state, control: ComplianceControl):
    """u = τ of ``compliance_forces`` (the ``control_fn`` of the actuators: t, system state, traced arguments)."""
    system = build_ckcm_system(control.params, control.legs)
    return compliance_forces(system, control.params, control.settings, control.reference, state, t)


def _control_feedforward(t, state, control: ComplianceControl):
    """u = τ of ``compliance_forces`` without the gravity forces at the measured configuration."""
    return compliance_forces(None, control.params, control.settings, control.reference, state, t, False)


def compliance_actuators(params: CKCMParams, settings: Compliance, reference: ComplianceReference, legs="bench",
                         name="rcc", exact_gravity=True):
    """The law as a force element: six motor actuators (gear 1, u = force, N) on the legs' prismatic joints whose
    control is ``compliance_forces`` at (t, state) — for ``mrds_jax.system.contact_rollout`` (``forces=``) or
    ``simulate``. ``params``, ``legs``, ``settings`` and ``reference`` are traced (new gains or a new reference
    recompile nothing; they batch under ``vmap``). ``exact_gravity``: see ``compliance_forces``. Settings and
    reference are checked first (named errors)."""
    check_compliance(settings, name)
    check_reference(reference, name)
    control = ComplianceControl(params, leg_model(params, legs), settings, reference)
    law = _control_exact_gravity if exact_gravity else _control_feedforward
    return actuators(name, [(leg, "prismatic") for leg in LEG_NAMES], control=control, control_fn=law,
                     actuator_names=tuple(f"{leg}_actuator" for leg in LEG_NAMES))


__all__ = ["Compliance", "ComplianceReference", "ComplianceControl", "rcc", "check_compliance", "check_reference",
           "payload_motion", "centre_in_payload", "deflection", "compliance_wrench", "shift_wrench",
           "wrench_jacobian", "leg_forces_of_wrench", "gravity_forces", "compliance_forces", "compliance_actuators"]
