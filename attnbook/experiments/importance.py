"""Token importance on labelled data, binned summaries of a per-token score and rank
correlations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata

from attnbook.engine.counts import TokenCounts
from attnbook.theory.frequency import average_signed_frequency
from attnbook.validation import (
    ArgumentTypeError,
    as_signed_labels,
    check_count,
    check_finite_real,
    check_generator,
)


def document_class_counts(counts: TokenCounts, labels: object) -> tuple:
    """``(N_+(s), N_-(s))``: the positive / negative documents holding each token."""
    if not isinstance(counts, TokenCounts):
        raise ArgumentTypeError(f"counts must be a TokenCounts, not {type(counts)}")
    y = as_signed_labels(labels, counts.n_sequences).cpu().numpy().astype(np.int64)
    positive = y[counts.row_ids.cpu().numpy()] == 1
    toks, V = counts.token_ids.cpu().numpy(), counts.vocab_size
    n_pos = np.bincount(toks[positive], minlength=V).astype(np.int64)
    return n_pos, np.bincount(toks[~positive], minlength=V).astype(np.int64)


def token_importance(
    counts: TokenCounts, labels: object, *, balanced: bool = True
) -> np.ndarray:
    """``I(s) = P(1|s) - P(0|s)``, ``(V,)``: with ``r_± = N_±(s) / n_±`` (document
    counts over class sizes, ``balanced``) ``I = (r_+ - r_-) / (r_+ + r_-)``, else
    ``(N_+ - N_-) / (N_+ + N_-)``; ``NaN`` for a token in no document."""
    n_pos, n_neg = document_class_counts(counts, labels)
    y = as_signed_labels(labels, counts.n_sequences).cpu().numpy()
    if np.unique(y).size < 2:
        raise ValueError("labels hold a single class: importance is undefined")
    if balanced:
        r_pos, r_neg = n_pos / float((y == 1).sum()), n_neg / float((y == -1).sum())
    else:
        r_pos, r_neg = n_pos.astype(np.float64), n_neg.astype(np.float64)
    total = r_pos + r_neg
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (r_pos - r_neg) / total
    out[total == 0] = np.nan
    return out


def token_statistics(corpus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Importance, average signed frequency and document frequency of every token of
    a corpus's training split."""
    x, y = corpus.train, corpus.train_labels
    n_pos, n_neg = document_class_counts(x, y)
    alpha = average_signed_frequency(x, y, corpus.vocab_size).numpy()
    return token_importance(x, y), alpha, (n_pos + n_neg).astype(np.float64)


def finite_array(x: object, what: str) -> np.ndarray:
    """``x`` as a non-empty, finite, 1-D float64 array (``what`` names it)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    raw = np.asarray(x)
    if raw.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{what} must hold real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise ValueError(
            f"{what} must be a non-empty 1-D array with no non-finite value"
        )
    return arr


def bin_statistics(
    x: object, values: object, n_bins: int = 20, lo: float = -1.0, hi: float = 1.0
) -> pd.DataFrame:
    """Per equal bin of ``[lo, hi]`` in ``x``: its ``center``, ``count``, and the
    ``mean`` and ``std`` (population) of ``values`` (NaN if empty)."""
    xs, vs = finite_array(x, "x"), finite_array(values, "values")
    n_bins = check_count(n_bins, "n_bins")
    if xs.shape != vs.shape or not check_finite_real(lo, "lo") < check_finite_real(
        hi, "hi"
    ):
        raise ValueError("x and values must have one shape, and lo < hi")
    if xs.min() < lo or xs.max() > hi:
        raise ValueError(f"x must lie in [{lo}, {hi}], found [{xs.min()}, {xs.max()}]")
    idx = np.floor((xs - lo) / (hi - lo) * n_bins).astype(np.int64)
    idx = np.minimum(idx, n_bins - 1)  # x == hi goes into the last bin
    count = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(idx, weights=vs, minlength=n_bins) / count
        sq = np.bincount(idx, weights=(vs - mean[idx]) ** 2, minlength=n_bins)
        std = np.sqrt(sq / count)
    edges = np.linspace(lo, hi, n_bins + 1)
    center = 0.5 * (edges[:-1] + edges[1:])
    return pd.DataFrame(
        dict(center=center, count=count.astype(np.int64), mean=mean, std=std)
    )


def within_bin_spread(
    x: object, values: object, n_bins: int = 20, lo: float = -1.0, hi: float = 1.0
) -> float:
    """The pooled within-bin standard deviation of ``values`` over their overall one:
    ``sqrt(1 - eta^2)``, in [0, 1]."""
    stats = bin_statistics(x, values, n_bins, lo, hi)
    counts = stats["count"].to_numpy()
    stds = np.nan_to_num(stats["std"].to_numpy())
    pooled = float(np.sqrt((counts * stds**2).sum() / counts.sum()))
    overall = float(finite_array(values, "values").std())
    if overall == 0:
        raise ValueError("values are constant: the relative spread is undefined")
    return pooled / overall


def _paired(x: object, y: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = finite_array(x, "x"), finite_array(y, "y")
    if xs.shape != ys.shape or xs.size < n:
        raise ValueError(f"x and y must have the same length, at least {n}")
    return xs, ys


def spearman(x: object, y: object) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    xs, ys = _paired(x, y, 3)
    return float(np.corrcoef(rankdata(xs), rankdata(ys))[0, 1])


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's correlation with its 95% percentile bootstrap interval."""

    estimate: float
    low: float
    high: float


