"""Reductions over the rows of a count matrix: per-row sums and maxima of stored
entries, and the shift of every softmax by its row's maximum."""

from __future__ import annotations

import torch

__all__ = ["row_shift", "segment_max", "segment_sum"]


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


def row_shift(
    scores: torch.Tensor, rows: torch.Tensor | None = None, n: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The shift that makes a softmax stable: ``(m, e)`` with ``m`` the largest score
    of every row and ``e = exp(scores - m)`` for every entry, so that each row's largest
    term is 1 (nothing overflows, and no row's sum underflows to zero).

    With ``rows`` (the row of every entry) and ``n`` rows, ``scores`` holds stored
    entries and ``m`` is ``(n,)``; without them, the rows are the last dimension of
    ``scores`` and ``m`` keeps it (size 1). ``m`` carries no gradient: the softmax does
    not depend on it.
    """
    if rows is None:
        m = scores.detach().amax(dim=-1, keepdim=True)
        return m, torch.exp(scores - m)
    if n is None:
        raise ValueError("row_shift: rows given without the number of rows n")
    m = segment_max(scores, rows, n)
    return m, torch.exp(scores - m[rows])
