"""Sphinx extension of the book: the claims dashboard and the run report, from this
build's records.

Loaded by the package :mod:`_ext` (``sphinx.local_extensions`` in ``_config.yml``).
The chapters' numbers come from their records in ``<build folder>/records/book``,
each made by a run of :mod:`_ext.execution` and carrying the *input key* of the
chapter (:mod:`_ext.input_key`: the digest of its code cells, the attnbook modules it
imports, the lock, the data and the settings). ``scripts/build-book.sh`` executes the
chapters whose inputs changed before Sphinx starts; at the start of every build
(``jupyter-book build`` alone too) this extension computes the current keys and, with
``execute_notebooks: cache``, executes the same way every chapter whose record or
executed notebook in the Jupyter cache carries another key, saying which and why
(:func:`_ext.execution.plan_run`), and reuses the others as they stand. It points
``ATTNBOOK_RECORD_DIR``, ``ATTNBOOK_RUN_ID`` and ``ATTNBOOK_INPUT_KEYS`` at that run,
so a chapter that MyST-NB executes itself records into it too (in another execution
mode MyST-NB executes every chapter, into a run emptied first). Besides the documents
whose source changed, which Sphinx reads again by itself, it has read again every
notebook whose executed notebook in the Jupyter cache is not the one its page was read
from (the chapter was executed since), and every document when the build's own code
(``_ext``) or the lock changed since the pages were read, or when the last build did not
end without a warning (a warning met while reading is not hidden by reusing the page);
every page is written again.
After all chapters ran, when pages are written, it replaces

- ``{claims-dashboard}`` (landing page) by one block per claim C1-C7 with its status,
  a headline statistic and the checks that verify it, folded (:mod:`_ext.pages`), the
  status computed from the records;
- ``{claims-verdict}`` (top of the landing page) by the tally of the badges, every
  claim that is not PASS with its one-line reason, and what a build guarantees;
- ``{run-report}`` (*Reproducing this book*) by seeds, run times, versions, hardware;
- ``{execution-statistics}`` (*Execution statistics*) by each chapter's run: when, how
  long, its checks; and it puts each chapter's own line of the same under its title.

It stops the build with an error when a chapter that calls ``start_chapter`` left no
record, when a record's input key is not the chapter's current one (it was made from
another tree, data or settings), or when a chapter's cells raised: the dashboard never
shows stale or partial numbers.

Order of execution: MyST-NB takes (or executes) a notebook while Sphinx *reads* it, and
the two tables are built only when pages are *written*, which starts after every
document has been read. The order in which pages are read therefore does not matter.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

from _ext import bibstyle, book_index, paper_map_ext, run_status
from _ext.dashboard import (
    attach_results,
    check_counts,
    required_chapters,
)
from _ext.execution import (
    CACHE_DIR,
    RUN_FILE,
    TIMES_FILE,
    book_notebooks,
    execute_notebooks,
    executed_stamps,
    new_run,
    read_run_id,
    read_run_seconds,
)
from _ext.input_key import input_keys
from _ext.pages import (
    claims_dashboard,
    run_report_checks,
    run_report_table,
    table,
    text_para,
)
from _ext.record_files import load_records
from _ext.run_guard import RunInterrupted, default_jobs
from _ext.verdict import claims_verdict
from attnbook.book.record_paths import INPUT_KEYS_ENV, RECORD_DIR_ENV, RUN_ID_ENV
from attnbook.book.records import data_table

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"  # attnbook.css: badges and folded checks


class dashboard_placeholder(nodes.General, nodes.Element):
    """Replaced by the claims dashboard when the page is written."""


class run_report_placeholder(nodes.General, nodes.Element):
    """Replaced by the run report when the page is written."""


class verdict_placeholder(nodes.General, nodes.Element):
    """Replaced by the verdict of the build when the page is written."""


class ClaimsDashboard(Directive):
    has_content = False

    def run(self):
        return [dashboard_placeholder()]


class RunReport(Directive):
    has_content = False

    def run(self):
        return [run_report_placeholder()]


class ClaimsVerdict(Directive):
    has_content = False

    def run(self):
        return [verdict_placeholder()]


# -------------------------------------------------------------------------- build hooks
def _record_dir(app) -> Path:
    return Path(app.outdir).parent / "records" / "book"


def _execute_stale(app, notebooks: list[Path], keys: dict[str, dict]) -> None:
    """Execute, side by side and into the Jupyter cache, the chapters whose record or
    executed notebook carries another input key than the current one (none after
    ``scripts/build-book.sh``); stop the build when one fails."""
    build = Path(app.outdir).parent
    cache = Path(app.config.nb_execution_cache_path or build / CACHE_DIR)
    jobs, why = default_jobs(build / TIMES_FILE)
    try:
        report = execute_notebooks(
            notebooks,
            _record_dir(app),
            jobs=int(os.environ.get("ATTNBOOK_JOBS") or jobs),
            cache=cache,
            times_file=build / TIMES_FILE,
            timeout=int(getattr(app.config, "nb_execution_timeout", 900) or 900),
            incremental=True,
            keys=keys,
        )
    except (RuntimeError, RunInterrupted) as err:
        raise ExtensionError(str(err)) from err
    if report.seconds:
        logger.info(
            f"[attnbook] {len(report.seconds)} chapter(s) executed in "
            f"{report.wall:.0f} s ({why})"
        )
    if report.failed:
        raise ExtensionError(
            "chapter(s) failed: "
            + "; ".join(
                f"{name}: {text.strip().splitlines()[-1] if text.strip() else '?'}"
                for name, text in report.failed.items()
            )
        )


def _on_builder_inited(app) -> None:
    folder = _record_dir(app)
    try:
        notebooks = book_notebooks(Path(app.srcdir))
    except ValueError:  # not a Jupyter Book: MyST-NB executes what it reads
        notebooks = []
    keys = input_keys(notebooks)
    app._attnbook_keys = keys
    app._attnbook_inited = time.time()
    unfinished = Path(app.doctreedir) / UNFINISHED
    app._attnbook_unfinished = unfinished.exists()
    unfinished.parent.mkdir(parents=True, exist_ok=True)
    unfinished.touch()
    if app.config.nb_execution_mode == "cache":
        _execute_stale(app, notebooks, keys)
    else:  # MyST-NB executes every chapter in this build, into a run of its own
        new_run(folder)
    run_id = read_run_id(folder) or new_run(folder, keep=keys)
    # chapters that MyST-NB executes itself (not in the cache) record into the same run
    os.environ[RECORD_DIR_ENV] = str(folder)  # kernels started by MyST-NB inherit it
    os.environ[RUN_ID_ENV] = run_id
    os.environ[INPUT_KEYS_ENV] = json.dumps(keys, sort_keys=True)
    # the run started when its id was written (before the build when the chapters
    # were executed beforehand)
    app._attnbook_run_id = run_id
    app._attnbook_t0 = (folder / RUN_FILE).stat().st_mtime
    app.env.attnbook_build_started = datetime.fromtimestamp(
        app._attnbook_t0, timezone.utc
    ).isoformat(timespec="seconds")


def _reader_inputs(app) -> str:
    """The digest of what every page's doctree depends on besides its own source and
    outputs: the build's code (``_ext``) and the lock."""
    root = Path(app.srcdir)
    files = sorted((root / "_ext").rglob("*.py")) + [root / "requirements.txt"]
    digest = hashlib.sha256()
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


