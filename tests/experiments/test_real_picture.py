"""The computations, tables and figures of the real-data chapter
(attnbook.experiments.real_picture, real_synthetic, attnbook.book.real_figures), on
small made-up runs."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from attnbook.book import real_figures
from attnbook.experiments import real_picture as rp
from attnbook.experiments import real_synthetic as rs
from attnbook.experiments.picture import (
    MAIN_STATISTICS,
    RUN_NAMES,
    correlation_table,
    null_distribution,
)
from attnbook.experiments.robustness import PICTURE_STATISTICS

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
    assert rp.one_step_eta(alpha, 400, 0.01) == pytest.approx(20 * 0.01 / (20 * 0.2))
    imp = np.array([-0.5, 0.0, 0.75, np.nan])
    assert rp.bin_range(imp, None) == (-1.0, 1.0)
    assert rp.bin_range(imp, "observed") == (-0.5, 0.75)
    outer = rp.outer_bins(imp[:3], n_bins=4)
    assert outer.loc["[−1, 1]", "all bins"] == 3
    assert outer.loc["[min I, max I] (paper)", "first bin"] == 1


def test_seed_statistics_against_a_null():
    imp = RNG.uniform(-1, 1, V)
    runs = _runs(imp)
    df = RNG.integers(1, 50, V).astype(float)
    table = correlation_table(runs, imp, df, (0, 1, 2))
    null = null_distribution(runs, df)
    s = rp.seed_statistics(table, null, imp, (0, 1, 2))
    value = PICTURE_STATISTICS["value"]
    seeds = table.loc[["seed 0", "seed 1", "seed 2"], value]
    assert s.smallest["value"] == seeds.min()
    assert s.excess["value"] == seeds.min() - null[value].max()
    assert s.noise["value"] >= 1 / np.sqrt(V)
    assert s.n_tokens == V and s.n_negative + s.n_positive == V
    assert s.smallest["value"] > 0.5 and s.initial < 0.3
    assert set(s.quoted) == {
        f"{k}_{q}"
        for k in MAIN_STATISTICS
        for q in ("null", "null_max", "null_sd", "null_range", "range")
    }
    what = rp.picture_descriptions("imdb", 3, 5)
    assert "smallest over 3 seeds" in what["imdb_value_min_seed"]
    assert "largest of 5 shuffled-label runs, IMDB" in what["imdb_cls_above_null"]


def test_run_quotes_and_descriptions():
    columns = [*rp._QUOTED_COLUMNS]
    rows = pd.DataFrame(
        [[float(i + j) for j in range(len(columns))] for i in range(6)],
        index=[
            RUN_NAMES[k]
            for k in ("one_step", "theorem", "head", "gd", "gd_autograd", "adam")
        ],
        columns=columns,
    )
    quoted = rp.run_quotes(rows)
    assert quoted["adam_cls"] == rows.loc[RUN_NAMES["adam"], columns[0]]
    assert len(quoted) == 5 * len(columns)
    what = rp.ablation_descriptions("yelp", 12)
    assert set(what) == {
        "yelp_one_rho_value_alpha",
        "yelp_gd_value_trend",
        "yelp_u_needs_adam",
        "yelp_gd_u_range",
        "yelp_gd_stable_loss",
        *(f"yelp_u_needs_{slug}" for slug in rp.U_CONTROLS.values()),
        "yelp_u_between_seeds",
    }
    assert "largest of 12 gradient-descent runs" in what["yelp_u_needs_adam"]
    assert rp.styled_run_table(rows) is not None


def test_exercise_tables():
    df = RNG.integers(1, 400, V).astype(float)
    noise = RNG.normal(size=V) / np.sqrt(df)
    table = rp.null_noise_table(noise, df)
    assert len(table) == 5
    assert np.allclose(table["rms of the null I"], table["mean of 1/sqrt(n)"], rtol=0.5)
    imp = RNG.uniform(-1, 1, V)
    quartiles = rp.quartile_table(np.abs(imp), imp, df)
    assert list(quartiles.index) == [f"quartile {q}" for q in (1, 2, 3, 4)]
    assert np.allclose(quartiles, 1.0)


def test_synthetic_spread_table_and_quotes():
    imp = RNG.uniform(-1, 1, V)
    imp[:3] = np.nan
    runs = _runs(np.nan_to_num(imp))
    synthetic = {
        "as drawn": (imp, runs, np.array([1, 2, 1, 0])),
        "conditioned on Assumption 1": (imp, runs, np.ones(4, int)),
    }
    clean = np.nan_to_num(imp)
    table = rs.synthetic_spread_table(synthetic, {"IMDB": (clean, runs)}, 0)
    assert (
        table.loc["synthetic, as drawn", "sequences with one relevant token (%)"] == 50
    )
    assert np.isnan(table.loc["IMDB", "sequences with one relevant token (%)"])
    assert table["ρ(E·v, I)"].min() > 0.5
    quoted = rs.spread_quotes(table)
    assert quoted["synthetic_one_pct"] == 50
    assert set(quoted) == {
        "synthetic_one_pct",
        *(f"{p}_{s}_spread" for p in ("synthetic", "imdb") for s in ("value", "cls")),
    }
    assert set(rs.synthetic_descriptions()) == {
        "synthetic_rho_value",
        "synthetic_rho_cls",
        "synthetic_value_spread_ratio",
        "synthetic_cls_spread_ratio",
    }
    assert rs.styled_spread_table(table) is not None


def test_the_figures_draw_both_data_sets():
    importance = {n: RNG.uniform(-1, 1, V) for n in rp.DATASETS}
    runs = {n: _runs(importance[n]) for n in rp.DATASETS}
    fig = real_figures.picture_figure(importance, runs, 0)
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "IMDB: $E_s \\cdot v$"
    assert len(real_figures.bin_counts_figure(importance).axes) == 2
    df = RNG.integers(1, 50, V).astype(float)
    tables = {
        rp.NAMES[n]: correlation_table(runs[n], importance[n], df, (0, 1, 2))
        for n in rp.DATASETS
    }
    nulls = {n: null_distribution(runs[n], df) for n in rp.DATASETS}
    fig = real_figures.null_figure(tables, nulls, (0, 1, 2))
    assert len(fig.axes[0].get_lines()) == 2 * len(MAIN_STATISTICS) + 1
    fig = real_figures.ablation_figure(importance, runs, 0)
    assert len(fig.axes) == 4
    synthetic = {
        k: (importance["imdb"], runs["imdb"], np.ones(3))
        for k in ("as drawn", "conditioned on Assumption 1")
    }
    fig = real_figures.synthetic_figure(synthetic, importance["imdb"], runs["imdb"], 0)
    assert len(fig.axes) == 2


def test_gd_statistics_set_adam_against_every_gradient_descent_run():
    U, VALUE = PICTURE_STATISTICS["cls"], PICTURE_STATISTICS["value"]
    index = pd.MultiIndex.from_tuples(
        [
            ("η/10", "one-sweep step", 0),
            ("η/10", "autograd step", 0),
            ("η/30", "one-sweep step", 0),
            ("η/30", "autograd step", 1),
        ],
        names=["step size", "rounding", "seed"],
    )
    gd = pd.DataFrame(
        {
            "steps": [200, 200, 600, 600],
            "training loss": [0.45, 0.48, 0.40, 0.44],
            "test accuracy": [0.8] * 4,
            VALUE: [0.8, 0.7, 0.75, 0.78],
            U: [0.10, 0.25, 0.05, 0.12],
            "device": ["cpu"] * 4,
            "dtype": ["float32"] * 4,
        },
        index=index,
    )
    seeds = pd.DataFrame(
        {U: [0.53, 0.52, 0.531, 0.011]},
        index=["seed 0", "seed 1", "seed 2", "seed-to-seed range"],
    )
    g = rp.gd_statistics(gd, seeds)
    assert g.largest_u == 0.25 and g.u_range == pytest.approx(0.20)
    assert g.adam_u == 0.52 and g.u_gap == pytest.approx(0.27)
    assert g.smallest_value == 0.7 and g.value_range == pytest.approx(0.1)
    assert g.loss == {"edge": 0.48, "stable": 0.44}
    assert g.quoted["gd_u_min"] == pytest.approx(0.05)
    assert g.quoted["gd_loss_stable"] == 0.44
    assert rp.styled_gd_table(gd) is not None
    assert g.n_runs == 4 and g.quoted["gd_runs"] == 4
    assert g.u_by_step == {"edge": (0.10, 0.25), "stable": (0.05, 0.12)}
    assert g.quoted["gd_u_max_edge"] == 0.25 and g.quoted["gd_u_min_stable"] == 0.05
    quoted = rp.gd_quotes(gd)
    assert quoted["gd_edge_autograd_0_u"] == 0.25
    assert quoted["gd_stable_autograd_1_train_loss"] == 0.44
    assert quoted["gd_devices"] == "cpu float32"
    assert len(quoted) == 4 * 3 + 1
    with pytest.raises(ValueError, match="no gradient-descent run"):
        rp.gd_statistics(gd.iloc[:0], seeds)
