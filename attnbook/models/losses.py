"""The logistic loss of the book and the accuracy of a binary classifier.

Both take outputs ``f`` (a 1-D float tensor) and labels in {-1, +1} of the same shape,
checked once per call by :func:`attnbook.validation.check_outputs_and_labels` (the
book's one label policy: {0, 1} labels are refused). A training loop checks its labels
once, when it is built, and then calls ``logistic_loss(f, y, check_input=False)`` at
every step.
"""

from __future__ import annotations

import math

import torch

from attnbook.validation import check_finite, check_outputs_and_labels

__all__ = ["logistic_loss", "accuracy"]


def logistic_loss(
    f: torch.Tensor, y: object, *, check_input: bool = True
) -> torch.Tensor:
    """``mean_i log(1 + exp(-y_i f_i))``, computed stably with softplus.

    Raises ``ValueError`` for outputs and labels of different shapes, labels outside
    {-1, +1} and NaN outputs. ``check_input=False`` skips every check, for labels
    already checked (``y`` of ``f``'s shape, dtype and device, -1/+1)."""
    if not check_input:
        return torch.nn.functional.softplus(-y * f).mean()
    y = check_outputs_and_labels(f, y)
    loss = torch.nn.functional.softplus(-y * f).mean()
    if not math.isfinite(loss.item()):
        check_finite(f=f)
    return loss


def accuracy(f: torch.Tensor, y: object) -> float:
    """Fraction of sequences with ``sign(f) == y`` (``f = 0`` counts as an error).

    Raises ``ValueError`` for outputs and labels of different shapes (``(n,)`` against
    ``(n, 1)`` would otherwise broadcast), labels outside {-1, +1} and NaN outputs."""
    y = check_outputs_and_labels(f, y)
    if bool(torch.isnan(f).any()):
        raise ValueError("f holds NaN: the accuracy of a NaN output is undefined")
    return float(((f.detach() * y) > 0).double().mean())
