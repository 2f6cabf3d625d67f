"""The paper map drawn: Graphviz ``dot`` lays it out, the SVG goes inline in the page.

:func:`to_dot` writes the map (:class:`_ext.paper_map.PaperMap`) in the DOT
language, read from left to right: one box per node, filled with the colour of its
verdict (the claims dashboard's badge colours, ``static/attnbook.css``), a solid
outline when everything it rests on is verified and a dashed one otherwise; solid
arrows for statement dependencies, dashed for proof dependencies, dotted from a result
to the claims whose checks verify it; the claims in the last column, in the dashboard's
order. Every node is a link to its statement, with its name and title as hover text.
:func:`render_svg` runs ``dot`` (the Graphviz package: ``apt-get install graphviz``)
and :func:`map_html` returns the figure (inline SVG, legend and caption): no script, no
font and nothing else from a network.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Callable

from _ext.claim_status import STATUS_CLASSES
from _ext.paper_map import (
    DEFINITION,
    DERIVED,
    VERDICTS,
    VERIFIED,
    PaperMap,
)

__all__ = [
    "FILL",
    "to_dot",
    "render_svg",
    "claims_strip",
    "map_html",
    "hover",
    "plain",
    "DOT_MISSING",
]

#: Fill and text colour of each verdict (the badges' colours for the dashboard's).
FILL: dict[str, tuple[str, str]] = {
    "PASS": ("#1a7f37", "#ffffff"),
    "PASS (part)": ("#4b8b3b", "#ffffff"),
    "MEASURED": ("#0969da", "#ffffff"),
    "NOT REPRODUCED": ("#bc4c00", "#ffffff"),
    "FAIL": ("#cf222e", "#ffffff"),
    "NOT CHECKED": ("#6e7781", "#ffffff"),
    DERIVED: ("#eaeef2", "#1f2328"),
    DEFINITION: ("#ffffff", "#57606a"),
}
_LEGEND = {
    DERIVED: "derived only: a result that no check verifies",
    DEFINITION: "definition: a definition, assumption or remark, nothing to verify",
}
_ONLY_WHEN_DRAWN = ("FAIL", "NOT CHECKED")  # in the legend when a node has it
_SLUG = {**STATUS_CLASSES, DERIVED: "derived", DEFINITION: "definition"}
_EDGE = {"statement": "solid", "proof": "dashed", "check": "dotted"}
FONT = "Helvetica,Arial,sans-serif"
FONT_PT = 12  # the nodes' text, drawn at one CSS pixel per point
#: The map is never drawn smaller than this share of its size (text of 10.2 px, the
#: whole map in the 672 px column of a 1280 px window): a narrower column (a phone)
#: scrolls it sideways instead.
MIN_SCALE = 0.85
# The page around the column at the widths where the map scrolls (paddings), in px.
NARROW_EXTRA_PX = 48
DOT_MISSING = (
    "the paper map needs Graphviz's `dot` program: install the Graphviz package "
    "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _attrs(**kw: str | float) -> str:
    return "[" + ", ".join(f"{k}={_quote(str(v))}" for k, v in kw.items()) + "]"


# TeX of the claims' statements as plain text, for the hover text (which shows no math).
_TEX = {
    r"\E": "E",
    r"\bp": "p",
    r"\bv": "v",
    r"\cdot": "·",
    r"\alpha": "α",
    r"\eta": "η",
    r"\sigma": "σ",
    r"\sqrt": "√",
    r"\mid": "|",
    r"\,": " ",
}


def plain(text: str) -> str:
    """``text`` with its ``$...$`` TeX made plain: ``$\\E_s \\cdot \\bv$`` ->
    ``E_s · v``."""
    text = re.sub(r"\\norm\{([^}]*)\}", r"‖\1‖", text.replace("$", ""))
    text = re.sub(r"\\math(?:rm|cal)\{?([^}\s]*)\}?", r"\1", text)
    for tex, shown in _TEX.items():
        text = re.sub(re.escape(tex) + r"(?![A-Za-z])", shown, text)
    return text.replace("\\", "")


#: The kinds of statement as a box names them: short, so that the whole map fits the
#: column of a 1280 px window with its text at 10 px or more (the hover text and the
#: statement itself give the full name).
SHORT_KINDS = {
    "Definition": "Def.",
    "Assumption": "Asm.",
    "Proposition": "Prop.",
    "Conjecture": "Conj.",
    "Lemma": "Lem.",
    "Theorem": "Thm.",
    "Corollary": "Cor.",
    "Remark": "Rem.",
    "Example": "Ex.",
    "Observation": "Obs.",
}


def short_name(name: str) -> str:
    """A statement's name as its box shows it: ``Proposition 5.5`` -> ``Prop. 5.5``."""
    kind, _, rest = name.partition(" ")
    return f"{SHORT_KINDS[kind]} {rest}".strip() if kind in SHORT_KINDS else name


