"""Seeding, device and machine: the one place where randomness and hardware are
chosen."""

from __future__ import annotations

import os
import platform
import random

import numpy as np
import torch

__all__ = ["seed_everything", "default_device", "cpu_name"]


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch, ask torch for deterministic kernels, return a NumPy
    generator.

    Every chapter calls this once, through :func:`attnbook.book.chapter.start_chapter`,
    so two runs of a chapter draw the same numbers and the glued values are identical.
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    return np.random.default_rng(seed)


def default_device() -> torch.device:
    """CUDA when a GPU is visible, otherwise the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cpu_name() -> str:
    """The processor's model name (from ``/proc/cpuinfo`` on Linux), or a generic
    name."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"
