"""Controls for a trend of trained token scores against token importance.

A claim of the form "after training, the score ``E_s . u`` grows with the importance of
``s``" is tested by a statistic of the scores and the importance (a Spearman
correlation). Such a statistic is not zero without the claim: the importance of a token
computed on the labels the model was fitted to is partly what the model fitted, and both
the scores and the importance of rare tokens move with how often they occur. This
module measures the statistic where the claim predicts it and where it predicts nothing:

- :func:`documents_per_token`, :func:`leave_out_rare` -- the importance measured on a
  *held-out* split (the test reviews), with the tokens in fewer than ``min_documents``
  of its documents left out (their importance is mostly noise), and how many;
  :func:`heldout_measures` gives it with the training split's importance and the log
  document frequency;
- :func:`trend_statistic` -- the statistic of a shape (:data:`SHAPES`): the monotone
  trend ``rho(score, I)``, the U ``rho(score, |I|)``, or both arms of a U rising away
  from zero; raw, or as a partial correlation given the log document frequency;
- :func:`control_threshold` -- a one-sided prediction bound from the statistic of a
  control (models trained on permuted labels): the level the statistic must clear;
- :func:`controlled_trend` -- all of it for one claim: the statistic with the real
  labels over several initialisations, against held-out and training-split importance,
  raw and partial, beside the same statistic for the shuffled-label models and for the
  untrained initial embeddings, with the thresholds taken from the shuffled-label
  distribution (:class:`ControlledTrend`);
- :func:`runs_trend` -- the same from the runs of
  :func:`attnbook.experiments.seeded_runs.label_control_runs`;
- :func:`control_table` -- the numbers of several claims' statistics side by side;
- :func:`redrawn_margin` -- how a check "every initialisation clears the threshold"
  would fare redrawn: its margin in units of its own spread, and how often it fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from attnbook.engine.counts import TokenCounts
from attnbook.experiments.importance import (
    partial_spearman,
    spearman,
    token_importance,
)
from attnbook.experiments.seeded_runs import Run, scores_of
from attnbook.validation import ArgumentTypeError, check_count

__all__ = [
    "SHAPES",
    "STATISTICS",
    "documents_per_token",
    "leave_out_rare",
    "trend_statistic",
    "control_threshold",
    "ControlledTrend",
    "controlled_trend",
    "runs_trend",
    "control_table",
    "redrawn_margin",
]

#: The shapes of a trend, with the statistic that measures each.
SHAPES = {
    "monotone": "ρ(score, I)",
    "u": "ρ(score, |I|)",
    "arms": "smaller of ρ(score, I) over I > 0 and ρ(score, −I) over I < 0",
}

#: The statistics :func:`controlled_trend` computes for every run, in words.
STATISTICS = {
    "heldout": "raw ρ, held-out importance",
    "heldout_partial": "partial ρ given log df, held-out importance",
    "train": "raw ρ, training-split importance",
    "train_partial": "partial ρ given log df, training-split importance",
}


def documents_per_token(counts: TokenCounts) -> np.ndarray:
    """``(V,)`` number of documents of ``counts`` that contain each token."""
    if not isinstance(counts, TokenCounts):
        raise ArgumentTypeError(
            f"counts must be a TokenCounts, got {type(counts).__name__}"
        )
    toks = counts.token_ids.cpu().numpy()
    return np.bincount(toks, minlength=counts.vocab_size).astype(np.int64)


def leave_out_rare(
    importance: object, counts: TokenCounts, min_documents: int
) -> tuple[np.ndarray, int]:
    """``importance`` (``(V,)`` or ``(V, K)``, computed on ``counts``) with the tokens
    in fewer than ``min_documents`` documents of ``counts`` set to NaN, and the number
    of tokens left out that way (among those with a finite importance)."""
    min_documents = check_count(min_documents, "min_documents")
    imp = np.array(importance, dtype=np.float64)
    docs = documents_per_token(counts)
    if imp.shape[0] != docs.size:
        raise ValueError(
            f"importance has {imp.shape[0]} tokens, counts a vocabulary of {docs.size}"
        )
    rare = docs < min_documents
    finite = np.isfinite(imp) if imp.ndim == 1 else np.isfinite(imp).all(axis=1)
    n_left_out = int((rare & finite).sum())
    imp[rare] = np.nan
    return imp, n_left_out


def heldout_measures(corpus, min_documents: int) -> tuple[dict[str, np.ndarray], int]:
    """The importances a trend is measured against on a review corpus: ``heldout``
    (:func:`leave_out_rare` of the test split's importance), ``train`` (the training
    split's) and ``log_df`` (the log document frequency of the vocabulary); and the
    number of tokens left out of ``heldout``."""
    heldout, n_left_out = leave_out_rare(
        token_importance(corpus.test, corpus.test_labels), corpus.test, min_documents
    )
    return {
        "heldout": heldout,
        "train": token_importance(corpus.train, corpus.train_labels),
        "log_df": np.log(corpus.vocabulary.document_frequency),
    }, n_left_out


def _arrays(score: object, importance: object, log_df: object | None):
    s = np.asarray(score, dtype=np.float64)
    x = np.asarray(importance, dtype=np.float64)
    if s.shape != x.shape or s.ndim != 1:
        raise ValueError("score and importance must be 1-D arrays of one length")
    z = None if log_df is None else np.asarray(log_df, dtype=np.float64)
    if z is not None and z.shape != s.shape:
        raise ValueError("log_df must have one entry per token")
    keep = np.isfinite(s) & np.isfinite(x)
    if z is not None:
        keep &= np.isfinite(z)
    return s[keep], x[keep], None if z is None else z[keep]


def _rho(s: np.ndarray, x: np.ndarray, z: np.ndarray | None) -> float:
    return spearman(s, x) if z is None else partial_spearman(s, x, z)


def trend_statistic(
    score: object, importance: object, shape: str, log_df: object | None = None
) -> float:
    """The statistic of ``shape`` (:data:`SHAPES`) over the tokens with a finite
    importance: Spearman's ``rho(score, I)`` (``"monotone"``), ``rho(score, |I|)``
    (``"u"``), or the smaller of the two arms' correlations, ``rho(score, I)`` over
    ``I > 0`` and ``rho(score, -I)`` over ``I < 0`` (``"arms"``: both arms of a U
    rise away from zero). With ``log_df``, partial correlations given it
    (:func:`attnbook.experiments.importance.partial_spearman`)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {sorted(SHAPES)}, got {shape!r}")
    s, x, z = _arrays(score, importance, log_df)
    if shape == "monotone":
        return _rho(s, x, z)
    if shape == "u":
        return _rho(s, np.abs(x), z)
    arms = []
    for side in (x > 0, x < 0):
        arms.append(_rho(s[side], np.abs(x[side]), None if z is None else z[side]))
    return float(min(arms))


def control_threshold(values: object, level: float = 0.99) -> float:
    """One-sided prediction bound at ``level`` for one more draw of a control statistic,
    from ``values`` (its draws, at least 3): ``mean + t_{level, n-1} sd sqrt(1 + 1/n)``
    (Student's t, Gaussian draws), and never below the largest draw."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 3 or not np.isfinite(v).all():
        raise ValueError("values must be at least 3 finite numbers")
    if not 0.5 < level < 1:
        raise ValueError(f"level must be in (0.5, 1), got {level}")
    n = v.size
    t = student_t.ppf(level, n - 1)
    bound = v.mean() + t * v.std(ddof=1) * math.sqrt(1 + 1 / n)
    return float(max(bound, v.max()))


@dataclass(frozen=True)
class ControlledTrend:
    """The statistic of one claim for every run (:func:`controlled_trend`).

    ``runs`` has one row per run, indexed by ``(kind, number)`` with ``kind`` one of
    ``"labels"`` (real labels, one row per initialisation), ``"shuffled"`` (a model
    trained on permuted labels, one row per permutation) and ``"initial"`` (the
    untrained initial embeddings), and the columns of :data:`STATISTICS` plus ``own``
    (shuffled runs: the statistic against the importance of their own permuted
    labels). ``thresholds`` holds, for ``heldout`` and ``heldout_partial``, the
    prediction bound :func:`control_threshold` at ``level`` of the shuffled runs.
    """

    shape: str
    runs: pd.DataFrame
    thresholds: dict[str, float]
    level: float
    n_tokens: dict[str, int]

    def values(self, kind: str, statistic: str) -> np.ndarray:
        """The statistic over the runs of one kind."""
        return self.runs.loc[kind, statistic].to_numpy(dtype=np.float64)

    def seed_range(self, statistic: str) -> float:
        """The range of the statistic over the real-label initialisations: how far it
        moves from one initialisation to another (a check's spread)."""
        return float(np.ptp(self.values("labels", statistic)))

    def margin(self, statistic: str = "heldout_partial") -> float:
        """The smallest real-label value minus the control's threshold (positive:
        every initialisation clears it)."""
        smallest = self.values("labels", statistic).min()
        return float(smallest - self.thresholds[statistic])

    def summary(self) -> pd.DataFrame:
        """One row per statistic: the real labels' mean, smallest and largest value
        over initialisations, the shuffled-label control's mean, standard deviation
        and largest value, the threshold taken from it, and the largest value of the
        initial embeddings."""
        rows = {}
        for stat in STATISTICS:
            real = self.values("labels", stat)
            row = {
                "labels: mean": real.mean(),
                "labels: min": real.min(),
                "labels: max": real.max(),
            }
            if stat in self.thresholds:
                null = self.values("shuffled", stat)
                row |= {
                    "shuffled: mean": null.mean(),
                    "shuffled: sd": null.std(ddof=1),
                    "shuffled: max": null.max(),
                    "threshold": self.thresholds[stat],
                    "initial: max": self.values("initial", stat).max(),
                }
            rows[STATISTICS[stat]] = row
        return pd.DataFrame(rows).T


def controlled_trend(
    labels: Sequence[object],
    shuffled: Sequence[object],
    initial: Sequence[object],
    *,
    heldout: object,
    train: object,
    log_df: object,
    shape: str,
    shuffled_train: Sequence[object] | None = None,
    level: float = 0.99,
) -> ControlledTrend:
    """The statistic of ``shape`` (:func:`trend_statistic`) for every run.

    ``labels``, ``shuffled`` and ``initial`` are per-token scores (one ``(V,)`` array
    per run) of the models trained on the real labels (one per initialisation), on
    permuted labels (one per permutation, at least 3) and of the untrained initial
    embeddings. ``heldout`` and ``train`` are the importance on the held-out split
    (rare tokens NaN, see :func:`leave_out_rare`) and on the training split;
    ``log_df`` the log training document frequency. ``shuffled_train`` (optional) is
    the importance of each shuffled run's own permuted labels. Every statistic is
    computed over the tokens with a finite held-out importance, so that raw and
    partial, held-out and training-split values compare like with like.
    """
    if len(labels) < 1 or len(shuffled) < 3 or len(initial) < 1:
        raise ValueError(
            "need at least one real-label run, three shuffled runs, one initial"
        )
    held = np.asarray(heldout, dtype=np.float64)
    tr = np.array(train, dtype=np.float64)
    tr[~np.isfinite(held)] = np.nan
    if shuffled_train is not None and len(shuffled_train) != len(shuffled):
        raise ValueError("shuffled_train needs one importance per shuffled run")

    def stats(score: object) -> dict[str, float]:
        return {
            "heldout": trend_statistic(score, held, shape),
            "heldout_partial": trend_statistic(score, held, shape, log_df),
            "train": trend_statistic(score, tr, shape),
            "train_partial": trend_statistic(score, tr, shape, log_df),
        }

    rows = {}
    for i, score in enumerate(labels):
        rows[("labels", i)] = stats(score)
    for i, score in enumerate(shuffled):
        row = stats(score)
        if shuffled_train is not None:
            own = np.array(shuffled_train[i], dtype=np.float64)
            own[~np.isfinite(held)] = np.nan
            row["own"] = trend_statistic(score, own, shape)
        rows[("shuffled", i)] = row
    for i, score in enumerate(initial):
        rows[("initial", i)] = stats(score)
    runs = pd.DataFrame(rows).T
    runs.index = runs.index.set_names(["kind", "run"])
    thresholds = {
        stat: control_threshold(runs.loc["shuffled", stat].to_numpy(float), level)
        for stat in ("heldout", "heldout_partial")
    }
    n_tokens = {
        "heldout": int(np.isfinite(held).sum()),
        "train": int(np.isfinite(np.asarray(train, dtype=np.float64)).sum()),
    }
    return ControlledTrend(shape, runs, thresholds, level, n_tokens)


def _spread(values: np.ndarray) -> str:
    return f"{values.mean():.3f} [{values.min():.3f}, {values.max():.3f}]"


def control_table(trends: Mapping[str, ControlledTrend]) -> pd.DataFrame:
    """Two rows per claim statistic (key of ``trends``), the raw and the partial rho
    against held-out importance: with the real labels, the mean and range over
    initialisations; the shuffled-label control (mean +- sd) and the threshold taken
    from it; the initial embeddings (largest value); and the training-split value
    (mean). Five columns, so that the table fits a page's column."""
    rows = {}
    for key, tr in trends.items():
        for stat, train, name in (
            ("heldout", "train", "ρ"),
            ("heldout_partial", "train_partial", "partial ρ"),
        ):
            null = tr.values("shuffled", stat)
            rows[(key, name)] = {
                "real labels": _spread(tr.values("labels", stat)),
                "shuffled": f"{null.mean():.3f} ± {null.std(ddof=1):.3f}",
                "threshold": f"{tr.thresholds[stat]:.3f}",
                "initial": f"{tr.values('initial', stat).max():.3f}",
                "training split": f"{tr.values('labels', train).mean():.3f}",
            }
    out = pd.DataFrame(rows).T
    out.index.names = ["statistic", "measure"]
    return out


def runs_trend(
    runs: Sequence[Run],
    score: str,
    *,
    shape: str,
    heldout: object,
    train: object,
    log_df: object,
    column: int | None = None,
    own: Sequence[object] | None = None,
    level: float = 0.99,
) -> ControlledTrend:
    """:func:`controlled_trend` of the score ``score`` of ``runs``
    (:func:`attnbook.experiments.seeded_runs.label_control_runs`): the real-label runs,
    the shuffled runs, and the real-label runs' initial scores; ``column`` picks one
    column of a ``(V, K)`` score; ``own`` the importance of each shuffled run's
    labels."""

    def pick(kind: str, initial: bool = False) -> list[np.ndarray]:
        out = scores_of(runs, kind, score, initial=initial)
        return out if column is None else [s[:, column] for s in out]

    return controlled_trend(
        pick("labels"),
        pick("shuffled"),
        pick("labels", initial=True),
        heldout=heldout,
        train=train,
        log_df=log_df,
        shape=shape,
        shuffled_train=own,
        level=level,
    )


def redrawn_margin(
    trend: ControlledTrend,
    statistic: str,
    rng: np.random.Generator,
    *,
    n_labels: int | None = None,
    n_shuffled: int | None = None,
    draws: int = 20_000,
) -> dict[str, float]:
    """How the check ``trend.margin(statistic) >= 0`` (the smallest real-label value
    clears the shuffled-label threshold) would fare with its runs drawn again.

    The real-label and the shuffled-label values are modelled as Gaussian, with the
    mean and standard deviation of the runs (at least two of each); ``draws`` times,
    ``n_labels`` real-label and ``n_shuffled`` shuffled values (default: as many as
    the runs) are drawn and the margin recomputed with :func:`control_threshold` at
    the trend's level. Returns the ``margin`` of the runs, the standard deviation of
    the redrawn margins (``sd``), the margin in those units (``z``) and the share of
    draws with a negative margin (``fail``)."""
    real = trend.values("labels", statistic)
    null = trend.values("shuffled", statistic)
    if real.size < 2:
        raise ValueError("need at least two real-label runs to estimate their spread")
    n_labels = real.size if n_labels is None else check_count(n_labels, "n_labels")
    if n_shuffled is None:
        n_shuffled = null.size
    n_shuffled = check_count(n_shuffled, "n_shuffled", minimum=3)
    draws = check_count(draws, "draws")
    labels = rng.normal(real.mean(), real.std(ddof=1), (draws, n_labels))
    shuffled = rng.normal(null.mean(), null.std(ddof=1), (draws, n_shuffled))
    t = student_t.ppf(trend.level, n_shuffled - 1)
    bound = shuffled.mean(1) + t * shuffled.std(1, ddof=1) * math.sqrt(
        1 + 1 / n_shuffled
    )
    margins = labels.min(1) - np.maximum(bound, shuffled.max(1))
    margin, sd = trend.margin(statistic), float(margins.std(ddof=1))
    return {
        "margin": margin,
        "sd": sd,
        "z": margin / sd,
        "fail": float((margins < 0).mean()),
    }
