"""The XOR section's models and readings (attnbook.experiments.trainers) and the
figures of the extension sections (attnbook.book.controls)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.book.controls import Run, small_dim_figure, xor_figure
from attnbook.data.xor import XorSpec, sample_xor
from attnbook.experiments import trainers as xor_runs


@pytest.fixture(autouse=True)
def close_figures():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def test_the_models_keep_their_seeds_in_order():
    data = sample_xor(XorSpec(n_neutral=6, length=5), 20, np.random.default_rng(0))
    models = xor_runs.xor_models(data.counts.vocab_size, 4, data.counts, data.counts)
    names = list(models)
    assert names[:7] == [
        "one layer, init 0",
        "MLP head, init 0",
        *(f"two layers, init {s}" for s in range(4)),
        "two layers, default scale",
    ]
    assert len(names) == 16 and models["one layer, init 5"] is models[names[0]]
    params = models[names[0]].init(torch.Generator().manual_seed(0))
    out = models[names[0]].output(params, data.counts)
    assert out.shape == (data.counts.n_sequences,)


def _final():
    final = {}
    for i in range(8):
        final[f"one layer, init {i}"] = {
            "train accuracy": 0.75 if i < 5 else 0.5,
            "test accuracy": 0.7,
            "final loss": np.log(2) / 2 + 1e-4,
        }
    for i in range(4):
        final[f"two layers, init {i}"] = {
            "train accuracy": 1.0,
            "test accuracy": 0.99 if i else 0.5,
            "final loss": 0.01,
        }
    final["two layers, default scale"] = {
        "train accuracy": 0.75,
        "test accuracy": 0.74,
        "final loss": 0.35,
    }
    for i in range(3):
        final[f"MLP head, init {i}"] = {
            "train accuracy": 1.0,
            "test accuracy": 1.0,
            "final loss": 0.0,
        }
    return final


def test_groups_and_quotes():
    final = _final()
    groups = xor_runs.model_groups(final)
    assert len(groups["one layer"]) == 8 and len(groups["two layers"]) == 4
    quoted = xor_runs.xor_quotes(final)
    assert quoted["one_layer_at_3_4"] == 5 and quoted["one_layer_at_1_2"] == 3
    assert quoted["two_layer_solved"] == 3 and quoted["mlp_runs"] == 3
    assert quoted["one_layer_loss_gap"] == pytest.approx(1e-4)


def test_margins_and_scores_read_the_attention():
    E = torch.eye(6, 2, dtype=torch.float64)
    E[:4, 0] = torch.tensor([3.0, 2.0, 4.0, 5.0])
    one = {"E": E, "p": torch.tensor([1.0, 0.0], dtype=torch.float64)}
    assert xor_runs.signal_margins({"m": one}, ["m"]) == {"m": 2.0}
    table = xor_runs.score_table({"m": one}, ["m"])
    assert list(table["token"]) == [*xor_runs.SIGNAL_TOKENS, "neutral (mean)"]
    curves = pd.DataFrame(
        [
            {"model": m, "step": s, "test accuracy": 0.5 + s / 100}
            for m in ("m", "n")
            for s in (0, 10)
        ]
    )
    fig = xor_figure(curves, ["m"], table)
    assert len(fig.axes) == 2 and fig.axes[0].get_legend() is not None


def test_small_dim_figure_one_line_per_dimension():
    rng = np.random.default_rng(0)
    held = rng.uniform(-1, 1, 400)
    trained = {
        d: [Run("labels", 1, np.ones(2), {"E.v": held, "E.p": np.abs(held)}, {}, {})]
        for d in (16, 64)
    }
    table = pd.DataFrame(
        {"r measured": [0.5, 0.9], "r predicted (noise only)": [0.55, 0.88]},
        index=pd.Index([16, 64], name="d"),
    )
    fig = small_dim_figure(table, held, trained)
    assert len(fig.axes) == 3 and fig.legends
    assert len(fig.axes[1].get_lines()) >= 2
