"""Velocity-level time stepping for systems with unilateral constraints: one Moreau–Jean step solves the impulses of
the loops (bilateral, exact), the joint limits (one-sided) and the frictional contacts (Coulomb cone, exact) as one
problem over one Delassus matrix (:mod:`.ncp`).

One step from (q, v) at time t (Moreau 1988; Jean 1999; Acary & Brogliato 2008, §10.1, the "θ = 1" scheme):

1. free velocity  v_free = v + dt H⁻¹(τ + Q − C v − G)  per module (its open-chain acceleration, Bonaventura eq. 68);
2. rows at q: J (m × Σnv) and the free constraint velocities g = J v_free + drift terms —
   * loops and joint couplings (:func:`~.stabilisation.constraint_jacobian`, :func:`~.couplings.coupling_jacobian`):
     g = Φ_v(q, v_free, t + dt) + (β/dt) Φ_p(q), the velocity error with a Baumgarte fraction β of the position
     error (Bonaventura eq. 104-105 at the velocity level); the rows of a switched-off contact are inactive;
   * joint limits of one-coordinate joints (``Topology.joint_limits``): a lower row (J = +e_j, gap q − q_lo) and an
     upper row (J = −e_j, gap q_hi − q);
   * contact slots of the collision model (:mod:`mrds_jax.collision`): three rows [n, t₁, t₂] of the relative velocity
     of the material points of the two geoms at the contact point, in the contact frame;
   for one-sided rows and contact normals the gap d enters as g ← g + d/dt when d > 0 (the row only stops the
   bodies from crossing into each other within this step: a "speculative" contact, so that touching down needs no
   event detection and lifting off no mode switch) and not at all when d ≤ 0 (a penetrating row only stops
   approaching; its depth is removed on the position level, step 5, never turned into velocity); a contact of
   restitution e that closes within the step (d + dt ẋ_n,free ≤ 0) at an approach speed ẋ_n⁻ < 0 has e·ẋ_n⁻ in
   place of the gap term (Newton's impact law, :func:`newton_bounce`);
3. G = J H⁻¹ Jᵀ (block by module; its block of loop rows is Bᶜ of Bonaventura Table 17, tests/test_contact_step.py),
   and the NCP of :mod:`.ncp` for λ, warm-started from the previous step's impulses;
4. v⁺ = v_free + H⁻¹ Jᵀ λ, q⁺ = q ⊕ dt v⁺;
5. the loops' position error and the penetration and limit violation left at q⁺ removed from q⁺ alone, v⁺ untouched,
   in one projection (:func:`position_projection`, :mod:`.position_correction`: post-stabilisation; the loops
   closed to the linearisation's error, the one-sided rows by a bounded fraction per step).

Systems without unilateral rows keep the exact acceleration-level path of :mod:`.simulate`; as dt → 0 the two
give the same motion (tests/test_contact_step.py). Everything is shape-static (inactive rows are masked), pure, and
jit/vmap/grad-able; gradients go through :func:`~.ncp.solve_ncp`'s implicit derivative.
"""
import functools
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import validation
from ..pytree import replace
from ..dynamics.interface import (integrate_configuration, mass_matrix, normalize_configuration,
                                  open_chain_inverse_dynamics, point_jacobians, point_motion, reference_terms)
from ..spatial import skew
from ..spatial.linalg import cho_solve, cholesky, matmul
from .build import SystemState, tendon_limit_dofs
from .couplings import coupling_errors, coupling_jacobian, constraint_rows
from .actuation import advance_activations
from .forces import generalized_forces
from .limits import limited_joints
from .ncp import NCPSettings, RowLayout, solve_ncp, validate_ncp_settings
from .position_correction import LOOP_ITERATIONS, PositionCorrection, correction_multipliers, loop_targets
from .stabilisation import constraint_errors, constraint_jacobian
from ..collision.broadphase import BroadPhase


class ContactSettings(NamedTuple):
    """Settings of the velocity-level step: ``ncp`` the solver's (:class:`~.ncp.NCPSettings`); ``baumgarte`` β,
    the fraction of a loop's position error removed per step through the velocity (0 ≤ β ≤ 1); ``restitution_velocity``
    the closing speed below which restitution is not applied (avoids chatter at rest); ``margin``: a one-sided row
    or contact slot takes part in the step's problem when its gap, advanced by the free velocity over the step,
    is below ``margin`` (m, or rad for limits of revolute joints): d + dt min(ẋ_n,free, 0) < margin. Farther rows
    cannot touch within the step and are masked (which keeps the problem well scaled). ``correction``
    (:class:`~.position_correction.PositionCorrection`): how the loops' position error, penetration and limit
    violation are removed from q after the velocity update (the loops' all of it, ``loops``; the one-sided rows' a
    fraction per step, at most ``max_step`` per step), never through the velocity.

    ``max_limit_rows`` and ``max_contacts``: the capacity of the step's buffer of active one-sided rows (joint-limit
    rows) and contact slots. The rows that can act within the step (``margin``) are gathered into it, nearest
    first, and only they enter the solve (:func:`contact_step`); more candidates than places is an overflow, named
    in the step's report (``StepReport.overflow``) and in a warning of :func:`~.simulate.simulate` — the farthest
    candidates are left out of that step. None: from the model, :func:`buffer_capacity` (every limited joint, a
    joint's two rows cannot both be near; at most :data:`AUTO_MAX_CONTACTS` contact slots).

    ``broad_phase`` (:class:`~mrds_jax.collision.BroadPhase`): before the narrow phase, only the collision pairs
    whose bounding capsules can come within the margin during the step (:func:`candidates`), at most
    ``broad_phase.max_pairs`` of each pair kind, are computed; more is an overflow too (the same report and
    warning)."""
    ncp: NCPSettings = NCPSettings()
    baumgarte: float = 0.2
    restitution_velocity: float = 1e-3
    margin: float = 1e-3
    correction: PositionCorrection = PositionCorrection()
    max_limit_rows: Optional[int] = None
    max_contacts: Optional[int] = None
    broad_phase: BroadPhase = BroadPhase()


AUTO_MAX_CONTACTS = 32    # MuJoCo's humanoid standing has ~10 contacts, a quadruped 4-8


def contact_argument(where, field):
    """How the caller ``where`` names one of its contact arguments (``field``: "settings", "modes" or
    "mode_params"): :func:`~.simulate.simulate`'s :class:`~.options.ContactStep` field, or the parameter of
    :func:`contact_rollout` (``contact_modes``, ``settings``, ``mode_params``)."""
    if where == "simulate":
        return f"ContactStep.{field}"
    return "contact_modes" if field == "modes" else field


def validate_contact_settings(settings, where="simulate"):
    """Named errors (:class:`~mrds_jax.validation.ArgumentError`) for settings that cannot work, before anything
    compiles: a non-integer or < 1 stage or iteration count, a non-positive ρ, a negative proximal weight, β outside
    [0, 1], a negative margin or restitution threshold."""
    if not isinstance(settings, ContactSettings):
        raise validation.ArgumentError(f"{where}: {contact_argument(where, 'settings')} must be a ContactSettings, got "
                                       f"{type(settings).__name__}")
    _static_settings(settings, "ContactSettings", where)
    validate_ncp_settings(settings.ncp, where)
    validation.positive(settings.baumgarte, "ContactSettings.baumgarte", where, allow_zero=True)
    if float(settings.baumgarte) > 1.0:
        raise validation.ArgumentError(f"{where}: ContactSettings.baumgarte is the fraction of a position error "
                                       f"removed per step, in [0, 1]; got {settings.baumgarte}")
    validation.positive(settings.margin, "ContactSettings.margin", where, allow_zero=True)
    validation.positive(settings.restitution_velocity, "ContactSettings.restitution_velocity", where,
                        allow_zero=True)
    for name in ("max_limit_rows", "max_contacts"):
        value = getattr(settings, name)
        if value is not None:
            validation.count(value, f"ContactSettings.{name}", where)
    if not isinstance(settings.broad_phase, BroadPhase):
        raise validation.ArgumentError(f"{where}: ContactSettings.broad_phase must be a BroadPhase, got "
                                       f"{type(settings.broad_phase).__name__}")
    if settings.broad_phase.max_pairs is not None:
        validation.count(settings.broad_phase.max_pairs, "BroadPhase.max_pairs", where)
    validation.count(settings.broad_phase.capacity_factor, "BroadPhase.capacity_factor", where)
    validation.positive(settings.broad_phase.slack, "BroadPhase.slack", where, allow_zero=True)
    validate_position_correction(settings.correction, where)
    return settings


