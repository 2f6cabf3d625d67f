"""The software and hardware a run of the book used, for its record."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from attnbook.data.reviews import DATA_DIR_ENV
from attnbook.runtime import cpu_name

__all__ = ["environment"]


def environment() -> dict[str, Any]:
    """Software and hardware of this process: versions, CPU, threads, accelerator."""
    import importlib.metadata as md

    versions = {}
    for pkg in (
        "attnbook",
        "torch",
        "numpy",
        "scipy",
        "pandas",
        "cvxpy",
        "datasets",
        "matplotlib",
        "seaborn",
    ):
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
        "data_source": (
            "local mirror (ATTNBOOK_DATA_DIR)"
            if os.environ.get(DATA_DIR_ENV)
            else "Hugging Face hub"
        ),
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


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None
