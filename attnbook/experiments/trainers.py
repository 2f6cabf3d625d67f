"""The extension chapters' models, trained: as ``train(seed, labels)`` for
:func:`attnbook.book.controls.label_control_runs` (the per-token scores after training
and at the start, and the accuracies), and the XOR chapter's models under one protocol
(the i-th from seed i) with what is read off them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import attention_output, count_heads_output
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


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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


def _one_layer_scores(params: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    with torch.no_grad():
        E = params["E"]
        return {"E.v": _np(E @ params["v"]), "E.p": _np(E @ params["p"])}


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
            train.vocab_size, dim, generator=_gen(seed), device=device
        )
        initial = _one_layer_scores(params)
        y = _signed(labels, device)
        loss = binary_loss_closure(params, train, y)
        fitted = (params, one_layer_output, train, test, y, y_test, steps, lr, loss)
        metrics = _fit_binary(*fitted)
        return _one_layer_scores(params), initial, metrics

    return run


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
            train.vocab_size, dim, generator=_gen(seed), device=device, layout=layout
        )
        with torch.no_grad():
            initial = {"E.W": _np(params["E"] @ params["W"])}
        y = as_class_labels(classes, n_classes, train.n_sequences).to(device)

        def argmax_accuracy(counts, labels) -> float:
            f = multiclass_output(params["E"], params["p"], params["W"], counts)
            return float((f.argmax(1) == labels).double().mean())

        def loss() -> torch.Tensor:  # params made for train, labels checked above
            E, p, W = params["E"], params["p"], params["W"]
            scores = count_heads_output(E, p, W, train, check_input=False)
            return cross_entropy_loss(scores, y, check_input=False)

        fit(params, loss, steps=steps, lr=lr)
        with torch.no_grad():
            metrics = {
                "train accuracy": argmax_accuracy(train, y),
                "test accuracy": argmax_accuracy(test, y_test),
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
        mlp = init_mlp_head(train.vocab_size, dim, generator=_gen(seed), device=device)
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
        fitted = (mlp, mlp_attention_output, train_index, test_index, y, y_test)
        metrics = _fit_binary(*fitted, steps, lr)
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
    blocks = pair_blocks(train.to(device)), pair_blocks(test.to(device))
    y_test = _signed(test_labels, device)

    def scores(params):
        with torch.no_grad():
            E, q = params["E"], effective_query(params)
            out = {"E.v": _np(E @ params["v"]), "E.q": _np(E @ q)}
            return out | {"E.p": _np(E @ params["p"])}

    def run(seed: int, labels: np.ndarray):
        params = init_two_layer(
            train.vocab_size, dim, generator=_gen(seed), device=device
        )
        initial = scores(params)
        y = _signed(labels, device)
        metrics = _fit_binary(params, two_layer_output, *blocks, y, y_test, steps, lr)
        return scores(params), initial, metrics

    return run


@dataclass(frozen=True)
class BinaryModel:
    """``init(generator)`` draws its parameters, ``output(params, data)`` runs it."""

    init: Callable[[torch.Generator], dict[str, torch.Tensor]]
    output: Callable[[dict[str, torch.Tensor], object], torch.Tensor]
    train_data: object
    test_data: object


def train_binary_models(
    models: Mapping[str, BinaryModel],
    y_train: torch.Tensor,
    y_test: torch.Tensor,
    *,
    steps: int,
    lr: float,
    eval_every: int,
) -> tuple[list[dict], dict[str, dict], dict[str, dict]]:
    """Full-batch Adam on the logistic loss for every model, the ``i``-th from seed
    ``i``: test accuracy every ``eval_every`` steps, the last accuracies and loss, and
    the trained parameters."""
    curves, final, trained = [], {}, {}
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
    return curves, final, trained


#: The signal tokens of XOR data, in the order of their ids.
SIGNAL_TOKENS = ("a", "not a", "b", "not b")


def one_layer_output(params: Mapping[str, torch.Tensor], counts) -> torch.Tensor:
    """The one-layer model on count-encoded sequences."""
    return attention_output(params["E"], params["p"], params["v"], counts)


def xor_models(
    vocab_size: int,
    dim: int,
    counts_train: TokenCounts,
    counts_test: TokenCounts,
    device: torch.device | str | None = None,
) -> dict[str, BinaryModel]:
    """The one-layer model (eight initializations), the MLP head (three) and the
    two-layer model (four of scale 3, one of the default scale), keyed by name."""
    blocks_train, blocks_test = pair_blocks(counts_train), pair_blocks(counts_test)

    def two_layer(scale: float) -> BinaryModel:
        return BinaryModel(
            lambda g: init_two_layer(
                vocab_size, dim, scale=scale, generator=g, device=device
            ),
            two_layer_output,
            blocks_train,
            blocks_test,
        )

    one_layer = BinaryModel(
        lambda g: init_parameters(vocab_size, dim, generator=g, device=device),
        one_layer_output,
        counts_train,
        counts_test,
    )
    mlp = BinaryModel(
        lambda g: init_mlp_head(vocab_size, dim, generator=g, device=device),
        mlp_attention_output,
        PooledIndex.build(counts_train),
        PooledIndex.build(counts_test),
    )
    models = {"one layer, init 0": one_layer, "MLP head, init 0": mlp}
    for seed in range(4):
        models[f"two layers, init {seed}"] = two_layer(3.0)
    models["two layers, default scale"] = two_layer(1.0)
    for init in range(1, 8):
        models[f"one layer, init {init}"] = one_layer
    for init in range(1, 3):
        models[f"MLP head, init {init}"] = mlp
    return models


def model_groups(final: Mapping[str, object]) -> dict[str, list[str]]:
    """The trained models' names by kind (``"two layers"``: those of scale 3)."""
    prefixes = {
        "one layer": "one layer",
        "MLP head": "MLP head",
        "two layers": "two layers, init",
    }
    return {k: [n for n in final if n.startswith(p)] for k, p in prefixes.items()}


