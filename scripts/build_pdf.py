"""The book as PDF: one file per page of the table of contents and the whole book in one.

Chromium prints every page of the built HTML book (``_build/html``), served on localhost
exactly as a reader's browser shows it once MathJax has typeset it, in print layout: no
side bars or buttons, code wrapped at the margin instead of cut, the code a chapter hides
left out, tables kept whole or broken between rows, the claims dashboard's folded checks
unfolded. This uses the Chromium the browser test already drives, so the
PDFs hold the build's own numbers, figures and typeset mathematics; Jupyter Book's LaTeX
builder would need a TeX installation and re-render the pages its own way, and its
HTML-to-PDF builder needs pyppeteer, which downloads its own browser.

Written to ``<out>`` (default ``_build/pdf``):

- ``<page>.pdf`` for every page (``intro.pdf`` for the landing page, ``01_setup.pdf`` ...);
- ``attnbook.pdf``: a title page, a table of contents with page numbers, then every page
  in reading order, with bookmarks for the parts and chapters; a link to another page of
  the book becomes a link inside the PDF (to that page's first page).

A page is printed again only when it changed since the last print into ``<out>``
(``scripts/pdf_reuse.py``: a digest of its HTML, the files it loads and the printing
itself, kept in ``<out>/pages.json`` with the unnumbered print in ``<out>/.parts/``), and
the whole book is merged again only when one of its pages or titles changed; so an edit
of one chapter's prose prints that chapter's PDF alone. ``--all`` prints every page.

The PDFs are copied into ``<html>/pdf/``, where each HTML page's download menu and the
landing page link them (``_ext.page_assets``), so that the published book
carries them. A page that shows a MathJax error or raw TeX stops the build.

Without a Chromium to print with, it stops before it starts any printing, in one line
that says how to install one or to build without the PDFs (``ATTNBOOK_PDF=0``);
``--check-chromium`` makes only that check (``scripts/build-book.sh`` does, before it
executes the chapters).

Usage: ``python scripts/build_pdf.py [HTML_DIR] [--out DIR] [--all] [--check-chromium]``.
"""

from __future__ import annotations

import argparse
import html
import logging
import multiprocessing
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from pathlib import Path

import pdf_reuse
import yaml
from check_browser import (
    CHROMIUM_ARGS,
    MATH_REPORT,
    PAGE_TIMEOUT_S,
    ROOT,
    WAIT_FOR_MATHJAX,
    Part,
    find_chromium,
    offline_routes,
    serve,
    toc_parts,
)
from pypdf import PdfReader, PdfWriter
from pypdf.generic import (
    ArrayObject,
    DictionaryObject,
    NameObject,
    NullObject,
    TextStringObject,
)

BOOK_PDF = "attnbook.pdf"
logging.getLogger("pypdf").setLevel(
    logging.ERROR
)  # Chromium's trailer sizes are off by one
#: Paper size and margins of every PDF.
PAPER = {
    "format": "A4",
    "margin": {"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"},
}
#: The pages are printed at this scale: A4 less the margins is 680 CSS pixels wide, so
#: the article is laid out 850 pixels wide, as on a desktop screen, and no table or
#: display equation of the book is wider than the paper (text at 10 pt).
SCALE = 0.8
LAYOUT_WIDTH_PX = round(680 / SCALE)

# Print layout on top of the theme's own print style: the article alone, code wrapped at
# the margin, figures and tables kept whole, the dashboard's folded checks unfolded.
PRINT_CSS = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article,
.prev-next-area, .bd-footer, .bd-footer-content, .bd-footer-article, .header-article,
#pst-back-to-top, .skip-link, .headerlink, .copybtn, .bd-search, .search-button-field,
.toggle-details__summary .tag_hide-input, .attnbook-pdf-links,
.cell.tag_hide-input > details.above-input, .cell.tag_remove-input > .cell_input,
.attnbook-map-hint { display: none !important; }
.bd-container { justify-content: flex-start !important; }
.bd-container__inner { min-width: 0 !important; flex: 1 1 auto !important; }
.bd-main, .bd-article-container, .bd-content, .bd-article, .bd-page-width, .bd-container,
.bd-container__inner { max-width: none !important; width: auto !important; margin: 0 !important;
  padding: 0 !important; }
