"""Training functions of the extensions' models for
:func:`attnbook.experiments.seeded_runs.label_control_runs`.

Each ``*_trainer`` fixes the data, the model and the budget (full-batch Adam) and
returns ``train(seed, labels)``: the model drawn from ``torch.Generator().manual_seed(
seed)``, trained on ``labels``, and its per-token scores after training and at the
initialisation with its training and test accuracy.

- :func:`one_layer_trainer` -- the model of the book (scores ``E.v``, ``E.p``);
- :func:`multiclass_trainer` -- the K-class model (``E.W``, one column per class);
- :func:`mlp_trainer` -- the MLP head (``E.v``, ``E.p``, ``g``), with the linear
  model trained from the same ``E``, ``p``, ``v`` beside it (``linear E.v``,
  ``linear E.p``);
- :func:`two_layer_trainer` -- the two-layer model (``E.v``, ``E.q`` with
  ``q = W2 p``, ``E.p``).
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.seeded_runs import TrainFunction
from attnbook.models.attention import count_attention_output
from attnbook.models.count_engine import count_heads_output
from attnbook.models.losses import accuracy, logistic_loss
from attnbook.models.mlp_head import (
    PooledIndex,
    init_mlp_head,
    mlp_attention_output,
    token_value_scores,
)
from attnbook.models.multiclass import (
    as_class_labels,
    cross_entropy_loss,
    multiclass_layout,
    multiclass_output,
)
from attnbook.models.parameters import init_parameters
from attnbook.models.training import binary_loss_closure, fit
from attnbook.models.two_layer import (
    effective_query,
    init_two_layer,
    pair_blocks,
    two_layer_output,
)
from attnbook.validation import as_signed_labels

__all__ = [
    "one_layer_trainer",
    "multiclass_trainer",
    "mlp_trainer",
    "two_layer_trainer",
]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def _signed(labels: np.ndarray, device) -> torch.Tensor:
    """-1/+1 labels (checked here, once) as float32, the dtype of the models."""
    return as_signed_labels(labels, dtype=torch.float32).to(device)


def _binary_accuracy(
    output: Callable[[object], torch.Tensor], data: object, y: torch.Tensor
) -> float:
    with torch.no_grad():
        return accuracy(output(data), y)


def one_layer_trainer(
    train: TokenCounts,
    test: TokenCounts,
    test_labels: np.ndarray,
    *,
    dim: int,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
) -> TrainFunction:
    """The one-layer model of dimension ``dim`` (entries ``N(0, 1/d)``); scores
    ``E.v`` and ``E.p``; metrics ``train accuracy`` and ``test accuracy``."""
    train, test = train.to(device), test.to(device)
    y_test = _signed(test_labels, device)

    def run(seed: int, labels: np.ndarray):
        params = init_parameters(
            train.vocab_size,
            dim,
            generator=torch.Generator().manual_seed(seed),
            device=device,
        )
        initial = _one_layer_scores(params)
        y = _signed(labels, device)
        fit(params, binary_loss_closure(params, train, y), steps=steps, lr=lr)

        def out(counts):
            return count_attention_output(params["E"], params["p"], params["v"], counts)

        metrics = {
            "train accuracy": _binary_accuracy(out, train, y),
            "test accuracy": _binary_accuracy(out, test, y_test),
        }
        return _one_layer_scores(params), initial, metrics

    return run


def _one_layer_scores(params: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    with torch.no_grad():
        return {
            "E.v": _np(params["E"] @ params["v"]),
            "E.p": _np(params["E"] @ params["p"]),
        }


def multiclass_trainer(
    train: TokenCounts,
    test: TokenCounts,
    test_classes: np.ndarray,
    *,
    n_classes: int,
    dim: int,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
) -> TrainFunction:
    """The K-class model of dimension ``dim`` (entries ``N(0, 1/d)``); score ``E.W``
    (``(V, K)``); metrics ``train accuracy`` and ``test accuracy`` (argmax)."""
    train, test = train.to(device), test.to(device)
    y_test = torch.as_tensor(np.asarray(test_classes), device=device)
    layout = functools.partial(multiclass_layout, n_classes=n_classes)

    def run(seed: int, classes: np.ndarray):
        params = init_parameters(
            train.vocab_size,
            dim,
            generator=torch.Generator().manual_seed(seed),
            device=device,
            layout=layout,
        )
        with torch.no_grad():
            initial = {"E.W": _np(params["E"] @ params["W"])}
        y = as_class_labels(classes, n_classes, train.n_sequences).to(device)

        def out(counts):
            return multiclass_output(params["E"], params["p"], params["W"], counts)

        def loss() -> torch.Tensor:  # params made for train, labels checked above
            E, p, W = params["E"], params["p"], params["W"]
            scores = count_heads_output(E, p, W, train, check_input=False)
            return cross_entropy_loss(scores, y, check_input=False)

        fit(params, loss, steps=steps, lr=lr)
        with torch.no_grad():
            metrics = {
                "train accuracy": float((out(train).argmax(1) == y).double().mean()),
                "test accuracy": float((out(test).argmax(1) == y_test).double().mean()),
            }
            scores = {"E.W": _np(params["E"] @ params["W"])}
        return scores, initial, metrics

    return run


def mlp_trainer(
    train: TokenCounts,
    test: TokenCounts,
    test_labels: np.ndarray,
    *,
    dim: int,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
    linear: bool = True,
) -> TrainFunction:
    """The MLP head of width ``dim`` and, from the same ``E``, ``p``, ``v``, the linear
    model, both with the same budget. Scores ``E.v``, ``E.p``, ``g`` (the single-token
    output) of the MLP model, ``linear E.v`` and ``linear E.p``; metrics ``train
    accuracy``, ``test accuracy`` (MLP) and ``linear test accuracy``. With
    ``linear=False`` the MLP model alone (no ``linear`` scores or metric): the MLP
    model's numbers are the same either way."""
    train, test = train.to(device), test.to(device)
    train_index, test_index = PooledIndex.build(train), PooledIndex.build(test)
    y_test = _signed(test_labels, device)

    def run(seed: int, labels: np.ndarray):
        mlp = init_mlp_head(
            train.vocab_size,
            dim,
            generator=torch.Generator().manual_seed(seed),
            device=device,
        )
        lin = {k: mlp[k].detach().clone().requires_grad_() for k in ("E", "p", "v")}

        def scores() -> dict[str, np.ndarray]:
            with torch.no_grad():
                out = {**_one_layer_scores(mlp), "g": _np(token_value_scores(mlp))}
                if linear:
                    out["linear E.v"] = _np(lin["E"] @ lin["v"])
                    out["linear E.p"] = _np(lin["E"] @ lin["p"])
                return out

        initial = scores()
        y = _signed(labels, device)
        fit(
            mlp,
            lambda: logistic_loss(
                mlp_attention_output(mlp, train_index), y, check_input=False
            ),
            steps=steps,
            lr=lr,
        )

        def out(index: PooledIndex) -> torch.Tensor:
            return mlp_attention_output(mlp, index)

        metrics = {
            "train accuracy": _binary_accuracy(out, train_index, y),
            "test accuracy": _binary_accuracy(out, test_index, y_test),
        }
        if linear:
            fit(lin, binary_loss_closure(lin, train, y), steps=steps, lr=lr)

            def lin_out(counts):
                return count_attention_output(lin["E"], lin["p"], lin["v"], counts)

            metrics["linear test accuracy"] = _binary_accuracy(lin_out, test, y_test)
        return scores(), initial, metrics

    return run


