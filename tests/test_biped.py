"""The four-bar biped of issue 25 item 6 (``data/biped_fourbar.xml``: floating base, ball hips, knees and ankles
driven through four-bar linkages — cranks pushing rods on universal joints, four ``connect`` loops — armature):
``load_mjcf`` reads it into one module, and its constrained q̈ equals Pinocchio's ``constraintDynamics`` on the
``to_pinocchio`` export (armature in ``model.armature``) at states that satisfy MuJoCo's equalities, 1e-8. The
timing of the same forward dynamics is ``experiments/biped_timing.py``."""
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.export import to_pinocchio
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.validation import ArgumentError
from mujoco_states import consistent_states

MODEL = Path(__file__).parent / "data" / "biped_fourbar.xml"


def test_biped_constrained_acceleration_equals_pinocchio_constraint_dynamics():
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # nothing in the file is left unread
        system, mapping = load_mjcf(model, return_mapping=True, recursion="level_scan")   # half the compile time
    module = system.modules[0]
    assert (module.nq, module.nv, len(system.contacts), system.connectivity.n_constraints) == (31, 28, 4, 12)
    assert float(np.asarray(module.params.armature).min()) == 0 and float(np.asarray(module.params.armature).max()) > 0
    rng = np.random.default_rng(20)
    states = consistent_states(model, mapping, rng, 3)
    taus = [(jnp.asarray(rng.uniform(-5, 5, module.nv)),) for _ in states]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *states), jax.tree.map(lambda *a: jnp.stack(a), *taus)
    qdd = np.asarray(jax.jit(jax.vmap(lambda st, tau: S.forward_dynamics(system, st, tau).qdd[0]))(*stacked))
    twin = to_pinocchio(system)
    np.testing.assert_array_equal(twin.model.armature, twin.v([np.asarray(module.params.armature)]))
    for k, (state, tau) in enumerate(zip(states, taus)):
        qp, vp = twin.q(state.q), twin.v(state.v)
        ddq, _, J = twin.constraint_dynamics(qp, vp, twin.v(tau))
        assert J.shape == (12, 28) and np.abs(J @ vp).max() < 1e-12
        np.testing.assert_allclose(twin.v([qdd[k]]), ddq, atol=1e-8 * max(1.0, np.abs(ddq).max()), rtol=0)


def test_load_mjcf_recursion_is_checked_before_anything_compiles():
    model = mujoco.MjModel.from_xml_path(str(MODEL))
    assert load_mjcf(model, recursion="level_scan").modules[0].topology.recursion == "level_scan"
    with pytest.raises(ArgumentError, match="unknown recursion 'fast'"):
        load_mjcf(model, recursion="fast")


def test_auto_recursion_of_a_large_looped_module_is_the_level_scan():
    """build_system gives a tree module on recursion="auto" with contact points and 12-23 links the level scan
    (dynamics/levels.py: loop_recursion); the same module without contacts, and a small looped one, keep "auto"."""
    from mrds_jax.dynamics.levels import LOOP_LEVEL_SCAN_MIN_LINKS
    system = load_mjcf(mujoco.MjModel.from_xml_path(str(MODEL)))
    module = system.modules[0]
    assert LOOP_LEVEL_SCAN_MIN_LINKS <= module.topology.n_links == 15 and module.topology.recursion == "level_scan"
    free = S.build_system({"pelvis": module.with_recursion("auto")}, [])
    assert free.modules[0].topology.recursion == "auto"
    fourbar = load_mjcf(Path(S.__file__).parents[1] / "data" / "systems" / "fourbar.xml")
    assert [m.topology.recursion for m in fourbar.modules] == ["auto", "auto"]
