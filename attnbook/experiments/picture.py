"""The runs behind the real-data picture, and the picture along a learning curve."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.curves import Curve, Dynamics, token_scores, train_curve
from attnbook.experiments.importance import token_importance
from attnbook.experiments.real_data import starting_points
from attnbook.experiments.robustness import picture_correlations

#: Readable names of the runs of :func:`picture_runs` that the chapter shows.
RUN_NAMES = {
    "one_step": "one step on E",
    "theorem": "one step, then frozen E (p trained: the theorem's setting)",
    "head": "one step, then frozen E (p, v trained)",
    "gd_autograd": "trained E, p, v (gradient descent, autograd step)",
    "adam": "trained E, p, v (Adam)",
    "gd": "trained E, p, v (gradient descent)",
}
#: The gradient-descent runs: key -> (step size: ``edge`` or ``stable``, rounding).
GD_KEYS = {
    "gd": ("edge", "one-sweep step"),
    "gd_autograd": ("edge", "autograd step"),
    "gd_stable": ("stable", "one-sweep step"),
    "gd_stable_autograd": ("stable", "autograd step"),
}


@dataclasses.dataclass
class PictureRuns:
    """``scores[(run, seed)] = (E.v, E.p)``, ``curves`` and ``kinds`` (device, dtype)
    by run; ``nulls``: ``(importance, (E.v, E.p))`` per
    label permutation, ``null_importance`` the first's."""

    scores: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]
    curves: dict[tuple[str, int], Curve]
    null_importance: np.ndarray
    nulls: list[tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]]
    kinds: dict[tuple[str, int], tuple[str, str]]


def picture_runs(
    corpus: ReviewCorpus,
    *,
    dim: int,
    sigma: float,
    eta: float,
    seeds: tuple[int, ...],
    adam: Dynamics,
    steps: int,
    head: Dynamics | None = None,
    head_steps: int = 0,
    descents: Mapping[str, tuple[Dynamics, int]] | None = None,
    descents_all_seeds: bool = False,
    null_permutations: int = 0,
    null_rng: np.random.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> PictureRuns:
    """From the :func:`starting_points` of every seed: ``steps`` steps of ``adam`` on
    ``E, p, v``; on the first seed also the one-step model, ``p`` (``theorem``) and
    ``p, v`` (``head``) trained ``head_steps`` steps of ``head`` on the one-step ``E``,
    each gradient descent of ``descents`` (``edge``/``stable`` -> dynamics, budget) in
    both roundings (on every seed with ``descents_all_seeds``), and
    ``null_permutations`` runs of ``adam`` on labels permuted by ``null_rng``."""
    descents = dict(descents or {})
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and non-empty, got {seeds}")
    if steps < 1 or (head is not None and head_steps < 1):
        raise ValueError("steps and head_steps must be at least 1")
    names = {s: k for k, (s, r) in GD_KEYS.items() if r == "one-sweep step"}
    for step, (dynamics, budget) in descents.items():
        if step not in names or dynamics.optimizer != "gd" or budget < 1:
            raise ValueError(f"descents[{step!r}]: gradient descent, edge or stable")
    scores, curves, kinds, nulls, EPV = {}, {}, {}, [], ("E", "p", "v")

    def run(key, start, trainable, dynamics, steps, data=corpus, fused=True):
        curve = curves[key] = train_curve(
            start,
            data,
            trainable=trainable,
            dynamics=dynamics,
            eval_steps=(0, steps),
            fused=fused,
        )
        scores[key], E = curve.scores[steps], start["E"]
        kinds[key] = (E.device.type, str(E.dtype).removeprefix("torch."))
        if key[0] in GD_KEYS:  # a copy of E per run would only take memory
            curve.params = {}

    def gradient_descent(seed, points):
        for step, (dynamics, budget) in descents.items():
            for suffix, fused in (("", True), ("_autograd", False)):
                run(
                    (names[step] + suffix, seed),
                    points.init,
                    EPV,
                    dynamics,
                    budget,
                    fused=fused,
                )

    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        points = starting_points(
            corpus,
            dim=dim,
            sigma=sigma,
            eta=eta,
            generator=gen,
            device=device,
            dtype=dtype,
        )
        run(("adam", seed), points.init, EPV, adam, steps)
        if seed != seeds[0]:
            if descents_all_seeds:
                gradient_descent(seed, points)
            continue
        scores[("init", seed)] = curves[("adam", seed)].scores[0]
        scores[("one_step", seed)] = token_scores(points.one_step)
        if head is not None:
            for key, trainable in (("theorem", ("p",)), ("head", ("p", "v"))):
                run((key, seed), points.one_step, trainable, head, head_steps)
        gradient_descent(seed, points)
        for k in range(null_permutations):
            y = null_rng.permutation(corpus.train_labels)
            shuffled = dataclasses.replace(corpus, train_labels=y)
            key = ("null", seed) if k == 0 else (f"null {k}", seed)
            run(key, points.init, EPV, adam, steps, data=shuffled)
            nulls.append((token_importance(shuffled.train, y), scores[key]))
    null_importance = nulls[0][0] if nulls else np.full(corpus.vocab_size, np.nan)
    return PictureRuns(scores, curves, null_importance, nulls, kinds)


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
