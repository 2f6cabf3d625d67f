"""The paper map: the graph of the book's statements and claims, its verdicts, its
drawing, and the map of a mini book built for real."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from _ext.claims import CLAIMS
from _ext.dashboard import ClaimRow
from _ext.paper_map import (
    DEFINITION,
    DERIVED,
    MapError,
    build_map,
    result_verdict,
)
from _ext.paper_map_svg import plain, render_svg, to_dot

from conftest import (
    MINI_LEMMA,
    MINI_PROPOSITION,
    ROOT,
    SPHINX_CONFIG,
    build_mini_book,
    check_record,
    load_check_browser,
)

cb = load_check_browser()
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
_CLAIM = {c.id: c for c in CLAIMS}


def _st(label: str, kind: str = "lemma") -> dict[str, str]:
    return {"label": label, "kind": kind, "name": label.upper(), "docname": "ch"}


def _ref(source: str, target: str, in_proof: bool = False) -> dict:
    return {"source": source, "target": target, "in_proof": in_proof}


def _chk(name: str, result: str | None, passed: bool = True, **kw) -> dict:
    return check_record(name, passed=passed, result=result, chapter="ch", **kw)


def _row(cid: str, *checks: dict) -> ClaimRow:
    return ClaimRow(_CLAIM[cid], list(checks))


# ------------------------------------------------------------------------- the graph
def test_nodes_edges_and_verdicts():
    statements = [_st("def-a", "definition"), _st("lem-b"), _st("thm-c", "theorem")]
    statements.append(_st("prop-d", "proposition"))
    refs = [
        _ref("lem-b", "def-a"),
        _ref("lem-b", "def-a", in_proof=True),  # already a statement dependency
        _ref("lem-b", "lem-b", in_proof=True),  # a proof naming its own statement
        _ref("thm-c", "lem-b"),
        _ref("thm-c", "prop-d", in_proof=True),
    ]
    rows = [
        _row("C1", _chk("x", "lem-b"), _chk("i", "lem-b", role="identity")),
        _row("C3", _chk("y", "thm-c")),
        _row("C7d", _chk("z", "prop-d")),
    ]
    graph = build_map(statements, refs, rows, [_chk("s", "def-a", claim="setup")])
    assert list(graph.nodes) == ["def-a", "lem-b", "thm-c", "prop-d", "C1", "C3", "C7d"]
    assert {(e.source, e.target, e.kind) for e in graph.edges} == {
        ("def-a", "lem-b", "statement"),
        ("lem-b", "thm-c", "statement"),
        ("prop-d", "thm-c", "proof"),
        ("lem-b", "C1", "check"),
        ("thm-c", "C3", "check"),
        ("prop-d", "C7d", "check"),
    }
    verdicts = {k: n.verdict for k, n in graph.nodes.items()}
    assert verdicts == {
        "def-a": "PASS",  # a definition that a check names has a verdict
        "lem-b": "PASS",
        "thm-c": "PASS (part)",  # C3 is verified in part
        "prop-d": "MEASURED",  # C7d states nothing to verify
        "C1": "PASS",
        "C3": "PASS (part)",
        "C7d": "MEASURED",
    }
    assert graph.nodes["lem-b"].checks == 2
    assert graph.ancestors("C3") == {"thm-c", "lem-b", "prop-d", "def-a"}
    assert all(n.grounded for n in graph.nodes.values())
    assert graph.unverified() == []


def test_derived_only_and_grounding():
    statements = [_st("def-a", "definition"), _st("lem-b"), _st("thm-c", "theorem")]
    refs = [_ref("lem-b", "def-a"), _ref("thm-c", "lem-b", in_proof=True)]
    rows = [_row("C3", _chk("y", "thm-c"), _chk("m", "thm-c", passed=False))]
    rows[0].checks[1]["asserted"] = False  # a statement of the paper that did not hold
    graph = build_map(statements, refs, rows)
    assert graph.nodes["def-a"].verdict == DEFINITION  # nothing to verify
    assert graph.nodes["lem-b"].verdict == DERIVED
    assert graph.nodes["thm-c"].verdict == "NOT REPRODUCED"
    assert graph.nodes["C3"].verdict == rows[0].status == "NOT REPRODUCED"
    assert [n.id for n in graph.unverified()] == ["lem-b"]
    grounded = {k: n.grounded for k, n in graph.nodes.items()}
    assert grounded == {"def-a": True, "lem-b": True, "thm-c": False, "C3": False}
    # identities and controls alone verify nothing
    only_identity = [(_chk("i", "lem-b", role="identity"), None)]
    assert result_verdict(only_identity, "lemma") == DERIVED


def test_a_dangling_reference_names_the_node():
    statements = [_st("lem-b"), _st("thm-c", "theorem")]
    with pytest.raises(MapError, match=r"THM-C \(thm-c in ch\) refers to 'lem-x'"):
        build_map(statements, [_ref("thm-c", "lem-x")], [])
    with pytest.raises(MapError, match=r"LEM-B .* in its proof to 'gone'"):
        build_map(statements, [_ref("lem-b", "gone", in_proof=True)], [])
    row = _row("C1", _chk("x", "lem-nowhere"))
    with pytest.raises(
        MapError, match=r"check 'x' of ch names the result 'lem-nowhere'"
    ):
        build_map(statements, [], [row])


def test_a_cycle_names_its_nodes():
    statements = [_st("lem-a"), _st("lem-b"), _st("lem-c")]
    refs = [
        _ref("lem-b", "lem-a"),
        _ref("lem-c", "lem-b", in_proof=True),
        _ref("lem-a", "lem-c"),
    ]
    with pytest.raises(MapError, match=r"cycle, LEM-A \(lem-a\) -> LEM-B .*LEM-A"):
        build_map(statements, refs, [])


# ----------------------------------------------------------------------- the drawing
def _svg_graph(svg: str) -> tuple[dict[str, ET.Element], set[tuple[str, str, str]]]:
    """The node groups by id and the (source, target, kind) edges of a map's SVG."""
    root = ET.fromstring(svg)
    nodes, edges = {}, set()
    for group in root.iter(f"{SVG}g"):
        classes = group.get("class", "").split()
        if "node" in classes:
            nodes[group.get("id").removeprefix("map-")] = group
        elif "edge" in classes:
            source, target = group.find(f"{SVG}title").text.split("->")
            kind = next(c for c in classes if c.startswith("attnbook-map-"))
            edges.add((source, target, kind.removeprefix("attnbook-map-")))
    return nodes, edges


