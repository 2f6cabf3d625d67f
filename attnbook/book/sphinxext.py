"""Sphinx extension of the book: the claims dashboard and the run report, from this
build's records.

Loaded through ``sphinx.extra_extensions`` in ``_config.yml``. At the start of a build
it points ``ATTNBOOK_RECORD_DIR`` at ``<build folder>/records/book`` (emptied first) and
sets a fresh ``ATTNBOOK_RUN_ID``, so every chapter that MyST-NB executes records its
glued numbers and checks there (:mod:`attnbook.book.records`); it also marks every
document for re-reading, so every chapter runs in every build. After all chapters ran,
when pages are written, it replaces

- ``{claims-dashboard}`` (landing page) by the table of claims C1-C7 with the checks
  that verify them, PASS / FAIL computed from the records;
- ``{run-report}`` (page *Reproducing this book*) by seeds, run times, versions and
  hardware.

It stops the build with an error when a chapter that calls ``start_chapter`` left no
record of this build, when a record belongs to another build, or when a chapter's cells
raised: the dashboard never shows stale or partial numbers.

Order of execution: MyST-NB executes a notebook while Sphinx *reads* it (in sorted
docname order, so ``chapters/...`` before ``intro``), and the two tables are built only
when pages are *written*, which starts after every document has been read. The order in
which pages are read therefore does not matter. The book needs ``execute_notebooks:
force``: with ``cache`` a chapter whose cached outputs are reused does not run and
leaves no record, and the build stops.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

from attnbook.book.dashboard import (
    attach_results,
    claim_rows,
    other_checks,
    required_chapters,
)
from attnbook.book.environment import data_table
from attnbook.book.record_files import load_records
from attnbook.book.records import RECORD_DIR_ENV, RUN_ID_ENV

logger = logging.getLogger(__name__)


class dashboard_placeholder(nodes.General, nodes.Element):
    """Replaced by the claims dashboard when the page is written."""


class run_report_placeholder(nodes.General, nodes.Element):
    """Replaced by the run report when the page is written."""


class ClaimsDashboard(Directive):
    has_content = False

    def run(self):
        return [dashboard_placeholder()]


class RunReport(Directive):
    has_content = False

    def run(self):
        return [run_report_placeholder()]


# -------------------------------------------------------------------------- build hooks
def _record_dir(app) -> Path:
    return Path(app.outdir).parent / "records" / "book"


def _on_builder_inited(app) -> None:
    folder = _record_dir(app)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ[RECORD_DIR_ENV] = str(folder)  # kernels started by MyST-NB inherit it
    os.environ[RUN_ID_ENV] = f"book-{time.time_ns()}-{os.getpid()}"
    app._attnbook_t0 = time.time()
    app.env.attnbook_build_started = datetime.now(timezone.utc).isoformat(
        timespec="seconds"
    )


def _on_env_get_outdated(app, env, added, changed, removed):
    # Every chapter runs in every build, so the records describe this build.
    return sorted(set(env.found_docs) - set(added) - set(changed))


def _notebooks(app) -> dict[str, dict]:
    out = {}
    for docname in app.env.found_docs:
        path = Path(app.env.doc2path(docname))
        if path.suffix == ".ipynb":
            out[docname] = json.loads(path.read_text())
    return out


def _build_records(app) -> dict[str, dict]:
    """This build's records, checked to be complete; cached on the app."""
    cached = getattr(app, "_attnbook_records", None)
    if cached is not None:
        return cached
    if app.config.nb_execution_mode == "off":
        raise ExtensionError(
            "the claims dashboard needs the chapters executed "
            "(execute_notebooks: force in _config.yml)"
        )
    notebooks = _notebooks(app)
    try:
        required = required_chapters(notebooks)
    except ValueError as err:
        raise ExtensionError(str(err)) from err
    records = load_records(_record_dir(app))
    run_id = os.environ.get(RUN_ID_ENV)
    missing = sorted(set(required) - set(records))
    if missing:
        raise ExtensionError(
            f"no record of this build for the chapter(s) {missing} in "
            f"{_record_dir(app)}: they "
            "were not executed by this build, or did not reach start_chapter. The "
            "claims "
            f"dashboard refuses to show stale or partial results."
        )
    for name, record in records.items():
        if record.get("run_id") != run_id:
            raise ExtensionError(
                f"the record of {name} belongs to another run "
                f"({record.get('run_id')}, this build is {run_id})"
            )
        if record.get("cell_errors"):
            raise ExtensionError(
                f"{record['cell_errors']} cell(s) of {name} raised an error"
            )
    attach_results(records, {name: notebooks[doc] for name, doc in required.items()})
    app._attnbook_records = {k: records[k] for k in sorted(records)}
    app._attnbook_docnames = required
    return app._attnbook_records


