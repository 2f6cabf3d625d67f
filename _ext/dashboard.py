"""The claims of the paper and how the book's recorded checks verify them.

:data:`CLAIMS` lists the claims C1-C7 of the paper (C6 and C7 split into their parts) in
the book's words, with where each comes from and, where the book cannot verify a claim
as the paper states it, why. :func:`claim_rows` joins them with the checks recorded by a
run of the chapters (:mod:`attnbook.book.records`) into the rows of the claims dashboard
on the landing page; PASS and FAIL are computed from the records, never typed.

The status rule (:func:`status_of`): a claim's badge is decided by the checks that test
the paper's statement as the dashboard quotes it (``reading="paper"``, the default of
:func:`~attnbook.book.checks.check`). A check of the book's own reading
(``reading="book"``: a stricter reading, a stand-in for something the paper does not
give, a remark beside the claim) never decides it: such checks form the lines
"The book's reading" under the claim (:class:`BookReading`, :attr:`ClaimRow.readings`),
each with a badge of its own computed by the same rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from _ext.claim_status import (
    GROUPS,
    OTHER_READING,
    STATUSES,
    BookReading,
    ReadingLine,
    check_counts,
    check_group,
    headline_of,
    is_evidence,
    reading_of,
    status_of,
)
from _ext.claims import CLAIMS, HEADLINES, Claim
from _ext.fragility import fragile_note
from _ext.notebooks import (
    attach_results,
    chapter_name_in_notebook,
    required_chapters,
    result_labels,
)

__all__ = [
    "Claim",
    "BookReading",
    "CLAIMS",
    "STATUSES",
    "status_of",
    "ReadingLine",
    "ClaimRow",
    "claim_rows",
    "other_checks",
    "required_chapters",
    "chapter_name_in_notebook",
    "result_labels",
    "attach_results",
    "HEADLINES",
    "row_id",
    "OTHER_READING",
    "GROUPS",
    "check_group",
    "check_counts",
]


_IDS = {c.id.lower(): c for c in CLAIMS}


@dataclass
class ClaimRow:
    """A claim with the recorded checks that verify it."""

    claim: Claim
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def paper_checks(self) -> list[dict[str, Any]]:
        """The checks of the paper's statement as the dashboard quotes it (every role):
        they alone decide the status."""
        return [c for c in self.checks if reading_of(c) != "book"]

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """The evidence for the paper's statement (identities, controls and the book's
        readings are shown, but do not count toward the status)."""
        return [c for c in self.paper_checks if is_evidence(c)]

    @property
    def status(self) -> str:
        """The claim's badge: :func:`status_of` over :attr:`paper_checks` (checks of
        the book's own reading never change it), or ``NOT CHECKED`` without checks."""
        return status_of(
            self.paper_checks,
            verifiable=self.claim.verifiable,
            partial=self.claim.partial,
        )

    @property
    def headline(self) -> dict[str, Any] | None:
        """The paper-reading evidence that sums the claim up in one number (see
        :func:`_headline`): under a NOT REPRODUCED a statement that did not hold,
        otherwise the one :data:`HEADLINES` names for the claim."""
        return headline_of(self.paper_checks, HEADLINES.get(self.claim.id))

    @property
    def readings(self) -> list[ReadingLine]:
        """The lines of the book's own readings: the checks recorded with
        ``reading="book"``, each under the first :class:`BookReading` of the claim
        whose ``checks`` pattern its name matches (the rest under
        :data:`OTHER_READING`), in the claim's order; readings without a recorded check
        are left out."""
        lines = [ReadingLine(r, []) for r in (*self.claim.readings, OTHER_READING)]
        for chk in self.checks:
            if reading_of(chk) != "book":
                continue
            for line in lines:
                if re.fullmatch(line.reading.checks, chk["name"]):
                    line.checks.append(chk)
                    break
        return [line for line in lines if line.checks]

    def groups(self) -> dict[str, list[dict[str, Any]]]:
        """The checks by what they are for (:data:`GROUPS`, in that order; empty groups
        left out): the book's readings apart, the paper's by role."""
        out: dict[str, list[dict[str, Any]]] = {}
        for chk in self.checks:
            group = "book" if reading_of(chk) == "book" else check_group(chk)
            out.setdefault(group, []).append(chk)
        return {g: out[g] for g in GROUPS if g in out}


def _parts(parent: str) -> list[Claim]:
    return [
        c
        for c in CLAIMS
        if re.fullmatch(re.escape(parent.lower()) + r"[a-z]", c.id.lower())
    ]


def row_id(tag: str | None) -> str | None:
    """The dashboard row of a check's ``claim`` tag: a claim id ("C6a"), a parent ("C6",
    when the chapter tags a check with the claim as a whole), or None (not a claim:
    "setup")."""
    if not tag:
        return None
    tag = tag.strip().lower()
    if tag in _IDS:
        return _IDS[tag].id
    parts = _parts(tag)
    return parts[0].id[:-1] if parts else None


def _combined(parent: str) -> Claim:
    parts = _parts(parent)
    caveats = " ".join(c.caveat for c in parts if c.caveat)
    sources = sorted({c.source for c in parts})
    return Claim(
        parent,
        " ".join(f"({c.id[-1]}) {c.statement}" for c in parts),
        "; ".join(sources),
        caveat=caveats,
        partial=any(c.partial for c in parts),
        readings=tuple(r for c in parts for r in c.readings),
    )


def claim_rows(records: dict[str, dict]) -> list[ClaimRow]:
    """One row per claim of :data:`CLAIMS`, with the checks of ``records`` tagged with
    it.

    A check tagged with a claim that has parts as a whole ("C6" for C6a and C6b) goes to
    one combined row, which replaces the parts that have no check of their own. Checks
    are ordered by chapter, then in the order they ran; each carries ``fragile``, the
    words of :func:`_ext.fragility.fragile_note` (``None`` unless it is fragile).
    """
    by_id: dict[str, list[dict[str, Any]]] = {}
    for chapter in sorted(records):
        for chk in records[chapter]["checks"]:
            rid = row_id(chk.get("claim"))
            if rid is not None:
                by_id.setdefault(rid, []).append(
                    {**chk, "chapter": chapter, "fragile": fragile_note(chk)}
                )
    rows: list[ClaimRow] = []
    done_parents: set[str] = set()
    for claim in CLAIMS:
        parent = claim.id[:-1] if claim.id[-1].isalpha() else None
        if parent and parent in by_id:
            if parent not in done_parents:
                done_parents.add(parent)
                rows.append(ClaimRow(_combined(parent), by_id[parent]))
            if claim.id in by_id:
                rows.append(ClaimRow(claim, by_id[claim.id]))
            continue
        rows.append(ClaimRow(claim, by_id.get(claim.id, [])))
    return rows


def other_checks(records: dict[str, dict]) -> dict[str, list[dict[str, Any]]]:
    """Recorded checks that belong to no claim row, grouped by their tag ("setup",
    "limits")."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for chapter in sorted(records):
        for chk in records[chapter]["checks"]:
            if row_id(chk.get("claim")) is None:
                groups.setdefault(chk.get("claim") or "untagged", []).append(
                    {**chk, "chapter": chapter}
                )
    return groups
