"""How the chapters' execution guards the machine it runs on.

- :func:`run_lock`: one execution at a time writes a records folder (an ``flock`` that
  the chapters' processes inherit, so it is held until the last of them has ended);
- :func:`signals_end_the_run` and :func:`set_parent_death_signal`: a run interrupted by
  a signal stops its chapters, and a chapter's process ends with its executor, even when
  the executor is killed with SIGKILL;
- :func:`default_jobs`: how many chapters at a time the CPUs and the available memory
  allow; :func:`capped_jobs`: an explicit number above the memory's bound is capped to
  it, with a line that says so, before any chapter starts;
- :func:`refuse_unwritable`: a folder the run must write but cannot (left owned by
  another user, say root after a ``sudo`` build) is refused before the run starts, in
  one line naming the folder and how to give it back.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "CHAPTER_BYTES",
    "RunInterrupted",
    "run_lock",
    "signals_end_the_run",
    "set_parent_death_signal",
    "available_memory",
    "memory_bound",
    "default_jobs",
    "capped_jobs",
    "UnwritableFolderError",
    "refuse_unwritable",
    "unwritable_message",
    "last_run",
]

#: The memory a chapter's kernel is assumed to need when the previous run is unknown
#: (bytes; the largest kernel peak measured on the book's chapters, rounded up).
CHAPTER_BYTES = 7 * 2**29  # 3.5 GB


def last_run(times_file: Path | None) -> dict[str, dict[str, float]]:
    """The previous run's times and memory by chapter (empty when unknown)."""
    try:
        last = json.loads(Path(times_file).read_text()) if times_file else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(last, dict):
        return {}
    out = {}
    for name, entry in last.items():
        if isinstance(entry, (int, float)):  # the format before memory was recorded
            entry = {"seconds": entry}
        if isinstance(entry, dict):
            out[str(name)] = entry
    return out


