"""The status rule of the claims dashboard: only the paper's reading decides a badge.

The rows are built from synthetic records here; ``test_book_dashboard_is_sound`` (marked
``two_runs``, run by ``scripts/test.sh`` with ``ATTNBOOK_COMPARE_RECORDS``) checks the
same on the records of the book's own execution: every headline is a recorded check of
its claim and reading, every NOT REPRODUCED traces to a statement of the paper.
"""

from __future__ import annotations

import itertools
import os
import re

import pytest
from docutils import nodes

from _ext.counts import counts_sentence, measured_parts
from _ext.dashboard import (
    CLAIMS,
    HEADLINES,
    OTHER_READING,
    STATUSES,
    BookReading,
    Claim,
    ClaimRow,
    claim_rows,
    status_of,
)
from _ext.dashboard_audit import dashboard_problems
from _ext.pages import claims_dashboard, comparison
from _ext.record_files import load_records
from _ext.verdict import claims_verdict

from conftest import check_record

_IDS = {c.id for c in CLAIMS}


def _chk(
    name, *, claim="C5", passed=True, asserted=True, role="evidence", reading=None
):
    chk = check_record(
        name,
        value=1.0 if passed else 0.0,
        passed=passed,
        asserted=asserted,
        role=role,
        claim=claim,
        what=f"statistic {name}",
    )
    if reading is not None:  # records made before readings existed have none
        chk["reading"] = reading
    return chk


def _records(*checks):
    return {"04_real_data": {"checks": list(checks)}}


def _row(claim_id, records):
    return {r.claim.id: r for r in claim_rows(records)}[claim_id]


# ------------------------------------------------------------------ the rule itself
def test_not_reproduced_traces_to_a_paper_statement():
    rec = _records(
        _chk("imdb_cls_min_seed"),
        _chk("paper_numbers", passed=False, asserted=False),
        _chk("book_ratio", passed=False, asserted=False, reading="book"),
    )
    row = _row("C5", rec)
    assert row.status == "NOT REPRODUCED"
    assert row.headline["name"] == "paper_numbers"  # the statement that did not hold
    assert not [
        p for p in dashboard_problems(rec, complete=False) if "NOT REPRODUCED" in p
    ]


def test_a_failing_book_reading_never_changes_the_badge():
    paper = [_chk("imdb_cls_min_seed", reading="paper")]
    for book in (
        _chk(
            "synthetic_value_spread_ratio", passed=False, asserted=False, reading="book"
        ),
        _chk("synthetic_rho_value", passed=False, reading="book"),  # asserted: FAIL
        _chk("synthetic_ctl", passed=False, role="control", reading="book"),
    ):
        row = _row("C5", _records(*paper, book))
        assert row.status == "PASS", book
        (line,) = row.readings
        assert line.status in ("NOT REPRODUCED", "FAIL")
        assert [c["name"] for c in line.checks] == [book["name"]]
    # the book's reading alone checks nothing of the paper's statement
    row = _row("C5", _records(_chk("synthetic_rho_value", reading="book")))
    assert row.status == "NOT CHECKED" and row.headline is None
    assert [line.status for line in row.readings] == ["PASS"]


def test_every_combination_follows_the_rule():
    """Over every combination of up to three checks (reading, role, asserted, outcome):
    removing the book's checks never changes the badge, and a NOT REPRODUCED always has
    a failed paper-reading evidence measured without assertion."""
    kinds = [
        dict(reading=reading, role=role, asserted=asserted, passed=passed)
        for reading, role, asserted, passed in itertools.product(
            ("paper", "book"),
            ("evidence", "control"),
            (True, False),
            (True, False),
        )
        if asserted or role == "evidence"  # compare_with_paper records evidence
    ]
    claim = next(c for c in CLAIMS if c.id == "C5")
    for n in range(4):
        for combo in itertools.product(kinds, repeat=n):
            checks = [_chk(f"c{i}", **k) for i, k in enumerate(combo)]
            row = ClaimRow(claim, checks)
            paper_only = ClaimRow(
                claim, [c for c in checks if c.get("reading") != "book"]
            )
            assert row.status == paper_only.status in STATUSES
            if row.status == "NOT REPRODUCED":
                assert any(
                    c["reading"] == "paper"
                    and c["role"] == "evidence"
                    and not c["asserted"]
                    and not c["passed"]
                    for c in checks
                )
            if row.status == "FAIL":
                assert any(
                    c["reading"] == "paper" and c["asserted"] and not c["passed"]
                    for c in checks
                )
            assert sum(len(line.checks) for line in row.readings) == sum(
                c["reading"] == "book" for c in checks
            )