#: In the doctrees folder while a build runs, and after one that failed or warned.
UNFINISHED = "attnbook-unfinished"


def _on_env_get_outdated(app, env, added, changed, removed):
    """The documents to read again although their source did not change: a notebook
    whose executed notebook in the cache changed (its glued numbers and figures come
    from it), and all of them when the build's code or the lock changed or the last
    build did not end cleanly."""
    docs = {Path(env.doc2path(doc)): doc for doc in env.found_docs}
    notebooks = [path for path in docs if path.suffix == ".ipynb"]
    cache = Path(
        app.config.nb_execution_cache_path or Path(app.outdir).parent / CACHE_DIR
    )
    stamps = {
        docs[path]: stamp for path, stamp in executed_stamps(notebooks, cache).items()
    }
    before = getattr(env, "attnbook_read_from", {})
    inputs = _reader_inputs(app)
    everything = app._attnbook_unfinished
    everything |= getattr(env, "attnbook_reader_inputs", None) != inputs
    env.attnbook_read_from, env.attnbook_reader_inputs = stamps, inputs
    again = {
        doc
        for doc in env.found_docs
        if everything or (doc in stamps and before.get(doc) != stamps[doc])
    }
    return sorted(again - set(added) - set(changed))


def _on_env_get_updated(app, env):
    # every page is written again: the dashboard, the run report and each chapter's
    # status line come from this build's records
    return sorted(env.found_docs)


