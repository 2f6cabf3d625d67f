"""List the fragile checks of an execution of the book: passing evidence whose margin
over its threshold is under twice its spread.

    python scripts/fragile_checks.py RECORDS [OTHER_RECORDS ...]

Each folder holds one ``<chapter>.json`` per chapter (``_build/records/book`` after a
build). The checks listed are those of the first folder; a check's spread is the one
its chapter recorded (over seeds or roundings) and, with further folders (executions on
other devices or machines), the range of its value over all the folders
(``_ext.fragility``). Prints one line per fragile check; the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _ext.fragility import FRAGILE_SPREADS, fragile_checks, run_spreads  # noqa: E402


def _records(folder: Path) -> dict[str, dict]:
    if not folder.is_dir():
        raise SystemExit(f"{folder} is not a folder of records")
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("others", type=Path, nargs="*")
    args = parser.parse_args(argv)
    first = _records(args.records)
    executions = [first, *(_records(f) for f in args.others)]
    found = fragile_checks(first, run_spreads(executions))
    n = sum(
        c.get("role", "evidence") == "evidence" and c["passed"]
        for r in first.values()
        for c in r["checks"]
    )
    print(
        f"{len(found)} of {n} passing evidence checks are fragile (margin under "
        f"{FRAGILE_SPREADS:g} spreads; {len(executions)} execution(s))"
    )
    for c in found:
        print(
            f"{c['chapter']}  {c['name']}: {c['value']:.4g} {c['relation']} "
            f"{c['threshold']:.4g}, margin {c['margin']:.3g}, spread {c['spread']:.3g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
