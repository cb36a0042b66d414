"""Actuators and fixed tendons: transmissions, activation dynamics, tendon spring-dampers (MuJoCo's semantics).

A **transmission** maps an actuator's scalar force F to generalized forces and gives its length ℓ and velocity ℓ̇
(MuJoCo's ``mj_transmission``): a sum over *wraps*, each a joint and a moment vector m (gear, or gear × a tendon
coefficient) on that joint's degrees of freedom, ℓ = Σ m·φ(q), ℓ̇ = Σ m'·v, Q_joint += m' F, with

* a hinge, slide or screw joint: φ(q) = q, m' = m (scalar gear);
* a ball joint: φ(q) = the rotation vector of q (``mju_quat2Vel``), m' = m (three gear components);
* a free joint: ℓ = 0 (MuJoCo defines none), m = (force gear in world axes, torque gear in body axes): ours, on
  v = [ω_body; v_body], m' = [m₄₋₆; Rᵀ m₁₋₃].

A **fixed tendon** (:class:`FixedTendon`) is a length L = Σ cᵢ qᵢ over hinges and slides (MuJoCo's ``ten_length``;
moment arms ``ten_J`` = cᵢ); an actuator on it has wraps (joint i, gear·cᵢ). :class:`TendonSpringDamper` is MuJoCo's
tendon ``stiffness``/``damping``/``springlength``: F = −k x − d L̇ along the tendon, x the distance of L outside the
dead band [lower, upper] of ``springlength`` (``mj_springdamper``), Q = cᵢ F.

:class:`Actuators` (MuJoCo's ``mj_fwdActuation``): the control u clamped to ``ctrlrange``; the input is u
(no dynamics) or the activation a (dynamics ``integrator``: ȧ = u; ``filter``/``filterexact``: ȧ = (u − a)/τ;
with ``actearly`` the next step's a); F = (g₀ + g₁ℓ + g₂ℓ̇)·input + b₀ + b₁ℓ + b₂ℓ̇; actuators on one tendon with a
force range are scaled together into it (``tendon_actfrcrange``); F clamped to ``forcerange``; Q = Σ m' F, the
joints' ``actuatorfrcrange`` clamping the summed force on their first degree of freedom. Activations advance by
:func:`next_activation` (MuJoCo's ``mj_nextActivation``: Euler, exact for ``filterexact``, clamped to
``actrange``) — the contact step's rollout carries them (:func:`~.timestepping.contact_rollout`).
"""
from typing import Callable, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from ..pytree import pytree_dataclass, replace, static
from ..spatial import quat_multiply, quat_to_rotation
from ..spatial.linalg import matmul
from ..validation import ArgumentError, is_traced
from .build import SystemDescriptionError, _module_index

DYNAMICS = ("none", "integrator", "filter", "filterexact")
_MINVAL = 1e-15                       # MuJoCo's mjMINVAL, the floor of a filter's time constant
_MOMENT_WIDTH = {"revolute": 1, "prismatic": 1, "screw": 1, "spherical": 3, "free": 6}


def _safe_norm(d):
    return jnp.sqrt(jnp.maximum(matmul(d, d), jnp.finfo(d.dtype).tiny))


def _quat_difference(qa, qb):
    """θ with qb ⊗ exp(θ) = qa, the angle wrapped to [−π, π] (MuJoCo's mju_subQuat / mju_quat2Vel)."""
    qa = qa / jnp.linalg.norm(qa)
    qb = qb / jnp.linalg.norm(qb)
    d = quat_multiply(qb * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=qb.dtype), qa)
    xyz = d[1:]
    s = _safe_norm(xyz)
    angle = 2.0 * jnp.arctan2(s, d[0])
    angle = jnp.where(angle > jnp.pi, angle - 2.0 * jnp.pi, angle)
    return xyz * (angle / s)


