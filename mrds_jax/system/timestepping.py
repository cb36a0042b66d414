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
5. penetration and limit violation left at q⁺ removed from q⁺ alone, v⁺ untouched
   (:func:`~.position_correction.correct_positions`, post-stabilisation; bounded per step).

Systems without unilateral rows keep the exact acceleration-level path of :mod:`.simulate`; as dt → 0 the two
give the same motion (tests/test_contact_step.py). Everything is shape-static (inactive rows are masked), pure, and
jit/vmap/grad-able; gradients go through :func:`~.ncp.solve_ncp`'s implicit derivative.
"""
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import validation
from ..dynamics.interface import (integrate_configuration, mass_matrix, normalize_configuration,
                                  open_chain_acceleration, point_jacobians, point_motion)
from ..spatial import skew
from ..spatial.linalg import cho_solve, cholesky, matmul
from .build import SystemState
from .couplings import coupling_errors, coupling_jacobian, constraint_rows
from .forces import generalized_forces
from .limits import limited_joints
from .ncp import NCPSettings, RowLayout, solve_ncp, validate_ncp_settings
from .position_correction import PositionCorrection, PositionRows, correct_positions
from .stabilisation import constraint_errors, constraint_jacobian


class ContactSettings(NamedTuple):
    """Settings of the velocity-level step: ``ncp`` the solver's (:class:`~.ncp.NCPSettings`); ``baumgarte`` β,
    the fraction of a loop's position error removed per step through the velocity (0 ≤ β ≤ 1); ``restitution_velocity``
    the closing speed below which restitution is not applied (avoids chatter at rest); ``margin``: a one-sided row
    or contact slot takes part in the step's problem when its gap, advanced by the free velocity over the step,
    is below ``margin`` (m, or rad for limits of revolute joints): d + dt min(ẋ_n,free, 0) < margin. Farther rows
    cannot touch within the step and are masked (which keeps the problem well scaled). ``correction``
    (:class:`~.position_correction.PositionCorrection`): how penetration and limit violation are removed from q
    after the velocity update (a fraction per step, at most ``max_step`` per step), never through the velocity."""
    ncp: NCPSettings = NCPSettings()
    baumgarte: float = 0.2
    restitution_velocity: float = 1e-3
    margin: float = 1e-3
    correction: PositionCorrection = PositionCorrection()


def validate_contact_settings(settings, where="simulate"):
    """Named errors (:class:`~mrds_jax.validation.ArgumentError`) for settings that cannot work, before anything
    compiles: a non-integer or < 1 stage or iteration count, a non-positive ρ, a negative proximal weight, β outside
    [0, 1], a negative margin or restitution threshold."""
    if not isinstance(settings, ContactSettings):
        raise validation.ArgumentError(f"{where}: contact_settings must be a ContactSettings, got "
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


def validate_position_correction(correction, where):
    """Named errors for a :class:`~.position_correction.PositionCorrection` that cannot work: β outside [0, 1], a
    negative or non-finite ``max_step``, a non-integer or < 1 sweep count."""
    if not isinstance(correction, PositionCorrection):
        raise validation.ArgumentError(f"{where}: ContactSettings.correction must be a PositionCorrection, got "
                                       f"{type(correction).__name__}")
    validation.positive(correction.fraction, "PositionCorrection.fraction", where, allow_zero=True)
    if float(correction.fraction) > 1.0:
        raise validation.ArgumentError(f"{where}: PositionCorrection.fraction is the part of a penetration or limit "
                                       f"violation removed per step, in [0, 1]; got {correction.fraction}")
    validation.positive(correction.max_step, "PositionCorrection.max_step", where, allow_zero=True)
    validation.count(correction.sweeps, "PositionCorrection.sweeps", where)


def validate_contact_modes(system, contact_modes, q0, v0, mode_params, where="simulate"):
    """Named errors for a ``contact_modes`` switch that cannot work, before anything compiles: not a function of
    the four arguments (t, q, v, mode_params); a system without bilateral contacts to switch; ``mode_params`` that
    are not numbers; a result (traced abstractly, :func:`jax.eval_shape`) that is not one boolean per contact
    (wrong count, shape (1, 1), 0-d, empty, or floats, which would be read as True when nonzero)."""
    import inspect
    if not callable(contact_modes):
        raise validation.ArgumentError(f"{where}: contact_modes must be a function (t, q, v, mode_params) -> one "
                                       f"boolean per contact, got {type(contact_modes).__name__}")
    try:
        inspect.signature(contact_modes).bind(0.0, q0, v0, mode_params)
    except TypeError as e:
        raise validation.ArgumentError(f"{where}: contact_modes must take four arguments (t, q, v, mode_params): "
                                       f"{e}") from None
    except ValueError:                   # no signature to inspect (a builtin): its call below decides
        pass
    n = len(system.contacts)
    if n == 0:
        raise validation.ArgumentError(f"{where}: contact_modes switches the system's bilateral contacts (grasps, "
                                       "welds), but this system has none")
    validate_mode_params(mode_params, where)
    out = jax.eval_shape(contact_modes, jnp.zeros((), q0[0].dtype), tuple(q0), tuple(v0), mode_params)
    if not hasattr(out, "shape") or out.shape != (n,) or not (jnp.issubdtype(out.dtype, jnp.bool_)
                                                            or jnp.issubdtype(out.dtype, jnp.integer)):
        got = (f"shape {out.shape} of {out.dtype}" if hasattr(out, "shape") else type(out).__name__)
        raise validation.ArgumentError(f"{where}: contact_modes must return one boolean per contact of the system "
                                       f"({n}: {list(system.contact_names)}), shape ({n},); got {got}")
    return contact_modes


def validate_mode_params(mode_params, where="simulate"):
    """``mode_params`` a pytree of numbers (arrays), the traced leaves of ``contact_modes``."""
    for leaf in jax.tree.leaves(mode_params):
        if isinstance(leaf, (jax.Array, jax.core.Tracer)):
            continue
        a = np.asarray(leaf)
        if not (np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.bool_)):
            raise validation.ArgumentError(f"{where}: mode_params must be numbers or arrays (traced leaves of "
                                           f"contact_modes), got {type(leaf).__name__} {leaf!r}")
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
    gaps: jnp.ndarray              # (n_limit_rows + n_slots,) gaps of one-sided rows and contact slots (m or rad)
    points: jnp.ndarray            # (n_slots, 3) contact points
    frames: jnp.ndarray            # (n_slots, 3, 3) contact frames, rows [n, t1, t2]
    primal: jnp.ndarray            # () solver residuals (:func:`~.ncp.ncp_residuals`)
    dual: jnp.ndarray
    complementarity: jnp.ndarray


# ----------------------------------------------------------------------------- the rows' static structure
class LimitRows(NamedTuple):
    """Static: per limited one-coordinate joint (module index, q index, v index, lower, upper, name)."""
    joints: tuple

    @property
    def n_rows(self):
        return 2 * len(self.joints)


def limit_rows(system):
    """The joint limits the modules keep (:func:`~.limits.limited_joints`) as one-sided rows (:class:`LimitRows`);
    joints with more than one coordinate (spherical, free) have no scalar limit and are skipped."""
    out = []
    for k, name, joint, _, lower, upper in limited_joints(system):
        topology = system.modules[k].topology
        j = topology.joint_names.index(joint)
        qs, vs = topology.q_slices[j], topology.v_slices[j]
        if qs.stop - qs.start == 1 and vs.stop - vs.start == 1:
            out.append((k, qs.start, vs.start, lower, upper, f"{name}.{joint}"))
    return LimitRows(tuple(out))


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


def bilateral_rows(system, state, v_free, t, dt, beta):
    """(J, g) of the loops and joint couplings (module docstring, step 2)."""
    dtype = state.q[0].dtype
    free = SystemState(state.q, v_free)
    J = jnp.concatenate([constraint_jacobian(system, state, t + dt), coupling_jacobian(system, state)])
    err = constraint_errors(system, free, t + dt)
    pos = constraint_errors(system, state, t + dt).position
    phi_v = jnp.concatenate(err.velocity) if err.velocity else jnp.zeros(0, dtype)
    phi_p = jnp.concatenate(pos) if pos else jnp.zeros(0, dtype)
    cp, _ = coupling_errors(system, state)
    _, cv = coupling_errors(system, free)
    g = jnp.concatenate([phi_v, cv]) + (beta / dt) * jnp.concatenate([phi_p, cp])
    return J, g


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


def limit_geometry(system, limits, q):
    """(J, gaps) of the joint limits at configuration ``q`` (per module): a lower row J = +e_j with gap q − q_lo and
    an upper row J = −e_j with gap q_hi − q per limited joint (module docstring, step 2)."""
    dtype = q[0].dtype
    nv = sum(m.nv for m in system.modules)
    offsets = np.cumsum([0] + [m.nv for m in system.modules])
    J = np.zeros((limits.n_rows, nv))
    gaps = []
    for r, (k, iq, iv, lo, hi, _) in enumerate(limits.joints):
        J[2 * r, offsets[k] + iv], J[2 * r + 1, offsets[k] + iv] = 1.0, -1.0
        gaps += [q[k][iq] - lo, hi - q[k][iq]]
    return jnp.asarray(J, dtype), (jnp.stack(gaps) if gaps else jnp.zeros(0, dtype))


def limit_rows_at(system, limits, state, v_free, dt):
    """(J, g, gaps, free normal velocities) of the joint limits (module docstring, step 2)."""
    J, gaps = limit_geometry(system, limits, state.q)
    vels = [sign * v_free[k][iv] for k, _, iv, _, _, _ in limits.joints for sign in (1.0, -1.0)]
    vels = jnp.stack(vels) if vels else gaps
    return J, vels + _gap_term(gaps, dt), gaps, vels


class SlotKinematics(NamedTuple):
    gap: jnp.ndarray       # (n,)
    point: jnp.ndarray     # (n, 3)
    frame: jnp.ndarray     # (n, 3, 3) rows [n, t1, t2]
    valid: jnp.ndarray     # (n,) bool
    friction: jnp.ndarray  # (n,)
    restitution: jnp.ndarray  # (n,)
    J: jnp.ndarray         # (3n, Σnv) rows [n, t1, t2] of the relative velocity of geom 2's point w.r.t. geom 1's


def _geom_frames(system, model, state):
    """Per geom: its world pose (R, p), the world position of the operational point it rides on, and that point's
    world-aligned Jacobian (6, Σnv) (zeros on the ground), through the module interface (:func:`point_motion`,
    :func:`point_jacobians`)."""
    from ..collision import geom_world_pose
    dtype = state.q[0].dtype
    nv = sum(m.nv for m in system.modules)
    offsets = np.cumsum([0] + [m.nv for m in system.modules])
    per_module = {}
    for gi, geom in enumerate(model.geoms):
        if geom.module is not None:
            per_module.setdefault(system.module_index(geom.module), []).append(gi)
    frames = [None] * len(model.geoms)
    for k, gis in per_module.items():
        module = system.modules[k]
        names = tuple(dict.fromkeys(model.geoms[gi].frame for gi in gis))
        zero_v = jnp.zeros(module.nv, dtype)
        pm = point_motion(module, state.q[k], zero_v, names)
        Jp = point_jacobians(module, state.q[k], names)
        for gi in gis:
            i = names.index(model.geoms[gi].frame)
            Jfull = jnp.zeros((6, nv), dtype).at[:, offsets[k]:offsets[k + 1]].set(Jp[i])
            R, p = geom_world_pose(model.geoms[gi], pm.R[i], pm.p[i])
            frames[gi] = (R, p, pm.p[i], Jfull)
    for gi, geom in enumerate(model.geoms):
        if geom.module is None:
            R, p = geom_world_pose(geom, jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype))
            frames[gi] = (R, p, p, jnp.zeros((6, nv), dtype))
    return frames


def geom_world_frames(system, state):
    """(R, p) world pose of every geom of ``system``'s collision model at ``state`` (geom order)."""
    return [(R, p) for R, p, _, _ in _geom_frames(system, collision_model_of(system), state)]


