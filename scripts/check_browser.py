"""Open every page of the built book in headless Chromium and check what a reader sees.

The built HTML is served on localhost; every request to another host is refused, so the pages
must render from the book's own files (MathJax included). Each page of ``_toc.yml`` is opened at
desktop width (1400 px), laptop width (1280 px) and phone width (390 px); once MathJax has typeset
the page, the checks are:

- every formula is typeset, without a MathJax error and without an undefined macro (MathJax's
  ``noundefined`` package draws ``\\foo`` as red text instead of failing);
- at every width: no display equation is clipped (its box cuts a line of it off), no table is
  crushed (a header cell wrapped onto more than :data:`MAX_HEADER_LINES` lines, one word a
  line, or a word wider than its cell), no figure's image overlaps its caption, and the page
  is not wider than the window;
- no display equation and no table is wider than its box at desktop and laptop width (at
  phone width the overflows are counted, not failed: the theme lets such boxes scroll
  sideways);
- every image loads; every link into the book points at a file and an anchor that exist;
- the browser console shows no error and the page raises no script error.

A full-page screenshot of every page at both widths is written to the screenshot folder.

Usage: ``python scripts/check_browser.py [HTML_DIR] [--screenshots DIR] [--json FILE]``;
exits 1 when a check fails. ``tests/delivery/test_browser.py`` runs the same checks under pytest.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import multiprocessing
import os
import re
import shutil
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR_ENV = "ATTNBOOK_HTML_DIR"
SCREENSHOT_DIR_ENV = "ATTNBOOK_SCREENSHOT_DIR"
CHROMIUM_ENV = "ATTNBOOK_CHROMIUM"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]

# A box overflows when its content sticks out by more than this many CSS pixels: sub-pixel
# rounding of glyph widths reaches a fraction of a pixel, never a whole one.
OVERFLOW_TOLERANCE_PX = 1.0
# Seconds a page may take to load and typeset; the longest page typesets a few hundred formulas.
PAGE_TIMEOUT_S = 180


@dataclass(frozen=True)
class Viewport:
    """A window size the pages are read at; overflow fails only where ``strict_overflow``."""

    name: str
    width: int
    height: int
    strict_overflow: bool


DESKTOP = Viewport("desktop", 1400, 900, strict_overflow=True)
LAPTOP = Viewport("laptop", 1280, 800, strict_overflow=True)
PHONE = Viewport("phone", 390, 844, strict_overflow=False)
VIEWPORTS = (DESKTOP, LAPTOP, PHONE)
#: A table header cell wrapped onto more lines than this, about one word a line, is crushed.
MAX_HEADER_LINES = 3


@dataclass
class PageReport:
    """What one page showed at one viewport."""

    page: str
    viewport: str
    height_px: int = 0
    formulas: int = 0
    displays: int = 0
    tables: int = 0
    images: int = 0
    links_internal: int = 0
    links_external: int = 0
    mathjax: str = ""
    screenshot: str = ""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


Part = tuple[str | None, list[tuple[str, int]]]


def toc_parts(toc_file: Path = ROOT / "_toc.yml") -> list[Part]:
    """The table of contents as (part caption, [(page, level)]) pairs, pages as paths
    relative to the HTML folder; the root page first (no caption), level 1 for a
    chapter, 2 for its sections."""
    toc = yaml.safe_load(Path(toc_file).read_text())

    def files(entries: list[dict], level: int) -> Iterator[tuple[str, int]]:
        for entry in entries:
            yield f"{entry['file']}.html", level
            yield from files(entry.get("sections", []), level + 1)

    return [(None, [(f"{toc['root']}.html", 1)])] + [
        (part.get("caption"), list(files(part["chapters"], 1))) for part in toc["parts"]]


def book_pages(toc_file: Path = ROOT / "_toc.yml") -> list[str]:
    """The pages of the book, in reading order, as paths relative to the HTML folder."""
    return [page for _, pages in toc_parts(toc_file) for page, _ in pages]


def find_chromium() -> str:
    """The system Chromium: ``$ATTNBOOK_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    configured = os.environ.get(CHROMIUM_ENV)
    candidates = [configured] if configured else [*CHROMIUM_CANDIDATES, shutil.which("chromium")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise FileNotFoundError(
        f"no Chromium found (tried {[c for c in candidates if c]}); install it with "
        f"`apt-get install -y chromium` or point {CHROMIUM_ENV} at a Chromium binary")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@contextmanager
def serve(html_dir: Path) -> Iterator[str]:
    """Serve ``html_dir`` on a free localhost port; yields the base URL (ending in ``/``)."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key == "id" or (tag == "a" and key == "name"):
                if value:
                    self.ids.add(value)


@functools.lru_cache(maxsize=None)
def anchors_of(path: Path) -> frozenset[str]:
    """The ids (and ``<a name>``) defined in the static HTML file ``path``."""
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def check_link(html_dir: Path, base_url: str, page_url: str, href: str,
               live_ids: set[str]) -> str | None:
    """None if the in-book link ``href`` (absolute URL) resolves; otherwise what is wrong."""
    parts = urlsplit(href)
    rel = unquote(parts.path)[len(urlsplit(base_url).path):]
    target = html_dir / rel
    if rel == "" or rel.endswith("/"):
        target = target / "index.html"
    if not target.is_file():
        return f"broken link {href!r}: no file {rel or 'index.html'}"
    fragment = unquote(parts.fragment)
    if not fragment or target.suffix != ".html":
        return None
    same_page = href.split("#", 1)[0] == page_url.split("#", 1)[0]
    if fragment in anchors_of(target) or (same_page and fragment in live_ids):
        return None
    return f"broken link {href!r}: no anchor #{fragment} in {rel}"


WAIT_FOR_MATHJAX = """
async (timeoutMs) => {
  const uses = document.querySelector('script[src*="mathjax" i], script#MathJax-script');
  if (!uses) return '';
  const start = Date.now();
  while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
    if (Date.now() - start > timeoutMs) return 'not loaded';
    await new Promise(r => setTimeout(r, 50));
  }
  await MathJax.startup.promise;
  return MathJax.version;
}
"""

_LOAD_IMAGES = """
async () => {
  const imgs = [...document.images];
  for (const img of imgs) img.loading = 'eager';
  await Promise.all(imgs.map(img => img.complete ? null :
    new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  return imgs.map(img => ({src: img.currentSrc || img.src, ok: img.naturalWidth > 0}));
}
"""

# Formulas, their errors and undefined macros, from MathJax's own record of what it typeset.
MATH_REPORT = """
() => {
  const out = {formulas: 0, displays: 0, errors: [], untypeset: 0};
  const short = s => s.replace(/\\s+/g, ' ').trim().slice(0, 90);
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container')) out.untypeset += 1;
  }
  const doc = window.MathJax && MathJax.startup && MathJax.startup.document;
  if (!doc) return out;
  for (const item of doc.math) {
    out.formulas += 1;
    if (item.display) out.displays += 1;
    const found = [];
    item.root.walkTree(node => {
      if (node.isKind('merror')) {
        found.push('MathJax error: ' + (node.attributes.get('data-mjx-error') ||
                   node.childNodes.map(c => c.toString()).join('')));
      } else if (node.isToken && node.attributes.get('mathcolor') === 'red') {
        found.push('undefined macro ' + node.getText());
      }
    });
    for (const f of found) out.errors.push(f + ' in $' + short(item.math) + '$');
  }
  // The rendered page as well: an error the tree walk missed still shows as mjx-merror.
  const dom = document.querySelectorAll('mjx-merror, [data-mjx-error]').length;
  if (dom && !out.errors.length) out.errors.push(dom + ' mjx-merror element(s) on the page');
  return out;
}
"""

# Boxes whose content is wider than the box: display equations and tables.
_OVERFLOWS = """
(tolerance) => {
  const out = [];
  const short = s => s.replace(/\\s+/g, ' ').trim().slice(0, 90);
  const column = document.querySelector('article.bd-article, main, body');
  const colRect = column.getBoundingClientRect();
  const excess = (el, box) => {
    const r = el.getBoundingClientRect(), b = box.getBoundingClientRect();
    return Math.max(r.right - b.right, b.left - r.left, box.scrollWidth - box.clientWidth,
                    r.right - colRect.right);
  };
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const math = c.querySelector('mjx-math') || c;
    const item = (MathJax.startup.document.math.toArray ? MathJax.startup.document.math.toArray()
                  : [...MathJax.startup.document.math]).find(m => m.typesetRoot === c);
    let over = Math.max(excess(math, c), excess(c, c.parentElement));
    // Sphinx floats the equation number right of the display: the formula must stop before it.
    const eqno = c.parentElement.querySelector(':scope > .eqno');
    if (eqno) over = Math.max(over, math.getBoundingClientRect().right - eqno.getBoundingClientRect().left);
    if (over > tolerance) out.push({kind: 'display', px: Math.round(over),
      box: Math.round(c.clientWidth), what: item ? '$$' + short(item.math) + '$$' : short(c.textContent)});
  }
  let tables = 0;
  for (const t of document.querySelectorAll('table')) {
    tables += 1;
    const over = excess(t, t.parentElement);
    if (over > tolerance) out.push({kind: 'table', px: Math.round(over),
      box: Math.round(t.parentElement.clientWidth),
      what: short((t.querySelector('tr') || t).textContent)});
  }
  return {tables, out};
}
"""

# What no reader should see at any width: a display equation cut off by its box (a line of
# it hidden), a crushed table (a header cell wrapped word by word, or a word wider than its
# cell), a figure's image over its caption, a page wider than the window.
_CLIPPED = """
([tolerance, maxLines]) => {
  const out = [];
  const short = s => s.replace(/\\s+/g, ' ').trim().slice(0, 90);
  const visible = el => el.getClientRects().length > 0;
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    if (!visible(c)) continue;
    const math = c.querySelector('mjx-math') || c;
    const hidden = getComputedStyle(c).overflowY !== 'visible';
    const cut = Math.max(math.getBoundingClientRect().height - c.clientHeight,
                         hidden ? c.scrollHeight - c.clientHeight : 0);
    if (cut > tolerance + 2) out.push('display equation clipped by ' + Math.round(cut) +
      ' px (a line of it is hidden): ' + short(c.textContent));
  }
  for (const t of document.querySelectorAll('article table')) {
    if (!visible(t)) continue;
    const first = short((t.querySelector('tr') || t).textContent);
    for (const cell of t.querySelectorAll('th, td')) {
      const text = cell.innerText.trim();
      if (!text) continue;
      if (cell.scrollWidth > cell.clientWidth + tolerance) {
        out.push('table cut: a word is wider than its cell ("' + short(text) + '") in ' + first);
        break;
      }
      if (cell.tagName !== 'TH') continue;
      const range = document.createRange();
      range.selectNodeContents(cell);
      const lines = new Set([...range.getClientRects()].map(r => Math.round(r.bottom))).size;
      const words = text.split(/\\s+/).length;
      if (words > 1 && lines > maxLines && lines >= words - 1) {
        out.push('table crushed: its header "' + short(text) + '" wraps onto ' + lines +
                 ' lines in ' + first);
        break;
      }
    }
  }
  for (const f of document.querySelectorAll('article figure')) {
    const cap = f.querySelector('figcaption');
    if (!cap || !visible(cap)) continue;
    const c = cap.getBoundingClientRect();
    for (const img of f.querySelectorAll('img')) {
      const r = img.getBoundingClientRect();
      const h = Math.min(r.bottom, c.bottom) - Math.max(r.top, c.top);
      const w = Math.min(r.right, c.right) - Math.max(r.left, c.left);
      if (h > tolerance && w > tolerance) out.push('figure image overlaps its caption by ' +
        Math.round(h) + ' px: ' + short(cap.textContent));
    }
  }
  const wide = document.documentElement.scrollWidth - window.innerWidth;
  if (wide > tolerance) out.push('the page is wider than the window by ' + wide + ' px');
  return out;
}
"""

_LINKS_AND_IDS = """
() => ({
  // an SVG link's href is not a string (the paper map): resolve its attribute
  links: [...document.querySelectorAll('a[href]')].map(a => typeof a.href === 'string' ? a.href
    : new URL(a.getAttribute('href'), location.href).href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
})
"""


def _shot_name(page: str) -> str:
    return page.removesuffix(".html").replace("/", "__") + ".png"


def check_page(context, html_dir: Path, base_url: str, page: str, viewport: Viewport,
               screenshot_dir: Path | None, check_links: bool) -> PageReport:
    """Open one page in ``context`` and run every check on it."""
    report = PageReport(page=page, viewport=viewport.name)
    url = base_url + page
    if not (html_dir / page).is_file():
        report.problems.append(f"page missing: no {page} in {html_dir}")
        return report
    tab = context.new_page()
    console: list[str] = []
    tab.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: console.append(f"script error: {e}"))
    try:
        tab.goto(url, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
        report.mathjax = tab.evaluate(WAIT_FOR_MATHJAX, PAGE_TIMEOUT_S * 1000)
        if report.mathjax == "not loaded":
            report.problems.append("MathJax did not load")
        elif report.mathjax and not report.mathjax.startswith("3."):
            report.problems.append(f"MathJax {report.mathjax} loaded, expected MathJax 3")
        images = tab.evaluate(_LOAD_IMAGES)
        report.images = len(images)
        report.problems += [f"image does not load: {i['src']}" for i in images if not i["ok"]]
        math = tab.evaluate(MATH_REPORT)
        report.formulas, report.displays = math["formulas"], math["displays"]
        report.problems += math["errors"]
        if math["untypeset"]:
            report.problems.append(f"{math['untypeset']} formula(s) left as raw TeX")
        if report.mathjax and report.mathjax != "not loaded":
            over = tab.evaluate(_OVERFLOWS, OVERFLOW_TOLERANCE_PX)
            report.tables = over["tables"]
            for o in over["out"]:
                text = (f"{o['kind']} wider than its {o['box']} px box by {o['px']} px "
                        f"at {viewport.width} px: {o['what']}")
                (report.problems if viewport.strict_overflow else report.notes).append(text)
            report.problems += [f"{p} at {viewport.width} px" for p in
                                tab.evaluate(_CLIPPED, [OVERFLOW_TOLERANCE_PX, MAX_HEADER_LINES])]
        else:
            report.tables = tab.locator("table").count()
        if check_links:
            found = tab.evaluate(_LINKS_AND_IDS)
            live_ids = set(found["ids"])
            for href in dict.fromkeys(found["links"]):
                scheme = urlsplit(href).scheme
                if not href.startswith(base_url):
                    report.links_external += scheme in ("http", "https")
                    continue
                report.links_internal += 1
                wrong = check_link(html_dir, base_url, url, href, live_ids)
                if wrong:
                    report.problems.append(wrong)
        report.height_px = tab.evaluate("document.documentElement.scrollHeight")
        if screenshot_dir is not None:
            path = screenshot_dir / viewport.name / _shot_name(page)
            path.parent.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(path), full_page=True)
            report.screenshot = str(path)
    finally:
        tab.close()
    report.problems += [f"console error: {c}" for c in console]
    return report


def viewport_context(browser, viewport):
    """A browser context at ``viewport``'s size; below 600 px wide it is a phone (touch,
    mobile layout), as the theme's phone breakpoint assumes."""
    return browser.new_context(
        viewport={"width": viewport.width, "height": viewport.height},
        is_mobile=viewport.width < 600, has_touch=viewport.width < 600)


