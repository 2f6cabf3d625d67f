"""Where the numbers the paper's authors reported fall on the book's learning curves.

The authors report (OpenReview rebuttal): random fixed ``E`` with ``p``, ``v`` trained
reaches about 72% test accuracy and 0.6 test loss, against about 95% and 0.1 with
trained embeddings (:data:`PAPER_ACCURACY_LOSS`); one step on ``E`` and then ``E``
frozen makes the average within-bin standard deviation about 8 times smaller for
``E_s . v`` and 6 times smaller for ``E_s . p`` than full training
(:data:`PAPER_SPREAD_RATIO`). The budget, the learning rate and the split of these
numbers are not stated. :func:`paper_number_table` and :func:`matching_steps` locate
them on curves of :func:`attnbook.experiments.curves.ablation_curves`;
:func:`crossing_steps` does the same for the spread ratios of
:func:`attnbook.experiments.curves.spread_curves`.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from attnbook.experiments.curves import ABLATIONS, Curve, first_step_reaching

__all__ = [
    "PAPER_ACCURACY_LOSS",
    "PAPER_SPREAD_RATIO",
    "paper_number_table",
    "matching_steps",
    "crossing_steps",
]

#: The paper's accuracy and loss by model (key of :data:`ABLATIONS`).
PAPER_ACCURACY_LOSS = {
    "full": {"accuracy": 0.95, "loss": 0.1},
    "random_E": {"accuracy": 0.72, "loss": 0.6},
}
#: The paper's spread ratio (one step then frozen ``E`` over full training), by score.
PAPER_SPREAD_RATIO = {"E.v": 1 / 8, "E.p": 1 / 6}


def paper_number_table(
    curves: Mapping[tuple[str, str], Curve], splits: tuple[str, ...] = ("train", "test")
) -> pd.DataFrame:
    """One row per (dynamics label, model with a paper number, split): accuracy and
    loss at the end of the budget, the best accuracy and lowest loss along the curve,
    and the first evaluation step at which the accuracy reaches the paper's value and
    the loss falls to it (``NaN``: never within the budget)."""
    rows = []
    for (model, label), curve in curves.items():
        if model not in PAPER_ACCURACY_LOSS:
            continue
        paper = PAPER_ACCURACY_LOSS[model]
        for split in splits:
            acc, loss = f"{split}_accuracy", f"{split}_loss"
            if acc not in curve.metrics:
                raise ValueError(f"the curves have no {split!r} records")
            reach_acc = first_step_reaching(curve, acc, paper["accuracy"], below=False)
            reach_loss = first_step_reaching(curve, loss, paper["loss"], below=True)
            rows.append(
                {
                    "dynamics": label,
                    "model": ABLATIONS[model][0],
                    "split": split,
                    "paper accuracy": paper["accuracy"],
                    "paper loss": paper["loss"],
                    "accuracy at the end": curve.metrics[acc][-1],
                    "loss at the end": curve.metrics[loss][-1],
                    "best accuracy": max(curve.metrics[acc]),
                    "lowest loss": min(curve.metrics[loss]),
                    "first step at the paper's accuracy": np.nan
                    if reach_acc is None
                    else reach_acc,
                    "first step at the paper's loss": np.nan
                    if reach_loss is None
                    else reach_loss,
                }
            )
    return pd.DataFrame(rows).set_index(["dynamics", "model", "split"])


def matching_steps(
    curves: Mapping[tuple[str, str], Curve],
    label: str,
    split: str,
    *,
    accuracy_tol: float,
    loss_tol: float,
) -> list[int]:
    """The evaluation steps at which *both* of the paper's accuracy-and-loss statements
    hold on ``split`` under the dynamics ``label``: the trained model at least at the
    paper's accuracy less ``accuracy_tol`` and at most at its loss plus ``loss_tol``,
    and the random-``E`` model within ``accuracy_tol`` of 72% and ``loss_tol`` of
    0.6."""
    if accuracy_tol < 0 or loss_tol < 0:
        raise ValueError("the tolerances must be non-negative")
    full, rand = curves[("full", label)], curves[("random_E", label)]
    if full.steps != rand.steps:
        raise ValueError("the two curves must share their evaluation steps")
    pf, pr = PAPER_ACCURACY_LOSS["full"], PAPER_ACCURACY_LOSS["random_E"]
    out = []
    for j, step in enumerate(full.steps):
        fa, fl = full.metrics[f"{split}_accuracy"][j], full.metrics[f"{split}_loss"][j]
        ra, rl = rand.metrics[f"{split}_accuracy"][j], rand.metrics[f"{split}_loss"][j]
        if (
            fa >= pf["accuracy"] - accuracy_tol
            and fl <= pf["loss"] + loss_tol
            and abs(ra - pr["accuracy"]) <= accuracy_tol
            and abs(rl - pr["loss"]) <= loss_tol
        ):
            out.append(step)
    return out


def crossing_steps(spreads: pd.DataFrame, score: str) -> dict[str, float]:
    """For each reading of a :func:`~attnbook.experiments.curves.spread_curves` table,
    the first step at which the ratio of ``score`` is at most the paper's
    (:data:`PAPER_SPREAD_RATIO`), ``NaN`` when it never is."""
    if score not in PAPER_SPREAD_RATIO:
        raise ValueError(f"score must be one of {sorted(PAPER_SPREAD_RATIO)}")
    out = {}
    sub = spreads[spreads["score"] == score]
    for reading, part in sub.groupby("reading", sort=False):
        part = part.sort_values("step")
        hit = part[part["ratio"] <= PAPER_SPREAD_RATIO[score]]
        out[reading] = float(hit["step"].iloc[0]) if len(hit) else np.nan
    return out