def slot_kinematics(system, state):
    """:class:`SlotKinematics` of every contact slot of ``system``'s collision model at ``state``."""
    from ..collision import contact_slots
    model = collision_model_of(system)
    frames = _geom_frames(system, model, state)
    slots = contact_slots(model, tuple((R, p) for R, p, _, _ in frames))
    rows = []
    start = 0
    for (i, j), n in zip(model.pairs, model.slots):
        for s in range(start, start + n):
            x = slots.point[s]

            def point_jacobian(gi):
                _, _, origin, Jf = frames[gi]
                return Jf[3:] - matmul(skew(x - origin), Jf[:3])   # v_x = v_o + ω × (x − o), o the point's origin

            rows.append(matmul(slots.frame[s], point_jacobian(j) - point_jacobian(i)))
        start += n
    J = jnp.concatenate(rows) if rows else jnp.zeros((0, sum(m.nv for m in system.modules)), state.q[0].dtype)
    return SlotKinematics(slots.gap, slots.point, slots.frame, slots.valid, slots.friction, slots.restitution, J)


def contact_rows_at(system, state, v, v_free, dt, settings):
    """(J, g, kinematics) of the contact slots (module docstring, step 2)."""
    kin = slot_kinematics(system, state)
    n = kin.gap.shape[0]
    vf = matmul(kin.J, _flat_v(system, v_free)).reshape(n, 3)
    v_before = matmul(kin.J, _flat_v(system, v)).reshape(n, 3)[:, 0]
    bouncing, bounce = newton_bounce(kin.gap, v_before, vf[:, 0], kin.restitution, dt, settings.restitution_velocity)
    gn = vf[:, 0] + jnp.where(bouncing, bounce, _gap_term(kin.gap, dt))
    g = jnp.concatenate([gn[:, None], vf[:, 1:]], axis=1).reshape(-1)
    return kin.J, g, kin, vf[:, 0]


