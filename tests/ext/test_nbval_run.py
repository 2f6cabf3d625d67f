"""Chapters executed as a test: nbval runs each notebook under pytest
(_ext.nbval_run), recording one run as the executor does. Tiny notebooks and books."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from _ext.execution import read_run_id
from _ext.nbval_run import nbval_command, run_chapters
from _ext.record_files import load_records

from conftest import ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process bookkeeping of the executor"
)


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


def _recorded(name: str, *more: str) -> tuple[str, ...]:
    return (
        "from attnbook.book.records import start_record, glue\n"
        f"start_record({name!r})\nglue('x_{name}', 42)",
        *more,
    )


_FAILING_CHECK = (
    "from attnbook.book.checks import check\n"
    "check('tiny_gap', 0.5, 0.1, '<=', claim='setup', role='control', "
    "what='a gap that is too large')"
)


def test_a_run_records_what_passed_and_sets_aside_what_failed(tmp_path, capfd):
    """Two notebooks through nbval, two workers: the one whose second cell's check
    fails fails nbval (``pytest --nbval-lax``), which names the cell and the check's
    message; its record is set aside, the other's is kept."""
    good = _notebook(tmp_path / "good.ipynb", *_recorded("good"))
    bad = _notebook(tmp_path / "bad.ipynb", *_recorded("bad", _FAILING_CHECK, "y = 2"))
    records = tmp_path / "records"
    status, aside = run_chapters([good, bad], records, jobs=2)
    out = "".join(capfd.readouterr())
    assert status == 1 and aside == ["bad"]
    assert "bad.ipynb::Cell 1" in out and "1 failed" in out, out
    assert "tiny_gap" in out and "0.5" in out, out
    found = load_records(records, read_run_id(records))
    assert set(found) == {"good"} and found["good"]["glued"] == {"x_good": 42}
    assert (records / "bad.json.failed").exists()


def test_the_command_runs_notebooks_whole_in_one_worker_each(tmp_path):
    notebooks = [tmp_path / f"{n}.ipynb" for n in "abc"]
    command = nbval_command(notebooks, 2, tmp_path / "out.json")
    assert command[command.index("-n") + 1] == "2"
    assert command[command.index("--dist") + 1] == "loadfile"
    assert "--nbval-lax" in command and command[-3:] == [str(p) for p in notebooks]
    assert "-n" not in nbval_command(notebooks[:1], 2, tmp_path / "out.json")


def test_the_command_line_runs_a_book(tmp_path):
    """``python -m _ext.nbval_run FOLDER`` on a two-chapter book: nbval's summary,
    every chapter recorded in FOLDER. One job: one pytest process instead of xdist's
    three (the run of several workers is the test above)."""
    book = tmp_path / "book"
    (book / "chapters").mkdir(parents=True)
    (book / "intro.md").write_text("# Intro\n")
    for name in ("a", "b"):
        _notebook(book / "chapters" / f"{name}.ipynb", *_recorded(name))
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapters/a\n"
        "  - file: chapters/b\n"
    )
    records = tmp_path / "records"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "_ext.nbval_run",
            str(records),
            "--root",
            str(book),
            "--build",
            str(book / "_build"),
            "--jobs",
            "1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "2 passed" in out and "[attnbook] nbval: pytest exit 0" in out
    assert set(load_records(records, read_run_id(records))) == {"a", "b"}