def two_layer_trainer(
    train: TokenCounts,
    test: TokenCounts,
    test_labels: np.ndarray,
    *,
    dim: int,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
) -> TrainFunction:
    """The two-layer model of dimension ``dim`` (:func:`init_two_layer`); scores
    ``E.v``, ``E.q`` (``q = W2 p``) and ``E.p``; metrics ``train accuracy`` and ``test
    accuracy``."""
    train_blocks = pair_blocks(train.to(device))
    test_blocks = pair_blocks(test.to(device))
    y_test = _signed(test_labels, device)

    def scores(params):
        with torch.no_grad():
            E = params["E"]
            return {
                "E.v": _np(E @ params["v"]),
                "E.q": _np(E @ effective_query(params)),
                "E.p": _np(E @ params["p"]),
            }

    def run(seed: int, labels: np.ndarray):
        params = init_two_layer(
            train.vocab_size,
            dim,
            generator=torch.Generator().manual_seed(seed),
            device=device,
        )
        initial = scores(params)
        y = _signed(labels, device)
        fit(
            params,
            lambda: logistic_loss(
                two_layer_output(params, train_blocks), y, check_input=False
            ),
            steps=steps,
            lr=lr,
        )

        def out(blocks):
            return two_layer_output(params, blocks)

        metrics = {
            "train accuracy": _binary_accuracy(out, train_blocks, y),
            "test accuracy": _binary_accuracy(out, test_blocks, y_test),
        }
        return scores(params), initial, metrics

    return run
