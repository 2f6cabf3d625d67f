"""What would make the claims dashboard say something the records do not: stale
headlines, checks of the book's reading that belong to no reading, a NOT REPRODUCED
without a statement of the paper behind it (:func:`dashboard_problems`)."""

from __future__ import annotations

from _ext.claim_status import OTHER_READING, is_evidence, reading_of
from _ext.dashboard import CLAIMS, HEADLINES, ClaimRow, claim_rows, row_id

__all__ = ["dashboard_problems"]


def dashboard_problems(records: dict[str, dict], *, complete: bool = True) -> list[str]:
    """What is wrong with the dashboard of ``records``, in words (empty: nothing).

    Every name of :data:`HEADLINES` and every :attr:`BookReading.headline` must be a
    recorded check of its claim (or of the claim's parent, "C6" for "C6a"), of the right
    reading (``paper`` for a claim's headline, ``book`` for a reading's) and evidence;
    every ``NOT REPRODUCED`` must trace to a failed evidence of the paper's reading
    measured without assertion; every book-reading check of a claim that declares
    readings must match one of them. ``complete=False`` (records of some chapters only)
    skips the claims that have no check in ``records``.
    """
    problems: list[str] = []
    rows = {r.claim.id: r for r in claim_rows(records)}
    for claim in CLAIMS:
        row = rows.get(claim.id) or rows.get(claim.id[:-1])
        if row is None or (not complete and not row.checks):
            continue
        named = [(HEADLINES.get(claim.id), "paper")] + [
            (r.headline, "book") for r in claim.readings
        ]
        for name, reading in named:
            if name is None:
                continue
            found = [c for c in row.checks if c["name"] == name]
            if not found:
                problems.append(f"{claim.id}: headline {name!r} is not recorded")
                continue
            chk = found[0]
            if row_id(chk.get("claim")) not in (claim.id, claim.id[:-1]):
                problems.append(f"{claim.id}: headline {name!r} is tagged otherwise")
            if reading_of(chk) != reading or not is_evidence(chk):
                problems.append(
                    f"{claim.id}: headline {name!r} is not {reading}-reading evidence"
                )
        own = ClaimRow(
            claim, [c for c in row.checks if row_id(c.get("claim")) == claim.id]
        )
        for line in own.readings if claim.readings else ():
            if line.reading is OTHER_READING:
                names = ", ".join(c["name"] for c in line.checks)
                problems.append(
                    f"{claim.id}: book-reading checks of no reading: {names}"
                )
    for row in rows.values():
        if row.status != "NOT REPRODUCED":
            continue
        missed = [
            c for c in row.evidence if not c.get("asserted", True) and not c["passed"]
        ]
        if not missed:
            problems.append(f"{row.claim.id}: NOT REPRODUCED without a paper statement")
    return problems
