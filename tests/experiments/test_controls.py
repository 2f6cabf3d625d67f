import dataclasses

import numpy as np
import pandas as pd
import pytest

from attnbook.book.controls import (
    control_design,
    control_threshold,
    controlled_trend,
    label_control_runs,
    leave_out_rare,
    metric_of,
    redrawn_margin,
    scores_of,
    trend_statistic,
)
from attnbook.engine.counts import TokenCounts


def documents_per_token(counts: TokenCounts) -> np.ndarray:
    return np.bincount(counts.token_ids.cpu().numpy(), minlength=counts.vocab_size)


def test_rare_tokens():
    counts = TokenCounts.from_sequences([[0, 0, 1], [0, 2], [0, 1]], 4)
    imp = np.array([0.5, -0.2, 1.0, np.nan])
    out, n_out = leave_out_rare(imp, counts, 2)
    assert np.isnan(out[2]) and np.isnan(out[3]) and out[0] == 0.5 and n_out == 1
    two = np.stack([imp, imp], 1)
    out2, n2 = leave_out_rare(two, counts, 3)
    assert n2 == 2 and np.isfinite(out2[0]).all() and np.isnan(out2[1]).all()
    with pytest.raises(ValueError):
        leave_out_rare(imp[:3], counts, 2)


def test_trend_statistic_shapes():
    x = np.linspace(-1, 1, 201)
    assert trend_statistic(x, x, "monotone") == pytest.approx(1.0)
    assert trend_statistic(x**2, x, "u") == pytest.approx(1.0)
    assert trend_statistic(x**2, x, "arms") == pytest.approx(1.0)
    # one arm flat-decreasing: the U statistic stays positive, the arms one does not
    half = np.where(x > 0, x, -0.1 * np.abs(x))
    assert trend_statistic(half, x, "u") > 0 and trend_statistic(half, x, "arms") < 0
    # NaN importance is left out
    xn = x.copy()
    xn[:10] = np.nan
    assert trend_statistic(x, xn, "monotone") == pytest.approx(1.0)
    # a score that is only frequency has no partial correlation given frequency
    rng = np.random.default_rng(0)
    log_df = rng.normal(size=5000)
    imp = -log_df + rng.normal(size=5000)
    score = log_df + rng.normal(size=5000)
    assert trend_statistic(score, imp, "monotone") < -0.3
    assert abs(trend_statistic(score, imp, "monotone", log_df)) < 0.05
    with pytest.raises(ValueError, match="shape"):
        trend_statistic(x, x, "flat")


def test_control_threshold():
    values = np.array([0.0, 0.1, -0.1, 0.05, -0.05])
    bound = control_threshold(values, 0.99)
    sd = values.std(ddof=1)
    # t_{0.99, 4} = 3.747
    assert bound == pytest.approx(3.747 * sd * np.sqrt(1.2), rel=1e-3)
    assert control_threshold(values, 0.9) < bound
    assert control_threshold([1.0, 1.0, 1.0]) == 1.0  # never below the largest draw
    with pytest.raises(ValueError):
        control_threshold([0.1, 0.2])


def test_control_design_quotes_the_runs_and_the_bound():
    design = control_design((1, 2, 3), (11, 12, 13, 14, 15), dim=32)
    assert design["dim"] == 32 and design["n_inits"] == 3 and design["n_shuffled"] == 5
    assert design["n_models"] == 8
    assert design["seeds"] == "1, 2, 3" and design["shuffled_seeds"] == "11 to 15"
    assert design["t_factor"] == pytest.approx(3.747, abs=1e-3)  # t_{0.99, 4}
    values = np.array([0.1, 0.2, 0.0, 0.15, 0.05])  # the bound it describes
    bound = values.mean() + design["t_factor"] * values.std(ddof=1) * np.sqrt(1.2)
    assert control_threshold(values) == pytest.approx(bound)
    assert control_design((4,), (21, 23, 22, 24))["shuffled_seeds"] == "21, 23, 22, 24"


