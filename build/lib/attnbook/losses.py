"""The logistic loss of the book and the checks on labels."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["as_signed_labels", "logistic_loss", "accuracy"]


def as_signed_labels(
    labels: object, n: int | None = None, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Labels as a float tensor of +-1, after checking they are all in {-1, +1}.

    ``n``, when given, is the number of sequences the labels must match. Labels in {0, 1} are
    refused on purpose: convert them with ``2 * label - 1`` where the data is loaded.
    """
    if isinstance(labels, torch.Tensor):
        y = labels.detach()
    else:
        arr = np.asarray(labels)
        if arr.dtype == object or arr.dtype.kind not in "iuf":
            raise ValueError(f"labels must be numbers in {{-1, +1}}, got dtype {arr.dtype}")
        y = torch.from_numpy(arr.astype(np.float64))
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {tuple(y.shape)}")
    if y.numel() == 0:
        raise ValueError("labels are empty")
    if n is not None and y.numel() != n:
        raise ValueError(f"{y.numel()} labels for {n} sequences: lengths must match")
    bad = (y != 1) & (y != -1)
    if bool(bad.any()):
        raise ValueError(
            f"labels must be -1 or +1; found {y[bad][0].item()!r} "
            "(map {0, 1} labels with 2*y - 1)"
        )
    return y.to(dtype)


def logistic_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``mean_i log(1 + exp(-y_i f_i))``, computed stably with softplus."""
    if f.shape != y.shape:
        raise ValueError(f"outputs {tuple(f.shape)} and labels {tuple(y.shape)} differ in shape")
    return torch.nn.functional.softplus(-y.to(f.dtype) * f).mean()


def accuracy(f: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of sequences with ``sign(f) == y`` (``f = 0`` counts as an error)."""
    return float(((f * y.to(f.dtype)) > 0).double().mean())
