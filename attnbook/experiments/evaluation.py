"""Evaluation of the one-layer model on a corpus: loss, accuracy and balanced
accuracy."""

from __future__ import annotations

from typing import Mapping

import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import count_attention_output
from attnbook.models.losses import logistic_loss
from attnbook.validation import ArgumentTypeError, check_outputs_and_labels

__all__ = ["evaluate_binary"]


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
        "loss": float(logistic_loss(f, y, check_input=False)),
        "accuracy": float(correct.double().mean()),
        "balanced_accuracy": float(sum(per_class)) / len(per_class),
    }
