"""Execute the book's chapters in parallel, before Sphinx reads them.

MyST-NB executes the notebooks of a Jupyter Book one after the other while Sphinx reads
them. :func:`execute_book` runs them beforehand, several at a time, and stores every
executed notebook in the book's Jupyter cache. The build (``execute_notebooks: cache``
in ``_config.yml``) then takes the outputs from there; a chapter whose code changed
after this step misses the cache and MyST-NB executes it during the build, as before.

Each chapter runs in a process of its own with a kernel of its own
(:mod:`_ext.chapter_run`); every kernel keeps the thread defaults of the
environment, so the numbers do not depend on how many run side by side. A kernel ends
with its chapter (finished, failed or timed out), so at most ``jobs`` kernels, and
their memory, are alive at a time; a kernel that dies fails its chapter within about a
second, with the cause and the cell; when the executor itself dies (any signal, SIGKILL
included) its chapters and their kernels end within a few seconds. The default number
of chapters at a time (:func:`default_jobs`) is bounded by the CPUs and by the memory
available, at the largest kernel peak of the previous run.

Each execution is one *run*: the records folder (``ATTNBOOK_RECORD_DIR``) is emptied,
a fresh ``ATTNBOOK_RUN_ID`` is written to :data:`RUN_FILE` in it, and every chapter
records its glued numbers and checks there (:mod:`attnbook.book.records`); the book's
Sphinx extension reads that run and refuses records of any other. The cache is emptied
too, so every chapter runs in every execution. One execution at a time writes a records
folder (:func:`run_lock`); the record of a chapter that did not finish is set aside
(``<chapter>.json.failed``) and nothing of it is cached.

Run it as ``python -m _ext.execution [--jobs N]`` from the book's root
(``scripts/build-book.sh`` does).

jupyter-cache's own parallel executor (``local-parallel``) does not stand in for it:
a pool of ``os.cpu_count()`` workers fed in fixed chunks (no job count, no memory bound,
no longest-first order), a dead kernel reported as a bare "Kernel died" without its
cause or cell, no record set aside, and workers and kernels left running when the
executor is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from _ext.chapter_run import describe_exit, set_aside_record
from _ext.output_cap import cap_stream_outputs, cell_output_limit
from _ext.run_guard import (
    PERMISSION_ERRNOS,
    RunInterrupted,
    capped_jobs,
    default_jobs,
    last_run,
    refuse_unwritable,
    run_lock,
    set_parent_death_signal,
    signals_end_the_run,
    unwritable_message,
)
from attnbook.book.records import RECORD_DIR_ENV, RUN_ID_ENV

__all__ = [
    "CACHE_DIR",
    "RUN_FILE",
    "TIMES_FILE",
    "book_notebooks",
    "new_run",
    "read_run_id",
    "execute_notebooks",
    "execute_book",
    "ExecutionReport",
    "run_lock",
    "RunInterrupted",
    "default_jobs",
    "main",
]

#: In the records folder: the id of the run whose records it holds.
RUN_FILE = "run-id.txt"
#: The repository root, the folder above the package _ext.
_ROOT = Path(__file__).resolve().parents[1]
#: In the build folder: each chapter's execution time in the last run (seconds), used
#: to start the longest chapters first.
TIMES_FILE = "execution_times.json"
#: Where ``jupyter-book`` keeps its cache (``execute.cache`` empty in ``_config.yml``).
CACHE_DIR = ".jupyter_cache"


def book_notebooks(root: Path) -> list[Path]:
    """The notebooks named in ``root/_toc.yml``, in the order of the table of
    contents."""
    toc_path = Path(root) / "_toc.yml"
    if not toc_path.is_file():
        raise ValueError(f"no table of contents at {toc_path}")
    files: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    toc = yaml.safe_load(toc_path.read_text())
    if isinstance(toc, dict) and isinstance(toc.get("root"), str):
        files.insert(0, toc["root"])
    walk({k: v for k, v in (toc or {}).items() if k != "root"})
    paths = [Path(root) / f"{Path(f).with_suffix('')}.ipynb" for f in files]
    return [p for p in dict.fromkeys(paths) if p.is_file()]


def new_run(records: Path) -> str:
    """Empty ``records`` and give it a fresh run id (written to :data:`RUN_FILE`);
    returns the id."""
    shutil.rmtree(records, ignore_errors=True)
    records.mkdir(parents=True)
    run_id = f"book-{time.time_ns()}-{os.getpid()}"
    (records / RUN_FILE).write_text(run_id + "\n")
    return run_id


def read_run_id(records: Path) -> str | None:
    """The run id in ``records/``:data:`RUN_FILE`, or None when there is none."""
    try:
        return (Path(records) / RUN_FILE).read_text().strip() or None
    except OSError:
        return None


@dataclass
class ExecutionReport:
    """Seconds per executed notebook, the error text of those that failed and each
    chapter kernel's peak resident memory (bytes)."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    peak_bytes: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0


