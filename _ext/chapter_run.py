"""Execute one chapter in a process of its own, with a kernel that ends with it.

:mod:`_ext.execution` starts one such process per chapter
(``python -m _ext.chapter_run NOTEBOOK RESULT TIMEOUT PARENT_PID``). The
process

- executes the notebook in a fresh kernel (on a POSIX system over IPC sockets in a
  private folder, so kernels started side by side cannot pick the same port), and shuts
  the kernel down and removes the sockets folder as soon as the chapter ends: finished,
  failed or timed out;
- watches the kernel: a kernel that dies (the out-of-memory killer, a signal) fails the
  chapter within about a second, with the cause and the cell it was in, instead of
  leaving the execution waiting for a reply that never comes;
- ends with its parent: on Linux the kernel delivers SIGTERM to it when the executor
  dies, even by SIGKILL (a parent-death signal, set by the executor), and it then kills
  its kernel before it exits; the kernel itself also exits when its parent is gone
  (ipykernel's parent poller);
- writes its outcome to RESULT (JSON): the executed notebook's path, the seconds it
  took, the kernel's peak resident memory and, when it failed, the error.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import nbformat
from jupyter_cache.executors.utils import single_nb_execution
from jupyter_client import KernelManager

from attnbook.book.record_paths import record_path

__all__ = ["run_chapter", "describe_exit", "set_aside_record", "main"]

#: How often the watchdog looks at the kernel and the parent (seconds).
POLL_SECONDS = 0.5
#: How long a signal waits for another thread that is already ending the chapter.
FINISH_WAIT_SECONDS = 20.0


def describe_exit(returncode: int | None) -> str:
    """A process's exit status in words: ``"signal SIGKILL"``, ``"exit status 1"``."""
    if returncode is None:
        return "unknown exit status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def _kernel_manager(name: str, sockets: str) -> KernelManager:
    if os.name == "posix":  # IPC sockets need a POSIX system
        return KernelManager(
            kernel_name=name, transport="ipc", ip=os.path.join(sockets, "kernel")
        )
    return KernelManager(kernel_name=name)


def _kernel_process(km: KernelManager) -> Any:
    return getattr(getattr(km, "provisioner", None), "process", None)


def _peak_kernel_bytes() -> int:
    """The largest peak resident memory of this process's finished children (the
    kernel, once shut down); Linux reports kilobytes, macOS bytes."""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def set_aside_record(chapter: str, folder: str | os.PathLike | None = None) -> None:
    """Rename the record of a chapter that did not finish to ``<chapter>.json.failed``
    (in ``folder``, by default the run's records folder), so that no reader takes it for
    the record of a complete chapter."""
    path = record_path(chapter, folder)
    if path is not None and path.exists():
        os.replace(path, path.with_name(path.name + ".failed"))


def _write(result: Path, outcome: dict[str, Any]) -> None:
    tmp = result.with_name(result.name + ".tmp")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, result)


