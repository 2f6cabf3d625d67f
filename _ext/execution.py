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

Each execution is one *run* with a fresh ``ATTNBOOK_RUN_ID`` (written to
:data:`RUN_FILE` in the records folder, ``ATTNBOOK_RECORD_DIR``); every chapter records
its glued numbers and checks there (:mod:`attnbook.book.records`) with its *input key*,
the digest of everything its numbers depend on (:mod:`_ext.input_key`: its code cells,
the attnbook modules it imports, the process that runs its kernel, the lock, the data,
the settings). The book's execution is *incremental* (:func:`execute_book`): a chapter
whose record and executed notebook in the cache both carry the current key is reused
as it stands, and only the others are executed, each with the reason
(:func:`plan_run`); the book's Sphinx extension accepts a set of records whose keys are
the current ones, whichever runs made them, and refuses any other. ``--force``
executes every chapter, and a separate run (``--check-run``) always executes the
chapters it names, into a folder of its own. One execution at a time writes a records
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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn

from _ext.chapter_run import describe_exit, set_aside_record
from _ext.input_key import input_keys, what_changed
from _ext.notebooks import chapter_name_in_notebook
from _ext.output_cap import cap_stream_outputs, cell_output_limit
from _ext.record_files import verify_record
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
from attnbook.book.record_paths import (
    INPUT_KEYS_ENV,
    RECORD_DIR_ENV,
    RUN_ID_ENV,
    SCHEMA,
)

__all__ = [
    "CACHE_DIR",
    "RUN_FILE",
    "RUN_SECONDS_FILE",
    "TIMES_FILE",
    "book_notebooks",
    "executed_stamps",
    "new_run",
    "read_run_id",
    "read_run_seconds",
    "plan_run",
    "RunPlan",
    "execute_notebooks",
    "execute_book",
    "describe_plan",
    "ExecutionReport",
    "run_lock",
    "RunInterrupted",
    "default_jobs",
    "main",
]

#: In the records folder: the id of the run whose records it holds.
RUN_FILE = "run-id.txt"
#: In the records folder: the wall-clock seconds the run took to execute its chapters.
RUN_SECONDS_FILE = "run-seconds.txt"
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


def new_run(records: Path, keep: Iterable[str] = ()) -> str:
    """Empty ``records`` but for the records of the chapters in ``keep`` (reused from
    earlier runs) and give it a fresh run id (written to :data:`RUN_FILE`); returns
    the id."""
    records = Path(records)
    _prune(records, keep)
    records.mkdir(parents=True, exist_ok=True)
    run_id = f"book-{time.time_ns()}-{os.getpid()}"
    (records / RUN_FILE).write_text(run_id + "\n")
    return run_id


def _prune(records: Path, keep: Iterable[str], run_file: bool = False) -> None:
    """Remove everything in ``records`` but the records of the chapters in ``keep``
    (and, with ``run_file``, the run's id)."""
    kept = {f"{name}.json" for name in keep}
    kept |= {RUN_FILE, RUN_SECONDS_FILE} if run_file else set()
    if not kept:
        shutil.rmtree(records, ignore_errors=True)
    elif records.is_dir():
        for path in records.iterdir():
            if path.name not in kept:
                shutil.rmtree(path) if path.is_dir() else path.unlink()


def read_run_seconds(records: Path) -> float | None:
    """The wall-clock seconds the run in ``records`` took to execute its chapters, or
    None when it did not write them (its chapters were executed by MyST-NB)."""
    try:
        return float((Path(records) / RUN_SECONDS_FILE).read_text())
    except (OSError, ValueError):
        return None


def read_run_id(records: Path) -> str | None:
    """The run id in ``records/``:data:`RUN_FILE`, or None when there is none."""
    try:
        return (Path(records) / RUN_FILE).read_text().strip() or None
    except OSError:
        return None


