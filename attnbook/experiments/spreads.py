"""A check's spread: the standard deviation of its statistic over the repeated runs
(seeds, initialisations, data draws) it is made over."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd


def spread_over(values: object) -> float:
    """The standard deviation (``ddof=1``) over two or more finite repeats."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"a spread needs at least two repeats, got {v.size}")
    if not np.isfinite(v).all():
        raise ValueError("every repeat's statistic must be finite")
    return float(v.std(ddof=1))


def group_spread(hits: object, groups: object) -> float | None:
    """:func:`spread_over` the groups (repeats) of the share of ``hits`` in each;
    ``None`` with fewer than two groups."""
    h = np.asarray(hits, dtype=np.float64).ravel()
    g = np.asarray(groups).ravel()
    if h.shape != g.shape:
        raise ValueError(f"hits ({h.size}) and groups ({g.size}) must match")
    shares = pd.Series(h).groupby(g).mean()
    return spread_over(shares) if len(shares) >= 2 else None


def trend_spread(trend: object, statistic: str) -> float:
    """:func:`spread_over` the real-label initialisations of a ``ControlledTrend``'s
    ``statistic``."""
    return spread_over(trend.values("labels", statistic))


def smallest_trend_margin(
    trends: Mapping[str, object], statistic: str
) -> tuple[float, float]:
    """The smallest margin of ``trends`` over their thresholds for ``statistic``, and
    the :func:`trend_spread` of the trend that sets it."""
    if not trends:
        raise ValueError("need at least one trend")
    key = min(trends, key=lambda k: trends[k].margin(statistic))
    return trends[key].margin(statistic), trend_spread(trends[key], statistic)
