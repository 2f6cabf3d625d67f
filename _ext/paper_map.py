"""The paper as a map: the book's results as a dependency graph, each with its verdict.

Nodes are the statements of the book (every ``{prf:...}`` directive: definitions,
assumptions, lemmas, propositions, theorems, conjectures, ...) and the claims of the
claims dashboard. Edges run from what is used to what uses it:

- ``statement``: a ``{prf:ref}`` inside a statement;
- ``proof``: a ``{prf:ref}`` inside the ``{prf:proof}`` that follows a statement (left
  out where the statement itself already refers to the same result);
- ``check``: a recorded check of a claim names a result by its ``result`` label, so the
  claim rests on that result.

A result's *verdict* comes from its own checks (those whose ``result`` is its label) by
the dashboard's status rule (:func:`_ext.claim_status.status_of`); a result
that no check verifies is *derived only*; a definition or an assumption without checks
has nothing to verify (*definition*). A claim's verdict is its dashboard badge.
:attr:`MapNode.grounded` says whether everything a node rests on, directly or through
other results, is verified.

:func:`build_map` takes plain data (what :mod:`_ext.paper_map_ext` collects
from Sphinx's environment) and raises :class:`MapError`, naming the node, on a
reference to a statement that does not exist or on a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from _ext.claim_status import is_evidence, status_of

__all__ = [
    "DERIVED",
    "DEFINITION",
    "VERDICTS",
    "VERIFIED",
    "DEFINITION_KINDS",
    "MapError",
    "MapNode",
    "MapEdge",
    "PaperMap",
    "build_map",
    "result_verdict",
]

#: The verdict of a result that no check verifies.
DERIVED = "derived only"
#: The verdict of a definition, assumption or notation that no check names.
DEFINITION = "definition"
#: Every verdict a node can have, in the order of the legend.
VERDICTS = (
    "PASS",
    "PASS (part)",
    "MEASURED",
    "NOT REPRODUCED",
    "FAIL",
    "NOT CHECKED",  # a claim without evidence
    DERIVED,
    DEFINITION,
)
#: Verdicts that count as verified when a node's ancestors are looked at (a
#: definition has nothing to verify and does not hold a node back either).
VERIFIED = frozenset({"PASS", "PASS (part)", "MEASURED", DEFINITION})
#: Statement kinds that state rather than claim: without checks they are definitions.
DEFINITION_KINDS = frozenset(
    {"definition", "assumption", "notation", "axiom", "example", "algorithm", "remark"}
)


class MapError(ValueError):
    """The book's statements do not form a map: a dangling reference or a cycle."""


class ClaimLike(Protocol):
    """What the map reads of a row of the claims dashboard
    (:class:`_ext.dashboard.ClaimRow`)."""

    claim: Any  # .id, .statement, .partial, .verifiable
    checks: list[dict[str, Any]]
    status: str


@dataclass
class MapNode:
    """A statement of the book or a claim of the dashboard."""

    id: str  # the statement's label, or the claim's id ("C3")
    kind: str  # "lemma", "theorem", ... or "claim"
    name: str  # "Lemma 2.2", "C3"
    title: str = ""  # the statement's title, or the claim in words
    docname: str = ""  # the document that states it ("" for a claim)
    verdict: str = DERIVED
    grounded: bool = True  # every node it rests on (transitively) is verified
    checks: int = 0  # how many recorded checks name it (results) or it has (claims)


@dataclass(frozen=True)
class MapEdge:
    """``source`` is used by ``target``: in its statement, its proof or its checks."""

    source: str
    target: str
    kind: str  # "statement", "proof" or "check"


@dataclass
class PaperMap:
    """The nodes (statements first, in the book's order, then the claims) and edges."""

    nodes: dict[str, MapNode] = field(default_factory=dict)
    edges: list[MapEdge] = field(default_factory=list)

    def parents(self, node: str) -> list[str]:
        """The nodes ``node`` uses directly."""
        return [e.source for e in self.edges if e.target == node]

    def ancestors(self, node: str) -> set[str]:
        """Every node ``node`` rests on, directly or through others."""
        seen: set[str] = set()
        todo = self.parents(node)
        while todo:
            here = todo.pop()
            if here not in seen:
                seen.add(here)
                todo += self.parents(here)
        return seen

    def unverified(self) -> list[MapNode]:
        """The results (not definitions, not claims) that no check verifies."""
        return [n for n in self.nodes.values() if n.verdict == DERIVED]


def _describe(node: MapNode) -> str:
    where = f" in {node.docname}" if node.docname else ""
    return f"{node.name} ({node.id}{where})"


