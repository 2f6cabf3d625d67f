"""The two pages the build writes from its records, as docutils nodes: the claims
dashboard (landing page) and the run report (page *Reproducing this book*).

The dashboard has one block per claim: a coloured status badge, the claim in the book's
words, one headline statistic in words and math, a line for each of the book's own
readings of the claim (its own badge, what it reads, its headline; it never decides the
claim's badge), and the detailed checks folded in a ``<details>`` element, grouped into
evidence, statements of the paper measured without assertion, identities, controls and
the book's readings; each check is named in words and linked to the code
cell that asserts it and to the result it verifies. Both pages count checks with
:func:`_ext.dashboard.check_counts`, so their numbers agree.
"""

from __future__ import annotations

import html
import re
from typing import Any, Callable

from docutils import nodes

from _ext.claim_status import STATUS_CLASSES
from _ext.counts import counts_sentence, status_tally
from _ext.dashboard import (
    GROUPS,
    ClaimRow,
    ReadingLine,
    check_counts,
    claim_rows,
    other_checks,
)

__all__ = [
    "badge",
    "make_para",
    "comparison",
    "math_text",
    "latex_number",
    "claims_dashboard",
    "run_report_checks",
    "run_report_table",
    "table",
    "text_para",
]


_REL = {">=": r"\geq", "<=": r"\leq"}
_MATH = re.compile(r"\$([^$]+)\$")

#: ``link(chapter, anchor_or_None, text) -> node``: a reference into the book.
Linker = Callable[[str, "str | None", str], nodes.Node]


def math_text(text: str) -> list[nodes.Node]:
    """``text`` as inline nodes, each ``$...$`` typeset as math."""
    out: list[nodes.Node] = []
    pos = 0
    for match in _MATH.finditer(text):
        if match.start() > pos:
            out.append(nodes.Text(text[pos : match.start()]))
        out.append(nodes.math(text=match.group(1)))
        pos = match.end()
    if pos < len(text):
        out.append(nodes.Text(text[pos:]))
    return out


def latex_number(x: float) -> str:
    """``x`` with four significant digits, in LaTeX (``3.1 \\times 10^{-13}``)."""
    x = float(x)
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.4g}"
    mantissa, exponent = f"{x:.2e}".split("e")
    return rf"{float(mantissa):.3g} \times 10^{{{int(exponent)}}}"


def make_para(*children: nodes.Node, classes: tuple[str, ...] = ()) -> nodes.paragraph:
    para = nodes.paragraph(classes=list(classes))
    for child in children:
        para += child
    return para


def badge(status: str) -> nodes.inline:
    slug = STATUS_CLASSES.get(status, "unchecked")
    return nodes.inline(
        text=status, classes=["attnbook-badge", f"attnbook-badge-{slug}"]
    )


#: How a value measured without assertion stands against its threshold, in words:
#: (held, did not hold) for each relation.
_SIDE = {">=": ("at or above", "below"), "<=": ("at or below", "above")}


def comparison(chk: dict[str, Any]) -> list[nodes.Node]:
    """A check's value against its threshold. An asserted check (which held, or the
    build stopped) reads as the inequality it verified: ``0.93 ≥ 0.3``. A statement
    measured without assertion reads as the value and where it falls, never as an
    inequality that may be false: ``0.8805, below the threshold ≥ 0.945``."""
    rel = _REL.get(chk["relation"], chk["relation"])
    value, threshold = latex_number(chk["value"]), latex_number(chk["threshold"])
    if chk.get("asserted", True):
        return [nodes.math(text=f"{value} {rel} {threshold}")]
    held, missed = _SIDE.get(chk["relation"], ("meeting", "missing"))
    # the threshold of a paper's statement may be the paper's number or a null
    # model's bound: "the threshold" is true of both
    whose = "the" if chk.get("reading", "paper") == "paper" else "the book's"
    whose += " threshold"
    return [
        nodes.math(text=value),
        nodes.Text(f", {held if chk['passed'] else missed} {whose} "),
        nodes.math(text=f"{rel} {threshold}"),
    ]


def _where(chk: dict[str, Any], link: Linker, result: Callable) -> list[nodes.Node]:
    """Links to the cell that asserts ``chk`` (its chapter) and to its result."""
    cell = chk.get("nb_cell")
    out: list[nodes.Node] = [
        link(chk["chapter"], f"cell-{cell}" if cell is not None else None, "")
    ]
    found = result(chk.get("result"))
    if found is not None:
        out += [nodes.Text(" · "), found]
    return out


