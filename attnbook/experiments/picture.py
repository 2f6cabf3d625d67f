"""The runs behind the real-data picture: several seeds, the ablations, gradient descent
and the shuffled-label null, on one corpus.

:func:`picture_runs` trains, at equal budgets and from the starting points of
:func:`attnbook.experiments.real_data.starting_points`,

- the full model (``E``, ``p``, ``v``) with Adam, once per training seed;
- the same with plain gradient descent (per-group step sizes), twice: with the one-sweep
  step and with the autograd step, two roundings of the same arithmetic (at the largest
  stable step size gradient descent is sensitive to rounding); on the first seed, or on
  every seed, and at a second, smaller step size with its own budget where asked;
- the theorem's setting: ``p`` alone trained on the frozen one-step ``E`` (``v`` kept
  at its initialization), and beside it ``p`` and ``v`` trained on that ``E``;
- the full model with Adam on the training labels permuted, once per permutation (the
  shuffled-label null, as a distribution);

and keeps the token scores ``(E_s . v, E_s . p)`` of each, plus those of the one-step
model (no training) and of the initialization.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.curves import Curve, Dynamics, train_curve
from attnbook.experiments.importance import spearman, token_importance
from attnbook.experiments.real_data import ReviewExperimentConfig, starting_points
from attnbook.experiments.robustness import (
    PICTURE_STATISTICS,
    picture_correlations,
    with_shuffled_labels,
)

__all__ = [
    "PictureSettings",
    "PictureRuns",
    "picture_runs",
    "RUN_NAMES",
    "GD_KEYS",
    "correlation_table",
    "null_distribution",
    "MAIN_STATISTICS",
    "picture_along_training",
    "steps_where_picture_holds",
    "run_table",
]

#: Readable names of the runs of :func:`picture_runs`.
RUN_NAMES = {
    "init": "initialization",
    "one_step": "one step on E",
    "theorem": "one step, then frozen E (p trained: the theorem's setting)",
    "head": "one step, then frozen E (p, v trained)",
    "gd_autograd": "trained E, p, v (gradient descent, autograd step)",
    "adam": "trained E, p, v (Adam)",
    "gd": "trained E, p, v (gradient descent)",
    "null": "trained E, p, v on shuffled labels (Adam)",
    "gd_stable": "trained E, p, v (gradient descent, smaller step)",
    "gd_stable_autograd": "trained E, p, v (gradient descent, smaller step, autograd)",
}
#: The gradient-descent runs: key -> (step size, rounding), the step size ``edge`` for
#: :attr:`PictureSettings.gd` and ``stable`` for :attr:`PictureSettings.gd_stable`.
GD_KEYS = {
    "gd": ("edge", "one-sweep step"),
    "gd_autograd": ("edge", "autograd step"),
    "gd_stable": ("stable", "one-sweep step"),
    "gd_stable_autograd": ("stable", "autograd step"),
}


@dataclass(frozen=True)
class PictureSettings:
    """The budgets and step sizes of :func:`picture_runs`.

    ``seeds``: training seeds (one initialization each; the first also serves the
    ablations, gradient descent and the null); ``steps`` full-batch steps of Adam with
    step size ``adam_lr`` for the full model and of ``gd`` for its gradient-descent
    control; ``head_steps`` Adam steps of size ``head_lr`` for ``p`` (and for ``p``,
    ``v``) on the frozen one-step ``E``; ``null_permutations`` runs of the null, each on
    its own permutation of the labels. ``controls=False`` leaves out the theorem's
    setting, gradient descent and the null (the full model and the one step only).
    ``gd_stable`` is a second gradient descent, trained for ``gd_stable_steps`` steps
    (a smaller step size needs a longer budget to fit as much); ``gd_all_seeds`` makes
    both on every seed instead of the first only.
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 200
    adam_lr: float = 1e-3
    head_lr: float = 1e-2
    head_steps: int = 1000
    gd: Dynamics | None = None
    controls: bool = True
    null_permutations: int = 1
    gd_stable: Dynamics | None = None
    gd_stable_steps: int = 1
    gd_all_seeds: bool = False

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and non-empty, got {self.seeds}")
        for name in ("steps", "head_steps", "null_permutations", "gd_stable_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("adam_lr", "head_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        for name in ("gd", "gd_stable"):
            dyn = getattr(self, name)
            if dyn is not None and dyn.optimizer != "gd":
                raise ValueError(f"{name} must be Dynamics with optimizer 'gd'")


@dataclass
class PictureRuns:
    """``scores[(run, seed)] = (E.v, E.p)`` with ``run`` a key of :data:`RUN_NAMES`
    (the null of the first permutation under the first seed); ``curves[(run, seed)]``
    the trained runs' records (metrics at the start and the end); ``null_importance``
    the importance under the first permutation of the labels; ``nulls`` one
    ``(importance, (E.v, E.p))`` per permutation; ``seconds`` the wall time of each
    trained run; ``kinds`` the device and floating-point type each trained run ran in.
    The curves of gradient descent keep no final parameters (``params`` empty: a copy
    of ``E`` per run would only take memory)."""

    scores: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]
    curves: dict[tuple[str, int], Curve]
    null_importance: np.ndarray
    seconds: dict[tuple[str, int], float]
    nulls: list[tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]] = dataclasses.field(
        default_factory=list
    )
    kinds: dict[tuple[str, int], tuple[str, str]] = dataclasses.field(
        default_factory=dict
    )