def result_verdict(pairs: Iterable[tuple[dict[str, Any], Any]], kind: str) -> str:
    """The verdict of a result of kind ``kind`` from its recorded checks, each paired
    with the claim (:class:`_ext.claims.Claim`, or None) whose dashboard row
    holds it: :func:`~_ext.claim_status.status_of` over the checks,
    ``MEASURED`` when all its evidence belongs to claims that state nothing to verify,
    ``PASS (part)`` when some of it belongs to a claim the book verifies in part;
    without evidence :data:`DERIVED` (:data:`DEFINITION` for a definition kind)."""
    pairs = list(pairs)
    checks = [chk for chk, _ in pairs]
    claims = [claim for chk, claim in pairs if is_evidence(chk)]
    status = status_of(
        checks,
        verifiable=not claims or any(c is None or c.verifiable for c in claims),
        partial=any(c is not None and c.partial for c in claims),
    )
    if status == "NOT CHECKED":
        return DEFINITION if kind in DEFINITION_KINDS else DERIVED
    return status


def _find_cycle(nodes: Iterable[str], edges: list[MapEdge]) -> list[str] | None:
    """A cycle of ``edges`` as a list of node ids (first = last), or None."""
    out: dict[str, list[str]] = {}
    for edge in edges:
        out.setdefault(edge.source, []).append(edge.target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in nodes:
        if state.get(root):
            continue
        path = [root]
        stack = [iter(out.get(root, ()))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(out.get(nxt, ())))
    return None


def build_map(
    statements: list[dict[str, str]],
    references: list[dict[str, Any]],
    claims: list[ClaimLike],
    other_checks: list[dict[str, Any]] = (),
) -> PaperMap:
    """The map of the book.

    ``statements``: ``{"label", "kind", "name", "title", "docname"}`` per statement, in
    the book's order; ``references``: ``{"source", "target", "in_proof"}`` per
    ``{prf:ref}`` inside a statement (``in_proof`` false) or its proof (true);
    ``claims``: the rows of the claims dashboard with their checks; ``other_checks``:
    the recorded checks that belong to no claim. Raises :class:`MapError` naming the
    node on a reference, or a check's ``result``, that names no statement, and on a
    cycle of statement and proof dependencies.
    """
    graph = PaperMap()
    for st in statements:
        graph.nodes[st["label"]] = MapNode(
            st["label"],
            st["kind"],
            st.get("name") or f"{st['kind'].title()} {st['label']}",
            st.get("title", ""),
            st.get("docname", ""),
        )
    edges: dict[tuple[str, str], str] = {}
    for ref in sorted(references, key=lambda r: bool(r["in_proof"])):
        source, target = ref["target"], ref["source"]
        if target not in graph.nodes:
            raise MapError(f"a reference is made from an unknown statement {target!r}")
        if source not in graph.nodes:
            raise MapError(
                f"{_describe(graph.nodes[target])} refers "
                f"{'in its proof ' if ref['in_proof'] else ''}to {source!r}, which no "
                "statement of the book is labelled with"
            )
        if source != target:
            kind = "proof" if ref["in_proof"] else "statement"
            edges.setdefault((source, target), kind)
    graph.edges = [MapEdge(s, t, k) for (s, t), k in edges.items()]
    cycle = _find_cycle(graph.nodes, graph.edges)
    if cycle:
        names = " -> ".join(graph.nodes[n].name + f" ({n})" for n in cycle)
        raise MapError(
            f"the statements refer to each other in a cycle, {names} (each used by "
            f"the next): "
            f"{_describe(graph.nodes[cycle[0]])} rests on itself"
        )

    by_result: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    placed = [(chk, row.claim) for row in claims for chk in row.checks]
    placed += [(chk, None) for chk in other_checks]
    for chk, claim in placed:
        label = chk.get("result")
        if not label:
            continue
        if label not in graph.nodes:
            raise MapError(
                f"the check {chk['name']!r} of {chk.get('chapter', 'a chapter')} names "
                f"the result {label!r}, which no statement of the book is labelled with"
            )
        by_result.setdefault(label, []).append((chk, claim))
    for label, node in graph.nodes.items():
        found = by_result.get(label, [])
        node.verdict = result_verdict(found, node.kind)
        node.checks = len(found)
    for row in claims:
        cid = row.claim.id
        graph.nodes[cid] = MapNode(
            cid, "claim", cid, row.claim.statement, verdict=row.status
        )
        graph.nodes[cid].checks = len(row.checks)
        for label in dict.fromkeys(c["result"] for c in row.checks if c.get("result")):
            graph.edges.append(MapEdge(label, cid, "check"))
    for node in graph.nodes.values():
        node.grounded = all(
            graph.nodes[a].verdict in VERIFIED for a in graph.ancestors(node.id)
        )
    return graph
