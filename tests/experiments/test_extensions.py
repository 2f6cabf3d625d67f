import numpy as np
import pytest

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.extensions import (
    bin_monotonicity,
    class_importance,
    imdb_rating_bands,
    trend_statistics,
    yelp_star_classes,
)


def test_class_maps():
    assert yelp_star_classes(np.array([1, 2, 4, 5, 5])).tolist() == [0, 1, 2, 3, 3]
    assert imdb_rating_bands(np.array([1, 2, 3, 4, 7, 8, 9, 10])).tolist() == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]
    with pytest.raises(ValueError, match="3-star"):
        yelp_star_classes(np.array([3]))
    with pytest.raises(ValueError, match="1-4 or 7-10"):
        imdb_rating_bands(np.array([5]))


def test_class_importance_one_vs_rest():
    # token 0 only in class 0, token 1 everywhere, token 2 only in classes 1 and 2
    seqs = [[0, 1], [1, 2], [1, 2], [0, 1]]
    counts = TokenCounts.from_sequences(seqs, 3)
    imp = class_importance(counts, np.array([0, 1, 2, 0]), 3)
    assert imp.shape == (3, 3)
    assert imp[0, 0] == 1.0 and imp[0, 1] == -1.0 and imp[0, 2] == -1.0
    assert np.allclose(imp[1], 0.0)
    with pytest.raises(ValueError):
        class_importance(counts, np.array([0, 1, 3, 0]), 3)


def test_monotonicity_and_trend():
    x = np.linspace(-1, 1, 400)
    assert bin_monotonicity(x, x) == 1.0
    assert bin_monotonicity(x, -x) == 0.0
    rng = np.random.default_rng(0)
    out = trend_statistics(
        x, x**2 + 0.01 * rng.normal(size=x.size), rng, shape="u", n_boot=50
    )
    assert (
        out["rho"] > 0.95
        and out["low"] <= out["rho"] <= out["high"]
        and out["monotone"] == 1.0
    )
    x_nan = x.copy()
    x_nan[0] = np.nan
    assert trend_statistics(x_nan, x, rng, n_boot=20)["n_tokens"] == 399
    with pytest.raises(ValueError, match="shape"):
        trend_statistics(x, x, rng, shape="w")
