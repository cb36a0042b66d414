"""The equation → code index (docs/equations.md) is true, and every equation citation in the package names its
paper: the papers number their equations independently ("Lilly & Orin eq. 45" is a 6 x 6 solve, "Nguyen &
Pooran eq. 45" the CKCM equations of motion)."""
import importlib
import inspect
import pathlib
import re

import pytest

import mrds_jax

ROOT = pathlib.Path(mrds_jax.__file__).parent
INDEX = ROOT.parent / "docs" / "equations.md"
PAPERS = ("Bonaventura", "Lilly & Orin", "Nguyen & Pooran", "Featherstone", "Golub & Pereyra", "Hairer et al.")
ROW = re.compile(r"^\| ((?:" + "|".join(map(re.escape, PAPERS)) + r") eq\. [^|]+?) \| [^|]+ \| `([\w.]+)` \|$", re.M)
CITATION = re.compile(r"(?<![\w.])eqs?\. ?\(?\d")
PREFIX = re.compile(r"(?:" + "|".join(map(re.escape, PAPERS)) + r") $")


def resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


ROWS = ROW.findall(INDEX.read_text())


def test_the_index_has_rows_for_every_paper():
    assert len(ROWS) >= 40
    assert {next(p for p in PAPERS if cite.startswith(p)) for cite, _ in ROWS} == set(PAPERS)
    lines = [ln for ln in INDEX.read_text().splitlines() if ln.startswith("| ") and " eq. " in ln.split("|")[1]]
    assert len(lines) == len(ROWS)          # no table row that the pattern misses


@pytest.mark.parametrize("cite,where", ROWS, ids=[f"{c} -> {w}" for c, w in ROWS])
def test_indexed_object_exists_and_cites_the_equation(cite, where):
    obj = resolve(where)
    doc = inspect.getdoc(obj) or ""
    assert cite in " ".join(doc.split()), f"{where}'s docstring does not cite {cite!r}"


SPLIT = re.compile(r"(?<![\w.])eqs?\.$")      # a citation whose number went to the next line


def uncited(path, root=ROOT.parent):
    out = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        starts = [m.start() for m in CITATION.finditer(line)]
        split = SPLIT.search(line.rstrip())
        if split and n < len(lines) and re.match(r"\(?\d", lines[n].lstrip()):
            starts.append(split.start())
        if any(not PREFIX.search(line[:s]) for s in starts):
            out.append(f"{path.relative_to(root)}:{n}: {line.strip()[:100]}")
    return out


def test_every_citation_names_its_paper():
    files = sorted(ROOT.rglob("*.py"))
    assert any(p.relative_to(ROOT).parts[0] == "ckcm" for p in files)
    assert [u for p in files for u in uncited(p)] == []


def test_every_citation_in_the_docs_names_its_paper():
    """The documentation pages too; docs/algorithm_notes.md is exempt: it digests one paper per section, whose
    heading names it."""
    pages = [p for p in sorted((ROOT.parent / "docs").rglob("*.md")) if p.name != "algorithm_notes.md"]
    assert len(pages) > 10
    assert [u for p in pages for u in uncited(p)] == []


def test_every_citation_in_the_notebooks_names_its_paper():
    notebooks = sorted((ROOT.parent / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 4
    assert [u for p in notebooks for u in uncited(p)] == []


def test_the_checker_flags_a_bare_number(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Solve (eq. 45) then Lilly & Orin eq. 46, Bonaventura eqs. 3-4\nand eq.7; Table 2, as in eq.\n'
                 '32-34 (Nguyen & Pooran eq.\n18)."""\n')
    assert uncited(f, root=tmp_path) == ['m.py:1: """Solve (eq. 45) then Lilly & Orin eq. 46, Bonaventura eqs. 3-4',
                                         'm.py:2: and eq.7; Table 2, as in eq.']
