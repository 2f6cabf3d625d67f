"""Sphinx extension: each page loads every script once, and offers its PDF.

Sphinx 7.4 registers an inline script added after the builder started (as
``sphinx_thebe`` adds its ``const THEBE_JS_URL = ...``) twice, once with filename
``None`` and once with ``''``; the browser then stops on "Identifier 'THEBE_JS_URL' has
already been declared". This drops the second copy of any script, identified by its file
and attributes, from every page.

The theme's download menu offers ``.pdf`` as the browser's print dialog; here it links
the page's own PDF instead (``pdf/<page>.pdf``, printed by ``scripts/build_pdf.py``
after the HTML build) and adds the whole book's (``pdf/attnbook.pdf``).

Every image of a figure gets its caption as alternative text (:func:`describe_figures`;
without it, Sphinx writes the image's hashed file name), its mathematics in plain
characters (:func:`plain_tex`).
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes

#: TeX commands of the captions and the characters that stand for them in alt text.
_TEX_WORDS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "eta": "η", "sigma": "σ",
    "rho": "ρ", "mu": "μ", "tau": "τ", "theta": "θ", "lambda": "λ", "epsilon": "ε",
    "varepsilon": "ε", "Delta": "Δ", "cdot": "·", "times": "×", "le": "≤", "leq": "≤",
    "ge": "≥", "geq": "≥", "approx": "≈", "to": "→", "infty": "∞", "pm": "±",
    "lVert": "‖", "rVert": "‖", "|": "‖", "mid": "|", "ldots": "…", "dots": "…",
    "star": "⋆", "log": "log", "cos": "cos", "exp": "exp", "sqrt": "√", "in": "∈",
    "E": "E", "bp": "p", "bv": "v", "bX": "X", "bq": "q", "bA": "A", "bW": "W",
}  # fmt: skip
#: Commands that only style their argument: dropped, the argument kept.
_WRAPPERS = {
    "boldsymbol",
    "mathbf",
    "mathrm",
    "mathcal",
    "operatorname",
    "text",
    "mathbb",
}


def plain_tex(tex: str) -> str:
    """TeX as plain characters for alt text: ``\\boldsymbol{E}_s\\cdot\\bv`` ->
    ``E_s·v``, ``\\frac{a}{b}`` -> ``a/b``; unknown commands lose their backslash."""
    text = re.sub(r"\\(?:frac|tfrac|dfrac)\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", tex)
    text = re.sub(r"\\norm\{([^{}]*)\}", r"‖\1‖", text)
    text = re.sub(
        r"\\([A-Za-z]+|\|)",
        lambda m: _TEX_WORDS.get(
            m.group(1), "" if m.group(1) in _WRAPPERS else m.group(1)
        ),
        text,
    )
    text = re.sub(r"\\[,;:! ]", " ", text)
    return re.sub(r"\s+", " ", text.replace("{", "").replace("}", "")).strip()


def caption_text(caption: nodes.Element) -> str:
    """A caption's words, its mathematics in plain characters."""
    parts = []
    for node in caption.findall(nodes.Text):
        parent = node.parent
        if isinstance(parent, nodes.math):
            parts.append(plain_tex(node.astext()))
        else:
            parts.append(node.astext())
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def describe_figures(app: Any, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved: each image in a figure takes the figure's caption as its
    alternative text, unless it has one of its own."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        text = caption_text(caption)
        for image in figure.findall(nodes.image):
            if text and not image.get("alt"):
                image["alt"] = text


def _key(script: Any) -> tuple:
    return (script.filename or "", tuple(sorted(script.attributes.items())))


def dedupe_scripts(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Keep the first of identical scripts in ``context["script_files"]``, in order."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


#: Where the PDFs of the pages and of the whole book are published, in the HTML folder.
PDF_FOLDER = "pdf"
BOOK_PDF = "attnbook.pdf"


def page_pdf(pagename: str) -> str:
    """The PDF of a page: ``chapters/01_setup`` -> ``pdf/01_setup.pdf``."""
    return f"{PDF_FOLDER}/{pagename.rsplit('/', 1)[-1]}.pdf"


def link_pdfs(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """In the download menu: the page's PDF in place of the print dialog, and the
    whole book's PDF."""
    pathto = context.get("pathto")
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons" or pathto is None:
            continue
        buttons = [
            b for b in group["buttons"] if b.get("label") != "download-pdf-button"
        ]
        for url, text, tooltip, label in (
            (page_pdf(pagename), ".pdf", "Download this page as PDF", "download-pdf"),
            (
                f"{PDF_FOLDER}/{BOOK_PDF}",
                "book .pdf",
                "Download the whole book as one PDF",
                "download-book-pdf",
            ),
        ):
            buttons.append(
                {
                    "type": "link",
                    "url": pathto(url, 1),
                    "text": text,
                    "tooltip": tooltip,
                    "icon": "fas fa-file-pdf",
                    "label": f"{label}-button",
                }
            )
        group["buttons"] = buttons


def setup(app: Any) -> dict:
    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("html-page-context", link_pdfs, priority=600)
    app.connect("doctree-resolved", describe_figures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
