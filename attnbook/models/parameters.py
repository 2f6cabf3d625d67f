"""Parameters of every model: the checks on them, their layouts and the one
initializer."""

from __future__ import annotations

import math
from typing import Callable, Mapping

import torch

from attnbook.engine.counts import ArgumentTypeError, check_count

__all__ = [
    "FLOAT_DTYPES",
    "ArgumentTypeError",
    "check_finite",
    "check_finite_scores",
    "check_float_tensor",
    "check_head_matrix",
    "check_parameters",
    "check_parameter_dict",
    "Layout",
    "one_layer_layout",
    "init_parameters",
]

FLOAT_DTYPES = (torch.float32, torch.float64)


def check_float_tensor(t: object, name: str) -> torch.Tensor:
    """``t`` if it is a float32 or float64 torch tensor; raise
    :class:`ArgumentTypeError` naming it otherwise."""
    if not isinstance(t, torch.Tensor):
        raise ArgumentTypeError(
            f"{name} must be a torch tensor, got {type(t).__name__}"
        )
    if t.dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(
            f"{name} has dtype {t.dtype}; use torch.float32 or torch.float64"
        )
    if t.layout != torch.strided:
        raise ArgumentTypeError(f"{name} must be a dense tensor, got layout {t.layout}")
    return t


def check_finite(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the first of ``tensors`` (given by keyword) that
    holds NaN or infinity (one pass over each)."""
    for name, t in tensors.items():
        bad = ~torch.isfinite(t.detach())
        if bool(bad.any()):
            n_nan = int(torch.isnan(t.detach()).sum())
            raise ValueError(
                f"{name} holds {int(bad.sum())} non-finite value(s) ({n_nan} NaN); "
                "every entry must be finite"
            )


def check_finite_scores(scores: torch.Tensor, **inputs: torch.Tensor) -> None:
    """Raise ``ValueError`` when ``scores``, computed from ``inputs`` (by keyword), hold
    NaN or infinity: naming the input that does, or saying that the scores overflow.

    A model's scores ``E @ p`` touch every entry of ``E``, so checking them (a ``(V,)``
    array) finds a NaN or infinity in ``E`` without a pass over ``E`` itself."""
    if bool(torch.isfinite(scores).all()):
        return
    check_finite(**inputs)
    raise ValueError(
        f"the scores computed from {', '.join(inputs)} overflow the range of "
        f"{scores.dtype}; rescale them"
    )


def check_head_matrix(W: object, E: torch.Tensor) -> None:
    """Raise unless ``W`` is a ``(d, K)`` float tensor, ``K >= 1``, with ``E``'s
    ``d``, dtype and device (``E`` itself is checked by :func:`check_parameters`)."""
    check_float_tensor(W, "W")
    if W.ndim != 2 or W.shape[1] == 0:
        raise ValueError(f"W must be a (d, K) tensor with K >= 1, got {tuple(W.shape)}")
    if isinstance(E, torch.Tensor) and E.ndim == 2 and W.shape[0] != E.shape[1]:
        raise ValueError(
            f"W must have shape ({E.shape[1]}, K) to match E, got {tuple(W.shape)}"
        )


def check_parameters(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``E`` is (V, d) and ``p``, ``v`` are (d,) float
    tensors of one dtype (float32 or float64) on one device (a wrong type or dtype
    raises :class:`ArgumentTypeError`, also a ``TypeError``)."""
    for name, t in (("E", E), ("p", p), ("v", v)):
        check_float_tensor(t, name)
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
    if not isinstance(params, Mapping):
        raise ArgumentTypeError(
            f"{model} parameters must be a mapping of names to tensors, got "
            f"{type(params).__name__}"
        )
    missing = [k for k in ("E", *shapes(1)) if k not in params]
    if missing:
        raise ValueError(
            f"{model} parameters lack {missing}; expected {['E', *shapes(1)]}"
        )
    E = check_float_tensor(params["E"], "E")
    if E.ndim != 2 or min(E.shape) == 0:
        raise ValueError("E must be a (V, d) tensor with V, d > 0")
    for name, shape in shapes(E.shape[1]).items():
        t = check_float_tensor(params[name], name)
        if tuple(t.shape) != shape:
            raise ValueError(
                f"{name} must have shape {shape} to match E, got {tuple(t.shape)}"
            )
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
    vocab_size, dim = check_count(vocab_size, "vocab_size"), check_count(dim, "dim")
    if not isinstance(scale, (int, float)) or not (0 < scale < math.inf):
        raise ValueError(f"scale must be positive and finite, got {scale!r}")
    if dtype not in FLOAT_DTYPES:
        raise ArgumentTypeError(
            f"dtype must be torch.float32 or torch.float64, got {dtype}"
        )
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
