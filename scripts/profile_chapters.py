"""Where a chapter spends its time: its code cells run under cProfile, one chapter per
process, in an IPython shell (magics and displays as in a kernel), without records.

    python scripts/profile_chapters.py 04_real_data 04a_paper_protocol --table
    python scripts/profile_chapters.py --all --table  # every chapter, one by one

For each chapter it writes ``<out>/<chapter>.prof`` (``pstats``) and
``<out>/<chapter>.json``: the wall time, and the functions of attnbook (and of torch,
NumPy, SciPy, ...) with the largest own and cumulative times. With ``--table`` it
prints, from the JSON files in ``--out``, a Markdown table of each chapter's largest
costs: the attnbook functions with the largest cumulative time that are not called
directly by another of the listed ones (a later entry may still run inside an earlier
one: the shares overlap), and the function with the largest own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _code_cells(notebook: Path) -> list[str]:
    nb = json.loads(notebook.read_text())
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if "/attnbook/" in path:
        rel = path[path.rindex("/attnbook/") + 1 :]
        return f"{rel}:{line} {name}"
    if "site-packages/" in path:
        return f"{path.split('site-packages/')[1]}:{line} {name}"
    return f"{Path(path).name}:{line} {name}" if path != "~" else name


#: Kinds of work, by where the attnbook function charged is (first match); own time
#: charged to no attnbook function is told by its own module (:data:`LIBRARY_KINDS`).
KINDS: list[tuple[str, str]] = [
    ("<module>", "imports"),
    ("attnbook/engine/", "count engine (compiled passes)"),
    ("attnbook/models/attention.py", "count engine (compiled passes)"),
    ("attnbook/models/", "training step (torch, optimiser)"),
    ("attnbook/data/", "corpus (load, tokenize, encode)"),
    ("attnbook/experiments/robustness.py", "corpus (load, tokenize, encode)"),
    ("attnbook/theory/flow", "flow integration"),
    ("attnbook/theory/max_margin.py", "max-margin programs"),
    ("attnbook/theory/", "theory (one step, frequencies, maps)"),
    ("attnbook/book/", "figures, tables, checks, records"),
    ("attnbook/bench/", "timed benchmark runs"),
    ("attnbook/experiments/", "experiment loops (evaluation, curves)"),
    ("attnbook/", "other attnbook"),
]
LIBRARY_KINDS: list[tuple[str, str]] = [
    ("<frozen importlib", "imports"),
    ("marshal.loads", "imports"),
    ("matplotlib/", "figures, tables, checks, records"),
    ("PIL/", "figures, tables, checks, records"),
    ("IPython/", "figures, tables, checks, records"),
    ("cvxpy/", "max-margin programs"),
    ("torch/", "cell code (torch)"),
    ("numpy/", "cell code (numpy)"),
]


def kind_of(where: str, library: bool = False) -> str:
    """The kind of work of a function (a ``_where`` string): for an attnbook function
    by :data:`KINDS`, for another (``library``) by :data:`LIBRARY_KINDS`."""
    for prefix, kind in LIBRARY_KINDS if library else KINDS:
        if (library and prefix in where) or (
            not library and (where.startswith(prefix) or where.endswith(prefix))
        ):
            return kind
    return "other (interpreter, cell code)"


IMPORTS = ("", 0, "imports")


def _imports(func: tuple[str, int, str]) -> bool:
    """Whether ``func`` is the import machinery or a library module's top level."""
    path, _, name = func
    return path.startswith("<frozen importlib") or (
        name == "<module>" and path.endswith(".py") and "ipykernel" not in path
    )


def time_by_kind(stats: dict) -> dict[str, float]:
    """Seconds of each kind of work: every function's own time charged to the nearest
    attnbook function or import above it in the call graph (shared among callers in proportion
    to the time spent under each), then told by :func:`kind_of`."""
    anchors: dict = {}

    def anchor(func, seen: frozenset) -> dict:
        if func in anchors:
            return anchors[func]
        if "/attnbook/" in func[0]:
            return {func: 1.0}
        if _imports(func):
            return {IMPORTS: 1.0}
        callers = stats[func][4] if func in stats else {}
        weights = {c: v[3] for c, v in callers.items() if c not in seen and v[3] > 0}
        total = sum(weights.values())
        if not total:
            return {None: 1.0}
        found: dict = {}
        for c, w in weights.items():
            for a, share in anchor(c, seen | {func}).items():
                found[a] = found.get(a, 0.0) + share * w / total
        anchors[func] = found  # a cycle is cut where it was first entered
        return found

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    kinds: dict[str, float] = {}
    for func, (_, _, own, _, _) in stats.items():
        for a, share in anchor(func, frozenset()).items():
            if a is None:
                kind = kind_of(_where(func), library=True)
            else:
                kind = "imports" if a is IMPORTS else kind_of(_where(a))
            kinds[kind] = kinds.get(kind, 0.0) + own * share
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