def position_rows(system, q, J_fixed, fixed_active):
    """The :class:`~.position_correction.PositionRows` of ``system`` at configuration ``q``: the joint limits' rows
    and the contact slots' normal rows (their gaps and masks), with the bilateral rows ``J_fixed`` (mask
    ``fixed_active``) to be kept at J_b Δq = 0."""
    Jl, gaps_l = limit_geometry(system, limit_rows(system), q)
    parts = [(Jl, gaps_l, jnp.ones(gaps_l.shape[0], bool))]
    if n_contact_slots(system):
        kin = slot_kinematics(system, SystemState(tuple(q), tuple(jnp.zeros(m.nv, q[0].dtype) for m in system.modules)))
        parts.append((kin.J[0::3], kin.gap, kin.valid))
    J, gap, valid = (jnp.concatenate(x) for x in zip(*parts))
    return PositionRows(J, gap, valid, J_fixed, fixed_active)


def unilateral_violations(system, state):
    """min(d, 0) of every joint-limit row and every valid contact slot at ``state`` (m or rad; 0 where a row is not
    violated): what :func:`~.projection.make_consistent` drives to zero (penetration and limit violation), and what
    ``mrds-jax check`` reports."""
    dtype = state.q[0].dtype
    limits = limit_rows(system)
    parts = []
    for k, iq, _, lo, hi, _ in limits.joints:
        q = state.q[k][iq]
        parts += [q - lo, hi - q]
    out = [jnp.minimum(jnp.stack(parts), 0.0)] if parts else []
    if n_contact_slots(system):
        kin = slot_kinematics(system, state)
        out.append(jnp.where(kin.valid, jnp.minimum(kin.gap, 0.0), 0.0))
    return jnp.concatenate(out) if out else jnp.zeros(0, dtype)


