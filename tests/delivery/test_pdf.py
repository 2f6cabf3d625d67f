"""The book as PDF (``scripts/build_pdf.py``), read back with pypdf.

Runs after the book is built, beside the browser test: ``python -m pytest
tests/delivery/test_pdf.py`` reads ``_build/pdf`` (or ``$ATTNBOOK_PDF_DIR``).
Skipped when there is no built PDF.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

from _ext.dashboard import CLAIMS

from conftest import ROOT, load_check_browser

cb = load_check_browser()
PDF_DIR = Path(os.environ.get("ATTNBOOK_PDF_DIR", ROOT / "_build" / "pdf"))
HTML_DIR = Path(os.environ.get("ATTNBOOK_HTML_DIR", PDF_DIR.parent / "html"))
BOOK = PDF_DIR / "attnbook.pdf"

pytestmark = pytest.mark.skipif(
    not BOOK.is_file(), reason=f"no built PDF at {BOOK} (scripts/build-book.sh)"
)

# What a page holds when its mathematics was not typeset: TeX commands as text, or
# MathJax's error box.
RAW_TEX = re.compile(
    r"\\(frac|mathbb|mathrm|boldsymbol|begin\{|end\{|sum_|alpha|langle)|\$\$|"
    r"Math input error|Undefined control sequence"
)


def _pages() -> list[str]:
    """The pages of the table of contents, as document names (``chapters/01_setup``)."""
    return [page.removesuffix(".html") for page in cb.book_pages(ROOT / "_toc.yml")]


def _title(docname: str) -> str:
    """The page's title as its source writes it (the first level-1 heading)."""
    path = ROOT / f"{docname}.md"
    if path.is_file():
        lines = path.read_text().splitlines()
    else:
        nb = json.loads((ROOT / f"{docname}.ipynb").read_text())
        lines = [
            line
            for cell in nb["cells"]
            if cell["cell_type"] == "markdown"
            for line in "".join(cell["source"]).splitlines()
        ]
    heading = next(line for line in lines if line.startswith("# "))
    return re.sub(r"[`*_]|\{[^}]*\}", "", heading[2:]).strip()


def _plain(text: str) -> str:
    """Text compared as words: ligatures split (NFKC), typographic quotes straight,
    soft hyphens dropped, white space single, lower case."""
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "")
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text).lower()


def _code(docname: str) -> str:
    """The page's code cells, white space made single (TeX in a plot label is code)."""
    path = ROOT / f"{docname}.ipynb"
    if not path.is_file():
        return ""
    nb = json.loads(path.read_text())
    code = " ".join(
        "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
    )
    return re.sub(r"\s+", " ", code)


@lru_cache(maxsize=None)
def _text(path: Path) -> list[str]:
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def _images(path: Path) -> int:
    from pypdf import PdfReader

    return sum(len(page.images) for page in PdfReader(path).pages)


def test_every_page_has_its_pdf_and_the_book_holds_them_all():
    from pypdf import PdfReader

    counts = {}
    for doc in _pages():
        part = PDF_DIR / f"{Path(doc).name}.pdf"
        assert part.is_file(), f"no PDF for {doc}"
        counts[doc] = len(PdfReader(part).pages)
        assert counts[doc] >= 1
        assert (HTML_DIR / "pdf" / part.name).is_file(), f"{part.name} not published"
    book = PdfReader(BOOK)
    front = len(book.pages) - sum(counts.values())
    assert 2 <= front <= 4, f"title page and contents take {front} pages"
    outline = [item.title for item in book.outline if not isinstance(item, list)]
    assert {"The model", "Theory", "Experiments"} <= set(outline)


def test_every_chapter_title_and_every_claim_is_in_the_book():
    text = _plain(" ".join(_text(BOOK)))
    for doc in _pages():
        title = _plain(_title(doc))
        assert title in text, f"title of {doc} ({title!r}) not found in the book PDF"
    dashboard = _plain(" ".join(_text(PDF_DIR / "intro.pdf")))
    for claim in CLAIMS:
        assert re.search(rf"\b{claim.id.lower()}\b", dashboard), claim.id


