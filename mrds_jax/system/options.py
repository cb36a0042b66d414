""":func:`~.simulate.simulate`'s settings in four small named tuples, as MuJoCo keeps its options in ``m.opt`` and
Pinocchio its solver settings in one object: :class:`Integration` (the time span, the integrator, the drift
stabilisation, the constraint solve), :class:`Checks` (what is checked and reported), :class:`Output` (which states
the trajectory stores) and :class:`ContactStep` (the velocity-level step of unilateral constraints). Every default
is the default the flat keyword of the same name had. ``simulate(..., <old keyword>=...)`` still runs, for one
release, with a :class:`MovedKeywordWarning` that says where the keyword went (:func:`accept_moved_keywords`):
scripts written against the flat signature — the project's independent benchmarks among them — keep working and are
told what to write; an old keyword given together with its group is a :class:`TypeError`.
"""
import functools
import warnings
from typing import Any, Callable, NamedTuple, Optional

from ..validation import ArgumentError
from .solve import SolverSettings


class Integration(NamedTuple):
    """How :func:`~.simulate.simulate` forms and steps the equations of motion.

    ``integrator``: "rk4_compact" (default), "rk4", "euler" or "dopri5" (error-controlled, to ``t_end``);
    ``stabilisation``: "auto" (Baumgarte with α = β = 1/(50 dt)), None (off) or a
    :class:`~.stabilisation.Stabilisation`; ``path``: "auto", "general" or "lilly" (:func:`~.acceleration.dynamics_path`);
    ``method``, ``solver``: the constraint solve's (:func:`~.dynamics.forward_dynamics`); ``t0`` the start time and
    ``t_end`` the end time (instead of ``n_steps``); ``rtol``, ``atol``, ``max_steps``: dopri5's tolerances and its
    cap on steps."""
    integrator: str = "rk4_compact"
    stabilisation: Any = "auto"
    path: str = "auto"
    method: str = "direct"
    solver: SolverSettings = SolverSettings()
    t0: Any = 0.0
    t_end: Any = None
    rtol: Any = 1e-6
    atol: Any = 1e-9
    max_steps: int = 100_000


class Checks(NamedTuple):
    """What :func:`~.simulate.simulate` checks outside a trace. ``enabled``: check the initial state and the run at
    all; ``tol``: the initial state's constraint errors allowed; ``cond_warn``: the condition number of Bᶜ that warns;
    ``cond_jump``: a condition (or residual) this many times its median over the run warns; ``residual_warn``: the
    solve's relative residual that warns; ``strict``: raise :class:`~.solve_report.SingularConfigurationError`
    instead of warning."""
    enabled: bool = True
    tol: float = 1e-6
    cond_warn: float = 1e8
    cond_jump: float = 1e3
    residual_warn: float = 1e-6
    strict: bool = False


class Output(NamedTuple):
    """Which states :func:`~.simulate.simulate` stores: every ``decimation``-th step of a fixed-step run (the first
    stored state is the initial one; ``n_steps`` must be a multiple), or with dopri5 ``n_out`` + 1 equally spaced
    states from ``t0`` to ``t_end``."""
    decimation: int = 1
    n_out: int = 1


class ContactStep(NamedTuple):
    """The velocity-level step that runs for systems with collision geometry, joint limits, ``modes`` or activation
    dynamics. ``settings``: its :class:`~.timestepping.ContactSettings` (None: the defaults); ``modes``: a function
    (t, q, v, mode_params) → one boolean per contact of the system, hashable, switching bilateral contacts on and off;
    ``mode_params``: its (traced) parameters; ``unilateral=False`` ignores the collision geometry and the limits (the
    exact acceleration-level path)."""
    settings: Optional[Any] = None
    modes: Optional[Callable] = None
    mode_params: Any = ()
    unilateral: bool = True


GROUPS = {"integration": Integration, "checks": Checks, "output": Output, "contact": ContactStep}

# the flat keywords simulate took before its settings were grouped: old keyword -> (group keyword, field)
MOVED = {
    "integrator": ("integration", "integrator"), "stabilisation": ("integration", "stabilisation"),
    "path": ("integration", "path"), "method": ("integration", "method"), "solver": ("integration", "solver"),
    "t0": ("integration", "t0"), "t_end": ("integration", "t_end"), "rtol": ("integration", "rtol"),
    "atol": ("integration", "atol"), "max_steps": ("integration", "max_steps"),
    "check": ("checks", "enabled"), "tol": ("checks", "tol"), "cond_warn": ("checks", "cond_warn"),
    "cond_jump": ("checks", "cond_jump"), "residual_warn": ("checks", "residual_warn"), "strict": ("checks", "strict"),
    "decimation": ("output", "decimation"), "n_out": ("output", "n_out"),
    "contact_settings": ("contact", "settings"), "contact_modes": ("contact", "modes"),
    "mode_params": ("contact", "mode_params"), "unilateral": ("contact", "unilateral"),
}