# ----------------------------------------------------------------------------- tendons
@pytree_dataclass
class FixedTendon:
    """L = Σ coef[i] q(joints[i]) over one-coordinate joints (see :func:`fixed_tendon`)."""
    coef: jnp.ndarray          # (n,)
    name: str = static()
    joints: tuple = static(default=())   # (module, joint name) per coefficient


def fixed_tendon(name, joints, coef):
    """A fixed tendon ``name``: length Σ coefᵢ qᵢ over ``joints`` ((module, joint) each: hinges, slides, screws),
    MuJoCo's ``<fixed>`` tendon. Raises ArgumentError for a coefficient count that does not match."""
    joints = tuple((m, j) for m, j in joints)
    coef = jnp.asarray(coef, dtype=float)
    if jnp.shape(coef) != (len(joints),):
        raise ArgumentError(f"tendon {name!r}: coef has shape {jnp.shape(coef)}, needs ({len(joints)},)")
    return FixedTendon(coef=coef, name=name, joints=joints)


@pytree_dataclass
class TendonSpringDamper:
    """F = −stiffness·x − damping·L̇ along ``tendon`` (see :func:`tendon_spring_damper`)."""
    tendon: FixedTendon
    stiffness: jnp.ndarray
    damping: jnp.ndarray
    spring_length: jnp.ndarray   # (2,) lower, upper: the spring's dead band (MuJoCo's springlength)
    name: str = static()


def tendon_spring_damper(name, tendon, stiffness=0.0, damping=0.0, spring_length=0.0):
    """A spring of ``stiffness`` and a damper of ``damping`` along ``tendon`` (:class:`FixedTendon`);
    ``spring_length`` a rest length or a (lower, upper) dead band in which the spring is slack. Raises ArgumentError
    for a negative or non-finite stiffness or damping, or lower > upper."""
    stiffness, damping = jnp.asarray(stiffness, dtype=float), jnp.asarray(damping, dtype=float)
    spring_length = jnp.broadcast_to(jnp.asarray(spring_length, dtype=float), (2,))
    for what, x in (("stiffness", stiffness), ("damping", damping)):
        if not is_traced(x) and not (np.isfinite(np.asarray(x)) and np.asarray(x) >= 0):
            raise ArgumentError(f"tendon spring-damper {name!r}: {what} must be finite and >= 0, got {np.asarray(x)}")
    if not is_traced(spring_length) and not np.asarray(spring_length)[0] <= np.asarray(spring_length)[1]:
        raise ArgumentError(f"tendon spring-damper {name!r}: spring_length lower {float(spring_length[0])} > upper "
                            f"{float(spring_length[1])}")
    return TendonSpringDamper(tendon=tendon, stiffness=stiffness, damping=damping, spring_length=spring_length,
                              name=name)


def tendon_spring_elongation(el, length):
    """x: how far L lies outside the dead band [lower, upper] (0 inside)."""
    lower, upper = el.spring_length[0], el.spring_length[1]
    return jnp.where(length > upper, length - upper, jnp.where(length < lower, length - lower, 0.0))


# ----------------------------------------------------------------------------- transmissions
def _wrap(system, wrap, where):
    """(module index, joint kind, q slice, v slice) of a wrap's joint; SystemDescriptionError naming it otherwise."""
    module, joint = wrap
    k = _module_index(system.module_names, module, where)
    t = system.modules[k].topology
    if joint not in t.joint_names:
        raise SystemDescriptionError(f"{where}: module {system.module_names[k]!r} has no joint {joint!r}")
    j = t.joint_names.index(joint)
    return k, t.joint_kinds[j], t.q_slices[j], t.v_slices[j]


