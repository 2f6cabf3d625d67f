"""The real-data picture along a learning curve: its statistics at every evaluation
step, and the steps at which it holds."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from attnbook.experiments.curves import Curve
from attnbook.experiments.robustness import picture_correlations

#: The statistics of the picture that chapter 4 asks to be at least moderate.
MAIN_STATISTICS = ("value", "cls", "value_given_df", "cls_given_df")


def picture_along_training(
    curves: Mapping[int, Curve], importance: np.ndarray, document_frequency: np.ndarray
) -> pd.DataFrame:
    """:func:`picture_correlations` at every evaluation step from 1 on of each seed's
    curve: a long table with columns ``seed``, ``step``, ``statistic``, ``value``."""
    rows = []
    for seed, curve in curves.items():
        for step in curve.steps[1:] if curve.steps[0] == 0 else curve.steps:
            corr = picture_correlations(
                importance, *curve.scores[step], document_frequency
            )
            rows += [
                dict(seed=seed, step=step, statistic=k, value=float(v))
                for k, v in corr.items()
            ]
    return pd.DataFrame(rows)


def steps_where_picture_holds(
    along: pd.DataFrame, threshold: float, statistics: tuple[str, ...] = MAIN_STATISTICS
) -> list[int]:
    """The steps of a :func:`picture_along_training` table at which every one of
    ``statistics`` is at least ``threshold`` on every seed."""
    low = along[along["statistic"].isin(statistics)].groupby("step")["value"].min()
    return [int(s) for s in low.index[low >= threshold]]
