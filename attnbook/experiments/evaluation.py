"""Evaluation of the one-layer model on a corpus: loss, accuracy and balanced
accuracy."""

from __future__ import annotations

from typing import Mapping

import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.validation import check_outputs_and_labels

__all__ = ["evaluate_binary"]


def evaluate_binary(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: object
) -> dict[str, float]:
    """Logistic loss, accuracy and balanced accuracy (the mean of the per-class
    accuracies present) of the one-layer model on ``counts`` with -1/+1 ``labels``."""
    with torch.no_grad():
        f = attention_output(params["E"], params["p"], params["v"], counts)
    y = check_outputs_and_labels(f, labels)
    correct = (f * y) > 0
    pos = y > 0
    per_class = [correct[m].double().mean() for m in (pos, ~pos) if bool(m.any())]
    return {
        "loss": float(logistic_loss(f, y, check_input=False)),
        "accuracy": float(correct.double().mean()),
        "balanced_accuracy": float(sum(per_class)) / len(per_class),
    }
