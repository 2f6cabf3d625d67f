"""The built book as a reader sees it, in headless Chromium
(``scripts/check_browser.py``).

Runs after the book is built: ``python -m pytest tests/delivery/test_browser.py``,
reading the HTML from ``$ATTNBOOK_HTML_DIR`` (default ``_build/html``) and writing a
screenshot of every page to ``$ATTNBOOK_SCREENSHOT_DIR`` (default
``_build/screenshots``). Skipped when there is no built book; fails, saying what to
install, when Playwright or Chromium is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, load_check_browser

cb = load_check_browser()

HTML_DIR = cb.default_html_dir()
if not HTML_DIR.is_absolute():
    HTML_DIR = ROOT / HTML_DIR
PAGES = cb.book_pages(ROOT / "_toc.yml")

needs_build = pytest.mark.skipif(
    not (HTML_DIR / "index.html").is_file(),
    reason=f"no built book at {HTML_DIR} (build it with scripts/build-book.sh, or set "
    f"{cb.HTML_DIR_ENV})",
)


@pytest.fixture(scope="module")
def reports() -> dict[tuple[str, str], cb.PageReport]:
    """Every page at every viewport, checked once for the whole module."""
    if not (HTML_DIR / "index.html").is_file():
        pytest.skip(f"no built book at {HTML_DIR}")
    shots = cb.default_screenshot_dir(HTML_DIR)
    found = cb.check_book(HTML_DIR, shots, pages=PAGES)
    summary = cb.summarize(found)
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "report.json").write_text(
        json.dumps(
            {"summary": summary, "reports": [cb.asdict(r) for r in found]}, indent=1
        )
    )
    print("\n[attnbook] browser check:", json.dumps(summary, indent=1))
    return {(r.viewport, r.page): r for r in found}


@pytest.mark.parametrize("viewport", [v.name for v in cb.VIEWPORTS])
@pytest.mark.parametrize("page", PAGES)
def test_page_reads(reports, page: str, viewport: str) -> None:
    """No MathJax error or undefined macro, no overflow at desktop and laptop width,
    no clipped display, crushed table or figure over its caption at any width, every
    image and in-book link resolves, no console error, nothing fetched from outside
    the book."""
    report = reports[(viewport, page)]
    assert not report.problems, f"{page} at {viewport} width:\n  " + "\n  ".join(
        report.problems
    )


def test_pages_were_read(reports) -> None:
    """The check saw the book: every page typeset or had no math, and the counts are not
    zero."""
    summary = cb.summarize(list(reports.values()))
    assert summary["pages"] == len(PAGES)
    assert summary["formulas"] > 0, "no formula typeset on any page: MathJax never ran"
    assert summary["images"] > 0 and summary["links_internal_checked"] > 0
    for report in reports.values():
        assert report.height_px > 0 and Path(report.screenshot).is_file(), report.page


@needs_build
def test_math_renders_from_disk_without_network() -> None:
    """A page opened from disk (file://), every other request refused, typesets its math
    with the MathJax copy shipped in the build."""
    page = cb.first_page_with_math(HTML_DIR, PAGES)
    assert page is not None, "no page of the book has math"
    report = cb.check_offline_file(HTML_DIR, page)
    assert report.mathjax.startswith("3."), f"MathJax {report.mathjax!r} on {page}"
    assert report.formulas > 0 and not report.problems, report.problems


@needs_build
@pytest.mark.parametrize("viewport", cb.VIEWPORTS, ids=[v.name for v in cb.VIEWPORTS])
def test_paper_map_reads_and_its_links_land_on_statements(viewport) -> None:
    """The landing page's map is an inline SVG whose text reads at desktop and phone
    width; two of its nodes, clicked, land on their statements."""
    shots = cb.default_screenshot_dir(HTML_DIR)
    report = cb.check_paper_map(HTML_DIR, viewport, shots)
    print(f"\n[attnbook] paper map at {viewport.name}:", json.dumps(cb.asdict(report)))
    assert not report.problems, "\n  ".join(report.problems)
    assert report.nodes > 0 and report.edges > 0 and len(report.followed) == 2


@needs_build
@pytest.mark.parametrize("viewport", [cb.LAPTOP, cb.PHONE], ids=["laptop", "phone"])
def test_the_verdict_is_on_the_first_screen(viewport) -> None:
    """The landing page's first screen, at 1280 x 800 and 390 x 844, shows the tally of
    the badges, every claim that is not PASS with its reason, and what a build
    guarantees."""
    shots = cb.default_screenshot_dir(HTML_DIR)
    problems = cb.check_first_screen(HTML_DIR, viewport, shots)
    assert not problems, "\n  ".join(problems)


@needs_build
def test_paper_map_colours_claims_as_the_dashboard() -> None:
    """Every claim of the map has the colour of its badge in the claims dashboard."""
    page = (HTML_DIR / "intro.html").read_text()
    assert cb.map_colour_problems(page) == []


# Checks of the checker and of the sources, without a built book.


def test_every_shorthand_macro_is_defined() -> None:
    """Every ``\\b<letter>`` macro written in a chapter's text is defined for MathJax in
    ``_config.yml`` (an undefined one shows as red ``\\bW`` in the browser)."""
    import re

    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    defined = set(config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"])
    used: dict[str, str] = {}
    for path in [
        ROOT / "intro.md",
        *sorted((ROOT / "chapters").glob("*.md")),
        *sorted((ROOT / "chapters").glob("*.ipynb")),
    ]:
        text = path.read_text()
        if path.suffix == ".ipynb":
            cells = json.loads(text)["cells"]
            text = "\n".join(
                "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
            )
        for name in re.findall(r"\\(b[A-Za-z])(?![A-Za-z])", text):
            used.setdefault(name, path.name)
    missing = {name: where for name, where in used.items() if name not in defined}
    assert not missing, f"macros used but not defined in _config.yml: {missing}"


def test_check_link(tmp_path: Path) -> None:
    """A link resolves only to an existing file and, with a fragment, an existing id."""
    (tmp_path / "a.html").write_text('<h1 id="top">A</h1><a name="old"></a>')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<p>B</p>")
    base = "http://127.0.0.1:1/"
    page = base + "a.html"
    assert cb.check_link(tmp_path, base, page, base + "a.html#top", set()) is None
    assert cb.check_link(tmp_path, base, page, base + "a.html#old", set()) is None
    assert cb.check_link(tmp_path, base, page, base + "sub/", set()) is None
    assert "no file" in cb.check_link(tmp_path, base, page, base + "b.html", set())
    assert "no anchor" in cb.check_link(
        tmp_path, base, page, base + "a.html#gone", set()
    )
    # An id made by a script on the page itself counts for links within that page.
    assert cb.check_link(tmp_path, base, page, base + "a.html#live", {"live"}) is None


def test_book_pages_follow_the_toc() -> None:
    pages = cb.book_pages(ROOT / "_toc.yml")
    assert pages[0] == "intro.html" and len(pages) == len(set(pages))
    assert all(p.endswith(".html") for p in pages)


def test_page_assets_drops_repeated_scripts() -> None:
    """The extension keeps the first of two identical inline scripts and every distinct
    one."""
    from sphinx.builders.html._assets import _JavaScript

    from _ext import page_assets

    scripts = [
        _JavaScript("_static/a.js"),
        _JavaScript(None, body="const X = 1"),
        _JavaScript("", body="const X = 1"),
        _JavaScript("_static/b.js", defer="defer"),
    ]
    context = {"script_files": list(scripts)}
    page_assets.dedupe_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] == [scripts[0], scripts[1], scripts[3]]


CRUSHED_PAGE = """<!doctype html><html><body style="margin:0">
<article style="width:300px">
<mjx-container display="true" style="display:block;overflow:hidden;height:18px">
<mjx-math style="display:block;height:54px">a = b<br>c = d<br>e = f</mjx-math>
</mjx-container>
<table style="width:300px;table-layout:fixed"><tr>{heads}</tr><tr>{cells}</tr></table>
<figure><img style="display:block;width:200px;height:80px;margin-bottom:-40px">
<figcaption>Figure 1. A caption under its image.</figcaption></figure>
<div style="width:500px">wider than the window</div>
</article></body></html>"""


def test_the_checker_finds_clipped_displays_crushed_tables_and_covered_captions():
    """The checks a reader's eye makes, on a page made to fail them: a display cut to
    its first line, a table of ten long headers in a narrow column, an image over its
    caption, a page wider than the window."""
    from playwright.sync_api import sync_playwright

    heads = "".join(f"<th>mean test accuracy of run {k}</th>" for k in range(10))
    page = CRUSHED_PAGE.format(heads=heads, cells="<td>0.5</td>" * 10)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=cb.find_chromium(), args=cb.CHROMIUM_ARGS
        )
        try:
            tab = browser.new_page(viewport={"width": 390, "height": 844})
            tab.set_content(page)
            found = tab.evaluate(
                cb._CLIPPED, [cb.OVERFLOW_TOLERANCE_PX, cb.MAX_HEADER_LINES]
            )
        finally:
            browser.close()
    kinds = [p.split(":")[0].split(" by ")[0] for p in found]
    assert "display equation clipped" in kinds, found
    assert any(k.startswith("table c") for k in kinds), found
    assert "figure image overlaps its caption" in kinds, found
    assert "the page is wider than the window" in kinds, found