# ------------------------------------------------------------------------- node helpers
def _text_para(text: str, bold: bool = False) -> nodes.paragraph:
    para = nodes.paragraph()
    para += nodes.strong(text=text) if bold else nodes.Text(text)
    return para


def _table(
    headers: list[str],
    rows: list[list[Any]],
    widths: list[int] | None = None,
    classes: tuple[str, ...] = (),
) -> nodes.table:
    """A docutils table; a cell is a string, a node, or (node_or_string, rowspan)."""
    table = nodes.table(classes=["attnbook-table", *classes])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for w in widths or [1] * len(headers):
        group += nodes.colspec(colwidth=w)
    head = nodes.thead()
    group += head
    hrow = nodes.row()
    for h in headers:
        entry = nodes.entry()
        entry += _text_para(h)
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
            entry += cell if isinstance(cell, nodes.Node) else _text_para(str(cell))
            row += entry
        body += row
    return table


def _chapter_link(app, fromdoc: str, chapter: str) -> nodes.Node:
    docname = app._attnbook_docnames.get(chapter, f"chapters/{chapter}")
    env = app.env
    number = ".".join(map(str, env.toc_secnumbers.get(docname, {}).get("", ())))
    title = env.titles[docname].astext() if docname in env.titles else chapter
    text = f"{number} {title}".strip() if number else title
    para = nodes.paragraph()
    para += make_refnode(app.builder, fromdoc, docname, "", nodes.Text(text))
    return para


def _result_link(app, fromdoc: str, label: str | None) -> nodes.Node | None:
    """A link to a proof-directive result (Theorem 2.1) or a section label; None if
    unknown."""
    if not label:
        return None
    env = app.env
    proofs = getattr(env, "proof_list", {})
    if label in proofs:
        match = proofs[label]
        docname = match["docname"]
        kind = match["realtype"].title()
        try:
            num = env.toc_fignumbers[docname][match["countertype"]][label]
            text = f"{kind} {'.'.join(map(str, num))}"
        except KeyError:
            text = kind
        return make_refnode(app.builder, fromdoc, docname, label, nodes.Text(text))
    labels = env.get_domain("std").labels
    if label in labels:
        docname, anchor, title = labels[label]
        return make_refnode(
            app.builder, fromdoc, docname, anchor, nodes.Text(title or label)
        )
    logger.warning(f"claims dashboard: unknown result label {label!r}", type="attnbook")
    return nodes.literal(text=label)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


# ----------------------------------------------------------------------- the two tables
_REL = {">=": "≥", "<=": "≤"}


def _chapter_short(app, fromdoc: str, chapter: str) -> nodes.Node:
    """A link to a chapter by its number ("Chapter 2"), or its title when unnumbered."""
    docname = app._attnbook_docnames.get(chapter, f"chapters/{chapter}")
    number = ".".join(map(str, app.env.toc_secnumbers.get(docname, {}).get("", ())))
    if number:
        text = f"{'Section' if '.' in number else 'Chapter'} {number}"
    else:
        text = (
            app.env.titles[docname].astext() if docname in app.env.titles else chapter
        )
    return make_refnode(app.builder, fromdoc, docname, "", nodes.Text(text))


