"""The paper map in the book build: ``{paper-map}`` on the landing page.

While Sphinx reads a document, :func:`collect` notes every ``{prf:...}`` statement and
every ``{prf:ref}`` inside a statement or inside the ``{prf:proof}`` that follows it
(sphinx-proof's own ``env.proof_list`` holds the labels, not the references) and keeps
them in the environment. Once every document is read, :func:`check_map` builds the map
of the statements alone and stops the build, naming the node, on a reference to a
statement that does not exist or on a cycle. When the page that holds ``{paper-map}``
is written, the map is built again with this build's records (the claims dashboard's
rows and the checks' ``result`` labels), laid out by Graphviz ``dot`` and put inline
in the page as SVG (:mod:`_ext.paper_map_svg`). The time spent in these hooks
is logged at the end of the build.

:func:`setup` connects it; ``records`` is the function that gives this build's records
(the claims dashboard's, so that both read the same run).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx_proof.nodes import NODE_TYPES, proof_node, unenumerable_node

from _ext.dashboard import claim_rows, other_checks
from _ext.paper_map import MapError, PaperMap, build_map
from _ext.paper_map_svg import map_html

__all__ = ["setup", "collect", "doctree_statements", "book_map", "claims_of"]

logger = logging.getLogger(__name__)
_STATEMENTS = (*NODE_TYPES.values(), unenumerable_node)


class paper_map_placeholder(nodes.General, nodes.Element):
    """Replaced by the paper map when the page is written."""


class PaperMapDirective(Directive):
    has_content = False

    def run(self):
        return [paper_map_placeholder()]


def claims_of(records: dict[str, dict]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The claims of the map and the checks that belong to none: the rows of the
    claims dashboard (so a claim's node has its badge) and the other checks."""
    others = [c for checks in other_checks(records).values() for c in checks]
    return claim_rows(records), others


def _title(node: nodes.Element) -> str:
    text = node.children[0].astext().strip() if node.children else ""
    return text[1:-1].strip() if text.startswith("(") and text.endswith(")") else text


def doctree_statements(
    doctree: nodes.document, docname: str
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """The statements of one document (label, kind, title) and the ``{prf:ref}``
    references inside them or inside their proofs (a proof belongs to the statement
    before it)."""
    statements: list[dict[str, str]] = []
    owner: dict[int, str | None] = {}
    current: str | None = None
    for node in doctree.findall(nodes.Element):
        if isinstance(node, _STATEMENTS):
            current = node["label"]
            statements.append(
                {
                    "label": current,
                    "kind": node["realtype"],
                    "title": _title(node),
                    "docname": docname,
                }
            )
        elif isinstance(node, proof_node):
            owner[id(node)] = current
    references: list[dict[str, Any]] = []
    for xref in doctree.findall(addnodes.pending_xref):
        if xref.get("refdomain") != "prf":
            continue
        parent = xref.parent
        while parent is not None and not isinstance(parent, (*_STATEMENTS, proof_node)):
            parent = parent.parent
        if parent is None:
            continue  # prose, not a statement or a proof
        in_proof = isinstance(parent, proof_node)
        source = owner[id(parent)] if in_proof else parent["label"]
        if source is None:
            raise ExtensionError(
                f"paper map: a {{prf:proof}} in {docname} follows no statement"
            )
        references.append(
            {"source": source, "target": xref["reftarget"], "in_proof": in_proof}
        )
    return statements, references


def _timed(fn: Callable) -> Callable:
    """``fn(app, ...)``, its time added to the map's total (logged at the end)."""

    def run(app, *args) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(app, *args)
        finally:
            app._attnbook_map_s = getattr(app, "_attnbook_map_s", 0.0) + (
                time.perf_counter() - t0
            )

    return run


def collect(app, doctree: nodes.document) -> None:
    """doctree-read: keep the document's statements and references in the env."""
    docname = app.env.docname
    found = doctree_statements(doctree, docname)
    if not hasattr(app.env, "attnbook_paper_map"):
        app.env.attnbook_paper_map = {}
    app.env.attnbook_paper_map[docname] = found


def _purge(app, env, docname: str) -> None:
    getattr(env, "attnbook_paper_map", {}).pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    mine = env.__dict__.setdefault("attnbook_paper_map", {})
    for docname in docnames:
        if docname in getattr(other, "attnbook_paper_map", {}):
            mine[docname] = other.attnbook_paper_map[docname]


def _name(env, st: dict[str, str]) -> str:
    """How the book numbers a statement: "Lemma 2.2" (the kind alone without a
    number)."""
    info = getattr(env, "proof_list", {}).get(st["label"], {})
    kind = st["kind"].title()
    try:
        number = env.toc_fignumbers[st["docname"]][info["countertype"]][st["label"]]
    except KeyError:
        return kind
    return f"{kind} {'.'.join(map(str, number))}"


def _order(env, docname: str) -> tuple:
    number = env.toc_secnumbers.get(docname, {}).get("", ())
    return (0, tuple(number), docname) if number else (1, (), docname)


def book_map(env, records: dict[str, dict] | None) -> PaperMap:
    """The map of the book in ``env``: its statements in the book's order, with the
    claims and checks of ``records`` (statements alone when None)."""
    found = getattr(env, "attnbook_paper_map", {})
    statements, references = [], []
    for docname in sorted(found, key=partial(_order, env)):
        sts, refs = found[docname]
        statements += [{**st, "name": _name(env, st)} for st in sts]
        references += refs
    claims, others = claims_of(records) if records is not None else ([], [])
    return build_map(statements, references, claims, others)


def check_map(app, env) -> None:
    """env-check-consistency: fail the build on a dangling reference or a cycle."""
    try:
        book_map(env, None)
    except MapError as err:
        raise ExtensionError(f"paper map: {err}") from err


def _render(app, doctree, docname: str, records: Callable) -> None:
    """doctree-resolved: the SVG of the map in place of ``{paper-map}``."""
    for node in list(doctree.findall(paper_map_placeholder)):
        try:
            graph = book_map(app.env, records(app))
        except MapError as err:
            raise ExtensionError(f"paper map: {err}") from err

        def href(target: str, graph=graph) -> str:
            st = graph.nodes[target]
            if st.kind == "claim":
                return f"#claim-{st.id.lower()}"
            uri = app.builder.get_relative_uri(docname, st.docname)
            return f"{uri}#{st.id}"

        try:
            html, summary = map_html(graph, href)
        except RuntimeError as err:  # no Graphviz, or dot failed
            raise ExtensionError(f"paper map: {err}") from err
        node.replace_self(nodes.raw("", html, format="html"))
        app._attnbook_map_summary = summary


def _report(app, exc) -> None:
    if exc is None and hasattr(app, "_attnbook_map_summary"):
        seconds = getattr(app, "_attnbook_map_s", 0.0)
        logger.info(
            f"[attnbook] paper map: {app._attnbook_map_summary}; its hooks took "
            f"{seconds:.2f} s"
        )


def setup(app, records: Callable[[Any], dict[str, dict]]) -> None:
    """Register ``{paper-map}`` and the hooks; ``records(app)`` gives this build's
    records."""
    app.add_node(paper_map_placeholder)
    app.add_css_file("paper_map.css")  # in _ext/static with attnbook.css
    app.add_directive("paper-map", PaperMapDirective)
    app.connect("doctree-read", _timed(collect))
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _timed(check_map))
    app.connect("doctree-resolved", _timed(partial(_render, records=records)))
    app.connect("build-finished", _report)
