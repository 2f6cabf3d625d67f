"""Timing on any device: minima over repetitions, the copy bandwidth and the bytes a
gradient must move."""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from attnbook.engine.counts import TokenCounts

__all__ = ["sync", "time_min", "copy_bandwidth", "minimum_bytes", "cache_evictor"]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_min(
    fn: Callable[[], object],
    repeats: int = 5,
    device: torch.device | None = None,
    warmup: int = 1,
    before: Callable[[], object] | None = None,
) -> float:
    """The minimum wall time of ``fn()`` in seconds over ``repeats`` calls (after
    ``warmup``); ``before()``, when given, runs untimed before every call."""
    if repeats < 1:
        raise ValueError(f"repeats must be positive, got {repeats}")
    device = torch.device("cpu") if device is None else device
    for _ in range(warmup):
        fn()
    sync(device)
    best = math.inf
    for _ in range(repeats):
        if before is not None:
            before()
            sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def copy_bandwidth(
    device: torch.device | str | None = None, nbytes: int = 2**28, repeats: int = 10
) -> float:
    """Memory bandwidth in bytes per second: copying ``nbytes`` reads and writes ``2
    nbytes``.

    The buffers are allocated and touched first, so the copy measures memory traffic
    only.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)
    seconds = time_min(lambda: dst.copy_(src), repeats, device)
    return 2 * src.numel() * 4 / seconds


def minimum_bytes(
    counts: TokenCounts, dim: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes a full-batch gradient evaluation must move at the very least.

    The counts are read once in the compact form the engine uses (32-bit row pointers
    and token ids, one float per count), ``E`` is read once and its gradient written
    once. The real engine reads ``E`` twice (scores, then ``E^T`` times the token
    gradients) and the counts twice (forward and backward), so this bound is not
    reachable by it; it is the floor.
    """
    item = torch.finfo(dtype).bits // 8
    counts_bytes = 4 * (counts.n_sequences + 1) + (4 + item) * counts.nnz
    return counts_bytes + 2 * counts.vocab_size * dim * item


def cache_evictor(device: torch.device, nbytes: int = 2**28) -> Callable[[], object]:
    """A function that reads ``nbytes`` of other memory, so that the next pass starts
    with nothing of its own in the CPU caches (as in a training step, where the passes
    in between move far more than the caches hold)."""
    junk = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    return lambda: junk.sum()