def _static_settings(settings, name, where):
    """Every field of a settings NamedTuple (nested ones included) a concrete value: the settings are static
    arguments of the compiled step (hashed), so a traced one is named instead of failing in the hash."""
    for field, value in settings._asdict().items():
        if isinstance(value, tuple) and hasattr(value, "_asdict"):
            _static_settings(value, type(value).__name__, where)
        elif validation.is_traced(value):
            raise validation.ArgumentError(f"{where}: {name}.{field} is a setting of the compiled step (static, "
                                           "hashed): give a number, not a traced value")
        elif not _hashable(value):
            raise validation.ArgumentError(f"{where}: {name}.{field} is a setting of the compiled step (static, "
                                           f"hashed): give a Python number (float(x), int(x)), not an "
                                           f"unhashable {type(value).__name__}")


def _hashable(value):
    try:
        hash(value)
    except (TypeError, ValueError):
        return False
    return True


def validate_position_correction(correction, where):
    """Named errors for a :class:`~.position_correction.PositionCorrection` that cannot work: β or ``loops``
    outside [0, 1], a negative or non-finite ``max_step`` or ``slop``, a non-integer or < 1 sweep count."""
    if not isinstance(correction, PositionCorrection):
        raise validation.ArgumentError(f"{where}: ContactSettings.correction must be a PositionCorrection, got "
                                       f"{type(correction).__name__}")
    validation.positive(correction.fraction, "PositionCorrection.fraction", where, allow_zero=True)
    if float(correction.fraction) > 1.0:
        raise validation.ArgumentError(f"{where}: PositionCorrection.fraction is the part of a penetration or limit "
                                       f"violation removed per step, in [0, 1]; got {correction.fraction}")
    validation.positive(correction.max_step, "PositionCorrection.max_step", where, allow_zero=True)
    validation.positive(correction.slop, "PositionCorrection.slop", where, allow_zero=True)
    validation.count(correction.sweeps, "PositionCorrection.sweeps", where)
    validation.positive(correction.loops, "PositionCorrection.loops", where, allow_zero=True)
    if float(correction.loops) > 1.0:
        raise validation.ArgumentError(f"{where}: PositionCorrection.loops is the part of the loops' position error "
                                       f"removed per step, in [0, 1]; got {correction.loops}")


def validate_contact_modes(system, contact_modes, q0, v0, mode_params, where="simulate"):
    """Named errors for a ``contact_modes`` switch that cannot work, before anything compiles: not a function of
    the four arguments (t, q, v, mode_params); for ``simulate``, not hashable (a static argument of its compiled
    rollout); a system without bilateral contacts to switch; ``mode_params`` that are not numbers; a function that
    asks a traced argument for a Python value (``if t < ...``: traced abstractly, :func:`jax.eval_shape`); a result
    that is not one boolean per contact (wrong count, shape (1, 1), 0-d, empty, or floats, which would be read as
    True when nonzero)."""
    name = contact_argument(where, "modes")
    import inspect
    if not callable(contact_modes):
        raise validation.ArgumentError(f"{where}: {name} must be a function (t, q, v, mode_params) -> one "
                                       f"boolean per contact, got {type(contact_modes).__name__}")
    if where == "simulate" and not _hashable(contact_modes):
        raise validation.ArgumentError(f"{where}: {name} must be hashable: it is a static argument of the compiled "
                                       f"rollout (its traced parameters go in ContactStep.mode_params); give a "
                                       f"function or a frozen dataclass (@dataclasses.dataclass(frozen=True)), not "
                                       f"an unhashable {type(contact_modes).__name__}")
    try:
        inspect.signature(contact_modes).bind(0.0, q0, v0, mode_params)
    except TypeError as e:
        raise validation.ArgumentError(f"{where}: {name} must take four arguments (t, q, v, mode_params): "
                                       f"{e}") from None
    except ValueError:                   # no signature to inspect (a builtin): its call below decides
        pass
    n = len(system.contacts)
    if n == 0:
        raise validation.ArgumentError(f"{where}: {name} switches the system's bilateral contacts (grasps, "
                                       "welds), but this system has none")
    validate_mode_params(mode_params, where)
    try:
        out = jax.eval_shape(contact_modes, jnp.zeros((), q0[0].dtype), tuple(q0), tuple(v0), mode_params)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerIntegerConversionError) as e:
        raise validation.ArgumentError(
            f"{where}: {name} is called with traced t, q, v and mode_params (every step of the compiled rollout), so "
            f"a Python `if`, `and`/`or`, bool(), float() or NumPy on them cannot be evaluated: use jnp.where or "
            f"jax.lax.cond on traced t, q, v (e.g. jnp.array([t < p[0]]) in place of `if t < p[0]`). JAX said: "
            f"{type(e).__name__}: {str(e).splitlines()[0]}") from None
    if not hasattr(out, "shape") or out.shape != (n,) or not (jnp.issubdtype(out.dtype, jnp.bool_)
                                                            or jnp.issubdtype(out.dtype, jnp.integer)):
        got = (f"shape {out.shape} of {out.dtype}" if hasattr(out, "shape") else type(out).__name__)
        raise validation.ArgumentError(f"{where}: {name} must return one boolean per contact of the system "
                                       f"({n}: {list(system.contact_names)}), shape ({n},); got {got}")
    return contact_modes


def validate_mode_params(mode_params, where="simulate"):
    """``mode_params`` a pytree of numbers (arrays), the traced leaves of ``contact_modes``."""
    for leaf in jax.tree.leaves(mode_params):
        if isinstance(leaf, (jax.Array, jax.core.Tracer)):
            continue
        a = np.asarray(leaf)
        if not (np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.bool_)):
            raise validation.ArgumentError(f"{where}: {contact_argument(where, 'mode_params')} must be numbers or arrays "
                                           f"(traced leaves of {contact_argument(where, 'modes')}), got "
                                           f"{type(leaf).__name__} {leaf!r}")
    return mode_params


def validate_contact_rollout(system, q0, v0, dt, n_steps, decimation, tau, settings, where="contact_rollout"):
    """Named errors for :func:`contact_rollout`'s arguments that cannot work, before anything compiles: a state that
    does not fit the system, dt ≤ 0 (concrete), n_steps or decimation < 1, a
    ``tau`` whose per-module entries are not (nv,), invalid settings (:func:`validate_contact_settings`)."""
    validation.system_state(system, SystemState(tuple(q0), tuple(v0)), where)
    validation.positive(dt, "dt", where)
    validation.count(n_steps, "n_steps", where)
    validation.count(decimation, "decimation", where)
    if tau is not None:
        if len(tau) != len(system.modules):
            raise validation.ArgumentError(f"{where}: tau needs one array per module ({len(system.modules)}), got "
                                           f"{len(tau)}")
        for m, name, t in zip(system.modules, system.module_names, tau):
            validation.vector(t, m.nv, f"tau[{name!r}]", where)
    validate_contact_settings(settings, where)


class StepReport(NamedTuple):
    """What one step reports (arrays; per slot/row in the static order of :func:`row_layout`)."""
    impulses: jnp.ndarray          # (m,) λ of every row (N s or N m s)
    velocities: jnp.ndarray        # (m,) σ = G λ + g, post-step constraint velocities with drift terms
    gaps: jnp.ndarray              # (n_limit_rows + n_slots,) gaps of one-sided rows and contact slots at the step's start
    points: jnp.ndarray            # (n_slots, 3) contact points
    frames: jnp.ndarray            # (n_slots, 3, 3) contact frames, rows [n, t1, t2]
    primal: jnp.ndarray            # () solver residuals (:func:`~.ncp.ncp_residuals`)
    dual: jnp.ndarray
    complementarity: jnp.ndarray
    iterations: jnp.ndarray        # () loop trips of the step's solve (0: nothing to solve, or the warm start solved it)
    converged: jnp.ndarray         # () bool: residuals within NCPSettings.tolerance
    overflow: jnp.ndarray          # () bool: more rows could act than the buffer holds (:class:`ContactSettings`)
    pair_overflow: jnp.ndarray = None   # () bool: more collision pairs of one kind within reach than the broad phase
    #                                     computes (``ContactSettings.broad_phase``)


# ----------------------------------------------------------------------------- the rows' static structure
class LimitRows(NamedTuple):
    """Static: per limited one-coordinate joint (module index, q index, v index, lower, upper, name): two rows each,
    lower then upper; per spherical joint with a cone limit (module index, q index, v index, largest angle, name):
    one row each, after the others; per limited fixed tendon (((module index, q index, v index, coef), ...),
    lower, upper, name): two rows each, last."""
    joints: tuple
    cones: tuple = ()
    tendons: tuple = ()

    @property
    def n_rows(self):
        return 2 * len(self.joints) + len(self.cones) + 2 * len(self.tendons)

    @property
    def n_limits(self):
        """Limits (a joint's or tendon's two rows count once: they cannot both be near)."""
        return len(self.joints) + len(self.cones) + len(self.tendons)

    def row_names(self):
        """One label per row, in row order: ``module.joint (lower)``, ``(upper)``, ``module.joint (cone)``,
        ``tendon (lower)``, ``(upper)``."""
        return [f"{j[-1]} ({side})" for j in self.joints for side in ("lower", "upper")] + \
            [f"{c[-1]} (cone)" for c in self.cones] + \
            [f"{t[-1]} ({side})" for t in self.tendons for side in ("lower", "upper")]


