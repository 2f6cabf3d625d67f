"""Numbers into prose, the book's checks, and the record of a run.

:func:`glue` stores a value for ``{glue:text}`` roles when MyST-NB is present (the book
build) and does nothing otherwise (Colab, plain Jupyter). :func:`check` asserts a
measured statistic against the threshold the text justifies, glues the value, and
records the outcome.

Records
    When the environment variable ``ATTNBOOK_RECORD_DIR`` names a folder, every chapter
    writes ``<folder>/<chapter>.json`` with every value it glued, every check
    (statistic, threshold, relation, claim, outcome), the seeds it used, its run time,
    the number of cells run and the software and hardware it ran on. The file is
    rewritten after every glue, check and executed cell, so it always describes the run
    so far, with the digest of its content (:func:`record_digest`) and the run's id.
    Without the variable nothing is written. The book's build (``_ext/`` in the
    repository, not part of this package) sets it, refuses a record whose digest, run
    id or stored outcomes disagree with its content, renders the claims dashboard and
    the page *Reproducing this book* from the records, and compares the records of
    two executions number by number.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attnbook.book.environment import environment

__all__ = [
    "RECORD_DIR_ENV",
    "RUN_ID_ENV",
    "start_record",
    "glue",
    "check",
    "Check",
    "ROLES",
    "READINGS",
    "CHECKS",
    "GLUED",
    "VOLATILE",
    "compare_with_paper",
    "checks",
    "note_seed",
    "record_path",
    "record_digest",
    "outcome",
]

RECORD_DIR_ENV = "ATTNBOOK_RECORD_DIR"
RUN_ID_ENV = "ATTNBOOK_RUN_ID"
SCHEMA = 1

_CHAPTER: dict[str, Any] = {"name": None}
_RUN: dict[str, Any] = {}


@dataclass(frozen=True)
class Check:
    """One verified statement: the statistic, its threshold and the outcome."""

    chapter: str | None
    name: str
    value: float
    threshold: float
    relation: str
    passed: bool
    claim: str | None = None
    result: str | None = None
    # code cells completed since start_chapter's cell, when in IPython
    cell: int | None = None
    asserted: bool = True  # False: a statement of the paper measured, not asserted
    # evidence for a claim, an implementation identity, or a control
    role: str = "evidence"
    what: str | None = None  # the check in words, for the dashboard
    # "paper": tests the paper's statement as the dashboard quotes it (decides the
    # claim's badge); "book": the book's own reading or a side remark (shown apart)
    reading: str = "paper"


CHECKS: list[Check] = []
GLUED: dict[str, Any] = {}
VOLATILE: set[str] = set()  # glued names whose values differ between runs (timings)

_RELATIONS = {">=": lambda x, t: x >= t, "<=": lambda x, t: x <= t}


def outcome(value: float, relation: str, threshold: float) -> bool:
    """Whether ``value <relation> threshold`` holds: the one rule that decides a
    check, when it runs and whenever its record is read back."""
    if relation not in _RELATIONS:
        raise ValueError(
            f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}"
        )
    return bool(_RELATIONS[relation](float(value), float(threshold)))


def record_digest(record: dict[str, Any]) -> str:
    """The SHA-256 of a record's content (everything but its ``digest`` field, as
    canonical JSON). The chapter writes it with every record; a reader recomputes it
    to find a record changed after its run wrote it."""
    body = {k: v for k, v in record.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


#: Whose statement a check tests: only ``paper`` evidence decides a claim's badge.
READINGS = {
    "paper": "the paper's statement as the claims dashboard quotes it",
    "book": "the book's own reading of the claim, or a remark beside it",
}

#: What a check is for. Only ``evidence`` counts toward a claim's status.
ROLES = {
    "evidence": "evidence for a claim, in the regime the claim states",
    "identity": "an implementation identity (two computations of one quantity agree)",
    "control": "a negative control or a sanity check (shows the test can fail)",
}


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
    )
    _watch_cells()
    _write_record()


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

    Outside the book build (Colab, plain Jupyter) MyST-NB is usually absent and only the
    record is kept. ``volatile=True`` marks a value that legitimately differs between
    two executions (a measured time); the comparison of two executions
    (``_ext.record_files.compare_records``) then checks that it is present but not
    its value.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("glue name must be a non-empty string")
    if volatile:
        VOLATILE.add(name)
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy / torch scalars render as plain numbers
    GLUED[name] = _plain(value)
    _write_record()
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab and plain Jupyter: nothing to glue into
        return
    _glue(name, value, display=False)


def _record_check(
    name: str,
    value: float,
    threshold: float,
    relation: str,
    claim: str | None,
    result: str | None,
    volatile: bool,
    asserted: bool,
    role: str,
    what: str | None = None,
    reading: str = "paper",
) -> bool:
    """Validate, record and glue one comparison of a statistic with its threshold."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {sorted(READINGS)}, got {reading!r}")
    if relation not in _RELATIONS:
        raise ValueError(
            f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"check {name!r}: measured value is not finite ({value})")
    threshold = float(threshold)
    if not math.isfinite(threshold):
        raise ValueError(f"check {name!r}: threshold is not finite ({threshold})")
    passed = outcome(value, relation, threshold)
    cell = _RUN.get("cells") if _RUN.get("watching") else None
    CHECKS.append(
        Check(
            _CHAPTER["name"],
            name,
            value,
            threshold,
            relation,
            passed,
            claim,
            result,
            cell,
            asserted,
            role,
            what,
            reading,
        )
    )
    glue(name, value, volatile=volatile)
    return passed


