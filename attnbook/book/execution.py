"""Execute the book's chapters in parallel, before Sphinx reads them.

MyST-NB executes the notebooks of a Jupyter Book one after the other while Sphinx reads
them. :func:`execute_book` runs them beforehand, several at a time (one process and one
kernel per chapter; every kernel keeps the thread defaults of the environment, so the
numbers do not depend on how many run side by side), and stores every executed notebook
in the book's Jupyter cache. The build (``execute_notebooks: cache`` in ``_config.yml``)
then takes the outputs from there; a chapter whose code changed after this step misses
the cache and MyST-NB executes it during the build, as before.

Each execution is one *run*: the records folder (``ATTNBOOK_RECORD_DIR``) is emptied,
a fresh ``ATTNBOOK_RUN_ID`` is written to :data:`RUN_FILE` in it, and every chapter
records its glued numbers and checks there (:mod:`attnbook.book.records`); the book's
Sphinx extension reads that run and refuses records of any other. The cache is emptied
too, so every chapter runs in every execution.

Run it as ``python -m attnbook.book.execution [--jobs N]`` from the book's root
(``scripts/build-book.sh`` does).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from jupyter_client import KernelManager

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
    "main",
]

#: In the records folder: the id of the run whose records it holds.
RUN_FILE = "run-id.txt"
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
    """Seconds per executed notebook, and the error text of those that failed."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    wall: float = 0.0


def _execute_one(
    path: str, timeout: int, run: dict[str, str]
) -> tuple[str, object, float, str | None]:
    """Execute the notebook at ``path`` in a kernel of its own; returns it executed,
    its time and, when it failed, the error. On a POSIX system the kernel talks over
    local sockets in a private folder (IPC), not TCP ports: kernels started side by side
    cannot pick the same port."""
    os.environ.update(run)  # in the worker process: its kernels inherit the run
    t0 = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    sockets = tempfile.mkdtemp(prefix="attnbook-kernel-")
    try:
        name = nb.metadata.get("kernelspec", {}).get("name", "python3")
        km = (
            KernelManager(
                kernel_name=name, transport="ipc", ip=os.path.join(sockets, "kernel")
            )
            if os.name == "posix"  # IPC sockets need a POSIX system
            else KernelManager(kernel_name=name)
        )
        result = single_nb_execution(
            nb, cwd=str(Path(path).parent), timeout=timeout, allow_errors=False, km=km
        )
        return path, result.nb, result.time, result.exc_string
    except Exception:  # the kernel did not start or died: report it, go on
        return path, nb, time.perf_counter() - t0, traceback.format_exc()
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def _longest_first(paths: list[Path], times_file: Path | None) -> list[Path]:
    try:
        last = json.loads(Path(times_file).read_text()) if times_file else {}
    except (OSError, ValueError):
        last = {}
    if not isinstance(last, dict):
        last = {}
    return sorted(paths, key=lambda p: -float(last.get(p.stem, 0.0)))


def execute_notebooks(
    notebooks: list[Path],
    records: Path,
    *,
    jobs: int,
    cache: Path | None = None,
    times_file: Path | None = None,
    timeout: int = 900,
) -> ExecutionReport:
    """Execute ``notebooks`` with ``jobs`` processes as one run (:func:`new_run` on
    ``records``); with ``cache``, store the executed notebooks in that Jupyter cache
    (emptied first). With ``times_file``, the chapters that took longest in the
    previous run start first, and this run's times are written there."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    records = Path(records).resolve()
    run = {RECORD_DIR_ENV: str(records), RUN_ID_ENV: new_run(records)}
    store = None
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        store = get_cache(str(cache))
    order = _longest_first(list(notebooks), times_file)
    report, t0 = ExecutionReport(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(jobs, len(order) or 1)) as pool:
        pending = {pool.submit(_execute_one, str(p), timeout, run) for p in order}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                path, nb, seconds, error = future.result()
                name = Path(path).stem
                report.seconds[name] = seconds
                if error is not None:
                    report.failed[name] = error
                    print(f"[attnbook] {name}: FAILED ({seconds:.1f} s)", flush=True)
                    continue
                if store is not None:
                    store.cache_notebook_bundle(
                        CacheBundleIn(nb, path, data={"execution_seconds": seconds}),
                        check_validity=False,
                        overwrite=True,
                    )
                print(f"[attnbook] {name}: executed in {seconds:.1f} s", flush=True)
    report.wall = time.perf_counter() - t0
    if times_file is not None:
        Path(times_file).write_text(json.dumps(report.seconds, indent=1) + "\n")
    return report


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
        default=len(os.sched_getaffinity(0)),
        help="chapters executed at a time (default: the CPUs this process may use)",
    )
    parser.add_argument("--check-run", type=Path, metavar="FOLDER")
    parser.add_argument(
        "--chapters",
        nargs="+",
        metavar="CHAPTER",
        help="with --check-run: the chapters to execute (default: all)",
    )
    args = parser.parse_args(argv)
    if args.check_run is None:
        report = execute_book(args.root, args.build, jobs=args.jobs)
    else:
        notebooks = book_notebooks(args.root)
        chosen = [p for p in notebooks if not args.chapters or p.stem in args.chapters]
        unknown = set(args.chapters or ()) - {p.stem for p in notebooks}
        if unknown:
            parser.error(f"not chapters of the book: {sorted(unknown)}")
        report = execute_notebooks(chosen, args.check_run.resolve(), jobs=args.jobs)
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
