"""Reading the records of a run back, and comparing two runs value by value."""

from __future__ import annotations

import json
import os
from pathlib import Path

from attnbook.book.records import RECORD_DIR_ENV, SCHEMA

__all__ = ["load_records", "compare_records"]


def load_records(folder: str | os.PathLike) -> dict[str, dict]:
    """All chapter records in ``folder``, by chapter name.

    Raises ``FileNotFoundError`` when the folder does not exist and ``ValueError`` for a
    file that is not a record.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no record folder {folder}: run the chapters with "
            f"{RECORD_DIR_ENV}={folder} set "
            f"(scripts/test.sh and scripts/build-book.sh do)"
        )
    records = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path} is not valid JSON ({err}); delete it and rerun"
            ) from err
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise ValueError(f"{path} is not an attnbook record (schema {SCHEMA})")
        records[record["chapter"]] = record
    return records


def compare_records(a: dict[str, dict], b: dict[str, dict]) -> list[str]:
    """Differences between two sets of records' glued numbers and checks (empty:
    identical).

    Only chapters present in both are compared value by value; a chapter present in one
    only is reported too. Values glued or checked with ``volatile=True`` (timings) must
    be present in both but may differ.
    """
    problems = []
    for chapter in sorted(set(a) | set(b)):
        if chapter not in a or chapter not in b:
            problems.append(f"{chapter}: recorded in only one of the two runs")
            continue
        ga, gb = a[chapter]["glued"], b[chapter]["glued"]
        vol = set(a[chapter].get("volatile", ())) | set(b[chapter].get("volatile", ()))
        for key in sorted(set(ga) | set(gb)):
            if key not in ga or key not in gb:
                problems.append(f"{chapter}: {key!r} glued in only one run")
            elif ga[key] != gb[key] and key not in vol:
                problems.append(
                    f"{chapter}: {key!r} differs: {ga[key]!r} vs {gb[key]!r}"
                )

        def fixed(c: dict, vol: set = vol) -> tuple:
            return (
                c["name"],
                None if c["name"] in vol else c["value"],
                c["passed"],
                c.get("asserted", True),
            )

        ca = [fixed(c) for c in a[chapter]["checks"]]
        cb = [fixed(c) for c in b[chapter]["checks"]]
        if ca != cb:
            problems.append(f"{chapter}: the checks differ: {ca} vs {cb}")
    return problems
