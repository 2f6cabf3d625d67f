"""The logistic loss of the book and the accuracy of a binary classifier."""

from __future__ import annotations

import torch

__all__ = ["logistic_loss", "accuracy"]


def logistic_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``mean_i log(1 + exp(-y_i f_i))``, computed stably with softplus."""
    if f.shape != y.shape:
        raise ValueError(
            f"outputs {tuple(f.shape)} and labels {tuple(y.shape)} differ in shape"
        )
    return torch.nn.functional.softplus(-y.to(f.dtype) * f).mean()


def accuracy(f: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of sequences with ``sign(f) == y`` (``f = 0`` counts as an error)."""
    return float(((f * y.to(f.dtype)) > 0).double().mean())
