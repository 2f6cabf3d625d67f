"""How far a check's statistic moves between the repeated runs it is made over.

A check made over repeated runs (seeds, initialisations, data draws) records, beside
its value, the *spread* of its statistic: the standard deviation of the statistic over
the repeats (:func:`spread_over`). The claims dashboard sets the check's margin over
its threshold beside it (``_ext/fragility.py``).

- :func:`spread_over` -- the standard deviation of one statistic over the repeats;
- :func:`group_spread` -- the same for a share of runs (the runs that select, that
  collapse, ...), the share taken on each repeat apart (each data set, each seed);
- :func:`trend_spread` -- the spread of a controlled trend's statistic over the
  real-label initialisations;
- :func:`smallest_trend_margin` -- the smallest margin of several controlled trends
  over their thresholds, with the spread of the statistic that sets it.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

__all__ = ["spread_over", "group_spread", "trend_spread", "smallest_trend_margin"]


def spread_over(values: object) -> float:
    """The standard deviation (``ddof=1``) of a statistic over its repeats, one value
    per repeat. Raises ``ValueError`` for fewer than two values or a value that is not
    finite."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < 2:
        raise ValueError(f"a spread needs at least two repeats, got {v.size}")
    if not np.isfinite(v).all():
        raise ValueError("every repeat's statistic must be finite")
    return float(v.std(ddof=1))


def group_spread(hits: object, groups: object) -> float | None:
    """The standard deviation over the repeats of a share of runs: ``hits`` says for
    each run whether it counts (selects, collapses, ...), ``groups`` names the repeat
    each run belongs to (its data set or seed); the share is taken within each group
    and :func:`spread_over` of the shares returned. ``None`` when fewer than two groups
    hold runs (the share then has no spread)."""
    h = np.asarray(hits, dtype=np.float64).ravel()
    g = np.asarray(groups).ravel()
    if h.shape != g.shape:
        raise ValueError(f"hits ({h.size}) and groups ({g.size}) must match")
    shares = pd.Series(h).groupby(g).mean()
    return spread_over(shares) if len(shares) >= 2 else None


def trend_spread(trend: object, statistic: str) -> float:
    """The spread of ``statistic`` of ``trend`` (an
    :class:`attnbook.book.controls.ControlledTrend`): :func:`spread_over` its
    values over the real-label initialisations."""
    return spread_over(trend.values("labels", statistic))


def smallest_trend_margin(
    trends: Mapping[str, object], statistic: str
) -> tuple[float, float]:
    """The smallest margin of ``trends`` (each an
    :class:`attnbook.book.controls.ControlledTrend`) over their thresholds for
    ``statistic``, and the spread of the statistic over the real-label initialisations
    of the trend that sets it (:func:`spread_over`)."""
    if not trends:
        raise ValueError("need at least one trend")
    key = min(trends, key=lambda k: trends[k].margin(statistic))
    return trends[key].margin(statistic), trend_spread(trends[key], statistic)
