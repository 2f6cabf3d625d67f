"""The claims of the paper as the book states them, and the headline of each.

The claims are data, kept beside the chapters in ``chapters/claims.yml`` (its header
says what each field means). :func:`load_claims` reads and checks that file; a
malformed entry raises :class:`ClaimsError` naming the file and the claim.
:data:`CLAIMS` lists the claims C1-C7 of the paper (C6 and C7 split into their parts)
in the book's words (``$...$`` is math), with where each comes from, what the book
cannot verify as stated, and the book's own readings of it; :data:`HEADLINES` names the
check that sums each claim up. :mod:`_ext.dashboard` joins them with a run's records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from _ext.claim_status import BookReading

__all__ = [
    "Claim",
    "ClaimsError",
    "CLAIMS_FILE",
    "load_claims",
    "CLAIMS",
    "HEADLINES",
]

#: The claims of the book, beside its chapters.
CLAIMS_FILE = Path(__file__).resolve().parents[1] / "chapters" / "claims.yml"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper as the book states it (``$...$`` is math)."""

    id: str
    statement: str
    source: str
    caveat: str = ""  # what the book cannot verify as stated, or what it reconstructed
    verifiable: bool = True  # False: the paper states nothing to verify (C7d)
    partial: bool = (
        False  # the book's checks cover only part of the statement (see caveat)
    )
    # the book's own readings of the claim, each shown on a line of its own
    readings: tuple[BookReading, ...] = ()
    # why the badge is not PASS, in one line, for the verdict at the top of the book
    verdict: str = ""


class ClaimsError(ValueError):
    """A malformed claims file: the message names the file and the claim."""


#: Each field of an entry: its type and whether it must be there.
_CLAIM_FIELDS: dict[str, tuple[type, bool]] = {
    "id": (str, True),
    "statement": (str, True),
    "source": (str, True),
    "headline": (str, False),
    "partial": (bool, False),
    "verifiable": (bool, False),
    "caveat": (str, False),
    "verdict": (str, False),
    "readings": (list, False),
}
_READING_FIELDS: dict[str, tuple[type, bool]] = {
    "statement": (str, True),
    "checks": (str, True),
    "headline": (str, False),
}
_ID = re.compile(r"C[0-9]+[a-z]?")


def _fields(entry: Any, fields: dict[str, tuple[type, bool]], where: str) -> dict:
    """``entry`` checked against ``fields``: a mapping with every required field, no
    other, each of its type (strings not empty)."""
    if not isinstance(entry, dict):
        raise ClaimsError(f"{where}: expected a mapping of fields, got {entry!r}")
    unknown = sorted(set(entry) - set(fields))
    if unknown:
        raise ClaimsError(
            f"{where}: unknown field(s) {', '.join(map(str, unknown))} "
            f"(known: {', '.join(fields)})"
        )
    for name, (kind, required) in fields.items():
        if name not in entry:
            if required:
                raise ClaimsError(f"{where}: the field {name!r} is missing")
            continue
        value = entry[name]
        if not isinstance(value, kind) or (kind is str and not value.strip()):
            raise ClaimsError(
                f"{where}: {name!r} must be a non-empty {kind.__name__}, got {value!r}"
            )
    return entry


def _reading(entry: Any, where: str) -> BookReading:
    entry = _fields(entry, _READING_FIELDS, where)
    try:
        re.compile(entry["checks"])
    except re.error as err:
        raise ClaimsError(
            f"{where}: 'checks' is not a regular expression ({err}): "
            f"{entry['checks']!r}"
        ) from None
    return BookReading(entry["statement"], entry["checks"], entry.get("headline"))


def load_claims(
    path: str | Path = CLAIMS_FILE,
) -> tuple[tuple[Claim, ...], dict[str, str]]:
    """The claims of ``path`` in their order, and the headline check of each claim
    that names one (:data:`CLAIMS`, :data:`HEADLINES`). Raises :class:`ClaimsError`,
    naming the file and the claim, on a malformed entry or a repeated id."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ClaimsError(f"{path}: cannot read the claims: {err}") from None
    entries = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ClaimsError(f"{path}: expected 'claims:', a list of claims")
    claims: list[Claim] = []
    headlines: dict[str, str] = {}
    for k, entry in enumerate(entries, 1):
        name = entry.get("id") if isinstance(entry, dict) else None
        where = f"{path}, claim {name}" if name else f"{path}, claim {k} (no id)"
        entry = _fields(entry, _CLAIM_FIELDS, where)
        if not _ID.fullmatch(name):
            raise ClaimsError(f"{where}: an id is C<number>, optionally a letter")
        if any(c.id.lower() == name.lower() for c in claims):
            raise ClaimsError(f"{where}: the id is given twice")
        readings = tuple(
            _reading(r, f"{where}, reading {j}")
            for j, r in enumerate(entry.get("readings", []), 1)
        )
        claims.append(
            Claim(
                name,
                entry["statement"],
                entry["source"],
                caveat=entry.get("caveat", ""),
                verifiable=entry.get("verifiable", True),
                partial=entry.get("partial", False),
                readings=readings,
                verdict=entry.get("verdict", ""),
            )
        )
        if "headline" in entry:
            headlines[name] = entry["headline"]
    return tuple(claims), headlines


#: The claims of the book (:data:`CLAIMS_FILE`), and the check each claim's row shows
#: as its headline (a missing name falls back to the first evidence; see
#: :attr:`ClaimRow.headline`).
CLAIMS, HEADLINES = load_claims()
