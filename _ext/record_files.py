"""Reading the records of a run back, and comparing two runs value by value."""

from __future__ import annotations

import json
import os
from pathlib import Path

from _ext.input_key import what_changed
from attnbook.book.checks import outcome
from attnbook.book.record_paths import RECORD_DIR_ENV, SCHEMA, record_digest

__all__ = ["load_records", "verify_record", "compare_records"]

_RERUN = "rerun the chapters (scripts/build-book.sh) to record them anew"


def verify_record(
    path: Path,
    record: dict,
    run_id: str | None = None,
    inputs: dict | None = None,
) -> None:
    """Refuse a record that its run did not write as it stands: its digest
    (:func:`attnbook.book.records.record_digest`) must match its content, its run id
    ``run_id`` (when given), its input key the current one ``inputs`` (when given:
    ``{"key", "parts"}`` of :func:`_ext.input_key.input_keys`), and every check's
    stored outcome the outcome its value, relation and threshold give. Raises
    ``ValueError`` naming the record and what disagrees."""
    digest = record.get("digest")
    if digest is None:
        raise ValueError(
            f"{path} carries no digest: it was not written by a run; {_RERUN}"
        )
    if digest != record_digest(record):
        raise ValueError(
            f"{path} was changed after its run wrote it (its content does not match "
            f"the digest {digest[:12]}… the run wrote); {_RERUN}"
        )
    if run_id is not None and record.get("run_id") != run_id:
        raise ValueError(
            f"{path} belongs to another run ({record.get('run_id')}, this one is "
            f"{run_id}); {_RERUN}"
        )
    if inputs is not None:
        changed = what_changed(record.get("inputs"), inputs)
        if changed:
            raise ValueError(
                f"{path} was made from other inputs than the current tree ({changed}); "
                f"{_RERUN}"
            )
    for chk in record.get("checks", ()):
        try:
            holds = outcome(chk["value"], chk["relation"], chk["threshold"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"{path}: check {chk.get('name')!r} is malformed ({err})"
            ) from err
        if holds != chk.get("passed"):
            raise ValueError(
                f"{path}: check {chk['name']!r} is stored as "
                f"{'passed' if chk.get('passed') else 'failed'}, but its value "
                f"{chk['value']!r} {chk['relation']} {chk['threshold']!r} is {holds}; "
                f"{_RERUN}"
            )


def load_records(
    folder: str | os.PathLike,
    run_id: str | None = None,
    keys: dict[str, dict] | None = None,
) -> dict[str, dict]:
    """All chapter records in ``folder``, by chapter name, each verified
    (:func:`verify_record`; with ``run_id``, every record must belong to that run;
    with ``keys``, the current input keys by chapter
    (:func:`_ext.input_key.input_keys`), every record must carry its chapter's key,
    whichever run made it).

    Raises ``FileNotFoundError`` when the folder does not exist and ``ValueError`` for a
    file that is not a record, or a record its run did not write as it stands.
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
        inputs = None
        if keys is not None:
            inputs = keys.get(record.get("chapter"))
            if inputs is None:
                raise ValueError(
                    f"{path} is the record of {record.get('chapter')!r}, not a chapter "
                    f"of this book; delete it, or {_RERUN}"
                )
        verify_record(path, record, run_id, inputs)
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