def bootstrap_rank_correlation(
    x: object, y: object, n_boot: int, rng: np.random.Generator
) -> RankCorrelation:
    """Spearman's correlation of ``(x, y)`` and the 2.5% and 97.5% quantiles of its
    ``n_boot`` replicates on pairs resampled by ``rng``."""
    xs, ys = _paired(x, y, 3)
    n_boot = check_count(n_boot, "n_boot", minimum=10)
    check_generator(rng)
    reps = np.empty(n_boot)
    for start in range(0, n_boot, 100):
        idx = rng.integers(0, xs.size, size=(min(100, n_boot - start), xs.size))
        rx, ry = rankdata(xs[idx], axis=1), rankdata(ys[idx], axis=1)
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        denom = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            reps[start : start + len(idx)] = (rx * ry).sum(axis=1) / denom
    reps = reps[np.isfinite(reps)]  # a constant replicate has no correlation
    if reps.size == 0:
        raise ValueError("every bootstrap replicate was degenerate (constant x or y)")
    lo_q, hi_q = np.quantile(reps, [(1 - 0.95) / 2, (1 + 0.95) / 2])
    return RankCorrelation(spearman(xs, ys), float(lo_q), float(hi_q))


def observed_range(x: object) -> tuple[float, float]:
    """``(min x, max x)`` over the finite entries: the paper's bin range."""
    xs = np.asarray(x, dtype=np.float64)
    xs = xs[np.isfinite(xs)]
    if xs.size == 0 or not xs.max() > xs.min():
        raise ValueError("x needs at least two distinct finite values")
    return float(xs.min()), float(xs.max())


def mean_within_bin_std(
    x: object, values: object, n_bins: int, lo: float, hi: float, weighting="tokens"
) -> float:
    """The mean of the per-bin standard deviations of ``values`` over bins of two or
    more tokens, weighted by their counts (``"tokens"``) or alike (``"bins"``)."""
    stats = bin_statistics(x, values, n_bins, lo, hi)
    stats = stats[stats["count"] >= 2]
    if stats.empty:
        raise ValueError("no bin holds two or more tokens")
    w = stats["count"].to_numpy(float) if weighting == "tokens" else None
    return float(np.average(stats["std"].to_numpy(), weights=w))


def partial_spearman(x: object, y: object, z: object) -> float:
    """Spearman's correlation of ``x`` and ``y`` given ``z``: that of their ranks'
    residuals after a linear regression on the ranks of ``z``."""
    xs, ys = _paired(x, y, 4)
    zs = _paired(z, xs, 4)[0]
    rz = rankdata(zs)
    design = np.column_stack([np.ones_like(rz), rz])
    ex, ey = (
        r - design @ np.linalg.lstsq(design, r, rcond=None)[0]
        for r in (rankdata(xs), rankdata(ys))
    )
    denom = float(np.sqrt((ex**2).sum() * (ey**2).sum()))
    if denom == 0:
        raise ValueError(
            "x or y is a function of z: the partial correlation is undefined"
        )
    return float((ex * ey).sum() / denom)