def test_controlled_trend_separates_signal_from_control():
    rng = np.random.default_rng(1)
    V = 500
    held = rng.uniform(-1, 1, V)
    train = held + 0.1 * rng.normal(size=V)
    held[:20] = np.nan
    log_df = rng.normal(size=V)
    real = [train + 0.3 * rng.normal(size=V) for _ in range(3)]
    null = [rng.normal(size=V) for _ in range(5)]
    init = [rng.normal(size=V)]
    res = controlled_trend(
        real,
        null,
        init,
        heldout=held,
        train=train,
        log_df=log_df,
        shape="monotone",
        shuffled_train=null,
    )
    assert res.n_tokens == {"heldout": 480, "train": 500}
    assert res.values("labels", "heldout").min() > 0.8
    assert res.margin("heldout_partial") > 0.5
    assert abs(res.values("initial", "heldout")[0]) < res.thresholds["heldout"]
    assert res.values("shuffled", "own").min() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        controlled_trend(
            real,
            null[:2],
            init,
            heldout=held,
            train=train,
            log_df=log_df,
            shape="u",
        )


def test_label_control_runs():
    labels = np.array([1, 1, -1, -1, 1, -1])

    def train(seed, y):
        return {"s": y * seed}, {"s": np.zeros(6)}, {"acc": float(y.sum())}

    runs = label_control_runs(
        train,
        labels,
        seeds=[1, 2],
        shuffled_seeds=[10, 11, 12],
        rng=np.random.default_rng(0),
    )
    assert [r.kind for r in runs] == ["labels"] * 2 + ["shuffled"] * 3
    assert np.array_equal(runs[0].labels, labels)
    assert all(sorted(r.labels) == sorted(labels) for r in runs)
    assert len(scores_of(runs, "shuffled", "s")) == 3
    assert scores_of(runs, "labels", "s", initial=True)[0].sum() == 0
    assert metric_of(runs, "labels", "acc").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="distinct"):
        label_control_runs(
            train, labels, seeds=[1], shuffled_seeds=[1], rng=np.random.default_rng(0)
        )


def _tiny_corpus(seed: int = 0, n: int = 120, V: int = 12):
    """Sequences whose label follows tokens 0 (positive) and 1 (negative)."""
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < 0.5, 1, -1)
    seqs = [
        np.concatenate([[0 if y > 0 else 1], rng.integers(2, V, size=5)])
        for y in labels
    ]
    return TokenCounts.from_sequences(seqs, V), labels


def test_trainers_runs_trend_and_tables():
    from attnbook.book.controls import control_table, metric_table, runs_trend
    from attnbook.experiments.importance import token_importance
    from attnbook.experiments.trainers import (
        mlp_trainer,
        multiclass_trainer,
        one_layer_trainer,
        two_layer_trainer,
    )

    train, y = _tiny_corpus(0)
    test, y_test = _tiny_corpus(1)
    kw = dict(dim=4, steps=30, lr=5e-2)
    runs = label_control_runs(
        one_layer_trainer(train, test, y_test, **kw),
        y,
        seeds=[0, 1, 2],
        shuffled_seeds=[10, 11, 12],
        rng=np.random.default_rng(0),
    )
    assert metric_of(runs, "labels", "test accuracy").min() > 0.9
    held = token_importance(test, y_test)
    trend = runs_trend(
        runs,
        "E.v",
        shape="monotone",
        heldout=held,
        train=token_importance(train, y),
        log_df=np.log(documents_per_token(train)),
    )
    # token 0 (I = 1) must rank first: the real runs correlate, the initial ones less
    assert (
        trend.values("labels", "heldout").min()
        > trend.values("initial", "heldout").max()
    )
    table = control_table({"E.v": trend})
    assert list(table.index) == [("E.v", "ρ"), ("E.v", "partial ρ")]
    assert "threshold" in table.columns
    assert set(metric_table(runs).index) == {"labels", "shuffled"}
    mlp_alone = mlp_trainer(train, test, y_test, **kw, linear=False)(3, y)
    with_linear = mlp_trainer(train, test, y_test, **kw)(3, y)
    assert set(mlp_alone[0]) == {"E.v", "E.p", "g"}
    assert set(mlp_alone[2]) == {"train accuracy", "test accuracy"}
    for name, score in mlp_alone[0].items():  # the MLP's numbers, bit for bit
        assert np.array_equal(score, with_linear[0][name])
    assert mlp_alone[2]["test accuracy"] == with_linear[2]["test accuracy"]
    for trainer, names in (
        (mlp_trainer(train, test, y_test, **kw), {"E.v", "E.p", "g", "linear E.v"}),
        (two_layer_trainer(train, test, y_test, **kw), {"E.v", "E.q", "E.p"}),
    ):
        scores, initial, metrics = trainer(3, y)
        assert names <= set(scores) and set(initial) == set(scores)
        assert 0 <= metrics["test accuracy"] <= 1
    classes = (y > 0).astype(np.int64)
    scores, _, metrics = multiclass_trainer(
        train, test, (y_test > 0).astype(np.int64), n_classes=2, **kw
    )(0, classes)
    assert scores["E.W"].shape == (12, 2) and metrics["test accuracy"] > 0.9


