"""The logistic loss of the book and the accuracy of a binary classifier, of outputs
``f`` (1-D) and labels in {-1, +1} ({0, 1} labels are refused)."""

from __future__ import annotations

import math

import torch

from attnbook.validation import check_finite, check_outputs_and_labels

__all__ = ["logistic_loss", "accuracy"]


def logistic_loss(
    f: torch.Tensor, y: object, *, check_input: bool = True
) -> torch.Tensor:
    """``mean_i log(1 + exp(-y_i f_i))``, by softplus. Raises ``ValueError`` for bad
    shapes or labels and NaN outputs (``check_input=False``: ``y`` already checked)."""
    if check_input:
        y = check_outputs_and_labels(f, y)
    loss = torch.nn.functional.softplus(-y * f).mean()
    if check_input and not math.isfinite(loss.item()):
        check_finite(f=f)
    return loss


def accuracy(f: torch.Tensor, y: object) -> float:
    """Fraction of sequences with ``sign(f) == y`` (``f = 0`` counts as an error).
    Raises ``ValueError`` for bad shapes or labels and NaN outputs."""
    y = check_outputs_and_labels(f, y)
    if bool(torch.isnan(f).any()):
        raise ValueError("f holds NaN: the accuracy of a NaN output is undefined")
    return float(((f.detach() * y) > 0).double().mean())
