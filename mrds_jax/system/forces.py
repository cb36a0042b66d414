"""Force elements of a system: spring-dampers, applied joint torques, applied point and contact forces.

Each element is a pytree (its numbers — stiffness, amplitudes, user parameters — are leaves, so they can be
differentiated, randomised and ``vmap``ped; what it is attached to and its force law are static). Every
element maps (t, state) to **generalized forces per module**, Qₖ = Σ Jᵀ w over its attachment points
(J the world-aligned Jacobian of the point, w the wrench on the module). They are added to the joint forces
τₖ that enter the open-chain terms of Step 2 (q̈ₖᵒᵖᵉⁿ = Hₖ⁻¹(τₖ + Qₖ − Cₖ − Gₖ), ẍᵒᵖᵉⁿ of Bonaventura eq. 83), exactly
as Bonaventura's applied torques and forces do (Bonaventura eq. 73: τ = H q̈ + C + G + Jᵀ F); gravity is already in
every module (its ``gravity`` parameter).

Elements:
* :class:`SpringDamper` — linear spring-damper between two points (each on a module's operational point,
  with an offset in that frame, or fixed on the ground): tension T = k (ℓ − ℓ₀) + c ℓ̇ along the line,
  stored energy ½ k (ℓ − ℓ₀)², dissipated power c ℓ̇².
* :class:`JointTorque` — τ(t, q, v) on one module's joints; :func:`sinusoidal_torques` builds
  Bonaventura eq. 134, τᵢ(t) = Aᵢ sin(2π t / Tᵢ).
* :class:`PointForce` — a world-axes force (3,) or wrench [n; f] (6,) at a point, as a function of (t, state).
* :class:`ContactForce` — the applied free-direction force Fᵘ(t, state) of a contact (Class I, an actuated
  contact), ᴱᴾF_EP = ψᵘ Fᵘ acting by E on P (frame E, torque reference point P, Bonaventura eq. 26), mapped to both
  sides' modules like Bonaventura eq. 95-96. (A contact's own ``applied`` function covers Fᵘ(t); this element allows
  state feedback. The forces reported by the dynamics then hold only the constraint part ψᶜFᶜ.)
* :class:`JointSpringDamper` — passive joint forces of one module, Q = −K (q ⊖ q_spring) − D v per degree of
  freedom (MuJoCo's joint ``stiffness`` about ``springref`` and ``damping``; q ⊖ q_spring is q − q_spring
  for one-coordinate joints, the rotation vector of q_spring⁻¹ q for ball joints, as MuJoCo's ``mju_subQuat``).
* :class:`Actuators` — MuJoCo's actuators on joints (hinge, slide, ball, free) and fixed tendons, with affine gain
  and bias, control, force and activation ranges and activation dynamics (:mod:`.actuation`). The control is a
  constant vector or a function of (t, state) jitted with the step (:func:`with_control`).
* :class:`TendonSpringDamper` — a spring (with MuJoCo's dead band) and a damper along a :class:`FixedTendon`
  (:mod:`.actuation`).
"""
import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..model.tree import PLANAR_ROWS
from ..pytree import pytree_dataclass, replace, static
from ..spatial import cross, quat_to_rotation, skew
from .actuation import (ActivationDynamics, Actuators, FixedTendon, TendonSpringDamper, _quat_difference,  # noqa: F401
                        _safe_norm, actuator_generalized_forces, actuators, check_actuators, check_transmission,
                        fixed_tendon, tendon_generalized_forces, tendon_length, tendon_spring_damper,
                        tendon_spring_elongation, with_activation, with_control)
from .build import SystemDescriptionError, _module_index
from ..spatial.linalg import matmul
from ..validation import ArgumentError, is_traced


# ----------------------------------------------------------------------------- elements
@pytree_dataclass
class SpringDamper:
    """Linear spring-damper between point a and point b (see :func:`spring_damper`)."""
    stiffness: jnp.ndarray
    damping: jnp.ndarray
    rest_length: jnp.ndarray
    offset_a: jnp.ndarray     # (3,) in side a's frame (world position if a is the ground)
    offset_b: jnp.ndarray
    name: str = static()
    a: Optional[tuple] = static(default=None)   # (module, operational point) or None (ground)
    b: Optional[tuple] = static(default=None)


