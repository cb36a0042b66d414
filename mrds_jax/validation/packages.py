"""Optional packages: one table of what each is installed by, and :func:`require`, the check a feature that needs one
runs before it computes anything (a study that needs CMA-ES says so at its start, not after 17 minutes of
simulation)."""
import importlib.util

# import name -> (the extra of pyproject.toml that installs it, the name pip installs it by)
OPTIONAL_PACKAGES = {"mujoco": ("mjcf", "mujoco"), "pinocchio": ("pinocchio", "pin"), "cmaes": ("experiments", "cmaes"),
                     "mkdocs": ("docs", "mkdocs-material"), "mujoco.mjx": ("experiments", "mujoco-mjx")}


def install_hint(name):
    """"pip install 'mrds-jax[EXTRA]' (or pip install PACKAGE)" for an optional package's import name; the plain
    pip command for any other."""
    extra, pip_name = OPTIONAL_PACKAGES.get(name, (None, name))
    return f"pip install 'mrds-jax[{extra}]' (or pip install {pip_name})" if extra else f"pip install {pip_name}"


def missing(names):
    """The import names among ``names`` that are not installed (for a dotted name, its parent package missing
    counts as missing)."""
    out = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            out.append(name)
    return out


def require(names, what):
    """A :class:`ModuleNotFoundError` naming ``what`` needs them and how to install them, when any of the import
    names ``names`` is not installed; nothing otherwise. Call it before the work that needs them."""
    gone = missing([names] if isinstance(names, str) else names)
    if gone:
        hints = "; ".join(f"{n!r}: {install_hint(n)}" for n in gone)
        raise ModuleNotFoundError(f"{what} needs {', '.join(repr(n) for n in gone)}, which "
                                  f"{'is' if len(gone) == 1 else 'are'} not installed ({hints})", name=gone[0])