def picture_runs(
    corpus: ReviewCorpus,
    config: ReviewExperimentConfig,
    settings: PictureSettings,
    *,
    null_rng: np.random.Generator,
    device: torch.device | str | None = None,
) -> PictureRuns:
    """Train the runs of the module docstring on ``corpus``; the initialization of seed
    ``k`` is drawn from ``torch.Generator().manual_seed(k)`` with ``config`` (``dim``,
    ``init_scale``, ``eta``, ``dtype``); the labels of the null are permuted with
    ``null_rng``, one permutation after the other."""
    scores, curves, seconds, kinds = {}, {}, {}, {}
    nulls = []
    adam = Dynamics.adam(settings.adam_lr)
    end = (0, settings.steps)

    def run(key, start, trainable, dynamics, steps, data=corpus, fused=True):
        t0 = time.perf_counter()
        curves[key] = train_curve(
            start,
            data,
            trainable=trainable,
            dynamics=dynamics,
            eval_steps=steps,
            fused=fused,
        )
        seconds[key] = time.perf_counter() - t0
        scores[key] = curves[key].scores[max(steps)]
        E = start["E"]
        kinds[key] = (E.device.type, str(E.dtype).removeprefix("torch."))
        if key[0] in GD_KEYS:
            curves[key].params = {}

    first = settings.seeds[0]
    descents = {
        "gd": (settings.gd, end),
        "gd_stable": (settings.gd_stable, (0, settings.gd_stable_steps)),
    }

    def gradient_descent(seed, points):
        if not settings.controls:
            return
        for key, (dynamics, steps) in descents.items():
            if dynamics is None:
                continue
            for suffix, fused in (("", True), ("_autograd", False)):
                start, trainable = points.init, ("E", "p", "v")
                run(
                    (key + suffix, seed), start, trainable, dynamics, steps, fused=fused
                )

    for seed in settings.seeds:
        gen = torch.Generator().manual_seed(seed)
        points = starting_points(corpus, config, generator=gen, device=device)
        run(("adam", seed), points.init, ("E", "p", "v"), adam, end)
        if seed != first:
            if settings.gd_all_seeds:
                gradient_descent(seed, points)
            continue
        init_curve = curves[("adam", seed)]
        scores[("init", seed)] = init_curve.scores[0]
        one = train_curve(
            points.one_step, corpus, trainable=("p",), dynamics=adam, eval_steps=(0,)
        )
        scores[("one_step", seed)] = one.scores[0]
        if not settings.controls:
            continue
        head = Dynamics.adam(settings.head_lr)
        for key, trainable in (("theorem", ("p",)), ("head", ("p", "v"))):
            steps = (0, settings.head_steps)
            run((key, seed), points.one_step, trainable, head, steps)
        gradient_descent(seed, points)
        for k in range(settings.null_permutations):
            shuffled = with_shuffled_labels(corpus, null_rng)
            if getattr(shuffled, "validation", None) is not None:
                shuffled = dataclasses.replace(shuffled, validation=None)
            key = ("null", seed) if k == 0 else (f"null {k}", seed)
            run(key, points.init, ("E", "p", "v"), adam, end, data=shuffled)
            imp = token_importance(shuffled.train, shuffled.train_labels)
            nulls.append((imp, scores[key]))
    null_importance = nulls[0][0] if nulls else np.full(corpus.vocab_size, np.nan)
    return PictureRuns(scores, curves, null_importance, seconds, nulls, kinds)


