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


def _pid_cell(folder: Path, name: str, record: bool = True) -> str:
    """A cell that starts the chapter's record (unless ``record`` is false: then the
    kernel imports nothing of attnbook) and writes its kernel's pid."""
    start = (
        "from attnbook.book.records import start_record, glue\n"
        f"start_record({name!r})\n"
        f"glue('x_{name}', 41 + 1)\n"
    )
    return (
        "import os, pathlib\n"
        + (start if record else "")
        + f"pathlib.Path({str(folder / name)!r} + '.pid').write_text(str(os.getpid()))"
    )


def _chapter_log(pid: int) -> Path:
    """The log of the chapter process ``pid`` (beside the RESULT of its command)."""
    arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(
        arguments[arguments.index(b"_ext.chapter_run") + 2].decode()
    ).with_suffix(".log")


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else f"({path} absent)"


def _wait_for(path: Path, seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written within {seconds} s")


def test_each_kernel_ends_with_its_chapter(tmp_path):
    """Chapters one at a time: while the second runs, the first one's kernel is no
    longer alive (it ended with its chapter). The first records (its record must not
    be left behind); the others' kernels import nothing of attnbook."""
    pids = tmp_path / "pids"
    pids.mkdir()
    books = [
        _chapter(tmp_path / f"c{i}.ipynb", _pid_cell(pids, f"c{i}", record=i == 1))
        for i in (1, 2)
    ]
    books.append(
        _chapter(
            tmp_path / "c3.ipynb",
            _pid_cell(pids, "c3", record=False),
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
    # the chapters' peaks of a previous run (a tiny kernel's): the jobs asked for fit
    times = book / "_build" / "execution_times.json"
    times.parent.mkdir(parents=True, exist_ok=True)
    if not times.exists():
        peak = {"seconds": 1.0, "peak_bytes": 300 * 2**20}
        times.write_text(json.dumps({p.stem: peak for p in book.glob("chapters/*")}))
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


def _two_chapter_book(
    root: Path, pids: Path, cell: str, record: bool = True, names: str = "ab"
) -> Path:
    """A book of the chapters ``names`` (by default two, ``a`` and ``b``), each
    writing its kernel's pid, then running ``cell``."""
    (root / "chapters").mkdir(parents=True)
    (root / "intro.md").write_text("# Intro\n")
    for name in names:
        _chapter(
            root / "chapters" / f"{name}.ipynb", _pid_cell(pids, name, record), cell
        )
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n"
        + "".join(f"  - file: chapters/{name}\n" for name in names)
    )
    return root


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_a_run_dies_whole_and_starts_again_cleanly(tmp_path, sig):
    """The executor killed mid-run (any signal, SIGKILL included): 5 s later no
    chapter process or kernel of its run is alive; a new run in the same folder then
    records the same numbers as an uninterrupted run (checked after SIGKILL). Two
    chapters run side by side under SIGKILL, which the executor cannot handle (its
    chapters end by the parent-death signal); one under SIGINT and SIGTERM, which it
    handles as one (``_ext.run_guard.signals_end_the_run``; the Ctrl-C test below
    stops a chapter while another has finished)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    names = "ab" if sig == signal.SIGKILL else "a"
    book = _two_chapter_book(
        tmp_path / "book",
        pids,
        "import time\nif not READY: time.sleep(600)",
        names=names,
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
    # kernels importing attnbook, two at a time, on a busy machine
    kernels = [_wait_for(pids / f"{n}.pid", 240) for n in names]
    chapters = [_parent(k) for k in kernels]
    assert all(_parent(c) == executor.pid for c in chapters)
    logs = [_chapter_log(c) for c in chapters]
    executor.send_signal(sig)
    executor.wait(30)
    time.sleep(5)
    left = [p for p in kernels + chapters if _alive(p)]
    assert not left, f"processes of the killed run still alive after 5 s: {left}"
    told = "".join(
        f"\n{log}:\n{_read(log)}\n{_read(log.with_suffix('.json'))}" for log in logs
    )
    # nothing published as complete; what each chapter's process wrote if it was
    assert not list(records.glob("*.json")), told
    assert len(list(records.glob("*.json.failed"))) == len(names), told
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


# ------------------------------------------------------ faults that end in one line
def _one_line(output: str) -> str:
    """The output of a refused run: one line, no traceback."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert "Traceback" not in output, output
    assert len(lines) == 1, output
    return lines[0]


def test_an_explicit_job_count_beyond_the_memory_is_capped(
    tmp_path, monkeypatch, capsys
):
    """``--jobs 1000`` (what ATTNBOOK_JOBS=1000 passes) where the memory holds one
    chapter: capped to one, said before any chapter starts, the run goes on."""
    import _ext.run_guard as guard
    from _ext.execution import main

    book = _two_chapter_book(tmp_path / "book", tmp_path, "pass", record=False)
    monkeypatch.setattr(guard, "available_memory", lambda: 4 * 2**30)
    argv = ["--root", str(book), "--build", str(book / "_build")]
    status = main([*argv, "--check-run", str(tmp_path / "records"), "--jobs", "1000"])
    out = capsys.readouterr().out
    assert status == 0, out
    first = out.splitlines()[0]
    assert first.startswith("[attnbook] 1000 chapters at a time asked for"), out
    assert "the memory holds 1 (4.0 GB available at 3.5 GB a chapter" in first
    assert "running 1 at a time; set ATTNBOOK_JOBS=1 or less" in first
    assert "2 chapters executed in" in out and "with 1 at a time" in out


def test_a_job_count_the_memory_holds_is_kept(tmp_path, monkeypatch):
    import _ext.run_guard as guard

    monkeypatch.setattr(guard, "available_memory", lambda: 64 * 2**30)
    assert guard.capped_jobs(4) == (4, None)
    monkeypatch.setattr(guard, "available_memory", lambda: None)  # unknown: trusted
    assert guard.capped_jobs(1000) == (1000, None)
    with pytest.raises(ValueError, match="at least 1"):
        guard.capped_jobs(0)


def _as_another_user(folder: Path) -> dict:
    """Popen arguments that run a process that cannot write ``folder``, as a user
    finds a build folder another user left (a build run with sudo): as root, ``folder``
    is given to the user nobody and the process runs without root's power to write
    what others own (CAP_DAC_OVERRIDE and its kin dropped from its bounding set);
    otherwise ``folder`` is made read-only."""
    if os.geteuid() != 0:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir():
                path.chmod(0o555)
        return {}
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, 65534, 65534)

    def drop() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")

    return {"preexec_fn": drop}


@pytest.fixture
def book_folder(tmp_path):
    """A one-chapter book."""
    book = tmp_path / "book"
    (book / "chapters").mkdir(parents=True)
    (book / "intro.md").write_text("# Intro\n")
    _chapter(book / "chapters" / "a.ipynb", "1")
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapters/a\n"
    )
    yield book
    for path in [book, *book.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)