def _longest_first(paths: list[Path], times_file: Path | None) -> list[Path]:
    last = last_run(times_file)
    return sorted(paths, key=lambda p: -float(last.get(p.stem, {}).get("seconds", 0.0)))


@dataclass
class _Running:
    path: Path
    process: subprocess.Popen
    result: Path
    log: Path


def _start_chapter(
    path: Path, scratch: Path, timeout: int, env: dict[str, str], lock_fd: int
) -> _Running:
    result = scratch / f"{path.stem}.json"
    log = scratch / f"{path.stem}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "_ext.chapter_run",
                str(path.resolve()),
                str(result.resolve()),
                str(timeout),
                str(os.getpid()),
            ],
            cwd=_ROOT,  # where ``-m`` finds the package _ext
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(lock_fd,),
            preexec_fn=set_parent_death_signal,
        )
    return _Running(path, process, result, log)


def _outcome(job: _Running) -> dict:
    """What a finished chapter process reported (or, when it reported nothing, how
    it ended)."""
    try:
        return json.loads(job.result.read_text())
    except (OSError, ValueError):
        tail = job.log.read_text(errors="replace")[-2000:] if job.log.exists() else ""
        how = describe_exit(job.process.returncode)
        return {
            "notebook": None,
            "seconds": 0.0,
            "peak_kernel_bytes": 0,
            "error": f"the chapter's process ended ({how}) without reporting an "
            f"outcome\n{tail}",
        }


def _stop(running: list[_Running], grace: float = 5.0) -> None:
    """End the chapters still running: SIGTERM (each kills its kernel), then SIGKILL."""
    for job in running:
        if job.process.poll() is None:
            job.process.terminate()
    deadline = time.monotonic() + grace
    for job in running:
        try:
            job.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            job.process.kill()
            job.process.wait()


