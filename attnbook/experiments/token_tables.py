"""Token tables and example documents of a trained review model.

:func:`top_tokens` lists the tokens with the largest or smallest per-token values;
:func:`pick_examples` chooses short documents worth showing with their attention.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from attnbook.data.corpus import ReviewCorpus

__all__ = ["top_tokens", "pick_examples"]


def top_tokens(
    corpus: ReviewCorpus,
    values: np.ndarray,
    k: int = 10,
    *,
    largest: bool = True,
    extra: Mapping[str, np.ndarray] | None = None,
    min_documents: int = 1,
) -> pd.DataFrame:
    """The ``k`` tokens with the largest (or smallest) ``values`` among those in at
    least ``min_documents`` training documents, with their training document frequency
    and any ``extra`` per-token columns (for example the importance)."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (corpus.vocab_size,):
        raise ValueError(
            f"values must have shape ({corpus.vocab_size},), got {values.shape}"
        )
    if not 1 <= k <= corpus.vocab_size:
        raise ValueError(f"k must be in [1, {corpus.vocab_size}], got {k}")
    eligible = corpus.vocabulary.document_frequency >= min_documents
    if eligible.sum() < k:
        raise ValueError(
            f"fewer than {k} tokens occur in {min_documents} or more documents"
        )
    order = np.argsort(-values if largest else values, kind="stable")
    order = order[eligible[order]][:k]
    table = {
        "token": [corpus.vocabulary.tokens[i] for i in order],
        "value": values[order],
        "documents": corpus.vocabulary.document_frequency[order],
    }
    for name, col in (extra or {}).items():
        table[name] = np.asarray(col)[order]
    return pd.DataFrame(table)


def pick_examples(
    outputs: np.ndarray, labels: np.ndarray, lengths: np.ndarray, max_length: int = 80
) -> dict[str, int]:
    """Rows of three instructive short documents (at most ``max_length`` tokens): the
    most confidently correct positive, the most confidently correct negative, and the
    most confidently misclassified one. ``outputs`` are the model outputs ``f``,
    ``labels`` +-1."""
    f = np.asarray(outputs, dtype=np.float64)
    y = np.asarray(labels)
    short = np.asarray(lengths) <= max_length
    margin = y * f
    picks = {}
    for name, mask, score in (
        ("positive", short & (y == 1) & (margin > 0), margin),
        ("negative", short & (y == -1) & (margin > 0), margin),
        ("misclassified", short & (margin < 0), -margin),
    ):
        if not mask.any():
            raise ValueError(
                f"no short document qualifies as {name!r}; raise max_length"
            )
        rows = np.flatnonzero(mask)
        picks[name] = int(rows[np.argmax(score[rows])])
    return picks
