"""No circle of imports between the files of ``mrds_jax``: not two files that import each other, not a longer round
(a → b → c → a), not a package's ``__init__`` that a module it imports imports back.

The imports are read as ``tests/test_layers.py`` reads them (``ast``: every ``import``/``from … import`` of every file,
those inside functions and ``if TYPE_CHECKING`` blocks too, relative ones resolved; ``from pkg import name`` is the
file ``pkg/name.py`` when there is one, else ``pkg/__init__.py``), as a graph of files; a circle is a strongly connected
component of more than one file (Tarjan), and the failure names its files and the imports that close it.
"""
from test_layers import FILES, PACKAGE, imported_modules, module_name


def import_graph(files, root=PACKAGE):
    """{module: {modules of ``files`` it imports}} over the package under ``root`` (a package's ``__init__`` is the
    package's own name)."""
    known = {module_name(p, root) for p in files}
    graph = {m: set() for m in known}
    for path in files:
        module = module_name(path, root)
        for _, target in imported_modules(path.read_text(), module, path.name == "__init__.py", known):
            if target in known and target != module:
                graph[module].add(target)
    return graph


def circles(graph):
    """The strongly connected components of ``graph`` with more than one node (Tarjan), each sorted, sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def describe(graph, circle, root=PACKAGE):
    """The files of a circle and the imports between them, one line each."""
    def path(m):
        p = root.joinpath(*m.split(".")[1:])
        return str((p / "__init__.py" if p.is_dir() else p.with_suffix(".py")).relative_to(root.parent))
    inside = set(circle)
    return "\n".join(f"  {path(m)} imports " + ", ".join(path(t) for t in sorted(graph[m] & inside)) for m in circle)


def test_no_two_files_import_each_other_around_any_circle():
    graph = import_graph(FILES)
    found = circles(graph)
    assert not found, "import circles between files of mrds_jax:\n" + "\n\n".join(describe(graph, c) for c in found)


def test_the_checker_finds_a_pair_a_longer_circle_and_an_init_circle(tmp_path):
    pkg = tmp_path / "mrds_jax"
    for folder in ("a", "b"):
        (pkg / folder).mkdir(parents=True)
    files = {"__init__.py": "", "c.py": "from .a import f\n",
             "a/__init__.py": "from .one import f\n",
             "a/one.py": "def f():\n    from . import two\n    return two\n",           # one ↔ two, in a function
             "a/two.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .one import f\n",
             "b/__init__.py": "from .x import g\nfrom . import v\n",
             "b/x.py": "from .y import h\ng = h\n", "b/y.py": "import mrds_jax.b.z\nh = 1\n",
             "b/z.py": "from mrds_jax.b import x\n",                                     # x → y → z → x
             "b/v.py": "from . import w\n", "b/w.py": "from .. import b\n"}              # b → v → w → b/__init__
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph = import_graph(sorted(pkg.rglob("*.py")), root=pkg)
    found = circles(graph)
    assert found == [["mrds_jax.a.one", "mrds_jax.a.two"], ["mrds_jax.b", "mrds_jax.b.v", "mrds_jax.b.w"],
                     ["mrds_jax.b.x", "mrds_jax.b.y", "mrds_jax.b.z"]]
    assert describe(graph, found[1], root=pkg).splitlines() == [
        "  mrds_jax/b/__init__.py imports mrds_jax/b/v.py", "  mrds_jax/b/v.py imports mrds_jax/b/w.py",
        "  mrds_jax/b/w.py imports mrds_jax/b/__init__.py"]
