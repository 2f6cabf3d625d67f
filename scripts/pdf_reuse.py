"""Which pages' PDFs a build must print again: a digest of each built page, kept beside
its PDF.

A page's digest covers what its print depends on: the bytes of its HTML file, of every
file of the build that the page loads (style sheets, scripts, images: the ``src`` and
``href`` of the page that name a file of the build other than an HTML page or the search
index, which every page loads and every edit of any page changes), and the
printing itself (``print_key``: the source of the printing scripts, the Chromium used,
the address the links are published at). ``scripts/build_pdf.py`` keeps the digests,
the pages' titles and notes in ``<out>/pages.json`` and the unnumbered print of every
page in ``<out>/.parts/``, reprints only the pages whose digest changed, and merges
the book's PDF again only when one of its parts or titles changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

MANIFEST = "pages.json"
#: Files a page loads that do not change its print: the search index (every page
#: loads it, and an edit of any page changes it).
NOT_PRINTED = frozenset({"searchindex.js"})
PARTS = ".parts"
#: ``src="..."`` and ``href="..."`` attributes of a page.
_REFERENCE = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"'#?]+)""")


def loaded_files(html_dir: Path, page: str) -> list[Path]:
    """The files of the build ``html_dir`` that the page ``page`` (a path relative to
    it, ``chapters/01_setup.html``) loads, sorted: every relative ``src`` or ``href``
    naming an existing file that is not an HTML page nor in :data:`NOT_PRINTED`."""
    path = html_dir / page
    root = html_dir.resolve()
    found = set()
    for target in _REFERENCE.findall(path.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.endswith((".html", "/")):
            continue
        file = (path.parent / unquote(parts.path)).resolve()
        if (
            file.is_file()
            and file.is_relative_to(root)
            and file.name not in NOT_PRINTED
        ):
            found.add(file)
    return sorted(found)


def page_digest(html_dir: Path, page: str, print_key: str) -> str:
    """SHA-256 of the page ``page`` of ``html_dir`` as printed: its HTML, the files it
    loads (by their path in the build and their bytes) and ``print_key``. Raises
    ``FileNotFoundError`` when the page is not there."""
    path = html_dir / page
    if not path.is_file():
        raise FileNotFoundError(f"no built page {path}")
    digest = hashlib.sha256(print_key.encode())
    digest.update(b"\0" + page.encode() + b"\0" + path.read_bytes())
    root = html_dir.resolve()
    for file in loaded_files(html_dir, page):
        digest.update(b"\0" + str(file.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def print_key(sources: list[Path], *settings: str) -> str:
    """What every page's print depends on besides the page: the bytes of ``sources``
    (the printing scripts) and ``settings`` (the Chromium, the published address)."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    for setting in settings:
        digest.update(setting.encode() + b"\0")
    return digest.hexdigest()


def load_manifest(out: Path) -> dict:
    """The digests, titles and notes of the pages printed last into ``out``
    (``{"pages": {page: {...}}, "book": digest}``); empty when there is none or it
    cannot be read."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return {"pages": {}, "book": None}
    if not isinstance(manifest, dict) or not isinstance(manifest.get("pages"), dict):
        return {"pages": {}, "book": None}
    return manifest


def save_manifest(out: Path, manifest: dict) -> None:
    """Write ``manifest`` to ``out/pages.json`` (through a temporary file, so that an
    interrupted write leaves no half manifest)."""
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    tmp.replace(out / MANIFEST)


def pages_to_print(
    out: Path, digests: dict[str, str], manifest: dict, pdf_name
) -> list[str]:
    """The pages (keys of ``digests``, in their order) whose PDF must be printed: those
    whose digest is not the one in ``manifest``, or whose unnumbered print
    (``out/.parts/<pdf_name(page)>``) or numbered PDF (``out/<pdf_name(page)>``) is
    missing."""
    known = manifest.get("pages", {})
    return [
        page
        for page, digest in digests.items()
        if known.get(page, {}).get("digest") != digest
        or not (out / PARTS / pdf_name(page)).is_file()
        or not (out / pdf_name(page)).is_file()
    ]


def book_digest(parts: list, titles: dict[str, str], digests: dict[str, str]) -> str:
    """SHA-256 of what the book's PDF is merged from: the table of contents
    (``parts``), the pages' titles and their digests."""
    return hashlib.sha256(
        json.dumps([parts, titles, digests], sort_keys=True).encode()
    ).hexdigest()
