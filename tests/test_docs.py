"""The documentation site builds with warnings as errors (``mkdocs build --strict``): every page, the API
reference generated from the docstrings (mkdocstrings), the benchmark tables included from experiments/out;
the README links it. What a reader sees is checked in the page text (outside code): no raw table rows, no raw
docstring roles (``:class:``), no unrendered ``$...$``; in a headless Chromium (where one is installed: marked
``browser``) MathJax, served from the site itself, typesets the formulas."""
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mrds_jax.viz.viewer import find_browser, rendered_dom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import _hooks  # noqa: E402  (the site's mkdocs hooks)

RAW = {"raw table row": re.compile(r"\|\s*:?-{3,}:?\s*\|"),
       "raw docstring role": re.compile(r":(?:class|func|meth|mod|attr|data|obj|exc):`?"),
       "unrendered formula": re.compile(r"\$[^$\s][^$\n]*\$|\\\(|\\\[")}
# how MathJax's SVG output shows a TeX error (merror) or an undefined macro (red text)
TEX_ERROR = re.compile(r'<g [^>]*(data-mml-node="merror"|fill="red")')
PAGES = ("benchmarks/index.html", "api/system/index.html", "api/ckcm/index.html", "api/montecarlo/index.html",
         "api/flexible/index.html", "algorithm_notes/index.html", "guide/optimize/index.html",
         "guide/monte_carlo/index.html", "system_files/index.html")


class _Text(HTMLParser):
    """The text a reader sees, without code, scripts and typeset formulas."""
    SKIP = {"code", "pre", "script", "style", "mjx-container", "svg"}

    def __init__(self):
        super().__init__()
        self.depth, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in self.SKIP

    def handle_endtag(self, tag):
        self.depth -= tag in self.SKIP and self.depth > 0

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def page_text(html):
    """The visible text of the article (the navigation, search and footer left out)."""
    article = html[html.find("<article"):html.rfind("</article>")] if "<article" in html else html
    parser = _Text()
    parser.feed(article)
    return " ".join(parser.parts)


def raw_markup(text):
    """{what: first offending snippet} for each kind of raw markup in ``text``."""
    return {what: text[max(0, m.start() - 40):m.end() + 40] for what, rx in RAW.items() if (m := rx.search(text))}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def test_docs_build_strict(site):
    for page in ("index.html", "getting_started/index.html", "api/system/index.html") + PAGES:
        assert (site / page).exists(), page
    assert (site / _hooks.MATHJAX).stat().st_size > 1_000_000            # served from the site, no CDN
    api = (site / "api" / "system" / "index.html").read_text()
    assert "forward_dynamics" in api and "Steps 2-4" in api          # generated from the docstrings
    assert re.search(r'<a href="[^"]*#mrds_jax\.system\.[A-Za-z_.]+"><code>', api)     # roles as links
    bench = (site / "benchmarks" / "index.html").read_text()
    assert "steps/s" in bench and bench.count("<table") >= 8
    assert not re.search(r"<p><em>jax \d+\.\d+\.\d+</em></p>", bench)       # no stray version line under tables
    assert re.search(r"<h4[^>]*>Engine bars on the CPU", bench)       # an included page's H1 under the H3


@pytest.mark.parametrize("page", PAGES)
def test_page_text_has_no_raw_markup(site, page):
    text = page_text((site / page).read_text())
    assert not {k: v for k, v in raw_markup(text).items() if k != "unrendered formula"}, page
    assert len(text) > 200


def test_raw_markup_detector_sees_each_kind():
    assert set(raw_markup("a |---|---| b :class:`X` c $x^2$ d")) == set(RAW)
    assert raw_markup("plain text, a | b, costs 5 $") == {}


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
@pytest.mark.parametrize("page", ["benchmarks/index.html", "api/system/index.html", "algorithm_notes/index.html"])
def test_pages_render_in_headless_chromium(site, page):
    """After the page's scripts ran: tables, links and typeset formulas, nothing raw in the text."""
    dom = rendered_dom(site / page)
    assert not raw_markup(page_text(dom)), page
    if page.startswith("algorithm_notes"):
        assert dom.count("<mjx-container") >= 50            # every $...$ of the notes typeset by MathJax
    assert not TEX_ERROR.search(dom), TEX_ERROR.search(dom)          # and no TeX error among them


def test_tex_error_detector_sees_both_kinds():
    assert TEX_ERROR.search('<g data-mml-node="mtext" fill="red" stroke="red">')
    assert TEX_ERROR.search('<g data-mml-node="merror" data-mjx-error="Missing close brace">')
    assert not TEX_ERROR.search('g[data-mml-node="merror"] > g { fill: red; }')        # MathJax's own CSS


def test_include_hook_separates_tables_and_demotes_headings():
    text = "# Title\n\njax 0.9.2\n## Part\ntext\n| a | b |\n|---|---|\n| 1 | 2 |\nafter"
    out = _hooks.included_output(text, 2)
    assert out.splitlines()[:5] == ["### Title", "", "jax 0.9.2", "#### Part", "text"]
    assert "text\n\n| a | b |" in out and "| 1 | 2 |\nafter" in out and "*jax" not in out


