"""Numbers into prose and the record of a run: :func:`glue` stores a value for
``{glue:text}`` roles; with ``ATTNBOOK_RECORD_DIR`` set each chapter writes
``<folder>/<chapter>.json`` (glued values, checks, seeds, its :func:`environment`, input
key, digest) after every glue, check and cell, for the build (``_ext/``) to read."""

from __future__ import annotations

import importlib.metadata as md
import json
import math
import os
import platform
import re
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from attnbook.book.record_paths import (
    INPUT_KEYS_ENV,
    RUN_ID_ENV,
    SCHEMA,
    record_digest,
    record_path,
)
from attnbook.data.reviews import data_source
from attnbook.runtime import cpu_name

_CHAPTER: dict[str, Any] = {"name": None}
_RUN: dict[str, Any] = {}

CHECKS: list[Any] = []  # the checks of this run, in order
GLUED: dict[str, Any] = {}
VOLATILE: set[str] = set()  # glued names whose values differ between runs (timings)


def start_record(name: str) -> None:
    """Start a fresh record for chapter ``name`` (its notebook's stem)."""
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
    keys = json.loads(os.environ.get(INPUT_KEYS_ENV) or "{}")
    entry = keys.get(name) if isinstance(keys, dict) else None
    return entry if isinstance(entry, dict) else None


def note_seed(*seeds: int) -> None:
    """Remember seeds of this run, in order."""
    if _RUN:
        _RUN["seeds"].extend(int(seed) for seed in seeds)
        _write_record()


def _shell():
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
    """Put ``value`` in the cell's output as MyST-NB's glue does (without its 2.5 s
    import)."""
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


def environment() -> dict[str, Any]:
    """Software and hardware of this process, and the review data it reads."""
    versions = {}
    packages = "attnbook torch numpy scipy pandas cvxpy datasets matplotlib seaborn"
    for pkg in packages.split():
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "data_source": describe_data(source := data_source()),
        "data": source,
        "versions": versions,
        "torch_threads": torch.get_num_threads(),
        "accelerator": (
            torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        ),
    }


def describe_data(source: dict[str, Any]) -> str:
    """One line for a :func:`attnbook.data.reviews.data_source` record."""
    head = f"{source.get('path', 'unknown')} (recipe {source.get('recipe', '?')})"
    rows = data_table(source)[1]
    return "; ".join(
        [head, *(f"{n}: {s}, {r}, {a} + {b} reviews" for n, s, r, a, b in rows)]
    )


def data_table(source: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a table of the data sets of a ``data_source`` record."""
    headers = ["Data set", "Source", "Rule", "Train reviews", "Test reviews"]
    rows = [
        [name, str(entry.get("source")), str(entry.get("rule"))]
        + ["?" if entry.get(s) is None else f"{entry[s]:,}" for s in ("train", "test")]
        for name, entry in source.get("datasets", {}).items()
    ]
    return headers, rows


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