def limit_rows(system):
    """The joint limits the modules keep (:func:`~.limits.limited_joints`) as one-sided rows (:class:`LimitRows`),
    and the cone limits of spherical joints (``Topology.cone_limits``, the largest rotation angle from the
    reference, MuJoCo's ball ``range``), and the limited fixed tendons (``System.tendon_limits``). Other joints with
    more than one coordinate (free) have no limit."""
    out, cones = [], []
    for k, name, joint, _, lower, upper in limited_joints(system):
        topology = system.modules[k].topology
        j = topology.joint_names.index(joint)
        qs, vs = topology.q_slices[j], topology.v_slices[j]
        if qs.stop - qs.start == 1 and vs.stop - vs.start == 1:
            out.append((k, qs.start, vs.start, lower, upper, f"{name}.{joint}"))
    for k, (name, module) in enumerate(zip(system.module_names, system.modules)):
        topology = getattr(module, "topology", None)        # modules that are not trees (energy modules) have none
        for j, angle in enumerate(getattr(topology, "cone_limits", ()) or ()):
            if angle is not None and topology.joint_kinds[j] == "spherical":
                cones.append((k, topology.q_slices[j].start, topology.v_slices[j].start, float(angle),
                              f"{name}.{topology.joint_names[j]}"))
    tendons = tuple((tendon_limit_dofs(system.module_names, system.modules, t), t.lower, t.upper, t.name)
                    for t in getattr(system, "tendon_limits", ()))
    return LimitRows(tuple(out), tuple(cones), tendons)


def tendon_length_at(dofs, q):
    """L = Σ coef q of a limited tendon's ((k, qi, vi, coef), ...) at the per-module positions q."""
    return sum(c * q[k][iq] for k, iq, _, c in dofs)


def cone_gap_and_row(quaternion, angle):
    """A spherical joint's cone row: the gap ``angle`` − θ, θ = 2 atan2(|x, y, z|, |w|) its rotation angle (rad), and
    the row (3,) of dθ/dt in its angular velocity, −(the rotation axis) (θ̇ = axis · ω in the joint's frame or the
    world's alike: the axis is fixed by its own rotation). Zero row at θ = 0, where no axis is defined (the gap is
    then the whole angle, far from touching)."""
    w, xyz = quaternion[0], quaternion[1:]
    sign = jnp.where(w < 0, -1.0, 1.0)
    norm2 = jnp.sum(xyz * xyz)
    safe = jnp.sqrt(jnp.where(norm2 > 0, norm2, 1.0))
    theta = 2.0 * jnp.arctan2(jnp.where(norm2 > 0, safe, 0.0), sign * w)
    axis = jnp.where(norm2 > 0, sign * xyz / safe, 0.0)
    return angle - theta, -axis

def collision_model_of(system):
    return getattr(system, "collision", None)


def n_contact_slots(system):
    model = collision_model_of(system)
    return 0 if model is None else int(model.n_slots)


def row_layout(system):
    """The :class:`~.ncp.RowLayout` of ``system``'s step: loops' and couplings' rows, then the limits' two rows per
    limited joint, then the collision model's slots."""
    names, slices = constraint_rows(system)
    n_b = slices[-1].stop if slices else 0
    return RowLayout(n_b, limit_rows(system).n_rows, n_contact_slots(system))


def has_unilateral_rows(system):
    """Whether ``system`` has joint limits or collision geometry: then :func:`~.simulate.simulate` steps at the
    velocity level (module docstring)."""
    layout = row_layout(system)
    return layout.n_unilateral + layout.n_contacts > 0


# ----------------------------------------------------------------------------- rows at a state
def _flat_v(system, vs):
    return jnp.concatenate([jnp.asarray(v) for v in vs])


def _split_v(system, v):
    out, s = [], 0
    for m in system.modules:
        out.append(v[s:s + m.nv])
        s += m.nv
    return tuple(out)


def bilateral_errors(system, state, t):
    """(Φ_p, Φ_v) of the loops and joint couplings at ``state``, each (n_b,) in :func:`row_layout`'s order: the
    contacts' (:func:`~.stabilisation.constraint_errors`) then the couplings' g and G v (one kinematics pass)."""
    dtype = state.q[0].dtype
    err = constraint_errors(system, state, t)
    cp, cv = coupling_errors(system, state)
    flat = lambda parts: jnp.concatenate(parts) if parts else jnp.zeros(0, dtype)  # noqa: E731
    return flat(tuple(err.position) + (cp,)), flat(tuple(err.velocity) + (cv,))


def bilateral_rows(system, state, v_free, t, dt, beta):
    """(J, g) of the loops and joint couplings (module docstring, step 2)."""
    J = jnp.concatenate([constraint_jacobian(system, state, t + dt), coupling_jacobian(system, state)])
    phi_p, phi_v = bilateral_errors(system, SystemState(state.q, v_free), t + dt)   # Φ_p depends on q only
    return J, phi_v + (beta / dt) * phi_p


def _gap_term(gap, dt):
    """Speculative contact for d > 0 (the row only keeps the bodies from crossing within the step); nothing for
    d ≤ 0: a penetrating or violated row only stops approaching (σ_n ≥ 0), its depth is removed on the position
    level (:mod:`.position_correction`), never turned into velocity."""
    return jnp.maximum(gap, 0.0) / dt


def newton_bounce(gap, v_before, v_free_n, restitution, dt, threshold):
    """Per one-sided row: whether Newton's impact law applies this step, and the term e·v⁻ it adds to g (module
    docstring). It applies when the row closes within the step, d + dt v_n,free ≤ 0 (a speculative contact that
    touches during the step, or one already touching), at an approach speed v⁻ = v_n at the start of the step
    below −``threshold``; then σ_n = v_n⁺ + e v⁻ ≥ 0 asks the rebound v_n⁺ ≥ −e v⁻ in place of the speculative
    gap term (Moreau's impact law at the velocity level; Acary & Brogliato 2008, §10.1.2, with the closing test of
    speculative contacts)."""
    bouncing = (gap + dt * v_free_n <= 0) & (v_before < -threshold) & (restitution > 0)
    return bouncing, jnp.where(bouncing, restitution * v_before, 0.0)


def _near(gap, v_free_n, dt, margin):
    """Whether a one-sided row can close within the step (:class:`ContactSettings` ``margin``)."""
    return gap + dt * jnp.minimum(v_free_n, 0.0) < margin


class SlotKinematics(NamedTuple):
    gap: jnp.ndarray       # (n,)
    point: jnp.ndarray     # (n, 3)
    frame: jnp.ndarray     # (n, 3, 3) rows [n, t1, t2]
    valid: jnp.ndarray     # (n,) bool
    friction: jnp.ndarray  # (n,)
    restitution: jnp.ndarray  # (n,)
    J: jnp.ndarray         # (3n, Σnv) rows [n, t1, t2] of the relative velocity of geom 2's point w.r.t. geom 1's


def geom_frame_names(system, model):
    """Per module index: the frames its collision geoms ride on, each once, in geom order ({} without geoms)."""
    names = {}
    for geom in model.geoms:
        if geom.module is not None:
            names.setdefault(system.module_index(geom.module), []).append(geom.frame)
    return {k: tuple(dict.fromkeys(v)) for k, v in names.items()}


def _geom_frames(system, model, state, points=None):
    """Per geom: its world pose (R, p), the world position of the operational point it rides on, and that point's
    world-aligned Jacobian (6, Σnv) (zeros on the ground), through the module interface (:func:`point_motion`,
    :func:`point_jacobians`). ``points``: None, or per module index of :func:`geom_frame_names` the (R, p, J) of
    its frames already computed (the step's one kinematics pass, :func:`step_kinematics`)."""
    from ..collision import geom_world_pose
    dtype = state.q[0].dtype
    nv = sum(m.nv for m in system.modules)
    offsets = np.cumsum([0] + [m.nv for m in system.modules])
    per_module = {}
    for gi, geom in enumerate(model.geoms):
        if geom.module is not None:
            per_module.setdefault(system.module_index(geom.module), []).append(gi)
    frame_names = geom_frame_names(system, model)
    frames = [None] * len(model.geoms)
    for k, gis in per_module.items():
        module = system.modules[k]
        names = frame_names[k]
        if points is not None and k in points:
            R_k, p_k, Jp = points[k]
        else:
            pm = point_motion(module, state.q[k], jnp.zeros(module.nv, dtype), names)
            R_k, p_k, Jp = pm.R, pm.p, point_jacobians(module, state.q[k], names)
        for gi in gis:
            i = names.index(model.geoms[gi].frame)
            Jfull = jnp.zeros((6, nv), dtype).at[:, offsets[k]:offsets[k + 1]].set(Jp[i])
            R, p = geom_world_pose(model.geoms[gi], R_k[i], p_k[i])
            frames[gi] = (R, p, p_k[i], Jfull)
    for gi, geom in enumerate(model.geoms):
        if geom.module is None:
            R, p = geom_world_pose(geom, jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype))
            frames[gi] = (R, p, p, jnp.zeros((6, nv), dtype))
    return frames


