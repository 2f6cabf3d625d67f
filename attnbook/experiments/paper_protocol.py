"""Where the numbers the paper's authors reported (OpenReview rebuttal; budget, step
size and split not stated) fall on the learning curves of
:func:`~attnbook.experiments.curves.ablation_curves`: each read as exact to the rounding
it is given with (:data:`PAPER_ROUNDING`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from attnbook.experiments.curves import ABLATIONS, Curve, first_step_reaching

__all__ = [
    "PAPER_ACCURACY_LOSS",
    "PAPER_SPREAD_RATIO",
    "paper_number_table",
    "PAPER_ROUNDING",
    "window_steps",
    "matching_steps",
    "window_distance",
    "point_at",
    "nearest_point",
    "accuracy_gap",
    "loss_rise",
    "crossing_steps",
    "accuracy_descriptions",
    "nearest_descriptions",
    "spread_descriptions",
]

#: The paper's accuracy and loss by model (key of :data:`ABLATIONS`).
PAPER_ACCURACY_LOSS = {
    "full": {"accuracy": 0.95, "loss": 0.1},
    "random_E": {"accuracy": 0.72, "loss": 0.6},
}
#: Half a unit of the paper's last digit (whole percents, tenths of a loss).
PAPER_ROUNDING = {"accuracy": 0.005, "loss": 0.05}
#: The paper's spread ratio (one step then frozen ``E`` over full training), by score.
PAPER_SPREAD_RATIO = {"E.v": 1 / 8, "E.p": 1 / 6}


def paper_number_table(
    curves: Mapping[tuple[str, str], Curve], splits: tuple[str, ...] = ("train", "test")
) -> pd.DataFrame:
    """Per (dynamics label, model with a paper number, split): accuracy and loss at the
    end, the best of each, and the first step each reaches the paper's (``NaN``:
    never)."""
    rows = []
    for (model, label), curve in curves.items():
        if model not in PAPER_ACCURACY_LOSS:
            continue
        paper = PAPER_ACCURACY_LOSS[model]
        for split in splits:
            acc, loss = f"{split}_accuracy", f"{split}_loss"
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


def window_steps(
    curve: Curve,
    model: str,
    split: str,
    *,
    rounding: Mapping[str, float] = PAPER_ROUNDING,
) -> list[int]:
    """The evaluation steps at which accuracy and loss on ``split`` both lie within
    ``rounding`` of the paper's numbers for ``model``."""
    paper = PAPER_ACCURACY_LOSS[model]
    acc, loss = curve.metrics[f"{split}_accuracy"], curve.metrics[f"{split}_loss"]
    return [
        step
        for step, a, ell in zip(curve.steps, acc, loss)
        if abs(a - paper["accuracy"]) <= rounding["accuracy"]
        and abs(ell - paper["loss"]) <= rounding["loss"]
    ]


def matching_steps(
    curves: Mapping[tuple[str, str], Curve],
    label: str,
    split: str,
    *,
    accuracy_tol: float = PAPER_ROUNDING["accuracy"],
    loss_tol: float = PAPER_ROUNDING["loss"],
) -> list[int]:
    """The steps at which both models are in their :func:`window_steps` on ``split``
    under the dynamics ``label``."""
    full, rand = curves[("full", label)], curves[("random_E", label)]
    rounding = {"accuracy": accuracy_tol, "loss": loss_tol}
    both = set(window_steps(rand, "random_E", split, rounding=rounding))
    return [
        s for s in window_steps(full, "full", split, rounding=rounding) if s in both
    ]


def window_distance(accuracy: float, loss: float, model: str) -> float:
    """The larger distance of ``accuracy`` and ``loss`` from the paper's for ``model``,
    in units of the rounding: at most 1 inside the window."""
    if model not in PAPER_ACCURACY_LOSS:
        raise ValueError(f"model must be one of {sorted(PAPER_ACCURACY_LOSS)}")
    paper = PAPER_ACCURACY_LOSS[model]
    return max(
        abs(accuracy - paper["accuracy"]) / PAPER_ROUNDING["accuracy"],
        abs(loss - paper["loss"]) / PAPER_ROUNDING["loss"],
    )


def point_at(curve: Curve, j: int, model: str, split: str, key: object) -> dict:
    """The evaluation ``j`` of ``curve`` on ``split``: ``key``, ``step``, ``accuracy``,
    ``loss``, ``accuracy_off``, ``loss_off`` (minus the paper's) and ``distance``."""
    a, ell = curve.metrics[f"{split}_accuracy"][j], curve.metrics[f"{split}_loss"][j]
    paper = PAPER_ACCURACY_LOSS[model]
    return {
        "key": key,
        "step": curve.steps[j],
        "accuracy": a,
        "loss": ell,
        "accuracy_off": a - paper["accuracy"],
        "loss_off": ell - paper["loss"],
        "distance": window_distance(a, ell, model),
    }


