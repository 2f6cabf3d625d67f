"""The software and hardware a run of the book used, for its record."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from attnbook.data.reviews import data_source
from attnbook.runtime import cpu_name


def environment() -> dict[str, Any]:
    """Software and hardware of this process, and the review data it reads."""
    import importlib.metadata as md

    versions = {}
    packages = "attnbook torch numpy scipy pandas cvxpy datasets matplotlib seaborn"
    for pkg in packages.split():
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "data_source": describe_data(source := data_source()),
        "data": source,
        "versions": versions,
    }
    try:
        import torch

        env["torch_threads"] = torch.get_num_threads()
        env["accelerator"] = (
            torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        )
    except ImportError:  # pragma: no cover
        pass
    return env


def describe_data(source: dict[str, Any]) -> str:
    """One line for a :func:`attnbook.data.reviews.data_source` record."""
    parts = []
    for name, entry in source.get("datasets", {}).items():
        sizes = " + ".join(
            "?" if entry.get(s) is None else f"{entry[s]:,}" for s in ("train", "test")
        )
        parts.append(f"{name}: {entry['source']}, {entry['rule']}, {sizes} reviews")
    head = f"{source.get('path', 'unknown')} (recipe {source.get('recipe', '?')})"
    return "; ".join([head, *parts])


def data_table(source: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a table of the data sets of a ``data_source`` record."""
    headers = ["Data set", "Source", "Rule", "Train reviews", "Test reviews"]
    rows = [
        [name, str(entry.get("source")), str(entry.get("rule"))]
        + ["?" if entry.get(s) is None else f"{entry[s]:,}" for s in ("train", "test")]
        for name, entry in source.get("datasets", {}).items()
    ]
    return headers, rows


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