def test_drawing_links_hover_and_colours():
    statements = [_st("def-a", "definition"), _st("lem-b"), _st("thm-c", "theorem")]
    refs = [_ref("lem-b", "def-a"), _ref("thm-c", "lem-b", in_proof=True)]
    graph = build_map(statements, refs, [_row("C1", _chk("x", "lem-b"))])
    graph.nodes["lem-b"].title = 'One step, "exactly"'
    source = to_dot(graph, lambda n: f"page.html#{n}")
    svg = render_svg(source)
    assert "<?xml" not in svg and "DOCTYPE" not in svg and "<script" not in svg
    assert "http://" not in svg.replace("http://www.w3.org/", "")  # nothing fetched
    nodes, edges = _svg_graph(svg)
    assert set(nodes) == {"def-a", "lem-b", "thm-c", "C1"}
    assert edges == {
        ("def-a", "lem-b", "statement"),
        ("lem-b", "thm-c", "proof"),
        ("lem-b", "C1", "check"),
    }
    link = nodes["lem-b"].find(f".//{SVG}a")
    assert link.get(f"{XLINK}href") == link.get("href") == "page.html#lem-b"
    assert nodes["lem-b"].find(f"{SVG}title").text == 'LEM-B: One step, "exactly"'
    assert "attnbook-map-pass" in nodes["lem-b"].get("class")
    assert "attnbook-map-derived" in nodes["thm-c"].get("class")
    assert "attnbook-map-definition" in nodes["def-a"].get("class")
    assert plain(r"$\E_s \cdot \bv$ by $\norm{\bp}\,\alpha_s$") == "E_s · v by ‖p‖ α_s"
    style = ET.fromstring(svg).get("style")
    assert re.search(r"width: \d+px; min-width: \d+px", style)