def execute_notebooks(
    notebooks: list[Path],
    records: Path,
    *,
    jobs: int,
    cache: Path | None = None,
    times_file: Path | None = None,
    timeout: int = 900,
    lock_wait: float = 30.0,
) -> ExecutionReport:
    """Execute ``notebooks``, ``jobs`` at a time, as one run (:func:`new_run` on
    ``records``, under :func:`run_lock`); with ``cache``, store the executed notebooks
    in that Jupyter cache (emptied first). With ``times_file``, the chapters that took
    longest in the previous run start first, and this run's times and memory are
    written there. Another execution writing ``records`` is waited for up to
    ``lock_wait`` seconds (:func:`run_lock`).

    Each chapter runs in a process of its own (:mod:`_ext.chapter_run`) whose
    kernel ends with it, so at most ``jobs`` kernels are alive at any time. A chapter
    that fails (a cell raised, it timed out, its kernel died) is reported with its
    cause, its record is set aside and nothing of it is cached; the others go on.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    records = Path(records).resolve()
    order = _longest_first(list(notebooks), times_file)
    report = ExecutionReport()
    refuse_unwritable(records, cache, times_file)  # before any chapter starts
    with run_lock(records, wait=lock_wait) as lock_fd:
        env = {**os.environ, RECORD_DIR_ENV: str(records), RUN_ID_ENV: new_run(records)}
        store = None
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
            store = get_cache(str(cache))
        t0 = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix="attnbook-run-"))
        queue, running = list(order), []
        try:
            with signals_end_the_run():
                while queue or running:
                    while queue and len(running) < jobs:
                        running.append(
                            _start_chapter(queue.pop(0), scratch, timeout, env, lock_fd)
                        )
                    time.sleep(0.1)
                    for job in [j for j in running if j.process.poll() is not None]:
                        running.remove(job)
                        _finished(job, report, records, store)
        except RunInterrupted as err:  # what the run leaves, for the message
            err.finished = tuple(n for n in report.seconds if n not in report.failed)
            err.stopped = tuple(j.path.stem for j in running)
            err.not_started = tuple(p.stem for p in queue)
            raise
        finally:
            _stop(running)  # an interrupted run: its chapters end, none is published
            for job in running:
                set_aside_record(job.path.stem, records)
            shutil.rmtree(scratch, ignore_errors=True)
        report.wall = time.perf_counter() - t0
    if times_file is not None:
        entries = {
            name: {"seconds": round(s, 2), "peak_bytes": report.peak_bytes.get(name, 0)}
            for name, s in report.seconds.items()
        }
        Path(times_file).write_text(json.dumps(entries, indent=1) + "\n")
    return report


def _finished(job: _Running, report: ExecutionReport, records: Path, store) -> None:
    """Take in the outcome of a finished chapter: cache it or report its failure."""
    name = job.path.stem
    outcome = _outcome(job)
    seconds = float(outcome.get("seconds") or 0.0)
    report.seconds[name] = seconds
    report.peak_bytes[name] = int(outcome.get("peak_kernel_bytes") or 0)
    memory = f"kernel peak {report.peak_bytes[name] / 2**30:.1f} GB"
    error = outcome.get("error")
    if error is None and job.process.returncode != 0:
        error = f"the chapter's process ended ({describe_exit(job.process.returncode)})"
    if error is not None:
        report.failed[name] = error
        set_aside_record(name, records)
        cause = error.strip().splitlines()[-1] if error.strip() else "no message"
        print(
            f"[attnbook] {name}: FAILED ({seconds:.1f} s, {memory}): {cause}",
            flush=True,
        )
        return
    if store is not None:
        nb = nbformat.read(outcome["notebook"], as_version=4)
        for cut in cap_stream_outputs(nb, cell_output_limit()):
            print(f"[attnbook] {name}: {cut.describe()}", flush=True)
        store.cache_notebook_bundle(
            CacheBundleIn(nb, str(job.path), data={"execution_seconds": seconds}),
            check_validity=False,
            overwrite=True,
        )
    print(f"[attnbook] {name}: executed in {seconds:.1f} s, {memory}", flush=True)


def execute_book(
    root: Path, build: Path, *, jobs: int, timeout: int = 900
) -> ExecutionReport:
    """Execute every notebook of the book at ``root`` (:func:`book_notebooks`) into
    the cache ``build/``:data:`CACHE_DIR`, as the run of ``build/records/book``."""
    root, build = Path(root).resolve(), Path(build).resolve()
    return execute_notebooks(
        book_notebooks(root),
        build / "records" / "book",
        jobs=jobs,
        cache=build / CACHE_DIR,
        times_file=build / TIMES_FILE,
        timeout=timeout,
    )


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(names[:6]) + (
        f" and {len(names) - 6} more" if len(names) > 6 else ""
    )


def _interrupted(err: RunInterrupted) -> str:
    """What an interrupted run leaves, in one line: the chapters stopped (their
    records set aside), those that had finished (recorded as complete, and cached in
    the book's run) and those never started."""
    parts = [str(err)]
    stopped, finished, waiting = err.stopped, err.finished, err.not_started
    parts.append(
        f"the {len(stopped)} chapter(s) running were stopped ({_names(stopped)}), "
        "their records set aside as <chapter>.json.failed"
        if stopped
        else "no chapter was running"
    )
    parts.append(
        f"the {len(finished)} that had finished keep their records as complete "
        f"({_names(finished)})"
        if finished
        else "none had finished"
    )
    if waiting:
        parts.append(f"{len(waiting)} had not started")
    return "; ".join(parts) + "; start the execution again to run the book whole"


def main(argv: list[str] | None = None) -> int:
    """Command line: execute the book in the current folder into ``_build``; with
    ``--check-run FOLDER``, execute its chapters again as a separate run recorded in
    FOLDER (no cache: the book keeps its own run), to compare the two."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--build", type=Path, default=Path("_build"))
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="chapters executed at a time (default: one per CPU this process may use, "
        "as many as the available memory holds)",
    )
    parser.add_argument("--check-run", type=Path, metavar="FOLDER")
    parser.add_argument(
        "--chapters",
        nargs="+",
        metavar="CHAPTER",
        help="with --check-run: the chapters to execute (default: all)",
    )
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs, why = default_jobs(args.build / TIMES_FILE)
        print(f"[attnbook] {args.jobs} chapter(s) at a time ({why})", flush=True)
    else:
        if args.jobs < 1:
            parser.error(f"--jobs must be at least 1, got {args.jobs}")
        args.jobs, capped = capped_jobs(args.jobs, args.build / TIMES_FILE)
        if capped is not None:
            print(f"[attnbook] {capped}", flush=True)
    try:
        cell_output_limit()
    except ValueError as err:
        parser.error(str(err))
    try:
        if args.check_run is None:
            report = execute_book(args.root, args.build, jobs=args.jobs)
        else:
            notebooks = book_notebooks(args.root)
            chosen = [
                p for p in notebooks if not args.chapters or p.stem in args.chapters
            ]
            unknown = set(args.chapters or ()) - {p.stem for p in notebooks}
            if unknown:
                parser.error(f"not chapters of the book: {sorted(unknown)}")
            report = execute_notebooks(chosen, args.check_run.resolve(), jobs=args.jobs)
    except RuntimeError as err:  # another run holds the records folder, or unwritable
        print(f"[attnbook] {err}", file=sys.stderr)
        return 1
    except PermissionError as err:  # one that refuse_unwritable could not foresee
        if err.errno not in PERMISSION_ERRNOS:
            raise
        print(f"[attnbook] {unwritable_message(err.filename, err.strerror)}")
        return 1
    except RunInterrupted as err:
        print(f"[attnbook] {_interrupted(err)}", file=sys.stderr)
        return 1
    total = sum(report.seconds.values())
    print(
        f"[attnbook] {len(report.seconds)} chapters executed in {report.wall:.0f} s "
        f"with {args.jobs} at a time (sum of their times {total:.0f} s)"
    )
    for name, text in report.failed.items():
        print(f"[attnbook] {name} failed:\n{text}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