def contact_gaps(system, state):
    """Per candidate pair of the collision model (by geom names): the smallest gap of its valid slots at ``state``
    (m; negative: penetration), as a dict — what ``mrds-jax check`` lists. Concrete states only."""
    model = collision_model_of(system)
    if model is None or not model.n_slots:
        return {}
    kin = slot_kinematics(system, state)
    gap, valid = np.asarray(kin.gap), np.asarray(kin.valid)
    out, start = {}, 0
    for (i, j), n in zip(model.pairs, model.slots):
        g = gap[start:start + n][valid[start:start + n]]
        out[f"{model.geoms[i].name}/{model.geoms[j].name}"] = float(g.min()) if g.size else float("inf")
        start += n
    return out


def start_violations(system, state, tol=1e-9):
    """The collision pairs that penetrate (by geom names, :func:`contact_gaps`) and the limited joints past a limit
    (by ``module.joint``) at a concrete ``state``, each with its depth (m or rad, > ``tol``), as two dicts: what
    :func:`~.simulate.simulate` warns about at the start and :func:`~.projection.make_consistent` resolves."""
    pairs = {name: -g for name, g in contact_gaps(system, state).items() if g < -tol}
    joints = {}
    for k, iq, _, lo, hi, name in limit_rows(system).joints:
        q = float(state.q[k][iq])
        depth = max(lo - q, q - hi)
        if depth > tol:
            joints[name] = depth
    return pairs, joints