def site_pages(site):
    """The HTML pages of the built site (not the theme's or MathJax's files)."""
    return sorted(p for p in site.rglob("*.html") if not {"assets", "mathjax", "search"} & set(p.parts))


def article(html):
    """The page's article (its content, without the theme's navigation)."""
    return html[html.find("<article"):html.rfind("</article>")] if "<article" in html else html


def code_text(html):
    """The text of the article's code, inline and blocks (a docstring's indented block becomes one)."""
    return " ".join(re.sub(r"<[^>]+>", "", m.group(0))
                    for m in re.finditer(r"<(pre|code)\b.*?</\1>", article(html), flags=re.S))


def text_outside_math(html):
    """The article's visible text with code, scripts and the formulas MathJax typesets (arithmatex) removed."""
    article_html = re.sub(r'<(span|div) class="arithmatex">.*?</\1>', " ", article(html), flags=re.S)
    article_html = re.sub(r"<(pre|code|script|style)\b.*?</\1>", " ", article_html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", article_html)


RAW_TEX = re.compile(r"\\(?:[A-Za-z]+|[{}()\[\]])")


def test_no_raw_roles_or_latex_outside_math_on_any_page(site):
    """Every page: no Sphinx role (``:func:``) anywhere, code blocks included, and no backslash command
    (``\\mathfrak``) outside typeset maths and code."""
    found = {}
    for page in site_pages(site):
        html = page.read_text()
        text = text_outside_math(html)
        bad = RAW["raw docstring role"].findall(text + " " + code_text(html)) + RAW_TEX.findall(text)
        if bad:
            found[str(page.relative_to(site))] = bad[:5]
    assert not found, found
    assert len(site_pages(site)) > 25


def test_raw_role_detector_sees_roles_in_code_blocks_too():
    html = '<article><p>x</p><pre><code>Aₖᵀ F   :func:`point_forces`:  fₖ[s]</code></pre></article>'
    assert RAW["raw docstring role"].findall(code_text(html)) == [":func:`"]
    assert RAW["raw docstring role"].findall(text_outside_math(html)) == []


def test_raw_latex_detector_sees_it_outside_math_only():
    html = ('<article><p>B eq. 64 \\Psi^c <span class="arithmatex">\\(\\psi^c\\)</span> '
            '<code>\\n</code></p></article>')
    assert RAW_TEX.findall(text_outside_math(html)) == ["\\Psi"]


DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)\b")


def test_included_tables_are_dated_with_their_machine_and_not_older_than_the_readme():
    """Every experiments/out file a page includes says its machine and date in its header; none is older than the
    README's speed table."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- speed-table:start -->"):readme.index("<!-- speed-table:end -->")]
    newest = max(DATE.findall(table))
    included = [m for page in (ROOT / "docs").rglob("*.md")
                for m in re.findall(r'^--8<-- "(experiments/out/[^"]+\.md)"', page.read_text(), re.M)]
    assert included
    for name in included:
        head = "\n".join((ROOT / name).read_text().splitlines()[:6])
        dates = DATE.findall(head)
        assert dates and min(dates) >= newest, (name, dates, newest)
        assert re.search(r"\bcores?\b|CPUs?\b|GPU|H100|device", head), name


def test_code_blocks_fit_the_page(site):
    """No code line is cut off behind a scroll bar: the site's stylesheet wraps code lines, and the docs' code
    lines stay short enough to read wrapped."""
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"pre > code \{[^}]*white-space: pre-wrap", css)
    assert "stylesheets/extra.css" in (site / "index.html").read_text()
    long = {}
    for page in (ROOT / "docs").rglob("*.md"):
        inside = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                inside = not inside
            elif inside and len(line) > CODE_WIDTH:
                long.setdefault(str(page.relative_to(ROOT)), []).append(number)
    assert not long, long


CODE_WIDTH = 160


def test_list_hook_separates_lists_from_paragraphs_only():
    lines = ["Guarantees", "* one", "  more", "* two", "", "```", "x", "* not a list", "```", "a *b* c", "- c"]
    assert _hooks.separate_lists(lines) == ["Guarantees", "", "* one", "  more", "* two", "", "```", "x",
                                            "* not a list", "```", "a *b* c", "", "- c"]


def test_role_hook_links_known_objects_only():
    anchors = {"mrds_jax.viz.scene.Scene": "../viz/", "mrds_jax.system.simulate": "../system/"}
    html = _hooks.link_roles(":class:<code>~mrds_jax.viz.scene.Scene</code> :func:<code>simulate</code> "
                             ":func:<code>nowhere</code>", anchors)
    assert html == ('<a href="../viz/#mrds_jax.viz.scene.Scene"><code>Scene</code></a> '
                    '<a href="../system/#mrds_jax.system.simulate"><code>simulate</code></a> <code>nowhere</code>')


def test_readme_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert "mkdocs" in readme and "docs/getting_started.md" in readme