def geom_world_frames(system, state):
    """(R, p) world pose of every geom of ``system``'s collision model at ``state`` (geom order)."""
    return [(R, p) for R, p, _, _ in _geom_frames(system, collision_model_of(system), state)]


def slot_kinematics(system, state):
    """:class:`SlotKinematics` of every contact slot of ``system``'s collision model at ``state`` (all slots: the
    step itself builds the rows of the gathered ones only, :func:`active_rows`)."""
    cand = candidates(system, state)
    sl = cand.slots
    n = sl.gap.shape[0]
    J = slot_rows(cand, jnp.arange(n)).reshape(3 * n, -1)
    return SlotKinematics(sl.gap, sl.point, sl.frame, sl.valid, sl.friction, sl.restitution, J)


def unilateral_violations(system, state):
    """min(d, 0) of every joint-limit row and every valid contact slot at ``state`` (m or rad; 0 where a row is not
    violated): what :func:`~.projection.make_consistent` drives to zero (penetration and limit violation), and what
    ``mrds-jax check`` reports."""
    return unilateral_violations_and_jacobian(system, state)[0]


def unilateral_violations_and_jacobian(system, state):
    """:func:`unilateral_violations` r and its Jacobian ∂r/∂Δ with respect to a generalized displacement Δ (the
    velocity coordinates, as q ⊕ Δ moves the configuration): a violated limit row's ±e_dof, a penetrating slot's
    normal row of :func:`slot_rows` (the derivative of a gap along a rigid motion is the normal relative velocity of
    the touching points, Δ in place of v), zero rows where nothing is violated. From the step's own rows, so a
    projection differentiates no narrow phase."""
    cand = candidates(system, state, 0.0)        # the limit rows' gaps and the slots, as the step sees them
    violated_l = cand.limit_gap < 0.0
    out = [jnp.where(violated_l, cand.limit_gap, 0.0)]
    jac = [jnp.where(violated_l[:, None], cand.limit_jacobian, 0.0)]
    if cand.slots is not None:
        violated = cand.slots.valid & (cand.slots.gap < 0.0)
        out.append(jnp.where(violated, cand.slots.gap, 0.0))
        normal = slot_rows(cand, jnp.arange(cand.slots.gap.shape[0]))[:, 0, :]
        jac.append(jnp.where(violated[:, None], normal, 0.0))
    return jnp.concatenate(out), jnp.concatenate(jac)


def _candidate_gaps(cand):
    """(n_limit_rows + n_slots,) the limit rows' gaps, then every slot's (m or rad; a slot that is not valid keeps the
    narrow phase's far value)."""
    return cand.limit_gap if cand.slots is None else jnp.concatenate([cand.limit_gap, cand.slots.gap])


def state_gaps(system, state, within=None, settings=ContactSettings()):
    """(n_limit_rows + n_slots,) gaps of every one-sided row and contact slot at ``state``, as stored in
    :attr:`ContactTrajectory.gaps` (the limit rows first, in :func:`row_layout`'s order); ``within``, ``settings``:
    the broad phase's (:func:`candidates`: a pair it leaves out stores its bounding capsules' distance, a lower
    bound of its gap)."""
    return _candidate_gaps(candidates(system, state, within, settings))


@functools.partial(jax.jit, static_argnames="within")
def _slots_at(system, state, within=None):
    """The collision model's :class:`~mrds_jax.collision.SlotSet` at a state (:func:`candidates`), compiled once per
    system structure (the checks below run it on concrete states; op by op, the narrow phase's loops would be
    traced again at every call)."""
    return candidates(system, state, within).slots


def contact_gaps(system, state, within=None):
    """Per candidate pair of the collision model (by geom names): the smallest gap of its valid slots at ``state``
    (m; negative: penetration), as a dict — what ``mrds-jax check`` lists. Concrete states only. ``within`` None:
    every pair's narrow phase; 0.0: the broad phase's (:func:`candidates`), the pairs it leaves out at +inf, and
    None when it overflowed (more pairs of a kind within reach than it computes)."""
    model = collision_model_of(system)
    if model is None or not model.n_slots:
        return {}
    slots = _slots_at(system, state, within)
    if within is not None and bool(slots.overflow):
        return None
    gap, valid = np.asarray(slots.gap), np.asarray(slots.valid)
    out, start = {}, 0
    for (i, j), n in zip(model.pairs, model.slots):
        g = gap[start:start + n][valid[start:start + n]]
        out[f"{model.geoms[i].name}/{model.geoms[j].name}"] = float(g.min()) if g.size else float("inf")
        start += n
    return out


def start_violations(system, state, tol=1e-9):
    """The collision pairs that penetrate (by geom names, :func:`contact_gaps`) and the limited joints past a limit
    (by ``module.joint``; limited tendons by name) at a concrete ``state``, each with its depth (m or rad, > ``tol``), as two dicts: what
    :func:`~.simulate.simulate` warns about at the start and :func:`~.projection.make_consistent` resolves."""
    gaps = contact_gaps(system, state, 0.0)             # the pairs near enough to penetrate (broad phase) ...
    gaps = contact_gaps(system, state) if gaps is None else gaps     # ... or, past its capacity, every pair
    pairs = {name: -g for name, g in gaps.items() if g < -tol}
    joints = {}
    limits = limit_rows(system)
    for k, iq, _, lo, hi, name in limits.joints:
        q = float(state.q[k][iq])
        depth = max(lo - q, q - hi)
        if depth > tol:
            joints[name] = depth
    for k, iq, _, angle, name in limits.cones:
        depth = -float(cone_gap_and_row(jnp.asarray(state.q[k][iq:iq + 4]), angle)[0])
        if depth > tol:
            joints[name] = depth
    for dofs, lo, hi, name in limits.tendons:
        length = float(tendon_length_at(dofs, state.q))
        depth = max(lo - length, length - hi)
        if depth > tol:
            joints[name] = depth
    return pairs, joints


# ----------------------------------------------------------------------------- one step
class StepKinematics(NamedTuple):
    """What one kinematics pass per module gives the step (:func:`step_kinematics`)."""
    H: tuple        # per module (nv, nv) H(q)
    bias: tuple     # per module (nv,) C v + G (RNEA at q̈ = 0)
    points: dict    # module index -> (R (n, 3, 3), p (n, 3), J (n, 6, nv)) of its geoms' frames (geom_frame_names)


def step_kinematics(system, state):
    """H, C v + G and the geoms' frames of every module from one kinematics pass each (the module interface's
    :meth:`~mrds_jax.dynamics.interface.ModuleContract.reference_terms`: CRBA, RNEA at q̈ = 0 and the points, in
    ground coordinates or link by link), where asking :func:`mass_matrix`, :func:`open_chain_inverse_dynamics`,
    :func:`point_motion` and :func:`point_jacobians` one by one traces four passes (and reverse mode transposes
    four). A module without geoms, or whose task rows are not the six world-aligned ones (a planar module), is
    asked for H and C v + G alone, and gives its geoms' frames through :func:`_geom_frames`."""
    model = collision_model_of(system)
    names = geom_frame_names(system, model) if model is not None and model.n_slots else {}
    H, bias, points = [], [], {}
    for k, (m, qk, vk) in enumerate(zip(system.modules, state.q, state.v)):
        if m.task_dim == 6 and k in names:
            ref = reference_terms(m, qk, vk, names[k])
            H.append(ref.H)
            bias.append(ref.bias)
            points[k] = (ref.R, ref.p, ref.J)
        else:
            H.append(mass_matrix(m, qk))
            bias.append(open_chain_inverse_dynamics(m, qk, vk, jnp.zeros_like(vk)))
    return StepKinematics(tuple(H), tuple(bias), points)


def module_factors(kinematics):
    """The Cholesky factors of the modules' H (:func:`step_kinematics`), from which every H⁻¹ X of the step follows
    (:func:`_minv_times`)."""
    return [cholesky(H) for H in kinematics.H]


