"""Reproducibility: records of a run, identical numbers on re-execution, the claims
dashboard.

``test_two_executions_identical_numbers`` compares the records of the book's execution
of the chapters with those of their second execution, both made by ``scripts/test.sh``;
it is marked ``two_runs``, deselected by default, and run by ``scripts/test.sh`` with
``ATTNBOOK_COMPARE_RECORDS=<book records>:<second records>`` once both have finished.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from _ext.dashboard import (
    CLAIMS,
    attach_results,
    chapter_name_in_notebook,
    claim_rows,
    other_checks,
    required_chapters,
    result_labels,
)
from _ext.execution import read_run_id
from _ext.record_files import compare_records, load_records
from attnbook.book import checks
from attnbook.book import records as report
from attnbook.book.record_paths import RECORD_DIR_ENV

from conftest import build_mini_book, write_mini_book

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------- two executions
def _compare_spec() -> str:
    spec = os.environ.get("ATTNBOOK_COMPARE_RECORDS")
    assert spec, (
        "set ATTNBOOK_COMPARE_RECORDS=<records a>:<records b>; scripts/test.sh does, "
        "after both executions of the chapters"
    )
    return spec


@pytest.mark.two_runs
def test_two_executions_identical_numbers():
    book_dir, second_dir = _compare_spec().split(":")
    book, second = load_records(book_dir), load_records(second_dir)
    assert second, f"no records in {second_dir}"
    # the second execution runs the book's chapters, possibly not all of them
    extra = sorted(set(second) - set(book))
    assert not extra, f"not in the book: {extra}"
    for name, rec in second.items():
        assert rec["checks"] and rec["glued"] and rec["seeds"], f"{name}: no record"
        assert rec["cell_errors"] == 0 and rec["cells"] > 0, name
    problems = compare_records({k: book[k] for k in second}, second)
    assert not problems, "the two executions differ:\n" + "\n".join(problems)
    n_values = sum(len(r["glued"]) for r in second.values())
    n_volatile = sum(len(r.get("volatile", ())) for r in second.values())
    print(
        f"{len(second)} of the book's {len(book)} chapters executed twice: "
        f"{n_values - n_volatile} glued values identical in both executions "
        f"({n_volatile} measured times exempt); executed once: "
        f"{', '.join(sorted(set(book) - set(second))) or 'none'}"
    )


@pytest.mark.two_runs
def test_every_claim_is_checked_by_the_book():
    """In the book's records, every claim the book can verify has checks, and all
    passed."""
    rows = claim_rows(load_records(_compare_spec().split(":")[0]))
    unchecked = [r.claim.id for r in rows if r.claim.verifiable and not r.checks]
    assert not unchecked, f"claims without a check in the book: {unchecked}"
    failed = [r.claim.id for r in rows if r.status == "FAIL"]
    assert not failed, f"claims with a failed check: {failed}"
    print(" ".join(f"{r.claim.id}:{r.status}({len(r.checks)})" for r in rows))


def test_records_written_only_when_asked(tmp_path, monkeypatch):
    report.start_record("ch_unset")
    report.glue("x", 1.5)
    assert not list(tmp_path.iterdir())

    monkeypatch.setenv(RECORD_DIR_ENV, str(tmp_path))
    report.start_record("ch")
    report.note_seed(7)
    report.glue("arr", np.arange(3))
    report.glue("t", torch.tensor(2.5))
    report.glue("label", "text")
    checks.check("stat", 0.25, 0.5, "<=", claim="C1", result="thm-x")
    rec = json.loads((tmp_path / "ch.json").read_text())
    assert rec["glued"] == {"arr": [0, 1, 2], "t": 2.5, "label": "text", "stat": 0.25}
    assert rec["seeds"] == [7]
    rec["checks"][0].pop("cell")  # set only inside IPython
    assert rec["checks"] == [
        {
            "chapter": "ch",
            "name": "stat",
            "value": 0.25,
            "threshold": 0.5,
            "relation": "<=",
            "passed": True,
            "claim": "C1",
            "result": "thm-x",
            "asserted": True,
            "role": "evidence",
            "what": None,
            "reading": "paper",
            "spread": None,
        }
    ]
    with pytest.raises(ValueError, match="reading"):
        checks.check("s2", 1.0, 0.0, claim="C1", reading="mine")
    # a statement of the paper measured without assertion: recorded, never raises
    assert checks.compare_with_paper("gap", -0.1, 0.0, ">=", claim="C6a") is False
    rec = json.loads((tmp_path / "ch.json").read_text())
    assert (
        rec["checks"][-1]["asserted"] is False and rec["checks"][-1]["passed"] is False
    )
    assert rec["glued"]["gap"] == -0.1
    with pytest.raises(ValueError, match="claim"):
        checks.compare_with_paper("gap2", 1.0, 0.0, claim="")
    # the installed distribution's version (torch.__version__ may carry a build suffix
    # the package metadata lacks, e.g. '2.14.1+cu130' for the PyPI wheel '2.14.1')
    assert rec["environment"]["versions"]["torch"] == importlib.metadata.version(
        "torch"
    )
    with pytest.raises(AssertionError, match="failed"):
        checks.check("bad", 2.0, 1.0, "<=", claim="C1")
    rec = load_records(tmp_path)["ch"]
    assert [c["passed"] for c in rec["checks"]] == [
        True,
        False,
        False,
    ]  # failures are recorded too
    report.start_record("ch")  # a new run of the chapter starts a fresh record
    assert load_records(tmp_path)["ch"]["checks"] == []


def test_glued_objects_have_no_addresses(tmp_path, monkeypatch):
    monkeypatch.setenv(RECORD_DIR_ENV, str(tmp_path))
    report.start_record("ch")
    report.glue("obj", object())
    assert "0x" not in load_records(tmp_path)["ch"]["glued"]["obj"]


def test_load_records_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=RECORD_DIR_ENV):
        load_records(tmp_path / "missing")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_records(tmp_path)
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="not an attnbook record"):
        load_records(tmp_path)


def _record(glued, checks=()):
    return {
        "schema": 1,
        "glued": glued,
        "checks": [
            {
                "name": n,
                "value": v,
                "passed": p,
                "claim": c,
                "relation": ">=",
                "threshold": 0.0,
                "result": None,
            }
            for n, v, p, c in checks
        ],
    }


def test_compare_records_finds_every_difference():
    a = {"x": _record({"u": 1.0, "w": 2}, [("c", 1.0, True, "C1")])}
    assert compare_records(a, json.loads(json.dumps(a))) == []
    b = {
        "x": _record({"u": 1.0 + 1e-16 * 2, "z": 2}, [("c", 1.0, True, "C1")]),
        "y": _record({}),
    }
    problems = compare_records(a, b)
    assert any("'u' differs" in p for p in problems)
    assert any("'w' glued in only one run" in p for p in problems)
    assert any("y: recorded in only one" in p for p in problems)
    c = {"x": _record({"u": 1.0, "w": 2}, [("c", 1.5, True, "C1")])}
    assert any("checks differ" in p for p in compare_records(a, c))


# --------------------------------------------------------------------------- dashboard
def test_claim_rows_pass_fail_and_unchecked():
    records = {
        "02_one_step": _record({}, [("a", 1.0, True, "C1"), ("b", 1.0, True, "c1")]),
        "05_extensions": _record(
            {},
            [
                ("m", 1.0, False, "C6"),
                ("k", 1.0, True, "C7c"),
                ("s", 1.0, True, "setup"),
                ("l", 1.0, True, "limits"),
            ],
        ),
    }
    rows = {r.claim.id: r for r in claim_rows(records)}
    ids = [c.id for c in CLAIMS]
    assert list(rows) == ids[: ids.index("C6a")] + ["C6"] + ids[ids.index("C6b") + 1 :]
    assert rows["C1"].status == "PASS" and len(rows["C1"].checks) == 2
    assert (
        rows["C6"].status == "FAIL"
    )  # "C6" tags the claim as a whole: one combined row
    records["05_extensions"]["checks"][0]["passed"] = True
    assert {r.claim.id: r.status for r in claim_rows(records)}["C6"] == "PASS"
    # a statement of the paper measured without assertion that does not hold
    records["05_extensions"]["checks"].append(
        {
            **records["05_extensions"]["checks"][0],
            "name": "n",
            "passed": False,
            "asserted": False,
        }
    )
    assert {r.claim.id: r.status for r in claim_rows(records)}["C6"] == "NOT REPRODUCED"
    records["05_extensions"]["checks"].pop()
    records["05_extensions"]["checks"][0]["passed"] = False
    assert (
        "(a) Untrained" in rows["C6"].claim.statement
        and "(b) One step" in rows["C6"].claim.statement
    )
    records["05_extensions"]["checks"].append(
        {
            **records["05_extensions"]["checks"][0],
            "name": "b",
            "claim": "C6b",
            "passed": True,
        }
    )
    rows = {r.claim.id: r for r in claim_rows(records)}
    assert (
        "C6a" not in rows
        and rows["C6b"].status == "PASS"
        and rows["C6"].status == "FAIL"
    )
    assert not claim_rows({})[0].checks and claim_rows({})[0].status == "NOT CHECKED"
    assert [r.claim.id for r in claim_rows({})] == ids
    assert (
        rows["C7c"].status == "PASS"
        and rows["C7c"].checks[0]["chapter"] == "05_extensions"
    )
    assert rows["C3"].status == "NOT CHECKED"
    assert set(other_checks(records)) == {"setup", "limits"}


def test_required_chapters_from_notebooks():
    def nb(code):
        return {
            "cells": [
                {"cell_type": "markdown", "source": "start_chapter('no')"},
                {"cell_type": "code", "source": code},
            ]
        }

    assert (
        chapter_name_in_notebook(nb('x = 1\nstart_chapter("02_one_step")'))
        == "02_one_step"
    )
    assert chapter_name_in_notebook(nb("x = 1")) is None
    with pytest.raises(ValueError, match="once"):
        chapter_name_in_notebook(nb("start_chapter('a')\nstart_chapter('a')"))
    assert required_chapters({"chapters/a": nb("start_chapter('a')"), "b": nb("")}) == {
        "a": "chapters/a"
    }
    with pytest.raises(ValueError, match="stem"):
        required_chapters({"chapters/02_x": nb("start_chapter('01_setup')")})


def test_every_chapter_in_the_book_names_itself():
    notebooks = {
        f"chapters/{p.stem}": json.loads(p.read_text())
        for p in (ROOT / "chapters").glob("*.ipynb")
    }
    required = required_chapters(notebooks)
    assert "01_setup" in required


def _fake_app(tmp_path, notebooks: dict[str, str], mode="force"):
    src = tmp_path / "src"
    (src / "chapters").mkdir(parents=True)
    for name, code in notebooks.items():
        (src / "chapters" / f"{name}.ipynb").write_text(
            json.dumps({"cells": [{"cell_type": "code", "source": code}]})
        )
    (src / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n"
        + "".join(f"  - file: chapters/{n}\n" for n in notebooks)
    )
    env = SimpleNamespace(
        found_docs={f"chapters/{n}" for n in notebooks} | {"intro"},
        doc2path=lambda d: str(src / (d + (".md" if d == "intro" else ".ipynb"))),
    )
    return SimpleNamespace(
        outdir=str(tmp_path / "_build" / "html"),
        doctreedir=str(tmp_path / "_build" / ".doctrees"),
        srcdir=str(src),
        env=env,
        config=SimpleNamespace(nb_execution_mode=mode, nb_execution_cache_path=""),
    )


def test_dashboard_refuses_missing_stale_or_failed_records(tmp_path, monkeypatch):
    pytest.importorskip("sphinx")
    from sphinx.errors import ExtensionError

    from _ext import sphinxext

    app = _fake_app(
        tmp_path,
        {
            "01_setup": "start_chapter('01_setup')",
            "02_one_step": "start_chapter('02_one_step')",
        },
    )
    monkeypatch.setattr(
        sphinxext.os, "environ", dict(os.environ)
    )  # keep the real env clean
    # MyST-NB executes every chapter in this mode: the build starts a run of its own
    sphinxext._on_builder_inited(app)
    folder = Path(sphinxext.os.environ[RECORD_DIR_ENV])
    assert folder == tmp_path / "_build" / "records" / "book" and folder.is_dir()
    run_id = sphinxext.os.environ[report.RUN_ID_ENV]
    keys = app._attnbook_keys
    assert json.loads(sphinxext.os.environ[report.INPUT_KEYS_ENV]) == keys

    def write(name, **extra):
        rec = {
            **_record({}),
            "chapter": name,
            "run_id": run_id,
            "cell_errors": 0,
            "inputs": keys[name],
            **extra,
        }
        rec["digest"] = report.record_digest(rec)
        (folder / f"{name}.json").write_text(json.dumps(rec))

    write("01_setup")
    with pytest.raises(ExtensionError, match="02_one_step"):
        sphinxext._build_records(app)
    old = {"key": "old", "parts": {**keys["02_one_step"]["parts"], "code": "old"}}
    write("02_one_step", inputs=old)
    with pytest.raises(ExtensionError, match="other inputs.*its code cells"):
        sphinxext._build_records(app)
    write("02_one_step", cell_errors=1)
    with pytest.raises(ExtensionError, match="raised"):
        sphinxext._build_records(app)
    write("02_one_step", run_id="an earlier run")  # the same inputs: accepted
    assert set(sphinxext._build_records(app)) == {"01_setup", "02_one_step"}
    off = _fake_app(
        tmp_path / "off", {"01_setup": "start_chapter('01_setup')"}, mode="off"
    )
    with pytest.raises(ExtensionError, match="executed"):
        sphinxext._build_records(off)


def test_citation_cites_the_paper():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    paper = cff["preferred-citation"]
    bib = (ROOT / "references.bib").read_text()
    assert paper["title"] in bib and str(paper["year"]) in bib
    assert [a["family-names"] for a in paper["authors"]] == [
        "Wu",
        "Shevchenko",
        "Oymak",
        "Mondelli",
    ]


def test_checks_belong_to_the_last_result_before_them():

    md = lambda s: {"cell_type": "markdown", "source": s}  # noqa: E731
    code = lambda s: {"cell_type": "code", "source": s}  # noqa: E731
    nb = {
        "cells": [
            code('check("early", 1, 0)'),
            md("```{prf:definition} D\n:label: def-d\n```"),
            md(
                "```{prf:lemma} A lemma\n:label: "
                "lem-a\n\nText.\n```\n```{prf:proof}\n```"
            ),
            code('check("a1", x, 0.9, claim="C1")\nglue("n", 1)'),
            md("```{prf:theorem} B\n:nonumber:\n:label: thm-b\n```"),
            code(
                "check('b1', y, 0.9, claim='C3')\nfor k in ks:\n    check(k + '_gap', "
                "0, 1, claim='C3')"
            ),
        ]
    }
    assert result_labels(nb) == {"a1": "lem-a", "b1": "thm-b"}
    nb["cells"].insert(0, code("start_chapter('ch')"))
    records = {
        "ch": _record(
            {},
            [
                ("a1", 1, True, "C1"),
                ("b1", 1, True, "C3"),
                ("x_gap", 1, True, "C3"),
                ("early", 1, True, "setup"),
                ("y_gap", 1, True, "C3"),
            ],
        )
    }
    checks = records["ch"]["checks"]
    checks[0]["result"] = "explicit"
    checks[2]["cell"] = 3  # the loop cell: start cell + 3 code cells
    attach_results(records, {"ch": nb})
    assert [c["result"] for c in checks] == ["explicit", "thm-b", "thm-b", None, None]


def test_checks_know_their_cell_in_a_kernel(built_mini_book):
    """Executed in a kernel, each check records the code cell it ran in, counted from
    the chapter's start (the mini book of tests/conftest.py: imports, then the start
    and a statement, a lemma, three checks, a theorem, two)."""
    import nbformat

    book = built_mini_book.folder
    assert not built_mini_book.report.failed, built_mini_book.report.failed
    records = load_records(book / "_build" / "records" / "book")
    checks = records["ch1"]["checks"]
    assert [c["cell"] for c in checks] == [0, 1, 1, 1, 2, 2]
    assert records["ch1"]["cells"] == 3
    nb = nbformat.read(book / "ch1.ipynb", as_version=4)
    attach_results(records, {"ch1": nb})
    assert [c["result"] for c in checks] == [
        None,
        "lem-mini",
        "lem-mini",
        "lem-mini",
        "thm-mini",
        "thm-mini",
    ]


def test_chapters_are_quiet_and_self_seeded():
    """No progress bars in the chapters (their output must be stable), and each seeds
    itself."""
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        code = "\n".join(
            "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"]
            if c["cell_type"] == "code"
        )
        import re

        assert not re.search(r"from tqdm|import tqdm|tqdm\(|progress=True", code), (
            path.name
        )
        assert not any(
            c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"
        ), f"{path.name} is committed with outputs"
        if "start_chapter(" in code:
            assert re.search(r"start_chapter\([^)]*seed=", code), (
                f"{path.name} calls start_chapter without a seed"
            )


def test_volatile_values_are_not_compared(tmp_path, monkeypatch):
    runs = []
    for seconds in (1.25, 1.5):
        folder = tmp_path / str(seconds)
        monkeypatch.setenv(RECORD_DIR_ENV, str(folder))
        report.start_record("perf")
        report.glue("n", 3)
        report.glue("time_s", seconds, volatile=True)
        checks.check("speedup", 10 * seconds, 5.0, claim="setup", volatile=True)
        runs.append(load_records(folder))
    assert runs[0]["perf"]["volatile"] == ["speedup", "time_s"]
    assert compare_records(*runs) == []
    runs[1]["perf"]["glued"]["n"] = 4
    assert compare_records(*runs) == ["perf: 'n' differs: 3 vs 4"]


# ------------------------------------------------------------------------- a real build
def _mini_book(folder: Path, chapter_code: str, mode: str = "force") -> Path:
    """A mini book whose chapter states a lemma, then runs ``chapter_code``; its
    landing page holds the dashboard, a second page the run report."""
    import nbformat

    return write_mini_book(
        folder,
        [
            nbformat.v4.new_markdown_cell(
                "# Chapter\n\n```{prf:lemma} L\n:label: lem-mini\n\nS.\n```"
            ),
            nbformat.v4.new_code_cell(chapter_code),
        ],
        mode=mode,
        pages={
            "intro": "# Mini\n\n```{claims-dashboard}\n```\n",
            "repro": "# Repro\n\n```{run-report}\n```\n",
        },
    )


def test_dashboard_in_a_real_build(built_mini_book):
    """The chapters executed beforehand (_ext.execution, as
    scripts/build-book.sh does) are taken from the cache, not run again. The extension
    renders the dashboard from that run's records: PASS rows linked to the result stated
    before them and to the anchor of the cell that asserts them, checks in words with
    their math, a control marked as such, a paper statement that does not hold as NOT
    REPRODUCED; and the run report. (The mini book of tests/conftest.py, built once.)"""
    book, report, proc = (
        built_mini_book.folder,
        built_mini_book.report,
        built_mini_book.proc,
    )
    assert not report.failed, report.failed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (book / "executions.txt").read_text() == "x"  # executed once, before
    html = (book / "_build" / "html" / "intro.html").read_text()
    chapter = (book / "_build" / "html" / "ch1.html").read_text()
    assert "mini_stat" in html and "PASS" in html and "NOT CHECKED" in html
    assert "Lemma 1" in html  # the check is linked to the lemma stated before it
    assert 'href="ch1.html#cell-3"' in html and 'id="cell-3"' in chapter
    assert "the statistic" in html and r"\(r\)" in html
    assert "negative control" in html and "NOT REPRODUCED" in html
    assert "attnbook-badge-not-reproduced" in html and "<details" in html
    # a failed statement of the book's own reading: a line of its own, C1 still PASS
    assert "The book&#x2019;s reading" in html or "The book's reading" in html
    assert "attnbook-claim attnbook-claim-pass" in html
    records = book / "_build" / "records" / "book"
    assert json.loads((records / "ch1.json").read_text())["run_id"] == read_run_id(
        records
    )
    report_html = (book / "_build" / "html" / "repro.html").read_text()
    assert "Run time (s)" in report_html and ">5<" in report_html  # the seed
    assert "4 / 4" in report_html and "0 / 2" in report_html  # asserted; paper


def test_build_fails_without_a_chapter_record(tmp_path):
    """A chapter that calls start_chapter but leaves no record stops the build (no stale
    data)."""
    book = _mini_book(
        tmp_path / "stale",
        "from attnbook.book.chapter import start_chapter\n"
        "if False:\n    start_chapter('ch1', seed=0)",
    )
    stale = book / "_build" / "records" / "book"
    stale.mkdir(parents=True)
    (stale / "ch1.json").write_text("{}")  # an old record is wiped, not used
    proc = build_mini_book(book)
    assert proc.returncode != 0
    assert (
        "no record of this build for the chapter(s) ['ch1']"
        in proc.stdout + proc.stderr
    )


def test_a_plain_build_executes_only_what_changed(tmp_path):
    """``jupyter-book build`` alone (no execution before it) executes a chapter that
    has no record with the current input key, says so, and reuses it in the next build
    when only its prose changed (a change to its code executes it again:
    tests/ext/test_execution.py)."""
    import nbformat

    book = _mini_book(
        tmp_path / "inc",
        "from attnbook.book.checks import check\n"
        "from attnbook.book.chapter import start_chapter\n"
        "rng, device = start_chapter('ch1', seed=5)\n"
        "check('mini_stat', 0.5, 0.25, '>=', claim='C1')\n"
        "open('executions.txt', 'a').write('x');",
        mode="cache",
    )

    def build() -> str:
        proc = build_mini_book(book)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-3000:]
        assert (book / "executions.txt").read_text() == "x", out[-3000:]
        return out

    assert "executing ch1: no record of it" in build()
    nb = nbformat.read(book / "ch1.ipynb", as_version=4)
    nb.cells[0].source += "\n\nA sentence more."
    nbformat.write(nb, book / "ch1.ipynb")
    out = build()
    assert "1 chapter(s) reused" in out  # taken from the cache, with its record
    assert _read_again(out) == {"ch1"}  # its source changed
    page = book / "_build" / "html" / "ch1.html"
    assert "A sentence more." in page.read_text()
    # a page is read again only when its source or its executed notebook changed; every
    # page is written again
    page.unlink()
    assert _read_again(build()) == set() and "A sentence more." in page.read_text()
    # executed again with the same inputs (--force): its page is read again, from the
    # new executed notebook
    from _ext.execution import execute_book

    assert not execute_book(
        book, book / "_build", jobs=1, timeout=120, force=True
    ).failed
    (book / "executions.txt").write_text("x")
    assert _read_again(build()) == {"ch1"}
    # a build that warned (-W --keep-going goes on to the end): the next one reads every
    # page again, so that the warning is not hidden by a page read without it
    good = nb.cells[0].source
    nb.cells[0].source += "\n\nSee {ref}`no-such-label`."
    nbformat.write(nb, book / "ch1.ipynb")
    assert build_mini_book(book, "--keep-going").returncode != 0
    nb.cells[0].source = good
    nbformat.write(nb, book / "ch1.ipynb")
    assert _read_again(build()) == {"ch1", "intro", "repro"}


def _read_again(build_output: str) -> set[str]:
    """The documents a Sphinx build's output says it read."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", build_output)
    return set(re.findall(r"reading sources\.\.\. \[\s*\d+%\] (\S+)", plain))