def hover(node) -> str:
    """The hover text of a node: its name and title (a claim: its statement, cut)."""
    title = re.sub(r"\s+", " ", plain(node.title)).strip()
    if len(title) > 160:
        title = title[:157].rsplit(" ", 1)[0] + "…"
    return f"{node.name}: {title}" if title else node.name


def to_dot(graph: PaperMap, href: Callable[[str], str]) -> str:
    """The map in the DOT language; ``href(node id)`` is the link of a node."""
    lines = [
        "digraph paper_map {",
        f"  graph {_attrs(rankdir='LR', nodesep=0.12, ranksep=0.32, bgcolor='transparent', fontname=FONT, newrank='true')};",  # noqa: E501
        f"  node {_attrs(shape='box', style='rounded,filled', fontname=FONT, fontsize=FONT_PT, margin='0.06,0.03', height=0.3, width=0.3, penwidth=1.6)};",  # noqa: E501
        f"  edge {_attrs(color='#57606a', arrowsize=0.6, penwidth=1.1)};",
    ]
    claims = []
    for node in graph.nodes.values():
        fill, ink = FILL[node.verdict]
        style = "filled" if node.kind == "claim" else "rounded,filled"
        style += "" if node.grounded else ",dashed"
        attrs = dict(
            label=short_name(node.name),
            fillcolor=fill,
            fontcolor=ink,
            color="#1f2328" if node.grounded else "#57606a",
            style=style,
            URL=href(node.id),
            tooltip=hover(node),
            target="_top",
            id=f"map-{node.id}",
            **{"class": f"attnbook-map-node attnbook-map-{_SLUG[node.verdict]}"},
        )
        if node.kind == "claim":
            attrs.update(fontsize=13, penwidth=2.2)
            claims.append(node.id)
        lines.append(f"  {_quote(node.id)} {_attrs(**attrs)};")
    if claims:  # the claims in the last column, in the dashboard's order
        order = "".join(
            f" {_quote(a)} -> {_quote(b)} [style=invis];"
            for a, b in zip(claims, claims[1:])
        )
        members = " ".join(_quote(c) + ";" for c in claims)
        lines.append(f"  {{ rank=sink; {members}{order} }}")
    for edge in graph.edges:
        lines.append(
            f"  {_quote(edge.source)} -> {_quote(edge.target)} "
            + _attrs(style=_EDGE[edge.kind], **{"class": f"attnbook-map-{edge.kind}"})
            + ";"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot_source: str) -> str:
    """``dot -Tsvg`` of ``dot_source``, made fit to sit inline in a page: no XML
    prologue, sized by its viewBox (one CSS pixel per point), every node's ``<title>``
    its hover text. Raises ``RuntimeError`` when ``dot`` is missing or fails."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(DOT_MISSING)
    proc = subprocess.run(
        [exe, "-Tsvg"], input=dot_source, capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.strip()}")
    ns = {"svg": "http://www.w3.org/2000/svg", "xlink": "http://www.w3.org/1999/xlink"}
    for prefix, uri in ns.items():
        ET.register_namespace("" if prefix == "svg" else prefix, uri)
    root = ET.fromstring(proc.stdout)
    width = float(root.get("width", "0pt").removesuffix("pt"))
    height = float(root.get("height", "0pt").removesuffix("pt"))
    for attr in ("width", "height"):
        root.attrib.pop(attr, None)
    root.set("class", "attnbook-map-svg")
    root.set("role", "group")  # not "img": its links stay links for a screen reader
    root.set("aria-labelledby", "attnbook-map-title")
    root.set(
        "style",
        f"width: {width:.0f}px; min-width: {MIN_SCALE * width:.0f}px; "
        f"aspect-ratio: {width:.1f} / {height:.1f}",
    )
    graph_title = root.find("svg:g/svg:title", ns)
    if graph_title is not None:
        graph_title.text = "The paper as a map"
        graph_title.set("id", "attnbook-map-title")
    for group in root.iter(f"{{{ns['svg']}}}g"):
        link = group.find(".//svg:a", ns)
        title = group.find("svg:title", ns)
        if link is not None and title is not None:
            # the hover text of the node, shown by every browser (dot's <title> is
            # the node's id)
            title.text = link.get(f"{{{ns['xlink']}}}title", title.text)
            href = link.get(f"{{{ns['xlink']}}}href")
            if href is not None:
                link.set("href", href)  # SVG 2 links, for scripts that read href
    return ET.tostring(root, encoding="unicode")


def _line(dash: str) -> str:
    """A short horizontal arrow drawn with the dash pattern ``dash``, for the legend."""
    return (
        '<svg class="attnbook-map-line" viewBox="0 0 30 10" aria-hidden="true">'
        f'<line x1="1" y1="5" x2="24" y2="5" stroke-dasharray="{dash}"/>'
        '<polygon points="23,1.5 29,5 23,8.5"/></svg>'
    )


def _legend(drawn: set[str]) -> str:
    """The keys of the map: a box per verdict drawn (the dashboard's four always), the
    three arrows and the two outlines."""
    keys = []
    for verdict in VERDICTS:
        if verdict in _ONLY_WHEN_DRAWN and verdict not in drawn:
            continue
        fill, ink = FILL[verdict]
        words = _LEGEND.get(verdict, "").partition(": ")[2]
        keys.append(
            f'<span class="attnbook-map-key" style="background:{fill};color:{ink}">'
            f"{html.escape(verdict)}</span>"
            + (f" {html.escape(words)}" if words else "")
        )
    keys += [
        f"{_line('none')} used in the statement",
        f"{_line('4 3')} used in the proof",
        f"{_line('1.5 2.5')} verified by the claim's checks",
        '<span class="attnbook-map-key attnbook-map-solid">&#8195;</span> everything '
        "it rests on is verified",
        '<span class="attnbook-map-key attnbook-map-dashed">&#8195;</span> something '
        "it rests on is not",
    ]
    return (
        '<ul class="attnbook-map-legend">'
        + "".join(f"<li>{k}</li>" for k in keys)
        + "</ul>"
    )


def claims_strip(graph: PaperMap, href: Callable[[str], str]) -> str:
    """The claims of the map as a row of boxes above it, each in its verdict's colour
    with its badge in words and a link to its block of the dashboard: at every width
    the reader sees which claims hold before the map (which a phone scrolls)."""
    keys = []
    for node in graph.nodes.values():
        if node.kind != "claim":
            continue
        fill, ink = FILL[node.verdict]
        keys.append(
            f'<li><a class="attnbook-map-key" href="{html.escape(href(node.id))}" '
            f'style="background:{fill};color:{ink}" title="{html.escape(hover(node))}">'
            f"{html.escape(node.name)} "
            f"<span>{html.escape(node.verdict)}</span></a></li>"
        )
    if not keys:
        return ""
    return (
        '<p class="attnbook-map-claims-title">The paper\'s claims, as this build '
        "verified them (the last column of the map):</p>"
        f'<ul class="attnbook-map-claims">{"".join(keys)}</ul>'
    )


def map_html(graph: PaperMap, href: Callable[[str], str]) -> tuple[str, str]:
    """The figure of the map (inline SVG, legend, caption) and a one-line summary."""
    svg = render_svg(to_dot(graph, href))
    results = [n for n in graph.nodes.values() if n.kind != "claim"]
    claims = [n for n in graph.nodes.values() if n.kind == "claim"]
    kinds = {k: sum(e.kind == k for e in graph.edges) for k in _EDGE}
    derived = graph.unverified()
    verified = [n for n in results if n.verdict in VERIFIED - {DEFINITION}]
    missed = [n for n in results if n.verdict in ("NOT REPRODUCED", "FAIL")]
    caption = (
        f"The book's {len(results)} statements and the paper's {len(claims)} claims "
        f"as a map, laid out by Graphviz from this build. An arrow runs from a result "
        f"to what uses it: solid when a statement uses it ({kinds['statement']}), "
        f"dashed when a proof does ({kinds['proof']}), dotted to a claim whose checks "
        f"verify it ({kinds['check']}). A box's colour is the verdict of its own "
        f"checks ({len(verified)} results verified, "
        + (f"{len(missed)} not reproduced, " if missed else "")
        + f"{len(derived)} derived only), a "
        f"claim's is its badge below; a solid outline means that everything the box "
        f"rests on is verified too, a dashed one that something is not. A box names "
        f"its statement in short ({', '.join(sorted(set(SHORT_KINDS.values())))}); "
        f"hover for the full name and title, click to read it."
    )
    # a column narrower than the map's smallest size (a phone) scrolls it: say so there
    narrow = float(re.search(r"min-width: ([\d.]+)px", svg).group(1)) + NARROW_EXTRA_PX
    out = (
        '<figure class="attnbook-map" id="paper-map">'
        f"<style>@media (max-width: {narrow:.0f}px) {{ #paper-map "
        ".attnbook-map-hint { display: block; } }</style>"
        f"{claims_strip(graph, href)}"
        '<p class="attnbook-map-hint">Swipe the map sideways to see all of it.</p>'
        f'<div class="attnbook-map-scroll">{svg}</div>'
        f"<figcaption>{_legend({n.verdict for n in graph.nodes.values()})}"
        f"<p>{html.escape(caption)}</p></figcaption>"
        "</figure>"
    )
    summary = (
        f"{len(graph.nodes)} nodes ({len(results)} statements, {len(claims)} claims), "
        f"{len(graph.edges)} edges "
        f"({', '.join(f'{n} {k}' for k, n in kinds.items())}); "
        f"derived only: {', '.join(n.id for n in derived) or 'none'}"
    )
    return out, summary
