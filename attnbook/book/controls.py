"""A claim's controls in the book: its checks and its figure.

- :func:`check_trend` -- assert that the smallest value of a statistic over the
  real-label initialisations clears the threshold taken from the shuffled-label
  control (:class:`attnbook.experiments.controls.ControlledTrend`);
- :func:`check_initial` -- assert, as a control, that the statistics of the untrained
  initial embeddings are at chance;
- :func:`plot_controls` -- each statistic with the real labels (one dot per
  initialisation) beside the shuffled-label control (one dot per permutation), the
  initial embeddings and the threshold.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from attnbook.book.plotting import PALETTE
from attnbook.book.records import check, compare_with_paper, glue
from attnbook.experiments.controls import ControlledTrend

__all__ = ["check_trend", "check_initial", "plot_controls"]

_KINDS = {
    "labels": ("real labels", PALETTE["positive"], "o"),
    "shuffled": ("shuffled labels", PALETTE["negative"], "X"),
    "initial": ("initial embeddings", PALETTE["neutral"], "s"),
}


def plot_controls(
    ax, trends: Mapping[str, ControlledTrend], statistic: str = "heldout_partial"
) -> None:
    """Draw on ``ax`` one row per entry of ``trends`` (top to bottom): the
    ``statistic`` of every run as a dot (real labels, shuffled labels, initial
    embeddings, slightly apart vertically) and the threshold as a vertical bar."""
    names = list(trends)
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        tr = trends[name]
        for offset, (kind, (label, color, marker)) in zip(
            (0.18, 0.0, -0.18), _KINDS.items()
        ):
            values = tr.values(kind, statistic)
            ax.scatter(
                values,
                np.full(values.size, y + offset),
                color=color,
                marker=marker,
                s=28,
                alpha=0.85,
                linewidth=0,
                label=label if row == 0 else None,
                zorder=3,
            )
        ax.plot(
            [tr.thresholds[statistic]] * 2,
            [y - 0.32, y + 0.32],
            color=PALETTE["theory"],
            lw=2,
            label="threshold" if row == 0 else None,
        )
    ax.axvline(0, color="0.7", lw=0.8, zorder=0)
    ax.set_yticks(range(len(names)), names[::-1])
    ax.set_ylim(-0.6, len(names) - 0.4)


def check_trend(
    name: str,
    trend: ControlledTrend,
    statistic: str,
    *,
    claim: str,
    what: str,
    reading: str = "paper",
    asserted: bool = True,
) -> float:
    """Check that the smallest value of ``statistic`` over the real-label runs of
    ``trend`` is at least the threshold taken from its shuffled-label control; glue
    the largest value as ``name + "_high"`` and the threshold as ``name +
    "_threshold"``. Returns the smallest value. ``asserted=False`` records the
    comparison without asserting it (:func:`attnbook.book.records.compare_with_paper`:
    for a statistic whose margin is within its platform-to-platform rounding)."""
    values = trend.values("labels", statistic)
    threshold = trend.thresholds[statistic]
    glue(f"{name}_high", float(values.max()))
    glue(f"{name}_threshold", float(threshold))
    smallest = float(values.min())
    record = check if asserted else compare_with_paper
    record(name, smallest, threshold, ">=", claim=claim, what=what, reading=reading)
    return smallest


def check_initial(
    name: str, trends: Mapping[str, ControlledTrend], *, claim: str, what: str
) -> float:
    """Control: every thresholded statistic of the untrained initial embeddings is at
    chance. The value is the largest ``|rho| sqrt(n / 2)`` over ``trends``, with ``n``
    the number of held-out tokens: a rank correlation between unrelated quantities over
    ``m`` tokens has standard deviation about ``1 / sqrt(m)``, and an arm of the U uses
    about half the tokens, so this is at most the number of standard errors. It must
    be at most 5 (a two-sided chance of about 6e-7 per statistic)."""
    z = max(
        float(np.abs(tr.values("initial", stat)).max())
        * float(np.sqrt(tr.n_tokens["heldout"] / 2))
        for tr in trends.values()
        for stat in tr.thresholds
    )
    return check(name, z, 5.0, "<=", claim=claim, role="control", what=what)
