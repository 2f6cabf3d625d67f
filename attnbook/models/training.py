"""Full-batch training: :func:`fit`, the one loop every model of the book is trained
by, from its parameters and a closure returning the full-batch loss."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from attnbook.engine.counts import TokenCounts, check_counts
from attnbook.engine.fused import torch_optimizer
from attnbook.models.attention import count_heads_output
from attnbook.models.losses import logistic_loss
from attnbook.validation import (
    ArgumentTypeError,
    as_signed_labels,
    check_count,
    check_parameter_dict,
    check_positive_real,
)

__all__ = ["OPTIMIZERS", "training_step", "binary_loss_closure", "History", "fit"]


def binary_loss_closure(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> Callable[[], torch.Tensor]:
    """Closure returning the full-batch logistic loss of the one-layer model ``params``
    (``E``, ``p``, ``v``) on ``counts`` with -1/+1 ``labels``, all checked once, here;
    it reads ``params`` afresh at every call."""
    check_parameter_dict(params, lambda d: {"p": (d,), "v": (d,)}, "one-layer")
    E = params["E"]
    counts = check_counts(counts, E.shape[0]).to(E.device)
    y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)

    def loss() -> torch.Tensor:
        E, p, v = params["E"], params["p"], params["v"]
        f = count_heads_output(E, p, v[:, None], counts, check_input=False)[:, 0]
        return logistic_loss(f, y, check_input=False)

    return loss


@dataclass
class History:
    """What :func:`fit` recorded: the loss of every step, metrics at evaluations."""

    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)

    def record(self, step: int, values: Mapping[str, float]) -> None:
        self.eval_steps.append(step)
        for key, value in values.items():
            self.metrics.setdefault(key, []).append(float(value))


#: Optimizers by name: ``factory(list_of_tensors, lr)``; Adam in torch's fused form.
OPTIMIZERS = {
    "gd": lambda ps, lr: torch.optim.SGD(ps, lr=lr),
    "adam": lambda ps, lr: torch_optimizer("adam", [{"params": ps, "lr": lr}]),
}


def training_step(
    opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor], step: int
) -> torch.Tensor:
    """One full-batch step: drop the old gradients, evaluate ``loss_fn()``, refuse a
    non-finite loss (``FloatingPointError`` naming ``step``), backpropagate and update;
    returns the loss before the update, detached."""
    opt.zero_grad(set_to_none=True)
    loss = loss_fn()
    if not torch.isfinite(loss):
        raise FloatingPointError(f"loss became {loss.item()} at step {step}")
    loss.backward()
    opt.step()
    return loss.detach()


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
) -> History:
    """Minimise ``loss_fn()`` over ``params[trainable]`` (in place) by full-batch
    ``"gd"`` or ``"adam"`` steps; ``evaluate()`` (no gradients) at step 0, every
    ``eval_every`` steps and at the end."""
    steps = check_count(steps, "steps", minimum=0)
    eval_every = check_count(eval_every, "eval_every")
    check_positive_real(lr, "lr")
    if not callable(loss_fn) or not (evaluate is None or callable(evaluate)):
        raise ArgumentTypeError("loss_fn (and evaluate, where given) must be callable")
    if not isinstance(params, Mapping) or not params:
        raise ArgumentTypeError(
            "params must be a non-empty mapping of names to tensors"
        )
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ValueError(
            f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}"
        )
    if trainable is not None and (
        not isinstance(trainable, (tuple, list))
        or not all(isinstance(n, str) for n in trainable)
    ):
        raise ArgumentTypeError(
            "trainable must be a tuple of parameter names, e.g. ('E', 'p'), got "
            f"{trainable!r}"
        )
    names = tuple(params) if trainable is None else tuple(trainable)
    if not names or set(names) - set(params):
        raise ValueError(f"unknown trainable parameters {names!r} of {sorted(params)}")
    for name, t in params.items():
        if not isinstance(t, torch.Tensor) or not t.is_leaf:
            raise ArgumentTypeError(f"params[{name!r}] must be a leaf torch tensor")
        if name in names and not t.dtype.is_floating_point:
            raise ArgumentTypeError(
                f"params[{name!r}] has dtype {t.dtype}; a trained tensor must be float"
            )
    for name, t in params.items():
        t.requires_grad_(name in names)
    opt = OPTIMIZERS[optimizer]([params[n] for n in names], lr)
    history = History()

    def run_eval(step: int) -> None:
        if evaluate is not None:
            with torch.no_grad():
                history.record(step, evaluate())

    run_eval(0)
    for step in range(1, steps + 1):
        history.loss.append(float(training_step(opt, loss_fn, step)))
        if step % eval_every == 0 or step == steps:
            run_eval(step)
    return history
