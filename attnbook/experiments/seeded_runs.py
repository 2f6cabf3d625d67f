"""One model trained from several initialisations on the real labels and on permuted
labels: the runs behind the controls of :mod:`attnbook.experiments.controls`.

:func:`label_control_runs` calls a training function once per initialisation seed on
the real labels and once per permutation on randomly permuted training labels (the
shuffled-label control: the same documents, token frequencies, class sizes, model and
budget, but no link between tokens and labels), and keeps each run's per-token scores
after training and at its initialisation. :func:`scores_of` picks one score over the
runs of one kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from attnbook.validation import check_generator

__all__ = [
    "Run",
    "TrainFunction",
    "label_control_runs",
    "scores_of",
    "metric_of",
    "metric_table",
    "metric_ranges",
]

#: ``train(seed, labels) -> (trained scores, initial scores, metrics)``: train the
#: model from the initialisation drawn with ``seed`` on the training ``labels`` and
#: return its per-token scores (name -> ``(V,)`` or ``(V, K)`` array) after training
#: and at the initialisation, and its metrics (name -> number).
TrainFunction = Callable[
    [int, np.ndarray],
    tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray], Mapping[str, float]],
]


@dataclass(frozen=True)
class Run:
    """One trained model: ``kind`` is ``"labels"`` (real labels) or ``"shuffled"``;
    ``seed`` its initialisation seed; ``labels`` the training labels it was fitted
    to (permuted for a shuffled run)."""

    kind: str
    seed: int
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    metrics: dict[str, float]


def label_control_runs(
    train: TrainFunction,
    labels: object,
    *,
    seeds: Sequence[int],
    shuffled_seeds: Sequence[int],
    rng: np.random.Generator,
) -> list[Run]:
    """``train`` on ``labels`` from every seed of ``seeds``, then on a fresh random
    permutation of ``labels`` (drawn from ``rng``) from every seed of
    ``shuffled_seeds``. The seeds must be distinct."""
    all_seeds = [int(s) for s in (*seeds, *shuffled_seeds)]
    if not seeds or not shuffled_seeds or len(set(all_seeds)) != len(all_seeds):
        raise ValueError("seeds and shuffled_seeds must be non-empty and distinct")
    check_generator(rng)
    y = np.asarray(labels)
    runs = []
    for kind, group in (("labels", seeds), ("shuffled", shuffled_seeds)):
        for seed in group:
            fitted = y if kind == "labels" else rng.permutation(y)
            scores, initial, metrics = train(int(seed), fitted)
            runs.append(
                Run(
                    kind,
                    int(seed),
                    fitted,
                    {k: np.asarray(v, np.float64) for k, v in scores.items()},
                    {k: np.asarray(v, np.float64) for k, v in initial.items()},
                    {k: float(v) for k, v in metrics.items()},
                )
            )
    return runs


def scores_of(
    runs: Sequence[Run], kind: str, name: str, *, initial: bool = False
) -> list[np.ndarray]:
    """The score ``name`` of every run of ``kind`` (after training, or at the
    initialisation with ``initial``)."""
    chosen = [r for r in runs if r.kind == kind]
    if not chosen:
        raise ValueError(f"no run of kind {kind!r}")
    return [(r.initial if initial else r.scores)[name] for r in chosen]


def metric_of(runs: Sequence[Run], kind: str, name: str) -> np.ndarray:
    """The metric ``name`` of every run of ``kind``."""
    return np.array([r.metrics[name] for r in runs if r.kind == kind])


def metric_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per kind of run, one column per metric: ``mean [min, max]`` over the
    runs of that kind."""
    rows = {}
    for kind in dict.fromkeys(r.kind for r in runs):
        names = [r for r in runs if r.kind == kind][0].metrics
        rows[kind] = {
            m: f"{v.mean():.3f} [{v.min():.3f}, {v.max():.3f}]"
            for m in names
            for v in [metric_of(runs, kind, m)]
        }
    out = pd.DataFrame(rows).T
    out.index.name = "labels"
    return out


def metric_ranges(
    runs: Sequence[Run], metrics: Mapping[str, str], prefixes: Mapping[str, str]
) -> dict[str, float]:
    """The smallest and largest of every metric over the runs of every kind, keyed
    ``<prefix>_<short>_min`` and ``_max`` for ``prefixes[kind]`` and the short name
    ``metrics[metric]``."""
    out = {}
    for kind, prefix in prefixes.items():
        for metric, short in metrics.items():
            values = metric_of(runs, kind, metric)
            out[f"{prefix}_{short}_min"] = float(values.min())
            out[f"{prefix}_{short}_max"] = float(values.max())
    return out