def chapter_names() -> list[str]:
    """Every chapter of the book, by its notebook's name."""
    return sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))


def run_cells(chapter: str, around=contextlib.nullcontext) -> list[float]:
    """Run the code cells of ``chapters/<chapter>.ipynb`` in this process, in an IPython
    shell (magics and displays as in a kernel), without records, each inside
    ``around()``; the seconds each took. A cell that raises stops the process."""
    from IPython.core.interactiveshell import InteractiveShell

    os.environ.pop("ATTNBOOK_RECORD_DIR", None)
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.chdir(ROOT / "chapters")
    sys.path.insert(0, str(ROOT / "chapters"))  # a section's own module, beside it
    shell = InteractiveShell.instance()
    cells = []
    for i, source in enumerate(_code_cells(ROOT / "chapters" / f"{chapter}.ipynb")):
        t = time.perf_counter()
        with around():
            result = shell.run_cell(source, silent=True)
        cells.append(round(time.perf_counter() - t, 2))
        if not result.success:
            raise SystemExit(f"{chapter}: code cell {i} raised {result.error_in_exec}")
    return cells


def profile(chapter: str, out: Path) -> dict:
    """Run the code cells of ``chapters/<chapter>.ipynb`` under cProfile (in this
    process); write and return the summary."""
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    cells = run_cells(chapter, around=lambda: profiler)  # enabled within each cell
    wall = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(out / f"{chapter}.prof")
    stats = pstats.Stats(profiler).stats
    rows = [
        {
            "where": _where(func),
            "calls": nc,
            "own_s": round(tt, 3),
            "cum_s": round(ct, 3),
            "callers": sorted({_where(c) for c in callers}),
        }
        for func, (cc, nc, tt, ct, callers) in stats.items()
    ]
    summary = {
        "chapter": chapter,
        "wall_s": round(wall, 2),
        "cells_s": cells,
        "by_own": sorted(rows, key=lambda r: -r["own_s"])[:40],
        "by_cum": sorted(
            (r for r in rows if r["where"].startswith("attnbook/")),
            key=lambda r: -r["cum_s"],
        )[:60],
        "kinds_s": {k: round(v, 2) for k, v in time_by_kind(stats).items()},
    }
    (out / f"{chapter}.json").write_text(json.dumps(summary, indent=1))
    return summary


def largest_costs(summary: dict, n: int = 4) -> list[dict]:
    """The attnbook functions with the largest cumulative time, leaving out those
    called directly by a function already listed, those under 2 % of the chapter's
    time, and the chapter's start (``attnbook/book/chapter``)."""
    picked: list[dict] = []
    for row in summary["by_cum"]:
        if row["where"].startswith("attnbook/book/chapter"):
            continue
        inner = any(p["where"] in row["callers"] for p in picked)
        if inner or row["cum_s"] < 0.02 * summary["wall_s"]:
            continue
        picked.append(row)
        if len(picked) == n:
            break
    return picked


def table(out: Path) -> str:
    """A Markdown table of every profiled chapter's largest costs."""
    lines = [
        "| chapter | profiled wall (s) | time by kind of work (s, share) | "
        "largest costs (cumulative s, share) | largest own time |",
        "|---|---:|---|---|---|",
    ]
    for path in sorted(out.glob("*.json")):
        summary = json.loads(path.read_text())
        wall = summary["wall_s"]
        costs = "; ".join(
            f"`{r['where'].split(' ')[1]}` ({r['where'].split(':')[0]}) "
            f"{r['cum_s']:.1f} s, {r['cum_s'] / wall:.0%}"
            for r in largest_costs(summary)
        )
        kinds = "; ".join(
            f"{kind} {seconds:.1f} s, {seconds / wall:.0%}"
            for kind, seconds in summary.get("kinds_s", {}).items()
            if seconds >= 0.02 * wall
        )
        own = summary["by_own"][0]
        lines.append(
            f"| {summary['chapter']} | {wall:.1f} | {kinds} | {costs} | "
            f"`{own['where']}` {own['own_s']:.1f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "profile")
    parser.add_argument("--table", action="store_true")
    parser.add_argument(
        "--all", action="store_true", help="profile every chapter of chapters/"
    )
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if args.in_process:
        for chapter in args.chapters:
            profile(chapter, out)
        return 0
    chapters = chapter_names() if args.all else args.chapters
    for chapter in chapters:  # one process per chapter: no state carried over
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--in-process", "--out", str(out), chapter]
        )
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        print(f"[profile] {chapter}: {time.perf_counter() - t:.0f} s, {status}")
        if proc.returncode:
            return proc.returncode
    if args.table:
        print(table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
