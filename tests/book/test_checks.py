"""One-line checks: :func:`attnbook.book.checks.checks` sets the claim, role, result
and reading once for a block of checks."""

from __future__ import annotations

import pytest

from attnbook.book import checks, records
from attnbook.book.record_paths import RECORD_DIR_ENV


@pytest.fixture
def block(tmp_path, monkeypatch):
    monkeypatch.setenv(RECORD_DIR_ENV, str(tmp_path))
    records.start_record("ch")
    yield records.CHECKS


@pytest.mark.parametrize(
    "keywords, message",
    [({"role": "proof"}, "role must be one of"), ({"reading": "x"}, "reading must")],
)
def test_an_unknown_role_or_reading_is_rejected_at_once(block, keywords, message):
    with pytest.raises(ValueError, match=message):
        checks.checks(claim="C1", **keywords)
    assert block == []  # rejected before any check runs


def test_every_check_of_a_block_shares_its_keywords(block):
    c3 = checks.checks(claim="C3", role="control", result="thm-x", reading="book")
    assert c3("a", 0.5, 0.1) == 0.5
    c3("b", 1.0, 2.0, "<=")
    assert [c.name for c in block] == ["a", "b"]
    for c in block:
        assert (c.claim, c.role, c.result, c.reading) == (
            "C3",
            "control",
            "thm-x",
            "book",
        )
    assert [c.relation for c in block] == [">=", "<="]
    assert records.GLUED == {"a": 0.5, "b": 1.0}


def test_defaults_are_paper_evidence_without_result(block):
    checks.checks(claim="C1")("a", 1.0, 0.0)
    (c,) = block
    assert (c.role, c.reading, c.result, c.what) == ("evidence", "paper", None, None)


def test_a_call_overrides_a_shared_keyword(block):
    c1 = checks.checks(claim="C1", result="lemma-a")
    c1("a", 1.0, 0.0, role="identity", result="lemma-b", reading="book")
    c1("b", 1.0, 0.0)
    first, second = block
    assert (first.role, first.result, first.reading) == ("identity", "lemma-b", "book")
    assert (second.role, second.result, second.reading) == (
        "evidence",
        "lemma-a",
        "paper",
    )


def test_what_comes_from_the_mapping_unless_the_call_gives_it(block):
    c2 = checks.checks(claim="C2", what={"a": "the a statistic", "b": "unused"})
    c2("a", 1.0, 0.0)
    c2("b", 1.0, 0.0, what="given here")
    c2("c", 1.0, 0.0)
    assert [c.what for c in block] == ["the a statistic", "given here", None]


def test_a_failing_check_of_a_block_still_fails(block):
    c1 = checks.checks(claim="C1")
    with pytest.raises(AssertionError, match="check 'a' failed"):
        c1("a", 0.1, 0.5)
    with pytest.raises(ValueError, match="relation must be one of"):
        c1("b", 0.1, 0.5, "==")
    assert [c.passed for c in block] == [False]


def test_an_unasserted_block_records_without_failing(block):
    paper = checks.checks(claim="C6b", result="conj-x", asserted=False)
    assert paper("a", 0.9, 0.5, "<=") == 0.9
    paper("b", 0.1, 0.5, "<=")
    with pytest.raises(AssertionError, match="check 'c' failed"):
        paper("c", 0.9, 0.5, "<=", asserted=True)
    assert [(c.name, c.passed, c.asserted) for c in block] == [
        ("a", False, False),
        ("b", True, False),
        ("c", False, True),
    ]
    assert {c.result for c in block} == {"conj-x"}
    assert records.GLUED["a"] == 0.9


def test_only_evidence_is_recorded_unasserted(block):
    control = checks.checks(claim="C1", role="control", asserted=False)
    with pytest.raises(ValueError, match="only evidence"):
        control("a", 1.0, 0.0)
    assert block == []


def test_a_spread_is_recorded_with_its_check(block):
    c5 = checks.checks(claim="C5")
    c5("a", 0.5, 0.3, spread=0.04)
    c5("b", 0.5, 0.3)
    assert [c.spread for c in block] == [0.04, None]
    assert checks.compare_with_paper("c", 0.1, 0.3, claim="C5", spread=0.2) is False
    assert block[-1].spread == 0.2


@pytest.mark.parametrize("spread", [-0.1, float("nan"), float("inf")])
def test_a_negative_or_non_finite_spread_is_rejected(block, spread):
    with pytest.raises(ValueError, match="spread must be finite and non-negative"):
        checks.check("a", 0.5, 0.3, claim="C5", spread=spread)
    assert block == []
