"""The records of a chapter run on two devices, compared value by value within each
value's tolerance.

:func:`_ext.record_files.compare_records` asks two runs on one machine for
identical numbers. Run on a GPU, the same chapter adds its sums in other orders, so its
numbers differ from the CPU run's by rounding, and the training loops carry that
rounding forward. :func:`compare_devices` compares every glued number (lists element
by element) and every check of two sets of records within the tolerance that
:data:`TOLERANCES` states for it, and reports how many values were compared, the
largest relative difference, and each value outside its tolerance. Outcomes of checks
(passed or not) must be the same; values marked volatile (timings) are only counted.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

__all__ = [
    "Tolerance",
    "TOLERANCES",
    "tolerance_for",
    "Difference",
    "DeviceComparison",
    "compare_devices",
]


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= atol + rtol * |b|`` for the values whose ``chapter:name`` matches
    ``pattern`` (shell-style), and why that tolerance."""

    pattern: str
    rtol: float
    atol: float
    why: str


#: The first rule whose pattern matches ``chapter:name`` applies.
TOLERANCES: tuple[Tolerance, ...] = (
    Tolerance(
        "*:*acc*",
        0.0,
        2e-3,
        "an accuracy counts documents: one of a few thousand test documents whose "
        "output lies within rounding of 0 may change sides (2e-3 allows a handful)",
    ),
    Tolerance(
        "0[45]*:*",
        1e-3,
        1e-6,
        "float32 training on real data: sums of ~25,000 terms in another order differ "
        "by ~1e-5 relative, and hundreds of Adam steps carry such differences forward",
    ),
    Tolerance(
        "02_one_step:*",
        1e-4,
        1e-9,
        "one gradient step, float32 on the review corpora: one full-batch sum in "
        "another order (~1e-5 relative), no training loop to amplify it",
    ),
    Tolerance(
        "*:*",
        1e-6,
        1e-9,
        "float64 synthetic problems: rounding ~1e-16 per operation, amplified by "
        "gradient flows of thousands of steps and by the convex solvers' own "
        "tolerance (~1e-8)",
    ),
)


def tolerance_for(
    chapter: str, name: str, rules: tuple[Tolerance, ...] = TOLERANCES
) -> Tolerance:
    """The first rule of ``rules`` that matches ``chapter:name``."""
    key = f"{chapter}:{name}"
    for rule in rules:
        if fnmatch.fnmatchcase(key, rule.pattern):
            return rule
    raise ValueError(f"no tolerance rule matches {key!r}")


@dataclass(frozen=True)
class Difference:
    """One value outside its tolerance (or not comparable: missing, a different type, a
    check with another outcome)."""

    chapter: str
    name: str
    reference: object
    other: object
    relative: float
    tolerance: Tolerance | None
    reason: str


@dataclass
class DeviceComparison:
    """What :func:`compare_devices` found."""

    compared: int = 0
    volatile: int = 0
    largest_relative: float = 0.0
    largest_at: str | None = None
    outside: list[Difference] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return not self.outside


def _leaves(value: object, name: str) -> list[tuple[str, object]]:
    """``(name[i][j]..., leaf)`` for every number, string or ``None`` in ``value``."""
    if isinstance(value, list):
        return [
            leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{name}[{i}]")
        ]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{name}[{k}]")]
    return [(name, value)]


def _compare_leaf(
    out: DeviceComparison,
    chapter: str,
    name: str,
    a: object,
    b: object,
    rule: Tolerance,
) -> None:
    out.compared += 1
    number = (int, float)
    if (
        isinstance(a, bool)
        or isinstance(b, bool)
        or not (isinstance(a, number) and isinstance(b, number))
    ):
        if a != b:
            out.outside.append(
                Difference(chapter, name, a, b, math.inf, None, "not equal")
            )
        return
    a, b = float(a), float(b)
    diff = abs(a - b)
    rel = diff / abs(b) if b != 0 else (0.0 if diff == 0 else math.inf)
    if rel > out.largest_relative:
        out.largest_relative, out.largest_at = rel, f"{chapter}: {name}"
    if not diff <= rule.atol + rule.rtol * abs(b):
        out.outside.append(
            Difference(chapter, name, a, b, rel, rule, "outside tolerance")
        )


def compare_devices(
    reference: dict[str, dict],
    other: dict[str, dict],
    rules: tuple[Tolerance, ...] = TOLERANCES,
) -> DeviceComparison:
    """Compare two sets of records (as
    :func:`_ext.record_files.load_records` reads them), e.g. a CPU run
    (``reference``) and a GPU run (``other``), value by value within
    :data:`TOLERANCES`; chapters recorded in only one set are reported as outside."""
    out = DeviceComparison()
    for chapter in sorted(set(reference) | set(other)):
        if chapter not in reference or chapter not in other:
            out.outside.append(
                Difference(chapter, "*", None, None, math.inf, None, "one run only")
            )
            continue
        ra, rb = reference[chapter], other[chapter]
        volatile = set(ra.get("volatile", ())) | set(rb.get("volatile", ()))
        ga, gb = ra["glued"], rb["glued"]
        for key in sorted(set(ga) | set(gb)):
            if key not in ga or key not in gb:
                out.outside.append(
                    Difference(
                        chapter,
                        key,
                        ga.get(key),
                        gb.get(key),
                        math.inf,
                        None,
                        "glued in one run only",
                    )
                )
            elif key in volatile:
                out.volatile += 1
            else:
                la, lb = _leaves(ga[key], key), _leaves(gb[key], key)
                if [n for n, _ in la] != [n for n, _ in lb]:
                    out.outside.append(
                        Difference(
                            chapter,
                            key,
                            ga[key],
                            gb[key],
                            math.inf,
                            None,
                            "different shapes",
                        )
                    )
                    continue
                rule = tolerance_for(chapter, key, rules)
                for (name, a), (_, b) in zip(la, lb):
                    _compare_leaf(out, chapter, name, a, b, rule)
        checks_a = {c["name"]: c for c in ra["checks"]}
        checks_b = {c["name"]: c for c in rb["checks"]}
        for name in sorted(set(checks_a) | set(checks_b)):
            ca, cb = checks_a.get(name), checks_b.get(name)
            if ca is None or cb is None or ca["passed"] != cb["passed"]:
                out.outside.append(
                    Difference(
                        chapter,
                        f"check {name}",
                        None if ca is None else ca["passed"],
                        None if cb is None else cb["passed"],
                        math.inf,
                        None,
                        "check outcome differs",
                    )
                )
    return out