def spring_damper(name, a, b, stiffness, damping=0.0, rest_length=0.0, offset_a=(0.0, 0.0, 0.0),
                  offset_b=(0.0, 0.0, 0.0)):
    """A spring-damper between ``a`` and ``b``: each ``(module, operational point)`` — the attachment is at
    ``offset`` in that point's frame — or ``None`` for a ground point at world position ``offset``."""
    return SpringDamper(stiffness=jnp.asarray(stiffness, dtype=float), damping=jnp.asarray(damping, dtype=float),
                        rest_length=jnp.asarray(rest_length, dtype=float),
                        offset_a=jnp.asarray(offset_a, dtype=float), offset_b=jnp.asarray(offset_b, dtype=float),
                        name=name, a=_side_key(a, name, "a"), b=_side_key(b, name, "b"))


@pytree_dataclass
class JointTorque:
    """τ = fn(t, q, v, params) (nv,) on the joints of ``module`` (name or index)."""
    params: object
    name: str = static()
    module: object = static(default=0)
    fn: Callable = static(default=None)


def joint_torque(name, module, fn, params=()):
    return JointTorque(params=params, name=name, module=module, fn=fn)


def _sinusoid(t, q, v, params):
    A, T = params
    return A * jnp.sin(2.0 * jnp.pi * t / T)


def sinusoidal_torques(name, module, amplitudes, periods):
    """Bonaventura eq. 134: τᵢ(t) = Aᵢ sin(2π t / Tᵢ) on every joint coordinate of ``module``."""
    A = jnp.asarray(amplitudes, dtype=float)
    T = jnp.broadcast_to(jnp.asarray(periods, dtype=float), A.shape)
    return JointTorque(params=(A, T), name=name, module=module, fn=_sinusoid)


@pytree_dataclass
class PointForce:
    """fn(t, state, params) -> force (3,) or wrench [n; f] (6,), world axes, applied at a module point."""
    params: object
    offset: jnp.ndarray
    name: str = static()
    point: tuple = static(default=None)
    fn: Callable = static(default=None)


def point_force(name, point, fn, params=(), offset=(0.0, 0.0, 0.0)):
    return PointForce(params=params, offset=jnp.asarray(offset, dtype=float), name=name,
                      point=_side_key(point, name, "point"), fn=fn)


@pytree_dataclass
class ContactForce:
    """fn(t, state, params) -> Fᵘ (d − n_c,): applied free-direction force of contact ``contact`` (name)."""
    params: object
    name: str = static()
    contact: str = static(default=None)
    fn: Callable = static(default=None)


def contact_force(name, contact, fn, params=()):
    return ContactForce(params=params, name=name, contact=contact, fn=fn)


@pytree_dataclass
class JointSpringDamper:
    """Q = −stiffness ∘ (q ⊖ springref) − damping ∘ v on the joints of ``module`` (see :func:`joint_spring_damper`)."""
    stiffness: jnp.ndarray   # (nv,)
    damping: jnp.ndarray     # (nv,)
    springref: jnp.ndarray   # (nq,) the spring's rest configuration
    name: str = static()
    module: object = static(default=0)


def joint_spring_damper(name, module, stiffness=0.0, damping=0.0, springref=None, nq=None, nv=None):
    """Passive joint forces on ``module`` (name or index): per degree of freedom, a spring of ``stiffness``
    about the configuration ``springref`` (default: zeros, i.e. q = 0; give the module's neutral configuration
    for quaternion joints) and a damper of ``damping``; numbers broadcast to (nv,). ``nq``/``nv``: the
    module's sizes, needed only when ``stiffness``, ``damping`` and ``springref`` are all scalars or None."""
    stiffness, damping = jnp.asarray(stiffness, dtype=float), jnp.asarray(damping, dtype=float)
    nv = nv if nv is not None else max(jnp.size(stiffness), jnp.size(damping))
    springref = jnp.zeros(nq if nq is not None else nv) if springref is None else jnp.asarray(springref, dtype=float)
    for what, x in (("stiffness", stiffness), ("damping", damping)):
        if not is_traced(x) and not np.all(np.isfinite(np.asarray(x)) & (np.asarray(x) >= 0)):
            raise ArgumentError(f"joint spring-damper {name!r}: {what} must be finite and >= 0, got {np.asarray(x)}")
    return JointSpringDamper(stiffness=jnp.broadcast_to(stiffness, (nv,)), damping=jnp.broadcast_to(damping, (nv,)),
                             springref=springref, name=name, module=module)


