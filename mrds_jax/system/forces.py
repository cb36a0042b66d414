"""Force elements of a system: spring-dampers, applied joint torques, applied point and contact forces.

Each element is a pytree (its numbers — stiffness, amplitudes, user parameters — are leaves, so they can be
differentiated, randomised and ``vmap``ped; what it is attached to and its force law are static). Every
element maps (t, state) to **generalized forces per module**, Qₖ = Σ Jᵀ w over its attachment points
(J the world-aligned Jacobian of the point, w the wrench on the module). They are added to the joint forces
τₖ that enter the open-chain terms of Step 2 (q̈ₖᵒᵖᵉⁿ = Hₖ⁻¹(τₖ + Qₖ − Cₖ − Gₖ), ẍᵒᵖᵉⁿ of eq. 83), exactly
as Bonaventura's applied torques and forces do (eq. 73: τ = H q̈ + C + G + Jᵀ F); gravity is already in
every module (its ``gravity`` parameter).

Elements:
* :class:`SpringDamper` — linear spring-damper between two points (each on a module's operational point,
  with an offset in that frame, or fixed on the ground): tension T = k (ℓ − ℓ₀) + c ℓ̇ along the line,
  stored energy ½ k (ℓ − ℓ₀)², dissipated power c ℓ̇².
* :class:`JointTorque` — τ(t, q, v) on one module's joints; :func:`sinusoidal_torques` builds
  Bonaventura's eq. 134, τᵢ(t) = Aᵢ sin(2π t / Tᵢ).
* :class:`PointForce` — a world-axes force (3,) or wrench [n; f] (6,) at a point, as a function of (t, state).
* :class:`ContactForce` — the applied free-direction force Fᵘ(t, state) of a contact (Class I, an actuated
  contact), ᴱᴾF_EP = ψᵘ Fᵘ acting by E on P (frame E, torque reference point P, eq. 26), mapped to both
  sides' modules like eq. 95-96. (A contact's own ``applied`` function covers Fᵘ(t); this element allows
  state feedback. The forces reported by the dynamics then hold only the constraint part ψᶜFᶜ.)
"""
import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..model.tree import PLANAR_ROWS
from ..pytree import pytree_dataclass, static
from ..spatial import cross, skew
from .build import SystemError, _module_index
from ..spatial.linalg import matmul


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


ELEMENTS = (SpringDamper, JointTorque, PointForce, ContactForce)


def _side_key(side, name, label):
    if side is None or (isinstance(side, str) and side == "ground"):
        return None
    if isinstance(side, (tuple, list)) and len(side) == 2:
        return (side[0], side[1])
    raise SystemError(f"force element {name!r}: {label} must be (module, operational point) or None for the "
                      f"ground, got {side!r}")


# ----------------------------------------------------------------------------- validation
def validate_forces(system, forces):
    """Raise :class:`SystemError` naming the element for an unknown module, point or contact, or a
    joint-torque function returning the wrong shape (checked abstractly, without running it)."""
    names = [f.name for f in forces]
    if len(set(names)) != len(names):
        raise SystemError(f"force element names must be unique: {names}")
    for f in forces:
        if not isinstance(f, ELEMENTS):
            raise SystemError(f"{f!r} is not a force element (use {[e.__name__ for e in ELEMENTS]})")
        where = f"force element {f.name!r}"
        if isinstance(f, SpringDamper):
            for s in (f.a, f.b):
                _point(system, s, where)
        elif isinstance(f, PointForce):
            if f.point is None:
                raise SystemError(f"{where}: a point force must act on a module point, not the ground")
            _point(system, f.point, where)
        elif isinstance(f, JointTorque):
            k = _module_index(system.module_names, f.module, where)
            nv = system.modules[k].nv
            dtype = jax.tree.leaves(system.modules[k])[0].dtype          # any module type's float dtype
            spec = jax.ShapeDtypeStruct((nv,), dtype)
            out = jax.eval_shape(lambda p: f.fn(jnp.zeros((), dtype), jnp.zeros(system.modules[k].nq, dtype),
                                                jnp.zeros(nv, dtype), p), f.params)
            if jnp.shape(out) != spec.shape:
                raise SystemError(f"{where}: the torque function returns shape {jnp.shape(out)}, module "
                                  f"{system.module_names[k]!r} needs ({nv},)")
        elif isinstance(f, ContactForce):
            if f.contact not in system.contact_names:
                raise SystemError(f"{where}: no contact named {f.contact!r}; contacts are "
                                  f"{list(system.contact_names)}")
    return forces


def _point(system, side, where):
    if side is None:
        return None
    k = _module_index(system.module_names, side[0], where)
    try:
        system.modules[k].frame_index(side[1])
    except (KeyError, IndexError) as e:
        raise SystemError(f"{where}: module {system.module_names[k]!r} has no operational point {side[1]!r} "
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


def _safe_norm(d):
    return jnp.sqrt(jnp.maximum(matmul(d, d), jnp.finfo(d.dtype).tiny))


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
        else:
            raise SystemError(f"{el!r} is not a force element")
    return tuple(Q)


def _contact_force(system, el, state, t, pts, Q, dtype):
    """ᴱᴾF_EP = ψᵘ Fᵘ (by E on P, frame E, at P): on P the wrench ℜ_E F (eq. 96 with the sign of the force
    on P), on E its opposite moved to E's origin, n_E = −(n + r × f) (eq. 95)."""
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


def force_potential_energy(system, forces, state):
    """Energy stored in the force elements: Σ ½ k (ℓ − ℓ₀)² over the spring-dampers."""
    return _sum_over_springs(system, forces, state,
                             lambda el, length, rate: 0.5 * el.stiffness * (length - el.rest_length) ** 2)


def dissipated_power(system, forces, state):
    """Power dissipated by the dampers, Σ c ℓ̇² (≥ 0)."""
    return _sum_over_springs(system, forces, state, lambda el, length, rate: el.damping * rate ** 2)


@functools.lru_cache(maxsize=None)
def _free_force_of(applied):
    """A contact's own ``applied`` Fᵘ(t) as a :class:`ContactForce` law (one per function, so jit caches)."""
    return lambda t, state, params: applied(t)


def applied_power(system, forces, state, t):
    """Power fed in by the applied loads, P = Σₖ vₖᵀ Qₖ: the joint torques, point forces and contact forces
    among ``forces``, and every contact's own applied free-direction force Fᵘ(t) (``Contact.applied``).

    With Qₖ the generalized forces of eq. 73 (:func:`generalized_forces`), vₖᵀQₖ is the work rate of the
    element on module k; for a torque τ in an actuated revolute contact it is τ (ω_P − ω_E). Spring-dampers
    are left out: their spring part is stored energy (:func:`force_potential_energy`) and their damper part is
    :func:`dissipated_power`, so along an exact motion d/dt (E + V_springs) = applied_power − dissipated_power
    (the work-energy balance that ``Diagnostics.energy_balance`` integrates)."""
    loads = tuple(el for el in forces if not isinstance(el, SpringDamper))
    loads += tuple(ContactForce(params=(), name=f"{c.name}.applied", contact=c.name, fn=_free_force_of(c.applied))
                   for c in system.contacts if c.applied is not None)
    if not loads:
        return jnp.zeros((), dtype=state.q[0].dtype)
    Q = generalized_forces(system, loads, state, t)
    return sum(jnp.dot(vk, Qk) for vk, Qk in zip(state.v, Q))