def xor_quotes(final: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The numbers the text quotes about the runs' accuracies and losses."""
    groups = model_groups(final)
    ones = groups["one layer"]
    acc = np.array([final[n]["train accuracy"] for n in ones])
    loss = np.array([final[n]["final loss"] for n in ones])
    default = final["two layers, default scale"]
    twos = groups["two layers"]
    return {
        "one_layer_runs": len(ones),
        "one_layer_at_3_4": int(np.isclose(acc, 0.75).sum()),
        "one_layer_at_1_2": int(np.isclose(acc, 0.5).sum()),
        "one_layer_loss_gap": float(np.abs(loss - np.log(2) / 2).max()),
        "two_layer_solved": sum(final[n]["test accuracy"] >= 0.95 for n in twos),
        "two_layer_runs": len(twos),
        "plateau_loss": float(np.log(2) / 2),
        "default_test_acc": default["test accuracy"],
        "default_loss": default["final loss"],
        "mlp_runs": len(groups["MLP head"]),
    }


def attention_scores(params: Mapping[str, torch.Tensor]) -> np.ndarray:
    """``E_s . p`` of every token (``E_s . q``, ``q = W2 p``, for a two-layer model)."""
    with torch.no_grad():
        query = effective_query(params) if "W2" in params else params["p"]
        return (params["E"] @ query).cpu().numpy()


def signal_margins(
    trained: Mapping[str, Mapping[str, torch.Tensor]], names: Sequence[str]
) -> dict[str, float]:
    """Per model: smallest attention score of a signal token minus the neutral mean."""
    margins = {}
    for name in names:
        s = attention_scores(trained[name])
        margins[name] = float(s[:4].min() - s[4:].mean())
    return margins


def score_table(
    trained: Mapping[str, Mapping[str, torch.Tensor]], names: Sequence[str]
) -> pd.DataFrame:
    """Attention score of each signal token and the neutral mean, per (model, token)."""
    rows = []
    for name in names:
        s = attention_scores(trained[name])
        rows += [
            {"model": name, "token": t, "attention score": s[j]}
            for j, t in enumerate(SIGNAL_TOKENS)
        ]
        rows.append(
            {"model": name, "token": "neutral (mean)", "attention score": s[4:].mean()}
        )
    return pd.DataFrame(rows)