def _short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else "..."


def moved_keywords_message(where, kwargs):
    """The words of the error for the old flat keywords among ``kwargs``: where each one went, grouped, e.g.
    "simulate(decimation=...) moved: pass output=Output(decimation=10)"; None when there is none."""
    old = [k for k in kwargs if k in MOVED]
    if not old:
        return None
    groups = {}
    for k in old:
        group, field = MOVED[k]
        groups.setdefault(group, []).append(f"{field}={_short(kwargs[k])}")
    passes = ", ".join(f"{g}={GROUPS[g].__name__}({', '.join(fields)})" for g, fields in groups.items())
    names = sorted({GROUPS[g].__name__ for g in groups})
    return (f"{where}({', '.join(f'{k}=...' for k in old)}) moved: pass {passes} "
            f"({', '.join(names)} from mrds_jax.system)")


class MovedKeywordWarning(FutureWarning):
    """A flat keyword of :func:`~.simulate.simulate`'s old signature (:data:`MOVED`): it still works, for one
    release; the message says which group it belongs to."""


def regroup_moved_keywords(kwargs):
    """``kwargs`` with the old flat keywords of :data:`MOVED` folded into their groups (a group given as well keeps
    its other fields); a :class:`TypeError` when an old keyword and its group's same field are both given."""
    out = {k: v for k, v in kwargs.items() if k not in MOVED}
    for key in [k for k in kwargs if k in MOVED]:
        group, field = MOVED[key]
        current = out.get(group, GROUPS[group]())
        if group in kwargs and isinstance(current, GROUPS[group]) and getattr(current, field) != getattr(
                GROUPS[group](), field):
            raise TypeError(f"simulate: {key}= and {group}={GROUPS[group].__name__}({field}=...) both given: "
                            f"pass it once, in {group}")
        out[group] = current._replace(**{field: kwargs[key]}) if isinstance(current, GROUPS[group]) else current
    return out


def accept_moved_keywords(fn):
    """``fn`` (a function with ``n_positional`` positional parameters and the four groups as keywords), taking the
    flat keywords of :data:`MOVED` for one release: each is folded into its group (:func:`regroup_moved_keywords`)
    with a :class:`MovedKeywordWarning` saying where it went. Positional arguments past ``n_steps`` are a
    :class:`TypeError` (the old fifth positional parameter, ``decimation``, would otherwise land in ``forces``)."""
    n_positional = 4

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if len(args) > n_positional:
            raise TypeError(f"{fn.__name__}() takes system, state0, dt and n_steps positionally, got {len(args)} "
                            "positional arguments: the rest are keywords (forces=, tau=) or in the settings "
                            "integration=Integration(...), checks=Checks(...), output=Output(decimation=...), "
                            "contact=ContactStep(...)")
        message = moved_keywords_message(fn.__name__, kwargs)
        if message is not None:
            kwargs = regroup_moved_keywords(kwargs)       # a keyword given twice is an error, not a warning first
            warnings.warn(message + "; the flat keywords will be removed in the next release", MovedKeywordWarning,
                          stacklevel=2)
        return fn(*args, **kwargs)
    return wrapper


def check_groups(where, **groups):
    """Each of ``groups`` (keyword → value) an instance of its named tuple (:data:`GROUPS`): an
    :class:`~mrds_jax.validation.ArgumentError` naming the keyword and the type otherwise (a ContactSettings passed
    as ``contact`` says it goes in ``ContactStep(settings=...)``)."""
    for name, value in groups.items():
        cls = GROUPS[name]
        if not isinstance(value, cls):
            hint = (f"; a {type(value).__name__} goes in ContactStep(settings=...)"
                    if name == "contact" and type(value).__name__ == "ContactSettings" else "")
            article = "an" if cls.__name__[0] in "AEIOU" else "a"
            raise ArgumentError(f"{where}: {name} must be {article} {cls.__name__} (mrds_jax.system.{cls.__name__}), got "
                                f"{type(value).__name__}{hint}")