# ----------------------------------------------------------------------------- one step
def _module_factors(system, q):
    return [cholesky(mass_matrix(m, qk)) for m, qk in zip(system.modules, q)]


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


def contact_step(system, q, v, t, dt, lam_prev, forces=(), tau=None, active_contacts=None,
                 settings=ContactSettings()):
    """One velocity-level step (module docstring): returns (q⁺, v⁺, :class:`StepReport`). ``lam_prev``: the
    previous step's impulses (warm start), zeros at the first step; ``active_contacts``: None or a (n_contacts,)
    boolean switch of the system's (bilateral) contacts — grasps, welds — at this step."""
    dtype = q[0].dtype
    state = SystemState(tuple(q), tuple(v))
    Q = generalized_forces(system, forces, state, t)
    taus = [jnp.zeros(m.nv, dtype) for m in system.modules] if tau is None else [jnp.asarray(x, dtype) for x in tau]
    v_free = tuple(vk + dt * open_chain_acceleration(m, qk, vk, tk + Qk)
                   for m, qk, vk, tk, Qk in zip(system.modules, q, v, taus, Q))
    beta = settings.baumgarte
    layout = row_layout(system)
    Jb, gb = bilateral_rows(system, state, v_free, t, dt, beta)
    Jl, gl, gaps_l, vn_l = limit_rows_at(system, limit_rows(system), state, v_free, dt)
    parts_J, parts_g = [Jb, Jl], [gb, gl]
    active = [_bilateral_active(system, active_contacts, dtype), _near(gaps_l, vn_l, dt, settings.margin)]
    if layout.n_contacts:
        Jc, gc, kin, vn_c = contact_rows_at(system, state, v, v_free, dt, settings)
        parts_J.append(Jc)
        parts_g.append(gc)
        active.append(jnp.repeat(kin.valid & _near(kin.gap, vn_c, dt, settings.margin), 3))
        mu, gaps_c, points, frames = kin.friction, kin.gap, kin.point, kin.frame
    else:
        mu, gaps_c = jnp.zeros(0, dtype), jnp.zeros(0, dtype)
        points, frames = jnp.zeros((0, 3), dtype), jnp.zeros((0, 3, 3), dtype)
    J, g, active = jnp.concatenate(parts_J), jnp.concatenate(parts_g), jnp.concatenate(active)
    factors = _module_factors(system, q)
    G, Psi = delassus(system, factors, J)
    sol = solve_ncp(G, g, layout, mu, active, lam_prev, settings.ncp)
    v_new = _split_v(system, _flat_v(system, v_free) + matmul(Psi, sol.lam))
    q_new = tuple(normalize_configuration(m, integrate_configuration(m, qk, vk, dt))
                  for m, qk, vk in zip(system.modules, q, v_new))
    q_new, _ = correct_positions(system, q_new, position_rows(system, q_new, Jb, active[:layout.n_bilateral]),
                                 settings.correction)
    report = StepReport(sol.lam, sol.sigma, jnp.concatenate([gaps_l, gaps_c]), points, frames, sol.primal, sol.dual,
                        sol.complementarity)
    return q_new, v_new, report