def _check_item(chk: dict[str, Any], link: Linker, result: Callable) -> nodes.Node:
    asserted = chk.get("asserted", True)
    if chk["passed"]:
        mark = nodes.inline(text="✓ ", classes=["attnbook-ok"])
    else:
        mark = nodes.inline(
            text="✗ " if asserted else "✗ not reproduced: ", classes=["attnbook-ko"]
        )
    item = nodes.list_item()
    para = make_para(mark, *math_text(chk.get("what") or chk["name"]))
    para += nodes.Text(": ")
    for node in comparison(chk):
        para += node
    if chk.get("role") == "control" and asserted:
        para += nodes.emphasis(text=" (negative control)")
    if chk.get("fragile"):
        para += nodes.emphasis(
            text=f" ({chk['fragile']})", classes=["attnbook-fragile"]
        )
    para += nodes.Text(" — ")
    for node in _where(chk, link, result):
        para += node
    item += para
    return item


def _folded(summary: str, body: list[nodes.Node]) -> list[nodes.Node]:
    opening = f"<details class='attnbook-details'><summary>{html.escape(summary)}"
    return [
        nodes.raw("", opening + "</summary>", format="html"),
        *body,
        nodes.raw("", "</details>", format="html"),
    ]


def _check_groups(
    groups: dict[str, list[dict[str, Any]]], link: Linker, result: Callable
) -> list[nodes.Node]:
    body: list[nodes.Node] = []
    for group, checks in groups.items():
        body.append(
            make_para(nodes.strong(text=GROUPS[group]), classes=("attnbook-group",))
        )
        items = nodes.bullet_list(classes=["attnbook-checks"])
        for chk in checks:
            items += _check_item(chk, link, result)
        body.append(items)
    return body


def _group_summary(groups: dict[str, list[dict[str, Any]]]) -> str:
    words = {
        "evidence": "evidence",
        "measured": "measured without assertion",
        "identity": "identity",
        "control": "control",
        "book": "of the book's readings",
    }
    parts = [f"{len(c)} {words[g]}" for g, c in groups.items()]
    n = sum(len(c) for c in groups.values())
    return f"{n} check{'s' * (n != 1)}: " + ", ".join(parts)


def _headline_nodes(
    chk: dict[str, Any], link: Linker, result: Callable
) -> list[nodes.Node]:
    """A headline check in words and math: what, value, relation, threshold, links."""
    out: list[nodes.Node] = [*math_text(chk.get("what") or chk["name"])]
    out += [nodes.Text(": "), *comparison(chk)]
    if not chk.get("asserted", True):
        out.append(nodes.emphasis(text=" (measured, not asserted)"))
    if chk.get("fragile"):
        out.append(
            nodes.emphasis(text=f" ({chk['fragile']})", classes=["attnbook-fragile"])
        )
    out.append(nodes.Text(" — "))
    return out + _where(chk, link, result)


def _reading_line(line: ReadingLine, link: Linker, result: Callable) -> nodes.Node:
    """The line of one of the book's own readings of a claim: its badge, what it reads
    and its headline check."""
    para = make_para(
        nodes.strong(text="The book's reading: "),
        badge(line.status),
        nodes.Text(" "),
        *math_text(line.reading.statement),
        classes=("attnbook-reading",),
    )
    headline = line.headline
    if headline is not None:
        para += nodes.Text(" ")
        for node in _headline_nodes(headline, link, result):
            para += node
    return para


def _claim_block(row: ClaimRow, link: Linker, result: Callable) -> nodes.container:
    claim, status = row.claim, row.status
    slug = STATUS_CLASSES.get(status, "unchecked")
    block = nodes.container(
        classes=["attnbook-claim", f"attnbook-claim-{slug}"],
        ids=[f"claim-{claim.id.lower()}"],  # the paper map links here
    )
    head = make_para(badge(status), nodes.Text(" "), classes=("attnbook-claim-head",))
    head += nodes.strong(text=claim.id + " ")
    for node in math_text(claim.statement):
        head += node
    block += head
    headline = row.headline
    if headline is not None:
        block += make_para(
            *_headline_nodes(headline, link, result), classes=("attnbook-headline",)
        )
    elif status == "NOT CHECKED":
        block += make_para(
            nodes.Text("No evidence of this build is tagged with this claim."),
            classes=("attnbook-headline",),
        )
    for line in row.readings:
        block += _reading_line(line, link, result)
    body: list[nodes.Node] = [
        make_para(nodes.emphasis(text=f"Source: {claim.source}."))
    ]
    if claim.caveat:
        body.append(make_para(*math_text(claim.caveat), classes=("attnbook-caveat",)))
    groups = row.groups()
    body += _check_groups(groups, link, result)
    summary = _group_summary(groups) if groups else "no check"
    for node in _folded(summary + " · source and caveats", body):
        block += node
    return block