def _minv_times(system, factors, X):
    """H⁻¹ X for the block-diagonal H of the modules (X: (Σnv,) or (Σnv, m))."""
    out, s = [], 0
    for m, L in zip(system.modules, factors):
        out.append(cho_solve(L, X[s:s + m.nv]))
        s += m.nv
    return jnp.concatenate(out)


def delassus(system, factors, J):
    """G = J H⁻¹ Jᵀ (the Delassus matrix; its loop block is Bᶜ, Bonaventura eq. 88) and H⁻¹ Jᵀ."""
    Psi = _minv_times(system, factors, J.T)
    return matmul(J, Psi), Psi


def free_velocity(kinematics, v, taus, Q, dt):
    """Step 1: (v_free, factors) with v_free = v + dt H⁻¹(τ + Q − C v − G) per module and the Cholesky factors of
    the modules' H, computed once (H and C v + G of :func:`step_kinematics`: CRBA and RNEA at q̈ = 0, Featherstone
    RBDA §6.2 and §5.3): the same factors then serve every H⁻¹Jᵀ of the step."""
    factors = module_factors(kinematics)
    v_free = tuple(vk + dt * cho_solve(L, tk + Qk - bk)
                   for L, bk, vk, tk, Qk in zip(factors, kinematics.bias, v, taus, Q))
    return v_free, factors


def _bilateral_active(system, active_contacts, dtype):
    """Row mask of the loops and couplings from a per-contact switch (None: all on)."""
    names, slices = constraint_rows(system)
    n_b = slices[-1].stop if slices else 0
    if active_contacts is None:
        return jnp.ones(n_b, bool)
    a = jnp.asarray(active_contacts, bool)
    parts = [jnp.broadcast_to(a[i], (sl.stop - sl.start,)) for i, sl in enumerate(slices[:len(system.contacts)])]
    parts += [jnp.ones(sl.stop - sl.start, bool) for sl in slices[len(system.contacts):]]
    return jnp.concatenate(parts) if parts else jnp.zeros(0, bool)


class LoopSolve(NamedTuple):
    """The bilateral rows solved on their own (:func:`eliminate_bilateral`)."""
    Psi: jnp.ndarray        # (Σnv, n_b) H⁻¹ J_bᵀ
    factor: jnp.ndarray     # (n_b, n_b) Cholesky factor of the masked G_bb + ηI
    impulses: jnp.ndarray   # (n_b,) λ_b⁰ = −G_bb⁻¹ g_b, the loops' impulses with no one-sided row acting
    velocity: jnp.ndarray   # (Σnv,) v_c = v_free + Ψ_b λ_b⁰, the free velocity with the loops closed
    active: jnp.ndarray     # (n_b,) row mask (switched-off grasps)


def eliminate_bilateral(system, factors, Jb, gb, active, v_free, prox):
    """The loops, couplings and switched-on grasps are always active: their block G_bb = J_b H⁻¹ J_bᵀ (Bᶜ of
    Bonaventura eq. 88) is factored once (Cholesky, with the proximal ηI of :class:`~.ncp.NCPSettings` that keeps redundant
    loops solvable, and switched-off rows decoupled), and they are eliminated from the step's problem by a Schur
    complement: with λ_b = λ_b⁰ − G_bb⁻¹ G_ba λ_a, the one-sided rows see the Delassus matrix of the constrained
    system, G_aa − G_ab G_bb⁻¹ G_ba, and the free velocity v_c with the loops closed (:func:`reduced_problem`).
    Exact: the same λ as one solve over all rows (tests/test_contact_step.py)."""
    dtype = gb.dtype
    Psi = _minv_times(system, factors, Jb.T)
    a = active.astype(dtype)
    Gbb = matmul(Jb, Psi) * a[:, None] * a[None, :]
    scale = jnp.max(jnp.abs(jnp.diagonal(Gbb)), initial=0.0) if Gbb.shape[0] else jnp.ones((), dtype)
    scale = jnp.where(scale > 0, scale, 1.0)
    L = cholesky(Gbb + jnp.diag((1.0 - a) * scale + prox * scale))
    lam0 = -cho_solve(L, gb * a) if gb.shape[0] else gb
    v_c = _flat_v(system, v_free) + (matmul(Psi, lam0) if gb.shape[0] else 0.0)
    return LoopSolve(Psi * a[None, :], L, lam0, v_c, active)


class Candidates(NamedTuple):
    """Every one-sided row and contact slot of the model at a state (static shapes): what can be gathered."""
    limit_gap: jnp.ndarray       # (n_l,) gaps of the limit rows (q − q_lo, q_hi − q)
    limit_jacobian: jnp.ndarray  # (n_l, Σnv) the limit rows: ±e_dof of a hinge or slide, −axis on a cone's three
    slots: object                # SlotSet of the collision model (gap, point, frame, valid, friction, restitution)
    geom_jacobian: jnp.ndarray   # (n_geoms, 6, Σnv) world-aligned Jacobians of the points the geoms ride on
    geom_origin: jnp.ndarray     # (n_geoms, 3) those points' world positions
    slot_geoms: np.ndarray       # (n_slots, 2) static geom indices (i, j) of each slot's pair


def limit_gaps_and_rows(system, limits, state):
    """(n_l,) gaps and (n_l, Σnv) rows of every limit row at ``state``: a hinge's or slide's q − lo (row +e_j) and
    hi − q (row −e_j), then each cone's :func:`cone_gap_and_row`, then each limited tendon's L − lo (row: its
    coefficients on its joints' degrees of freedom) and hi − L (their negatives)."""
    dtype = state.q[0].dtype
    offsets = np.cumsum([0] + [m.nv for m in system.modules])
    nv = int(offsets[-1])
    gaps = [g for k, iq, _, lo, hi, _ in limits.joints for g in (state.q[k][iq] - lo, hi - state.q[k][iq])]
    dof = np.array([offsets[k] + iv for k, _, iv, _, _, _ in limits.joints for _ in (0, 1)], dtype=np.int32)
    rows = [jnp.asarray(np.eye(nv)[dof] * np.tile([1.0, -1.0], len(limits.joints))[:, None], dtype)]
    for k, iq, iv, angle, _ in limits.cones:
        gap, row = cone_gap_and_row(state.q[k][iq:iq + 4], angle)
        gaps.append(gap)
        rows.append(jnp.zeros((1, nv), dtype).at[0, offsets[k] + iv:offsets[k] + iv + 3].set(row))
    for dofs, lo, hi, _ in limits.tendons:
        length = tendon_length_at(dofs, state.q)
        gaps += [length - lo, hi - length]
        row = np.zeros(nv)
        for k, _, iv, c in dofs:
            row[offsets[k] + iv] += c
        rows.append(jnp.asarray(np.stack([row, -row]), dtype))
    return (jnp.stack(gaps) if gaps else jnp.zeros(0, dtype)), jnp.concatenate(rows)


def candidates(system, state, within=None, settings=ContactSettings(), points=None):
    """:class:`Candidates` at ``state``: the limit rows' gaps and the collision model's slots with the geoms' frame
    Jacobians, from which any slot's rows follow (:func:`slot_rows`).

    ``within`` None: every pair's narrow phase (exact slots of all pairs: the checks and reports that list every
    pair). A duration (s): the broad phase first (:func:`~mrds_jax.collision.contact_slots`), each pair's reach
    ``settings.margin`` plus twice the distance its geoms' points can travel in that time at ``state.v``
    (:func:`~mrds_jax.collision.broadphase.step_reach`) plus ``settings.broad_phase.slack``: the step passes its dt,
    the projection out of penetration 0. ``points``: the geoms' frames already computed (:func:`_geom_frames`)."""
    from ..collision import contact_slots
    from ..collision.broadphase import geom_speed_bounds, step_reach
    dtype = state.q[0].dtype
    limit_gap, limit_J = limit_gaps_and_rows(system, limit_rows(system), state)
    model = collision_model_of(system)
    nv = sum(m.nv for m in system.modules)
    if model is None or not model.n_slots:
        return Candidates(limit_gap, limit_J, None, jnp.zeros((0, 6, nv), dtype), jnp.zeros((0, 3), dtype),
                          np.zeros((0, 2), np.int32))
    frames = _geom_frames(system, model, state, points)
    poses = tuple((R, p) for R, p, _, _ in frames)
    reach = None
    if within is not None:
        v_flat = _flat_v(system, state.v)
        twists = [matmul(J, v_flat) for _, _, _, J in frames]
        speeds = geom_speed_bounds(model, poses, twists, [o for _, _, o, _ in frames])
        reach = step_reach(model, speeds, settings.margin, within, settings.broad_phase)
    slots = contact_slots(model, poses, reach, settings.broad_phase)
    slot_geoms = np.array([model.pairs[k] for k in model.slot_pair], dtype=np.int32).reshape(-1, 2)
    return Candidates(limit_gap, limit_J, slots, jnp.stack([f[3] for f in frames]),
                      jnp.stack([f[2] for f in frames]), slot_geoms)


