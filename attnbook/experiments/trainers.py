"""The extensions' models as ``train(seed, labels)`` for
:func:`attnbook.book.controls.label_control_runs`: draw from ``seed``, train with
:func:`attnbook.models.training.fit`, return the per-token scores after training and at
the start, and the accuracies."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.xor_runs import one_layer_output
from attnbook.models.attention import count_heads_output
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


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy()


def _signed(labels: np.ndarray, device) -> torch.Tensor:
    return as_signed_labels(labels, dtype=torch.float32).to(device)


def _fit_binary(params, output, train, test, y, y_test, steps, lr, loss=None):
    """Fit ``params`` on the logistic loss of ``output`` (or ``loss``); accuracies."""
    if loss is None:

        def loss():
            return logistic_loss(output(params, train), y, check_input=False)

    fit(params, loss, steps=steps, lr=lr)
    with torch.no_grad():
        return {
            "train accuracy": accuracy(output(params, train), y),
            "test accuracy": accuracy(output(params, test), y_test),
        }


def one_layer_trainer(
    train: TokenCounts,
    test: TokenCounts,
    test_labels: np.ndarray,
    *,
    dim: int,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
) -> Callable:
    """The one-layer model; scores ``E.v``, ``E.p``."""
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
        loss = binary_loss_closure(params, train, y)
        metrics = _fit_binary(
            params, one_layer_output, train, test, y, y_test, steps, lr, loss
        )
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
) -> Callable:
    """The K-class model; score ``E.W`` (``(V, K)``), argmax accuracies."""
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
) -> Callable:
    """The MLP head; scores ``E.v``, ``E.p``, ``g``; with ``linear``, also those of
    the linear model from the same start (``linear E.v``, ...) and its test accuracy."""
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
        metrics = _fit_binary(
            mlp, mlp_attention_output, train_index, test_index, y, y_test, steps, lr
        )
        if linear:
            fit(lin, binary_loss_closure(lin, train, y), steps=steps, lr=lr)
            with torch.no_grad():
                lin_test = one_layer_output(lin, test)
                metrics["linear test accuracy"] = accuracy(lin_test, y_test)
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
) -> Callable:
    """The two-layer model; scores ``E.v``, ``E.q`` (``q = W2 p``), ``E.p``."""
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
        metrics = _fit_binary(
            params, two_layer_output, train_blocks, test_blocks, y, y_test, steps, lr
        )
        return scores(params), initial, metrics

    return run