def correlation_table(
    runs: PictureRuns,
    importance: np.ndarray,
    document_frequency: np.ndarray,
    seeds: tuple[int, ...],
) -> pd.DataFrame:
    """The statistics of :func:`picture_correlations` (columns named as in
    :data:`PICTURE_STATISTICS`) for the full model of every seed, their seed-to-seed
    range (largest minus smallest), the shuffled-label null (against the importance
    of the shuffled labels: with several permutations, their mean and their largest
    value, :func:`null_distribution`) and the initialization."""
    rows = {
        f"seed {s}": picture_correlations(
            importance, *runs.scores[("adam", s)], document_frequency
        )
        for s in seeds
    }
    per_seed = pd.DataFrame(rows).T
    rows["seed-to-seed range"] = (per_seed.max() - per_seed.min()).to_dict()
    keys = {label: key for key, label in PICTURE_STATISTICS.items()}
    nulls = null_distribution(runs, document_frequency).rename(columns=keys)
    if len(nulls) == 1:
        rows["shuffled labels (null)"] = nulls.iloc[0].to_dict()
    else:
        rows[f"shuffled labels: mean of {len(nulls)}"] = nulls.mean().to_dict()
        rows[f"shuffled labels: largest of {len(nulls)}"] = nulls.max().to_dict()
    rows["initialization"] = picture_correlations(
        importance, *runs.scores[("init", seeds[0])], document_frequency
    )
    return pd.DataFrame(rows).T.rename(columns=PICTURE_STATISTICS)


#: The statistics of the picture that chapter 4 asks to be at least moderate.
MAIN_STATISTICS = ("value", "cls", "value_given_df", "cls_given_df")


def picture_along_training(
    curves: Mapping[int, Curve],
    importance: np.ndarray,
    document_frequency: np.ndarray,
) -> pd.DataFrame:
    """The statistics of :func:`picture_correlations` at every evaluation step (from
    step 1 on) of the full model's curve of every seed (``curves[seed]``): a long table
    with columns ``seed``, ``step``, ``statistic`` (a key of
    :data:`PICTURE_STATISTICS`) and ``value``."""
    rows = []
    for seed, curve in curves.items():
        for step in curve.steps:
            if step == 0:
                continue
            corr = picture_correlations(
                importance, *curve.scores[step], document_frequency
            )
            rows += [
                {"seed": seed, "step": step, "statistic": k, "value": float(v)}
                for k, v in corr.items()
            ]
    return pd.DataFrame(rows)


def steps_where_picture_holds(
    along: pd.DataFrame,
    threshold: float,
    statistics: tuple[str, ...] = MAIN_STATISTICS,
) -> list[int]:
    """The evaluation steps of a :func:`picture_along_training` table at which every
    one of ``statistics`` is at least ``threshold`` on every seed."""
    sub = along[along["statistic"].isin(statistics)]
    low = sub.groupby("step")["value"].min()
    return [int(s) for s in low.index[low >= threshold]]


def null_distribution(
    runs: PictureRuns, document_frequency: np.ndarray
) -> pd.DataFrame:
    """The statistics of :func:`picture_correlations` for every permutation of the
    shuffled-label null (one row each, against the importance of its own labels;
    columns named as in :data:`PICTURE_STATISTICS`)."""
    rows = {
        f"permutation {k + 1}": picture_correlations(imp, *scores, document_frequency)
        for k, (imp, scores) in enumerate(runs.nulls)
    }
    return pd.DataFrame(rows).T.rename(columns=PICTURE_STATISTICS)


def run_table(
    runs: PictureRuns,
    importance: np.ndarray,
    alpha: np.ndarray,
    document_frequency: np.ndarray,
    seed: int,
    *,
    top: int = 20,
) -> pd.DataFrame:
    """One row per run of the first seed (one step, the theorem's setting and ``p``,
    ``v`` on the frozen one-step ``E``, gradient descent in its two roundings, Adam;
    named by :data:`RUN_NAMES`): training loss and test accuracy at the end, the rank
    correlations of the picture, that of ``E.v`` with ``alpha``, the median document
    frequency of the ``top`` tokens with the largest ``|E.v|`` and the share of tokens
    whose ``|E.v|`` is within 10% of the largest (saturation)."""
    rows = {}
    for key in ("one_step", "theorem", "head", "gd", "gd_autograd", "adam"):
        if (key, seed) not in runs.scores:
            continue
        value, cls = runs.scores[(key, seed)]
        corr = picture_correlations(importance, value, cls, document_frequency)
        curve = runs.curves.get((key, seed))
        end = curve.at(max(curve.steps)) if curve is not None else {}
        mag = np.abs(value)
        rows[RUN_NAMES[key]] = {
            "training loss": end.get("train_loss", np.nan),
            "test accuracy": end.get("test_accuracy", np.nan),
            **{
                PICTURE_STATISTICS[k]: corr[k] for k in ("value", "cls", "cls_given_df")
            },
            "ρ(E·v, α)": spearman(value, alpha),
            f"median documents, top {top} |E·v|": float(
                np.median(document_frequency[np.argsort(-mag)[:top]])
            ),
            "tokens near the largest |E·v| (%)": 100
            * float((mag >= 0.9 * mag.max()).mean()),
        }
    return pd.DataFrame(rows).T
