"""Parameters of every model: the checks on them, their layouts and the one
initializer."""

from __future__ import annotations

from typing import Callable

import torch

__all__ = [
    "FLOAT_DTYPES",
    "check_parameters",
    "check_parameter_dict",
    "Layout",
    "one_layer_layout",
    "init_parameters",
]

FLOAT_DTYPES = (torch.float32, torch.float64)


def check_parameters(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``E`` is (V, d) and ``p``, ``v`` are (d,) float
    tensors of one dtype (float32 or float64) on one device."""
    for name, t in (("E", E), ("p", p), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if t.dtype not in FLOAT_DTYPES:
            raise ValueError(
                f"{name} has dtype {t.dtype}; use torch.float32 or torch.float64"
            )
    if E.ndim != 2 or E.shape[0] == 0 or E.shape[1] == 0:
        raise ValueError(
            f"E must have shape (V, d) with V, d > 0, got {tuple(E.shape)}"
        )
    d = E.shape[1]
    for name, t in (("p", p), ("v", v)):
        if t.shape != (d,):
            raise ValueError(
                f"{name} must have shape ({d},) to match E, got {tuple(t.shape)}"
            )
    if not (E.dtype == p.dtype == v.dtype):
        raise ValueError(
            f"E, p, v must share one dtype, got {E.dtype}, {p.dtype}, {v.dtype}"
        )
    if not (E.device == p.device == v.device):
        raise ValueError(
            f"E, p, v must be on one device, got {E.device}, {p.device}, {v.device}"
        )


def check_parameter_dict(
    params: dict[str, torch.Tensor],
    shapes: Callable[[int], dict[str, tuple[int, ...]]],
    model: str,
) -> None:
    """Raise ``ValueError`` unless ``params`` holds a float32/float64 ``E`` of shape (V,
    d) and, for every ``name, shape`` in ``shapes(d)``, a tensor of that shape with
    ``E``'s dtype and device. ``model`` names the model in the messages (``"MLP-head"``,
    ``"two-layer"``)."""
    missing = [k for k in ("E", *shapes(1)) if k not in params]
    if missing:
        raise ValueError(
            f"{model} parameters lack {missing}; expected {['E', *shapes(1)]}"
        )
    E = params["E"]
    if not isinstance(E, torch.Tensor) or E.ndim != 2 or min(E.shape) == 0:
        raise ValueError("E must be a (V, d) tensor with V, d > 0")
    if E.dtype not in FLOAT_DTYPES:
        raise ValueError(f"E has dtype {E.dtype}; use torch.float32 or torch.float64")
    for name, shape in shapes(E.shape[1]).items():
        t = params[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape {shape} to match E, got {got}")
        if t.dtype != E.dtype or t.device != E.device:
            raise ValueError(
                f"{name} must share E's dtype ({E.dtype}) and device ({E.device})"
            )


Layout = Callable[[int, int, float], "dict[str, tuple[tuple[int, ...], float]]"]
"""``layout(vocab_size, dim, scale)`` -> ``{name: (shape, std)}``, in the order of
drawing."""


def one_layer_layout(
    vocab_size: int, dim: int, scale: float
) -> dict[str, tuple[tuple[int, ...], float]]:
    """The one-layer model: ``E`` (V, d), ``p`` and ``v`` (d,), all with std ``scale /
    sqrt(d)``, so that every row of ``E`` and every vector has norm close to
    ``scale``."""
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
    """Gaussian initialization of the tensors of ``layout`` (default: the one-layer
    model).

    The tensors are drawn one after the other, in the layout's order, with i.i.d. ``N(0,
    std^2)`` entries from ``generator``; a tensor with ``std = 0`` is zero and takes no
    draw. ``names`` keeps only those tensors (the others are not drawn either). Every
    model's initializer in attnbook is a layout passed here. Returns leaves (with
    ``requires_grad`` set as asked).
    """
    if vocab_size < 1 or dim < 1:
        raise ValueError(
            f"vocab_size and dim must be positive, got {vocab_size}, {dim}"
        )
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
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
