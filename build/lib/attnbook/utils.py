"""Seeding and device selection: the one place where randomness and hardware are chosen."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["seed_everything", "default_device", "set_threads"]


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch, ask torch for deterministic kernels, return a NumPy generator.

    Every chapter calls this once in its first code cell, so two runs of a chapter draw the same
    numbers and the glued values are identical.
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    from .report import note_seed

    note_seed(seed)  # the chapter's record lists its seeds
    return np.random.default_rng(seed)


def default_device() -> torch.device:
    """CUDA when a GPU is visible, otherwise the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count (all cores when ``n`` is None); return the count in use."""
    if n is not None:
        if n < 1:
            raise ValueError(f"thread count must be at least 1, got {n}")
        torch.set_num_threads(n)
    return torch.get_num_threads()
