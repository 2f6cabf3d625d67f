import numpy as np
import pytest

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.controls import (
    bin_profiles,
    control_threshold,
    controlled_trend,
    documents_per_token,
    leave_out_rare,
    rising_arms,
    trend_statistic,
)
from attnbook.experiments.seeded_runs import label_control_runs, metric_of, scores_of


def test_documents_and_rare_tokens():
    counts = TokenCounts.from_sequences([[0, 0, 1], [0, 2], [0, 1]], 4)
    assert documents_per_token(counts).tolist() == [3, 2, 1, 0]
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
    summary = res.summary()
    assert summary.loc["raw ρ, held-out importance", "threshold"] == pytest.approx(
        res.thresholds["heldout"]
    )
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


def test_bin_profiles_and_arms():
    x = np.linspace(-1, 1, 2001)
    prof = bin_profiles(x, [x**2, np.abs(x) + 1], n_bins=20, lo=-1, hi=1)
    assert prof.shape == (20, 2)
    assert rising_arms(prof[0]) == (1.0, 1.0)
    assert rising_arms(-prof[0]) == (0.0, 0.0)


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
