"""Seeding, device and machine: where randomness and hardware are chosen."""

from __future__ import annotations

import os
import platform
import random
import sys

import numpy as np
import torch

DEVICE_ENV = "ATTNBOOK_DEVICE"  # ``cpu`` or ``cuda`` for every workload


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch, require deterministic kernels (an operation
    without one raises), return a NumPy generator."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    _require_deterministic_kernels()
    return np.random.default_rng(seed)


def _require_deterministic_kernels() -> None:
    """``torch.use_deterministic_algorithms(True)``, which imports TorchInductor (two
    seconds) to set its flag too: where Inductor is not loaded yet, its public twin
    ``torch.set_deterministic_debug_mode("error")`` sets torch's flag, and Inductor
    reads its own from ``TORCHINDUCTOR_DETERMINISTIC`` when it is imported."""
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(True)
        return
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"
    torch.set_deterministic_debug_mode("error")


def default_device() -> torch.device:
    """CUDA when a GPU is visible, otherwise the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_for(workload: str) -> torch.device:
    """The CPU for ``"synthetic"``, :func:`default_device` for ``"real"``;
    ``ATTNBOOK_DEVICE`` overrides both."""
    if workload not in ("real", "synthetic"):
        raise ValueError(f"workload must be 'real' or 'synthetic', got {workload!r}")
    forced = os.environ.get(DEVICE_ENV, "").strip().lower()
    if forced:
        if forced not in ("cpu", "cuda"):
            raise ValueError(f"{DEVICE_ENV} must be 'cpu' or 'cuda', got {forced!r}")
        if forced == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"{DEVICE_ENV}=cuda, but torch sees no CUDA device")
        return torch.device(forced)
    return torch.device("cpu") if workload == "synthetic" else default_device()


def cpu_name() -> str:
    """The processor's model name (from ``/proc/cpuinfo`` on Linux)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"