def nearest_point(
    curves: Mapping[object, Curve], model: str, split: str
) -> dict[str, object]:
    """The :func:`point_at` of every curve and step nearest the paper's numbers for
    ``model`` (the first on ties)."""
    if not curves:
        raise ValueError("curves must not be empty")
    best = None
    for key, curve in curves.items():
        for j in range(len(curve.steps)):
            point = point_at(curve, j, model, split, key)
            if best is None or point["distance"] < best["distance"]:
                best = point
    return best


def accuracy_gap(full: Curve, rand: Curve, n_test: int) -> dict[str, float]:
    """Each model's best test accuracy, their ``gap`` and its binomial standard error
    ``se = sqrt((a(1 - a) + b(1 - b)) / n_test)`` (conservative: same reviews)."""
    a = max(full.metrics["test_accuracy"])
    b = max(rand.metrics["test_accuracy"])
    se = float(np.sqrt((a * (1 - a) + b * (1 - b)) / n_test))
    return {"trained": a, "random": b, "gap": a - b, "se": se}


def loss_rise(curves: Sequence[Curve]) -> dict[str, float]:
    """The largest ratio of last to lowest training loss over ``curves``, and how many
    end at twice their lowest or more."""
    last_to_lowest = [
        c.metrics["train_loss"][-1] / min(c.metrics["train_loss"]) for c in curves
    ]
    return {
        "loss_rise_max": max(last_to_lowest),
        "loss_spikes": sum(r >= 2 for r in last_to_lowest),
    }


def crossing_steps(spreads: pd.DataFrame, score: str) -> dict[str, float]:
    """Per reading of a ``spread_curves`` table, the first step with the ratio of
    ``score`` at most the paper's (``NaN``: never)."""
    if score not in PAPER_SPREAD_RATIO:
        raise ValueError(f"score must be one of {sorted(PAPER_SPREAD_RATIO)}")
    out = {}
    sub = spreads[spreads["score"] == score]
    for reading, part in sub.groupby("reading", sort=False):
        part = part.sort_values("step")
        hit = part[part["ratio"] <= PAPER_SPREAD_RATIO[score]]
        out[reading] = float(hit["step"].iloc[0]) if len(hit) else np.nan
    return out


def accuracy_descriptions(
    key: str, label: str, data: str, n_seeds: int
) -> dict[str, str]:
    """The words of the checks of claim C6a on one corpus (``data``) and dynamics
    ``label``, by check name (``key`` is ``<corpus>_<tag>``)."""
    at, E = f"{label}, {data}", "$\\E$"
    pair = (
        "evaluation steps (all seeds) at which both models are at the paper's numbers"
    )
    return {
        f"{key}_test_acc_gap_min_seed": f"best test accuracy, trained minus random "
        f"fixed {E}, smallest over {n_seeds} seeds (threshold: three standard errors), "
        f"{at}",
        f"{key}_train_loss_ratio": "lowest training loss along the budget, random "
        f"fixed over trained {E}, smallest over seeds, {at}",
        f"{key}_test_acc_trained": f"best test accuracy of trained {E} over the seeds "
        f"(paper ≈ 95%), {at}",
        f"{key}_test_loss_trained": f"lowest test loss of trained {E} over the seeds "
        f"(paper ≈ 0.1), {at}",
        f"{key}_test_acc_gap": f"test accuracy, trained minus random fixed {E} at the "
        f"end of the budget, largest over the seeds (paper ≈ 23 points), {at}",
        f"{key}_test_pair_steps": f"{pair} on the test split, {at}",
        f"{key}_train_pair_steps": f"{pair} on the training split, {at}",
    }


def nearest_descriptions(name: str, data: str, labels: Sequence[str]) -> dict[str, str]:
    """The words of the checks of claim C6a on how near one corpus's runs come to the
    paper's four numbers with each model at its own step size (``name`` the corpus,
    ``data`` its name in words, ``labels`` the dynamics searched)."""
    family = (
        f"each model at its own step size ({', '.join(labels)}), seed and evaluation "
        "step, the random fixed model at both scales of its embeddings"
    )
    return {
        f"{name}_{split}_nearest_protocol": "distance of the nearest protocol to the "
        "paper's four numbers, in units of their rounding (at most 1: all four within "
        f"it), {words} split, {family}, {data}"
        for split, words in (("test", "test"), ("train", "training"))
    }


def spread_descriptions(key: str, label: str, data: str) -> dict[str, str]:
    """The words of the checks of claim C6b on one corpus (``data``) and dynamics
    ``label``, by check name (``key`` is ``<corpus>_<tag>``)."""
    what = {}
    for slug, math in (("value", r"$\E_s \cdot \bv$"), ("cls", r"$\E_s \cdot \bp$")):
        k, at = f"{key}_{slug}", f"{label}, {data}"
        what[f"{k}_spread_ratio_units"] = (
            f"{math} spread ratio, mean over tokens, end of the budget, {at}"
        )
        what[f"{k}_spread_ratio_scale_free"] = (
            f"{math} spread ratio, scale-free, end of the budget, {at}"
        )
        what[f"{k}_scale_free_min"] = (
            f"smallest scale-free {math} spread ratio from step 10 on, {at}"
        )
    return what
