"""Faults of the chapters' execution (_ext.execution and .chapter_run):
kernels end with their chapter, a kernel that dies fails its chapter at once, a run
dies whole when its executor is killed, and two runs never write one folder at once.

Tiny notebooks; each case runs in its own folder. Linux only (process bookkeeping
through /proc, a parent-death signal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from _ext.chapter_run import describe_exit
from _ext.execution import (
    RUN_FILE,
    default_jobs,
    execute_notebooks,
    read_run_id,
    run_lock,
)
from _ext.record_files import load_records

from conftest import ROOT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process bookkeeping through /proc"
)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not reaped, counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _chapter(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


def _pid_cell(folder: Path, name: str) -> str:
    """A cell that starts the chapter's record and writes its kernel's pid."""
    return (
        "import os, pathlib\n"
        "from attnbook.book.records import start_record, glue\n"
        f"start_record({name!r})\n"
        f"glue('x_{name}', 41 + 1)\n"
        f"pathlib.Path({str(folder / name)!r} + '.pid').write_text(str(os.getpid()))"
    )


def _wait_for(path: Path, seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {seconds} s")


def test_each_kernel_ends_with_its_chapter(tmp_path):
    """Chapters one at a time: while the second runs, the first one's kernel is no
    longer alive (it ended with its chapter)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    books = [
        _chapter(tmp_path / f"c{i}.ipynb", _pid_cell(pids, f"c{i}")) for i in (1, 2)
    ]
    books.append(
        _chapter(
            tmp_path / "c3.ipynb",
            _pid_cell(pids, "c3"),
            "import json, pathlib\n"
            f"seen = {{p.stem: int(p.read_text()) for p in pathlib.Path({str(pids)!r})"
            ".glob('c1.pid')}\n"
            "def alive(pid):\n"
            "    try:\n"
            "        s = pathlib.Path(f'/proc/{pid}/stat').read_text()\n"
            "    except OSError:\n"
            "        return False\n"
            "    return s.rsplit(')', 1)[1].split()[0] != 'Z'\n"
            f"pathlib.Path({str(tmp_path / 'alive.json')!r}).write_text("
            "json.dumps({k: alive(v) for k, v in seen.items()}))",
        )
    )
    report = execute_notebooks(books, tmp_path / "records", jobs=1, timeout=60)
    assert not report.failed, report.failed
    alive = json.loads((tmp_path / "alive.json").read_text())
    assert alive == {"c1": False}
    assert not any(_alive(int(p.read_text())) for p in pids.glob("*.pid"))
    assert report.peak_bytes["c1"] > 10 * 2**20  # a kernel's resident memory, measured
    assert not list(Path("/tmp").glob(f"attnbook-run-*/{books[0].stem}.json"))


def test_a_killed_kernel_fails_its_chapter_at_once(tmp_path):
    """A kernel killed mid-cell (as the out-of-memory killer would): its chapter is
    reported FAILED within seconds, with the cause and the cell; the other chapter goes
    on; the dead chapter's record is set aside, never published as complete."""
    pids = tmp_path / "pids"
    pids.mkdir()
    victim = _chapter(
        tmp_path / "victim.ipynb",
        _pid_cell(pids, "victim"),
        "import time\ntime.sleep(600)",
    )
    other = _chapter(tmp_path / "other.ipynb", _pid_cell(pids, "other"))
    records = tmp_path / "records"
    out: dict = {}

    def run() -> None:
        out["report"] = execute_notebooks([victim, other], records, jobs=2, timeout=900)

    thread = threading.Thread(target=run)
    thread.start()
    kernel = _wait_for(pids / "victim.pid")
    time.sleep(0.5)  # inside the sleeping cell
    os.kill(kernel, signal.SIGKILL)
    killed = time.monotonic()
    thread.join(60)
    assert not thread.is_alive(), "the execution hangs on a dead kernel"
    took = time.monotonic() - killed
    assert took < 30, f"the dead kernel was reported after {took:.1f} s"
    report = out["report"]
    assert set(report.failed) == {"victim"}
    assert "kernel died (signal SIGKILL) in cell 1" in report.failed["victim"]
    assert "other" in report.seconds
    assert not (records / "victim.json").exists()
    assert (records / "victim.json.failed").exists()
    assert set(load_records(records)) == {"other"}


