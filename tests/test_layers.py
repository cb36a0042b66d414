"""The layers of docs/guide/layers.md hold: no module of the package imports from a layer above its own.

Every ``import``/``from … import`` in every file of ``mrds_jax`` is read with ``ast`` (those inside functions and
``if TYPE_CHECKING`` blocks too), resolved to the absolute module it names, and its layer compared with the
importing module's. Imports within one layer are allowed (the packages of a layer may use each other); the
layer order is the one of layers.md, whose headings are checked against this table.
"""
import ast
import pathlib
import re

import mrds_jax

PACKAGE = pathlib.Path(mrds_jax.__file__).parent
DOCS = PACKAGE.parent / "docs" / "guide" / "layers.md"

# layer number -> the modules (by dotted prefix; the longest prefix wins) that form it, low to high
LAYERS = {
    0: ("mrds_jax.pytree", "mrds_jax.backend_flags", "mrds_jax.batching", "mrds_jax.console", "mrds_jax.validation"),
    1: ("mrds_jax.spatial",),
    2: ("mrds_jax.model",),
    3: ("mrds_jax.dynamics",),
    4: ("mrds_jax.contacts", "mrds_jax.collision"),
    5: ("mrds_jax.integrate",),
    6: ("mrds_jax.system",),
    7: ("mrds_jax.flexible", "mrds_jax.ckcm", "mrds_jax.montecarlo"),
    8: ("mrds_jax.loaders", "mrds_jax.sysfile", "mrds_jax.export", "mrds_jax.viz", "mrds_jax.examples",
        "mrds_jax.cli", "mrds_jax"),
}
# the packages layers.md names in its headings, in this order (layer 0 is the foundation paragraph)
DOCUMENTED = ["spatial", "model", "dynamics", "contacts", "collision", "integrate", "system", "flexible", "ckcm", "montecarlo",
              "loaders", "sysfile", "export", "viz", "examples"]


def layer_of(module):
    best = None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (layer, prefix)
    return None if best is None else best[0]


def module_name(path, root=PACKAGE):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source, module, is_package, known):
    """(line, absolute module) for every import of ``mrds_jax`` in ``source``; ``from pkg import name`` names
    ``pkg.name`` when that is a module of the package (``known``), else ``pkg``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((node.lineno, sub if sub in known else target))
    return [(line, name) for line, name in out if name == "mrds_jax" or name.startswith("mrds_jax.")]


def upward_imports(files, root=PACKAGE):
    """The violations among ``files`` (paths under ``root``): 'module:line imports target (layer a -> b)'."""
    known = {module_name(p, root) for p in files}
    bad = []
    for path in files:
        module = module_name(path, root)
        own = layer_of(module)
        for line, target in imported_modules(path.read_text(), module, path.name == "__init__.py", known):
            if target.startswith(module + ".") and path.name == "__init__.py":
                continue                                   # a package re-exporting its own submodules
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                bad.append(f"{module}:{line} imports {target} (layer {own} -> {theirs})")
    return bad


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert [module_name(p) for p in FILES if layer_of(module_name(p)) is None] == []


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports(FILES) == []


def test_the_checker_sees_imports_inside_functions(tmp_path):
    pkg = tmp_path / "mrds_jax"
    (pkg / "model").mkdir(parents=True)
    (pkg / "system").mkdir()
    for f in ("__init__.py", "model/__init__.py", "system/__init__.py", "system/build.py"):
        (pkg / f).write_text("")
    (pkg / "model" / "loader.py").write_text(
        "import numpy\nfrom ..spatial import rot_z\n\ndef load():\n    from ..system import build\n"
        "    import mrds_jax.system.build\n    return build\n")
    files = sorted(pkg.rglob("*.py"))
    assert upward_imports(files, root=pkg) == [
        "mrds_jax.model.loader:5 imports mrds_jax.system.build (layer 2 -> 6)",
        "mrds_jax.model.loader:6 imports mrds_jax.system.build (layer 2 -> 6)"]


def test_layers_page_lists_the_layers_in_this_order():
    headings = re.findall(r"^## .*$", DOCS.read_text(), flags=re.M)
    named = [m for h in headings for m in re.findall(r"`mrds_jax\.(\w+)`", h)]
    assert named == DOCUMENTED
    order = [layer_of(f"mrds_jax.{name}") for name in DOCUMENTED]
    assert order == sorted(order)
    for name in DOCUMENTED:
        assert (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file(), name

