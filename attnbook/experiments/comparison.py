"""Several binary models trained under one protocol and compared on held-out data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from attnbook.models.losses import accuracy, logistic_loss
from attnbook.models.training import fit

__all__ = ["BinaryModel", "ComparisonResult", "train_binary_models"]


@dataclass(frozen=True)
class BinaryModel:
    """A model to compare: ``init(generator)`` draws its parameters, ``output(params,
    data)`` gives its outputs on ``train_data`` or ``test_data`` (whatever structure the
    model's output function takes)."""

    init: Callable[[torch.Generator], dict[str, torch.Tensor]]
    output: Callable[[dict[str, torch.Tensor], object], torch.Tensor]
    train_data: object
    test_data: object


@dataclass
class ComparisonResult:
    """``curves``: one row per model and evaluation step (test accuracy); ``final``: the
    last train and test accuracy and the last loss of each model; ``trained``: the
    parameters at the end."""

    curves: list[dict[str, object]]
    final: dict[str, dict[str, float]]
    trained: dict[str, dict[str, torch.Tensor]]


def train_binary_models(
    models: Mapping[str, BinaryModel],
    y_train: torch.Tensor,
    y_test: torch.Tensor,
    *,
    steps: int,
    lr: float,
    eval_every: int,
) -> ComparisonResult:
    """Train every model of ``models`` with :func:`attnbook.models.training.fit` (Adam,
    ``steps`` full-batch steps of size ``lr``) on the logistic loss, the ``i``-th model
    from a torch generator seeded with ``i``; evaluate train and test accuracy every
    ``eval_every`` steps."""
    if not models:
        raise ValueError("models must hold at least one model")
    curves: list[dict[str, object]] = []
    final: dict[str, dict[str, float]] = {}
    trained: dict[str, dict[str, torch.Tensor]] = {}
    for i, (name, model) in enumerate(models.items()):
        params = model.init(torch.Generator().manual_seed(i))

        def loss(params=params, model=model) -> torch.Tensor:
            return logistic_loss(model.output(params, model.train_data), y_train)

        def evaluate(params=params, model=model) -> dict[str, float]:
            return {
                "train": accuracy(model.output(params, model.train_data), y_train),
                "test": accuracy(model.output(params, model.test_data), y_test),
            }

        history = fit(
            params, loss, steps=steps, lr=lr, eval_every=eval_every, evaluate=evaluate
        )
        trained[name] = params
        final[name] = {
            "train accuracy": history.metrics["train"][-1],
            "test accuracy": history.metrics["test"][-1],
            "final loss": history.loss[-1],
        }
        curves += [
            {"model": name, "step": s, "test accuracy": a}
            for s, a in zip(history.eval_steps, history.metrics["test"])
        ]
    return ComparisonResult(curves, final, trained)