def claims_dashboard(
    records: dict[str, dict], link: Linker, result: Callable, built: str
) -> tuple[list[nodes.Node], str]:
    """The dashboard's nodes and a one-line summary for the build log.

    ``link(chapter, anchor, text)`` makes a reference to a chapter (at a cell anchor
    when given; ``text`` empty: the chapter's short name), ``result(label)`` one to a
    result of the book (None when unknown), ``built`` the time of the build."""
    rows = claim_rows(records)
    tally = status_tally(rows)
    summary = _tally_para(tally)
    summary += nodes.Text(
        f"— {len(rows)} claims. {counts_sentence(records)} Built {built} UTC."
    )
    out: list[nodes.Node] = [summary]
    blocks = nodes.container(classes=["attnbook-claims"])
    for row in rows:
        blocks += _claim_block(row, link, result)
    out.append(blocks)
    others = other_checks(records)
    if others:
        body: list[nodes.Node] = []
        for tag, checks in sorted(others.items()):
            c = check_counts(checks)
            body.append(
                make_para(
                    nodes.strong(text=f"{tag}: "),
                    nodes.Text(f"{c['passed']} of {c['asserted']} checks passed"),
                    classes=("attnbook-group",),
                )
            )
            items = nodes.bullet_list(classes=["attnbook-checks"])
            for chk in checks:
                items += _check_item(chk, link, result)
            body.append(items)
        n = sum(len(c) for c in others.values())
        out += _folded(
            f"Further checks, not tied to one claim ({n}: "
            + ", ".join(sorted(others))
            + ")",
            body,
        )
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    log = (
        " ".join(f"{n} {s}" for s, n in tally.items())
        + f"; {counts['passed']}/{counts['asserted']} checks passed"
    )
    return out, log


def _tally_para(tally: dict[str, int]) -> nodes.paragraph:
    summary = make_para(classes=("attnbook-summary",))
    for status, n in tally.items():
        summary += badge(status)
        summary += nodes.Text(f" {n}   ")
    return summary


def text_para(text: str, bold: bool = False) -> nodes.paragraph:
    """A paragraph of ``text`` (bold when asked)."""
    para = nodes.paragraph()
    para += nodes.strong(text=text) if bold else nodes.Text(text)
    return para


def table(
    headers: list[str],
    rows: list[list[Any]],
    widths: list[int] | None = None,
    classes: tuple[str, ...] = (),
) -> nodes.table:
    """A docutils table; a cell is a string, a node, or (node_or_string, rowspan)."""
    node = nodes.table(classes=["attnbook-table", *classes])
    group = nodes.tgroup(cols=len(headers))
    node += group
    for w in widths or [1] * len(headers):
        group += nodes.colspec(colwidth=w)
    head = nodes.thead()
    group += head
    hrow = nodes.row()
    for h in headers:
        entry = nodes.entry()
        entry += text_para(h)
        hrow += entry
    head += hrow
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            span = 0
            if isinstance(cell, tuple):
                cell, span = cell
            entry = nodes.entry(morerows=span) if span else nodes.entry()
            entry += cell if isinstance(cell, nodes.Node) else text_para(str(cell))
            row += entry
        body += row
    return node


def run_report_checks(counts: dict[str, int]) -> str:
    """The run report's check cell: asserted checks passed and, apart, the statements
    of the paper measured without assertion that held (counts of
    :func:`~_ext.dashboard.check_counts`)."""
    text = f"{counts['passed']} / {counts['asserted']}"
    if counts["measured"]:
        text += f"; paper statements held: {counts['held']} / {counts['measured']}"
    return text


def run_report_table(records: dict[str, dict]) -> tuple[list[list[Any]], float]:
    """The cells of the run report's rows after the chapter's name (seeds, cells, run
    time, glued values, checks: :func:`run_report_checks`), by chapter, and the total
    run time."""
    rows = []
    total = 0.0
    for rec in records.values():
        c = check_counts(rec["checks"])
        total += rec["elapsed_s"]
        rows.append(
            [
                ", ".join(map(str, rec["seeds"])) or "none",
                str(rec["cells"]),
                f"{rec['elapsed_s']:.1f}",
                str(len(rec["glued"])),
                run_report_checks(c),
            ]
        )
    return rows, total