ELEMENTS = (SpringDamper, JointTorque, PointForce, ContactForce, JointSpringDamper, Actuators, TendonSpringDamper)


def _side_key(side, name, label):
    if side is None or (isinstance(side, str) and side == "ground"):
        return None
    if isinstance(side, (tuple, list)) and len(side) == 2:
        return (side[0], side[1])
    raise SystemDescriptionError(f"force element {name!r}: {label} must be (module, operational point) or None for the "
                      f"ground, got {side!r}")


# ----------------------------------------------------------------------------- validation
def validate_forces(system, forces):
    """Raise :class:`SystemDescriptionError` naming the element for an unknown module, point or contact, or a
    joint-torque function returning the wrong shape (checked abstractly, without running it)."""
    names = [f.name for f in forces]
    if len(set(names)) != len(names):
        raise SystemDescriptionError(f"force element names must be unique: {names}")
    for f in forces:
        if not isinstance(f, ELEMENTS):
            raise SystemDescriptionError(f"{f!r} is not a force element (use {[e.__name__ for e in ELEMENTS]})")
        where = f"force element {f.name!r}"
        if isinstance(f, SpringDamper):
            for s in (f.a, f.b):
                _point(system, s, where)
        elif isinstance(f, PointForce):
            if f.point is None:
                raise SystemDescriptionError(f"{where}: a point force must act on a module point, not the ground")
            _point(system, f.point, where)
        elif isinstance(f, JointTorque):
            k = _module_index(system.module_names, f.module, where)
            nv = system.modules[k].nv
            dtype = jax.tree.leaves(system.modules[k])[0].dtype          # any module type's float dtype
            spec = jax.ShapeDtypeStruct((nv,), dtype)
            out = jax.eval_shape(lambda p: f.fn(jnp.zeros((), dtype), jnp.zeros(system.modules[k].nq, dtype),
                                                jnp.zeros(nv, dtype), p), f.params)
            if jnp.shape(out) != spec.shape:
                raise SystemDescriptionError(f"{where}: the torque function returns shape {jnp.shape(out)}, module "
                                  f"{system.module_names[k]!r} needs ({nv},)")
        elif isinstance(f, JointSpringDamper):
            k = _module_index(system.module_names, f.module, where)
            m = system.modules[k]
            for what, x, n in (("stiffness", f.stiffness, m.nv), ("damping", f.damping, m.nv),
                               ("springref", f.springref, m.nq)):
                if jnp.shape(x) != (n,):
                    raise SystemDescriptionError(f"{where}: {what} has shape {jnp.shape(x)}, module {system.module_names[k]!r} "
                                      f"needs ({n},)")
                if what != "springref" and not is_traced(x) and not np.all(np.asarray(x) >= 0):
                    raise SystemDescriptionError(f"{where}: {what} must be >= 0, got {np.asarray(x)}")
        elif isinstance(f, TendonSpringDamper):
            check_transmission(system, f.tendon.joints, [c[None] for c in f.tendon.coef], where, one_coordinate=True)
        elif isinstance(f, Actuators):
            check_actuators(system, f)
            if f.control_fn is None:
                shape = jnp.shape(f.control)
            else:
                shape = jnp.shape(jax.eval_shape(lambda p: f.control_fn(0.0, _zero_state(system), p), f.control))
            if shape != (f.nu,):
                raise SystemDescriptionError(f"{where}: the control has shape {shape}, the {f.nu} actuators "
                                  f"{list(f.actuator_names)} need ({f.nu},)")
        elif isinstance(f, ContactForce):
            if f.contact not in system.contact_names:
                raise SystemDescriptionError(f"{where}: no contact named {f.contact!r}; contacts are "
                                  f"{list(system.contact_names)}")
    return forces


