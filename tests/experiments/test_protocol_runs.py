"""The tables, check descriptions and figures of the section on the paper's protocol
(chapters/paper_protocol.py, beside the chapters), on made-up learning curves."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import paper_protocol as pr
import pytest
from paper_protocol import paper_number_table

from attnbook.experiments.curves import ABLATIONS, Curve
from attnbook.experiments.picture import MAIN_STATISTICS

RNG = np.random.default_rng(1)
V, STEPS = 200, [0, 1, 3, 10, 30]
NAMES, LABELS = {"imdb": "IMDB"}, {"Adam": "lr"}


@pytest.fixture(autouse=True)
def close_figures():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def _curve(acc: list[float], loss: list[float], scale: float) -> Curve:
    metrics = {}
    for split in ("train", "test"):
        metrics[f"{split}_accuracy"] = list(acc)
        metrics[f"{split}_loss"] = list(loss)
    scores = {
        s: (scale * RNG.normal(size=V) * (1 + s), RNG.normal(size=V)) for s in STEPS
    }
    return Curve(list(STEPS), metrics, scores)


def _runs() -> pr.ProtocolRuns:
    curves = {}
    for seed in (0, 1):
        curves[("imdb", "full", "Adam", seed)] = _curve(
            [0.5, 0.8, 0.95, 0.97, 0.9], [0.7, 0.4, 0.1, 0.05, 0.3], 1.0
        )
        curves[("imdb", "random_E", "Adam", seed)] = _curve(
            [0.5, 0.6, 0.72, 0.72, 0.75], [0.7, 0.65, 0.6, 0.6, 0.55], 1.0
        )
    curves[("imdb", "one_step_head", "Adam", 0)] = _curve([0.5] * 5, [0.7] * 5, 0.1)
    unit = {("imdb", "Adam"): _curve([0.5, 0.6, 0.7, 0.8, 0.85], [0.7] * 5, 1.0)}
    imp = {"imdb": RNG.uniform(-1, 1, V)}
    return pr.ProtocolRuns(curves, unit, imp, {"imdb": np.ones(V)}, (0, 1))


def test_the_runs_are_read_by_corpus_seed_and_model():
    runs = _runs()
    assert set(runs.at("imdb")) == {(m, "Adam") for m in ABLATIONS}
    assert set(runs.at("imdb", 1)) == {("full", "Adam"), ("random_E", "Adam")}
    assert len(runs.over_seeds("imdb", "full", "Adam")) == 2


def test_match_table_counts_the_steps_with_both_models_at_the_paper():
    runs = _runs()
    table, counts = pr.match_table(runs, NAMES, LABELS)
    assert counts == {"imdb_lr_train_match": 2, "imdb_lr_test_match": 2}
    assert table.loc[("IMDB", "Adam", "test", 0), "both"] == "3"
    assert table.loc[("IMDB", "Adam", "test", 0), "trained E at 95% / 0.1"] == "3"


def test_accuracy_statistics_and_quotes():
    runs = _runs()
    fulls = runs.over_seeds("imdb", "full", "Adam")
    rands = runs.over_seeds("imdb", "random_E", "Adam")
    a, sd = pr.accuracy_statistics(fulls, rands, 1000)
    assert a["gap_min"] == pytest.approx(0.97 - 0.75)
    assert a["loss_ratio"] == pytest.approx(0.55 / 0.05)
    assert a["loss_spikes"] == 2 and a["end_gap"] == pytest.approx(0.15)
    assert a["loss_rise_max"] == pytest.approx(
        0.3 / 0.05
    )  # last training loss over lowest
    assert sd == {"gap_min": 0.0, "best_acc": 0.0, "low_loss": 0.0, "end_gap": 0.0}
    fulls[1] = _curve([0.5, 0.8, 0.9, 0.93, 0.8], [0.7, 0.4, 0.2, 0.15, 0.3], 1.0)
    sd = pr.accuracy_statistics(fulls, rands, 1000)[1]
    assert sd["gap_min"] == pytest.approx(0.04 / np.sqrt(2))
    assert sd["best_acc"] == pytest.approx(0.04 / np.sqrt(2))
    assert sd["low_loss"] == pytest.approx(0.10 / np.sqrt(2))
    assert sd["end_gap"] == pytest.approx(0.10 / np.sqrt(2))
    fulls = runs.over_seeds("imdb", "full", "Adam")
    table = paper_number_table(runs.at("imdb"))
    quoted = pr.accuracy_quotes(a, table, "Adam", runs.unit_entries[("imdb", "Adam")])
    assert quoted["trained_train_acc_step"] == 3
    assert quoted["loss_rise_max"] == a["loss_rise_max"]
    assert quoted["unit_entries_end_test_acc"] == 0.85


def test_scale_and_spread_tables():
    runs = _runs()
    table, change = pr.scale_table(runs, NAMES, ["Adam"])
    assert len(table) == 2 and change == pytest.approx(0.1)
    spreads = pr.spread_runs(runs, NAMES, ["Adam"])
    frame = spreads[("imdb", "Adam")]
    assert set(frame["reading"]) == {"tokens", "bins", "scale-free"}
    cross, numbers, late = pr.crossing_table(spreads, NAMES, LABELS)
    assert len(cross) == 2 and "imdb_lr_value_tokens_end" in numbers
    assert set(late) == {"imdb_lr_value", "imdb_lr_cls"}
    assert pr.styled(cross) is not None
    fig = pr.spread_figure(
        {**spreads, ("imdb", "B"): spreads[("imdb", "Adam")]}, NAMES, ["Adam", "B"]
    )
    assert len(fig.axes) == 4


def test_spans_and_hold_table():
    assert pr.spans([1, 2, 3, 10], [0, 1, 2, 3, 5, 10]) == "1–3, 10"
    assert pr.spans([], [0, 1]) == ""
    rows = [
        {"seed": s, "step": step, "statistic": stat, "value": 0.5 if step < 30 else 0.2}
        for s in (0, 1)
        for step in STEPS
        for stat in MAIN_STATISTICS
    ]
    along = {("imdb", "Adam"): pd.DataFrame(rows)}
    holds = {("imdb", "Adam"): [0, 1, 3, 10]}
    table, quoted, ends = pr.hold_table(along, holds, NAMES, LABELS)
    assert quoted["imdb_lr_picture_holds"] == "0–10"
    value, what, sd = ends["imdb_lr"]
    assert value == 0.2 and "2 seeds" in what and "30-step budget" in what
    assert sd == 0.0
    rows[-1]["value"] = 0.1  # seed 1's smallest of the four at the end
    moved = {("imdb", "Adam"): pd.DataFrame(rows)}
    sd = pr.hold_table(moved, holds, NAMES, LABELS)[2]["imdb_lr"][2]
    assert sd == pytest.approx(0.1 / np.sqrt(2))
    fig = pr.along_figure(
        {**along, ("imdb", "B"): along[("imdb", "Adam")]},
        NAMES,
        ["Adam", "B"],
        (0, 1),
        threshold=0.3,
        budget=10,
    )
    assert fig.axes[0].get_title().startswith("IMDB")


def test_curve_figure_draws_the_three_models():
    runs = _runs()
    runs.curves.update(
        {(n, m, "B", s): c for (n, m, lab, s), c in list(runs.curves.items())}
    )
    fig = pr.curve_figure(runs, "imdb", "IMDB", ["Adam", "B"])
    assert len(fig.axes) == 4
    # two splits per model and a line for each paper number
    assert len(fig.axes[0].get_lines()) == 2 * len(ABLATIONS) + 2


def test_protocol_runs_on_a_tiny_corpus_and_the_autograd_rounding():
    from attnbook.data.corpus import build_review_corpus

    pos = [f"good great fun {w}" for w in ("film", "plot", "cast", "score")] * 3
    neg = [f"bad awful boring {w}" for w in ("film", "plot", "cast")] * 3
    test = ["good film", "bad plot", "great cast", "awful score"]
    corpus = build_review_corpus(
        pos + neg, [1] * len(pos) + [0] * len(neg), test, [1, 0, 1, 0], min_df=1
    )
    runs = pr.protocol_runs(
        {"toy": corpus},
        {"Adam": (1e-2, 6)},
        (0, 1),
        dim=8,
        sigma=0.1,
        autograd=(("toy", "Adam"),),
    )
    assert set(runs.at("toy", 1)) == {("full", "Adam"), ("random_E", "Adam")}
    # the same steps in two roundings: the fused step and the autograd step
    other = runs.autograd[("toy", "Adam")]
    assert len(other) == 2
    for fused, autograd in zip(runs.over_seeds("toy", "full", "Adam"), other):
        assert fused.steps == autograd.steps
        np.testing.assert_allclose(
            fused.metrics["train_loss"], autograd.metrics["train_loss"], rtol=1e-4
        )


def test_evaluations_measure_each_step_in_rounding_windows():
    unit = _runs().unit_entries[("imdb", "Adam")]
    rows = pr.evaluations(unit, "random_E", "test", "Adam", ("unit", 0))
    point = min(rows, key=lambda row: row["dist."])
    # (0.7, 0.7): 4 windows of accuracy off 72%, 2 of loss off 0.6
    assert point["E"] == "unit" and point["step"] == 3
    assert point["dist."] == pytest.approx(4)
    assert point["Δ acc."] == pytest.approx(-0.02)


def test_nearest_tables_read_each_model_alone_and_both_at_one_step():
    runs = _runs()
    # the second seed's random fixed model never gets nearer than 0.75 / 0.55
    runs.curves[("imdb", "random_E", "Adam", 1)] = _curve(
        [0.5, 0.6, 0.65, 0.7, 0.75], [0.7, 0.65, 0.62, 0.6, 0.55], 1.0
    )
    per_model, protocols, numbers = pr.nearest_tables(runs, NAMES, ["Adam"])
    assert len(per_model) == 4 and len(protocols) == 8
    row = per_model.loc[("IMDB", "test", "random fixed E", "Adam")]
    assert row["seed"] == 0 and row["step"] == 3 and row["dist."] == 0
    for split in ("train", "test"):
        assert numbers[f"imdb_{split}_nearest_own"] == 0
        assert numbers[f"imdb_{split}_nearest_paired"] == 0
    own = protocols.sort_index().loc[("IMDB", "test", "own step sizes")]
    assert own.loc["trained E", "step"] == 3
    assert own.loc["random fixed E", "E"] == "rows of norm 1"
    assert numbers["imdb_test_own_trained_accuracy"] == 0.95
    assert numbers["imdb_train_own_random_lr"] == "Adam"
    assert numbers["imdb_train_own_random_step"] == 3
    for table in (per_model, protocols):
        html = pr.styled(table).to_html()
        assert "0.950" in html and "rows of norm 1" in html
