"""Execute chapters as a test: nbval runs each notebook, cell by cell, under pytest.

``python -m _ext.nbval_run FOLDER [--chapters NAME ... | --chapters all] [--jobs N]``
executes the book's chapters (by default all of them) with ``pytest --nbval-lax`` as one
*run* recorded in FOLDER, exactly as :mod:`_ext.execution` records one: the folder is
emptied and given a fresh run id (:func:`_ext.execution.new_run`) under its lock
(:func:`_ext.run_guard.run_lock`), and every chapter's kernel records its glued numbers
and checks there, so that the two executions of ``scripts/test.sh`` are compared value
by value. nbval fails a notebook whose cell raises, which includes every failed check,
with the cell and the message; the record of a chapter that did not pass is set aside
(``<chapter>.json.failed``), as the executor does.

Chapters run ``N`` at a time through pytest-xdist (``--dist loadfile``: each notebook
whole in one worker, with one kernel), the longest of the previous run first; ``N``
defaults to :func:`_ext.run_guard.default_jobs` and an explicit ``N`` is capped at what
the memory holds (:func:`_ext.run_guard.capped_jobs`).

Loaded into pytest as a plugin (``-p _ext.nbval_run``), the module writes which
notebooks failed to the file named by :data:`OUTCOMES_ENV`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _ext.chapter_run import set_aside_record
from _ext.execution import TIMES_FILE, _longest_first, book_notebooks, new_run
from _ext.run_guard import (
    PERMISSION_ERRNOS,
    RunInterrupted,
    capped_jobs,
    default_jobs,
    refuse_unwritable,
    run_lock,
    set_parent_death_signal,
    signals_end_the_run,
    unwritable_message,
)
from attnbook.book.record_paths import RECORD_DIR_ENV, RUN_ID_ENV

__all__ = ["OUTCOMES_ENV", "CELL_TIMEOUT", "nbval_command", "run_chapters", "main"]

#: Names the file where the plugin writes the notebooks that failed (JSON list).
OUTCOMES_ENV = "ATTNBOOK_NBVAL_OUTCOMES"
#: Seconds a cell may run (the executor's limit too).
CELL_TIMEOUT = 900
_ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------- the pytest plugin
_FAILED: set[str] = set()


def pytest_runtest_logreport(report: Any) -> None:
    """Note the notebook of every item that failed (in the controller, every
    worker's reports arrive here)."""
    if report.failed:
        _FAILED.add(report.nodeid.split("::", 1)[0])


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Write the notebooks that failed to :data:`OUTCOMES_ENV` (controller only)."""
    target = os.environ.get(OUTCOMES_ENV)
    if target and not hasattr(session.config, "workerinput"):
        Path(target).write_text(json.dumps(sorted(Path(f).stem for f in _FAILED)))


# --------------------------------------------------------------------- the run
def nbval_command(notebooks: list[Path], jobs: int, outcomes: Path) -> list[str]:
    """The pytest command that runs ``notebooks`` through nbval, ``jobs`` at a time."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval-lax",
        "--nbval-current-env",
        f"--nbval-cell-timeout={CELL_TIMEOUT}",
        "-p",
        "no:cacheprovider",
        "-p",
        "_ext.nbval_run",
        "-q",
    ]
    if jobs > 1 and len(notebooks) > 1:
        command += ["-n", str(min(jobs, len(notebooks))), "--dist", "loadfile"]
    return command + [str(p) for p in notebooks]


def run_chapters(
    notebooks: list[Path],
    records: Path,
    *,
    jobs: int,
    times_file: Path | None = None,
    lock_wait: float = 30.0,
) -> tuple[int, list[str]]:
    """Run ``notebooks`` through nbval as one run recorded in ``records``; returns
    pytest's exit status and the chapters whose records were set aside (they failed,
    or the run was interrupted). :class:`RunInterrupted` when the run received a
    signal (after pytest has ended and the records are set aside)."""
    records = Path(records).resolve()
    order = _longest_first(list(notebooks), times_file)
    refuse_unwritable(records)
    with run_lock(records, wait=lock_wait) as lock_fd:
        env = {**os.environ, RECORD_DIR_ENV: str(records), RUN_ID_ENV: new_run(records)}
        with tempfile.TemporaryDirectory(prefix="attnbook-nbval-") as scratch:
            outcomes = Path(scratch) / "failed.json"
            env[OUTCOMES_ENV] = str(outcomes)
            process = subprocess.Popen(
                nbval_command(order, jobs, outcomes),
                cwd=_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(lock_fd,),
                preexec_fn=set_parent_death_signal,
            )
            interrupted = None
            try:
                with signals_end_the_run():
                    status = process.wait()
            except RunInterrupted as err:
                interrupted = err
                process.send_signal(signal.SIGINT)  # pytest ends its kernels
                try:
                    status = process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    status = process.wait()
            try:
                failed = set(json.loads(outcomes.read_text()))
            except (OSError, ValueError):
                failed = set()
        names = [p.stem for p in order]
        if interrupted is not None or status not in (0, 1):
            aside = names  # an interrupted or broken run publishes nothing as complete
        else:
            aside = [n for n in names if n in failed]
        for name in aside:
            set_aside_record(name, records)
    if interrupted is not None:
        interrupted.stopped = tuple(aside)
        raise interrupted
    return status, aside


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, metavar="FOLDER")
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--build", type=Path, default=Path("_build"))
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument(
        "--chapters",
        nargs="+",
        metavar="CHAPTER",
        help="the chapters to run ('all', the default: every chapter of the book)",
    )
    args = parser.parse_args(argv)
    times = args.build / TIMES_FILE
    if args.jobs is None:
        args.jobs, why = default_jobs(times)
        print(f"[attnbook] {args.jobs} chapter(s) at a time ({why})", flush=True)
    else:
        if args.jobs < 1:
            parser.error(f"--jobs must be at least 1, got {args.jobs}")
        args.jobs, capped = capped_jobs(args.jobs, times)
        if capped is not None:
            print(f"[attnbook] {capped}", flush=True)
    notebooks = book_notebooks(args.root)
    wanted = [c for c in (args.chapters or ["all"]) if c != "all"]
    unknown = set(wanted) - {p.stem for p in notebooks}
    if unknown:
        parser.error(f"not chapters of the book: {sorted(unknown)}")
    chosen = [p for p in notebooks if not wanted or p.stem in wanted]
    print(
        f"[attnbook] nbval: {len(chosen)} chapter(s), {args.jobs} at a time, "
        f"recorded in {args.records}",
        flush=True,
    )
    try:
        status, aside = run_chapters(
            chosen, args.records, jobs=args.jobs, times_file=times
        )
    except RuntimeError as err:  # the folder is held by another run, or unwritable
        print(f"[attnbook] {err}", file=sys.stderr)
        return 1
    except PermissionError as err:
        if err.errno not in PERMISSION_ERRNOS:
            raise
        print(f"[attnbook] {unwritable_message(err.filename, err.strerror)}")
        return 1
    except RunInterrupted as err:
        print(
            f"[attnbook] {err}: nbval was stopped; the records of its "
            f"{len(err.stopped)} chapter(s) were set aside as <chapter>.json.failed",
            file=sys.stderr,
        )
        return 1
    if aside:
        print(f"[attnbook] nbval: failed, records set aside: {', '.join(aside)}")
    print(f"[attnbook] nbval: pytest exit {status}", flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