def _zero_state(system):
    from .build import SystemState
    dtype = jax.tree.leaves(system.modules[0])[0].dtype
    return SystemState(tuple(jnp.zeros(m.nq, dtype) for m in system.modules),
                       tuple(jnp.zeros(m.nv, dtype) for m in system.modules))


def configuration_difference(module, q_ref, q):
    """q ⊖ q_ref (nv,): q − q_ref for one-coordinate and universal joints; for a ball joint the rotation
    vector θ with q_ref ⊗ exp(θ) = q (body axes, MuJoCo's ``mju_subQuat``); for a free joint that and the
    position difference in body axes (our free-joint velocity is [ω_body; v_body])."""
    t = module.topology
    parts = []
    for kind, qs in zip(t.joint_kinds, t.q_slices):
        a, b = q[qs], q_ref[qs]
        if kind == "spherical":
            parts.append(_quat_difference(a, b))
        elif kind == "free":
            R = quat_to_rotation(a[3:] / jnp.linalg.norm(a[3:]))
            parts += [_quat_difference(a[3:], b[3:]), matmul(R.T, a[:3] - b[:3])]
        elif kind == "planar_free":
            raise SystemDescriptionError("joint springs on planar_free joints are not supported")
        else:
            parts.append(a - b)
    return jnp.concatenate(parts) if parts else q[:0]


def _point(system, side, where):
    if side is None:
        return None
    k = _module_index(system.module_names, side[0], where)
    try:
        system.modules[k].frame_index(side[1])
    except (KeyError, IndexError) as e:
        raise SystemDescriptionError(f"{where}: module {system.module_names[k]!r} has no operational point {side[1]!r} "
                          f"({e.args[0]})") from None
    return k


# ----------------------------------------------------------------------------- evaluation
class _Points:
    """Kinematics of force attachment points during one evaluation, through the module interface
    (:func:`~mrds_jax.dynamics.interface.point_motion`, :func:`~mrds_jax.dynamics.interface.point_jacobians`)."""

    def __init__(self, system, state):
        self.system, self.state = system, state

    def _motion(self, k, frame, jacobian):
        from ..dynamics.interface import point_jacobians, point_motion
        m, q = self.system.modules[k], self.state.q[k]
        pm = point_motion(m, q, self.state.v[k], (frame,))
        J = point_jacobians(m, q, (frame,))[0] if jacobian else None
        return pm.R[0], pm.p[0], pm.xd[0], J

    def point(self, side, offset, jacobian=True):
        """(module index or −1, p, ṗ, J_ω (3, nv), J_v (3, nv)) of an attachment point, world axes."""
        if side is None:
            return -1, offset, jnp.zeros(3, dtype=offset.dtype), None, None
        k = _module_index(self.system.module_names, side[0], "force element")
        R, p, xd, J = self._motion(k, side[1], jacobian)
        arm = matmul(R, offset)
        pos, vel = p + arm, xd[3:] + cross(xd[:3], arm)
        if not jacobian:
            return k, pos, vel, None, None
        return k, pos, vel, J[:3], J[3:] - matmul(skew(arm), J[:3])

    def placement(self, k, frame):
        R, p, _, J = self._motion(k, frame, True)
        return R, p, J


def spring_state(system, spring, state, points=None):
    """(ℓ, ℓ̇) of a spring-damper: length and elongation rate."""
    pts = _Points(system, state) if points is None else points
    _, pa, va, _, _ = pts.point(spring.a, spring.offset_a, jacobian=False)
    _, pb, vb, _, _ = pts.point(spring.b, spring.offset_b, jacobian=False)
    d = pb - pa
    length = _safe_norm(d)
    return length, matmul(d / length, vb - va)


