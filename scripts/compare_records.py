"""Compare the records of two executions of the book value by value.

    python scripts/compare_records.py BEFORE_FOLDER AFTER_FOLDER [--tolerance 0]

Each folder holds one ``<chapter>.json`` per chapter (``_build/records/book`` after a
build). For every chapter in both it counts the glued values and the checks that are
identical, lists every value that differs with its relative size, and every check whose
outcome, threshold, relation, role, claim or reading changed (``result`` labels are
listed apart: they name the statement a check verifies, not a number). Values glued as
volatile (timings) are compared for presence only. Exit status 1 when a check's outcome
changed, a value is missing on one side, or a value differs by more than
``--tolerance`` (relative; 0 by default: any difference counts).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

FIXED = ("threshold", "relation", "role", "claim", "reading", "asserted")


def _records(folder: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def _numbers(value: object) -> list[float] | None:
    """``value`` flattened to numbers, or ``None`` when it holds anything else."""
    if isinstance(value, bool):
        return [float(value)]
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, list):
        parts = [_numbers(v) for v in value]
        if all(p is not None for p in parts):
            return [x for p in parts for x in p]
    return None


def relative_change(a: object, b: object) -> float:
    """The largest relative difference between two glued values (``inf`` when they
    differ and are not numbers of one shape)."""
    if a == b:
        return 0.0
    na, nb = _numbers(a), _numbers(b)
    if na is None or nb is None or len(na) != len(nb):
        return math.inf
    return max(
        (abs(x - y) / max(abs(x), abs(y), 1e-300) for x, y in zip(na, nb)),
        default=0.0,
    )


def compare(before: dict[str, dict], after: dict[str, dict], tolerance: float) -> int:
    """Print the comparison chapter by chapter; return the exit status."""
    status = 0
    totals = {"values": 0, "identical": 0, "checks": 0, "same_outcome": 0}
    for chapter in sorted(set(before) | set(after)):
        if chapter not in before or chapter not in after:
            print(f"{chapter}: recorded on one side only")
            status = 1
            continue
        a, b = before[chapter], after[chapter]
        volatile = set(a.get("volatile", ())) | set(b.get("volatile", ()))
        ga, gb = a["glued"], b["glued"]
        lines, identical, largest = [], 0, (0.0, None)
        for key in sorted(set(ga) | set(gb)):
            if key not in ga or key not in gb:
                lines.append(f"  {key}: glued on one side only")
                status = 1
                continue
            if key in volatile:
                identical += 1
                continue
            change = relative_change(ga[key], gb[key])
            if change == 0.0:
                identical += 1
                continue
            largest = max(largest, (change, key), key=lambda t: t[0])
            lines.append(f"  {key}: {ga[key]!r} -> {gb[key]!r} (relative {change:.2e})")
            if change > tolerance:
                status = 1
        ca = {c["name"]: c for c in a["checks"]}
        cb = {c["name"]: c for c in b["checks"]}
        same_outcome = 0
        for name in sorted(set(ca) | set(cb)):
            if name not in ca or name not in cb:
                lines.append(f"  check {name}: on one side only")
                status = 1
                continue
            if ca[name]["passed"] != cb[name]["passed"]:
                lines.append(
                    f"  check {name}: OUTCOME {ca[name]['passed']} -> "
                    f"{cb[name]['passed']}"
                )
                status = 1
            else:
                same_outcome += 1
            for field in FIXED:
                if ca[name].get(field) != cb[name].get(field):
                    lines.append(
                        f"  check {name}: {field} {ca[name].get(field)!r} -> "
                        f"{cb[name].get(field)!r}"
                    )
                    status = 1
            if ca[name].get("result") != cb[name].get("result"):
                lines.append(
                    f"  check {name}: result label "
                    f"{ca[name].get('result')!r} -> {cb[name].get('result')!r}"
                )
        n = len(set(ga) | set(gb))
        head = (
            f"{chapter}: {identical}/{n} glued values identical; "
            f"{same_outcome}/{len(set(ca) | set(cb))} checks with the same outcome"
        )
        if largest[1] is not None:
            head += f"; largest relative change {largest[0]:.2e} ({largest[1]})"
        print(head)
        if lines:
            print("\n".join(lines))
        totals["values"] += n
        totals["identical"] += identical
        totals["checks"] += len(set(ca) | set(cb))
        totals["same_outcome"] += same_outcome
    print(
        f"in all: {totals['identical']}/{totals['values']} glued values identical, "
        f"{totals['same_outcome']}/{totals['checks']} checks with the same outcome"
    )
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.0)
    args = parser.parse_args(argv)
    return compare(_records(args.before), _records(args.after), args.tolerance)


if __name__ == "__main__":
    sys.exit(main())
