"""Numbers into prose and the record of a run: :func:`glue` stores a value for
``{glue:text}`` roles; with ``ATTNBOOK_RECORD_DIR`` set each chapter writes
``<folder>/<chapter>.json`` (glued values, checks, seeds, run time, environment, input
key, digest) after every glue, check and cell, for the build (``_ext/``) to read."""

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
    RUN_ID_ENV,
    SCHEMA,
    record_digest,
    record_path,
)

_CHAPTER: dict[str, Any] = {"name": None}
_RUN: dict[str, Any] = {}

CHECKS: list[Any] = []  # the checks of this run, in order
GLUED: dict[str, Any] = {}
VOLATILE: set[str] = set()  # glued names whose values differ between runs (timings)


def start_record(name: str) -> None:
    """Start a fresh record for chapter ``name`` (its notebook's stem) and, inside
    IPython, count its cells."""
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
    """This chapter's input key from ``ATTNBOOK_INPUT_KEYS``, None outside the build."""
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
    """Remember a seed of this run."""
    if _RUN:
        _RUN["seeds"].append(int(seed))
        _write_record()


def _shell():
    """The IPython shell this runs in, or None."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with every Jupyter kernel
        return None
    return get_ipython()


def _watch_cells() -> None:
    shell = _shell()
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


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (numpy / torch values become numbers, lists)."""
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
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))  # no memory addresses


def glue(name: str, value: object, *, volatile: bool = False) -> None:
    """Make ``value`` available to ``{glue:text}`name``` and record it;
    ``volatile=True`` marks a value that differs between executions (a time)."""
    if not isinstance(name, str) or not name:
        raise ValueError("glue name must be a non-empty string")
    if volatile:
        VOLATILE.add(name)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars render as plain numbers
    GLUED[name] = _plain(value)
    _write_record()
    _display_glued(name, value)


GLUE_PREFIX = "application/papermill.record/"  # where MyST-NB finds a glued value


def _display_glued(name: str, value: Any) -> None:
    """Put ``value`` in the cell's output as MyST-NB's ``glue(name, value,
    display=False)`` does (importing MyST-NB's glue would cost about 2.5 s)."""
    if _shell() is None:
        return
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(value)
    metadata["scrapbook"] = {"name": name, "mime_prefix": GLUE_PREFIX}
    glued = {GLUE_PREFIX + k: v for k, v in bundle.items()}
    display(glued, raw=True, metadata=metadata)


def current_chapter() -> str | None:
    """The chapter :func:`start_record` declared (``None`` before it)."""
    return _CHAPTER["name"]


def current_cell() -> int | None:
    """Code cells completed since the chapter's start, when inside IPython."""
    return _RUN.get("cells") if _RUN.get("watching") else None


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
