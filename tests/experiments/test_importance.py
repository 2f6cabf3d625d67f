import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.importance import (
    bin_statistics,
    bootstrap_rank_correlation,
    document_class_counts,
    spearman,
    token_importance,
    within_bin_spread,
)


def _corpus():
    # token 0: positive docs only; 1: negative only; 2: everywhere; 3: twice in one
    # positive doc
    seqs = [[0, 2, 3, 3], [0, 2], [0, 2], [1, 2], [1, 2, 2]]
    return TokenCounts.from_sequences(seqs, 5), np.array([1, 1, 1, -1, -1])


def test_document_class_counts_count_documents_not_occurrences():
    counts, y = _corpus()
    n_pos, n_neg = document_class_counts(counts, y)
    assert n_pos.tolist() == [3, 0, 3, 1, 0]
    assert n_neg.tolist() == [0, 2, 2, 0, 0]
    # torch labels give the same answer; 0/1 labels are refused (one label policy)
    n_pos_t, _ = document_class_counts(counts, torch.tensor(y))
    assert n_pos_t.tolist() == n_pos.tolist()
    with pytest.raises(ValueError, match="-1 or \\+1"):
        document_class_counts(counts, torch.tensor((y + 1) // 2))


def test_token_importance_empirical_and_balanced():
    counts, y = _corpus()
    emp = token_importance(counts, y, balanced=False)
    assert emp[0] == 1 and emp[1] == -1 and emp[3] == 1
    assert emp[2] == pytest.approx((3 - 2) / 5)
    assert np.isnan(emp[4])
    bal = token_importance(counts, y)  # 3 positive, 2 negative documents
    # token 2 occurs in every document of both classes: no evidence either way
    assert bal[2] == pytest.approx(0.0)
    assert bal[0] == 1 and bal[1] == -1


def test_balanced_equals_empirical_on_balanced_data():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 20, size=rng.integers(1, 8)) for _ in range(40)]
    counts = TokenCounts.from_sequences(seqs, 20)
    y = np.repeat([1, -1], 20)
    a, b = token_importance(counts, y), token_importance(counts, y, balanced=False)
    ok = ~np.isnan(a)
    np.testing.assert_allclose(a[ok], b[ok])
    assert np.all(np.abs(a[ok]) <= 1)


def test_importance_errors():
    counts, y = _corpus()
    with pytest.raises(ValueError, match="lengths must match"):
        token_importance(counts, y[:3])
    with pytest.raises(ValueError, match="single class"):
        token_importance(counts, np.ones(5))
    with pytest.raises(ValueError, match=r"-1 or \+1"):
        token_importance(counts, np.array([0, 1, 2, 1, 0]))
    with pytest.raises(ValueError, match="TokenCounts"):
        token_importance([[0, 1]], y)


def test_bin_statistics_hand_computed():
    x = np.array([-1.0, -0.95, -0.2, 0.0, 0.05, 1.0])
    vals = np.array([1.0, 3.0, 5.0, 2.0, 4.0, 7.0])
    st = bin_statistics(x, vals, n_bins=4)
    assert isinstance(st, pd.DataFrame) and len(st) == 4
    assert st["center"].tolist() == [-0.75, -0.25, 0.25, 0.75]
    assert st["count"].tolist() == [2, 1, 2, 1]  # x == 1 lands in the last bin
    np.testing.assert_allclose(st["mean"], [2.0, 5.0, 3.0, 7.0])
    np.testing.assert_allclose(st["std"], [1.0, 0.0, 1.0, 0.0])
    empty = bin_statistics(np.array([0.12, 0.13]), np.array([1.0, 2.0]), n_bins=20)
    assert empty["count"].sum() == 2 and empty["mean"].isna().sum() == 19


def test_bin_statistics_errors():
    with pytest.raises(ValueError, match="lie in"):
        bin_statistics([0.0, 1.5], [1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        bin_statistics([0.0, 0.5], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        bin_statistics([np.nan, 0.5], [1.0, 2.0])
    with pytest.raises(ValueError, match="n_bins"):
        bin_statistics([0.0], [1.0], n_bins=0)


def test_within_bin_spread():
    x = np.array([-0.9, -0.8, 0.8, 0.9])
    exact = np.array([-1.0, -1.0, 1.0, 1.0])  # every value on its bin mean
    assert within_bin_spread(x, exact, n_bins=2) == 0.0
    noisy = np.array(
        [-2.0, 0.0, 0.0, 2.0]
    )  # bin means -1, 1; within std 1; overall std sqrt(2)
    assert within_bin_spread(x, noisy, n_bins=2) == pytest.approx(1 / np.sqrt(2))
    # relative spread is scale-free
    assert within_bin_spread(x, 10 * noisy, 2) == pytest.approx(
        within_bin_spread(x, noisy, 2)
    )


def test_spearman_matches_scipy_and_bootstrap_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    y = x + rng.normal(size=300)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    r = bootstrap_rank_correlation(x, y, 200, np.random.default_rng(2))
    assert r.low < r.estimate < r.high and r.low > 0.4
    again = bootstrap_rank_correlation(x, y, 200, np.random.default_rng(2))
    assert again == r  # deterministic for a given generator state
    # independent samples: the interval has the width 2 * 1.96 / sqrt(n) of the null
    z = rng.normal(size=300)
    r0 = bootstrap_rank_correlation(x, z, 400, np.random.default_rng(3))
    width = 2 * 1.96 / np.sqrt(300)
    assert 0.7 * width < r0.high - r0.low < 1.3 * width
    assert r0.low <= r0.estimate <= r0.high


def test_bootstrap_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_rank_correlation([1.0, 2, 3], [1.0, 2, 3], 5, rng)
    with pytest.raises(ValueError, match="Generator"):
        bootstrap_rank_correlation([1.0, 2, 3], [1.0, 2, 3], 50, 0)
    with pytest.raises(ValueError, match="same length"):
        bootstrap_rank_correlation([1.0, 2, 3], [1.0, 2], 50, rng)


def test_plot_binned_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbook.book.plotting import plot_binned

    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 300)
    x[:5] = np.nan  # tokens without importance are left out
    fig, ax = plt.subplots()
    stats = plot_binned(ax, x, 2 * np.nan_to_num(x), label="a", min_count=5, band=False)
    assert (stats["count"] >= 5).all() and stats["count"].sum() <= 295
    assert ax.get_xlim() == (-1.0, 1.0)
    assert (
        len(ax.lines) == 2 and not ax.collections
    )  # the line and the zero line, no band
    plot_binned(ax, x, x, color="red")
    assert len(ax.collections) == 1
    with pytest.raises(ValueError, match="one length"):
        plot_binned(ax, x, x[:-1])
    plt.close(fig)