def _point_jacobian(cand, geom, x):
    """(…, 3, Σnv) Jacobian of the material point of ``geom`` at world position ``x``: v_x = v_o + ω × (x − o)."""
    Jg, o = cand.geom_jacobian[geom], cand.geom_origin[geom]
    return Jg[..., 3:, :] - jnp.einsum("...ij,...jk->...ik", jax.vmap(skew)(x - o) if x.ndim > 1 else skew(x - o),
                                       Jg[..., :3, :])


def slot_rows(cand, index):
    """(k, 3, Σnv) rows [n, t₁, t₂] of the relative velocity of geom 2's point w.r.t. geom 1's at the slots
    ``index`` (module docstring, step 2)."""
    gi, gj = jnp.asarray(cand.slot_geoms[:, 0])[index], jnp.asarray(cand.slot_geoms[:, 1])[index]
    x = cand.slots.point[index]
    rel = _point_jacobian(cand, gj, x) - _point_jacobian(cand, gi, x)
    return jnp.einsum("kij,kjn->kin", cand.slots.frame[index], rel)


def slot_relative_velocity(system, state):
    """(n_slots, 3) velocity of geom 2's point relative to geom 1's at every contact slot, in its contact frame
    [normal, t₁, t₂], at ``state`` (:func:`slot_velocities` on :func:`candidates`)."""
    return slot_velocities(candidates(system, state), _flat_v(system, state.v))


def slot_velocities(cand, v_flat):
    """(n_slots, 3) relative velocities of every slot in its contact frame at generalized velocity ``v_flat``, from
    the geoms' twists (one product per geom, not per slot)."""
    twist = matmul(cand.geom_jacobian, v_flat)                                    # (n_geoms, 6)
    x = cand.slots.point

    def point_velocity(g):
        w, vo = twist[g, :3], twist[g, 3:]
        return vo + jnp.cross(w, x - cand.geom_origin[g])

    rel = point_velocity(cand.slot_geoms[:, 1]) - point_velocity(cand.slot_geoms[:, 0])
    return jnp.einsum("kij,kj->ki", cand.slots.frame, rel)


def buffer_capacity(system, settings=ContactSettings()):
    """(limit rows, contact slots) of the step's buffer of active rows (:class:`ContactSettings`). From the model
    when not set: every limited joint (its two rows cannot both be near), and per collision pair the slots that can
    touch at once — all of a pair's slots up to 4 (a face on a plane or a face; 8 for box–box, whose two corner sets
    coincide on a shared face) — at most :data:`AUTO_MAX_CONTACTS` in all."""
    limits = limit_rows(system)
    n_l = limits.n_rows
    cap_l = limits.n_limits if settings.max_limit_rows is None else settings.max_limit_rows
    model = collision_model_of(system)
    if settings.max_contacts is not None or model is None:
        cap_c = 0 if settings.max_contacts is None else settings.max_contacts
    else:
        per_pair = [min(n, 8 if (model.geoms[i].kind, model.geoms[j].kind) == ("box", "box") else 4)
                    for (i, j), n in zip(model.pairs, model.slots)]
        cap_c = min(sum(per_pair), AUTO_MAX_CONTACTS)
    return min(cap_l, n_l), min(cap_c, n_contact_slots(system))


def gather_nearest(near, priority, capacity):
    """Indices (capacity,) of the ``near`` entries with the smallest ``priority``, nearest first, a mask of which
    of them are near, and whether more were near than fit (overflow). Static shapes: a fixed-capacity buffer."""
    n = near.shape[0]
    if capacity >= n:
        index = jnp.arange(n, dtype=jnp.int32)
        return index, near, jnp.zeros((), bool)
    key = jnp.where(near, -priority, -jnp.inf)
    _, index = jax.lax.top_k(key, capacity)
    return index, near[index], jnp.sum(near) > capacity


class ActiveRows(NamedTuple):
    """The step's buffer of active one-sided rows: K_l limit rows then K_c contact slots (3 rows each)."""
    J: jnp.ndarray           # (K, Σnv)
    g: jnp.ndarray           # (K,) free constraint velocities at v_c with the gap and restitution terms
    active: jnp.ndarray      # (K,) bool: a near row in this place (the rest is padding)
    friction: jnp.ndarray    # (K_c,)
    gap: jnp.ndarray         # (K_l + K_c,) gaps of the places' limit rows and contact slots (m or rad)
    rows: jnp.ndarray        # (K,) int: the row of each place in the full layout (:func:`row_layout`)
    overflow: jnp.ndarray    # () bool
    layout: RowLayout        # RowLayout(0, K_l, K_c)


def active_rows(system, cand, v, v_c, dt, settings):
    """Gather the rows that can act within the step (``margin``, judged at the loop-closed free velocity v_c) into
    the fixed-capacity buffer (:func:`buffer_capacity`), and build their rows J and free velocities g (module
    docstring, step 2) for those only."""
    dtype = v_c.dtype
    full = row_layout(system)
    cap_l, cap_c = buffer_capacity(system, settings)
    nv = v_c.shape[0]
    # limit rows: J = ±e_dof (a hinge, a slide), −axis (a cone)
    vn_l = matmul(cand.limit_jacobian, v_c)
    near_l = _near(cand.limit_gap, vn_l, dt, settings.margin)
    il, al, over = gather_nearest(near_l, cand.limit_gap + dt * vn_l, cap_l)
    if cap_l:
        Jl = cand.limit_jacobian[il]
        gap_l = cand.limit_gap[il]
        gl = vn_l[il] + _gap_term(gap_l, dt)
    else:
        Jl, gap_l, gl = jnp.zeros((0, nv), dtype), jnp.zeros(0, dtype), jnp.zeros(0, dtype)
    rows = [jnp.asarray(full.n_bilateral + il, jnp.int32)]
    parts_J, parts_g, parts_a, gaps, mu = [Jl], [gl], [al], [gap_l], jnp.zeros(0, dtype)
    if cap_c:
        sl = cand.slots
        vel = slot_velocities(cand, v_c)
        vn = vel[:, 0]
        near_c = sl.valid & _near(sl.gap, vn, dt, settings.margin)
        ic, ac, over_c = gather_nearest(near_c, sl.gap + dt * vn, cap_c)
        gap_c = sl.gap[ic]
        bouncing, bounce = newton_bounce(gap_c, slot_velocities(cand, v)[ic, 0], vn[ic], sl.restitution[ic], dt,
                                         settings.restitution_velocity)
        gn = vn[ic] + jnp.where(bouncing, bounce, _gap_term(gap_c, dt))
        parts_J.append(slot_rows(cand, ic).reshape(3 * cap_c, nv))
        parts_g.append(jnp.concatenate([gn[:, None], vel[ic, 1:]], axis=1).reshape(-1))
        parts_a.append(jnp.repeat(ac, 3))
        gaps.append(gap_c)
        rows.append((full.contact_start + 3 * ic[:, None] + jnp.arange(3)[None]).reshape(-1).astype(jnp.int32))
        mu = sl.friction[ic]
        over = over | over_c
    return ActiveRows(jnp.concatenate(parts_J), jnp.concatenate(parts_g), jnp.concatenate(parts_a), mu,
                      jnp.concatenate(gaps), jnp.concatenate(rows), over, RowLayout(0, cap_l, cap_c))


def reduced_problem(system, factors, loops, Jb, rows):
    """(G, g, Ψ_a, X) of the one-sided rows with the loops eliminated (:func:`eliminate_bilateral`):
    Ψ_a = H⁻¹ J_aᵀ, X = G_bb⁻¹ G_ba, G = J_a Ψ_a − G_ab X (the Delassus matrix of the loop-constrained system),
    g = the rows' free velocities at v_c."""
    Psi_a = _minv_times(system, factors, rows.J.T)
    Gaa = matmul(rows.J, Psi_a)
    if Jb.shape[0] == 0:
        return Gaa, Psi_a, jnp.zeros((0, rows.J.shape[0]), Gaa.dtype)
    a = loops.active.astype(Gaa.dtype)
    Gba = matmul(Jb, Psi_a) * a[:, None]
    X = cho_solve(loops.factor, Gba)
    return Gaa - matmul(Gba.T, X), Psi_a, X


def constrained_response(Psi_a, loops, X, w):
    """P J_aᵀ w = Ψ_a w − Ψ_b X w: the generalized velocity (or displacement) that impulses w on the buffer's rows
    produce with the loops closed (:func:`eliminate_bilateral`, :func:`reduced_problem`)."""
    out = matmul(Psi_a, w)
    return out - matmul(loops.Psi, matmul(X, w)) if X.shape[0] else out


