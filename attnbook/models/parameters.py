"""Parameters of every model: their layouts and the one initializer."""

from __future__ import annotations

from typing import Callable

import torch

from attnbook.validation import check_count, check_float_dtype, check_positive_real

__all__ = ["Layout", "one_layer_layout", "init_parameters"]

#: ``layout(vocab_size, dim, scale)`` -> ``{name: (shape, std)}`` in drawing order
Layout = Callable[[int, int, float], "dict[str, tuple[tuple[int, ...], float]]"]


def one_layer_layout(
    vocab_size: int, dim: int, scale: float
) -> dict[str, tuple[tuple[int, ...], float]]:
    """``E`` (V, d), ``p`` and ``v`` (d,), all with std ``scale / sqrt(d)`` (rows of
    norm about ``scale``)."""
    std = scale / dim**0.5
    return {"E": ((vocab_size, dim), std), "p": ((dim,), std), "v": ((dim,), std)}


def init_parameters(
    vocab_size: int,
    dim: int,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    layout: Layout = one_layer_layout,
    names: tuple[str, ...] | None = None,
    requires_grad: bool = True,
) -> dict[str, torch.Tensor]:
    """The tensors of ``layout`` drawn in its order with i.i.d. ``N(0, std^2)`` entries
    from ``generator`` (``std = 0``: zeros, no draw); only ``names`` where given."""
    vocab_size, dim = check_count(vocab_size, "vocab_size"), check_count(dim, "dim")
    check_positive_real(scale, "scale", "positive and finite")
    check_float_dtype(dtype)
    out = {}
    for name, (shape, std) in layout(vocab_size, dim, scale).items():
        if names is not None and name not in names:
            continue
        if std == 0:
            t = torch.zeros(shape, dtype=dtype)
        else:
            t = torch.randn(shape, generator=generator, dtype=dtype) * std
        out[name] = t.to(device).requires_grad_(requires_grad)
    return out
