"""The GPU measurements of ``scripts/gpu_check.py``, as the tables the Performance page
shows.

The script writes ``gpu_measurements.json`` on a machine with a GPU; a copy kept in the
book (``chapters/gpu_measurements.json``) is read by :func:`load_gpu_measurements`.
:func:`engine_table` sets the benchmark on two CPU cores and on the GPU side by side
(the GPU before, with the CPU engine's form, and after, the GPU form replayed from a
CUDA graph), :func:`chapter_table` the time of every chapter, and
:func:`comparison_summary` says how the records of the two runs compare.

A later run, kept under the key ``gpu_twice`` of the same file (:func:`twice_run`),
executes chapters twice on the GPU: :func:`twice_table` sets the two runs' times
and how many of their values differ beside the chapters' times on the CPU,
:func:`twice_summary` says it in a sentence, and :func:`u_table` sets section 4.9's
check that the U needs Adam as each device measured it. The comparison and
provenance functions above take that run's dictionary as well.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = [
    "MEASUREMENTS_FILE",
    "load_gpu_measurements",
    "engine_table",
    "chapter_table",
    "comparison_summary",
    "outside_table",
    "provenance",
    "twice_run",
    "twice_table",
    "twice_summary",
    "u_table",
]

MEASUREMENTS_FILE = "gpu_measurements.json"


def load_gpu_measurements(
    *folders: str | Path,
) -> dict | None:
    """The measurements in the first of ``folders`` (default: the current folder and
    ``chapters/``) that holds :data:`MEASUREMENTS_FILE`; ``None`` when none does."""
    for folder in folders or (".", "chapters"):
        path = Path(folder) / MEASUREMENTS_FILE
        if path.is_file():
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or "chapters" not in data:
                raise ValueError(f"{path} is not a file written by gpu_check.py")
            return data
    return None


def _bench_column(bench: dict, graph: dict | None = None) -> dict[str, float | None]:
    """One column of :func:`engine_table` from a benchmark's numbers: its eager
    gradient, or with ``graph`` (the GPU form's timings) the gradient replayed from a
    CUDA graph, and then that form's eager gradient beside it."""
    t_grad, t_step, eager = bench["t_grad"], bench["t_step"], None
    if graph is not None:
        t_grad, t_step = graph["graph_s"], graph["graph_step_s"]
        eager = graph.get("eager_s")
    return {
        "full-batch gradient (ms)": 1e3 * t_grad,
        "the same form without the graph (ms)": None if eager is None else 1e3 * eager,
        "training step with Adam (ms)": 1e3 * t_step,
        "copy bandwidth (GB/s)": bench["bandwidth"] / 1e9,
        "bandwidth bound of a gradient (ms)": 1e3 * bench["t_bound"],
        "fraction of the bound": bench["t_bound"] / t_grad,
        "speed-up over the padded implementation": bench["t_usual"] / t_grad,
    }


def engine_table(measurements: dict) -> pd.DataFrame:
    """The benchmark (full IMDB training split, ``d = 2048``, float32) on two CPU cores
    and on the GPU, before and after, one column each, the devices named: on the GPU
    the CPU engine's form, then the GPU form in a CUDA graph with each way of running
    its dense passes that was timed (the library's, Triton's)."""
    columns = {}
    cpu, gpu = measurements.get("bench_cpu"), measurements.get("bench_gpu")
    if cpu:
        columns[f"CPU, 2 cores ({cpu['device_name']})"] = _bench_column(cpu)
    if gpu:
        name = gpu["device_name"]
        columns[f"GPU, CPU engine's form ({name})"] = _bench_column(gpu)
        form = gpu.get("gpu")
        if form:
            variants = form.get("variants") or {form.get("dense", "library"): form}
            for dense, timings in variants.items():
                title = f"GPU, GPU form in a CUDA graph, dense passes by {dense}"
                columns[f"{title} ({name})"] = _bench_column(gpu, timings)
    return pd.DataFrame(columns)


def chapter_table(measurements: dict) -> pd.DataFrame:
    """Seconds each chapter took on two CPU cores with the GPU hidden, on the GPU, and
    where its workload sends it (``synthetic``: the CPU, ``real``: the GPU)."""
    rows = [
        {
            "chapter": r["chapter"],
            "workload": r["workload"],
            "2 CPU cores (s)": r["cpu_2_cores_s"],
            "GPU (s)": r["gpu_s"],
            "by workload (s)": r["policy_s"],
            "ran through": "yes" if r["cpu_rc"] == 0 and r["gpu_rc"] == 0 else "no",
        }
        for r in measurements["chapters"]
    ]
    return pd.DataFrame(rows).set_index("chapter")


def comparison_summary(measurements: dict) -> str:
    """One sentence on the comparison of the CPU and GPU records, value by value."""
    c = measurements.get("comparison")
    if not c:
        return "The records of the two runs were not compared."
    chaotic = c.get("chaotic", 0)
    text = (
        f"{c['compared']:,} recorded values of {len(c['chapters'])} chapters compared "
        f"(and {c['volatile']} timings, which differ by nature"
        + (
            f", and {chaotic} values of runs whose outcome turns on rounding, counted "
            "but not compared"
            if chaotic
            else ""
        )
        + f"); the largest relative difference is {c['largest_relative']:.1e}"
    )
    if c.get("largest_at"):
        text += f" ({c['largest_at']})"
    n_out = len(c["outside"])
    missing = sum(1 for d in c["outside"] if _one_run_only(d))
    if n_out == 0:
        return text + "; every value lies within its tolerance."
    text += f"; {n_out} lie outside their tolerance"
    if missing:
        text += (
            f", {missing} of them only because a chapter stopped in one run and "
            "recorded nothing after that cell"
        )
    return text + " (listed below)."


def _one_run_only(d: dict) -> bool:
    """A value or check recorded in one run only (its chapter stopped in the other)."""
    return d["reason"] == "glued in one run only" or (
        d["reason"] == "check outcome differs" and None in (d["cpu"], d["gpu"])
    )


def outside_table(measurements: dict) -> pd.DataFrame:
    """The values outside their tolerance: CPU and GPU value, relative difference, the
    tolerance and why it is what it is (empty when there are none)."""
    c = measurements.get("comparison") or {}
    columns = ["chapter", "name", "cpu", "gpu", "relative", "reason", "rtol", "atol"]
    rows = [d for d in c.get("outside", []) if not _one_run_only(d)]
    stopped: dict[str, int] = {}
    for d in c.get("outside", []):
        if _one_run_only(d):
            stopped[d["chapter"]] = stopped.get(d["chapter"], 0) + 1
    rows += [
        {"chapter": ch, "name": f"{k} values and checks", "reason": "one run only"}
        for ch, k in stopped.items()
    ]
    return pd.DataFrame(rows, columns=columns)


def provenance(measurements: dict) -> str:
    """Where, when, at which commit and how the measurements were made (empty when
    the file does not say)."""
    p = measurements.get("provenance")
    if not p:
        return ""
    return (
        f"Machine: {p['machine']}. Date: {p['date']}. Commit: {p['commit']}. "
        f"How: {p['how']} Comparison: {p['comparison']}."
    )


def twice_run(measurements: dict) -> dict | None:
    """The run that executed chapters twice on the GPU (``None`` when the file holds
    none); it carries its own ``provenance``, ``tests``, ``chapters`` and
    ``comparison``."""
    run = measurements.get("gpu_twice")
    if run is not None and not isinstance(run, dict):
        raise ValueError("gpu_twice must be a dictionary of one run's measurements")
    return run


def twice_table(run: dict) -> pd.DataFrame:
    """Per chapter: its two GPU times, what ran beside it, the values the two runs
    glued and how many of them differ, and its time on the CPU."""
    rows = [
        {
            "chapter": r["chapter"],
            "workload": r["workload"],
            "GPU, first run (s)": r["gpu_first_s"],
            "GPU, second run (s)": r["gpu_second_s"],
            "on the GPU": r["beside"],
            "values compared": r["compared"],
            "values that differ": r["differ"],
            "CPU, book build (s)": r["cpu_build_s"],
        }
        for r in run["chapters"]
    ]
    return pd.DataFrame(rows).set_index("chapter")


def twice_summary(run: dict) -> str:
    """One sentence on the two GPU runs: values compared, how many differ, which
    check values differ (a timing's check), and the tests."""
    twice = [r for r in run["chapters"] if r["compared"] is not None]
    compared = sum(r["compared"] for r in twice)
    differ = sum(r["differ"] for r in twice)
    text = (
        f"{len(twice)} chapters executed twice on the GPU: {compared:,} glued values "
        f"compared, {differ} of them different"
    )
    timed = [name for r in twice for name in r.get("check_values_differ") or []]
    if timed:
        text += (
            f"; the checks agree in outcome, and in value except {', '.join(timed)}, "
            "a ratio of two measured times"
        )
    tests = run.get("tests") or {}
    if tests:
        text += ". Tests there: " + "; ".join(
            f"{name}: {t['summary']}" for name, t in tests.items()
        )
    return text + "."


def u_table(run: dict) -> pd.DataFrame:
    """Section 4.9's check that the U needs Adam (the smallest Adam-trained seed's
    rho_U minus the largest over the gradient-descent runs, at least the threshold),
    per data set as each device measured it, and over both devices' runs together.
    Runs whose rho_U is the same to the bit are counted once (distinct runs)."""
    rows = []
    for data, entry in run.get("u_needs_adam", {}).items():
        devices = [d for d in ("cpu", "gpu") if d in entry]
        for label, parts in [(d, [d]) for d in devices] + [("both", devices)]:
            adam = min(entry[d]["adam_u_min"] for d in parts)
            gd = [u for d in parts for u in entry[d]["gd_u"].values()]
            rows.append(
                {
                    "data": data,
                    "runs of": {"cpu": "CPU", "gpu": "GPU"}.get(label, "both"),
                    "Adam, smallest seed": adam,
                    "GD, largest": max(gd),
                    "GD runs": len(gd),
                    "distinct GD runs": len(set(gd)),
                    "difference": adam - max(gd),
                    "at least": entry["threshold"],
                    "holds": adam - max(gd) >= entry["threshold"],
                }
            )
    return pd.DataFrame(rows)