def _dashboard(app, fromdoc: str) -> list[nodes.Node]:
    records = _build_records(app)
    rows = []
    n_pass = n_fail = n_open = n_not = 0
    for row in claim_rows(records):
        claim = row.claim
        head = nodes.paragraph()
        head += nodes.strong(text=claim.id)
        head += nodes.Text(" " + claim.statement + " ")
        head += nodes.emphasis(text=f"({claim.source})")
        first = nodes.container()
        first += head
        if claim.caveat:
            first += nodes.paragraph("", "", nodes.emphasis(text=claim.caveat))
        status = row.status
        if status == "NOT CHECKED":
            n_open += 1
            rows.append(
                [
                    first,
                    "—",
                    "no check of this build is tagged with this claim",
                    _text_para("NOT CHECKED", bold=True),
                ]
            )
            continue
        n_pass += status.startswith("PASS")
        n_fail += status == "FAIL"
        n_not += status == "NOT REPRODUCED"
        where = nodes.line_block()
        seen = []
        for chk in row.checks:
            source = (chk["chapter"], chk.get("result"))
            if source in seen:
                continue
            seen.append(source)
            line = nodes.line()
            line += _chapter_short(app, fromdoc, chk["chapter"])
            link = _result_link(app, fromdoc, chk.get("result"))
            if link is not None:
                line += nodes.Text(", ")
                line += link
            where += line
        measured = nodes.line_block()
        for chk in row.checks:
            line = nodes.line()
            line += nodes.literal(text=chk["name"])
            line += nodes.Text(
                f" = {_fmt(chk['value'])} "
                f"({_REL.get(chk['relation'], chk['relation'])} "
                f"{_fmt(chk['threshold'])})"
            )
            if not chk.get("asserted", True):
                line += nodes.emphasis(text=" measured, not asserted")
            if not chk["passed"]:
                line += nodes.strong(
                    text=" FAILED" if chk.get("asserted", True) else " NOT REPRODUCED"
                )
            measured += line
        ok = sum(c["passed"] for c in row.checks)
        verdict = _text_para(status, bold=True)
        verdict += nodes.Text(f" {ok}/{len(row.checks)}")
        rows.append([first, where, measured, verdict])
    table = _table(
        [
            "Claim (the book's statement; source)",
            "Verified in",
            "Measured (threshold)",
            "Result",
        ],
        rows,
        widths=[42, 18, 32, 8],
        classes=("attnbook-dashboard",),
    )
    n_part = sum(r.status == "PASS (part)" for r in claim_rows(records))
    every = [c for r in records.values() for c in r["checks"]]
    asserted = [c for c in every if c.get("asserted", True)]
    compared = [c for c in every if not c.get("asserted", True)]
    n_checks, n_passed = len(asserted), sum(c["passed"] for c in asserted)
    summary = _text_para(
        f"This build: {n_pass} claims PASS ({n_part} of them only in part, see their "
        f"caveats), {n_not} NOT REPRODUCED, {n_fail} FAIL, {n_open} not checked; "
        f"{n_passed} of {n_checks} checks passed in {len(records)} chapters, and "
        f"{sum(c['passed'] for c in compared)} of {len(compared)} statements of the "
        "paper "
        f"measured without assertion held "
        f"(built {app.env.attnbook_build_started} UTC)."
    )
    logger.info(
        f"[attnbook] claims dashboard: {n_pass} PASS ({n_part} in part), "
        f"{n_not} NOT REPRODUCED, {n_fail} FAIL, "
        f"{n_open} not "
        f"checked; {n_passed}/{n_checks} checks passed"
    )
    out: list[nodes.Node] = [summary, table]
    others = other_checks(records)
    if others:
        items = nodes.bullet_list()
        for tag, checks in sorted(others.items()):
            ok = sum(c["passed"] for c in checks)
            chapters = sorted({c["chapter"] for c in checks})
            items += nodes.list_item(
                "",
                _text_para(
                    f"{tag}: {ok} of {len(checks)} checks passed "
                    f"({', '.join(chapters)})"
                ),
            )
        out += [_text_para("Further checks, not tied to one claim:"), items]
    return out