def check(
    name: str,
    value: float,
    threshold: float,
    relation: str = ">=",
    *,
    claim: str | None = None,
    result: str | None = None,
    volatile: bool = False,
    role: str = "evidence",
    what: str | None = None,
    reading: str = "paper",
    asserted: bool = True,
) -> float:
    """Assert ``value <relation> threshold``, glue ``value`` as ``name`` and record the
    check (``asserted=False``: record it without asserting, as
    :func:`compare_with_paper` does).

    ``claim`` names the claim of the paper the check verifies (``"C1"`` ... ``"C7d"``,
    or ``"setup"``, ``"limits"``); ``result`` optionally names the label of the book's
    result (``"thm-one-step"``) that the check verifies, for the claims dashboard.
    ``volatile=True`` marks a statistic that changes from run to run (a timing): the
    comparison of two runs then checks that it is present, not its value. ``role`` says
    what the check is for (:data:`ROLES`): ``"evidence"`` for a claim, ``"identity"`` of
    two implementations, or ``"control"`` (a negative control or sanity check); only
    evidence counts toward a claim's status. ``what`` says in words what is checked
    (the dashboard shows it instead of ``name``). ``reading`` says whose statement the
    check tests (:data:`READINGS`): ``"paper"`` (the claim as the dashboard quotes it;
    only such evidence decides the claim's badge) or ``"book"`` (the book's own stricter
    reading or a side remark, shown on its own line under the claim).

    Raises ``AssertionError`` (failing the notebook and the build) when the check fails,
    and ``ValueError`` for an unknown relation, a non-finite value, or a control or
    identity recorded without assertion (only evidence may be).
    """
    if not asserted and role != "evidence":
        raise ValueError(f"check {name!r}: only evidence is recorded unasserted")
    passed = _record_check(
        name,
        value,
        threshold,
        relation,
        claim,
        result,
        volatile,
        asserted,
        role,
        what,
        reading,
    )
    assert passed or not asserted, (
        f"check {name!r} failed: measured {value:.6g}, required {relation} "
        f"{threshold:.6g}"
    )
    return float(value)


def checks(
    *,
    claim: str | None,
    role: str = "evidence",
    result: str | None = None,
    reading: str = "paper",
    what: dict[str, str] | None = None,
    asserted: bool = True,
):
    """:func:`check` with the claim, role, result, reading and ``asserted`` set once for
    a block of checks, so that each check is one line::

        c3 = checks(claim="C3", result="thm-max-margin", what={"kkt_gap": "KKT gap"})
        c3("kkt_gap", gap, 1e-6, "<=")
        c3("alignment", cosine, 0.99)

    ``what`` maps a check's name to its description in words (the dashboard shows it);
    a call may still pass ``what=`` or override any shared keyword. Raises
    ``ValueError`` at once for an unknown role or reading.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {sorted(READINGS)}, got {reading!r}")
    shared = dict(claim=claim, role=role, result=result, reading=reading)
    shared["asserted"] = asserted
    described = dict(what or {})

    def block_check(
        name: str, value: float, threshold: float, relation: str = ">=", **keywords
    ) -> float:
        keywords.setdefault("what", described.get(name))
        return check(name, value, threshold, relation, **{**shared, **keywords})

    return block_check


def compare_with_paper(
    name: str,
    value: float,
    threshold: float,
    relation: str = ">=",
    *,
    claim: str,
    result: str | None = None,
    what: str | None = None,
    reading: str = "paper",
) -> bool:
    """Set a measured statistic against the threshold a statement of the paper implies,
    without asserting it; glue ``value`` as ``name``, record the outcome and return it.

    For the statements the book measures and finds not to hold in its runs: the chapter
    says so in its text, and the claims dashboard shows the claim as NOT REPRODUCED,
    computed from the recorded outcome, instead of the build failing. Everything the
    book itself states is asserted with :func:`check`. Raises ``ValueError`` like
    :func:`check`.
    """
    if not claim:
        raise ValueError("compare_with_paper needs the claim of the paper it measures")
    recorded = (claim, result, False, False, "evidence", what, reading)
    return _record_check(name, value, threshold, relation, *recorded)


# ---------------------------------------------------------------------- writing records
def record_path(chapter: str, folder: str | os.PathLike | None = None) -> Path | None:
    """Where the record of ``chapter`` goes (``None`` when no record folder is set)."""
    folder = folder if folder is not None else os.environ.get(RECORD_DIR_ENV)
    if not folder:
        return None
    return Path(folder).expanduser() / f"{chapter}.json"


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