def test_no_page_shows_raw_tex_or_a_math_error():
    """No TeX as text outside code (a plot label's TeX in a printed code cell is the
    code itself), and no MathJax error."""
    for doc in _pages():
        code = _code(doc)
        for number, text in enumerate(_text(PDF_DIR / f"{Path(doc).name}.pdf"), 1):
            for found in RAW_TEX.finditer(text):
                start = text.rfind("\n", 0, found.start()) + 1
                end = text.find("\n", found.end())
                line = re.sub(r"\s+", " ", text[start : end if end >= 0 else None])
                assert line.strip() in code, (
                    f"{doc}, page {number}: {found.group(0)!r} in {line.strip()!r}"
                )


def test_the_figures_are_in_the_pdfs():
    """Every image of a page's HTML article is in its PDF (matplotlib figures are
    PNG images)."""
    for doc in _pages():
        page = (HTML_DIR / f"{doc}.html").read_text()
        article = page.split('<article class="bd-article"', 1)[-1]
        shown = len(re.findall(r"<img [^>]*src=\"[^\"]+\.png\"", article))
        found = _images(PDF_DIR / f"{Path(doc).name}.pdf")
        assert found >= shown, f"{doc}: {shown} figures on the page, {found} in its PDF"


def test_links_between_pages_stay_inside_the_book():
    """In the whole book, a link to another page goes to that page inside the PDF;
    no link anywhere points at the address the pages were printed from."""
    from pypdf import PdfReader

    internal = 0
    for path in [BOOK, *PDF_DIR.glob("*.pdf")]:
        for page in PdfReader(path).pages:
            for ref in page.get("/Annots", []) or []:
                action = ref.get_object().get("/A", {})
                uri = str(action.get("/URI", ""))
                assert "127.0.0.1" not in uri, f"{path.name}: link to {uri}"
                internal += path == BOOK and (
                    action.get("/S") == "/GoTo" or "/Dest" in ref.get_object()
                )
    assert internal >= 20, f"only {internal} internal links in the book PDF"


def test_every_page_offers_its_pdf_and_the_book_pdf():
    """The download menu of every page links the page's PDF and the whole book's; the
    landing page links the book's PDF in its text."""
    for doc in _pages():
        page = (HTML_DIR / f"{doc}.html").read_text()
        links = set(re.findall(r'href="((?:\.\./)*pdf/[^"]+\.pdf)"', page))
        names = {Path(link).name for link in links}
        assert {f"{Path(doc).name}.pdf", "attnbook.pdf"} <= names, (doc, links)
        for link in links:
            assert (HTML_DIR / Path(doc).parent / link).resolve().is_file(), link
    assert (
        'class="attnbook-book-pdf" href="pdf/attnbook.pdf"'
        in (HTML_DIR / "intro.html").read_text()
    )


def test_footers_bookmarks_and_no_hidden_code():
    """The book's footers carry its own page numbers (the ones its contents give), a
    page's PDF counts its pages ("k / n"); a page's bookmarks name each numbered
    section once; the code a chapter hides is not printed."""
    from pypdf import PdfReader

    book = _text(BOOK)
    for number, text in enumerate(book, 1):
        if number > 1:
            assert text.rstrip().endswith(str(number)), f"book page {number}"
        assert "Hide code cell source" not in text, f"book page {number}"
    for doc in _pages():
        path = PDF_DIR / f"{Path(doc).name}.pdf"
        pages = _text(path)
        assert pages[-1].rstrip().endswith(f"{len(pages)} / {len(pages)}"), doc
        titles = [i.title for i in PdfReader(path).outline if not isinstance(i, list)]
        for title in titles:
            number = title.split(" ", 1)[0]
            assert title.count(number) == 1 or not number[:1].isdigit(), title