def _advance(system, q, v, dt):
    """q ⊕ dt v per module, normalised (unit quaternions)."""
    return tuple(normalize_configuration(m, integrate_configuration(m, qk, vk, dt))
                 for m, qk, vk in zip(system.modules, q, v))


def normal_rows(layout):
    """Static indices of the one-sided rows and contact normals of a buffer's :class:`~.ncp.RowLayout`."""
    return np.concatenate([layout.n_bilateral + np.arange(layout.n_unilateral),
                           layout.contact_start + 3 * np.arange(layout.n_contacts)]).astype(np.int32)


def closes_loops(loops, correction):
    """Whether the step closes loops on the position level (static): it has loop or coupling rows, and
    ``correction.loops`` and ``max_step`` are not 0."""
    return bool(loops.Psi.shape[1]) and float(correction.loops) > 0 and float(correction.max_step) > 0


def position_projection(system, state_next, t_next, rows, loops, G, Psi_a, X, gap_next, correction):
    """Step 5 (:mod:`.position_correction`): the displacement Δq = Δq_b + P J_nᵀ μ of q⁺ (``state_next``) that closes
    the loops' and couplings' position error Φ_b(q⁺) (equalities, ``correction.loops``) and moves the buffer's
    violated normal rows out (one-sided) in one projection, with the step's loop elimination ``loops``
    (:func:`eliminate_bilateral`) and reduced Delassus matrix ``G`` (:func:`reduced_problem`, Ψ_a, X); ``gap_next``
    the buffer's normal rows' gaps at q⁺ to first order, d + dt J_n v⁺ (:func:`normal_rows`). Φ_b(q⁺) is one
    kinematics pass at q⁺ (skipped when the step does not close loops, :func:`closes_loops`).

    Differentiated through Φ_b(q⁺): its derivative, −Ψ_b G_bb⁻¹ J_b dq⁺, projects a perturbation of q⁺ onto the
    loops' tangent space, as the exact projection's does (with Φ_b(q⁺) stopped, a rollout's derivative through a
    four-bar differed from central differences by 4e-5 relatively; tests/test_contact_loops.py). The one-sided
    rows' targets (the gaps) are not differentiated (``stop_gradient``, as before: a drift removal, zero while
    nothing penetrates), nor the chord iteration that follows (:func:`close_loops`)."""
    normal = normal_rows(rows.layout)
    gap_n, dq_b = gap_next, None
    if closes_loops(loops, correction):
        phi = bilateral_errors(system, state_next, t_next)[0]       # its velocity part is not used (not computed)
        r_b = loop_targets(phi, loops.active, correction)
        dq_b = matmul(loops.Psi, cho_solve(loops.factor, r_b))
        gap_n = gap_n + matmul(rows.J[normal], jax.lax.stop_gradient(dq_b))
    mu = correction_multipliers(*jax.lax.stop_gradient((G[normal][:, normal], gap_n)), rows.active[normal],
                                correction)
    dq = constrained_response(Psi_a, loops, X, jnp.zeros(rows.layout.size, G.dtype).at[normal].set(mu))
    return dq if dq_b is None else dq + dq_b


def close_loops(system, state, t, loops, correction):
    """q of ``state`` with its loops' and couplings' position error Φ_b reduced by
    :data:`~.position_correction.LOOP_ITERATIONS` iterations of the chord method (simplified Newton; Ortega &
    Rheinboldt, "Iterative Solution of Nonlinear Equations in Several Variables", 1970): q ← q ⊕ Ψ_b G_bb⁻¹
    r_b(Φ_b(q)) with the step's factored G_bb (:func:`eliminate_bilateral`). After the step's projection
    (:func:`position_projection`, whose Jacobian is the one at the step's start) each iteration divides the error by
    about 1/(dt |v| κ), κ the loops' curvature (a fixed count, no test: one kinematics pass each, the same cost in
    every scenario of a batch). Not differentiated (what it moves is about dt |v| κ of the projection's own
    correction)."""
    Psi, factor, active, q, v, t = jax.lax.stop_gradient((loops.Psi, loops.factor, loops.active, tuple(state.q),
                                                          tuple(state.v), t))
    for _ in range(LOOP_ITERATIONS):
        phi = jnp.where(active, bilateral_errors(system, SystemState(q, v), t)[0], 0.0)
        dq = matmul(Psi, cho_solve(factor, loop_targets(phi, active, correction)))
        q = _advance(system, q, _split_v(system, dq), 1.0)
    return tuple(qk + jax.lax.stop_gradient(x - qk) for qk, x in zip(state.q, q))     # q's derivative kept


def validate_warm_start(lam_prev, layout, where="contact_step"):
    """A named error for a warm start ``lam_prev`` that is not one impulse per row of the step's
    :class:`~.ncp.RowLayout` (its static shape: checked while tracing too); a wrong length would be gathered from
    silently (JAX clamps out-of-range indices)."""
    shape = jnp.shape(lam_prev)
    if shape != (layout.size,):
        raise validation.ArgumentError(
            f"{where}: lam_prev (the warm start, the previous step's impulses) has shape {shape}, needs "
            f"({layout.size},): one impulse per row of row_layout(system) ({layout.n_bilateral} loop and coupling "
            f"rows, {layout.n_unilateral} limit rows, 3 x {layout.n_contacts} contact rows)")
    return lam_prev


def contact_step(system, q, v, t, dt, lam_prev, forces=(), tau=None, active_contacts=None,
                 settings=ContactSettings()):
    """One velocity-level step (module docstring): returns (q⁺, v⁺, :class:`StepReport`). ``lam_prev``: the
    previous step's impulses (warm start), zeros at the first step; ``active_contacts``: None or a (n_contacts,)
    boolean switch of the system's (bilateral) contacts — grasps, welds — at this step.

    The cost follows the rows that can touch: the loops are solved on their own (:func:`eliminate_bilateral`),
    the one-sided rows and contact slots within reach are gathered into a fixed-capacity buffer
    (:func:`active_rows`), and only they enter the NCP (:func:`~.ncp.solve_ncp`, whose loop leaves at once when
    none is active). The impulses are reported in the full static layout (:func:`row_layout`)."""
    dtype = q[0].dtype
    layout = row_layout(system)
    validate_warm_start(lam_prev, layout)
    state = SystemState(tuple(q), tuple(v))
    Q = generalized_forces(system, forces, state, t)
    taus = [jnp.zeros(m.nv, dtype) for m in system.modules] if tau is None else [jnp.asarray(x, dtype) for x in tau]
    kinematics = step_kinematics(system, state)
    v_free, factors = free_velocity(kinematics, v, taus, Q, dt)
    Jb, gb = bilateral_rows(system, state, v_free, t, dt, settings.baumgarte)
    loops = eliminate_bilateral(system, factors, Jb, gb, _bilateral_active(system, active_contacts, dtype), v_free,
                                settings.ncp.prox)
    cand = candidates(system, state, dt, settings, kinematics.points)
    rows = active_rows(system, cand, _flat_v(system, v), loops.velocity, dt, settings)
    G, Psi_a, X = reduced_problem(system, factors, loops, Jb, rows)
    sol = solve_ncp(G, rows.g, rows.layout, rows.friction, rows.active, jnp.asarray(lam_prev, dtype)[rows.rows],
                    settings.ncp)
    lam_b = loops.impulses - (matmul(X, sol.lam) if Jb.shape[0] else 0.0)
    v_flat = loops.velocity + constrained_response(Psi_a, loops, X, sol.lam)
    v_new = _split_v(system, v_flat)
    q_new = _advance(system, q, v_new, dt)
    gap_next = rows.gap + dt * matmul(rows.J[normal_rows(rows.layout)], v_flat)     # the normal rows' d⁺
    dq = position_projection(system, SystemState(q_new, v_new), t + dt, rows, loops, G, Psi_a, X, gap_next,
                             settings.correction)
    q_new = _advance(system, q_new, _split_v(system, dq), 1.0)
    if closes_loops(loops, settings.correction):
        q_new = close_loops(system, SystemState(q_new, v_new), t + dt, loops, settings.correction)
    lam = jnp.zeros(layout.size, dtype).at[:layout.n_bilateral].set(lam_b).at[rows.rows].add(sol.lam)
    sigma = jnp.zeros(layout.size, dtype).at[rows.rows].add(sol.sigma)
    n_slots = layout.n_contacts
    if n_slots:
        gaps_c, points, frames = cand.slots.gap, cand.slots.point, cand.slots.frame
    else:
        gaps_c, points, frames = jnp.zeros(0, dtype), jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype)
    pair_overflow = cand.slots.overflow if n_slots else jnp.zeros((), bool)
    report = StepReport(lam, sigma, jnp.concatenate([cand.limit_gap, gaps_c]), points, frames, sol.primal, sol.dual,
                        sol.complementarity, sol.iterations, sol.converged, rows.overflow, pair_overflow)
    return q_new, v_new, report