def run_chapter(
    notebook: Path, result: Path, timeout: int, parent: int | None = None
) -> int:
    """Execute ``notebook``, write the outcome to ``result``; returns the exit status
    (0: the chapter ran through)."""
    notebook, result = Path(notebook), Path(result)
    t0 = time.perf_counter()
    nb = nbformat.read(notebook, as_version=4)
    sockets = tempfile.mkdtemp(prefix="attnbook-kernel-")
    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    km = _kernel_manager(name, sockets)
    state: dict[str, Any] = {"cell": None, "done": False, "by": None}
    # re-entrant: a signal that interrupts this thread's own end must not wait for it
    lock, finished = threading.RLock(), threading.Event()

    def finish(error: str | None, status: int, *, graceful: bool = False) -> bool:
        """Write the outcome once, end the kernel, clean up; False when another caller
        got there first (a signal, or the watchdog, during the normal end). A caller
        in another thread returns only once that end is complete, so that no thread
        exits the process while another is still killing the kernel or setting the
        record aside. ``graceful``: from the main thread, outside the execution's
        event loop."""
        if not lock.acquire(blocking=False):  # another thread is ending the chapter
            finished.wait(FINISH_WAIT_SECONDS)
            return False
        if state["done"]:  # ended, or this thread is ending it (a signal meanwhile)
            return False
        state["done"], state["by"] = True, threading.get_ident()
        try:
            _end(error, status, graceful)
        finally:
            finished.set()
        return True

    def _kill_kernel(graceful: bool) -> None:
        process = _kernel_process(km)
        if process is None or process.poll() is not None:
            return
        try:
            if not graceful:
                raise RuntimeError("no shutdown request from here")
            km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - the kernel must end whatever happened
            if os.name == "posix":  # the kernel leads a session of its own
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                process.kill()
        # reaped here; a wait interrupted (a signal arriving while this thread held
        # the process's wait lock) or slow must not keep the record from being set
        # aside: the kernel has been sent SIGKILL and writes nothing more
        with contextlib.suppress(Exception):
            process.wait(5)

    def _end(error: str | None, status: int, graceful: bool) -> None:
        try:
            _kill_kernel(graceful)
        finally:
            shutil.rmtree(sockets, ignore_errors=True)
            executed = result.with_suffix(".ipynb")
            if error is None:
                nbformat.write(nb, executed)
            else:
                set_aside_record(notebook.stem)
            _write(
                result,
                {
                    "notebook": str(executed) if error is None else None,
                    "seconds": time.perf_counter() - t0,
                    "peak_kernel_bytes": _peak_kernel_bytes(),
                    "error": error,
                    "status": status,
                },
            )

    def where() -> str:
        cell = state["cell"]
        return "before its first cell" if cell is None else f"in cell {cell}"

    def on_signal(signum: int, _frame: object) -> None:
        stopped = (
            f"the chapter's process received {signal.Signals(signum).name} "
            f"{where()} (the execution was stopped)"
        )
        interrupts_own_end = False
        try:
            # when another thread is already ending the chapter (the watchdog, when
            # the executor dies: its parent-death signal and the watchdog come
            # together), finish returns once that end is complete
            interrupts_own_end = (
                not finish(stopped, 128 + signum)
                and state["by"] == threading.get_ident()
                and not finished.is_set()
            )
        finally:
            if not interrupts_own_end:  # else this thread exits once its end is done
                os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if parent is not None and os.getppid() != parent:  # the executor is already gone
        on_signal(signal.SIGTERM, None)

    def death() -> str | None:
        """How the kernel died, and in which cell; None while it lives."""
        process = _kernel_process(km)
        if process is None or process.poll() is None:
            return None
        return (
            f"kernel died ({describe_exit(process.returncode)}) {where()}; the "
            "kernel is killed by the out-of-memory killer when the machine runs out of "
            "memory (try fewer chapters at a time: ATTNBOOK_JOBS)"
        )

    def watch() -> None:
        """Fail the chapter as soon as its kernel dies, or its executor is gone."""
        while not state["done"]:
            time.sleep(POLL_SECONDS)
            if parent is not None and os.getppid() != parent:
                on_signal(signal.SIGTERM, None)
            cause = None if state["done"] else death()
            if cause is not None and finish(cause, 1):
                os._exit(1)

    def on_cell_start(cell: Any, cell_index: int, **_: Any) -> None:
        state["cell"] = cell_index

    threading.Thread(target=watch, daemon=True).start()
    try:
        executed = single_nb_execution(
            nb,
            cwd=str(notebook.parent),
            timeout=timeout,
            allow_errors=False,
            km=km,
            on_cell_start=on_cell_start,
        )
        error = executed.exc_string
    except Exception:  # the kernel did not start, or died (nbclient saw it first)
        error = death() or traceback.format_exc()
    finish(error, 0 if error is None else 1, graceful=True)
    return 0 if error is None else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m _ext.chapter_run NOTEBOOK RESULT TIMEOUT [PARENT_PID]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4):
        print(main.__doc__, file=sys.stderr)
        return 2
    parent = int(args[3]) if len(args) == 4 else None
    return run_chapter(Path(args[0]), Path(args[1]), int(args[2]), parent)


if __name__ == "__main__":
    # os._exit: the outcome is written and the kernel ended; the interpreter's exit
    # handlers (nbclient's kernel clean-up among them) have nothing left to do, and
    # can wait forever on a kernel that failed to start
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