@pytest.mark.parametrize("where", ["check-run", "book"])
def test_an_unwritable_records_folder_ends_in_one_line(book_folder, where):
    """A records folder left owned by root (a build run with sudo): one line naming
    the folder, the cause and the fix; no traceback, no chapter started."""
    build = book_folder / "_build"
    records = build / "records" / ("book" if where == "book" else "check")
    records.mkdir(parents=True)
    (records / "a.json").write_text("{}")  # left by the earlier build
    records.chmod(0o755)
    argv = ["--root", str(book_folder), "--build", str(build), "--jobs", "1"]
    if where == "check-run":
        argv += ["--check-run", str(records)]
    done = subprocess.run(
        [sys.executable, "-m", "_ext.execution", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        **_as_another_user(build),
    )
    assert done.returncode == 1
    line = _one_line(done.stdout + done.stderr)
    assert line.startswith("[attnbook] cannot write ") and "permission denied" in line
    assert str(build) in line and "sudo chown -R" in line and "sudo rm -rf" in line
    assert (records / "a.json").exists()  # nothing of the earlier build touched


def _slow_fast_book(root: Path, pids: Path) -> Path:
    book = _two_chapter_book(root, pids, "pass")
    slow = nbformat.read(book / "chapters" / "b.ipynb", as_version=4)
    slow.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
    nbformat.write(slow, book / "chapters" / "b.ipynb")
    return book


def test_ctrl_c_names_the_chapters_it_stopped_and_those_that_finished(tmp_path):
    """Ctrl-C while one chapter has finished and the other runs: the message names
    both, truthfully; the finished one keeps its record, the other's is set aside."""
    pids = tmp_path / "pids"
    pids.mkdir()
    book = _slow_fast_book(tmp_path / "book", pids)
    records = tmp_path / "records"
    executor = _executor(book, records)
    _wait_for(pids / "b.pid", 240)  # a kernel importing attnbook on a busy machine
    deadline = time.monotonic() + 120
    while not (records / "a.json").exists() or _alive(_wait_for(pids / "a.pid")):
        assert time.monotonic() < deadline, "chapter a did not finish"
        time.sleep(0.1)
    time.sleep(1.0)  # the executor takes in a's outcome
    executor.send_signal(signal.SIGINT)
    output = executor.communicate(timeout=60)[0]
    assert executor.returncode == 1
    assert "none was recorded as complete" not in output
    assert "the 1 chapter(s) running were stopped (b)" in output, output
    assert "the 1 that had finished keep their records as complete (a)" in output
    assert (records / "a.json").exists() and (records / "b.json.failed").exists()
    assert set(load_records(records)) == {"a"}


def test_a_cell_that_prints_without_end_is_cut_in_the_book(tmp_path, capsys):
    """A cell that prints 20 MB: the cached notebook keeps 1 MB of it, its first and
    last lines with the size cut between them, and the executor says so."""
    from jupyter_cache import get_cache

    from _ext.execution import CACHE_DIR, execute_book

    (tmp_path / "chapters").mkdir()
    (tmp_path / "intro.md").write_text("# Intro\n")
    _chapter(
        tmp_path / "chapters" / "loud.ipynb",
        "print('small')",
        "import sys\nfor i in range(200_000):\n    print(f'line {i:06d} ' + 'x' * 90)\n"
        "_ = sys.stderr.write('warned\\n')",
    )
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapters/loud\n"
    )
    report = execute_book(tmp_path, tmp_path / "_build", jobs=1)
    assert not report.failed, report.failed
    out = capsys.readouterr().out
    said = "[attnbook] loud: cell 1 printed 19.6 MB; the book keeps its first and last"
    assert said in out
    cache = get_cache(str(tmp_path / "_build" / CACHE_DIR))
    (record,) = cache.list_cache_records()
    nb = cache.get_cache_bundle(record.pk).nb
    assert nb.cells[0].outputs[0]["text"] == "small\n"
    stdout, stderr = nb.cells[1].outputs
    assert stderr["name"] == "stderr" and stderr["text"] == "warned\n"
    text = stdout["text"]
    assert 0.9 * 2**20 < len(text.encode()) <= 2**20
    assert text.startswith("line 000000 ")
    assert text.endswith("line 199999 " + "x" * 90 + "\n")
    assert "MB cut (19.6 MB printed) …\n" in text


def test_cap_stream_outputs_keeps_what_fits_and_other_outputs():
    from _ext.output_cap import cap_stream_outputs

    nb = nbformat.v4.new_notebook()
    quiet = nbformat.v4.new_code_cell("1")
    quiet.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    loud = nbformat.v4.new_code_cell("2")
    loud.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="a" * 600 + "\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "figure"}),
        nbformat.v4.new_output("stream", name="stderr", text="e" * 600 + "\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b" * 600 + "\n"),
    ]
    nb.cells = [quiet, loud]
    (cut,) = cap_stream_outputs(nb, 1000)
    assert cut.index == 1 and cut.printed == 1803 and cut.kept <= 1000
    assert quiet.outputs[0]["text"] == "ok\n"
    kinds = [(o["output_type"], o.get("name")) for o in loud.outputs]
    assert kinds == [("stream", "stdout"), ("display_data", None), ("stream", "stderr")]
    assert loud.outputs[0]["text"].startswith("a") and "cut" in loud.outputs[0]["text"]
    assert loud.outputs[0]["text"].rstrip().endswith("b")
    with pytest.raises(ValueError, match="at least 1"):
        cap_stream_outputs(nb, 0)
