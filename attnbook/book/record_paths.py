"""Where a chapter's record goes and the digest that seals it, without torch: the
build's chapter runner imports this and starts in a fraction of a second."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

RECORD_DIR_ENV = "ATTNBOOK_RECORD_DIR"
RUN_ID_ENV = "ATTNBOOK_RUN_ID"
INPUT_KEYS_ENV = "ATTNBOOK_INPUT_KEYS"
SCHEMA = 1


def record_digest(record: dict[str, Any]) -> str:
    """The SHA-256 of a record's canonical JSON without its ``digest`` field."""
    body = {k: v for k, v in record.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def record_path(chapter: str, folder: str | os.PathLike | None = None) -> Path | None:
    """Where the record of ``chapter`` goes (``None`` when no record folder is set)."""
    folder = folder if folder is not None else os.environ.get(RECORD_DIR_ENV)
    if not folder:
        return None
    return Path(folder).expanduser() / f"{chapter}.json"