def check_transmission(system, wraps, moments, where, one_coordinate=False):
    """SystemDescriptionError naming ``where`` for a joint that is missing, of a kind no transmission drives, or
    whose moment has the wrong width (1 for hinges, slides and screws, 3 for balls, 6 for free joints)."""
    for wrap, m in zip(wraps, moments):
        _, kind, _, _ = _wrap(system, wrap, where)
        width = 1 if one_coordinate and kind in ("revolute", "prismatic", "screw") else \
            None if one_coordinate else _MOMENT_WIDTH.get(kind)
        if width is None:
            allowed = "hinges, slides and screws" if one_coordinate else "hinge, slide, screw, ball and free joints"
            raise SystemDescriptionError(f"{where}: joint {wrap[1]!r} is {kind}; it drives {allowed}")
        if jnp.shape(m) != (width,):
            raise SystemDescriptionError(f"{where}: joint {wrap[1]!r} ({kind}) needs a gear of {width} component(s), "
                                         f"got shape {jnp.shape(m)}")


def transmission(system, wraps, moments, state, in_parent=False):
    """(ℓ, ℓ̇, [(module index, v slice, m')]) of a transmission at ``state`` (module docstring). ``in_parent``:
    MuJoCo's ``jointinparent``, a ball's or free joint's torque gear in the parent's axes (m' = Rᵀ m there; the
    length is unchanged, the rotation vector being fixed by its own rotation)."""
    length, rate, arms = 0.0, 0.0, []
    for wrap, m in zip(wraps, moments):
        k, kind, qs, vs = _wrap(system, wrap, "transmission")
        q = state.q[k][qs]
        if kind == "spherical":
            length = length + matmul(m, _quat_difference(q, jnp.array([1.0, 0.0, 0.0, 0.0], dtype=q.dtype)))
            arm = matmul(quat_to_rotation(q / jnp.linalg.norm(q)).T, m) if in_parent else m
        elif kind == "free":
            R = quat_to_rotation(q[3:] / jnp.linalg.norm(q[3:]))
            arm = jnp.concatenate([matmul(R.T, m[3:]) if in_parent else m[3:], matmul(R.T, m[:3])])
        else:
            length, arm = length + m[0] * q[0], m
        rate = rate + matmul(arm, state.v[k][vs])
        arms.append((k, vs, arm))
    return length, rate, arms


def tendon_length(system, tendon, state):
    """(L, L̇) of a :class:`FixedTendon` (MuJoCo's ``ten_length``, ``ten_velocity``)."""
    L, Ld, _ = transmission(system, tendon.joints, [c[None] for c in tendon.coef], state)
    return L, Ld


def tendon_generalized_forces(system, el, state, Q):
    """Q with a :class:`TendonSpringDamper`'s F = −k x − d L̇ added along its tendon (cᵢ F on joint i)."""
    L, Ld, arms = transmission(system, el.tendon.joints, [c[None] for c in el.tendon.coef], state)
    force = -el.stiffness * tendon_spring_elongation(el, L) - el.damping * Ld
    return _add_arms(Q, arms, force)


def _add_arms(Q, arms, force):
    Q = list(Q)
    for k, vs, arm in arms:
        Q[k] = Q[k].at[vs].add(arm * force)
    return Q