def offline_routes(context, allowed_prefix: str, refused: list[str]) -> None:
    """Refuse every request that does not start with ``allowed_prefix``; record it."""
    def route(r) -> None:
        if r.request.url.startswith(allowed_prefix) or r.request.url.startswith("data:"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()
    context.route("**/*", route)


def _check_viewport(html_dir: Path, screenshot_dir: Path | None, pages: list[str],
                    vp: Viewport, check_links: bool) -> list[PageReport]:
    """Every page at one viewport, in a browser of its own."""
    from playwright.sync_api import sync_playwright

    reports: list[PageReport] = []
    with serve(html_dir) as base_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        try:
            context = viewport_context(browser, vp)
            refused: list[str] = []
            offline_routes(context, base_url, refused)
            for page in pages:
                start = len(refused)
                rep = check_page(context, html_dir, base_url, page, vp, screenshot_dir,
                                 check_links=check_links)
                rep.problems += [f"request outside the book (the book must read offline): {u}"
                                 for u in dict.fromkeys(refused[start:])]
                reports.append(rep)
            context.close()
        finally:
            browser.close()
    return reports


def check_book(html_dir: Path, screenshot_dir: Path | None = None,
               pages: list[str] | None = None,
               viewports: tuple[Viewport, ...] = VIEWPORTS,
               jobs: int | None = None) -> list[PageReport]:
    """Check every page at every viewport; links are checked once, at the first viewport.
    The viewports are read side by side, ``jobs`` at a time (default: one per CPU this
    process may use), each in a process and browser of its own."""
    html_dir = Path(html_dir).resolve()
    if not (html_dir / "index.html").is_file():
        raise FileNotFoundError(f"no built book: {html_dir / 'index.html'} does not exist")
    pages = book_pages() if pages is None else pages
    jobs = min(jobs or len(os.sched_getaffinity(0)), len(viewports))
    tasks = [(html_dir, screenshot_dir, pages, vp, n == 0) for n, vp in enumerate(viewports)]
    if jobs <= 1:
        return [r for task in tasks for r in _check_viewport(*task)]
    context = multiprocessing.get_context("fork")  # the module need not be importable
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        found = [pool.submit(_check_viewport, *task) for task in tasks]
        return [r for f in found for r in f.result()]


def first_page_with_math(html_dir: Path, pages: list[str]) -> str | None:
    """The first of ``pages`` whose HTML holds a formula for MathJax, or None."""
    for page in pages:
        path = Path(html_dir) / page
        if path.is_file() and 'class="math' in path.read_text(encoding="utf-8", errors="replace"):
            return page
    return None


def check_offline_file(html_dir: Path, page: str = "index.html") -> PageReport:
    """Open ``page`` straight from disk (``file://``) with every other request refused."""
    from playwright.sync_api import sync_playwright

    path = (Path(html_dir) / page).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no page {path}")
    report = PageReport(page=page, viewport="file")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": DESKTOP.width,
                                                    "height": DESKTOP.height})
            refused: list[str] = []
            offline_routes(context, "file://", refused)
            tab = context.new_page()
            tab.goto(path.as_uri(), wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
            report.mathjax = tab.evaluate(WAIT_FOR_MATHJAX, PAGE_TIMEOUT_S * 1000)
            math = tab.evaluate(MATH_REPORT)
            report.formulas = math["formulas"]
            report.problems += math["errors"]
            if math["untypeset"]:
                report.problems.append(f"{math['untypeset']} formula(s) left as raw TeX")
            if report.mathjax in ("", "not loaded"):
                report.problems.append(f"MathJax {report.mathjax or 'not on the page'}")
            report.problems += [f"request outside the book: {u}" for u in dict.fromkeys(refused)]
        finally:
            browser.close()
    return report


# The paper map on the landing page (_ext.paper_map_svg): the map's text must read
# at least this large (CSS pixels) at every viewport; below, the map scrolls sideways.
MAP_MIN_FONT_PX = 10.0
#: From this window width up, the whole map fits the column, its claims included.
MAP_FITS_FROM_PX = 1280

_FIRST_SCREEN = """
() => {
  const box = document.getElementById('verdict');
  if (!box) return null;
  const parts = [...box.querySelectorAll(':scope > p, :scope > ul > li')];
  return {height: window.innerHeight, parts: parts.map(e => ({
    text: e.innerText.replace(/\\s+/g, ' ').trim().slice(0, 70),
    bottom: e.getBoundingClientRect().bottom}))};
}
"""


def check_first_screen(html_dir: Path, viewport: Viewport, screenshot_dir: Path | None = None,
                       page: str = "intro.html") -> list[str]:
    """What of the verdict of the build is not on the landing page's first screen at
    ``viewport`` (empty: the tally, every claim that is not PASS with its reason and what a
    build guarantees show before the reader scrolls). A screenshot of the first screen goes
    to ``<screenshot_dir>/<viewport>/first_screen.png``."""
    from playwright.sync_api import sync_playwright

    with serve(Path(html_dir)) as base_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        try:
            context = viewport_context(browser, viewport)
            offline_routes(context, base_url, [])
            tab = context.new_page()
            tab.goto(base_url + page, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
            tab.evaluate(WAIT_FOR_MATHJAX, PAGE_TIMEOUT_S * 1000)
            found = tab.evaluate(_FIRST_SCREEN)
            if screenshot_dir is not None:
                path = Path(screenshot_dir) / viewport.name / "first_screen.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                tab.screenshot(path=str(path))
        finally:
            browser.close()
    if found is None:
        return [f"no verdict (#verdict) on {page}"]
    return [f"below the first screen at {viewport.width} x {viewport.height} px (bottom at "
            f"{p['bottom']:.0f} px): {p['text']!r}"
            for p in found["parts"] if p["bottom"] > found["height"]]

_MAP_INFO = """
() => {
  const svg = document.querySelector('svg.attnbook-map-svg');
  if (!svg) return null;
  const box = svg.getBoundingClientRect(), scroller = svg.parentElement;
  const scale = box.width / svg.viewBox.baseVal.width;
  const sizes = [...svg.querySelectorAll('g.node text')].map(
    t => parseFloat(t.getAttribute('font-size')) * scale);
  const nodes = [...svg.querySelectorAll('g.node')].map(g => ({
    id: g.id.replace(/^map-/, ''), href: g.querySelector('a').getAttribute('href'),
    title: (g.querySelector('title') || {}).textContent || ''}));
  return {nodes, edges: svg.querySelectorAll('g.edge').length, width: box.width,
          font: Math.min(...sizes), scrolls: scroller.scrollWidth > scroller.clientWidth + 1,
          pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
          hint: [...document.querySelectorAll('figure.attnbook-map .attnbook-map-hint')].some(
            e => getComputedStyle(e).display !== 'none'),
          strip: [...document.querySelectorAll('figure.attnbook-map ul.attnbook-map-claims a')]
            .map(a => a.getAttribute('href')),
          captionOverflow: Math.max(...[...document.querySelectorAll(
            'figure.attnbook-map figcaption, figure.attnbook-map figcaption *')].map(
            e => e.getBoundingClientRect().right - scroller.getBoundingClientRect().right))};
}
"""

_LANDED = """
(id) => {
  const el = document.getElementById(id);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  return {classes: el.className, top: r.top, bottom: r.bottom, height: window.innerHeight,
          text: el.innerText.slice(0, 80)};
}
"""


@dataclass
class MapReport:
    """What the paper map on the landing page showed at one viewport."""

    viewport: str
    nodes: int = 0
    edges: int = 0
    width_px: float = 0.0
    font_px: float = 0.0  # the smallest text of a node, as drawn
    scrolls: bool = False  # the map is wider than the column and scrolls sideways
    followed: list[str] = field(default_factory=list)
    screenshot: str = ""
    problems: list[str] = field(default_factory=list)


def _map_targets(nodes: list[dict]) -> list[dict]:
    """The two nodes whose links the check follows: the first result stated on another
    page and the first claim (a block of the claims dashboard on the same page)."""
    results = [n for n in nodes if ".html#" in n["href"]]
    claims = [n for n in nodes if n["href"].startswith("#claim-")]
    return results[:1] + claims[:1]


def check_paper_map(html_dir: Path, viewport: Viewport, screenshot_dir: Path | None = None,
                    page: str = "intro.html") -> MapReport:
    """Open the landing page at ``viewport``: the map is an inline SVG whose every node links
    to its statement with its name as hover text, its text reads at ``MAP_MIN_FONT_PX`` or
    more, the page does not overflow; then click two nodes (:func:`_map_targets`) and check
    that each lands on its statement (a sphinx-proof box, or a claim's block), in view."""
    from playwright.sync_api import sync_playwright

    report = MapReport(viewport=viewport.name)
    with serve(Path(html_dir)) as base_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        try:
            context = viewport_context(browser, viewport)
            refused: list[str] = []
            offline_routes(context, base_url, refused)
            tab = context.new_page()
            tab.goto(base_url + page, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
            tab.evaluate(WAIT_FOR_MATHJAX, PAGE_TIMEOUT_S * 1000)
            info = tab.evaluate(_MAP_INFO)
            if info is None:
                report.problems.append(f"no paper map (svg.attnbook-map-svg) on {page}")
                return report
            report.nodes, report.edges = len(info["nodes"]), info["edges"]
            report.width_px, report.font_px = info["width"], info["font"]
            report.scrolls = info["scrolls"]
            if report.font_px < MAP_MIN_FONT_PX:
                report.problems.append(f"the map's text is {report.font_px:.1f} px at "
                                       f"{viewport.width} px, below {MAP_MIN_FONT_PX} px")
            if info["pageOverflow"] > OVERFLOW_TOLERANCE_PX:
                report.problems.append(f"the page is wider than the window by "
                                       f"{info['pageOverflow']} px with the map")
            if info["hint"] != report.scrolls:
                report.problems.append("the map " + ("scrolls sideways without" if
                                       report.scrolls else "fits, but shows") +
                                       " the hint that it scrolls")
            if info["captionOverflow"] > OVERFLOW_TOLERANCE_PX:
                report.problems.append(f"the map's legend or caption sticks out of the column "
                                       f"by {info['captionOverflow']:.0f} px")
            report.problems += [f"map node {n['id']} has no link or no hover title"
                                for n in info["nodes"] if not n["href"] or not n["title"]]
            claims = [n["href"] for n in info["nodes"] if n["href"].startswith("#claim-")]
            if sorted(info["strip"]) != sorted(claims):
                report.problems.append(f"the claims above the map ({info['strip']}) are not "
                                       f"the map's claims ({claims})")
            if report.scrolls and viewport.width >= MAP_FITS_FROM_PX:
                report.problems.append(f"the map scrolls sideways at {viewport.width} px: "
                                       "the column of its claims is cut off")
            if screenshot_dir is not None:
                path = Path(screenshot_dir) / viewport.name / "paper_map.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                # the window as a reader sees it with the map at its top (below the
                # sticky header: scrollIntoView keeps the page's scroll-padding-top)
                tab.evaluate("() => document.querySelector('figure.attnbook-map')"
                             ".scrollIntoView({block: 'start'})")
                tab.screenshot(path=str(path))
                report.screenshot = str(path)
            for node in _map_targets(info["nodes"]):
                tab.goto(base_url + page, wait_until="load", timeout=PAGE_TIMEOUT_S * 1000)
                tab.locator(f'[id="map-{node["id"]}"] a').click()
                target = node["href"].split("#", 1)[1]
                tab.wait_for_function("(id) => location.hash === '#' + id", arg=target)
                tab.wait_for_load_state("load")
                landed = tab.evaluate(_LANDED, target)
                where = tab.url.removeprefix(base_url)
                if landed is None:
                    report.problems.append(f"map node {node['id']} leads to {where}: no such id")
                    continue
                kind = "proof" if "proof" in landed["classes"].split() else (
                    "claim" if "attnbook-claim" in landed["classes"].split() else "")
                if not kind:
                    report.problems.append(f"map node {node['id']} leads to {where}, which is "
                                           f"not a statement ({landed['classes']!r})")
                if not (landed["top"] < landed["height"] and landed["bottom"] > 0):
                    report.problems.append(f"map node {node['id']} leads to {where}, but the "
                                           f"statement is out of view (top {landed['top']:.0f})")
                report.followed.append(f"{node['id']} -> {where} ({kind}: "
                                       f"{landed['text'].splitlines()[0]!r})")
            report.problems += [f"request outside the book: {u}" for u in dict.fromkeys(refused)]
            context.close()
        finally:
            browser.close()
    return report


_CLAIM_BLOCK = re.compile(r'class="attnbook-claim attnbook-claim-([a-z-]+)[^"]*" id="claim-(\w+)"')
_MAP_NODE = re.compile(r'<g id="map-([^"]+)" class="node attnbook-map-node attnbook-map-([a-z-]+)"')


def map_colour_problems(page_html: str) -> list[str]:
    """Where the colour of a claim in the paper map is not its badge in the claims
    dashboard of the same page (empty: every claim agrees; a claim missing from either
    is a problem too)."""
    badges = {cid: slug for slug, cid in _CLAIM_BLOCK.findall(page_html)}
    drawn = {nid.lower(): slug for nid, slug in _MAP_NODE.findall(page_html)}
    if not badges:
        return ["no block of the claims dashboard on the page"]
    return [f"claim {cid}: badge {slug}, map {drawn.get(cid, 'missing')}"
            for cid, slug in badges.items() if drawn.get(cid) != slug]


def summarize(reports: list[PageReport]) -> dict:
    """Counts over all reports: pages, formulas, figures, links, problems, tallest pages."""
    first = {r.page: r for r in reports if r.viewport == reports[0].viewport} if reports else {}
    tallest = sorted(reports, key=lambda r: -r.height_px)[:6]
    return {
        "pages": len(first),
        "page_views": len(reports),
        "formulas": sum(r.formulas for r in first.values()),
        "display_equations": sum(r.displays for r in first.values()),
        "tables": sum(r.tables for r in first.values()),
        "images": sum(r.images for r in first.values()),
        "links_internal_checked": sum(r.links_internal for r in reports),
        "links_external_not_followed": sum(r.links_external for r in reports),
        "problems": sum(len(r.problems) for r in reports),
        "notes": sum(len(r.notes) for r in reports),
        "tallest_pages": [f"{r.page} @ {r.viewport}: {r.height_px} px" for r in tallest],
    }


def default_html_dir() -> Path:
    return Path(os.environ.get(HTML_DIR_ENV, ROOT / "_build" / "html"))


def default_screenshot_dir(html_dir: Path) -> Path:
    return Path(os.environ.get(SCREENSHOT_DIR_ENV, Path(html_dir).parent / "screenshots"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every report here")
    parser.add_argument("--pages", nargs="*", default=None, help="only these pages")
    args = parser.parse_args(argv)
    html_dir = args.html_dir or default_html_dir()
    shots = args.screenshots or default_screenshot_dir(html_dir)
    reports = check_book(html_dir, shots, pages=args.pages)
    offline = check_offline_file(html_dir, first_page_with_math(html_dir, book_pages()) or
                                 "index.html")
    for r in reports:
        status = "ok" if not r.problems else f"{len(r.problems)} problem(s)"
        print(f"{r.viewport:8s} {r.page:35s} {r.height_px:6d} px  {r.formulas:4d} formulas "
              f"{r.images:3d} images {r.links_internal:4d} links  {status}")
        for p in r.problems:
            print(f"    FAIL {p}")
        for n in r.notes:
            print(f"    note {n}")
    print(f"file:// {offline.page}: MathJax {offline.mathjax}, {offline.formulas} formulas, "
          f"{'ok' if not offline.problems else offline.problems}")
    summary = summarize(reports)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "offline": asdict(offline),
                                         "reports": [asdict(r) for r in reports]}, indent=1))
    return 1 if summary["problems"] or offline.problems else 0


if __name__ == "__main__":
    sys.exit(main())
