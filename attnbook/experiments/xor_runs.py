"""The models of the XOR section and what is read off them after training.

:func:`xor_models` builds the models :func:`attnbook.experiments.comparison.
train_binary_models` trains, in an order that fixes their seeds (the i-th model is
drawn with seed i): the first seven keep seeds 0 to 6 (one layer, MLP head, four
two-layer models of scale 3, one of the default scale), the further initializations of
the one-layer and MLP models come after them. :func:`model_groups` sorts the trained
models by kind, :func:`xor_quotes` gives the numbers the text quotes,
:func:`attention_scores` and :func:`signal_margins` what the attention of each model
selects, :func:`score_table` the scores the figure draws."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.comparison import BinaryModel
from attnbook.models.attention import count_attention_output
from attnbook.models.mlp_head import PooledIndex, init_mlp_head, mlp_attention_output
from attnbook.models.parameters import init_parameters
from attnbook.models.two_layer import (
    effective_query,
    init_two_layer,
    pair_blocks,
    two_layer_output,
)

__all__ = [
    "one_layer_output",
    "xor_models",
    "model_groups",
    "xor_quotes",
    "attention_scores",
    "signal_margins",
    "score_table",
]

#: The signal tokens of XOR data, in the order of their ids.
SIGNAL_TOKENS = ("a", "not a", "b", "not b")


def one_layer_output(params: Mapping[str, torch.Tensor], counts) -> torch.Tensor:
    """The one-layer model on count-encoded sequences."""
    return count_attention_output(params["E"], params["p"], params["v"], counts)


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
    """The names of the trained models by kind: ``"one layer"``, ``"MLP head"`` and
    ``"two layers"`` (those of scale 3)."""
    prefixes = {
        "one layer": "one layer",
        "MLP head": "MLP head",
        "two layers": "two layers, init",
    }
    return {k: [n for n in final if n.startswith(p)] for k, p in prefixes.items()}


def xor_quotes(final: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The numbers of the trained models the text quotes: how many one-layer runs end
    at training accuracy 3/4 and 1/2 and how far their loss is from the plateau
    ``log(2) / 2``, how many two-layer runs of scale 3 solve the task, and the model of
    the default scale."""
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
    """Per model: its smallest attention score of a signal token minus its mean over
    the neutral tokens."""
    margins = {}
    for name in names:
        s = attention_scores(trained[name])
        margins[name] = float(s[:4].min() - s[4:].mean())
    return margins


def score_table(
    trained: Mapping[str, Mapping[str, torch.Tensor]], names: Sequence[str]
) -> pd.DataFrame:
    """The attention score of every signal token and the mean over the neutral ones,
    one row per (model, token)."""
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
