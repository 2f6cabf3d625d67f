"""The book's checks: a measured statistic against the threshold the text justifies,
asserted or recorded only, glued into the prose and kept in the chapter's record."""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnbook.book.records import CHECKS, current_cell, current_chapter, glue


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
    cell: int | None = None  # code cells completed since the chapter's start
    asserted: bool = True  # False: a statement of the paper measured, not asserted
    role: str = "evidence"  # evidence for a claim, an identity, or a control
    what: str | None = None  # the check in words, for the dashboard
    # "paper": the paper's statement (decides the claim's badge); "book": the book's
    reading: str = "paper"
    spread: float | None = None  # how far the statistic moves between repeated runs


_RELATIONS = {">=": lambda x, t: x >= t, "<=": lambda x, t: x <= t}


def outcome(value: float, relation: str, threshold: float) -> bool:
    """Whether ``value <relation> threshold`` holds: the rule of every check, run or
    read back."""
    if relation not in _RELATIONS:
        raise ValueError(
            f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}"
        )
    return bool(_RELATIONS[relation](float(value), float(threshold)))


def _check_keywords(role: str, reading: str) -> None:
    roles = ("control", "evidence", "identity")
    if role not in roles:
        raise ValueError(f"role must be one of {list(roles)}, got {role!r}")
    if reading not in ("book", "paper"):
        raise ValueError(f"reading must be 'book' or 'paper', got {reading!r}")


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
    spread: float | None = None,
) -> float:
    """Assert ``value <relation> threshold`` (``asserted=False``: record only, evidence
    of a claim alone), glue ``value`` as ``name`` and record the check; ``volatile``
    marks a timing, ``spread`` the statistic's spread over its runs."""
    _check_keywords(role, reading)
    if not asserted and (role != "evidence" or not claim):
        raise ValueError(f"check {name!r}: only evidence of a claim is unasserted")
    number, bound = float(value), float(threshold)
    for x, words in ((number, "measured value"), (bound, "threshold")):
        if not math.isfinite(x):
            raise ValueError(f"check {name!r}: {words} is not finite ({x})")
    if spread is not None:
        spread = float(spread)
        if not (math.isfinite(spread) and spread >= 0):
            raise ValueError(
                f"check {name!r}: spread must be finite and non-negative ({spread})"
            )
    passed = outcome(number, relation, bound)
    fields = dict(claim=claim, result=result, cell=current_cell(), asserted=asserted)
    fields.update(role=role, what=what, reading=reading, spread=spread)
    CHECKS.append(
        Check(current_chapter(), name, number, bound, relation, passed, **fields)
    )
    glue(name, number, volatile=volatile)
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
    """:func:`check` with these keywords set once for a block, so that each check is
    one line (``c3("kkt_gap", gap, 1e-6, "<=")``); ``what`` maps names to words."""
    _check_keywords(role, reading)
    shared = dict(claim=claim, role=role, result=result, reading=reading)
    shared["asserted"] = asserted
    described = dict(what or {})

    def block_check(
        name: str, value: float, threshold: float, relation: str = ">=", **keywords
    ) -> float:
        keywords.setdefault("what", described.get(name))
        return check(name, value, threshold, relation, **{**shared, **keywords})

    return block_check


def compare_with_paper(name: str, value, threshold, relation=">=", **keywords) -> bool:
    """Record, unasserted, a statement of the paper that the book measures (NOT
    REPRODUCED when it fails); returns its outcome."""
    check(name, value, threshold, relation, asserted=False, **keywords)
    return CHECKS[-1].passed
