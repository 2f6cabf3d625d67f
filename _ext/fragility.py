"""Which passing evidence is fragile: its margin over the threshold against its spread.

A check's *margin* is how far its value lies on the passing side of its threshold
(:func:`margin`); its *spread* is how far the same statistic moves between repeated
runs: the ``spread`` the chapter recorded with it (:func:`attnbook.book.checks.check`;
the range over seeds or roundings in chapter 4, elsewhere the standard deviation over
the seeds, initialisations or data sets, :mod:`attnbook.experiments.spreads`; each
chapter says which), and, where several executions of the book are at
hand (other devices, other machines), the range of its value over them
(:func:`run_spreads`). A passing evidence check whose margin is under
:data:`FRAGILE_SPREADS` times its spread is *fragile* (:func:`is_fragile`): a repeat of
the run could well fail it. The flag changes no outcome and no tolerance; the
dashboard shows it beside the check.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

__all__ = [
    "FRAGILE_SPREADS",
    "margin",
    "spread_of",
    "is_fragile",
    "fragile_note",
    "run_spreads",
    "fragile_checks",
]

#: A passing evidence check is fragile when its margin is under this many spreads.
FRAGILE_SPREADS = 2.0


def margin(chk: Mapping[str, Any]) -> float:
    """How far the value lies on the passing side of the threshold (negative when the
    check fails)."""
    value, threshold = float(chk["value"]), float(chk["threshold"])
    if chk["relation"] == ">=":
        return value - threshold
    if chk["relation"] == "<=":
        return threshold - value
    raise ValueError(f"unknown relation {chk['relation']!r}")


def spread_of(chk: Mapping[str, Any], other: float | None = None) -> float | None:
    """The larger of the spread recorded with ``chk`` and ``other`` (a spread measured
    over other executions); ``None`` when neither is known."""
    known = [float(s) for s in (chk.get("spread"), other) if s is not None]
    return max(known) if known else None


def is_fragile(chk: Mapping[str, Any], other: float | None = None) -> bool:
    """Whether ``chk`` is passing evidence whose margin is under
    :data:`FRAGILE_SPREADS` times its spread (:func:`spread_of` with ``other``)."""
    spread = spread_of(chk, other)
    if spread is None or chk.get("role", "evidence") != "evidence":
        return False
    return bool(chk["passed"]) and margin(chk) < FRAGILE_SPREADS * spread


def fragile_note(chk: Mapping[str, Any], other: float | None = None) -> str | None:
    """The dashboard's words for a fragile check (``None`` when it is not one)."""
    if not is_fragile(chk, other):
        return None
    spread = spread_of(chk, other)
    return (
        f"fragile: margin {margin(chk):.3g} under {FRAGILE_SPREADS:g} × its spread "
        f"{spread:.3g} over repeated runs"
    )


def run_spreads(
    executions: Iterable[Mapping[str, Mapping[str, Any]]],
) -> dict[tuple[str, str], float]:
    """The range of every check's value over several executions of the book, each a
    mapping chapter -> record (``{"checks": [...]}``), keyed ``(chapter, name)``; a
    check recorded in fewer than two of them has no entry, nor has a check of a value
    the record marks volatile (a timing: it moves with the machine, not by chance)."""
    values: dict[tuple[str, str], list[float]] = {}
    for records in executions:
        for chapter, record in records.items():
            volatile = set(record.get("volatile", ()))
            for chk in record["checks"]:
                value = float(chk["value"])
                if math.isfinite(value) and chk["name"] not in volatile:
                    values.setdefault((chapter, chk["name"]), []).append(value)
    return {k: max(v) - min(v) for k, v in values.items() if len(v) >= 2}


def fragile_checks(
    records: Mapping[str, Mapping[str, Any]],
    spreads: Mapping[tuple[str, str], float] | None = None,
) -> list[dict[str, Any]]:
    """The fragile checks of ``records`` (chapter -> record), each with its chapter,
    margin and spread, in chapter order; ``spreads`` adds a spread over other
    executions (:func:`run_spreads`)."""
    out = []
    for chapter in sorted(records):
        for chk in records[chapter]["checks"]:
            other = (spreads or {}).get((chapter, chk["name"]))
            if is_fragile(chk, other):
                spread = spread_of(chk, other)
                out.append(
                    {**chk, "chapter": chapter, "margin": margin(chk), "spread": spread}
                )
    return out
