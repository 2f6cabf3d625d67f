"""The figures of the real-data chapter (attnbook.book.real_figures) and the step size
of its one step, on small made-up runs."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from attnbook.book import real_figures
from attnbook.experiments.picture import MAIN_STATISTICS
from attnbook.experiments.real_data import one_step_eta
from attnbook.experiments.robustness import PICTURE_STATISTICS, picture_correlations

RNG = np.random.default_rng(0)
V = 300


@pytest.fixture(autouse=True)
def close_figures():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def _runs(importance: np.ndarray, seeds=(0, 1, 2), n_null: int = 3):
    """Made-up runs with the picture: E.v follows I, E.p follows |I|."""

    def scores(noise: float):
        value = importance + noise * RNG.normal(size=V)
        cls = np.abs(importance) + noise * RNG.normal(size=V)
        return value, cls

    keys = ["adam", "one_step", "theorem", "head", "gd"]
    table = {(k, s): scores(0.3) for k in keys for s in seeds}
    table[("init", seeds[0])] = (RNG.normal(size=V), RNG.normal(size=V))
    nulls = [(RNG.uniform(-1, 1, V), scores(3.0)) for _ in range(n_null)]
    return SimpleNamespace(scores=table, nulls=nulls, null_importance=nulls[0][0])


def test_one_step_eta_and_bins():
    alpha = np.array([-0.2, 0.1, 0.4])
    assert one_step_eta(alpha, 400, 0.01) == pytest.approx(20 * 0.01 / (20 * 0.2))
    imp = np.array([-0.5, 0.0, 0.75, np.nan])
    assert real_figures.bin_range(imp, None) == (-1.0, 1.0)
    assert real_figures.bin_range(imp, "observed") == (-0.5, 0.75)


def test_the_figures_draw_both_data_sets():
    importance = {n: RNG.uniform(-1, 1, V) for n in real_figures.DATASETS}
    runs = {n: _runs(importance[n]) for n in real_figures.DATASETS}
    scores = {n: r.scores for n, r in runs.items()}  # chapter 4's runs: plain dicts
    fig = real_figures.picture_figure(importance, scores, 0)
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "IMDB: $E_s \\cdot v$"
    assert len(real_figures.bin_counts_figure(importance).axes) == 2
    df = RNG.integers(1, 50, V).astype(float)

    def table(pairs, label):
        rows = {f"{label} {k}": picture_correlations(i, *s, df) for k, (i, s) in pairs}
        return pd.DataFrame(rows).T.rename(columns=PICTURE_STATISTICS)

    tables, nulls = {}, {}
    for n in real_figures.DATASETS:
        seeds = [(s, (importance[n], runs[n].scores[("adam", s)])) for s in (0, 1, 2)]
        tables[real_figures.NAMES[n]] = table(seeds, "seed")
        nulls[n] = table(enumerate(runs[n].nulls), "permutation")
    fig = real_figures.null_figure(tables, nulls, (0, 1, 2))
    assert len(fig.axes[0].get_lines()) == 2 * len(MAIN_STATISTICS) + 1
    labels = {k: k.replace("_", " ") for k in ("one_step", "theorem", "gd", "adam")}
    fig = real_figures.ablation_figure(importance, scores, 0, labels)
    assert len(fig.axes) == 4
    adam = runs["imdb"].scores[("adam", 0)]
    synthetic = {
        k: (importance["imdb"], adam, np.ones(3))
        for k in ("as drawn", "conditioned on Assumption 1")
    }
    fig = real_figures.synthetic_figure(synthetic, importance["imdb"], adam)
    assert len(fig.axes) == 2
