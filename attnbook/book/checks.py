"""The book's checks: a measured statistic against the threshold the text justifies.

:func:`check` asserts ``value <relation> threshold``, glues the value into the prose and
records the outcome in the chapter's record (:mod:`attnbook.book.records`);
:func:`checks` sets the claim, role, result and reading once for a block of one-line
checks; :func:`compare_with_paper` records a statement of the paper measured without
assertion. :func:`outcome` is the one rule that decides a check, when it runs and
whenever its record is read back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnbook.book.records import CHECKS, current_cell, current_chapter, glue

__all__ = [
    "Check",
    "ROLES",
    "READINGS",
    "outcome",
    "check",
    "checks",
    "compare_with_paper",
]


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
    # how far the statistic moves between repeated runs (seeds, roundings, devices)
    spread: float | None = None


_RELATIONS = {">=": lambda x, t: x >= t, "<=": lambda x, t: x <= t}


def outcome(value: float, relation: str, threshold: float) -> bool:
    """Whether ``value <relation> threshold`` holds: the one rule that decides a
    check, when it runs and whenever its record is read back."""
    if relation not in _RELATIONS:
        raise ValueError(
            f"relation must be one of {sorted(_RELATIONS)}, got {relation!r}"
        )
    return bool(_RELATIONS[relation](float(value), float(threshold)))


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
    spread: float | None = None,
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
    if spread is not None:
        spread = float(spread)
        if not (math.isfinite(spread) and spread >= 0):
            raise ValueError(
                f"check {name!r}: spread must be finite and non-negative ({spread})"
            )
    passed = outcome(value, relation, threshold)
    cell = current_cell()
    CHECKS.append(
        Check(
            current_chapter(),
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
            spread,
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
    spread: float | None = None,
) -> float:
    """Assert ``value <relation> threshold``, glue ``value`` as ``name`` and record the
    check (``asserted=False``: record only; evidence alone may be unasserted).

    ``claim`` (``"C1"`` ... ``"C7d"``, ``"setup"``, ``"limits"``) and ``result`` (a
    result's label) place it on the dashboard; ``role`` is ``"evidence"``,
    ``"identity"`` or ``"control"`` (:data:`ROLES`); ``reading`` ``"paper"`` or
    ``"book"`` (:data:`READINGS`); ``volatile`` marks a timing; ``spread`` is the
    statistic's spread over its runs. Raises ``AssertionError`` when it fails.
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
        spread,
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
    spread: float | None = None,
) -> bool:
    """Set a measured statistic against the threshold a statement of the paper implies,
    without asserting it; glue ``value`` as ``name``, record the outcome and return it.

    For the statements the book measures and finds not to hold in its runs: the chapter
    says so in its text, and the claims dashboard shows the claim as NOT REPRODUCED,
    computed from the recorded outcome, instead of the build failing. Everything the
    book itself states is asserted with :func:`check` (``spread`` as there). Raises
    ``ValueError`` like :func:`check`.
    """
    if not claim:
        raise ValueError("compare_with_paper needs the claim of the paper it measures")
    recorded = (claim, result, False, False, "evidence", what, reading, spread)
    return _record_check(name, value, threshold, relation, *recorded)