@dataclass
class ExecutionReport:
    """Seconds per executed notebook, the error text of those that failed, each
    chapter kernel's peak resident memory (bytes), the chapters reused as they stood
    and why each of the others was executed."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    peak_bytes: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    reused: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass
class RunPlan:
    """Which notebooks a run reuses (their record and executed notebook carry the
    current input key) and which it executes, each with the reason."""

    reuse: list[Path] = field(default_factory=list)
    execute: dict[Path, str] = field(default_factory=dict)


def _cached(store, nb: nbformat.NotebookNode):
    """The cache's record of ``nb``'s code, or None."""
    try:
        return store.match_cache_notebook(nb)
    except KeyError:
        return None


def _stale_reason(path: Path, records: Path, store, inputs: dict) -> str | None:
    """Why the notebook at ``path`` must be executed again (None: its record and its
    executed notebook carry the current input key ``inputs``)."""
    nb = nbformat.read(path, as_version=4)
    record_file = records / f"{path.stem}.json"
    # a chapter that records its numbers (start_chapter) needs its record
    if record_file.exists() or chapter_name_in_notebook(nb) is not None:
        try:
            record = json.loads(record_file.read_text())
        except FileNotFoundError:
            return "no record of it"
        except (OSError, ValueError) as err:
            return f"its record is unreadable ({err})"
        changed = what_changed(record.get("inputs"), inputs)
        if changed:
            return changed
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            return "its record is not an attnbook record"
        try:
            verify_record(record_file, record)
        except ValueError as err:
            return str(err)
        if record.get("cell_errors"):
            return "its record has cells that raised"
    cached = _cached(store, nb)
    if cached is None:
        return "no executed notebook of its code in the cache"
    if (cached.data or {}).get("input_key") != inputs["key"]:
        return "its executed notebook in the cache was made from other inputs"
    return None


def plan_run(
    notebooks: list[Path], records: Path, cache: Path, keys: dict[str, dict]
) -> RunPlan:
    """Which of ``notebooks`` can be reused from ``records`` and the Jupyter cache
    ``cache`` (both carry the current input key of ``keys``), and why each other one
    must be executed."""
    store = get_cache(str(cache))
    plan = RunPlan()
    for path in notebooks:
        why = _stale_reason(Path(path), Path(records), store, keys[Path(path).stem])
        if why is None:
            plan.reuse.append(Path(path))
        else:
            plan.execute[Path(path)] = why
    return plan


def executed_stamps(notebooks: Iterable[Path], cache: Path) -> dict[Path, str]:
    """For each notebook, which executed notebook of its code the Jupyter cache
    ``cache`` holds (its entry and when it was made; empty: none). Every execution
    replaces the entry, so a changed stamp means new outputs, also at an unchanged
    input key (``--force``)."""
    store = get_cache(str(cache))
    out = {}
    for path in notebooks:
        cached = _cached(store, nbformat.read(path, as_version=4))
        out[Path(path)] = "" if cached is None else f"{cached.pk}:{cached.created}"
    return out


def _uncache(store, path: Path) -> None:
    """Remove every executed notebook of ``path`` from the cache."""
    for cached in store.list_cache_records():
        if Path(cached.uri).resolve() == Path(path).resolve():
            store.remove_cache(cached.pk)


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
    incremental: bool = False,
    keys: dict[str, dict] | None = None,
) -> ExecutionReport:
    """Execute ``notebooks``, ``jobs`` at a time, as one run (:func:`new_run` on
    ``records``, under :func:`run_lock`); with ``cache``, store the executed notebooks
    in that Jupyter cache with their input keys (``keys``, by default
    :func:`_ext.input_key.input_keys` of the notebooks as they are now), which is
    emptied first unless the run is ``incremental``: then the notebooks whose record
    and executed notebook carry the current key are reused (:func:`plan_run`) and
    only the others executed. With ``times_file``, the chapters that took longest in
    the previous run start first, and this run's times and memory are written there.
    Another execution writing ``records`` is waited for up to ``lock_wait`` seconds
    (:func:`run_lock`).

    Each chapter runs in a process of its own (:mod:`_ext.chapter_run`) whose
    kernel ends with it, so at most ``jobs`` kernels are alive at any time. A chapter
    that fails (a cell raised, it timed out, its kernel died) is reported with its
    cause, its record is set aside and nothing of it is cached; the others go on.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if incremental and cache is None:
        raise ValueError("an incremental run needs the cache of the executed notebooks")
    records = Path(records).resolve()
    keys = keys if keys is not None else input_keys(notebooks)
    report = ExecutionReport()
    refuse_unwritable(records, cache, times_file)  # before any chapter starts
    with run_lock(records, wait=lock_wait) as lock_fd:
        if incremental:
            plan = plan_run(list(notebooks), records, cache, keys)
        else:
            plan = RunPlan(execute={Path(p): "asked for" for p in notebooks})
        report.reused = [p.stem for p in plan.reuse]
        report.reasons = {p.stem: why for p, why in plan.execute.items()}
        if incremental:
            for line in describe_plan(report):
                print(f"[attnbook] {line}", flush=True)
        if incremental and not plan.execute and read_run_id(records):
            _prune(records, report.reused, run_file=True)  # nothing to run
            return report
        order = _longest_first(list(plan.execute), times_file)
        run_id = new_run(records, keep=report.reused)
        env = {
            **os.environ,
            RECORD_DIR_ENV: str(records),
            RUN_ID_ENV: run_id,
            INPUT_KEYS_ENV: json.dumps(keys, sort_keys=True),
        }
        store = None
        if cache is not None:
            if not incremental:
                shutil.rmtree(cache, ignore_errors=True)
            store = get_cache(str(cache))
            for path in order:  # a stale executed notebook is never taken again
                _uncache(store, path)
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
                        _finished(job, report, records, store, keys)
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
        (records / RUN_SECONDS_FILE).write_text(f"{report.wall:.1f}\n")
    if times_file is not None:
        entries = {  # a reused chapter keeps the times of the run that made it
            name: entry
            for name, entry in last_run(times_file).items()
            if name in report.reused
        }
        entries.update(
            {
                name: {
                    "seconds": round(s, 2),
                    "peak_bytes": report.peak_bytes.get(name, 0),
                }
                for name, s in report.seconds.items()
            }
        )
        Path(times_file).write_text(json.dumps(entries, indent=1) + "\n")
    return report


