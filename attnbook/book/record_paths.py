"""Where a chapter's record goes and the digest that seals it: what the book's build
(``_ext/``) shares with :mod:`attnbook.book.records`, without its imports (the run's
environment, torch), so that a chapter's runner starts in a fraction of a second."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "RECORD_DIR_ENV",
    "RUN_ID_ENV",
    "INPUT_KEYS_ENV",
    "SCHEMA",
    "record_digest",
    "record_path",
]

RECORD_DIR_ENV = "ATTNBOOK_RECORD_DIR"
RUN_ID_ENV = "ATTNBOOK_RUN_ID"
INPUT_KEYS_ENV = "ATTNBOOK_INPUT_KEYS"
SCHEMA = 1


def record_digest(record: dict[str, Any]) -> str:
    """The SHA-256 of a record's content (everything but its ``digest`` field, as
    canonical JSON). The chapter writes it with every record; a reader recomputes it
    to find a record changed after its run wrote it."""
    body = {k: v for k, v in record.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def record_path(chapter: str, folder: str | os.PathLike | None = None) -> Path | None:
    """Where the record of ``chapter`` goes (``None`` when no record folder is set)."""
    folder = folder if folder is not None else os.environ.get(RECORD_DIR_ENV)
    if not folder:
        return None
    return Path(folder).expanduser() / f"{chapter}.json"