def _versions(names: tuple[str, ...]) -> dict[str, str | None]:
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _run_report(app, fromdoc: str) -> list[nodes.Node]:
    records = _build_records(app)
    rows = []
    total = 0.0
    for name, rec in records.items():
        checks = rec["checks"]
        total += rec["elapsed_s"]
        env = rec.get("environment", {})
        rows.append(
            [
                _chapter_link(app, fromdoc, name),
                ", ".join(map(str, rec["seeds"])) or "none",
                str(rec["cells"]),
                f"{rec['elapsed_s']:.1f}",
                str(len(rec["glued"])),
                f"{sum(c['passed'] for c in checks)} / {len(checks)}",
                env.get("data", {}).get("path") or env.get("data_source", "unknown"),
            ]
        )
    rows.append(
        [_text_para("all chapters", bold=True), "", "", f"{total:.1f}", "", "", ""]
    )
    wall = time.time() - getattr(app, "_attnbook_t0", time.time())
    out: list[nodes.Node] = [
        _text_para(
            f"Build of {app.env.attnbook_build_started} (UTC); reading and executing "
            f"all pages took {wall:.0f} s of wall-clock time."
        ),
        _table(
            [
                "Chapter",
                "Seeds",
                "Cells",
                "Run time (s)",
                "Glued values",
                "Checks passed",
                "Review data",
            ],
            rows,
            widths=[34, 9, 7, 10, 10, 10, 20],
        ),
    ]
    envs = [rec["environment"] for rec in records.values()]
    first = envs[0] if envs else {}
    if any(e != first for e in envs[1:]):
        logger.warning(
            "chapters of this build ran in different environments", type="attnbook"
        )
    software = dict(first.get("versions", {}))
    software["python"] = first.get("python")
    software.update(
        _versions(
            (
                "jupyter-book",
                "sphinx",
                "myst-nb",
                "sphinx-proof",
                "sphinx-book-theme",
                "nbclient",
                "ipykernel",
                "nbval",
            )
        )
    )
    out.append(_text_para("Software (the chapters' kernel and the book toolchain):"))
    out.append(
        _table(
            ["Package", "Version"],
            [
                [nodes.paragraph("", "", nodes.literal(text=k)), v or "not installed"]
                for k, v in software.items()
            ],
            widths=[30, 30],
        )
    )
    hardware = [
        ("CPU", first.get("cpu")),
        ("logical cores", first.get("cpu_count")),
        (
            "memory",
            f"{first['memory_gib']:.0f} GiB" if first.get("memory_gib") else "unknown",
        ),
        ("OMP_NUM_THREADS", first.get("OMP_NUM_THREADS") or "unset"),
        ("torch threads", first.get("torch_threads")),
        ("accelerator", first.get("accelerator") or "none (CPU only)"),
        ("platform", first.get("platform")),
    ]
    out.append(_text_para("Hardware:"))
    out.append(
        _table(["Item", "Value"], [[k, str(v)] for k, v in hardware], widths=[20, 50])
    )
    data = first.get("data") or {}
    where = (
        f"the {data['path']} by the corpus recipe {data['recipe']}"
        if data
        else first.get("data_source", "an unrecorded source")
    )
    out.append(
        _text_para(
            f"Review data (IMDB, Yelp), read from {where}; the Review data column "
            "above gives each chapter's path (chapters on synthetic data read none):"
        )
    )
    if data.get("datasets"):
        out.append(_table(*data_table(data), widths=[10, 25, 35, 12, 12]))
    return out


def _on_doctree_resolved(app, doctree, docname) -> None:
    for node in list(doctree.findall(dashboard_placeholder)):
        node.replace_self(_dashboard(app, docname))
    for node in list(doctree.findall(run_report_placeholder)):
        node.replace_self(_run_report(app, docname))


def setup(app):
    app.add_node(dashboard_placeholder)
    app.add_node(run_report_placeholder)
    app.add_directive("claims-dashboard", ClaimsDashboard)
    app.add_directive("run-report", RunReport)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("env-get-outdated", _on_env_get_outdated)
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": False}