def test_u_comparison():
    from attnbook.experiments.extensions import REBUTTAL_MLP_CLS, u_comparison

    x = np.linspace(-1, 1, 2001)
    table = u_comparison(x, [x**2, x**2 + 1], REBUTTAL_MLP_CLS)
    assert len(table) == 20 and table["paper: centre"].iloc[0] == -0.95
    assert table["book: max"].iloc[0] - table["book: min"].iloc[0] == pytest.approx(1)
    assert table["book: mean"].idxmin() in (9, 10)


def test_book_checks_of_a_trend(make_trend):
    from attnbook.book import records
    from attnbook.book.controls import check_initial, control_design, trend_checks

    trend = make_trend()
    records.start_record("controls_test")
    c7 = trend_checks({"a": trend}, claim="C7a")
    low = c7("t", "a", "heldout", what="test")
    assert low == trend.values("labels", "heldout").min()
    assert records.GLUED["t_threshold"] == trend.thresholds["heldout"]
    assert check_initial("t0", {"a": trend}, claim="C7a", what="test") <= 5
    # the limit it applies is the one control_design quotes
    limit = control_design((1,), (2, 3))["initial_limit"]
    assert records.CHECKS[-1].threshold == limit
    weak = dataclasses.replace(
        trend, thresholds={"heldout": 2.0, "heldout_partial": 2.0}
    )
    weak_check = trend_checks({"w": weak}, claim="C7a")
    weak_check("t2", "w", "heldout", what="test", asserted=False)
    assert not records.CHECKS[-1].passed and not records.CHECKS[-1].asserted
    assert records.CHECKS[-1].spread is None  # none unless given
    c7("t4", "a", "heldout", what="test", spread=0.25)
    assert records.CHECKS[-1].spread == 0.25
    with pytest.raises(AssertionError):
        weak_check("t3", "w", "heldout", what="test")


def test_a_block_of_trend_checks_shares_claim_result_and_words(make_trend):
    from attnbook.book import records
    from attnbook.book.controls import INITIAL_WHAT, check_initial, trend_checks

    records.start_record("controls_block")
    trends = {"a": make_trend()}
    c7 = trend_checks(trends, claim="C7a", result="conj-x", what={"t": "words"})
    low = c7("t", "a", "heldout")
    c7("u", "a", "heldout_partial", reading="book")
    assert low == trends["a"].values("labels", "heldout").min()
    t, u = records.CHECKS[-2:]
    assert (t.claim, t.result, t.what, t.reading) == ("C7a", "conj-x", "words", "paper")
    assert (u.result, u.what, u.reading) == ("conj-x", None, "book")
    check_initial("i", trends, claim="C7a", result="conj-x")
    assert records.CHECKS[-1].what == INITIAL_WHAT
    assert records.CHECKS[-1].result == "conj-x"
    assert t.spread is None and records.CHECKS[-1].spread is None


def test_trend_checks_record_the_range_over_initialisations_as_spread(make_trend):
    from attnbook.book import records
    from attnbook.book.controls import trend_checks

    records.start_record("controls_spread")
    trends = {"a": make_trend()}
    values = trends["a"].values("labels", "heldout_partial")
    assert trends["a"].seed_range("heldout_partial") == values.max() - values.min()
    c7 = trend_checks(trends, claim="C7a", seed_spread=True)
    c7("s", "a", "heldout_partial")
    c7("r", "a", "heldout", spread=0.5, asserted=False)
    s, r = records.CHECKS[-2:]
    assert s.spread == pytest.approx(trends["a"].seed_range("heldout_partial"))
    assert s.spread > 0 and r.spread == 0.5 and not r.asserted


