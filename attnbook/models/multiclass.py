"""The K-class version of the one-layer model.

    f_k(X) = sum_s pi_s(X) (E_s . v_k),   pi_s(X) = n_s(X) exp(p . E_s) / sum_t n_t(X)
    exp(p . E_t)

with a head matrix ``W = [v_1, ..., v_K]`` of shape ``(d, K)`` and the cross-entropy
loss ``-(1/n) sum_i log softmax(f(X_i))_{y_i}`` for labels ``y_i in {0, ..., K-1}``.
"""

from __future__ import annotations

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.engine.segments import segment_max
from attnbook.models.attention import count_heads_output
from attnbook.models.parameters import check_parameters

__all__ = [
    "multiclass_layout",
    "multiclass_output",
    "as_class_labels",
    "cross_entropy_loss",
]


def multiclass_layout(
    vocab_size: int, dim: int, scale: float, *, n_classes: int
) -> dict[str, tuple[tuple[int, ...], float]]:
    """The K-class model: ``E`` (V, d), ``p`` (d,) and ``W`` (d, K), all with std
    ``scale / sqrt(d)`` (a layout for
    :func:`attnbook.models.parameters.init_parameters`)."""
    if n_classes < 2:
        raise ValueError(f"n_classes must be at least 2, got {n_classes}")
    std = scale / dim**0.5
    return {
        "E": ((vocab_size, dim), std),
        "p": ((dim,), std),
        "W": ((dim, int(n_classes)), std),
    }


def multiclass_output(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``(n, K)`` class scores ``f_k(X_i)`` by the count engine (one fused pass ``E @
    [p, W]``)."""
    if not isinstance(W, torch.Tensor) or W.ndim != 2:
        raise ValueError("W must be a (d, K) tensor")
    check_parameters(E, p, W[:, 0])
    if W.shape[0] != E.shape[1] or W.dtype != E.dtype or W.device != E.device:
        raise ValueError(f"W must be ({E.shape[1]}, K) with E's dtype and device")
    counts: TokenCounts = as_token_counts(sequences, E.shape[0]).to(E.device)
    out = count_heads_output(E, p, W, counts)  # two sparse products per gradient
    if out is not None:
        return out
    return _multiclass_row_shift(E, p, W, counts)


def _multiclass_row_shift(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """The same scores with a per-row max shift (for very large ``||p||``)."""
    scores = E @ torch.cat((p[:, None], W), dim=1)  # (V, 1 + K)
    a_tok = scores[counts.token_ids, 0]
    b_tok = scores[counts.token_ids, 1:]
    rows = counts.row_ids
    n = counts.n_sequences
    shift = segment_max(a_tok, rows, n)
    w = counts.counts.to(E.dtype) * torch.exp(a_tok - shift[rows])
    den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add(0, rows, w)
    num = torch.zeros(n, W.shape[1], dtype=E.dtype, device=E.device).index_add(
        0, rows, w[:, None] * b_tok
    )
    return num / den[:, None]


def as_class_labels(
    labels: object, n_classes: int, n: int | None = None
) -> torch.Tensor:
    """Labels as an int64 tensor after checking they lie in ``{0, ..., n_classes -
    1}``."""
    y = (
        labels.detach().cpu()
        if isinstance(labels, torch.Tensor)
        else torch.from_numpy(np.asarray(labels))
    )
    if (
        y.dtype.is_floating_point
        or y.dtype == torch.bool
        or y.ndim != 1
        or y.numel() == 0
    ):
        raise ValueError("labels must be a non-empty 1-D array of integer class ids")
    if n is not None and y.numel() != n:
        raise ValueError(f"{y.numel()} labels for {n} sequences: lengths must match")
    if int(y.min()) < 0 or int(y.max()) >= n_classes:
        raise ValueError(
            f"class ids must lie in [0, {n_classes}), found "
            f"{int(y.min())}..{int(y.max())}"
        )
    return y.to(torch.int64)


def cross_entropy_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``(n, K)`` scores against class ids."""
    return torch.nn.functional.cross_entropy(scores, labels.to(scores.device))