def test_status_of_order():
    ok, bad = _chk("a"), _chk("b", passed=False)
    measured_bad = _chk("m", passed=False, asserted=False)
    assert status_of([]) == "NOT CHECKED"
    assert status_of([ok]) == "PASS"
    assert status_of([ok], partial=True) == "PASS (part)"
    assert status_of([ok], verifiable=False) == "MEASURED"
    assert status_of([ok, measured_bad]) == "NOT REPRODUCED"
    assert status_of([bad, measured_bad]) == "FAIL"
    assert status_of([_chk("c", role="control")]) == "NOT CHECKED"


# ------------------------------------------------------------------ the book's readings
def test_book_checks_go_to_the_reading_they_match():
    claim = Claim(
        "C5",
        "statement",
        "source",
        readings=(
            BookReading("synthetic", r"synthetic_.*", headline="synthetic_b"),
            BookReading("budgets", r".*_budget"),
        ),
    )
    checks = [
        _chk("synthetic_a", reading="book"),
        _chk("synthetic_b", reading="book", passed=False, asserted=False),
        _chk("imdb_budget", reading="book"),
        _chk("stray", reading="book"),
        _chk("paper"),
    ]
    lines = ClaimRow(claim, checks).readings
    assert [line.reading.statement for line in lines] == [
        "synthetic",
        "budgets",
        OTHER_READING.statement,
    ]
    assert [len(line.checks) for line in lines] == [2, 1, 1]
    assert lines[0].headline["name"] == "synthetic_b"
    assert [line.status for line in lines] == ["NOT REPRODUCED", "PASS", "PASS"]
    assert list(ClaimRow(claim, checks).groups()) == ["evidence", "book"]


def test_the_dashboard_renders_the_book_reading_apart():
    rec = _records(
        _chk("imdb_cls_min_seed"),
        _chk(
            "synthetic_value_spread_ratio", passed=False, asserted=False, reading="book"
        ),
    )

    def link(chapter, anchor, text):
        return nodes.Text(f"[{chapter}#{anchor}]")

    out, log = claims_dashboard(rec, link, lambda label: None, "now")
    text = "".join(n.astext() for n in out)
    block = text[text.index("C5 ") :]
    block = block[: block.index("C6a")]
    assert block.startswith("C5 ") and "The book's reading: NOT REPRODUCED" in block
    c5 = [n for n in out[1].children if "C5 " in n.astext()][0]
    classes = c5["classes"]
    assert "attnbook-claim-pass" in classes  # the claim's own badge is PASS


# ------------------------------------------------------------------ the verdict
def _text(found) -> str:
    return " ".join(n.astext() for n in found)


def test_a_measured_statement_reads_as_what_it_is():
    """A statement measured without assertion is its value and where it falls against
    the paper's threshold, never an inequality that may be false; an asserted check
    is the inequality it verified."""
    missed = check_record(
        "acc", value=0.8805, threshold=0.945, passed=False, asserted=False
    )
    assert _text(comparison(missed)) == "0.8805 , below the threshold  \\geq 0.945"
    above = {**missed, "relation": "<=", "value": 0.7487, "threshold": 0.5}
    assert "0.7487 , above the threshold" in _text(comparison(above))
    held = {**missed, "value": 0.95, "passed": True, "reading": "book"}
    assert ", at or above the book's" in _text(comparison(held))
    asserted = check_record("gap", value=0.15, threshold=0.05)
    assert _text(comparison(asserted)) == "0.15 \\geq 0.05"


