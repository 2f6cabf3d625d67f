"""The K-class one-layer model ``f_k(X) = sum_s pi_s(X) (E_s . v_k)``, head ``W = [v_1,
..., v_K]`` (d, K), and the cross-entropy loss."""

from __future__ import annotations

import numpy as np
import torch

from attnbook.engine.counts import token_counts_over
from attnbook.models.attention import count_heads_output
from attnbook.validation import (
    ArgumentTypeError,
    check_count,
    check_finite,
    check_float_tensor,
    check_head_matrix,
    check_parameters,
)


def multiclass_layout(
    vocab_size: int, dim: int, scale: float, *, n_classes: int
) -> dict[str, tuple[tuple[int, ...], float]]:
    """``E`` (V, d), ``p`` (d,), ``W`` (d, K), all with std ``scale / sqrt(d)``."""
    check_count(n_classes, "n_classes", minimum=2)
    std = scale / dim**0.5
    return {
        "E": ((vocab_size, dim), std),
        "p": ((dim,), std),
        "W": ((dim, int(n_classes)), std),
    }


def multiclass_output(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``(n, K)`` class scores ``f_k(X_i)`` by the count engine."""
    check_head_matrix(W, E)
    check_parameters(E, p, W[:, 0])
    counts = token_counts_over(sequences, E.shape[0]).to(E.device)
    return count_heads_output(E, p, W, counts, check_input=False)  # two products/grad


def as_class_labels(
    labels: object, n_classes: int, n: int | None = None
) -> torch.Tensor:
    """Labels as int64 after checking they lie in ``{0, ..., n_classes - 1}``."""
    n_classes = check_count(n_classes, "n_classes", minimum=2)
    tensor = isinstance(labels, torch.Tensor)
    y = labels.detach().cpu().numpy() if tensor else np.asarray(labels)
    if y.dtype.kind not in "iu" or y.ndim != 1 or y.size == 0:
        raise ArgumentTypeError(
            f"labels must be a non-empty 1-D array of integer class ids, got dtype "
            f"{y.dtype} and shape {y.shape}"
        )
    if n is not None and y.size != n:
        raise ValueError(f"{y.size} labels for {n} sequences: lengths must match")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= n_classes:
        raise ValueError(f"class ids must lie in [0, {n_classes}), found {lo}..{hi}")
    return torch.from_numpy(y.astype(np.int64))


def cross_entropy_loss(
    scores: torch.Tensor, labels: torch.Tensor, *, check_input: bool = True
) -> torch.Tensor:
    """Mean cross-entropy of ``(n, K)`` scores against class ids (``check_input=False``:
    int64 ids already checked, on the device of ``scores``)."""
    if not check_input:
        return torch.nn.functional.cross_entropy(scores, labels)
    check_float_tensor(scores, "scores")
    if scores.ndim != 2 or scores.shape[1] < 2 or scores.shape[0] == 0:
        raise ValueError(
            f"scores must have shape (n, K) with n >= 1, K >= 2, got "
            f"{tuple(scores.shape)}"
        )
    y = as_class_labels(labels, scores.shape[1], scores.shape[0])
    loss = torch.nn.functional.cross_entropy(scores, y.to(scores.device))
    if not bool(torch.isfinite(loss)):
        check_finite(scores=scores)
    return loss
