"""Reductions over the rows of a count matrix: per-row sums and maxima of stored
entries."""

from __future__ import annotations

import torch

__all__ = ["segment_max", "segment_sum"]


def segment_max(values: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Per-row maximum of ``values`` (no gradient: it is only a shift for the
    softmax)."""
    with torch.no_grad():
        out = torch.full((n,), -torch.inf, dtype=values.dtype, device=values.device)
        return out.scatter_reduce_(
            0, rows, values.detach(), reduce="amax", include_self=True
        )


def segment_sum(values: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Per-row sum of ``values`` (``rows`` gives the row of every entry; ``n`` rows)."""
    return torch.zeros(n, dtype=values.dtype, device=values.device).index_add_(
        0, rows, values
    )
