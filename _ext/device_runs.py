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
    "comparison_summary",
    "KINDS",
]


#: How a rule compares a value: ``value`` within ``atol + rtol * |b|``; ``count`` as a
#: count of outcomes (non-negative integers on both sides, at most ``atol`` apart);
#: ``chaotic`` not at all (counted): a run whose outcome turns on rounding.
KINDS = ("value", "count", "chaotic")


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= atol + rtol * |b|`` for the values whose ``chapter:name`` matches
    ``pattern`` (shell-style), and why that tolerance; ``kind`` (:data:`KINDS`) says
    how the two values are compared."""

    pattern: str
    rtol: float
    atol: float
    why: str
    kind: str = "value"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")


#: The first rule whose pattern matches ``chapter:name`` applies. The rules go from the
#: most particular to the catch-all; each says what the value is and why its
#: tolerance follows from that.
TOLERANCES: tuple[Tolerance, ...] = (
    # -- outcomes that turn on rounding: counted, not held to a number
    Tolerance(
        "05e_xor:xor_one_layer_at_*",
        0.0,
        8,
        "how many of the 8 one-layer XOR runs end at accuracy 1/2 and how many at 3/4: "
        "each ends with two sequence types at output zero, and which side of zero "
        "they land on is rounding (the chapter says so); a count of such outcomes "
        "may trade places between the two, up to all 8 runs; the bound the chapter "
        "checks (accuracy at most 3/4) is compared as a check outcome",
        "count",
    ),
    Tolerance(
        "04a_paper_protocol:*_loss_spikes",
        0.0,
        3,
        "how many of the 3 seeds end a 1e-2 step-size budget in a loss spike: at "
        "the edge of stability rounding decides it (the chapter shows two roundings "
        "of the same arithmetic on one CPU, fused and autograd step, ending apart); "
        "a count of 3 outcomes",
        "count",
    ),
    Tolerance(
        "04a_paper_protocol:imdb_lr2_*",
        0.0,
        math.inf,
        "IMDB at step size 1e-2 runs at the edge of stability: how the budget ends "
        "turns on rounding (the chapter's fused and autograd steps, two roundings "
        "on one CPU, end with losses 21 and 20 times their lowest; a GPU run with "
        "none); values at the end of these runs are not compared, the checks on "
        "them, which hold in both roundings, keep their outcome",
        "chaotic",
    ),
    # -- accuracies: counts of documents
    Tolerance(
        "0[45]*:*test*gap*",
        0.0,
        7e-3,
        "a difference of two test accuracies, each within 5e-3 (the accuracy rule "
        "below): sqrt(2) x 5e-3",
    ),
    Tolerance(
        "0[45]*:*best_gap*",
        0.0,
        7e-3,
        "a difference of two test accuracies (each read at its best step), each "
        "within 5e-3: sqrt(2) x 5e-3",
    ),
    Tolerance(
        "*:*acc*",
        0.0,
        5e-3,
        "an accuracy counts documents: those whose output lies within rounding of "
        "the decision boundary may change sides, many of them for a model near "
        "chance (an accuracy of 0.51 moved by 68 of 25,000 reviews); 5e-3 is about "
        "1.5 binomial standard errors of an accuracy on 25,000 reviews (0.003), "
        "below the three standard errors the book's checks on accuracies keep",
    ),
    # -- differences of small numbers: absolute
    Tolerance(
        "02_one_step:*pearson_gap*",
        0.0,
        1e-5,
        "|r - r*|, a difference of two correlations near 0.8: each computed from "
        "float32 sums over ~25,000 reviews, which another order moves by ~1e-6 "
        "absolute; the difference keeps that absolute error, not a relative one",
    ),
    Tolerance(
        "02_one_step:slope_*_gap",
        0.0,
        3e-4,
        "|fitted - predicted| log-log slope, a difference of two slopes of 2 and "
        "3: the fitted slope is held to 1e-4 of its size (one full-batch float32 "
        "sum in another order), so their difference to 3e-4 absolute",
    ),
    Tolerance(
        "02_one_step:*rel_increment",
        0.0,
        1e-4,
        "the relative error of the float32 increment E^1 - E^0 against the lemma, "
        "at sigma = 1e-4 where the lemma's own error sigma/sqrt(d) ~ 2e-6 is below "
        "float32 rounding of that difference of two larger numbers summed over "
        "~25,000 reviews (~1e-4): the value is rounding, agreeing to 1e-4 absolute",
    ),
    Tolerance(
        "05e_xor:*loss_gap",
        0.0,
        1e-3,
        "the largest gap of a final loss to (1/2) log 2 ~ 0.35, approached slowly "
        "along the plateau: a difference of small numbers whose size depends on "
        "where each run sits; the chapter reads it as 'at the plateau', to 1e-3",
    ),
    # -- rounding errors measured: against their own scale
    Tolerance(
        "performance:*_rel",
        1.0,
        0.0,
        "a relative gap between two implementations of one computation (float32 "
        "against float64, or two float32 forms): rounding error itself, which "
        "another order of the sums moves by its own size; two runs agree when the "
        "gaps are of one size (|a - b| <= |b|), far below the checks' thresholds "
        "(1e-4, 1e-5)",
    ),
    # -- float32 training on real data
    Tolerance(
        "0[45]*:*loss_ratio*",
        2e-2,
        0.0,
        "a ratio of two lowest training losses whose denominator, the loss of the "
        "trained model, is near zero after hundreds of float32 Adam steps: Adam "
        "divides each coordinate's gradient by its own scale, so rounding in small "
        "gradients becomes whole steps, and the small loss moves by ~1e-2 relative "
        "(the check on the ratio asks >= 2; it is 5 to 5,000)",
    ),
    Tolerance(
        "0[45]*:*rho*|0[45]*:*picture*|0[45]*:*_cls*|0[45]*:*value*|0[45]*:*partial*"
        "|0[45]*:*arms*|0[45]*:*bins*|0[45]*:*pearson*|0[45]*:*scale_free*"
        "|0[45]*:*spread*|0[45]*:*u_needs*|0[45]*:*u_between*",
        1e-3,
        2e-3,
        "a correlation of trained embeddings with a token statistic (or a ratio, a "
        "difference or a threshold of such correlations), in [-1, 1]: hundreds of "
        "float32 Adam steps carry rounding forward, amplified where Adam divides small "
        "gradients by their own scale, and move such a correlation over ~7,500 "
        "tokens by up to ~1e-3 absolute; 2e-3 lies far below the margins of the "
        "checks on them (>= 0.03)",
    ),
    Tolerance(
        "0[45]*:*",
        1e-3,
        1e-6,
        "float32 training on real data: sums of ~25,000 terms in another order "
        "differ by ~1e-5 relative, and hundreds of Adam steps carry such "
        "differences forward",
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
    """The first rule of ``rules`` that matches ``chapter:name`` (a rule's pattern may
    hold several, separated by ``|``)."""
    key = f"{chapter}:{name}"
    for rule in rules:
        if any(fnmatch.fnmatchcase(key, pat) for pat in rule.pattern.split("|")):
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
    chaotic: int = 0
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
    if rule.kind == "chaotic":
        out.chaotic += 1
        return
    out.compared += 1
    number = (int, float)
    if rule.kind == "count":
        counts = all(
            isinstance(x, number) and not isinstance(x, bool) and x >= 0 and x == int(x)
            for x in (a, b)
        )
        if not counts or abs(a - b) > rule.atol:
            reason = "outside tolerance" if counts else "not a count"
            rel = abs(a - b) / abs(b) if counts and b else math.inf
            out.outside.append(Difference(chapter, name, a, b, rel, rule, reason))
        return
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


def comparison_summary(out: DeviceComparison, chapters: list[str]) -> dict:
    """What :func:`compare_devices` found, as the JSON that ``scripts/gpu_check.py``
    writes and the Performance page reads: the counts, the largest relative
    difference, and every value outside its tolerance with its rule."""
    return {
        "chapters": chapters,
        "compared": out.compared,
        "volatile": out.volatile,
        "chaotic": out.chaotic,
        "largest_relative": out.largest_relative,
        "largest_at": out.largest_at,
        "outside": [
            {
                "chapter": d.chapter,
                "name": d.name,
                "cpu": d.reference,
                "gpu": d.other,
                "relative": d.relative,
                "reason": d.reason,
                "kind": d.tolerance.kind if d.tolerance else None,
                "rtol": d.tolerance.rtol if d.tolerance else None,
                "atol": d.tolerance.atol if d.tolerance else None,
                "why": d.tolerance.why if d.tolerance else None,
            }
            for d in out.outside
        ],
    }


def _main(argv: list[str] | None = None) -> int:
    """``python -m _ext.device_runs CPU_RECORDS GPU_RECORDS [--json FILE]``: compare two
    folders of records and print every value outside its tolerance."""
    import argparse
    import json

    from _ext.record_files import load_records

    parser = argparse.ArgumentParser(prog="python -m _ext.device_runs")
    parser.add_argument("reference", help="folder of the reference (CPU) records")
    parser.add_argument("other", help="folder of the other device's records")
    parser.add_argument("--json", help="write the summary there")
    args = parser.parse_args(argv)
    ref, other = load_records(args.reference), load_records(args.other)
    out = compare_devices(ref, other)
    result = comparison_summary(out, sorted(set(ref) & set(other)))
    print(
        f"{out.compared} values compared, {out.volatile} timings and {out.chaotic} "
        f"values of chaotic runs counted; {len(out.outside)} outside"
    )
    for d in out.outside:
        rule = d.tolerance.pattern if d.tolerance else "-"
        print(
            f"{d.chapter}: {d.name}: {d.reference!r} / {d.other!r} ({d.reason}; {rule})"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0 if out.agree else 1


if __name__ == "__main__":
    raise SystemExit(_main())
