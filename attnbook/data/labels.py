"""The one label policy of the book.

Binary labels are -1 or +1 everywhere in attnbook. Data sets that store 0/1 are
converted once, where they are loaded (:func:`signed_from_binary`); every loss,
statistic and experiment checks its labels with :func:`as_signed_labels` (defined in
:mod:`attnbook.validation` with the other argument checks), which refuses anything but
-1/+1.
"""

from __future__ import annotations

import numpy as np

from attnbook.validation import as_signed_labels

__all__ = ["as_signed_labels", "signed_from_binary"]


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
