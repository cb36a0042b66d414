"""One name per public function: the names that meant different things in different layers (three
``inverse_dynamics``, two ``simulate``, ``forward_kinematics``, ``check_state``, ``pose_error``) name one object
in all the package's public modules (every module and package whose dotted name has no ``_`` part)."""
import importlib
import inspect
import pathlib

import pytest

import mrds_jax

ROOT = pathlib.Path(mrds_jax.__file__).parent
NAMES = ("inverse_dynamics", "simulate", "forward_kinematics", "check_state", "pose_error")


def public_modules():
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(p.startswith("_") for p in parts):
            continue
        out.append(".".join(parts))
    return out


def owners(name):
    """{object's qualified origin: [modules exposing it]} for the functions/classes called ``name``."""
    found = {}
    for dotted in public_modules():
        obj = getattr(importlib.import_module(dotted), name, None)
        if obj is not None and (inspect.isfunction(obj) or inspect.isclass(obj) or callable(obj)):
            if inspect.ismodule(obj):
                continue
            found.setdefault(f"{getattr(obj, '__module__', '?')}.{name}", []).append(dotted)
    return found


@pytest.mark.parametrize("name", NAMES)
def test_one_object_per_name(name):
    found = owners(name)
    assert len(found) <= 1, found


def test_ckcm_names_say_what_they_are():
    """The CKCM package's own versions carry names of their own (they once shadowed the system layer's)."""
    from mrds_jax import ckcm
    assert not any(hasattr(ckcm, n) for n in NAMES)
    assert ckcm.newton_forward_kinematics is ckcm.kinematics.newton_forward_kinematics
    assert ckcm.simulate_tracking is ckcm.multibody.simulate_tracking
    assert callable(ckcm.multibody.check_ckcm_state) and callable(ckcm.multibody.payload_pose_error)


def test_the_contract_generic_is_not_the_system_inverse_dynamics():
    from mrds_jax.dynamics import interface
    assert not hasattr(interface, "inverse_dynamics")
    assert mrds_jax.inverse_dynamics is mrds_jax.system.inverse.inverse_dynamics
    assert "open_chain_inverse_dynamics" in interface.METHODS
