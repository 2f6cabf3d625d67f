"""A rebuild prints the PDF of a page only when the page changed
(``scripts/pdf_reuse.py``, ``scripts/build_pdf.py``): the digests on a tiny built book,
then a tiny book printed three times by Chromium: as it was, unchanged, and with one
page edited."""

from __future__ import annotations

import importlib
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import pdf_reuse  # noqa: E402

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="_static/book.css?digest=1">
<link rel="canonical" href="https://example.org/book/page.html"></head>
<body><article class="bd-article"><h1>{title}</h1><p>{text}</p>
<img src="_images/{image}"><a href="{other}">the other page</a></article>
<script src="searchindex.js"></script></body></html>"""


def _book(folder, text_a="First words.", text_b="Second words."):
    """Two pages, ``a.html`` and ``b.html``, with a style sheet and an image each."""
    (folder / "_static").mkdir(parents=True, exist_ok=True)
    (folder / "_images").mkdir(exist_ok=True)
    (folder / "_static" / "book.css").write_text("body { color: #222; }")
    (folder / "searchindex.js").write_text(f"Search.setIndex({text_a!r}, {text_b!r})")
    for name, image in (("a", "fa.png"), ("b", "fb.png")):
        (folder / "_images" / image).write_bytes(b"not really a png " + name.encode())
    (folder / "a.html").write_text(
        PAGE.format(title="Page A", text=text_a, image="fa.png", other="b.html")
    )
    (folder / "b.html").write_text(
        PAGE.format(title="Page B", text=text_b, image="fb.png", other="a.html#top")
    )
    return folder


def test_a_page_loads_its_style_sheet_and_images_not_other_pages(tmp_path):
    html = _book(tmp_path / "html")
    assert [
        p.relative_to(html.resolve()).as_posix()
        for p in pdf_reuse.loaded_files(html, "a.html")
    ] == ["_images/fa.png", "_static/book.css"]


def test_the_digest_follows_the_page_what_it_loads_and_the_printing(tmp_path):
    html = _book(tmp_path / "html")
    before = {p: pdf_reuse.page_digest(html, p, "k") for p in ("a.html", "b.html")}
    assert pdf_reuse.page_digest(html, "a.html", "k") == before["a.html"]
    assert pdf_reuse.page_digest(html, "a.html", "other") != before["a.html"]
    _book(html, text_b="Second words, edited.")
    assert pdf_reuse.page_digest(html, "a.html", "k") == before["a.html"]
    assert pdf_reuse.page_digest(html, "b.html", "k") != before["b.html"]
    (html / "_images" / "fa.png").write_bytes(b"another figure")
    assert pdf_reuse.page_digest(html, "a.html", "k") != before["a.html"]
    with pytest.raises(FileNotFoundError, match="no built page"):
        pdf_reuse.page_digest(html, "c.html", "k")


def test_pages_to_print_are_the_changed_and_the_missing(tmp_path):
    out = tmp_path / "pdf"
    (out / pdf_reuse.PARTS).mkdir(parents=True)
    for name in ("a.pdf", "b.pdf"):
        (out / name).write_bytes(b"%PDF")
        (out / pdf_reuse.PARTS / name).write_bytes(b"%PDF")
    manifest = {"pages": {"a.html": {"digest": "1"}, "b.html": {"digest": "2"}}}
    name = lambda page: page.replace(".html", ".pdf")  # noqa: E731
    digests = {"a.html": "1", "b.html": "2"}
    assert pdf_reuse.pages_to_print(out, digests, manifest, name) == []
    assert pdf_reuse.pages_to_print(
        out, {**digests, "b.html": "3"}, manifest, name
    ) == ["b.html"]
    (out / pdf_reuse.PARTS / "a.pdf").unlink()
    assert pdf_reuse.pages_to_print(out, digests, manifest, name) == ["a.html"]
    assert pdf_reuse.pages_to_print(out, digests, {"pages": {}}, name) == [
        "a.html",
        "b.html",
    ]


def test_an_unreadable_manifest_reprints_everything(tmp_path):
    (tmp_path / pdf_reuse.MANIFEST).write_text("{not json")
    assert pdf_reuse.load_manifest(tmp_path) == {"pages": {}, "book": None}
    pdf_reuse.save_manifest(
        tmp_path, {"pages": {"a.html": {"digest": "1"}}, "book": "x"}
    )
    assert pdf_reuse.load_manifest(tmp_path)["book"] == "x"


def _build_pdf():
    """``scripts/build_pdf.py`` as a module, or a skip where it cannot print."""
    module = importlib.import_module("build_pdf")  # scripts/ is on sys.path
    if module.chromium_problem() is not None:
        pytest.skip(module.chromium_problem())
    return module


def test_a_rebuild_prints_only_the_edited_page_and_merges_the_book_again(
    tmp_path, monkeypatch
):
    from pypdf import PdfReader

    build_pdf = _build_pdf()
    # one browser prints the pages (a second one, side by side, would only start)
    monkeypatch.setattr(build_pdf.os, "sched_getaffinity", lambda pid: {0})
    html, out = _book(tmp_path / "html"), tmp_path / "pdf"
    parts = [(None, [("a.html", 1)]), ("Part", [("b.html", 1)])]
    site = "https://example.org/book/"
    titles, printed, merged = build_pdf._print_changed(html, out, parts, site)
    assert printed == ["a.html", "b.html"] and merged
    assert titles == {"a.html": "Page A", "b.html": "Page B"}
    stamps = {
        p: (out / p).stat().st_mtime_ns for p in ("a.pdf", "b.pdf", "attnbook.pdf")
    }

    titles, printed, merged = build_pdf._print_changed(html, out, parts, site)
    assert printed == [] and not merged and titles["b.html"] == "Page B"
    assert {p: (out / p).stat().st_mtime_ns for p in stamps} == stamps

    _book(html, text_b="Second words, edited.")
    titles, printed, merged = build_pdf._print_changed(html, out, parts, site)
    assert printed == ["b.html"] and merged
    assert (out / "a.pdf").stat().st_mtime_ns == stamps["a.pdf"]
    text = " ".join(
        page.extract_text() for page in PdfReader(out / "attnbook.pdf").pages
    )
    assert "Second words, edited." in text and "First words." in text
    b_pages = PdfReader(out / "b.pdf").pages
    assert b_pages[-1].extract_text().rstrip().endswith("1 / 1")