def generalized_forces(system, forces, state, t):
    """Σ of the elements' generalized forces, a tuple with one (nv,) array per module (zeros if none)."""
    dtype = state.q[0].dtype
    Q = [jnp.zeros(m.nv, dtype=dtype) for m in system.modules]
    pts = _Points(system, state)

    def add(k, Jw, Jv, f, n=None):
        if k < 0:
            return
        Q[k] = Q[k] + matmul(Jv.T, f) + (matmul(Jw.T, n) if n is not None else 0.0)

    for el in forces:
        if isinstance(el, SpringDamper):
            ka, pa, va, Jwa, Jva = pts.point(el.a, el.offset_a)
            kb, pb, vb, Jwb, Jvb = pts.point(el.b, el.offset_b)
            d = pb - pa
            length = _safe_norm(d)
            u = d / length
            tension = el.stiffness * (length - el.rest_length) + el.damping * (matmul(u, vb - va))
            add(ka, Jwa, Jva, tension * u)
            add(kb, Jwb, Jvb, -tension * u)
        elif isinstance(el, JointTorque):
            k = _module_index(system.module_names, el.module, "force element")
            Q[k] = Q[k] + jnp.asarray(el.fn(t, state.q[k], state.v[k], el.params), dtype=dtype)
        elif isinstance(el, PointForce):
            k, _, _, Jw, Jv = pts.point(el.point, el.offset)
            w = jnp.asarray(el.fn(t, state, el.params), dtype=dtype)
            if w.shape == (3,):
                add(k, Jw, Jv, w)
            else:
                add(k, Jw, Jv, w[3:], w[:3])
        elif isinstance(el, ContactForce):
            _contact_force(system, el, state, t, pts, Q, dtype)
        elif isinstance(el, JointSpringDamper):
            k = _module_index(system.module_names, el.module, "force element")
            Q[k] = Q[k] - el.stiffness * configuration_difference(system.modules[k], el.springref, state.q[k]) \
                - el.damping * state.v[k]
        elif isinstance(el, Actuators):
            Q = actuator_generalized_forces(system, el, state, t, Q)
        elif isinstance(el, TendonSpringDamper):
            Q = tendon_generalized_forces(system, el, state, Q)
        else:
            raise SystemDescriptionError(f"{el!r} is not a force element")
    return tuple(Q)


def _contact_force(system, el, state, t, pts, Q, dtype):
    """ᴱᴾF_EP = ψᵘ Fᵘ (by E on P, frame E, at P): on P the wrench ℜ_E F (Bonaventura eq. 96 with the sign of the force
    on P), on E its opposite moved to E's origin, n_E = −(n + r × f) (Bonaventura eq. 95)."""
    i = system.contact_names.index(el.contact)
    c = system.contacts[i]
    mE, sE, mP, sP = system.connectivity.sides[i]
    conn = system.connectivity
    side = {}
    for label, m, s in (("E", mE, sE), ("P", mP, sP)):
        side[label] = (m, c.ground_R, c.ground_p, None) if m < 0 else (m, *pts.placement(m, conn.points[m][s]))
    R_E, p_E = side["E"][1], side["E"][2]
    p_P = side["P"][2]
    psi_u = c.psi_u
    if getattr(c, "modes", None) is not None:
        from .stabilisation import current_bases
        psi_u = current_bases(c, matmul(R_E.T, side["P"][1]), matmul(R_E.T, p_P - p_E), jnp.zeros(6, dtype=dtype), t)[0]
    F = matmul(psi_u, jnp.asarray(el.fn(t, state, el.params), dtype=dtype).reshape(c.n_u))
    F6 = jnp.zeros(6, dtype=dtype).at[np.asarray(PLANAR_ROWS)].set(F) if c.dim == 3 else F
    n_P, f_P = matmul(R_E, F6[:3]), matmul(R_E, F6[3:])
    mP_, JP = side["P"][0], side["P"][3]
    if mP_ >= 0:
        Q[mP_] = Q[mP_] + matmul(JP.T, jnp.concatenate([n_P, f_P]))
    mE_, JE = side["E"][0], side["E"][3]
    if mE_ >= 0:
        Q[mE_] = Q[mE_] - matmul(JE.T, jnp.concatenate([n_P + cross(p_P - p_E, f_P), f_P]))


def _sum_over_springs(system, forces, state, term):
    """Σ term(element, length, rate) over the spring-dampers among ``forces``."""
    pts = _Points(system, state)
    total = jnp.zeros((), dtype=state.q[0].dtype)
    for el in forces:
        if isinstance(el, SpringDamper):
            length, rate = spring_state(system, el, state, pts)
            total = total + term(el, length, rate)
    return total


