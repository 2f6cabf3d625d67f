"""Evaluation of the one-layer model on a corpus: loss, accuracy, per-document outcomes
and paired comparisons of two models on the same documents."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from scipy.stats import norm

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import count_attention_output
from attnbook.models.losses import logistic_loss_unchecked
from attnbook.validation import ArgumentTypeError, check_outputs_and_labels

__all__ = ["evaluate_binary", "document_outcomes", "paired_mean_difference"]


def _outputs_and_labels(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's outputs on ``counts`` (no gradient) and the checked -1/+1 labels."""
    if not isinstance(params, Mapping) or not {"E", "p", "v"} <= set(params):
        raise ArgumentTypeError("params must be a mapping with keys 'E', 'p' and 'v'")
    with torch.no_grad():
        f = count_attention_output(params["E"], params["p"], params["v"], counts)
    return f, check_outputs_and_labels(f, labels)


def evaluate_binary(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: object
) -> dict[str, float]:
    """Logistic loss, accuracy and balanced accuracy of the one-layer model on
    ``counts`` (a :class:`TokenCounts` over ``E``'s vocabulary) with -1/+1 ``labels``.

    Balanced accuracy is the mean of the accuracies on the positive and on the negative
    sequences, the number to read on an imbalanced corpus (0.5 for a constant
    classifier); when only one class occurs it is the accuracy on that class.
    """
    f, y = _outputs_and_labels(params, counts, labels)
    correct = (f * y) > 0
    pos = y > 0
    per_class = [correct[m].double().mean() for m in (pos, ~pos) if bool(m.any())]
    return {
        "loss": float(logistic_loss_unchecked(f, y)),
        "accuracy": float(correct.double().mean()),
        "balanced_accuracy": float(sum(per_class)) / len(per_class),
    }


def document_outcomes(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: object
) -> dict[str, np.ndarray]:
    """Per-document logistic loss ``log(1 + exp(-y f))`` and correctness (``y f > 0``,
    as 0/1) of the one-layer model, as float64 NumPy arrays (their means are
    :func:`evaluate_binary`'s loss and accuracy); ``labels`` are -1/+1."""
    f, y = _outputs_and_labels(params, counts, labels)
    margin = y * f
    loss = torch.nn.functional.softplus(-margin)
    return {
        "loss": loss.to("cpu", torch.float64).numpy(),
        "correct": (margin > 0).to("cpu", torch.float64).numpy(),
    }


def paired_mean_difference(
    a: object, b: object, level: float = 0.95
) -> dict[str, float]:
    """Mean of ``a - b`` over paired observations (the same test documents under two
    models) with a normal-approximation interval ``mean +- z * sd(a - b) / sqrt(n)``;
    the pairing removes the document-to-document variation the two models share. Returns
    ``estimate``, ``low``, ``high``, ``se`` and ``n``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(
            f"a and b must be 1-D of one length >= 2, got {x.shape} and {y.shape}"
        )
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = x - y
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    z = float(norm.ppf(0.5 + level / 2))
    mean = float(d.mean())
    return {
        "estimate": mean,
        "low": mean - z * se,
        "high": mean + z * se,
        "se": se,
        "n": int(d.size),
    }