def _finished(
    job: _Running, report: ExecutionReport, records: Path, store, keys: dict
) -> None:
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
            CacheBundleIn(
                nb,
                str(job.path),
                data={"execution_seconds": seconds, "input_key": keys[name]["key"]},
            ),
            check_validity=False,
            overwrite=True,
        )
    print(f"[attnbook] {name}: executed in {seconds:.1f} s, {memory}", flush=True)


def execute_book(
    root: Path, build: Path, *, jobs: int, timeout: int = 900, force: bool = False
) -> ExecutionReport:
    """Execute the notebooks of the book at ``root`` (:func:`book_notebooks`) into the
    cache ``build/``:data:`CACHE_DIR`, as a run of ``build/records/book``: those whose
    inputs changed since their record was made (:func:`plan_run`), or, with ``force``,
    every one. Prints what it reuses and why it executes each other notebook."""
    root, build = Path(root).resolve(), Path(build).resolve()
    return execute_notebooks(
        book_notebooks(root),
        build / "records" / "book",
        jobs=jobs,
        cache=build / CACHE_DIR,
        times_file=build / TIMES_FILE,
        timeout=timeout,
        incremental=not force,
    )


def describe_plan(report: ExecutionReport) -> list[str]:
    """The lines that say which chapters a run reused and why it executed the
    others."""
    lines = []
    if report.reused:
        lines.append(
            f"{len(report.reused)} chapter(s) reused, their inputs unchanged since "
            f"their record: {', '.join(sorted(report.reused))}"
        )
    for name, why in report.reasons.items():
        lines.append(f"executing {name}: {why}")
    return lines


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
    FOLDER (no cache: the book keeps its own run), to compare the two. The book's
    execution reuses the chapters whose inputs did not change (``--force``: none)."""
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
    parser.add_argument(
        "--force",
        action="store_true",
        help="execute every chapter, even those whose record and executed notebook "
        "carry the current input key",
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
            report = execute_book(
                args.root, args.build, jobs=args.jobs, force=args.force
            )
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
    reused = f", {len(report.reused)} reused" if report.reused else ""
    print(
        f"[attnbook] {len(report.seconds)} chapters executed in {report.wall:.0f} s "
        f"with {args.jobs} at a time (sum of their times {total:.0f} s){reused}"
    )
    for name, text in report.failed.items():
        print(f"[attnbook] {name} failed:\n{text}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