def _sum_over_joint_springs(system, forces, state, term):
    """Σ term(element, module index) over the joint spring-dampers among ``forces``."""
    total = jnp.zeros((), dtype=state.q[0].dtype)
    for el in forces:
        if isinstance(el, JointSpringDamper):
            total = total + term(el, _module_index(system.module_names, el.module, "force element"))
    return total


def _sum_over_tendon_springs(system, forces, state, term):
    """Σ term(element, L, L̇) over the tendon spring-dampers among ``forces``."""
    total = jnp.zeros((), dtype=state.q[0].dtype)
    for el in forces:
        if isinstance(el, TendonSpringDamper):
            total = total + term(el, *tendon_length(system, el.tendon, state))
    return total


def force_potential_energy(system, forces, state):
    """Energy stored in the force elements: Σ ½ k (ℓ − ℓ₀)² over the spring-dampers, Σ ½ kᵢ (q ⊖ q_spring)ᵢ²
    over the joint springs (for ball joints MuJoCo's spring torque −k θ is the gradient of ½ k |θ|² only to
    first order in θ), Σ ½ k x² over the tendon springs (x outside the dead band)."""
    springs = _sum_over_springs(system, forces, state,
                                lambda el, length, rate: 0.5 * el.stiffness * (length - el.rest_length) ** 2)
    tendons = _sum_over_tendon_springs(system, forces, state, lambda el, length, rate: 0.5 * el.stiffness
                                       * tendon_spring_elongation(el, length) ** 2)
    return springs + tendons + _sum_over_joint_springs(system, forces, state, lambda el, k: 0.5 * jnp.sum(
        el.stiffness * configuration_difference(system.modules[k], el.springref, state.q[k]) ** 2))


def dissipated_power(system, forces, state):
    """Power dissipated by the dampers, Σ c ℓ̇² + Σ dᵢ vᵢ² over joint dampers + Σ d L̇² over tendon dampers (≥ 0)."""
    dampers = _sum_over_springs(system, forces, state, lambda el, length, rate: el.damping * rate ** 2)
    tendons = _sum_over_tendon_springs(system, forces, state, lambda el, length, rate: el.damping * rate ** 2)
    return dampers + tendons + _sum_over_joint_springs(system, forces, state,
                                                       lambda el, k: jnp.sum(el.damping * state.v[k] ** 2))


@functools.lru_cache(maxsize=None)
def _free_force_of(applied):
    """A contact's own ``applied`` Fᵘ(t) as a :class:`ContactForce` law (one per function, so jit caches)."""
    return lambda t, state, params: applied(t)


def applied_power(system, forces, state, t):
    """Power fed in by the applied loads, P = Σₖ vₖᵀ Qₖ: the joint torques, point forces and contact forces
    among ``forces``, and every contact's own applied free-direction force Fᵘ(t) (``Contact.applied``).

    With Qₖ the generalized forces of Bonaventura eq. 73 (:func:`generalized_forces`), vₖᵀQₖ is the work rate of the
    element on module k; for a torque τ in an actuated revolute contact it is τ (ω_P − ω_E). Spring-dampers,
    joint and tendon spring-dampers are left out: their spring part is stored energy (:func:`force_potential_energy`)
    and their damper part is :func:`dissipated_power`, so along an exact motion d/dt (E + V_springs) = applied_power − dissipated_power
    (the work-energy balance that ``Diagnostics.energy_balance`` integrates)."""
    loads = tuple(el for el in forces if not isinstance(el, (SpringDamper, JointSpringDamper, TendonSpringDamper)))
    loads += tuple(ContactForce(params=(), name=f"{c.name}.applied", contact=c.name, fn=_free_force_of(c.applied))
                   for c in system.contacts if c.applied is not None)
    if not loads:
        return jnp.zeros((), dtype=state.q[0].dtype)
    Q = generalized_forces(system, loads, state, t)
    return sum(jnp.dot(vk, Qk) for vk, Qk in zip(state.v, Q))