# ----------------------------------------------------------------------------- actuators
@pytree_dataclass
class Actuators:
    """Actuators (see :func:`actuators`): one row per actuator."""
    moment: tuple              # per actuator, per wrap: the moment vector on the wrap's joint (gear, gear × coef)
    gain: jnp.ndarray          # (nu, 3) g₀, g₁, g₂: gain = g₀ + g₁ ℓ + g₂ ℓ̇
    bias: jnp.ndarray          # (nu, 3) b₀, b₁, b₂
    ctrl_range: jnp.ndarray    # (nu, 2), ±inf where unlimited
    force_range: jnp.ndarray   # (nu, 2), ±inf where unlimited
    tendon_force_range: jnp.ndarray  # (nu, 2) the range of the summed force of the actuators on this one's tendon
    joint_force_range: jnp.ndarray   # (n_limited, 2) the summed generalized force on each of ``limited_joints``
    time_constant: jnp.ndarray  # (nu,) τ of filter dynamics (unused otherwise)
    act_range: jnp.ndarray      # (nu, 2) the activation's range, ±inf where unlimited
    activation: jnp.ndarray     # (nu,) the current activation a (MuJoCo's act; 0 for actuators without dynamics)
    timestep: jnp.ndarray       # () h of ``actearly`` and ``filterexact`` (the rollout sets its own dt)
    control: object            # the constant control (nu,), or the parameters of ``control_fn``
    name: str = static()
    joints: tuple = static(default=())        # per actuator: (module, joint) or the name of its tendon
    wraps: tuple = static(default=())         # per actuator: ((module, joint), ...) the joints it acts through
    control_fn: Optional[Callable] = static(default=None)   # u = control_fn(t, state, control)
    actuator_names: tuple = static(default=())
    dynamics: tuple = static(default=())      # per actuator, one of DYNAMICS
    act_early: tuple = static(default=())     # per actuator: the force uses the next step's activation
    wrap_setpoint: tuple = static(default=())  # per actuator: a ball servo's setpoint taken nearest its length
    limited_joints: tuple = static(default=())  # (module, joint) per row of joint_force_range
    in_parent: tuple = static(default=())     # per actuator: a ball's or free joint's torque gear in parent axes

    @property
    def nu(self):
        return len(self.joints)

    @property
    def stateful(self):
        """Whether any actuator has activation dynamics (its activation must be carried by the rollout)."""
        return any(d != "none" for d in self.dynamics)


class ActivationDynamics(NamedTuple):
    """Settings of :func:`actuators`' activation dynamics, per actuator or one for all: ``dynamics`` (one of
    DYNAMICS), ``time_constant`` τ (filters), ``act_range`` (low, high) or None, ``act_early`` (the force uses
    the next step's activation), ``activation`` (the initial a), ``timestep`` (h of ``act_early`` and
    ``filterexact``; a rollout sets its own dt)."""
    dynamics: object = "none"
    time_constant: object = 1.0
    act_range: object = None
    act_early: object = False
    activation: object = 0.0
    timestep: object = 0.002


def _rows(x, nu, width, what, where):
    a = jnp.asarray(x, dtype=float)
    a = jnp.broadcast_to(a, (nu,) if width is None else (nu, width)) if a.ndim <= (0 if width is None else 1) else a
    if a.shape != ((nu,) if width is None else (nu, width)):
        raise ArgumentError(f"{where}: {what} has shape {a.shape}, needs {(nu,) if width is None else (nu, width)}")
    return a


def _per_actuator(x, nu, what, where):
    x = tuple(x) if isinstance(x, (tuple, list)) else (x,) * nu
    if len(x) != nu:
        raise ArgumentError(f"{where}: {what} has {len(x)} entries, needs {nu}")
    return x


def _check_range(r, what, names, where, row="actuator"):
    if not is_traced(r):
        for i in np.flatnonzero(~(np.asarray(r[:, 0]) <= np.asarray(r[:, 1]))):
            raise ArgumentError(f"{where}: {row} {names[i]!r} has {what} low {float(r[i, 0])} > high {float(r[i, 1])}")


