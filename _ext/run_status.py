"""Each chapter's execution, from this build's records: a line under the chapter's
title (when it ran, how long, what its checks came to, links to the execution
statistics and the run report) and the page *Execution statistics*
(``{execution-statistics}``), QuantEcon-style.

:func:`setup` registers the directive and the hook; ``records(app)`` gives this
build's records (the dashboard's) and ``chapter_link(app, fromdoc, chapter)`` a
link to a chapter.
"""

from __future__ import annotations

from typing import Any, Callable

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util.nodes import make_refnode

from _ext.claim_status import check_counts
from _ext.pages import run_report_checks, table, text_para

__all__ = ["ran_at", "chapter_status", "execution_statistics", "setup"]

#: The page *Execution statistics* and the page with the run report.
STATISTICS_DOC = "chapters/execution_statistics"
REPORT_DOC = "chapters/reproducing"


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


class statistics_placeholder(nodes.General, nodes.Element):
    """Replaced by the execution statistics when the page is written."""


class ExecutionStatistics(Directive):
    has_content = False

    def run(self):
        return [statistics_placeholder()]


def _statistics(
    app, fromdoc: str, records: dict, chapter_link: Callable
) -> nodes.table:
    """The table of the page *Execution statistics*: each chapter's run, time and
    checks, and their sums."""
    cells, total = execution_statistics(records)
    rows: list[list[Any]] = [
        [chapter_link(app, fromdoc, name), *row] for name, row in zip(records, cells)
    ]
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    rows.append(
        [
            text_para("all chapters", bold=True),
            "",
            f"{total:.1f}",
            str(sum(r["cells"] for r in records.values())),
            run_report_checks(counts),
            "",
        ]
    )
    return table(
        ["Chapter", "Ran at (UTC)", "Run time (s)", "Cells", "Checks", "Status"],
        rows,
        widths=[34, 16, 9, 6, 24, 8],
        classes=("attnbook-statistics",),
    )


def _status_line(app, docname: str, record: dict) -> nodes.paragraph:
    para = nodes.paragraph(classes=["attnbook-run-status"])
    para += nodes.Text(chapter_status(record) + " ")
    links = ((STATISTICS_DOC, "Execution statistics"), (REPORT_DOC, "run report"))
    for target, text in links:
        if target in app.env.found_docs:
            para += make_refnode(app.builder, docname, target, "", nodes.Text(text))
            para += nodes.Text(" · " if target == STATISTICS_DOC else "")
    return para


def _resolved(app, doctree, docname: str, records: Callable, chapter_link: Callable):
    """doctree-resolved: the statistics in place of ``{execution-statistics}``; under
    a chapter's title, its own line."""
    for node in list(doctree.findall(statistics_placeholder)):
        node.replace_self(_statistics(app, docname, records(app), chapter_link))
    if app.builder.format != "html":
        return
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    found = records(app)  # also notes the chapters' documents of this run
    chapters = {doc: name for name, doc in app._attnbook_docnames.items()}
    section = next(iter(doctree.findall(nodes.section)), None)
    if docname not in chapters or section is None:
        return
    position = 1 if section.children and isinstance(section[0], nodes.title) else 0
    section.insert(position, _status_line(app, docname, found[chapters[docname]]))


def setup(app, records: Callable, chapter_link: Callable) -> None:
    """Register ``{execution-statistics}`` and the chapters' status lines."""
    app.add_node(statistics_placeholder)
    app.add_directive("execution-statistics", ExecutionStatistics)
    app.connect(
        "doctree-resolved",
        lambda app, doctree, docname: _resolved(
            app, doctree, docname, records, chapter_link
        ),
    )