pre, pre code, .highlight pre, div.cell_output pre { white-space: pre-wrap !important;
  word-break: break-word !important; overflow: visible !important; max-height: none !important; }
img, figure, table, tr, .mjx-container[display="true"], mjx-container[display="true"],
.attnbook-verdict, .attnbook-claim-head { break-inside: avoid; }
thead { display: table-header-group; }
mjx-container[display="true"] { overflow: visible !important; }
img { max-width: 100% !important; height: auto !important; }
details > summary { list-style: none; }
h1, h2, h3 { break-after: avoid; }
a { color: #1a4f8b !important; text-decoration: none !important; }
"""

_UNFOLD = """
() => {
  // the dashboard's folded checks, not the code a chapter hides (not printed)
  document.querySelectorAll('details:not(.above-input)').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden, .cell.tag_hide-output .cell_output')
    .forEach(e => e.classList.remove('toggle-hidden'));
}
"""

# Boxes wider than the paper (MathJax's hidden copy for screen readers aside): reported.
_TOO_WIDE = """
() => {
  const width = document.documentElement.clientWidth, out = [];
  for (const el of document.querySelectorAll('article table, article mjx-container, article img')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1) out.push(el.tagName.toLowerCase() + ' ' +
        Math.round(r.right - width) + ' px');
  }
  return out;
}
"""

# The numbered headings of the article, number -> title, the title's mathematics as the
# text MathJax gives screen readers: the PDF's bookmarks are named from them (Chromium's
# own read the number and the words twice and drop the mathematics).
_HEADINGS = """
() => Object.fromEntries([...document.querySelectorAll('article h1, article h2, article h3,'
                                                       + ' article h4')].map(h => {
  const number = ((h.querySelector('.section-number') || {}).textContent || '').trim();
  const copy = h.cloneNode(true);
  copy.querySelectorAll('.headerlink, .section-number').forEach(e => e.remove());
  copy.querySelectorAll('mjx-container').forEach(m => {
    const text = m.querySelector('mjx-assistive-mml');
    m.replaceWith(document.createTextNode(text ? text.textContent : ''));
  });
  return [number, copy.textContent.replace(/\\s+/g, ' ').trim()];
}).filter(([number]) => number))
"""

_TITLE = (
    "() => (document.querySelector('article h1') || document.querySelector('h1'))"
    "?.innerText.replace(/[#¶]\\s*$/, '').trim() || document.title"
)

# The footer of every printed page: the page's title. Its number is stamped on
# afterwards (:func:`stamp_numbers`): "3 / 21" in the page's own PDF, the book's page
# number in the whole book, the numbers its contents give.
_FOOTER = (
    "<div style='font-size:8px;width:100%;padding:0 15mm;color:#666;"
    "display:flex;justify-content:space-between'><span>{left}</span></div>"
)
# The page numbers alone, one A4 page each, where the footer leaves them room.
_NUMBERS = """<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 0; }}
body {{ margin: 0; font-family: 'DejaVu Sans', sans-serif; }}
div {{ height: 297mm; position: relative; break-after: page; overflow: hidden; }}
span {{ position: absolute; right: 15mm; bottom: 8.2mm; font-size: 6.4pt; color: #666; }}
</style></head><body>{pages}</body></html>"""


def pdf_name(page: str) -> str:
    """The PDF of a page of the table of contents: ``chapters/01_setup.html`` ->
    ``01_setup.pdf``."""
    return Path(page).with_suffix(".pdf").name


def _print_group(base_url: str, pages: list[str], out: str, site: str) -> dict:
    """Print ``pages`` (served at ``base_url``) in a browser of its own; returns their
    titles, the problems and notes found, and the requests refused."""
    from playwright.sync_api import sync_playwright

    found: dict = {"titles": {}, "problems": [], "notes": [], "refused": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(
                viewport={"width": LAYOUT_WIDTH_PX, "height": 1000}
            )
            offline_routes(context, base_url, found["refused"])
            for page in pages:
                tab = context.new_page()
                tab.goto(
                    base_url + page, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000
                )
                tab.evaluate(WAIT_FOR_MATHJAX, PAGE_TIMEOUT_S * 1000)
                math = tab.evaluate(MATH_REPORT)
                found["problems"] += [f"{page}: {e}" for e in math["errors"]]
                if math["untypeset"]:
                    found["problems"].append(
                        f"{page}: {math['untypeset']} formula(s) left as raw TeX"
                    )
                tab.evaluate(_UNFOLD)
                tab.add_style_tag(content=PRINT_CSS)
                tab.emulate_media(media="print")
                found["notes"] += [
                    (page, f"{w} wider than the paper") for w in tab.evaluate(_TOO_WIDE)
                ]
                title = found["titles"][page] = tab.evaluate(_TITLE)
                path = Path(out) / pdf_name(page)
                tab.pdf(
                    path=str(path),
                    print_background=True,
                    display_header_footer=True,
                    header_template="<span></span>",
                    footer_template=_FOOTER.format(
                        left=html.escape(f"attnbook · {title}")
                    ),
                    outline=True,
                    tagged=True,
                    scale=SCALE,
                    **PAPER,
                )
                headings = tab.evaluate(_HEADINGS)
                tab.close()
                publish_links(path, base_url, site, headings)
            context.close()
        finally:
            browser.close()
    return found


def print_pages(
    html_dir: Path,
    pages: list[str],
    out: Path,
    site: str,
    jobs: int = 2,
    notes: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Print every page to ``out/<pdf_name>`` (``jobs`` browsers side by side), its
    links to the book pointing at ``site``; returns each page's title, and puts the
    notes on each page (a box wider than the paper) into ``notes``. Raises
    ``RuntimeError`` naming the page for a MathJax error or formulas left as raw TeX."""
    groups = [pages[i::jobs] for i in range(jobs)]
    titles: dict[str, str] = {}
    problems: list[str] = []
    with serve(html_dir) as base_url:
        context = multiprocessing.get_context(
            "fork"
        )  # the module need not be importable
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            results = list(
                pool.map(
                    _print_group,
                    [base_url] * jobs,
                    groups,
                    [str(out)] * jobs,
                    [site] * jobs,
                )
            )
    refused = []
    for found in results:
        titles.update(found["titles"])
        problems += found["problems"]
        refused += found["refused"]
        for page, note in found["notes"]:
            print(f"[attnbook] PDF note: {page}: {note}", flush=True)
            if notes is not None:
                notes.setdefault(page, []).append(note)
    if refused:
        problems.append(f"requests outside the book: {sorted(set(refused))[:5]}")
    if problems:
        raise RuntimeError(
            "the PDF would show broken pages:\n  " + "\n  ".join(problems)
        )
    return {page: titles[page] for page in pages}


def _front_matter(toc: list[tuple[str, int, int]], first_page: int) -> str:
    """HTML of the title page and the table of contents: ``toc`` holds (title, level,
    page number) rows."""
    rows = "".join(
        f"<div class='row l{level}'><span>{html.escape(title)}</span>"
        f"<span class='dots'></span><span>{number + first_page}</span></div>"
        for title, level, number in toc
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: 'DejaVu Sans', sans-serif; color: #222; }}
.title {{ height: 250mm; display: flex; flex-direction: column; justify-content: center;
  break-after: page; }}
.title h1 {{ font-size: 30px; margin: 0 0 12px; }} .title p {{ font-size: 14px; margin: 4px 0; }}
h2 {{ font-size: 20px; }} .row {{ display: flex; font-size: 13px; margin: 5px 0; }}
.row.l0 {{ font-weight: bold; margin-top: 14px; }} .row.l2 {{ padding-left: 18px; }}
.row.l1 {{ padding-left: 6px; }}
.dots {{ flex: 1; border-bottom: 1px dotted #999; margin: 0 6px 4px; }}
</style></head><body>
<div class="title"><h1>attnbook</h1>
<p>An executable companion to <i>Attention with Trained Embeddings Provably Selects Important
Tokens</i> (Wu, Shevchenko, Oymak, Mondelli; NeurIPS 2025, arXiv:2505.17282).</p>
<p>Every result re-derived and checked with running code; every number in these pages was
measured by the build that printed them.</p>
<p style="margin-top:24px;color:#555">Built {date.today().isoformat()}.</p></div>
<h2>Contents</h2>{rows}</body></html>"""


def site_url(config: Path = ROOT / "_config.yml") -> str:
    """Where the book is published: GitHub Pages of ``repository.url`` in
    ``_config.yml`` (``https://github.com/<owner>/<repo>`` ->
    ``https://<owner>.github.io/<repo>/``)."""
    url = yaml.safe_load(config.read_text())["repository"]["url"].rstrip("/")
    owner, repo = url.split("/")[-2:]
    return f"https://{owner.lower()}.github.io/{repo}/"


def _links(page_obj) -> list:
    """The link annotations of a PDF page that open an address (``/URI``)."""
    found = []
    for ref in page_obj.get("/Annots", []) or []:
        annot = ref.get_object()
        if "/URI" in annot.get("/A", {}):
            found.append(annot)
    return found


def _book_page(uri: str, site: str) -> str | None:
    """The page of the book (``chapters/01_setup.html``) a published address opens, or
    None for any other address."""
    if not uri.startswith(site):
        return None
    return uri[len(site) :].split("#", 1)[0].split("?", 1)[0] or "index.html"


def name_bookmarks(writer: PdfWriter, headings: dict[str, str]) -> None:
    """Name each bookmark of a numbered section by its number and its heading in
    ``headings`` (number -> title), once each."""
    item = writer._root_object.get("/Outlines", {}).get("/First")
    stack = []
    while item is not None:
        node = item.get_object()
        title = str(node.get("/Title", ""))
        number = title.split(" ", 1)[0]
        if number in headings:
            node[NameObject("/Title")] = TextStringObject(
                f"{number} {headings[number]}"
            )
        if "/First" in node:
            stack.append(node.get("/Next"))
            item = node["/First"]
            continue
        item = node.get("/Next")
        while item is None and stack:
            item = stack.pop()


def publish_links(
    path: Path, base_url: str, site: str, headings: dict[str, str] | None = None
) -> None:
    """Rewrite the links of a printed page that point at the address it was printed
    from (``base_url``) to the published book (``site``), and name its bookmarks from
    ``headings`` (:func:`name_bookmarks`)."""
    writer = PdfWriter(clone_from=PdfReader(path))
    name_bookmarks(writer, headings or {})
    for page_obj in writer.pages:
        for annot in _links(page_obj):
            uri = str(annot["/A"]["/URI"])
            if uri.startswith(base_url):
                annot["/A"][NameObject("/URI")] = TextStringObject(
                    site + uri[len(base_url) :]
                )
    with open(path, "wb") as f:
        writer.write(f)


def number_pages(labels: list[str], path: Path) -> PdfReader:
    """A PDF of ``len(labels)`` blank A4 pages, each with its label where the footer
    shows the page number (printed by Chromium, so in the footer's font)."""
    from playwright.sync_api import sync_playwright

    pages = "".join(f"<div><span>{html.escape(label)}</span></div>" for label in labels)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), args=CHROMIUM_ARGS
        )
        try:
            tab = browser.new_page()
            tab.set_content(_NUMBERS.format(pages=pages))
            tab.pdf(path=str(path), print_background=False, prefer_css_page_size=True)
        finally:
            browser.close()
    numbers = PdfReader(path)
    if len(numbers.pages) != len(labels):
        raise RuntimeError(
            f"page numbers: {len(numbers.pages)} pages printed for {len(labels)} labels"
        )
    return numbers


def stamp_numbers(writer: PdfWriter, numbers: PdfReader, first: int = 0) -> None:
    """Lay the pages of ``numbers`` over the pages of ``writer`` from ``first`` on,
    one on one."""
    for page_obj, label in zip(writer.pages[first:], numbers.pages):
        page_obj.merge_page(label)


def number_page_pdfs(out: Path, pages: list[str]) -> None:
    """Stamp "k / n" on the pages of every page's own PDF (one print of the numbers
    for all of them)."""
    counts = [len(PdfReader(out / pdf_name(page)).pages) for page in pages]
    labels = [f"{k} / {n}" for n in counts for k in range(1, n + 1)]
    numbers = number_pages(labels, out / "_numbers.pdf")
    start = 0
    for page, n in zip(pages, counts):
        path = out / pdf_name(page)
        writer = PdfWriter(clone_from=PdfReader(path))
        part = PdfWriter()
        for page_obj in numbers.pages[start : start + n]:
            part.add_page(page_obj)
        stamp_numbers(writer, part)
        start += n
        with open(path, "wb") as f:
            writer.write(f)
    (out / "_numbers.pdf").unlink()


def build_book_pdf(
    out: Path, parts: list[Part], titles: dict[str, str], site: str
) -> Path:
    """Merge the pages' PDFs into ``out/attnbook.pdf`` after a title page and a table
    of contents, with bookmarks, and links between pages made internal."""
    from playwright.sync_api import sync_playwright

    counts = {
        page: len(PdfReader(out / pdf_name(page)).pages)
        for _, pages in parts
        for page, _ in pages
    }
    toc, offset = [], 0
    for caption, pages in parts:
        if caption:
            toc.append((caption, 0, offset))
        for page, level in pages:
            toc.append((titles[page], level, offset))
            offset += counts[page]
    front = out / "_front.pdf"
    front_pages = 2
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=find_chromium(), args=CHROMIUM_ARGS
        )
        try:
            tab = browser.new_page()
            for _ in range(3):  # the contents' own length moves the page numbers
                tab.set_content(_front_matter(toc, front_pages + 1))
                tab.pdf(path=str(front), print_background=True, **PAPER)
                if len(PdfReader(front).pages) == front_pages:
                    break
                front_pages = len(PdfReader(front).pages)
        finally:
            browser.close()
    writer = PdfWriter()
    writer.append(PdfReader(front), import_outline=False)
    starts: dict[str, int] = {}
    for caption, pages in parts:
        parent = (
            writer.add_outline_item(title=caption, page_number=len(writer.pages))
            if caption
            else None
        )
        chapter = parent
        for page, level in pages:
            starts[page] = len(writer.pages)
            writer.append(PdfReader(out / pdf_name(page)), import_outline=False)
            item = writer.add_outline_item(
                title=titles[page],
                page_number=starts[page],
                parent=parent if level == 1 else chapter,
            )
            if level == 1:
                chapter = item
    # links to another page of the book: to that page's first page in this PDF
    for page_obj in writer.pages:
        for annot in _links(page_obj):
            target = starts.get(_book_page(str(annot["/A"]["/URI"]), site))
            if target is None:
                continue
            dest = ArrayObject(
                [
                    writer.pages[target].indirect_reference,
                    NameObject("/XYZ"),
                    NullObject(),
                    NullObject(),
                    NullObject(),
                ]
            )
            annot[NameObject("/A")] = DictionaryObject(
                {NameObject("/S"): NameObject("/GoTo"), NameObject("/D"): dest}
            )
    # the book's page numbers, the ones its contents give (the title page unnumbered)
    numbers = number_pages(
        [str(k) for k in range(2, len(writer.pages) + 1)], out / "_numbers.pdf"
    )
    stamp_numbers(writer, numbers, first=1)
    writer.add_metadata(
        {
            "/Title": "attnbook",
            "/Subject": "An executable companion to "
            "Wu et al., Attention with Trained Embeddings Provably Selects "
            "Important Tokens (NeurIPS 2025)",
        }
    )
    path = out / BOOK_PDF
    with open(path, "wb") as f:
        writer.write(f)
    front.unlink()
    (out / "_numbers.pdf").unlink()
    return path


def chromium_problem() -> str | None:
    """Why no page can be printed here (no Chromium found, or not executable), in one
    line naming the fixes, ``ATTNBOOK_PDF=0`` among them; None when Chromium is
    there."""
    try:
        chromium = find_chromium()
    except FileNotFoundError as err:
        problem = str(err)
    else:
        if os.access(chromium, os.X_OK):
            return None
        problem = f"the Chromium at {chromium} cannot be executed"
    return (
        f"no PDF can be printed: {problem}; or build the book without its PDFs: "
        "ATTNBOOK_PDF=0 bash scripts/build-book.sh"
    )


def _print_changed(
    html_dir: Path, out: Path, parts: list[Part], site: str
) -> tuple[dict[str, str], list[str], bool]:
    """Print the pages of ``parts`` whose digest changed (:mod:`pdf_reuse`) into
    ``out/.parts``, number them into ``out``, merge the book again when a part or a
    title changed, and keep the digests; returns every page's title, the pages
    printed, and whether the book was merged. Raises ``RuntimeError`` as
    :func:`print_pages`."""
    pages = [p for _, ps in parts for p, _ in ps]
    key = pdf_reuse.print_key(
        [Path(__file__), Path(__file__).with_name("check_browser.py")],
        find_chromium(),
        site,
    )
    digests = {page: pdf_reuse.page_digest(html_dir, page, key) for page in pages}
    manifest = pdf_reuse.load_manifest(out)
    changed = pdf_reuse.pages_to_print(out, digests, manifest, pdf_name)
    known = manifest["pages"]
    staged = out / pdf_reuse.PARTS
    staged.mkdir(parents=True, exist_ok=True)
    titles: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    if changed:
        jobs = max(1, min(2, len(os.sched_getaffinity(0)), len(changed)))
        titles = print_pages(html_dir, changed, staged, site, jobs, notes)
        for page in changed:
            shutil.copyfile(staged / pdf_name(page), out / pdf_name(page))
        number_page_pdfs(out, changed)
    for page in pages:
        if page not in changed:
            titles[page] = known[page]["title"]
            notes[page] = known[page].get("notes", [])
            for note in notes[page]:
                print(f"[attnbook] PDF note: {page}: {note}", flush=True)
    book = pdf_reuse.book_digest(parts, titles, digests)
    merged = manifest.get("book") != book or not (out / BOOK_PDF).is_file()
    if merged:
        build_book_pdf(staged, parts, titles, site).replace(out / BOOK_PDF)
    manifest = {
        "pages": {
            page: {
                "digest": digests[page],
                "title": titles[page],
                "notes": notes.get(page, []),
            }
            for page in pages
        },
        "book": book,
    }
    pdf_reuse.save_manifest(out, manifest)
    names = {pdf_name(page) for page in pages} | {BOOK_PDF}
    for stale in [*out.glob("*.pdf"), *staged.glob("*.pdf")]:
        if stale.name not in names:
            stale.unlink()
    return titles, changed, merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "html_dir", nargs="?", type=Path, default=ROOT / "_build" / "html"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf")
    parser.add_argument(
        "--check-chromium",
        action="store_true",
        help="only check that a Chromium to print with is there",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="print every page, also those whose print is unchanged",
    )
    args = parser.parse_args(argv)
    problem = chromium_problem()
    if problem is not None:
        print(f"[attnbook] {problem}", file=sys.stderr)
        return 1
    if args.check_chromium:
        return 0
    t0 = time.perf_counter()
    if args.all:
        shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = toc_parts()
    try:
        titles, printed, merged = _print_changed(
            args.html_dir, args.out, parts, site_url()
        )
    except RuntimeError as err:
        print(f"[attnbook] {err}", file=sys.stderr)
        return 1
    book = args.out / BOOK_PDF
    published = args.html_dir / "pdf"
    shutil.rmtree(published, ignore_errors=True)
    published.mkdir(parents=True)
    for pdf in args.out.glob("*.pdf"):
        shutil.copyfile(pdf, published / pdf.name)
    size = sum(p.stat().st_size for p in args.out.glob("*.pdf"))
    print(
        f"[attnbook] PDF: {book} and {len(titles)} page PDFs ({size / 2**20:.1f} MB in "
        f"all; printed: {', '.join(pdf_name(p) for p in printed) or 'none'}, the "
        "others unchanged"
        f"{', the book merged again' if merged else ', the book unchanged'}) in "
        f"{time.perf_counter() - t0:.0f} s, published in {published}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
