"""The runs behind the real-data picture: several seeds, the ablations, gradient descent
and the shuffled-label null, on one corpus.

:func:`picture_runs` trains, at equal budgets and from the starting points of
:func:`attnbook.experiments.real_data.starting_points`,

- the full model (``E``, ``p``, ``v``) with Adam, once per training seed;
- the same with plain gradient descent (per-group step sizes), first seed;
- the theorem's setting: ``p`` and ``v`` trained on the frozen one-step ``E``;
- the full model with Adam on the training labels permuted (the shuffled-label null);

and keeps the token scores ``(E_s . v, E_s . p)`` of each, plus those of the one-step
model (no training) and of the initialization.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

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
    "correlation_table",
    "run_table",
]

#: Readable names of the runs of :func:`picture_runs`.
RUN_NAMES = {
    "init": "initialization",
    "one_step": "one step on E",
    "theorem": "one step, then frozen E (p, v trained)",
    "adam": "trained E, p, v (Adam)",
    "gd": "trained E, p, v (gradient descent)",
    "null": "trained E, p, v on shuffled labels (Adam)",
}


@dataclass(frozen=True)
class PictureSettings:
    """The budgets and step sizes of :func:`picture_runs`.

    ``seeds``: training seeds (one initialization each; the first also serves the
    ablations, gradient descent and the null); ``steps`` full-batch steps of Adam with
    step size ``adam_lr`` for the full model and of ``gd`` for its gradient-descent
    control; ``head_steps`` Adam steps of size ``head_lr`` for ``p``, ``v`` on the
    frozen one-step ``E``. ``controls=False`` leaves out the theorem's setting, gradient
    descent and the null (the full model and the one step only).
    """

    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 200
    adam_lr: float = 1e-3
    head_lr: float = 1e-2
    head_steps: int = 1000
    gd: Dynamics | None = None
    controls: bool = True

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and non-empty, got {self.seeds}")
        for name in ("steps", "head_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("adam_lr", "head_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.gd is not None and self.gd.optimizer != "gd":
            raise ValueError("gd must be Dynamics with optimizer 'gd'")


@dataclass
class PictureRuns:
    """``scores[(run, seed)] = (E.v, E.p)`` with ``run`` a key of :data:`RUN_NAMES`;
    ``curves[(run, seed)]`` the trained runs' records (metrics at the start and the
    end); ``null_importance`` the importance under the shuffled labels; ``seconds``
    the wall time of each trained run."""

    scores: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]
    curves: dict[tuple[str, int], Curve]
    null_importance: np.ndarray
    seconds: dict[tuple[str, int], float]


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
    ``null_rng``."""
    scores, curves, seconds = {}, {}, {}
    null_importance = np.full(corpus.vocab_size, np.nan)
    adam = Dynamics.adam(settings.adam_lr)
    end = (0, settings.steps)

    def run(key, start, trainable, dynamics, steps, data=corpus):
        t0 = time.perf_counter()
        curves[key] = train_curve(
            start, data, trainable=trainable, dynamics=dynamics, eval_steps=steps
        )
        seconds[key] = time.perf_counter() - t0
        scores[key] = curves[key].scores[max(steps)]

    first = settings.seeds[0]
    for seed in settings.seeds:
        gen = torch.Generator().manual_seed(seed)
        points = starting_points(corpus, config, generator=gen, device=device)
        run(("adam", seed), points.init, ("E", "p", "v"), adam, end)
        if seed != first:
            continue
        init_curve = curves[("adam", seed)]
        scores[("init", seed)] = init_curve.scores[0]
        one = train_curve(
            points.one_step, corpus, trainable=("p",), dynamics=adam, eval_steps=(0,)
        )
        scores[("one_step", seed)] = one.scores[0]
        if not settings.controls:
            continue
        run(
            ("theorem", seed),
            points.one_step,
            ("p", "v"),
            Dynamics.adam(settings.head_lr),
            (0, settings.head_steps),
        )
        if settings.gd is not None:
            run(("gd", seed), points.init, ("E", "p", "v"), settings.gd, end)
        shuffled = with_shuffled_labels(corpus, null_rng)
        if getattr(shuffled, "validation", None) is not None:
            shuffled = dataclasses.replace(shuffled, validation=None)
        run(("null", seed), points.init, ("E", "p", "v"), adam, end, data=shuffled)
        null_importance = token_importance(shuffled.train, shuffled.train_labels)
    return PictureRuns(scores, curves, null_importance, seconds)


def correlation_table(
    runs: PictureRuns,
    importance: np.ndarray,
    document_frequency: np.ndarray,
    seeds: tuple[int, ...],
) -> pd.DataFrame:
    """The statistics of :func:`picture_correlations` (columns named as in
    :data:`PICTURE_STATISTICS`) for the full model of every seed, their seed-to-seed
    range (largest minus smallest), the shuffled-label null (against the importance
    of the shuffled labels) and the initialization."""
    rows = {
        f"seed {s}": picture_correlations(
            importance, *runs.scores[("adam", s)], document_frequency
        )
        for s in seeds
    }
    per_seed = pd.DataFrame(rows).T
    rows["seed-to-seed range"] = (per_seed.max() - per_seed.min()).to_dict()
    rows["shuffled labels (null)"] = picture_correlations(
        runs.null_importance, *runs.scores[("null", seeds[0])], document_frequency
    )
    rows["initialization"] = picture_correlations(
        importance, *runs.scores[("init", seeds[0])], document_frequency
    )
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
    """One row per run of the first seed (one step, the theorem's setting, gradient
    descent, Adam; named by :data:`RUN_NAMES`): training loss and test accuracy at the
    end, the rank correlations of the picture, that of ``E.v`` with ``alpha``, the
    median document frequency of the ``top`` tokens with the largest ``|E.v|`` and the
    share of tokens whose ``|E.v|`` is within 10% of the largest (saturation)."""
    rows = {}
    for key in ("one_step", "theorem", "gd", "adam"):
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