def test_the_counts_add_up_and_name_their_parts():
    rec = _records(
        _chk("imdb_cls_min_seed"),
        _chk("c6a_acc", claim="C6a", passed=False, asserted=False),
        _chk("c6a_loss", claim="C6a", passed=False, asserted=False),
        _chk("c6b_units", claim="C6b", asserted=False),
        _chk("synthetic_x", passed=False, asserted=False, reading="book"),
        _chk("limit", claim="limits", passed=False, asserted=False),
    )
    parts = measured_parts(rec)
    assert (parts["measured"], parts["held"], parts["missed"]) == (5, 1, 4)
    assert parts["paper"] == {"C6a": 2} and parts["book"] == {"C5": 1}
    missed = sum(parts["paper"].values()) + sum(parts["book"].values())
    assert missed + parts["untied"] == parts["missed"]
    text = counts_sentence(rec)
    assert "5 statements measured without assertion: 1 held, 4 did not" in text
    assert "2 statements of the paper (2 under C6a" in text
    assert "1 of the book's own readings (1 under C5" in text
    assert "1 tied to no claim" in text


def test_the_verdict_names_every_claim_that_is_not_pass():
    rec = _records(
        _chk("imdb_cls_min_seed"),
        _chk("c6a_gap", claim="C6a"),
        check_record(
            "c6a_acc",
            claim="C6a",
            value=0.88,
            threshold=0.945,
            passed=False,
            asserted=False,
            what="best test accuracy",
        ),
        _chk("c6b_units", claim="C6b", asserted=False),
    )
    (box,) = claims_verdict(rec)
    text = box.astext()
    rows = claim_rows(rec)
    tally = {s: sum(r.status == s for r in rows) for s in {r.status for r in rows}}
    assert f"Of the paper's {len(rows)} claims" in text
    assert f"NOT REPRODUCED {tally['NOT REPRODUCED']}" in text
    items = list(box.findall(nodes.list_item))
    assert len(items) == sum(r.status != "PASS" for r in rows)
    c6a = [i.astext() for i in items if i.astext().startswith("NOT REPRODUCED C6a")]
    assert c6a and "best test accuracy: 0.88, below the threshold" in c6a[0]
    refs = [r["refuri"] for r in box.findall(nodes.reference)]
    assert "#claim-c6a" in refs
    # every claim with a verdict of its own shows it; the rest say what the rule says
    for claim in CLAIMS:
        if claim.verdict:
            assert claim.verdict.split("$")[0].strip()[:30] in text, claim.id
    assert "The PASS of C6b rests on these alone" in text
    assert "fails: all 2 passed" in text


# ------------------------------------------------------------------ the tables
def test_headlines_and_readings_name_claims_of_the_book():
    assert set(HEADLINES) <= _IDS
    for claim in CLAIMS:
        for reading in claim.readings:
            assert reading.statement
            if reading.headline is not None:
                assert re.fullmatch(reading.checks, reading.headline), reading
    # every claim the book can verify has a headline of its own
    assert {c.id for c in CLAIMS if c.verifiable} <= set(HEADLINES)


def test_problems_of_a_stale_headline_are_reported():
    rec = _records(_chk("not_the_headline"))
    problems = dashboard_problems(rec, complete=False)
    assert any(f"{HEADLINES['C5']!r} is not recorded" in p for p in problems)
    rec = _records(
        _chk(HEADLINES["C5"], reading="book"),
        _chk("synthetic_value_spread_ratio", claim="C1", reading="book"),
    )
    problems = dashboard_problems(rec, complete=False)
    assert any("is not paper-reading evidence" in p for p in problems)


# ------------------------------------------------------------------ the book's records
@pytest.mark.two_runs
def test_book_dashboard_is_sound():
    """On the records of the book's execution: every headline exists, belongs to its
    claim and reading, every NOT REPRODUCED traces to a statement of the paper."""
    spec = os.environ.get("ATTNBOOK_COMPARE_RECORDS")
    assert spec, "set ATTNBOOK_COMPARE_RECORDS=<book records>:<second records>"
    records = load_records(spec.split(":")[0])
    problems = dashboard_problems(records)
    assert not problems, "\n".join(problems)
