"""Learning curves, robustness statistics and the synthetic picture of the real-data
chapter."""

import numpy as np
import pytest
import torch

from attnbook.data.corpus import build_review_corpus
from attnbook.experiments.curves import (
    ABLATIONS,
    Dynamics,
    ablation_curves,
    first_step_reaching,
    log_steps,
    spread_curves,
    train_curve,
)
from attnbook.experiments.importance import (
    bin_statistics,
    mean_within_bin_std,
    observed_range,
    partial_spearman,
    spearman,
)
from attnbook.experiments.real_data import starting_points
from attnbook.experiments.robustness import (
    PICTURE_STATISTICS,
    balanced_indices,
    picture_correlations,
)
from attnbook.experiments.synthetic_picture import (
    CountsCorpus,
    one_relevant_spec,
    relevant_per_sequence,
    synthetic_corpus,
)
from attnbook.theory.one_step import one_gradient_step


def _corpus():
    pos = [f"good great fun {w}" for w in ("film", "plot", "cast", "score")] * 3
    neg = [f"bad awful boring {w}" for w in ("film", "plot", "cast")] * 3
    test = ["good film", "bad plot", "great cast", "awful score"]
    return build_review_corpus(
        pos + neg, [1] * len(pos) + [0] * len(neg), test, [1, 0, 1, 0], min_df=1
    )


# ------------------------------------------------------------------------- importance
def test_observed_range_ignores_nan_and_needs_two_values():
    assert observed_range([0.5, np.nan, -0.25, 0.1]) == (-0.25, 0.5)
    with pytest.raises(ValueError, match="two distinct"):
        observed_range([0.3, 0.3, np.nan])


def test_mean_within_bin_std_token_and_bin_weighting():
    # bin [0, 0.5): four tokens with std 1; bin [0.5, 1]: two tokens with std 3
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.8, 0.9])
    v = np.array([-1.0, 1.0, -1.0, 1.0, -3.0, 3.0])
    tokens = mean_within_bin_std(x, v, 2, 0.0, 1.0, weighting="tokens")
    bins = mean_within_bin_std(x, v, 2, 0.0, 1.0, weighting="bins")
    assert tokens == pytest.approx((4 * 1 + 2 * 3) / 6)
    assert bins == pytest.approx(2.0)
    stats = bin_statistics(x, v, 2, 0.0, 1.0)
    assert stats["std"].tolist() == pytest.approx([1.0, 3.0])
    # a bin with one token has no spread and is left out
    x1, v1 = np.append(x, 0.6), np.append(v, 100.0)
    assert mean_within_bin_std(x1, v1, 4, 0.0, 1.0, weighting="bins") == pytest.approx(
        np.mean([1.0, 1.0, 3.0])
    )
    with pytest.raises(ValueError, match="no bin"):
        mean_within_bin_std(x[[0, 4]], v[[0, 4]], 2, 0.0, 1.0)


def test_partial_spearman_removes_a_shared_driver():
    rng = np.random.default_rng(0)
    z = rng.normal(size=4000)
    x = z + 0.3 * rng.normal(size=z.size)
    y = z + 0.3 * rng.normal(size=z.size)
    assert spearman(x, y) > 0.8
    assert abs(partial_spearman(x, y, z)) < 0.1
    # a monotone transform of z changes nothing (ranks)
    assert partial_spearman(x, y, np.exp(z)) == pytest.approx(partial_spearman(x, y, z))
    # with an unrelated z it is the plain rank correlation, nearly
    w = rng.normal(size=z.size)
    assert partial_spearman(x, y, w) == pytest.approx(spearman(x, y), abs=0.01)
    with pytest.raises(ValueError, match="same length"):
        partial_spearman(x, y[:-1], z)


# ------------------------------------------------------------------------- robustness
def test_balanced_indices():
    y = np.array([1] * 7 + [-1] * 3)
    rows = balanced_indices(y, np.random.default_rng(1))
    assert rows.tolist() == sorted(rows.tolist())
    assert (y[rows] == 1).sum() == (y[rows] == -1).sum() == 3
    assert set(np.flatnonzero(y == -1)) <= set(rows.tolist())
    again = balanced_indices(y, np.random.default_rng(1))
    assert again.tolist() == rows.tolist()
    with pytest.raises(ValueError, match="two classes"):
        balanced_indices(np.ones(4), np.random.default_rng(0))
    with pytest.raises(ValueError, match="Generator"):
        balanced_indices(y, 0)