def _executor(book: Path, records: Path, jobs: int = 2) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "_ext.execution",
            "--root",
            str(book),
            "--build",
            str(book / "_build"),
            "--check-run",
            str(records),
            "--jobs",
            str(jobs),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _two_chapter_book(root: Path, pids: Path, cell: str) -> Path:
    (root / "chapters").mkdir(parents=True)
    (root / "intro.md").write_text("# Intro\n")
    for name in ("a", "b"):
        _chapter(root / "chapters" / f"{name}.ipynb", _pid_cell(pids, name), cell)
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n"
        "  - file: chapters/a\n  - file: chapters/b\n"
    )
    return root


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_a_run_dies_whole_and_starts_again_cleanly(tmp_path, sig):
    """The executor killed mid-run (any signal, SIGKILL included): 5 s later no
    chapter process or kernel of its run is alive; a new run in the same folder then
    records the same numbers as an uninterrupted run (checked after SIGKILL)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    book = _two_chapter_book(
        tmp_path / "book", pids, "import time\nif not READY: time.sleep(600)"
    )
    for nb in (book / "chapters").glob("*.ipynb"):  # READY: a later run goes through
        content = nbformat.read(nb, as_version=4)
        content.cells.insert(
            0,
            nbformat.v4.new_code_cell(
                f"import pathlib\nREADY = pathlib.Path({str(tmp_path / 'ready')!r})"
                ".exists()"
            ),
        )
        nbformat.write(content, nb)
    records = tmp_path / "records"
    executor = _executor(book, records)
    kernels = [_wait_for(pids / f"{n}.pid") for n in ("a", "b")]
    chapters = [_parent(k) for k in kernels]
    assert all(_parent(c) == executor.pid for c in chapters)
    executor.send_signal(sig)
    executor.wait(30)
    time.sleep(5)
    left = [p for p in kernels + chapters if _alive(p)]
    assert not left, f"processes of the killed run still alive after 5 s: {left}"
    assert not list(records.glob("*.json"))  # nothing published as complete
    assert len(list(records.glob("*.json.failed"))) == 2
    if sig != signal.SIGKILL:
        return
    (tmp_path / "ready").write_text("")
    again = _executor(book, records)
    output = again.communicate(timeout=120)[0]
    assert again.returncode == 0, output
    restarted = load_records(records)
    # what an uninterrupted run records: each chapter's one glued value
    assert {k: r["glued"] for k, r in restarted.items()} == {
        "a": {"x_a": 42},
        "b": {"x_b": 42},
    }
    assert set(restarted) == {"a", "b"}
    assert {r["run_id"] for r in restarted.values()} == {read_run_id(records)}


def test_two_runs_in_one_folder_serialize(tmp_path):
    """Two executions started at once in one folder: the second waits for the first
    to end, then records a run of its own; the records never mix the two runs."""
    chapter = _chapter(
        tmp_path / "c.ipynb",
        "from attnbook.book.records import start_record, glue\nimport time\n"
        "start_record('c')\ntime.sleep(2)\nglue('v', 1)",
    )
    records = tmp_path / "records"
    out: dict = {}

    def run(key: str) -> None:
        report = execute_notebooks([chapter], records, jobs=1, timeout=60)
        out[key] = (report, time.monotonic(), read_run_id(records))

    first = threading.Thread(target=run, args=("first",))
    first.start()
    time.sleep(0.5)
    second_started = time.monotonic()
    run("second")
    first.join()
    (r1, end1, _), (r2, end2, run2) = out["first"], out["second"]
    assert not r1.failed and not r2.failed
    assert end2 - second_started > end1 - second_started + 1.5  # it ran after
    assert {r["run_id"] for r in load_records(records).values()} == {run2}


def test_a_folder_held_by_another_run_is_refused_with_its_holder(tmp_path):
    chapter = _chapter(tmp_path / "c.ipynb", "1")
    records = tmp_path / "records"
    with run_lock(records, wait=0):
        with pytest.raises(RuntimeError, match=rf"process {os.getpid()}.*wait for it"):
            execute_notebooks([chapter], records, jobs=1, lock_wait=0.3)
    assert not (records / RUN_FILE).exists()  # nothing of the refused run written


def test_default_jobs_follow_the_memory(tmp_path, monkeypatch):
    import _ext.run_guard as execution

    times = tmp_path / "times.json"
    times.write_text(json.dumps({"ch": {"seconds": 1, "peak_bytes": 4 * 2**30}}))
    monkeypatch.setattr(execution.os, "sched_getaffinity", lambda _: set(range(8)))
    monkeypatch.setattr(execution, "available_memory", lambda: 16 * 2**30)
    jobs, why = default_jobs(times)
    assert jobs == 3 and "16.0 GB available at 4.0 GB a chapter" in why
    monkeypatch.setattr(execution, "available_memory", lambda: 2**30)
    assert default_jobs(times)[0] == 1
    monkeypatch.setattr(execution, "available_memory", lambda: None)
    assert default_jobs(times)[0] == 8


def test_exit_statuses_in_words():
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(1) == "exit status 1"
    assert describe_exit(None) == "unknown exit status"