def _on_build_finished(app, exception) -> None:
    if exception is None and not app._warncount:
        (Path(app.doctreedir) / UNFINISHED).unlink(missing_ok=True)


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
            "(execute_notebooks: cache in _config.yml)"
        )
    notebooks = _notebooks(app)
    try:
        required = required_chapters(notebooks)
    except ValueError as err:
        raise ExtensionError(str(err)) from err
    try:  # every record must carry its chapter's current input key
        records = load_records(_record_dir(app), keys=app._attnbook_keys)
    except ValueError as err:  # a record of other inputs, or edited after its run
        raise ExtensionError(str(err)) from err
    missing = sorted(set(required) - set(records))
    if missing:
        raise ExtensionError(
            f"no record of this build for the chapter(s) {missing} in "
            f"{_record_dir(app)}: they were not executed with the current inputs, or "
            "did not reach start_chapter. The claims dashboard refuses to show stale "
            "or partial results."
        )
    for name, record in records.items():
        if record.get("cell_errors"):
            raise ExtensionError(
                f"{record['cell_errors']} cell(s) of {name} raised an error"
            )
    attach_results(records, {name: notebooks[doc] for name, doc in required.items()})
    app._attnbook_records = {k: records[k] for k in sorted(records)}
    app._attnbook_docnames = required
    return app._attnbook_records


# ------------------------------------------------------------------------- node helpers
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


# ----------------------------------------------------------------------- the two pages
def _chapter_short(
    app, fromdoc: str, chapter: str, anchor: str = "", text: str = ""
) -> nodes.Node:
    """A link to a chapter by its number ("Chapter 2"), or its title when unnumbered
    (or ``text``); to ``anchor`` in it when given."""
    docname = app._attnbook_docnames.get(chapter, f"chapters/{chapter}")
    number = ".".join(map(str, app.env.toc_secnumbers.get(docname, {}).get("", ())))
    if number:
        label = f"{'Section' if '.' in number else 'Chapter'} {number}"
    else:
        label = (
            app.env.titles[docname].astext() if docname in app.env.titles else chapter
        )
    return make_refnode(
        app.builder, fromdoc, docname, anchor, nodes.Text(text or label)
    )


