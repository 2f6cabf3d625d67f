"""The initialization of the one-step lemma and the statistics that compare a step
with it: the Pearson correlation and the value the lemma's noise model predicts."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnbook.models.parameters import init_parameters
from attnbook.validation import check_count, check_finite_real

__all__ = [
    "init_one_step",
    "predicted_pearson",
    "pearson",
]


def init_one_step(
    vocab_size: int,
    dim: int,
    *,
    init_scale: float,
    cls_scale: float = 1.0,
    head_scale: float = 1.0,
    n_classes: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:
    """The lemma's initialization, without gradients: ``E`` with std ``init_scale /
    sqrt(d)``, ``p`` with ``cls_scale / sqrt(d)`` (drawn at unit scale, then
    multiplied), the head ``v`` (d,), or ``W`` (d, K) for ``n_classes = K``, with
    ``head_scale / sqrt(d)``."""
    scales = dict(init_scale=init_scale, head_scale=head_scale, cls_scale=cls_scale)
    for name, value in scales.items():
        check_finite_real(value, name)
    if not init_scale > 0 or not head_scale > 0 or not cls_scale >= 0:
        raise ValueError(
            "init_scale and head_scale must be positive, cls_scale non-negative"
        )
    if n_classes is not None:
        n_classes = check_count(n_classes, "n_classes", minimum=2)
    head = ("v", (dim,)) if n_classes is None else ("W", (dim, int(n_classes)))

    def layout(vocab_size: int, dim: int, scale: float) -> dict:
        return {
            "E": ((vocab_size, dim), scale / dim**0.5),
            "p": ((dim,), 1.0 / dim**0.5),
            head[0]: (head[1], head_scale / dim**0.5),
        }

    out = init_parameters(
        vocab_size,
        dim,
        scale=init_scale,
        generator=generator,
        dtype=dtype,
        device=device,
        layout=layout,
        requires_grad=False,
    )
    out["p"] = out["p"] * cls_scale
    return out


def predicted_pearson(
    prediction: object, init_scale: float, head_norm_sq: float, dim: int
) -> float:
    """The Pearson correlation of ``E^1 . v`` with ``prediction`` when the only noise is
    ``E^0_s . v ~ N(0, init_scale^2 ||v||^2 / d)``: ``sd(pred) / sqrt(sd(pred)^2 +
    init_scale^2 ||v||^2 / d)``."""
    pred = np.asarray(prediction, dtype=np.float64).ravel()
    dim = check_count(dim, "dim")
    if (
        pred.size < 2
        or not np.isfinite(pred).all()
        or not 0 <= init_scale < math.inf
        or not 0 < head_norm_sq < math.inf
    ):
        raise ValueError(
            "need >= 2 finite predictions, finite init_scale >= 0 and head_norm_sq > 0"
        )
    signal = float(pred.std())
    noise = init_scale**2 * head_norm_sq / dim
    return signal / float(np.sqrt(signal**2 + noise))


def pearson(x: object, y: object) -> float:
    """Pearson correlation of two equal-length arrays (flattened)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("pearson needs two arrays of the same length >= 2")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("pearson needs finite values")
    if a.std() == 0 or b.std() == 0:
        raise ValueError("pearson is undefined for a constant array")
    return float(np.corrcoef(a, b)[0, 1])