# ----------------------------------------------------------------------------- rollouts
def _slot_impulses(impulses, layout):
    """(n_out, n_slots, 3) the contact slots' [λ_n, λ_t1, λ_t2] of stored impulses (n_out, m) (any n_slots, 0 too)."""
    impulses = jnp.asarray(impulses)
    return impulses[:, layout.contact_start:].reshape(impulses.shape[0], layout.n_contacts, 3)


class ContactTrajectory(NamedTuple):
    """A velocity-level rollout: stored states and, per stored state, the step that produced it."""
    t: jnp.ndarray
    q: tuple
    v: tuple
    impulses: jnp.ndarray      # (n_out, m)
    gaps: jnp.ndarray          # (n_out, n_limit_rows + n_slots) gaps at each stored state, the initial one first
    points: jnp.ndarray        # (n_out, n_slots, 3) contact points of the step that produced each state
    frames: jnp.ndarray        # (n_out, n_slots, 3, 3)
    primal: jnp.ndarray        # (n_out,) worst over the steps since the previous stored state
    dual: jnp.ndarray
    complementarity: jnp.ndarray
    first_nonfinite: jnp.ndarray   # step index where the state first became non-finite, −1 if never
    dt: jnp.ndarray = None         # the step (an impulse over dt is the mean force of its step)
    iterations_max: jnp.ndarray = None   # (n_out,) most loop trips of a step's solve since the previous stored state
    iterations_mean: jnp.ndarray = None  # (n_out,) their mean over those steps
    converged: jnp.ndarray = None        # (n_out,) bool: every one of those steps within NCPSettings.tolerance
    overflow: jnp.ndarray = None         # (n_out,) bool: some step had more candidate rows than the buffer holds
    activations: tuple = ()              # per stateful Actuators element of ``forces``: (n_out, nu) activations
    pair_overflow: jnp.ndarray = None    # (n_out,) bool: some step had more collision pairs of one kind within reach
    #                                      than the broad phase computes (``ContactSettings.broad_phase``)

    def contact_forces(self, system):
        """(n_out, n_slots, 3) world-axes mean force on geom 2 by geom 1 of every contact slot over the step that
        produced each stored state: (λ_n n + λ_t1 t1 + λ_t2 t2)/dt (zeros at the first state and where the slot
        does not touch)."""
        layout = row_layout(system)
        lam = _slot_impulses(self.impulses, layout)
        return jnp.einsum("tsk,tskj->tsj", lam, jnp.asarray(self.frames)) / self.dt

    def slip_speeds(self, system):
        """(n_out, n_slots) tangential speed (m/s) of geom 2's point relative to geom 1's at every slot, at each
        stored state (after the step that produced it: what Coulomb's law decides, zero where a slot sticks)."""
        def one(q, v):
            return jnp.linalg.norm(slot_relative_velocity(system, SystemState(q, v))[:, 1:], axis=-1)
        return jax.jit(jax.vmap(one))(tuple(self.q), tuple(self.v))

    def active_set(self, system, tol=0.0):
        """(n_out, n_slots) bool: the slots that carry an impulse (λ_n > tol) at each stored state."""
        layout = row_layout(system)
        lam = _slot_impulses(self.impulses, layout)
        return lam[:, :, 0] > tol


def _as_system_float(system, q0, v0):
    """q0 and v0 in the wider of their float type and the system's parameters' (a float32 state of a float64 system,
    x64 on, would otherwise meet float64 steps in the scan's carry)."""
    floats = [x.dtype for x in jax.tree.leaves(system) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)]
    dtype = jnp.result_type(jnp.asarray(q0[0]).dtype, *floats)
    return tuple(jnp.asarray(x, dtype) for x in q0), tuple(jnp.asarray(x, dtype) for x in v0)


def contact_rollout(system, q0, v0, dt, n_steps, decimation=1, t0=0.0, forces=(), tau=None,
                    contact_modes: Optional[Callable] = None, settings=ContactSettings(), mode_params=()):
    """``n_steps`` velocity-level steps (:func:`contact_step`) in a ``lax.scan``, storing every ``decimation``-th
    state (the initial one first). ``contact_modes``: None or a function (t, q, v, mode_params) → (n_contacts,)
    booleans that switches the system's bilateral contacts on and off; ``mode_params`` (any pytree of arrays) is
    traced, so a new schedule (release and regrasp times) or state-dependent rule recompiles nothing and batches
    under ``vmap``. Actuators with activation dynamics (:class:`~.actuation.Actuators`) start from their
    ``activation``, drive each step with it and advance it after the step (MuJoCo's ``mj_advance``,
    :func:`~.actuation.advance_activations`, with this rollout's dt); the trajectory's ``activations`` holds them
    at every stored state."""
    validate_contact_rollout(system, q0, v0, dt, n_steps, decimation, tau, settings)
    if contact_modes is not None:
        validate_contact_modes(system, contact_modes, q0, v0, mode_params, "contact_rollout")
    q0, v0 = _as_system_float(system, q0, v0)
    dtype = q0[0].dtype
    layout = row_layout(system)
    zeros = StepReport(jnp.zeros(layout.size, dtype), jnp.zeros(layout.size, dtype),
                       jnp.zeros(layout.n_unilateral + layout.n_contacts, dtype),
                       jnp.zeros((layout.n_contacts, 3), dtype), jnp.zeros((layout.n_contacts, 3, 3), dtype),
                       *(jnp.zeros((), dtype) for _ in range(3)), jnp.zeros((), jnp.int32), jnp.ones((), bool),
                       jnp.zeros((), bool), jnp.zeros((), bool))

    stateful = [i for i, el in enumerate(forces) if getattr(el, "stateful", False)]

    def with_acts(acts):
        out = list(forces)
        for i, a in zip(stateful, acts):
            out[i] = replace(out[i], activation=a, timestep=jnp.asarray(dt, dtype))
        return tuple(out)

    def step(carry, _):
        q, v, lam, k, bad, acts = carry
        t = t0 + k * dt
        active = None if contact_modes is None else contact_modes(t, q, v, mode_params)
        forces_k = with_acts(acts)
        q1, v1, rep = contact_step(system, q, v, t, dt, lam, forces_k, tau, active, settings)
        # activations advance after the step that used them (MuJoCo's mj_advance)
        advanced = advance_activations(system, forces_k, SystemState(tuple(q), tuple(v)), t, dt)
        acts1 = tuple(advanced[i].activation for i in stateful)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves((q1, v1))]))
        bad = jnp.where((bad < 0) & ~finite, k, bad)
        return (q1, v1, rep.impulses, k + 1, bad, acts1), rep

    def block(carry, _):
        carry, reps = jax.lax.scan(step, carry, None, length=decimation)
        last = jax.tree.map(lambda x: x[-1], reps)
        worst = [jnp.max(x) for x in (reps.primal, reps.dual, reps.complementarity)]
        last = last._replace(primal=worst[0], dual=worst[1], complementarity=worst[2],
                             iterations=jnp.max(reps.iterations), converged=jnp.all(reps.converged),
                             overflow=jnp.any(reps.overflow), pair_overflow=jnp.any(reps.pair_overflow))
        # the first step's gaps are those of the state the block starts from: the stored state before this one
        return carry, (carry[0], carry[1], last, jnp.mean(reps.iterations.astype(dtype)), reps.gaps[0], carry[5])

    acts0 = tuple(jnp.asarray(forces[i].activation, dtype) for i in stateful)
    init = (tuple(q0), tuple(v0), jnp.zeros(layout.size, dtype), jnp.zeros((), jnp.int32), -jnp.ones((), jnp.int32),
            acts0)
    carry, (qs, vs, reps, mean_iterations, gaps, acts) = jax.lax.scan(block, init, None,
                                                                      length=n_steps // decimation)
    gaps = jnp.concatenate([gaps, state_gaps(system, SystemState(carry[0], carry[1]), dt, settings)[None]])  # at
    #                                                                                  every stored state, as a step
    cat = lambda first, rest: jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)  # noqa: E731
    t = t0 + dt * decimation * jnp.arange(n_steps // decimation + 1, dtype=dtype)
    reps = cat(zeros, reps)
    return ContactTrajectory(t, cat(tuple(q0), qs), cat(tuple(v0), vs), reps.impulses, gaps, reps.points,
                             reps.frames, reps.primal, reps.dual, reps.complementarity, carry[4],
                             jnp.asarray(dt, dtype), reps.iterations, cat(jnp.zeros((), dtype), mean_iterations),
                             reps.converged, reps.overflow, cat(acts0, acts), reps.pair_overflow)
