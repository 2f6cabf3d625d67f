"""Records that cannot lie (_ext.record_files.verify_record): a record changed
after its run wrote it, or one of another run, is refused with its name and what
disagrees; outcomes are decided from value, relation and threshold, never taken from
the stored flag."""

from __future__ import annotations

import json

import pytest

from _ext.dashboard import claim_rows
from _ext.record_files import load_records
from attnbook.book import checks
from attnbook.book import records as report
from attnbook.book.record_paths import (
    INPUT_KEYS_ENV,
    RECORD_DIR_ENV,
    RUN_ID_ENV,
    record_digest,
)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A chapter of run "run-1" that checks value 0.5 >= 0.25 for C1, as recorded."""
    monkeypatch.setenv(RECORD_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    report.start_record("ch")
    checks.check("stat", 0.5, 0.25, claim="C1")
    checks.check("gap", 0.1, 0.2, "<=", claim="C1", role="control")
    path = tmp_path / "ch.json"
    assert load_records(tmp_path, "run-1")["ch"]["checks"][0]["passed"] is True
    return path


def _edit(path, change, *, redigest=False):
    record = json.loads(path.read_text())
    change(record)
    if redigest:  # an edit that also recomputes the digest: caught by the outcome
        record["digest"] = record_digest(record)
    path.write_text(json.dumps(record))


def _first(record):
    return record["checks"][0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: _first(r).update(value=0.1), "changed after its run"),
        (lambda r: _first(r).update(threshold=0.9), "changed after its run"),
        (lambda r: _first(r).update(relation="<="), "changed after its run"),
        (lambda r: r["checks"].pop(0), "changed after its run"),
        (lambda r: r["glued"].update(stat=0.1), "changed after its run"),
        (lambda r: r.pop("digest"), "carries no digest"),
    ],
    ids=["value", "threshold", "relation", "check-removed", "glued", "no-digest"],
)
def test_an_edited_record_is_refused(run, change, message):
    _edit(run, change)
    with pytest.raises(ValueError, match=message) as err:
        load_records(run.parent)
    assert str(run) in str(err.value) and "rerun the chapters" in str(err.value)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: _first(r).update(value=0.1),  # fails now, stored as passed
        lambda r: _first(r).update(relation="<="),
        lambda r: r["checks"][1].update(passed=False),  # holds, stored as failed
    ],
    ids=["value", "relation", "flag"],
)
def test_outcomes_come_from_the_numbers_not_the_stored_flag(run, change):
    _edit(run, change, redigest=True)
    with pytest.raises(ValueError, match=r"check '(stat|gap)' is stored as"):
        load_records(run.parent)


def test_a_record_of_another_run_is_refused(run):
    with pytest.raises(ValueError, match="belongs to another run"):
        load_records(run.parent, "run-2")
    assert set(load_records(run.parent)) == {"ch"}  # without a run to match: read


def test_the_dashboard_shows_the_outcome_the_numbers_give(run):
    rows = {r.claim.id: r for r in claim_rows(load_records(run.parent, "run-1"))}
    assert rows["C1"].status == "PASS"
    assert [c["value"] for c in rows["C1"].checks] == [0.5, 0.1]


def test_records_are_accepted_by_their_input_keys_not_their_run(tmp_path, monkeypatch):
    """With the current input keys, records of several runs are accepted when each
    carries its chapter's key, and a record made from other inputs is refused, naming
    what changed."""
    keys = {
        "a": {"key": "k-a", "parts": {"code": "1", "lock": "L"}},
        "b": {"key": "k-b", "parts": {"code": "2", "lock": "L"}},
    }
    monkeypatch.setenv(RECORD_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(INPUT_KEYS_ENV, json.dumps(keys))
    for chapter, run_id in (("a", "run-1"), ("b", "run-2")):
        monkeypatch.setenv(RUN_ID_ENV, run_id)
        report.start_record(chapter)
        checks.check("stat", 0.5, 0.25, claim="C1")
    assert set(load_records(tmp_path, keys=keys)) == {"a", "b"}
    assert json.loads((tmp_path / "a.json").read_text())["inputs"] == keys["a"]
    newer = {**keys, "b": {"key": "k-b2", "parts": {"code": "2", "lock": "M"}}}
    with pytest.raises(ValueError, match="made from other inputs") as err:
        load_records(tmp_path, keys=newer)
    assert "b.json" in str(err.value) and "the lock (requirements.txt)" in str(
        err.value
    )
    with pytest.raises(ValueError, match="not a chapter of this book"):
        load_records(tmp_path, keys={"a": keys["a"]})
    monkeypatch.delenv(INPUT_KEYS_ENV)
    report.start_record("a")  # outside the build: no key, refused by the build
    with pytest.raises(ValueError, match="carries no input key"):
        load_records(tmp_path, keys=keys)
