"""The status rule of the claims dashboard, on recorded checks alone.

:func:`status_of` turns the checks of one reading into a badge; a claim's badge is
:func:`status_of` over the checks of the paper's reading (``reading="paper"``, the
default of :func:`~attnbook.book.checks.check`). The checks of the book's own
reading (``reading="book"``) never decide it: they are grouped by the
:class:`BookReading` of the claim whose pattern their name matches into
:class:`ReadingLine` objects, each with a badge of its own by the same rule.
:func:`check_group` and :func:`check_counts` sort and count checks for the dashboard and
the page *Reproducing this book*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BookReading",
    "STATUSES",
    "STATUS_CLASSES",
    "reading_of",
    "is_evidence",
    "status_of",
    "headline_of",
    "ReadingLine",
    "OTHER_READING",
    "GROUPS",
    "check_group",
    "check_counts",
]


@dataclass(frozen=True)
class BookReading:
    """One reading of a claim that is the book's, not the paper's: ``statement`` says
    what the book reads into the claim or sets beside it (``$...$`` is math);
    ``checks`` is a regular expression that the names of its checks (recorded with
    ``reading="book"``) match in full; ``headline`` names the check its line shows."""

    statement: str
    checks: str
    headline: str | None = None


#: The badges, from the worst outcome to the best (the legend of the landing page).
STATUSES = (
    "FAIL",
    "NOT REPRODUCED",
    "NOT CHECKED",
    "MEASURED",
    "PASS (part)",
    "PASS",
)

#: CSS class of the badge of each status (colours in ``static/attnbook.css``).
STATUS_CLASSES = {
    "PASS": "pass",
    "PASS (part)": "part",
    "MEASURED": "measured",
    "NOT REPRODUCED": "not-reproduced",
    "FAIL": "fail",
    "NOT CHECKED": "unchecked",
}


def reading_of(chk: dict[str, Any]) -> str:
    """Whose statement a recorded check tests: ``paper`` (also for records made
    before checks said so) or ``book``."""
    return chk.get("reading", "paper")


def is_evidence(chk: dict[str, Any]) -> bool:
    """Whether a recorded check is evidence (not an identity or a control)."""
    return chk.get("role", "evidence") == "evidence"


def status_of(
    checks: list[dict[str, Any]], *, verifiable: bool = True, partial: bool = False
) -> str:
    """The badge that ``checks`` (all of one reading) earn.

    ``FAIL``: an asserted check failed, whatever its role; ``NOT CHECKED``: no
    evidence; ``NOT REPRODUCED``: every asserted check passed, but a statement measured
    without assertion (:func:`~attnbook.book.checks.compare_with_paper`) did not hold;
    ``MEASURED``: everything held, but there is no statement to verify
    (``verifiable=False``: the checks are the book's own measurements); ``PASS
    (part)``: everything held, but the checks cover only part of the claim
    (``partial``); ``PASS``.
    """
    if not all(c["passed"] for c in checks if c.get("asserted", True)):
        return "FAIL"
    evidence = [c for c in checks if is_evidence(c)]
    if not evidence:
        return "NOT CHECKED"
    if not all(c["passed"] for c in evidence):
        return "NOT REPRODUCED"
    if not verifiable:
        return "MEASURED"
    return "PASS (part)" if partial else "PASS"


def headline_of(
    checks: list[dict[str, Any]], named: str | None
) -> dict[str, Any] | None:
    """The check a line shows: when a statement measured without assertion failed
    (what makes a NOT REPRODUCED), the one called ``named`` among those, else the
    first of them; otherwise the evidence called ``named``, else the first asserted
    evidence, else the first evidence (None without evidence)."""
    evidence = [c for c in checks if is_evidence(c)]
    missed = [c for c in evidence if not c.get("asserted", True) and not c["passed"]]
    for chk in missed or evidence:
        if chk["name"] == named:
            return chk
    asserted = [c for c in evidence if c.get("asserted", True)]
    return (missed or asserted or evidence or [None])[0]


@dataclass
class ReadingLine:
    """The checks of one :class:`BookReading` of a claim, with their own badge."""

    reading: BookReading
    checks: list[dict[str, Any]]

    @property
    def status(self) -> str:
        """The badge of the book's reading (:func:`status_of` over its checks)."""
        return status_of(self.checks)

    @property
    def headline(self) -> dict[str, Any] | None:
        """The check the line shows (:attr:`BookReading.headline`, else as for a
        claim)."""
        return headline_of(self.checks, self.reading.headline)


#: The line of a claim's book-reading checks that match none of its readings.
OTHER_READING = BookReading(
    "further checks of the book's own reading, beside the paper's statement", r".*"
)


#: The groups of a claim's checks, in the order the dashboard lists them.
GROUPS: dict[str, str] = {
    "evidence": "Evidence (decides the status)",
    "measured": "Statements of the paper, measured without assertion",
    "identity": "Identities (two computations of one quantity agree)",
    "control": "Negative controls and sanity checks",
    "book": "The book's own readings (shown apart; they never decide the status)",
}


def check_group(chk: dict[str, Any]) -> str:
    """The group of :data:`GROUPS` a recorded check belongs to by its role and whether
    it was asserted (a claim's row puts the book's readings apart:
    :meth:`ClaimRow.groups`)."""
    if not chk.get("asserted", True):
        return "measured"
    role = chk.get("role", "evidence")
    return role if role in GROUPS else "evidence"


def check_counts(checks: list[dict[str, Any]]) -> dict[str, int]:
    """How many of ``checks`` were asserted and passed, and how many statements of the
    paper were measured without assertion and held; the dashboard and the page
    *Reproducing this book* both count with this function, so they agree."""
    asserted = [c for c in checks if c.get("asserted", True)]
    measured = [c for c in checks if not c.get("asserted", True)]
    counts = {
        "asserted": len(asserted),
        "passed": sum(bool(c["passed"]) for c in asserted),
        "measured": len(measured),
        "held": sum(bool(c["passed"]) for c in measured),
    }
    for role in ("evidence", "identity", "control"):
        counts[role] = sum(check_group(c) == role for c in asserted)
    return counts