def actuators(name, joints, gear=1.0, gain=(1.0, 0.0, 0.0), bias=(0.0, 0.0, 0.0), ctrl_range=None,
              force_range=None, control=None, control_fn=None, actuator_names=None, joint_force_range=None,
              tendon_force_range=None, dynamics=None, wrap_setpoint=False, in_parent=False):
    """Actuators on ``joints``: per actuator a (module, joint) — a hinge, slide or screw (scalar ``gear``), a ball
    (3 gear components) or a free joint (6: force in world axes, torque in body axes, MuJoCo's) — or a
    :class:`FixedTendon` (scalar gear, moment gear × its coefficients). Per actuator: ``gear`` (a scalar for all,
    or one entry per actuator), affine ``gain`` (g₀, g₁, g₂) and ``bias`` (b₀, b₁, b₂) in the actuator length ℓ and
    velocity ℓ̇, optional ``ctrl_range``/``force_range``/``tendon_force_range`` (low, high); rows broadcast.
    MuJoCo's shortcuts: motor gain (1, 0, 0), bias 0; position gain (kp, 0, 0), bias (0, −kp, −kv); velocity gain
    (kv, 0, 0), bias (0, 0, −kv). ``control``: a constant control vector (default zeros), or the parameters of
    ``control_fn(t, state, control) -> (nu,)``. ``joint_force_range``: {(module, joint): (low, high)}, the range of
    the summed generalized force of the element's actuators on that joint (MuJoCo's joint ``actuatorfrcrange``).
    ``dynamics``: an :class:`ActivationDynamics` (default none); ``wrap_setpoint``: per actuator, MuJoCo's ball
    servo rule (the setpoint taken as its representative nearest ℓ, period 2π|gear|); ``in_parent``: per actuator,
    MuJoCo's ``jointinparent`` (:func:`transmission`). Raises ArgumentError naming
    the actuator for a zero gear, a range with low > high, an unknown dynamics type."""
    joints = tuple(joints)
    nu = len(joints)
    where = f"actuators {name!r}"
    names = tuple(actuator_names) if actuator_names is not None else tuple(f"{name}[{i}]" for i in range(nu))
    gears = _per_actuator(gear if not (isinstance(gear, (np.ndarray, jnp.ndarray)) and jnp.ndim(gear) == 1)
                          else list(gear), nu, "gear", where)
    targets, wraps, moments = [], [], []
    for i, (target, g) in enumerate(zip(joints, gears)):
        g = jnp.atleast_1d(jnp.asarray(g, dtype=float))
        if not is_traced(g) and not np.any(np.asarray(g) != 0):
            raise ArgumentError(f"{where}: actuator {names[i]!r} has gear 0 (it would exert no force)")
        if isinstance(target, FixedTendon):
            targets.append(target.name)
            wraps.append(target.joints)
            moments.append(tuple(g[0] * c[None] for c in target.coef))
        else:
            targets.append((target[0], target[1]))
            wraps.append(((target[0], target[1]),))
            moments.append((g,))
    inf = jnp.inf
    rng = {what: _rows((-inf, inf) if r is None else r, nu, 2, what, where)
           for what, r in (("ctrl_range", ctrl_range), ("force_range", force_range),
                           ("tendon_force_range", tendon_force_range))}
    dyn = ActivationDynamics() if dynamics is None else dynamics
    kinds = _per_actuator(dyn.dynamics, nu, "dynamics", where)
    for i, kind in enumerate(kinds):
        if kind not in DYNAMICS:
            raise ArgumentError(f"{where}: actuator {names[i]!r} has dynamics {kind!r}; one of {DYNAMICS}")
    rng["act_range"] = _rows((-inf, inf) if dyn.act_range is None else dyn.act_range, nu, 2, "act_range", where)
    limited = tuple((joint[0], joint[1]) for joint in (joint_force_range or {}))
    jrange = jnp.asarray([(joint_force_range or {})[j] for j in (joint_force_range or {})], dtype=float).reshape(-1, 2)
    for what, r in rng.items():
        _check_range(r, what, names, where)
    _check_range(jrange, "joint_force_range", [f"{m}.{j}" for m, j in limited], where, row="joint")
    el = Actuators(moment=tuple(moments), gain=_rows(gain, nu, 3, "gain", where),
                   bias=_rows(bias, nu, 3, "bias", where),
                   ctrl_range=rng["ctrl_range"], force_range=rng["force_range"],
                   tendon_force_range=rng["tendon_force_range"], joint_force_range=jrange,
                   time_constant=_rows(dyn.time_constant, nu, None, "time_constant", where),
                   act_range=rng["act_range"], activation=_rows(dyn.activation, nu, None, "activation", where),
                   timestep=jnp.asarray(dyn.timestep, dtype=float), control=jnp.zeros(nu), name=name,
                   joints=tuple(targets), wraps=tuple(wraps), control_fn=None, actuator_names=names,
                   dynamics=tuple(kinds), act_early=tuple(bool(x) for x in _per_actuator(dyn.act_early, nu, "act_early",
                                                                                          where)),
                   wrap_setpoint=tuple(bool(x) for x in _per_actuator(wrap_setpoint, nu, "wrap_setpoint", where)),
                   limited_joints=limited,
                   in_parent=tuple(bool(x) for x in _per_actuator(in_parent, nu, "in_parent", where)))
    return with_control(el, jnp.zeros(nu) if control is None and control_fn is None else control, control_fn)


