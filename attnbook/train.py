"""Full-batch training: parameter initialization and one generic optimisation loop.

Every model in the book is trained by :func:`fit`, which only needs the parameters and a closure
returning the full-batch loss. It records the training loss, optional evaluation metrics, and
stops early when a user rule says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from .counts import TokenCounts
from .losses import logistic_loss
from .model import count_attention_output

__all__ = ["Layout", "one_layer_layout", "init_parameters", "binary_loss_closure", "History", "fit"]


Layout = Callable[[int, int, float], "dict[str, tuple[tuple[int, ...], float]]"]
"""``layout(vocab_size, dim, scale)`` -> ``{name: (shape, std)}``, in the order of drawing."""


def one_layer_layout(vocab_size: int, dim: int, scale: float) -> dict[str, tuple[tuple[int, ...], float]]:
    """The one-layer model: ``E`` (V, d), ``p`` and ``v`` (d,), all with std ``scale / sqrt(d)``,
    so that every row of ``E`` and every vector has norm close to ``scale``."""
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
) -> dict[str, torch.Tensor]:
    """Gaussian initialization of the tensors of ``layout`` (default: the one-layer model).

    The tensors are drawn one after the other, in the layout's order, with i.i.d.
    ``N(0, std^2)`` entries from ``generator``; a tensor with ``std = 0`` is zero and takes no
    draw. ``names`` keeps only those tensors (the others are not drawn either). Every model's
    initializer in attnbook is a layout passed here. Returns leaves with ``requires_grad=True``.
    """
    if vocab_size < 1 or dim < 1:
        raise ValueError(f"vocab_size and dim must be positive, got {vocab_size}, {dim}")
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
        out[name] = t.to(device).requires_grad_(True)
    return out


def binary_loss_closure(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> Callable[[], torch.Tensor]:
    """Closure returning the full-batch logistic loss of the one-layer model on ``counts``."""
    y = labels.to(params["E"].dtype)

    def loss() -> torch.Tensor:
        return logistic_loss(count_attention_output(params["E"], params["p"], params["v"], counts), y)

    return loss


@dataclass
class History:
    """What :func:`fit` recorded: training loss at every step, metrics at evaluation steps."""

    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    stopped_at: int | None = None
    best_step: int | None = None
    best_value: float | None = None
    best_params: dict[str, torch.Tensor] | None = None

    def record(self, step: int, values: Mapping[str, float]) -> None:
        self.eval_steps.append(step)
        for key, value in values.items():
            self.metrics.setdefault(key, []).append(float(value))


def _adam(params: list[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """Adam, in its fused single-kernel form where torch offers it for these tensors (the same
    update, about four times faster on a ``(V, d)`` embedding than the per-operation loop)."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, ValueError):  # device or dtype without a fused kernel
        return torch.optim.Adam(params, lr=lr)


_OPTIMIZERS = {
    "gd": lambda ps, lr: torch.optim.SGD(ps, lr=lr),
    "adam": _adam,
}


def fit(
    params: Mapping[str, torch.Tensor],
    loss_fn: Callable[[], torch.Tensor],
    *,
    steps: int,
    lr: float,
    optimizer: str = "adam",
    trainable: tuple[str, ...] | None = None,
    evaluate: Callable[[], Mapping[str, float]] | None = None,
    eval_every: int = 10,
    stop: Callable[[History], bool] | None = None,
    progress: bool = False,
    keep_best: str | None = None,
) -> History:
    """Minimise ``loss_fn()`` over ``params[trainable]`` with full-batch steps.

    ``optimizer`` is ``"gd"`` (plain gradient descent) or ``"adam"``. ``evaluate`` is called
    (without gradients) at step 0, every ``eval_every`` steps and at the end; ``stop`` is asked
    after each evaluation whether to end early. Parameters are updated in place.

    ``keep_best`` names a metric returned by ``evaluate`` to *minimise* (for example a
    validation loss): at every evaluation where it is strictly lower than before, the history
    stores the step (``best_step``), the value (``best_value``) and detached copies of all
    parameters (``best_params``); the first of equal values is kept. ``params`` still end at
    the last step.
    """
    if steps < 0:
        raise ValueError(f"steps must be non-negative, got {steps}")
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(_OPTIMIZERS)}, got {optimizer!r}")
    if keep_best is not None and evaluate is None:
        raise ValueError("keep_best needs an evaluate function that returns that metric")
    names = tuple(params) if trainable is None else trainable
    unknown = set(names) - set(params)
    if unknown:
        raise ValueError(f"unknown trainable parameters {sorted(unknown)}")
    for name, t in params.items():
        t.requires_grad_(name in names)
    opt = _OPTIMIZERS[optimizer]([params[n] for n in names], lr)
    history = History()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="training", leave=False)

    def run_eval(step: int) -> bool:
        if evaluate is None:
            return False
        with torch.no_grad():
            values = evaluate()
            history.record(step, values)
            if keep_best is not None:
                if keep_best not in values:
                    raise ValueError(f"keep_best={keep_best!r} is not among the evaluated metrics {sorted(values)}")
                value = float(values[keep_best])
                if history.best_value is None or value < history.best_value:
                    history.best_step, history.best_value = step, value
                    history.best_params = {k: t.detach().clone() for k, t in params.items()}
        return bool(stop and stop(history))

    if run_eval(0):
        history.stopped_at = 0
        return history
    for step in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}")
        loss.backward()
        opt.step()
        history.loss.append(float(loss.detach()))
        if bar is not None:
            bar.update(1)
        if step % eval_every == 0 or step == steps:
            if run_eval(step):
                history.stopped_at = step
                break
    if bar is not None:
        bar.close()
    return history
