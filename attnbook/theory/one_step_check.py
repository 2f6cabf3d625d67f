"""The one-step lemma's initialization and the Pearson correlation its noise model
predicts."""

from __future__ import annotations

import math

import numpy as np
import torch

from attnbook.validation import (
    check_count,
    check_finite_real,
    check_float_dtype,
    check_positive_real,
)

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
    """``E``, ``p`` and ``v`` (or ``W`` (d, K) for ``n_classes = K``) with stds
    ``init_scale``, ``cls_scale`` and ``head_scale`` over ``sqrt(d)``, no gradients."""
    check_positive_real(init_scale, "init_scale")
    check_positive_real(head_scale, "head_scale")
    if check_finite_real(cls_scale, "cls_scale") < 0:
        raise ValueError(f"cls_scale must be non-negative, got {cls_scale}")
    V, d = check_count(vocab_size, "vocab_size"), check_count(dim, "dim")
    check_float_dtype(dtype)
    head = ("v", (d,), head_scale)
    if n_classes is not None:
        head = ("W", (d, check_count(n_classes, "n_classes", minimum=2)), head_scale)
    out = {}
    for name, shape, scale in (("E", (V, d), init_scale), ("p", (d,), 1.0), head):
        draw = torch.randn(shape, generator=generator, dtype=dtype) * (scale / d**0.5)
        out[name] = draw.to(device)
    out["p"] = out["p"] * cls_scale
    return out


def predicted_pearson(
    prediction: object, init_scale: float, head_norm_sq: float, dim: int
) -> float:
    """The Pearson correlation of ``E^1 . v`` with ``prediction`` when the only noise is
    ``E^0_s . v ~ N(0, init_scale^2 ||v||^2 / d)``."""
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