def test_heldout_measures_leave_out_rare_tokens():
    from types import SimpleNamespace

    from attnbook.book.controls import heldout_measures
    from attnbook.experiments.importance import token_importance

    train, y = _tiny_corpus(0)
    test, y_test = _tiny_corpus(1, n=30)
    df = documents_per_token(train)
    corpus = SimpleNamespace(
        train=train,
        train_labels=y,
        test=test,
        test_labels=y_test,
        vocabulary=SimpleNamespace(document_frequency=np.maximum(df, 1)),
    )
    measure, left_out = heldout_measures(corpus, 10)
    assert set(measure) == {"heldout", "train", "log_df"}
    np.testing.assert_array_equal(measure["train"], token_importance(train, y))
    rare = documents_per_token(test) < 10
    assert np.isnan(measure["heldout"][rare]).all()
    assert left_out == int((rare & np.isfinite(token_importance(test, y_test))).sum())


def test_controls_figure_and_binned_panels_draw_every_series(make_trend):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbook.book.controls import (
        Run,
        binned_panels,
        controls_figure,
        seed_series,
    )

    fig = controls_figure({"a": make_trend(), "b": make_trend(4)}, row_height=2.0)
    assert fig.axes[0].get_yticklabels()[0].get_text() == "b"
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 500)
    runs = [
        Run(kind, seed, np.ones(3), {"s": x + rng.normal(size=500)}, {}, {})
        for kind, seed in (("labels", 1), ("labels", 2), ("shuffled", 9))
    ]
    series = seed_series(x, runs, "s", ["r", "g"], shuffled="k")
    assert list(series) == ["seed 1", "seed 2", "shuffled labels"]
    assert series["shuffled labels"][1] is runs[2].scores["s"]
    fig = binned_panels([("t", "y", series), ("u", "y", series)], scaled=True)
    first, second = fig.axes
    assert len(first.get_lines()) >= 3 and first.get_legend() is not None
    assert first.get_title() == "t" and second.get_legend() is not None
    only = binned_panels([("t", "y", series)], legends=())
    assert only.axes[0].get_legend() is None
    plt.close("all")


def _fixed_trend(labels: list[float], shuffled: list[float]):
    from attnbook.book.controls import ControlledTrend

    rows = {("labels", i): {"heldout": v} for i, v in enumerate(labels)}
    rows |= {("shuffled", i): {"heldout": v} for i, v in enumerate(shuffled)}
    runs = pd.DataFrame(rows).T
    runs.index = runs.index.set_names(["kind", "run"])
    bound = control_threshold(shuffled)
    return ControlledTrend("arms", runs, {"heldout": bound}, 0.99, {"heldout": 100})


def test_redrawn_margin_in_units_of_its_spread_and_its_failure_rate():
    null = [0.0, 0.01, -0.01, 0.005, -0.005]
    clear = redrawn_margin(
        _fixed_trend([0.5, 0.52, 0.48], null), "heldout", np.random.default_rng(0)
    )
    assert clear["margin"] == pytest.approx(0.48 - control_threshold(null))
    assert clear["z"] > 10 and clear["fail"] == 0
    close = _fixed_trend([0.045, 0.06, 0.075], null)
    base = redrawn_margin(close, "heldout", np.random.default_rng(0))
    assert 0.05 < base["fail"] < 0.95 and base["sd"] > 0
    # more shuffled runs tighten the threshold; more initialisations lower the minimum
    more_null = redrawn_margin(
        close, "heldout", np.random.default_rng(0), n_shuffled=20
    )
    more_real = redrawn_margin(close, "heldout", np.random.default_rng(0), n_labels=10)
    assert more_null["fail"] < base["fail"] < more_real["fail"]
    with pytest.raises(ValueError, match=">= 3"):
        redrawn_margin(close, "heldout", np.random.default_rng(0), n_shuffled=2)
    with pytest.raises(ValueError, match="two real-label"):
        redrawn_margin(_fixed_trend([0.5], null), "heldout", np.random.default_rng(0))
