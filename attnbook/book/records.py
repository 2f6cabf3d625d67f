"""Numbers into prose and the record of a run.

:func:`glue` stores a value for ``{glue:text}`` roles and records it. When
``ATTNBOOK_RECORD_DIR`` names a folder, each chapter writes
``<folder>/<chapter>.json``: every glued value, every check, the seeds, run time,
software and hardware, the chapter's input key (``ATTNBOOK_INPUT_KEYS``) and the digest
of its content (:func:`record_digest`), rewritten after every glue, check and cell.
The book's build (``_ext/``) reads them back.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from attnbook.book.environment import environment
from attnbook.book.record_paths import (
    INPUT_KEYS_ENV,
    RECORD_DIR_ENV,
    RUN_ID_ENV,
    SCHEMA,
    record_digest,
    record_path,
)

__all__ = [
    "RECORD_DIR_ENV",
    "RUN_ID_ENV",
    "INPUT_KEYS_ENV",
    "start_record",
    "glue",
    "CHECKS",
    "GLUED",
    "VOLATILE",
    "note_seed",
    "record_path",
    "record_digest",
    "current_chapter",
    "current_cell",
]

_CHAPTER: dict[str, Any] = {"name": None}
_RUN: dict[str, Any] = {}


#: The checks of this run (:class:`attnbook.book.checks.Check`), in order.
CHECKS: list[Any] = []
GLUED: dict[str, Any] = {}
VOLATILE: set[str] = set()  # glued names whose values differ between runs (timings)


# ---------------------------------------------------------------------- chapter and run
def start_record(name: str) -> None:
    """Declare which chapter the following glued numbers and checks belong to.

    Every chapter calls this once, through :func:`attnbook.book.chapter.start_chapter`,
    with its notebook's stem (for example ``"01_setup"``). It starts a fresh record of
    the run (see the module docstring) and, inside IPython, times the chapter cell by
    cell.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(
            "chapter name must be a non-empty string, e.g. start_chapter('01_setup', "
            "seed=0)"
        )
    if any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(
            f"chapter name must be a notebook stem without folders, got {name!r}"
        )
    _CHAPTER["name"] = name
    CHECKS.clear()
    GLUED.clear()
    VOLATILE.clear()
    _RUN.clear()
    _RUN.update(
        started=time.perf_counter(),
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        seeds=[],
        cells=0,
        cell_errors=0,
        inputs=_input_key(name),
    )
    _watch_cells()
    _write_record()


def _input_key(name: str) -> dict[str, Any] | None:
    """This chapter's input key as the build gave it (``ATTNBOOK_INPUT_KEYS``), or
    None outside the build."""
    raw = os.environ.get(INPUT_KEYS_ENV)
    if not raw:
        return None
    try:
        keys = json.loads(raw)
    except ValueError as err:
        raise ValueError(f"{INPUT_KEYS_ENV} is not JSON ({err})") from err
    entry = keys.get(name) if isinstance(keys, dict) else None
    return entry if isinstance(entry, dict) else None


def note_seed(seed: int) -> None:
    """Remember a seed of this run (called by
    :func:`attnbook.book.chapter.start_chapter`)."""
    if _RUN:
        _RUN["seeds"].append(int(seed))
        _write_record()


def _watch_cells() -> None:
    """Inside IPython, count executed cells and update the record after each one."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with every Jupyter kernel
        return
    shell = get_ipython()
    if shell is None:
        return
    _RUN["watching"] = True
    if getattr(shell, "_attnbook_watching", False):
        return

    def _after_cell(result) -> None:
        if not _RUN:
            return
        _RUN["cells"] += 1
        if getattr(result, "error_in_exec", None) is not None:
            _RUN["cell_errors"] += 1
        _write_record()

    shell.events.register("post_run_cell", _after_cell)
    shell._attnbook_watching = True


# ----------------------------------------------------------------------- glue and check
def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (numpy / torch scalars and arrays become numbers /
    lists)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return re.sub(
        r" at 0x[0-9a-fA-F]+", "", repr(value)
    )  # no memory addresses in records


def glue(name: str, value: object, *, volatile: bool = False) -> None:
    """Make ``value`` available to ``{glue:text}`name``` in this notebook and record it.

    In IPython the value goes into the cell's output in the form MyST-NB's glue reads
    (:func:`_display_glued`); elsewhere only the record is kept. ``volatile=True``
    marks a value that legitimately differs between two executions (a measured
    time); the comparison of two executions (``_ext.record_files.compare_records``)
    then checks that it is present but not its value.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("glue name must be a non-empty string")
    if volatile:
        VOLATILE.add(name)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars render as plain numbers
    GLUED[name] = _plain(value)
    _write_record()
    _display_glued(name, value)


GLUE_PREFIX = "application/papermill.record/"
"""The MIME prefix under which MyST-NB finds a glued value (``myst_nb.ext.glue``)."""


def _display_glued(name: str, value: Any) -> None:
    """Put ``value`` in the cell's output as MyST-NB's ``glue(name, value,
    display=False)`` does: its display formats under :data:`GLUE_PREFIX`, named in the
    ``scrapbook`` metadata. Written here rather than imported: importing MyST-NB's
    glue loads ``nbformat`` and its schema validators (about 2.5 s per chapter).
    Outside IPython nothing is displayed and only the record is kept."""
    try:
        from IPython import get_ipython
        from IPython.core.formatters import format_display_data
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is None:
        return
    bundle, metadata = format_display_data(value)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    glued = {GLUE_PREFIX + k: v for k, v in bundle.items()}
    display(glued, raw=True, metadata=metadata)


def current_chapter() -> str | None:
    """The chapter that :func:`start_record` declared (``None`` before it)."""
    return _CHAPTER["name"]


def current_cell() -> int | None:
    """Code cells completed since the chapter's start, when inside IPython."""
    return _RUN.get("cells") if _RUN.get("watching") else None


# ---------------------------------------------------------------------- writing records
def _write_record() -> None:
    name = _CHAPTER["name"]
    path = record_path(name) if name else None
    if path is None or not _RUN:
        return
    if "environment" not in _RUN:
        _RUN["environment"] = environment()
    record = {
        "schema": SCHEMA,
        "chapter": name,
        "run_id": os.environ.get(RUN_ID_ENV),
        "inputs": _RUN["inputs"],
        "started_at": _RUN["started_at"],
        "elapsed_s": round(time.perf_counter() - _RUN["started"], 3),
        "cells": _RUN["cells"],
        "cell_errors": _RUN["cell_errors"],
        "seeds": list(_RUN["seeds"]),
        "glued": dict(GLUED),
        "volatile": sorted(VOLATILE),
        "checks": [asdict(c) for c in CHECKS],
        "environment": _RUN["environment"],
    }
    record["digest"] = record_digest(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, path)  # readers never see a half-written file
