"""Token statistics of a labelled corpus: the average signed frequency."""

from __future__ import annotations

import torch

from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.validation import as_signed_labels

__all__ = ["average_signed_frequency"]


def average_signed_frequency(
    sequences: object, labels: object, vocab_size: int
) -> torch.Tensor:
    """``(V,)`` float64: ``alpha_s = (1/n) sum_i y_i n_s(X_i) / T_i`` (labels +-1)."""
    counts: TokenCounts = as_token_counts(sequences, vocab_size).to("cpu")
    y = as_signed_labels(labels, counts.n_sequences)
    rows = counts.row_ids
    lengths = counts.lengths.to(torch.float64)
    weight = y[rows] * counts.counts.to(torch.float64) / lengths[rows]
    alpha = torch.zeros(vocab_size, dtype=torch.float64).index_add_(
        0, counts.token_ids, weight
    )
    return alpha / counts.n_sequences
