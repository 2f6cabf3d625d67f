"""What a build's checks came to, in counts that add up: the claims by badge, and the
statements measured without assertion split by whose statement they test. The claims
dashboard, the verdict at the top of the landing page and the run report count with
these functions, so their numbers agree."""

from __future__ import annotations

from typing import Any

from _ext.claim_status import STATUS_CLASSES, check_counts
from _ext.dashboard import ClaimRow, claim_rows, other_checks

__all__ = ["status_tally", "measured_parts", "counts_sentence"]


def status_tally(rows: list[ClaimRow]) -> dict[str, int]:
    """How many claims have each badge, in the legend's order (best first)."""
    statuses = [r.status for r in rows]
    return {s: statuses.count(s) for s in STATUS_CLASSES if s in statuses}


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def measured_parts(records: dict[str, dict]) -> dict[str, Any]:
    """The statements measured without assertion, split so that the parts add up:
    how many there are and held, and those that did not hold by whose statement they
    test (the paper's, by claim; the book's own readings, by claim; checks tied to no
    claim)."""
    rows = claim_rows(records)
    measured = [
        {**c, "row": r.claim.id}
        for r in rows
        for c in r.checks
        if not c.get("asserted", True)
    ]
    measured += [
        {**c, "row": None}
        for checks in other_checks(records).values()
        for c in checks
        if not c.get("asserted", True)
    ]
    missed = [c for c in measured if not c["passed"]]
    paper: dict[str, int] = {}
    book: dict[str, int] = {}
    for chk in missed:
        if chk["row"] is None:
            continue
        side = book if chk.get("reading", "paper") == "book" else paper
        side[chk["row"]] = side.get(chk["row"], 0) + 1
    return {
        "measured": len(measured),
        "held": len(measured) - len(missed),
        "missed": len(missed),
        "paper": paper,
        "book": book,
        "untied": sum(c["row"] is None for c in missed),
    }


def counts_sentence(records: dict[str, dict]) -> str:
    """What the checks of a build came to, in words whose counts add up: asserted
    checks by role, and statements measured without assertion that held and did not,
    each part named (the paper's statements by claim, the book's own readings)."""
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    text = (
        f"{counts['passed']} of {counts['asserted']} asserted checks in "
        f"{len(records)} chapters passed ({counts['evidence']} evidence, "
        f"{counts['identity']} identities, {counts['control']} controls)."
    )
    parts = measured_parts(records)
    if not parts["measured"]:
        return text
    text += (
        f" {_plural(parts['measured'], 'statement')} measured without assertion: "
        f"{parts['held']} held"
    )
    if not parts["missed"]:
        return text + "."
    named = []
    if parts["paper"]:
        named.append(
            _plural(sum(parts["paper"].values()), "statement")
            + " of the paper ("
            + ", ".join(f"{n} under {cid}" for cid, n in parts["paper"].items())
            + "; these make a claim NOT REPRODUCED)"
        )
    if parts["book"]:
        named.append(
            f"{sum(parts['book'].values())} of the book's own readings ("
            + ", ".join(f"{n} under {cid}" for cid, n in parts["book"].items())
            + "; these never decide a claim's badge)"
        )
    if parts["untied"]:
        named.append(f"{parts['untied']} tied to no claim")
    return text + f", {parts['missed']} did not: " + " and ".join(named) + "."
