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
from _ext.dashboard import (
    GROUPS,
    ClaimRow,
    ReadingLine,
    check_counts,
    claim_rows,
    other_checks,
)

__all__ = [
    "chapter_status",
    "execution_statistics",
    "ran_at",
    "claims_verdict",
    "counts_sentence",
    "measured_parts",
    "status_tally",
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


def _para(*children: nodes.Node, classes: tuple[str, ...] = ()) -> nodes.paragraph:
    para = nodes.paragraph(classes=list(classes))
    for child in children:
        para += child
    return para


def _badge(status: str) -> nodes.inline:
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
    inequality that may be false: ``0.8805, below the paper's ≥ 0.945``."""
    rel = _REL.get(chk["relation"], chk["relation"])
    value, threshold = latex_number(chk["value"]), latex_number(chk["threshold"])
    if chk.get("asserted", True):
        return [nodes.math(text=f"{value} {rel} {threshold}")]
    held, missed = _SIDE.get(chk["relation"], ("meeting", "missing"))
    whose = "the paper's" if chk.get("reading", "paper") == "paper" else "the book's"
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
    para = _para(mark, *math_text(chk.get("what") or chk["name"]))
    para += nodes.Text(": ")
    for node in comparison(chk):
        para += node
    if chk.get("role") == "control" and asserted:
        para += nodes.emphasis(text=" (negative control)")
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
            _para(nodes.strong(text=GROUPS[group]), classes=("attnbook-group",))
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
    out.append(nodes.Text(" — "))
    return out + _where(chk, link, result)


def _reading_line(line: ReadingLine, link: Linker, result: Callable) -> nodes.Node:
    """The line of one of the book's own readings of a claim: its badge, what it reads
    and its headline check."""
    para = _para(
        nodes.strong(text="The book's reading: "),
        _badge(line.status),
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
    head = _para(_badge(status), nodes.Text(" "), classes=("attnbook-claim-head",))
    head += nodes.strong(text=claim.id + " ")
    for node in math_text(claim.statement):
        head += node
    block += head
    headline = row.headline
    if headline is not None:
        block += _para(
            *_headline_nodes(headline, link, result), classes=("attnbook-headline",)
        )
    elif status == "NOT CHECKED":
        block += _para(
            nodes.Text("No evidence of this build is tagged with this claim."),
            classes=("attnbook-headline",),
        )
    for line in row.readings:
        block += _reading_line(line, link, result)
    body: list[nodes.Node] = [_para(nodes.emphasis(text=f"Source: {claim.source}."))]
    if claim.caveat:
        body.append(_para(*math_text(claim.caveat), classes=("attnbook-caveat",)))
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
                _para(
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


def status_tally(rows: list[ClaimRow]) -> dict[str, int]:
    """How many claims have each badge, in the legend's order (best first)."""
    statuses = [r.status for r in rows]
    return {s: statuses.count(s) for s in STATUS_CLASSES if s in statuses}


def _tally_para(tally: dict[str, int]) -> nodes.paragraph:
    summary = _para(classes=("attnbook-summary",))
    for status, n in tally.items():
        summary += _badge(status)
        summary += nodes.Text(f" {n}   ")
    return summary


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def measured_parts(records: dict[str, dict]) -> dict[str, Any]:
    """The statements measured without assertion, split so that the parts add up:
    how many there are and held, and those that did not hold by whose statement they
    test (the paper's, by claim; the book's own readings, by claim; checks tied to no
    claim)."""
    rows = claim_rows(records)
    measured = [
        {**c, "row": r.claim.id}
        for r in rows
        for c in r.checks
        if not c.get("asserted", True)
    ]
    measured += [
        {**c, "row": None}
        for checks in other_checks(records).values()
        for c in checks
        if not c.get("asserted", True)
    ]
    missed = [c for c in measured if not c["passed"]]
    paper: dict[str, int] = {}
    book: dict[str, int] = {}
    for chk in missed:
        if chk["row"] is None:
            continue
        side = book if chk.get("reading", "paper") == "book" else paper
        side[chk["row"]] = side.get(chk["row"], 0) + 1
    return {
        "measured": len(measured),
        "held": len(measured) - len(missed),
        "missed": len(missed),
        "paper": paper,
        "book": book,
        "untied": sum(c["row"] is None for c in missed),
    }


def counts_sentence(records: dict[str, dict]) -> str:
    """What the checks of a build came to, in words whose counts add up: asserted
    checks by role, and statements measured without assertion that held and did not,
    each part named (the paper's statements by claim, the book's own readings)."""
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    text = (
        f"{counts['passed']} of {counts['asserted']} asserted checks in "
        f"{len(records)} chapters passed ({counts['evidence']} evidence, "
        f"{counts['identity']} identities, {counts['control']} controls)."
    )
    parts = measured_parts(records)
    if not parts["measured"]:
        return text
    text += (
        f" {_plural(parts['measured'], 'statement')} measured without assertion: "
        f"{parts['held']} held"
    )
    if not parts["missed"]:
        return text + "."
    named = []
    if parts["paper"]:
        named.append(
            _plural(sum(parts["paper"].values()), "statement")
            + " of the paper ("
            + ", ".join(f"{n} under {cid}" for cid, n in parts["paper"].items())
            + "; these make a claim NOT REPRODUCED)"
        )
    if parts["book"]:
        named.append(
            f"{sum(parts['book'].values())} of the book's own readings ("
            + ", ".join(f"{n} under {cid}" for cid, n in parts["book"].items())
            + "; these never decide a claim's badge)"
        )
    if parts["untied"]:
        named.append(f"{parts['untied']} tied to no claim")
    return text + f", {parts['missed']} did not: " + " and ".join(named) + "."


def _reason(row: ClaimRow) -> list[nodes.Node]:
    """Why a claim's badge is not PASS, in one line: the statement of the paper that
    did not hold (NOT REPRODUCED), the claim's ``verdict`` (PASS (part), MEASURED),
    or what the status rule says."""
    status, claim = row.status, row.claim
    if status in ("NOT REPRODUCED", "FAIL"):
        chk = row.headline
        if chk is not None:
            missed = [
                c
                for c in row.paper_checks
                if c.get("role", "evidence") == "evidence" and not c["passed"]
            ]
            out = [*math_text(chk.get("what") or chk["name"]), nodes.Text(": ")]
            out += comparison(chk)
            if len(missed) > 1:
                out.append(
                    nodes.Text(
                        f" ({len(missed) - 1} more of the paper's statements did not"
                        " hold either)"
                    )
                )
            return out
    if claim.verdict:
        return math_text(claim.verdict)
    default = {
        "PASS (part)": "the checks cover part of the claim (see its caveat)",
        "MEASURED": "the paper states nothing to verify; the checks are the book's "
        "own measurements",
        "NOT CHECKED": "no evidence of this build is tagged with this claim",
    }
    return [nodes.Text(default.get(status, ""))]


def claims_verdict(records: dict[str, dict]) -> list[nodes.Node]:
    """The verdict of a build, for the top of the landing page: the tally of badges,
    every claim that is not PASS with its one-line reason (linked to its block of the
    dashboard), the claims whose PASS rests on statements measured without assertion
    alone, and what a build guarantees."""
    rows = claim_rows(records)
    box = nodes.container(classes=["attnbook-verdict"], ids=["verdict"])
    head = _para(
        nodes.strong(text="Verdict of this build. "),
        nodes.Text(f"Of the paper's {len(rows)} claims: "),
        classes=("attnbook-summary",),
    )
    for k, (status, n) in enumerate(status_tally(rows).items()):
        head += nodes.Text(", " if k else "")
        head += _badge(status)
        head += nodes.Text(f" {n}")
    head += nodes.Text(".")
    box += head
    items = nodes.bullet_list(classes=["attnbook-verdict-list"])
    for row in rows:
        if row.status == "PASS":
            continue
        para = _para(_badge(row.status), nodes.Text(" "))
        ref = nodes.reference(
            "", "", refuri=f"#claim-{row.claim.id.lower()}", internal=True
        )
        ref += nodes.strong(text=row.claim.id)
        para += ref
        para += nodes.Text(": ")
        for node in _reason(row):
            para += node
        item = nodes.list_item()
        item += para
        items += item
    if items.children:
        box += items
    only_measured = [
        r.claim.id
        for r in rows
        if r.status == "PASS"
        and r.evidence
        and not any(c.get("asserted", True) for c in r.evidence)
    ]
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    guarantee = (
        f"What a build guarantees: it stops at the first asserted check that fails, so "
        f"all {counts['asserted']} asserted checks of this page passed. A statement "
        "of the paper marked measured, not asserted, is compared with the paper's "
        "number without stopping the build: when it does not hold, its claim is NOT "
        "REPRODUCED."
    )
    if only_measured:
        guarantee += (
            f" The PASS of {', '.join(only_measured)} rests on such statements alone, "
            "all of which held."
        )
    box += _para(nodes.Text(guarantee), classes=("attnbook-guarantee",))
    return [box]


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


def ran_at(record: dict[str, Any]) -> str:
    """When a chapter's run started, to the minute, in UTC (``2026-11-27 06:42``)."""
    started = record.get("started_at") or ""
    return started[:16].replace("T", " ") or "unknown"


def chapter_status(record: dict[str, Any]) -> str:
    """One chapter's execution in a line: when it ran, how long, what its checks came
    to (:func:`run_report_checks`)."""
    c = check_counts(record["checks"])
    text = (
        f"Executed by this build on {ran_at(record)} UTC in "
        f"{record['elapsed_s']:.1f} s: {c['passed']} of {c['asserted']} asserted "
        f"checks passed"
    )
    if c["measured"]:
        text += (
            f"; {c['held']} of {c['measured']} statements measured without assertion "
            "held"
        )
    return text + "."


def execution_statistics(records: dict[str, dict]) -> tuple[list[list[str]], float]:
    """The cells of the page *Execution statistics* after the chapter's name (run at,
    run time, cells, checks, status), by chapter, and the total run time."""
    rows = []
    total = 0.0
    for rec in records.values():
        c = check_counts(rec["checks"])
        total += rec["elapsed_s"]
        ok = not rec.get("cell_errors") and c["passed"] == c["asserted"]
        rows.append(
            [
                ran_at(rec),
                f"{rec['elapsed_s']:.1f}",
                str(rec["cells"]),
                run_report_checks(c),
                "passed" if ok else "failed",
            ]
        )
    return rows, total


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