def with_control(element, control, control_fn=None):
    """``element`` (:class:`Actuators`) driven by ``control``: a constant vector of its ``nu`` controls, or,
    with ``control_fn``, the parameters of u = control_fn(t, state, control) (a controller: state feedback,
    a schedule in t), traced and jitted with the step. A constant of the wrong length raises ArgumentError."""
    if control_fn is None:
        control = jnp.asarray(control, dtype=float)
        if jnp.shape(control) != (element.nu,):
            raise ArgumentError(f"actuators {element.name!r}: control has shape {jnp.shape(control)}, needs "
                                f"({element.nu},) (actuators {list(element.actuator_names)})")
    return replace(element, control=control, control_fn=control_fn)


def with_activation(element, activation):
    """``element`` with its activations (MuJoCo's ``act``, one per actuator) set to ``activation``."""
    activation = jnp.asarray(activation)
    if jnp.shape(activation) != (element.nu,):
        raise ArgumentError(f"actuators {element.name!r}: activation has shape {jnp.shape(activation)}, needs "
                            f"({element.nu},)")
    return replace(element, activation=activation)


def check_actuators(system, el):
    """SystemDescriptionError naming the actuator for a transmission that does not fit ``system``."""
    for wraps, moments, label, target in zip(el.wraps, el.moment, el.actuator_names, el.joints):
        check_transmission(system, wraps, moments, f"force element {el.name!r}, actuator {label!r}",
                           one_coordinate=isinstance(target, str))
    for joint in el.limited_joints:
        _wrap(system, joint, f"force element {el.name!r}, joint_force_range")


def clamped_control(el, state, t):
    """u clamped to ``ctrl_range`` (MuJoCo clamps ``ctrl`` before the dynamics and the force)."""
    u = el.control if el.control_fn is None else el.control_fn(t, state, el.control)
    return jnp.clip(jnp.asarray(u, dtype=state.q[0].dtype), el.ctrl_range[:, 0], el.ctrl_range[:, 1])


def activation_rate(el, u):
    """ȧ per actuator (MuJoCo's ``act_dot``): u (integrator), (u − a)/τ (filter, filterexact), 0 (none)."""
    tau = jnp.maximum(el.time_constant, _MINVAL)
    kind = np.array([DYNAMICS.index(d) for d in el.dynamics], dtype=np.int32)
    return jnp.where(kind == 1, u, jnp.where(kind >= 2, (u - el.activation) / tau, 0.0))


def next_activation(el, rate, dt):
    """a after a step dt (MuJoCo's ``mj_nextActivation``): a + ȧ dt, for ``filterexact`` a + ȧ τ (1 − e^(−dt/τ))
    (the filter's exact solution), clamped to ``act_range``; unchanged (0) without dynamics."""
    tau = jnp.maximum(el.time_constant, _MINVAL)
    exact = np.array([d == "filterexact" for d in el.dynamics])
    step = jnp.where(exact, tau * (1.0 - jnp.exp(-dt / tau)), dt)
    return jnp.clip(el.activation + rate * step, el.act_range[:, 0], el.act_range[:, 1])


def _wrapped_setpoint(x, length, moments, flags):
    """MuJoCo's ``wrapSetpoint`` for ball servos: x − P round((x − ℓ)/P), P = 2π|gear|."""
    flags = np.array(flags)
    period = jnp.where(flags, jnp.stack([2.0 * jnp.pi * jnp.linalg.norm(m[0]) for m in moments]), 1.0)
    return jnp.where(flags, x - period * jnp.round((x - length) / period), x)


