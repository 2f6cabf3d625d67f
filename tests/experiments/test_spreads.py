"""The spread of a check's statistic over its repeats (attnbook.experiments.spreads)."""

from __future__ import annotations

import numpy as np
import pytest

from attnbook.experiments.spreads import (
    group_spread,
    smallest_trend_margin,
    spread_over,
    trend_spread,
)


def test_spread_over_is_the_sample_standard_deviation():
    assert spread_over([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert spread_over(np.array([[0.5], [0.5]])) == 0.0
    with pytest.raises(ValueError, match="two repeats"):
        spread_over([1.0])
    with pytest.raises(ValueError, match="finite"):
        spread_over([1.0, np.nan])


def test_group_spread_takes_the_share_within_each_repeat():
    hits = [True, True, False, True, True, True]
    groups = [0, 0, 0, 1, 1, 1]
    # shares 2/3 and 1: standard deviation |1 - 2/3| / sqrt(2)
    assert group_spread(hits, groups) == pytest.approx((1 / 3) / np.sqrt(2))
    assert group_spread([True] * 4, [0, 0, 1, 1]) == 0.0  # every repeat agrees
    assert group_spread([True, False], [7, 7]) is None  # one repeat: no spread
    with pytest.raises(ValueError, match="must match"):
        group_spread([True, False], [0])


def test_the_smallest_margin_comes_with_the_spread_of_its_own_trend(make_trend):
    strong = make_trend(1, n=300, signal=5.0, noise=1.0)
    weak = make_trend(2, n=300, signal=0.5, noise=1.0)
    margin, sd = smallest_trend_margin({"strong": strong, "weak": weak}, "heldout")
    assert margin == weak.margin("heldout")
    assert margin == min(t.margin("heldout") for t in (strong, weak))
    assert sd == trend_spread(weak, "heldout")
    assert sd == pytest.approx(weak.values("labels", "heldout").std(ddof=1))
    with pytest.raises(ValueError, match="at least one"):
        smallest_trend_margin({}, "heldout")
