"""The parallel execution of the chapters before the build (_ext.execution)."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from jupyter_cache import get_cache

from _ext.execution import (
    CACHE_DIR,
    RUN_FILE,
    TIMES_FILE,
    book_notebooks,
    execute_book,
    new_run,
    read_run_id,
)

from conftest import ROOT


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)


@pytest.fixture
def book(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "intro.md").write_text("# Intro\n")
    _notebook(
        tmp_path / "chapters" / "good.ipynb",
        "import os",
        "print(os.environ['ATTNBOOK_RUN_ID'], os.getcwd())",
    )
    _notebook(tmp_path / "chapters" / "bad.ipynb", "raise RuntimeError('boom')")
    _notebook(tmp_path / "chapters" / "nokernel.ipynb", "1")
    nb = nbformat.read(tmp_path / "chapters" / "nokernel.ipynb", as_version=4)
    nb.metadata["kernelspec"]["name"] = "no-such-kernel"
    nbformat.write(nb, tmp_path / "chapters" / "nokernel.ipynb")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n"
        "  - file: chapters/good\n  - file: chapters/bad\n  - file: chapters/none\n"
        "  - file: chapters/nokernel\n"
    )
    return tmp_path


def test_book_notebooks_in_toc_order_and_existing_only(book):
    assert book_notebooks(book) == [
        book / "chapters" / "good.ipynb",
        book / "chapters" / "bad.ipynb",
        book / "chapters" / "nokernel.ipynb",
    ]
    with pytest.raises(ValueError, match="no table of contents"):
        book_notebooks(book / "chapters")


def test_new_run_empties_the_records_and_names_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_RUN_ID", "old")
    records = tmp_path / "records"
    records.mkdir()
    (records / "stale.json").write_text("{}")
    assert read_run_id(records) is None
    run = new_run(records)
    assert read_run_id(records) == run != "old"
    assert [p.name for p in records.iterdir()] == [RUN_FILE]
    assert new_run(records) != run


def test_execute_book_caches_what_ran_and_reports_what_failed(book, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_RUN_ID", "old")
    build = book / "_build"
    stale = build / CACHE_DIR / "stale"
    stale.mkdir(parents=True)
    report = execute_book(book, build, jobs=2, timeout=120, force=True)
    assert set(report.seconds) == {"good", "bad", "nokernel"}
    # a failed chapter, or one whose kernel does not start, is reported; the rest run
    assert set(report.failed) == {"bad", "nokernel"}
    assert "boom" in report.failed["bad"]
    assert "no-such-kernel" in report.failed["nokernel"]
    assert not stale.exists()  # forced: the cache is emptied first
    run = read_run_id(build / "records" / "book")
    # the build (MyST-NB, cache mode) finds the executed notebook by its source
    cache = get_cache(str(build / CACHE_DIR))
    good = nbformat.read(book / "chapters" / "good.ipynb", as_version=4)
    _, merged = cache.merge_match_into_notebook(good)
    text = merged.cells[1].outputs[0]["text"]
    assert text.split() == [run, str(book / "chapters")]
    with pytest.raises(KeyError):
        cache.match_cache_notebook(
            nbformat.read(book / "chapters" / "bad.ipynb", as_version=4)
        )
    assert set(json.loads((build / TIMES_FILE).read_text())) == set(report.seconds)
    with pytest.raises(ValueError, match="jobs"):
        execute_book(book, build, jobs=0)


def _chapter_book(root):
    """A book of two chapters that record a number; each appends to executions.txt
    when it runs. ``two`` starts as a chapter does (``start_chapter``: the build
    requires its record); ``one`` only starts its record (``start_record``), which
    spares four of the test's seven executions the seeding and figure style (about 5 s
    of CPU each, mostly their imports)."""
    (root / "intro.md").write_text("# Intro\n")
    starts = {
        "one": "from attnbook.book.records import start_record\nstart_record('one')\n",
        "two": "from attnbook.book.chapter import start_chapter\n"
        "start_chapter('two', seed=0)\n",
    }
    for name in ("one", "two"):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        nb.cells = [
            nbformat.v4.new_markdown_cell(f"# Chapter {name}"),
            nbformat.v4.new_code_cell(
                starts[name] + "from attnbook.book.records import glue\nglue('v', 1)\n"
                f"open('executions.txt', 'a').write('{name} ')"
            ),
        ]
        nbformat.write(nb, root / f"{name}.ipynb")
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: one\n  - file: two\n"
    )
    return root


def _edit(path, cell, text):
    nb = nbformat.read(path, as_version=4)
    nb.cells[cell].source += text
    nbformat.write(nb, path)


def test_execute_book_reuses_what_did_not_change(tmp_path, monkeypatch, capsys):
    """A chapter is executed again only when its inputs changed (its code, a
    setting), each with the reason; its prose does not count; a record edited after
    its run, or missing, is not reused."""
    book = _chapter_book(tmp_path)
    build = book / "_build"
    records = build / "records" / "book"
    log = book / "executions.txt"

    def run(**kw):
        log.write_text("")
        report = execute_book(book, build, jobs=2, timeout=120, **kw)
        assert not report.failed, report.failed
        return sorted(log.read_text().split()), report

    assert run()[0] == ["one", "two"]
    first = json.loads((records / "two.json").read_text())
    assert first["inputs"]["key"] and first["inputs"]["parts"]["code"]
    _edit(book / "two.ipynb", 0, " (prose only)")
    executed, report = run()
    assert executed == [] and report.reused == ["one", "two"]
    assert "2 chapter(s) reused" in capsys.readouterr().out
    _edit(book / "one.ipynb", 1, "\nx = 1")
    executed, report = run()
    assert executed == ["one"]
    assert report.reasons == {
        "one": "its inputs changed since its record: its code cells"
    }
    assert "executing one: its inputs changed" in capsys.readouterr().out
    # the reused record keeps its run, the new one belongs to this run
    assert json.loads((records / "two.json").read_text())["run_id"] == first["run_id"]
    assert json.loads((records / "one.json").read_text())["run_id"] == read_run_id(
        records
    )
    monkeypatch.setenv("ATTNBOOK_DEVICE", "cpu")  # a setting that changes numbers
    executed, report = run()
    assert executed == ["one", "two"]
    assert "the settings (ATTNBOOK_DEVICE)" in report.reasons["one"]
    # one run for the last two cases: a record edited after its run is executed
    # again, not reused; a chapter whose record is missing is executed again
    record = json.loads((records / "one.json").read_text())
    record["glued"]["v"] = 2
    (records / "one.json").write_text(json.dumps(record))
    (records / "two.json").unlink()
    executed, report = run()
    assert executed == ["one", "two"] and set(report.reasons) == {"one", "two"}
    assert "changed after its run" in report.reasons["one"]
    assert report.reasons["two"] == "no record of it"


def test_a_chapters_process_starts_light():
    """The process that runs each chapter (``python -m _ext.chapter_run``) imports
    neither torch (it needs of the records only :mod:`attnbook.book.record_paths`) nor
    the IRI grammar that jsonschema 4.24 and later compile at import (the lock holds it
    below): about 5 s of CPU a chapter."""
    heavy = ("torch", "rfc3987_syntax", "lark")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, _ext.chapter_run, nbformat\n"
            f"print([m for m in {heavy!r} if sys.modules.get(m) is not None])",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
