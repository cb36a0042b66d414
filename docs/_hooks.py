"""mkdocs hooks (mkdocs.yml ``hooks:``) that make the site read as a reader expects.

* ``--8<-- "experiments/out/NAME.md"`` on a line of its own includes a benchmark output as a sub-section of
  the heading it stands under (its ``#`` headings one level below that heading), with a blank line before
  every table (Markdown needs one; the scripts write tables right under a text line).
* MathJax (typesetting ``$...$`` written through ``pymdownx.arithmatex``) is served from the site itself: the
  file comes from the ``django-static-mathjax`` package (MathJax 3.2.2 as static files; no network at build or
  view time).
* The docstrings' Sphinx roles (``:class:`~mrds_jax.system.System```, ``:func:`simulate```), which the API
  generator prints as text, become links to the objects' anchors on the API pages (or plain code where no page
  documents the object).
"""
import importlib.util
import re
from pathlib import Path

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
_INCLUDE = re.compile(r'^--8<-- "(experiments/out/[^"]+\.md)"\s*$', re.M)
_HEADING = re.compile(r"^(#{1,6}) ", re.M)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc):<code>(~?)([^<]+?)</code>")
_ANCHOR = re.compile(r'id="(mrds_jax(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"')
MATHJAX = "mathjax/es5/tex-svg.js"
_LIST_ITEM = re.compile(r"^\s*(?:[*+-]|\d+\.) \S")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _is_table_row(line):
    return line.lstrip().startswith("|")


def separate_tables(text):
    """A blank line before every table that follows a line of text (else Markdown reads it as text)."""
    out = []
    for line in text.splitlines():
        if _is_table_row(line) and out and out[-1].strip() and not _is_table_row(out[-1]):
            out.append("")
        out.append(line)
    return "\n".join(out)


def separate_lists(lines):
    """A blank line before a list that follows a line of text (Python-Markdown, unlike GitHub, reads such a
    list as part of the paragraph: "Guarantees * Deterministic: ..."); fenced code is left alone."""
    out, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        prev = out[-1] if out else ""
        if (not fenced and _LIST_ITEM.match(line) and prev.strip() and not _LIST_ITEM.match(prev)
                and not prev.startswith((" ", "\t", "#", "|", ">")) and not _FENCE.match(prev)):
            out.append("")
        out.append(line)
    return out


class _ListSpacing(Preprocessor):
    def run(self, lines):
        return separate_lists(lines)


class ListSpacing(Extension):
    """:func:`separate_lists` as a Markdown preprocessor: pages and, through mkdocstrings, docstrings."""

    def extendMarkdown(self, md):
        md.preprocessors.register(_ListSpacing(md), "mrds_jax_list_spacing", 35)


def demote_headings(text, level):
    """Every ``#`` heading ``level`` levels deeper (at most ``######``)."""
    return _HEADING.sub(lambda m: "#" * min(6, len(m.group(1)) + level) + " ", text)


def included_output(text, level):
    """An experiments/out page as a sub-section at heading depth ``level`` (its header says the machine, the
    versions and the date once, above its tables)."""
    return separate_tables(demote_headings(text, level))


def _level_above(markdown, position):
    headings = _HEADING.findall(markdown[:position])
    return len(headings[-1]) if headings else 0


def include_outputs(markdown, root=ROOT):
    """Replace each experiments/out include line by :func:`included_output` of the file."""
    def one(m):
        return included_output((root / m.group(1)).read_text(), _level_above(markdown, m.start()))
    return _INCLUDE.sub(one, markdown)


def role_target(name, anchors, module=""):
    """The anchor a role's target names: itself, else the one anchor ending with it (``.scene.Scene``,
    ``simulate``), preferring anchors under ``module``; None if none or ambiguous."""
    name = name.strip().removesuffix("()")
    if name in anchors:
        return name
    tail = "." + name.lstrip(".")
    found = [a for a in anchors if a.endswith(tail)]
    near = [a for a in found if module and a.startswith(module + ".")]
    for candidates in (near, found):
        if len(candidates) == 1:
            return candidates[0]
    return None


def link_roles(html, anchors, page_module=""):
    """Sphinx roles in rendered HTML as links (``anchors``: {id: page URL relative to the site root}) to the
    documented object, shown by its last name as in Sphinx's ``~`` form; unknown targets as plain code."""
    def one(m):
        short, name = m.group(1) == "~" or m.group(2).startswith("."), m.group(2)
        target = role_target(name, anchors, page_module)
        label = f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"
        return f'<a href="{anchors[target]}#{target}">{label}</a>' if target else label
    return _ROLE.sub(one, html)


def _page_module(html):
    ids = _ANCHOR.findall(html)
    return min(ids, key=len) if ids else ""


# ----------------------------------------------------------------------------------------------- mkdocs events
def on_config(config):
    config.markdown_extensions.append(ListSpacing())
    return config


def on_page_markdown(markdown, page, config, files):
    return include_outputs(markdown)


def on_files(files, config):
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the docs typeset formulas with MathJax from the package django-static-mathjax: "
                           "pip install 'mrds-jax[docs]'")
    static = Path(list(spec.submodule_search_locations)[0]) / "static"
    files.append(File(MATHJAX, src_dir=str(static), dest_dir=config["site_dir"],
                      use_directory_urls=config["use_directory_urls"]))
    return files


def on_post_build(config):
    site = Path(config["site_dir"])
    pages = {p: p.read_text() for p in site.rglob("*.html")}
    anchors = {}
    for path, html in pages.items():
        url = "/" + path.relative_to(site).as_posix()
        for anchor in _ANCHOR.findall(html):
            anchors.setdefault(anchor, url)
    for path, html in pages.items():
        depth = len(path.relative_to(site).parts) - 1
        relative = {a: "../" * depth + u.lstrip("/") for a, u in anchors.items()}
        new = link_roles(html, relative, _page_module(html))
        if new != html:
            path.write_text(new)