def set_parent_death_signal() -> None:
    """In a chapter's process (Linux): receive SIGTERM when the executor dies, even
    by SIGKILL, so that no chapter outlives the run that started it."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def run_lock(records: Path, wait: float = 30.0) -> Iterator[int]:
    """Hold the lock of the run recorded in ``records`` (``records`` + ``.lock``):
    one execution at a time writes a records folder. The lock is an ``flock`` that
    the chapters' processes inherit, so it is held until the last process of a run
    has ended, even when the executor was killed. Waits up to ``wait`` seconds for an
    earlier run to end, then raises ``RuntimeError`` naming the run that holds it."""
    path = Path(f"{records}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = path.read_text().strip() or "unknown"
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"another execution of the book is writing {records} "
                        f"(process {holder}, lock {path}); wait for it to end or "
                        "stop it, then start again"
                    ) from None
                if not told:
                    print(
                        f"[attnbook] waiting for the execution in process {holder} "
                        f"to end (it holds {path})",
                        flush=True,
                    )
                    told = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield fd
    finally:
        os.close(fd)


class RunInterrupted(Exception):
    """The executor received a signal that ends the run (SIGINT, SIGTERM, SIGHUP).
    The executor fills in the chapters that had finished, those it stopped and those
    never started."""

    finished: tuple[str, ...] = ()
    stopped: tuple[str, ...] = ()
    not_started: tuple[str, ...] = ()


@contextmanager
def signals_end_the_run() -> Iterator[None]:
    """While the run goes on, SIGINT, SIGTERM and SIGHUP raise :class:`RunInterrupted`
    in the executor (even where the shell started it with SIGINT ignored), so that it
    stops its chapters before it exits. Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise RunInterrupted(f"the execution received {signal.Signals(signum).name}")

    before = {
        sig: signal.signal(sig, stop)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def available_memory() -> int | None:
    """Bytes of memory available to new processes (``MemAvailable`` on Linux), or
    None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_bound(
    times_file: Path | None = None, *, floor: bool = True
) -> tuple[int | None, str]:
    """How many chapters the available memory holds at a time (None where the memory is
    unknown): each chapter counted at the largest kernel peak of the previous run, or
    :data:`CHAPTER_BYTES` when unknown (with ``floor``, at least that), with a fifth of
    the memory kept free. Returns the number and the reason in words."""
    peaks = [float(e.get("peak_bytes", 0)) for e in last_run(times_file).values()]
    peaks = [p for p in peaks if p > 0]
    per_chapter = max([CHAPTER_BYTES, *peaks]) if floor or not peaks else max(peaks)
    free = available_memory()
    if free is None:
        return None, "memory unknown"
    by_memory = max(1, int(0.8 * free // per_chapter))
    why = f"{free / 2**30:.1f} GB available at {per_chapter / 2**30:.1f} GB a chapter"
    return by_memory, why


def default_jobs(times_file: Path | None = None) -> tuple[int, str]:
    """How many chapters to execute at a time: one per CPU this process may use, and
    no more than the available memory holds (:func:`memory_bound`). Returns the number
    and the reason in words."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    cpus = max(1, cpus or os.cpu_count() or 1)
    by_memory, why = memory_bound(times_file)
    if by_memory is None:
        return cpus, f"{cpus} CPU(s), {why}"
    return min(cpus, by_memory), f"{cpus} CPU(s), {why}"


def capped_jobs(
    requested: int, times_file: Path | None = None
) -> tuple[int, str | None]:
    """An explicit number of chapters at a time, capped at what the available memory
    holds at the largest kernel peak of the previous run (:func:`memory_bound`, with
    no floor: a number asked for is trusted as far as the peaks measured allow):
    ``(jobs, None)`` when it fits, else the bound and a line that says why and how to
    ask for fewer. ``ValueError`` below 1."""
    if requested < 1:
        raise ValueError(f"jobs must be at least 1, got {requested}")
    by_memory, why = memory_bound(times_file, floor=False)
    if by_memory is None or requested <= by_memory:
        return requested, None
    return by_memory, (
        f"{requested} chapters at a time asked for (ATTNBOOK_JOBS or --jobs), but the "
        f"memory holds {by_memory} ({why}; more would end in the out-of-memory "
        f"killer): running {by_memory} at a time; set ATTNBOOK_JOBS={by_memory} or "
        "less to be told nothing"
    )


class UnwritableFolderError(RuntimeError):
    """A folder the run must write cannot be written by this user."""


#: The errors of a file or folder that this user may not write.
PERMISSION_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def unwritable_message(path: str | os.PathLike, cause: str) -> str:
    """One line: ``path`` cannot be written (``cause``), and how to give it back."""
    try:
        owner = Path(path).owner()
    except (OSError, KeyError, NotImplementedError):
        owner = "another user"
    try:
        import getpass

        user = getpass.getuser()
    except (OSError, KeyError):
        user = "$USER"
    return (
        f"cannot write {path}: {cause} (it belongs to {owner}; a build run with sudo "
        f"leaves it so): give it back with `sudo chown -R {user} {path}` or remove it "
        f"with `sudo rm -rf {path}`, then start again"
    )


def refuse_unwritable(*paths: str | os.PathLike | None) -> None:
    """Raise :class:`UnwritableFolderError` (one line: :func:`unwritable_message`) when
    this user cannot write what a run writes at ``paths`` (folders it empties and
    fills, or files it replaces): an existing folder and every folder inside it must
    be writable, and the nearest existing folder above each path too. ``None`` entries
    are skipped."""
    for raw in paths:
        if raw is None:
            continue
        path = Path(raw).absolute()
        above = path.parent
        while not above.exists() and above != above.parent:
            above = above.parent
        if not os.access(above, os.W_OK | os.X_OK):
            raise UnwritableFolderError(unwritable_message(above, "permission denied"))
        if path.is_dir():
            for folder, _dirs, _files in os.walk(path):
                if not os.access(folder, os.W_OK | os.X_OK):
                    raise UnwritableFolderError(
                        unwritable_message(folder, "permission denied")
                    )
        elif path.exists() and not os.access(path, os.W_OK):
            raise UnwritableFolderError(unwritable_message(path, "permission denied"))
