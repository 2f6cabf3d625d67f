"""The book's indexes: every titled statement in the general index, and the proof
index by kind, numbered and titled.

Every ``{prf:...}`` statement with a title (a definition, an assumption, a lemma, ...)
becomes an entry of the general index under its title (:class:`StatementTerms`, a
transform that runs before Sphinx collects the index entries), so the index lists the
book's terms and results. sphinx-proof's own *Proof Index* lists the raw labels
(``asm-one``), each under a heading of its own; :class:`TitledProofIndex` takes its
place: one heading per kind, each statement by its number and title ("Assumption 1.1:
One important token per sequence").
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.domains import Index, IndexEntry
from sphinx.transforms import SphinxTransform
from sphinx_proof.nodes import NODE_TYPES, unenumerable_node

__all__ = ["statement_title", "StatementTerms", "TitledProofIndex", "setup"]

_STATEMENTS = (*NODE_TYPES.values(), unenumerable_node)


def statement_title(node: nodes.Element) -> str:
    """The title a statement was given (``{prf:lemma} One step``), or ""."""
    first = node.children[0] if node.children else None
    if not isinstance(first, nodes.title):
        return ""
    text = first.astext().strip()
    return text[1:-1].strip() if text.startswith("(") and text.endswith(")") else text


class StatementTerms(SphinxTransform):
    """Put every titled statement in the general index, under its title."""

    default_priority = 840  # before SphinxDomains (850) collects the index entries

    def apply(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(lambda n: isinstance(n, _STATEMENTS))):
            title = statement_title(node)
            if not title or not node.get("ids"):
                continue
            kind = str(node.get("realtype", "statement"))
            entry = ("single", f"{title} ({kind})", node["ids"][0], "", None)
            node.parent.insert(
                node.parent.index(node), addnodes.index(entries=[entry], inline=False)
            )


class TitledProofIndex(Index):
    """The proof index: one heading per kind of statement, each statement by its
    number and title, in the book's order."""

    name = "prf"
    localname = "Proof Index"
    shortname = "Proof"

    def generate(
        self, docnames=None
    ) -> tuple[list[tuple[str, list[IndexEntry]]], bool]:
        env = self.domain.env
        groups: dict[str, list[tuple[tuple, IndexEntry]]] = defaultdict(list)
        for label, info in getattr(env, "proof_list", {}).items():
            if docnames and info["docname"] not in docnames:
                continue
            kind = info["realtype"].title()
            numbers = env.toc_fignumbers.get(info["docname"], {})
            number = numbers.get(info.get("countertype", ""), {}).get(label, ())
            name = f"{kind} {'.'.join(map(str, number))}" if number else kind
            title = _title_of(env, info["docname"], label)
            shown = f"{name}: {title}" if title else name
            entry = IndexEntry(shown, 0, info["docname"], label, "", "", label)
            groups[_plural(kind)].append((tuple(number) or (999,), entry))
        content = [
            (kind, [e for _, e in sorted(entries, key=lambda x: x[0])])
            for kind, entries in sorted(groups.items())
        ]
        return content, True


def _plural(kind: str) -> str:
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


def _title_of(env: Any, docname: str, label: str) -> str:
    """The title of the statement ``label`` (from the paper map's notes of the
    document, which every build collects)."""
    found = getattr(env, "attnbook_paper_map", {}).get(docname)
    if not found:
        return ""
    for st in found[0]:
        if st["label"] == label:
            return st.get("title", "")
    return ""


def _use_titled_index(app: Any) -> None:
    domain = app.env.get_domain("prf")
    domain.indices = [
        TitledProofIndex if i.name == TitledProofIndex.name else i
        for i in domain.indices
    ]


def setup(app: Any) -> None:
    """Register the transform and put the titled proof index in place of
    sphinx-proof's."""
    app.add_transform(StatementTerms)
    app.connect("builder-inited", _use_titled_index)
