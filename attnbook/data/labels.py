"""The one label policy of the book.

Binary labels are -1 or +1 everywhere in attnbook. Data sets that store 0/1 are
converted once, where they are loaded (:func:`signed_from_binary`); every loss,
statistic and experiment checks its labels with :func:`as_signed_labels`, which refuses
anything but -1/+1.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["as_signed_labels", "signed_from_binary"]


def as_signed_labels(
    labels: object, n: int | None = None, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Labels as a float tensor of +-1, after checking they are all in {-1, +1}.

    ``n``, when given, is the number of sequences the labels must match. Labels in {0,
    1} are refused on purpose: convert them with ``2 * label - 1`` where the data is
    loaded.
    """
    if isinstance(labels, torch.Tensor):
        y = labels.detach()
    else:
        arr = np.asarray(labels)
        if arr.dtype == object or arr.dtype.kind not in "iuf":
            raise ValueError(
                f"labels must be numbers in {{-1, +1}}, got dtype {arr.dtype}"
            )
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


def signed_from_binary(labels01: object, what: str = "labels") -> np.ndarray:
    """0/1 labels (negative/positive) as an int64 array of -1/+1: the one conversion,
    made where a data set is loaded. ``what`` names the labels in the error messages."""
    arr = np.asarray(labels01)
    if arr.ndim != 1 or arr.dtype.kind not in "iub":
        raise ValueError(f"{what} must be a 1-D integer array of 0/1 labels")
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][0]
        raise ValueError(f"{what} must be 0 (negative) or 1 (positive); found {bad!r}")
    return (2 * arr.astype(np.int64) - 1).astype(np.int64)