# ----------------------------------------------------------------------------- rollouts
class ContactTrajectory(NamedTuple):
    """A velocity-level rollout: stored states and, per stored state, the step that produced it."""
    t: jnp.ndarray
    q: tuple
    v: tuple
    impulses: jnp.ndarray      # (n_out, m)
    gaps: jnp.ndarray          # (n_out, n_limit_rows + n_slots)
    points: jnp.ndarray        # (n_out, n_slots, 3)
    frames: jnp.ndarray        # (n_out, n_slots, 3, 3)
    primal: jnp.ndarray        # (n_out,) worst over the steps since the previous stored state
    dual: jnp.ndarray
    complementarity: jnp.ndarray
    first_nonfinite: jnp.ndarray   # step index where the state first became non-finite, −1 if never
    dt: jnp.ndarray = None         # the step (an impulse over dt is the mean force of its step)

    def contact_forces(self, system):
        """(n_out, n_slots, 3) world-axes mean force on geom 2 by geom 1 of every contact slot over the step that
        produced each stored state: (λ_n n + λ_t1 t1 + λ_t2 t2)/dt (zeros at the first state and where the slot
        does not touch)."""
        layout = row_layout(system)
        lam = jnp.asarray(self.impulses)[:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)
        return jnp.einsum("tsk,tskj->tsj", lam, jnp.asarray(self.frames)) / self.dt

    def active_set(self, system, tol=0.0):
        """(n_out, n_slots) bool: the slots that carry an impulse (λ_n > tol) at each stored state."""
        layout = row_layout(system)
        lam = jnp.asarray(self.impulses)[:, layout.contact_start:].reshape(-1, layout.n_contacts, 3)
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
    under ``vmap``."""
    validate_contact_rollout(system, q0, v0, dt, n_steps, decimation, tau, settings)
    if contact_modes is not None:
        validate_contact_modes(system, contact_modes, q0, v0, mode_params, "contact_rollout")
    q0, v0 = _as_system_float(system, q0, v0)
    dtype = q0[0].dtype
    layout = row_layout(system)
    n_gaps = layout.n_unilateral + layout.n_contacts
    zeros = StepReport(jnp.zeros(layout.size, dtype), jnp.zeros(layout.size, dtype), jnp.zeros(n_gaps, dtype),
                       jnp.zeros((layout.n_contacts, 3), dtype), jnp.zeros((layout.n_contacts, 3, 3), dtype),
                       *(jnp.zeros((), dtype) for _ in range(3)))

    def step(carry, _):
        q, v, lam, k, bad = carry
        t = t0 + k * dt
        active = None if contact_modes is None else contact_modes(t, q, v, mode_params)
        q1, v1, rep = contact_step(system, q, v, t, dt, lam, forces, tau, active, settings)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves((q1, v1))]))
        bad = jnp.where((bad < 0) & ~finite, k, bad)
        return (q1, v1, rep.impulses, k + 1, bad), rep

    def block(carry, _):
        carry, reps = jax.lax.scan(step, carry, None, length=decimation)
        last = jax.tree.map(lambda x: x[-1], reps)
        worst = [jnp.max(x) for x in (reps.primal, reps.dual, reps.complementarity)]
        return carry, (carry[0], carry[1], last._replace(primal=worst[0], dual=worst[1], complementarity=worst[2]))

    init = (tuple(q0), tuple(v0), jnp.zeros(layout.size, dtype), jnp.zeros((), jnp.int32), -jnp.ones((), jnp.int32))
    carry, (qs, vs, reps) = jax.lax.scan(block, init, None, length=n_steps // decimation)
    cat = lambda first, rest: jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)  # noqa: E731
    t = t0 + dt * decimation * jnp.arange(n_steps // decimation + 1, dtype=dtype)
    reps = cat(zeros, reps)
    return ContactTrajectory(t, cat(tuple(q0), qs), cat(tuple(v0), vs), reps.impulses, reps.gaps, reps.points,
                             reps.frames, reps.primal, reps.dual, reps.complementarity, carry[4],
                             jnp.asarray(dt, dtype))