def actuator_state(system, el, state, t):
    """(F, [(module, v slice, m', actuator)] ) at (t, state): the actuators' scalar forces (MuJoCo's
    ``actuator_force``) and the arms that map them."""
    u = clamped_control(el, state, t)
    lengths, rates, arms = [], [], []
    for i, (wraps, moments) in enumerate(zip(el.wraps, el.moment)):
        L, Ld, a = transmission(system, wraps, moments, state, el.in_parent[i])
        lengths.append(jnp.asarray(L, dtype=u.dtype))
        rates.append(jnp.asarray(Ld, dtype=u.dtype))
        arms += [(k, vs, arm, i) for k, vs, arm in a]
    length, rate = jnp.stack(lengths), jnp.stack(rates)
    act = jnp.where(np.array(el.act_early), next_activation(el, activation_rate(el, u), el.timestep), el.activation)
    drive = jnp.where(np.array([d == "none" for d in el.dynamics]), u, act)
    drive = _wrapped_setpoint(drive, length, el.moment, el.wrap_setpoint)
    basis = jnp.stack([jnp.ones_like(length), length, rate], axis=1)
    force = jnp.sum(el.gain * basis, axis=1) * drive + jnp.sum(el.bias * basis, axis=1)
    force = _tendon_scaled(el, force)
    return jnp.clip(force, el.force_range[:, 0], el.force_range[:, 1]), arms


def _tendon_scaled(el, force):
    """Forces of actuators sharing a tendon scaled together so their sum lies in ``tendon_force_range``."""
    groups = {}
    for i, target in enumerate(el.joints):
        if isinstance(target, str):
            groups.setdefault(target, []).append(i)
    for rows in groups.values():
        total = sum(force[i] for i in rows)
        lo, hi = el.tendon_force_range[rows[0], 0], el.tendon_force_range[rows[0], 1]
        safe = jnp.where(total == 0, 1.0, total)
        scale = jnp.where(total < lo, lo / safe, jnp.where(total > hi, hi / safe, 1.0))
        force = force * jnp.where(np.isin(np.arange(force.shape[0]), rows), scale, 1.0)
    return force


def actuator_generalized_forces(system, el, state, t, Q):
    """Q with the actuators' Σ m' F added, each limited joint's first degree of freedom clamped to its
    ``joint_force_range`` (MuJoCo's ``qfrc_actuator``)."""
    force, arms = actuator_state(system, el, state, t)
    own = [jnp.zeros_like(x) for x in Q]
    for k, vs, arm, i in arms:
        own[k] = own[k].at[vs].add(arm * force[i])
    for joint, (lo, hi) in zip(el.limited_joints, el.joint_force_range):
        k, _, _, vs = _wrap(system, joint, "joint_force_range")
        own[k] = own[k].at[vs.start].set(jnp.clip(own[k][vs.start], lo, hi))
    return [a + b for a, b in zip(Q, own)]


def advance_activations(system, forces, state, t, dt):
    """``forces`` with each stateful :class:`Actuators`' activation advanced one step dt from (t, state)
    (:func:`next_activation`; an integrator ball servo's activation then taken nearest its length, as MuJoCo's
    ``mj_advance``)."""
    out = []
    for el in forces:
        if isinstance(el, Actuators) and el.stateful:
            a = next_activation(el, activation_rate(el, clamped_control(el, state, t)), dt)
            rewrap = tuple(w and d == "integrator" for w, d in zip(el.wrap_setpoint, el.dynamics))
            if any(rewrap):
                length = jnp.stack([jnp.asarray(transmission(system, w, m, state)[0], a.dtype)
                                    for w, m in zip(el.wraps, el.moment)])
                a = _wrapped_setpoint(a, length, el.moment, rewrap)
            el = replace(el, activation=a)
        out.append(el)
    return tuple(out)