def test_without_graphviz_the_drawing_says_what_to_install(monkeypatch):
    import _ext.paper_map_svg as drawing

    monkeypatch.setattr(drawing.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        drawing.render_svg("digraph { a }")


# -------------------------------------------------------------------- a real build
_CHAPTER = MINI_LEMMA + MINI_PROPOSITION


def _book(folder: Path, chapter: str) -> Path:
    """A mini book of one markdown chapter (no execution, no landing-page
    directives)."""
    folder.mkdir()
    (folder / "_config.yml").write_text(
        "title: mini\nexecute:\n  execute_notebooks: cache\n" + SPHINX_CONFIG
    )
    (folder / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: ch1\n"
    )
    (folder / "intro.md").write_text("# Mini\n")
    (folder / "ch1.md").write_text(chapter)
    return folder


def test_map_of_a_real_build(built_mini_book):
    """The map on the landing page of a built mini book (tests/conftest.py, built
    once): its nodes and arrows are the references written in the chapter, every node
    links to its statement, and every claim has the colour of its badge in the
    dashboard."""
    book, report, proc = (
        built_mini_book.folder,
        built_mini_book.report,
        built_mini_book.proc,
    )
    assert not report.failed, report.failed
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    html = (book / "_build" / "html" / "intro.html").read_text()
    svg = re.search(r"<svg .*?</svg>", html, re.S).group(0)
    nodes, edges = _svg_graph(svg)
    claims = [c.id for c in CLAIMS]
    assert set(nodes) == {"def-mini", "lem-mini", "prop-aux", "thm-mini", *claims}
    assert edges == {
        ("def-mini", "lem-mini", "statement"),
        ("prop-aux", "lem-mini", "proof"),
        ("lem-mini", "thm-mini", "statement"),
        ("prop-aux", "thm-mini", "proof"),
        ("lem-mini", "C1", "check"),
        ("thm-mini", "C3", "check"),
        ("thm-mini", "C2", "check"),
    }
    for label in ("def-mini", "lem-mini", "prop-aux", "thm-mini"):
        link = nodes[label].find(f".//{SVG}a")
        assert link.get("href") == f"ch1.html#{label}"
    names = {k: g.find(f"{SVG}title").text for k, g in nodes.items()}
    assert names["lem-mini"] == "Lemma 1: A lemma"
    assert names["thm-mini"] == "Theorem 1: The theorem"
    slug = {k: g.get("class").split()[-1] for k, g in nodes.items()}
    assert slug["lem-mini"] == "attnbook-map-pass"
    assert slug["thm-mini"] == "attnbook-map-not-reproduced"
    assert slug["prop-aux"] == "attnbook-map-derived"
    assert slug["def-mini"] == "attnbook-map-definition"
    assert cb.map_colour_problems(html) == []  # every claim has its badge's colour
    assert 'attnbook-claim-pass docutils container" id="claim-c1"' in html
    assert 'attnbook-claim-not-reproduced docutils container" id="claim-c2"' in html
    for cid in claims:
        assert nodes[cid].find(f".//{SVG}a").get("href") == f"#claim-{cid.lower()}"
    timing = re.search(r"paper map: (\d+) nodes.*its hooks took ([\d.]+) s", log)
    assert timing and int(timing.group(1)) == len(nodes)
    assert float(timing.group(2)) < 5.0


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            "```{prf:lemma} Late\n:label: lem-late\n\nUses {prf:ref}`lem-gone`.\n```\n",
            r"Lemma 2 \(lem-late in ch1\) refers to 'lem-gone'",
        ),
        (
            "```{prf:lemma} Loop\n:label: lem-loop\n\nUses {prf:ref}`thm-loop`.\n```"
            "\n\n```{prf:theorem} Back\n:label: thm-loop\n\nT.\n```\n\n"
            "```{prf:proof}\nBy {prf:ref}`lem-loop`.\n```\n",
            r"cycle, Lemma 2 \(lem-loop\) -> Theorem 1 \(thm-loop\) -> Lemma 2",
        ),
    ],
    ids=["dangling", "cycle"],
)
def test_the_build_fails_naming_the_node(tmp_path, extra, named):
    book = _book(tmp_path / "bad", _CHAPTER + "\n" + extra)
    proc = build_mini_book(book)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"paper map: .*" + named, log), log[-3000:]


_PDF_DIR = Path(os.environ.get("ATTNBOOK_PDF_DIR", ROOT / "_build" / "pdf"))
_HTML_DIR = Path(os.environ.get("ATTNBOOK_HTML_DIR", _PDF_DIR.parent / "html"))


@pytest.mark.skipif(
    not (_PDF_DIR / "intro.pdf").is_file() or not (_HTML_DIR / "intro.html").is_file(),
    reason=f"no built book with PDFs at {_PDF_DIR} (scripts/build-book.sh)",
)
def test_the_pdf_carries_the_map():
    """The printed landing page holds the map as a figure: every node's name, as text
    (the SVG is printed as vectors), and its caption."""
    from pypdf import PdfReader

    html = (_HTML_DIR / "intro.html").read_text()
    svg = re.search(r"<svg .*?</svg>", html, re.S).group(0)
    nodes, _ = _svg_graph(svg)
    names = {g.find(f"{SVG}title").text.split(":")[0] for g in nodes.values()}
    text = "\n".join(p.extract_text() for p in PdfReader(_PDF_DIR / "intro.pdf").pages)
    text = text.replace("\ufb01", "fi").replace("\ufb02", "fl")  # ligatures
    assert "as a map, laid out by Graphviz" in text.replace("\n", " ")
    missing = sorted(n for n in names if n not in text)
    assert not missing, f"map nodes missing from the PDF: {missing}"
