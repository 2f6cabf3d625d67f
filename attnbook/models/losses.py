"""The logistic loss of the book and the accuracy of a binary classifier.

Both take outputs ``f`` (a 1-D float tensor) and labels in {-1, +1} of the same shape,
checked by :func:`attnbook.data.labels.as_signed_labels` (the book's one label policy:
{0, 1} labels are refused).
"""

from __future__ import annotations

import math
import weakref

import torch

from attnbook.data.labels import as_signed_labels
from attnbook.models.parameters import check_finite, check_float_tensor

__all__ = ["logistic_loss", "accuracy", "check_outputs_and_labels"]

# label tensors found to be -1/+1 (by id: a weak reference and the version counter at
# the check; a tensor modified in place gets a new version and is checked again)
_CHECKED: dict[int, tuple[weakref.ref, int]] = {}


def check_outputs_and_labels(f: torch.Tensor, y: object) -> torch.Tensor:
    """Check that ``f`` is a 1-D float tensor and ``y`` holds one label in {-1, +1} per
    entry of ``f`` (same shape when a tensor); return the labels as a tensor of ``f``'s
    dtype on its device."""
    check_float_tensor(f, "f")
    shape = tuple(getattr(y, "shape", (len(y),) if hasattr(y, "__len__") else ()))
    if tuple(f.shape) != shape:
        raise ValueError(
            f"outputs {tuple(f.shape)} and labels {shape} differ in shape: pass one "
            "label per output, both 1-D"
        )
    if f.ndim != 1:
        raise ValueError(f"outputs must be 1-D, got shape {tuple(f.shape)}")
    same_kind = (
        isinstance(y, torch.Tensor) and y.dtype == f.dtype and y.device == f.device
    )
    if same_kind:
        ref, version = _CHECKED.get(id(y), (None, -1))
        if ref is not None and ref() is y and version == y._version:
            return y.detach()  # the labels of a training loop, checked at a former step
        if not bool((y.abs() != 1).any()):
            if len(_CHECKED) > 64:
                _CHECKED.clear()
            _CHECKED[id(y)] = (weakref.ref(y), y._version)
            return y.detach()
    return as_signed_labels(y, f.shape[0], dtype=f.dtype).to(f.device)


def logistic_loss(f: torch.Tensor, y: object) -> torch.Tensor:
    """``mean_i log(1 + exp(-y_i f_i))``, computed stably with softplus.

    Raises ``ValueError`` for outputs and labels of different shapes, labels outside
    {-1, +1} and NaN outputs."""
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
