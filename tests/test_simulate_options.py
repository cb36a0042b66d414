"""simulate's settings in four named tuples (issue 54): at most ten parameters; every flat keyword it took before
still works for one release, with a MovedKeywordWarning naming the keyword and the group it went to, and gives the
same run as the group; an old keyword and its group both given is a TypeError; each group's defaults are
the defaults the flat keywords had; a wrong group is named; the run's warnings still point at the caller's line."""
import inspect
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import mrds_jax as mj
from mrds_jax import collision as C, system as S
from mrds_jax.system.options import MOVED, MovedKeywordWarning, regroup_moved_keywords
from mrds_jax.system.simulate import PenetrationWarning
from mrds_jax.validation import ArgumentError

# simulate's flat signature before the grouping (28 parameters), with its defaults
OLD_DEFAULTS = dict(decimation=1, integrator="rk4_compact", stabilisation="auto", solver=S.SolverSettings(),
                    method="direct", t0=0.0, check=True, tol=1e-6, cond_warn=1e8, path="auto", strict=False,
                    residual_warn=1e-6, cond_jump=1e3, t_end=None, rtol=1e-6, atol=1e-9, n_out=1, max_steps=100_000,
                    contact_settings=None, contact_modes=None, mode_params=(), unilateral=True)
KEPT = ("system", "state0", "dt", "n_steps", "forces", "tau")
GROUPS = {"integration": S.Integration, "checks": S.Checks, "output": S.Output, "contact": S.ContactStep}


def test_simulate_takes_at_most_ten_parameters_and_keeps_the_data_ones():
    params = inspect.signature(S.simulate).parameters
    assert len(params) <= 10
    assert list(params)[:6] == list(KEPT)
    assert {name: type(params[name].default) for name in GROUPS} == GROUPS


def test_every_old_keyword_has_a_place():
    assert set(MOVED) == set(OLD_DEFAULTS)
    assert len(OLD_DEFAULTS) + len(KEPT) == 28


@pytest.mark.parametrize("old", sorted(OLD_DEFAULTS))
def test_an_old_keyword_says_where_it_went_and_lands_there(old):
    group, field = MOVED[old]
    cls = GROUPS[group]
    assert getattr(cls(), field) == OLD_DEFAULTS[old]              # the group's default is the keyword's old one
    with pytest.warns(MovedKeywordWarning, match=rf"^simulate\({old}=\.\.\.\) moved: pass {group}={cls.__name__}"
                                                 rf"\({field}=7\)"), pytest.raises(ArgumentError):
        S.simulate(None, None, 1e-3, 10, **{old: 7})                # no system: the warning, then the first check
    assert regroup_moved_keywords({old: 7}) == {group: cls(**{field: 7})}


def test_several_old_keywords_are_named_together_by_group_and_merge_into_a_given_group():
    with pytest.warns(MovedKeywordWarning, match=r"simulate\(decimation=\.\.\., tol=\.\.\., n_out=\.\.\.\) moved: "
                                                 r"pass output=Output\(decimation=10, n_out=3\), checks=Checks\(tol=1e-08\)"), \
            pytest.raises(ArgumentError):
        S.simulate(None, None, 1e-3, 10, decimation=10, tol=1e-8, n_out=3)
    assert regroup_moved_keywords(dict(decimation=10, output=S.Output(n_out=3), checks=S.Checks(strict=True),
                                       tol=1e-8)) == dict(output=S.Output(decimation=10, n_out=3),
                                                          checks=S.Checks(strict=True, tol=1e-8))


def test_an_old_keyword_and_its_group_given_twice_is_an_error():
    with pytest.raises(TypeError, match=r"decimation= and output=Output\(decimation=\.\.\.\) both given"):
        S.simulate(None, None, 1e-3, 10, decimation=10, output=S.Output(decimation=5))


def test_positional_arguments_past_n_steps_are_named():
    with pytest.raises(TypeError, match=r"takes system, state0, dt and n_steps positionally, got 5 .*"
                                        r"output=Output\(decimation=\.\.\.\)"):
        S.simulate(None, None, 1e-3, 10, 5)                         # the old fifth parameter was decimation


@pytest.mark.parametrize("group, value, match", [
    ("output", 10, r"simulate: output must be an Output \(mrds_jax.system.Output\), got int"),
    ("checks", False, r"simulate: checks must be a Checks .* got bool"),
    ("integration", dict(integrator="rk4"), r"simulate: integration must be an Integration .* got dict"),
    ("contact", S.ContactSettings(), r"contact must be a ContactStep .* got ContactSettings; a ContactSettings goes in "
                                     r"ContactStep\(settings=\.\.\.\)"),
])
def test_a_wrong_group_is_named(group, value, match):
    with pytest.raises(ArgumentError, match=match):
        S.simulate(None, None, 1e-3, 10, **{group: value})


def free_body():
    b = mj.ModuleBuilder()
    b.add_link("body", None, "free", mass=1.0, inertia=0.01 * np.eye(3))
    b.add_frame("c", "body")
    return b.build()


def test_a_warning_of_the_run_names_the_callers_line_not_the_wrapper():
    """The wrapper that answers old keywords is one frame more between simulate and its caller: a warning of the
    run (a ball starting 5 cm inside the floor) still points at the line that called simulate."""
    system = S.build_system({"m": free_body()}, [], collision=[C.plane("floor"), C.sphere("ball", "m", "c", 0.1)])
    state = S.SystemState((jnp.array([0.0, 0.0, 0.05, 1.0, 0.0, 0.0, 0.0]),), (jnp.zeros(6),))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        S.simulate(system, state, 1e-3, 1)
    penetration = [w for w in caught if issubclass(w.category, PenetrationWarning)]
    assert penetration and penetration[0].filename == __file__