def test_picture_correlations_on_an_exact_picture():
    imp = np.linspace(-1, 1, 41)
    value, cls = 2 * imp, imp**2
    df = np.arange(41) % 5 + 1.0
    out = picture_correlations(
        np.append(imp, np.nan), *(np.append(a, 0.0) for a in (value, cls, df))
    )
    assert set(out) == set(PICTURE_STATISTICS)
    assert out["value"] == pytest.approx(1.0)
    assert out["cls"] == pytest.approx(1.0)
    assert out["cls_neg"] == pytest.approx(-1.0) and out["cls_pos"] == pytest.approx(
        1.0
    )
    assert out["value_given_df"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shape"):
        picture_correlations(imp, value[:-1], cls, df)


#: Small starting points: dimension, scale of E, the one step, in float64
CFG = dict(dim=8, sigma=0.01, eta=5.0, dtype=torch.float64)


def test_starting_points_share_one_draw():
    c = _corpus()
    pts = starting_points(c, **CFG, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(pts.random_E["E"], pts.init["E"] / CFG["sigma"])
    E1 = one_gradient_step(
        pts.init, c.train, c.labels("train", dtype=torch.float64), 5.0
    )
    torch.testing.assert_close(pts["one_step"]["E"], E1)
    for key in ("random_E", "one_step"):
        torch.testing.assert_close(pts[key]["p"], pts.init["p"])
    with pytest.raises(ValueError, match="sigma"):
        starting_points(c, **(CFG | {"sigma": 0.0}), generator=torch.Generator())


# ------------------------------------------------------------------------------ curves
def test_dynamics_validation_and_groups():
    with pytest.raises(ValueError, match="optimizer"):
        Dynamics("sgd", {"E": 1.0})
    with pytest.raises(ValueError, match="positive"):
        Dynamics("gd", {"E": -1.0})
    with pytest.raises(ValueError, match="unknown parameter groups"):
        Dynamics("gd", {"W": 1.0})
    assert Dynamics.adam(1e-3).lr == {"E": 1e-3, "p": 1e-3, "v": 1e-3}


def test_log_steps():
    steps = log_steps(1000, 4)
    assert steps[0] == 0 and steps[1] == 1 and steps[-1] == 1000
    assert list(steps) == sorted(set(steps))
    assert len(steps) <= 4 * 3 + 2
    assert log_steps(1) == (0, 1)
    with pytest.raises(ValueError, match="budget"):
        log_steps(0)


def test_train_curve_records_and_respects_frozen_groups():
    c = _corpus()
    pts = starting_points(c, **CFG, generator=torch.Generator().manual_seed(0))
    dyn = Dynamics("gd", {"p": 0.5, "v": 0.5})
    curve = train_curve(
        pts.one_step, c, trainable=("p", "v"), dynamics=dyn, eval_steps=(0, 1, 5, 20)
    )
    assert curve.steps == [0, 1, 5, 20]
    assert set(curve.metrics) == {
        "train_loss",
        "train_accuracy",
        "test_loss",
        "test_accuracy",
    }
    torch.testing.assert_close(curve.params["E"], pts.one_step["E"])  # E frozen
    assert not torch.equal(curve.params["v"], pts.one_step["v"])
    assert curve.metrics["train_loss"][-1] < curve.metrics["train_loss"][0]
    # the starting parameters are left alone
    assert not pts.one_step["v"].requires_grad
    value, cls = curve.scores[20]
    torch.testing.assert_close(
        torch.from_numpy(value), curve.params["E"] @ curve.params["v"]
    )
    assert (
        first_step_reaching(curve, "train_loss", curve.at(5)["train_loss"], below=True)
        <= 5
    )
    assert first_step_reaching(curve, "train_accuracy", 2.0, below=False) is None
    with pytest.raises(ValueError, match="no metric"):
        first_step_reaching(curve, "val_loss", 0.1, below=True)
    with pytest.raises(ValueError, match="trainable"):
        train_curve(pts.init, c, trainable=("W",), dynamics=dyn, eval_steps=(1,))
    head_only = Dynamics("gd", {"p": 0.5, "v": 0.25})
    with pytest.raises(ValueError, match="no step size"):
        train_curve(pts.init, c, trainable=("E",), dynamics=head_only, eval_steps=(1,))


def test_ablation_curves_and_spread_ratios():
    c = _corpus()
    pts = starting_points(c, **CFG, generator=torch.Generator().manual_seed(0))
    steps = (0, 1, 3, 10)
    curves = ablation_curves(c, pts, {"a": Dynamics.adam(1e-2)}, steps)
    assert set(curves) == {(k, "a") for k in ABLATIONS}
    for curve in curves.values():
        assert {m.partition("_")[0] for m in curve.metrics} == {"train", "test"}
        assert max(curve.steps) == 10
    imp = np.linspace(-1, 1, c.vocab_size)
    same = spread_curves(
        imp, curves[("full", "a")], curves[("full", "a")], lo=-1, hi=1, n_bins=2
    )
    assert np.allclose(same["ratio"], 1.0)
    assert set(same["reading"]) == {"tokens", "bins", "scale-free"}
    assert sorted(set(same["step"])) == [1, 3, 10]
    with pytest.raises(ValueError, match="unknown models"):
        ablation_curves(c, pts, {"a": Dynamics.adam(1e-2)}, steps, models=("mlp",))


# --------------------------------------------------------------------------- synthetic
def test_synthetic_corpus_one_relevant_token_on_average():
    spec = one_relevant_spec(5, 50, 20)
    assert spec.relevant_rate == pytest.approx(1 / 20) and spec.opposite_rate == 0
    corpus, data = synthetic_corpus(spec, 4000, 10, np.random.default_rng(0))
    assert isinstance(corpus, CountsCorpus) and corpus.vocab_size == 60
    k = relevant_per_sequence(data)
    assert k.mean() == pytest.approx(1.0, abs=0.05)
    # independent positions: exactly one relevant token with probability
    # T q (1 - q)^(T - 1)
    assert (k == 1).mean() == pytest.approx(20 * (1 / 20) * (19 / 20) ** 19, abs=0.03)
    y = corpus.labels("train", dtype=torch.float64)
    assert y.shape == (4000,) and set(y.tolist()) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="length"):
        one_relevant_spec(5, 50, 1)
    # conditioned on Assumption 1: every sequence holds exactly one relevant token, of
    # its own class
    cond, data = synthetic_corpus(
        spec, 300, 10, np.random.default_rng(1), exactly_one=True
    )
    assert cond.train.n_sequences == 300
    assert (relevant_per_sequence(data) == 1).all()
    cls = spec.token_class
    for seq, y in zip(data.sequences, data.labels):
        assert set(cls[seq]) <= {0, int(y)}


# ------------------------------------------------------------------- paper's numbers
def _fake_curve(acc, loss, steps=(0, 1, 10, 100)):
    from attnbook.experiments.curves import Curve

    return Curve(
        steps=list(steps),
        metrics={
            "train_accuracy": list(acc),
            "train_loss": list(loss),
            "test_accuracy": [a - 0.1 for a in acc],
            "test_loss": [x + 0.2 for x in loss],
        },
    )


def test_paper_number_table_and_matching_steps():
    from paper_protocol import matching_steps, paper_number_table, window_steps

    curves = {
        ("full", "a"): _fake_curve([0.5, 0.8, 0.96, 0.99], [0.7, 0.4, 0.09, 0.02]),
        ("random_E", "a"): _fake_curve([0.5, 0.6, 0.72, 0.8], [0.7, 0.65, 0.6, 0.5]),
        ("one_step_head", "a"): _fake_curve([0.5] * 4, [0.7] * 4),
    }
    table = paper_number_table(curves)
    assert len(table) == 4  # two models with a paper number, two splits
    row = table.loc[("a", "trained E", "train")]
    assert row["step: paper acc."] == 10
    assert row["step: paper loss"] == 10
    assert row["best acc."] == 0.99
    test_row = table.loc[("a", "trained E", "test")]
    assert np.isnan(test_row["step: paper acc."])  # 0.89 at most
    assert matching_steps(curves, "a", "train", accuracy_tol=0.011, loss_tol=0.011) == [
        10
    ]
    assert matching_steps(curves, "a", "test", accuracy_tol=0.01, loss_tol=0.01) == []
    # the same window for both models: above 95% by more than the rounding is out
    assert window_steps(curves[("full", "a")], "full", "train") == []  # 0.96, 0.99
    assert window_steps(
        curves[("full", "a")],
        "full",
        "train",
        rounding={"accuracy": 0.011, "loss": 0.05},
    ) == [10]
    assert window_steps(curves[("random_E", "a")], "random_E", "train") == [10]
    assert matching_steps(curves, "a", "train") == []  # at the paper's own rounding


def test_accuracy_gap():
    from paper_protocol import accuracy_statistics

    full = _fake_curve([0.5, 0.8, 0.9, 0.85], [0.7] * 4)
    rand = _fake_curve([0.5, 0.6, 0.7, 0.72], [0.7] * 4)
    out = accuracy_statistics([full, full], [rand, rand], 100)[0]  # two seeds
    assert out["best_acc"] == pytest.approx(0.8)
    assert out["random_best"] == pytest.approx(0.62)
    assert out["gap_min"] == pytest.approx(0.18)
    assert out["se_max"] == pytest.approx(np.sqrt((0.8 * 0.2 + 0.62 * 0.38) / 100))


def test_crossing_steps():
    import pandas as pd
    from paper_protocol import crossing_steps

    frame = pd.DataFrame(
        {
            "step": [1, 10, 100, 1, 10, 100],
            "score": ["E.v"] * 6,
            "reading": ["tokens"] * 3 + ["bins"] * 3,
            "ratio": [0.5, 0.1, 0.3, 0.9, 0.8, 0.7],
        }
    )
    out = crossing_steps(frame, "E.v")
    assert out["tokens"] == 10 and np.isnan(out["bins"])


# ----------------------------------------------------------------------------- picture
def test_gradient_descent_in_two_roundings_agrees_at_small_scale():
    """Section 4.9 runs gradient descent twice, with the step that sweeps over E once
    and with the autograd step: in float64, away from the edge of stability, the two
    end at the same scores to rounding (1e-9 relative), and both moved them."""
    c = _corpus()
    pts = starting_points(c, **CFG, generator=torch.Generator().manual_seed(0))
    gd = Dynamics("gd", {g: 0.1 for g in "Epv"})
    fused, autograd = (
        train_curve(
            pts.init,
            c,
            trainable=("E", "p", "v"),
            dynamics=gd,
            eval_steps=(0, 5),
            fused=f,
        )
        for f in (True, False)
    )
    assert fused.steps == autograd.steps == [0, 5]
    for a, b, start in zip(fused.scores[5], autograd.scores[5], fused.scores[0]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        assert np.abs(a - start).max() > 1e-6


@pytest.mark.skipif(
    not __import__("os").environ.get("ATTNBOOK_DATA_DIR"),
    reason="needs ATTNBOOK_DATA_DIR",
)
def test_reviews_for_vocabulary_matches_prepare_and_balances():
    from attnbook.data.corpus import prepare_reviews
    from attnbook.experiments.robustness import reviews_for_vocabulary

    corpus, min_df = reviews_for_vocabulary("yelp", 5_424)
    ref = prepare_reviews("yelp", min_df)
    assert corpus.vocabulary.tokens == ref.vocabulary.tokens
    assert np.array_equal(corpus.train_labels, ref.train_labels)
    assert np.array_equal(corpus.test_stars, ref.test_stars)
    bal, _ = reviews_for_vocabulary("yelp", 5_424, np.random.default_rng(7))
    for split in ("train", "test"):
        y = getattr(bal, f"{split}_labels")
        assert (y == 1).sum() == (y == -1).sum()
    again, _ = reviews_for_vocabulary("yelp", 5_424, np.random.default_rng(7))
    assert again.vocabulary.tokens == bal.vocabulary.tokens