def _dashboard(app, fromdoc: str) -> list[nodes.Node]:
    records = _build_records(app)

    out, log = claims_dashboard(
        records,
        lambda chapter, anchor, text: _chapter_short(
            app, fromdoc, chapter, anchor or "", text
        ),
        lambda label: _result_link(app, fromdoc, label),
        app.env.attnbook_build_started,
    )
    logger.info(f"[attnbook] claims dashboard: {log}")
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
    cells, total = run_report_table(records)
    rows = []
    for (name, rec), row in zip(records.items(), cells):
        env = rec.get("environment", {})
        data = env.get("data", {}).get("path") or env.get("data_source", "unknown")
        rows.append([_chapter_link(app, fromdoc, name), *row, data])
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    rows.append(
        [
            text_para("all chapters", bold=True),
            "",
            "",
            f"{total:.1f}",
            "",
            run_report_checks(counts),
            "",
        ]
    )
    run_id = getattr(app, "_attnbook_run_id", None)
    executed = [n for n, r in records.items() if r.get("run_id") == run_id]
    reused = len(records) - len(executed)
    # the run's execution as timed by _ext.execution; else (MyST-NB executed the
    # chapters while reading) from its start to now
    took = read_run_seconds(_record_dir(app))
    if took is None:
        since = app._attnbook_t0 if executed else app._attnbook_inited
        took, what = time.time() - since, "and reading all pages "
    else:
        what = ""
    kept = (
        f"; the records of the other {reused} chapter(s) were reused from the runs "
        "that made them, their input keys (code cells, the attnbook modules they "
        "import, the lock, the data, the settings) being the current ones"
        if reused
        else ""
    )
    out: list[nodes.Node] = [
        text_para(
            f"Run of {app.env.attnbook_build_started} (UTC): executing "
            f"{len(executed)} chapter(s) {what}took {took:.0f} s of "
            "wall-clock time (chapters execute side by side, one process each, so "
            f"their run times add up to more){kept}."
        ),
        table(
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
            widths=[30, 8, 6, 9, 9, 18, 20],
        ),
        text_para(
            "Checks passed: the checks a chapter asserts (evidence, identities and "
            "controls); a failed one stops the build. Paper statements held: "
            "statements of the paper a chapter measures without asserting them "
            "(the claims dashboard shows the claim as NOT REPRODUCED when one does "
            "not hold); they are counted apart, not as failures."
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
    out.append(text_para("Software (the chapters' kernel and the book toolchain):"))
    out.append(
        table(
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
    out.append(text_para("Hardware:"))
    out.append(
        table(["Item", "Value"], [[k, str(v)] for k, v in hardware], widths=[20, 50])
    )
    data = first.get("data") or {}
    where = (
        f"the {data['path']} by the corpus recipe {data['recipe']}"
        if data
        else first.get("data_source", "an unrecorded source")
    )
    out.append(
        text_para(
            f"Review data (IMDB, Yelp), read from {where}; the Review data column "
            "above gives each chapter's path (chapters on synthetic data read none):"
        )
    )
    if data.get("datasets"):
        out.append(table(*data_table(data), widths=[10, 25, 35, 12, 12]))
    return out


def _on_doctree_read(app, doctree) -> None:
    """Give every code cell of a notebook the anchor ``cell-<index>`` (its index among
    the notebook's cells), so the dashboard can link each check to the cell that
    asserts it."""
    for node in doctree.findall(nodes.container):
        if node.get("nb_element") == "cell_code" and node.get("cell_index") is not None:
            anchor = f"cell-{node['cell_index']}"
            if anchor not in node["ids"]:
                node["ids"].append(anchor)


def _on_config_inited(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def _on_doctree_resolved(app, doctree, docname) -> None:
    for node in list(doctree.findall(dashboard_placeholder)):
        node.replace_self(_dashboard(app, docname))
    for node in list(doctree.findall(run_report_placeholder)):
        node.replace_self(_run_report(app, docname))
    for node in list(doctree.findall(verdict_placeholder)):
        node.replace_self(claims_verdict(_build_records(app)))


def setup(app):
    bibstyle.register()  # the author-year bibliography style of _config.yml
    app.add_node(dashboard_placeholder)
    app.add_node(run_report_placeholder)
    app.add_node(verdict_placeholder)
    app.add_directive("claims-dashboard", ClaimsDashboard)
    app.add_directive("run-report", RunReport)
    app.add_directive("claims-verdict", ClaimsVerdict)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("env-get-outdated", _on_env_get_outdated)
    app.connect("env-get-updated", _on_env_get_updated)
    app.connect("build-finished", _on_build_finished)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("config-inited", _on_config_inited)
    app.add_css_file("attnbook.css")
    paper_map_ext.setup(app, _build_records)  # {paper-map}: the results as a graph
    book_index.setup(app)  # statements in the general index; the titled proof index
    run_status.setup(app, _build_records, _chapter_link)  # each chapter's run
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": False}
