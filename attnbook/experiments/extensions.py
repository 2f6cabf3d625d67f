"""Helpers of the extension chapters: class maps, per-class importance, one step of the
K-class model and of the one-layer model across dimensions, review subsets, trend
statistics of a score against importance."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import (
    STAR_COLUMNS,
    ReviewCorpus,
    build_review_corpus,
    corpus_from_splits,
    load_split,
    prepare_reviews,
)
from attnbook.data.reviews import load_reviews
from attnbook.engine.counts import TokenCounts
from attnbook.experiments.importance import (
    bin_statistics,
    bootstrap_rank_correlation,
    observed_range,
    token_importance,
)
from attnbook.theory.one_step import (
    class_signed_frequency,
    init_one_step,
    one_gradient_step,
    one_gradient_step_multiclass,
    pearson,
    predicted_class_alignment,
    predicted_pearson,
)
from attnbook.validation import ArgumentTypeError, check_count, check_generator

#: The authors' bin means of ``E_s . p`` with an MLP after the softmax (OpenReview
#: rebuttal), over 20 bins whose centres run from -0.95 to 0.89.
REBUTTAL_MLP_CLS = pd.DataFrame(
    {
        "centre": np.linspace(-0.95, 0.89, 20),
        "mean": [4.76, 4.61, 3.26, 3.08, 2.80, 2.06, 1.60, 1.43, 0.89, 0.67]
        + [0.59, 0.71, 1.11, 1.61, 2.02, 2.30, 3.28, 3.39, 4.84, 6.10],
    }
)

YELP_CLASS_NAMES = ("1 star", "2 stars", "4 stars", "5 stars")
IMDB_BAND_NAMES = ("rating 1-2", "rating 3-4", "rating 7-8", "rating 9-10")


def yelp_star_classes(stars: object) -> np.ndarray:
    """Yelp stars 1, 2, 4, 5 as classes 0, 1, 2, 3 (3-star reviews removed before)."""
    s = np.asarray(stars)
    if s.ndim != 1 or not np.isin(s, (1, 2, 4, 5)).all():
        raise ValueError("stars must be 1, 2, 4 or 5 (3-star reviews are dropped)")
    return np.searchsorted(np.array([1, 2, 4, 5]), s).astype(np.int64)


def imdb_rating_bands(ratings: object) -> np.ndarray:
    """IMDB ratings in four bands: 1-2, 3-4, 7-8, 9-10 as classes 0 to 3."""
    if ratings is None:
        raise ValueError(
            "IMDB star ratings are missing: the hub's stanfordnlp/imdb has none. Build "
            "the local mirror from the original archive (python -m "
            "attnbook.data.mirror) and set ATTNBOOK_DATA_DIR to it."
        )
    r = np.asarray(ratings)
    if r.ndim != 1 or not np.isin(r, (1, 2, 3, 4, 7, 8, 9, 10)).all():
        raise ValueError("IMDB ratings must be in 1-4 or 7-10")
    return np.select([r <= 2, r <= 4, r <= 8], [0, 1, 2], 3).astype(np.int64)


def class_importance(
    counts: TokenCounts, classes: object, n_classes: int
) -> np.ndarray:
    """``(V, K)`` one-vs-rest importance: column ``k`` takes class ``k`` as positive
    (a class in no sequence has none: a ValueError)."""
    y = np.asarray(classes)
    if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"classes must be integer class ids in [0, {n_classes})")
    return np.stack(
        [token_importance(counts, np.where(y == k, 1, -1)) for k in range(n_classes)], 1
    )


def class_reviews(
    name: str,
    min_df: int,
    to_classes: Callable[[np.ndarray], np.ndarray],
    n_classes: int,
) -> dict[str, object]:
    """``corpus``, ``y_train``, ``y_test`` (``to_classes`` of the stars) and the
    training split's per-class ``importance`` of the reviews ``name``."""
    corpus = prepare_reviews(name, min_df)
    y_train = torch.from_numpy(to_classes(corpus.train_stars))
    return {
        "corpus": corpus,
        "y_train": y_train,
        "y_test": torch.from_numpy(to_classes(corpus.test_stars)),
        "importance": class_importance(corpus.train, y_train.numpy(), n_classes),
    }


def class_one_step(
    corpus: ReviewCorpus,
    y_train: torch.Tensor,
    n_classes: int,
    dim: int,
    *,
    seed: int,
    eta: float = 1.0,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """One step of size ``eta`` on ``E`` from scale 1e-4: measured ``E^1_s . v_k``, the
    prediction ``eta gamma_sk |v_k|^2`` without cross terms, and ``gamma``."""
    gen = torch.Generator().manual_seed(seed)
    init = dict(generator=gen, dtype=torch.float32, device=device)
    params = init_one_step(
        corpus.vocab_size, dim, init_scale=1e-4, n_classes=n_classes, **init
    )
    E1 = one_gradient_step_multiclass(
        params, corpus.train.to(device), y_train.to(device), eta
    )
    gamma = class_signed_frequency(corpus.train, y_train, n_classes, corpus.vocab_size)
    W0 = params["W"]
    measured = (E1 @ W0).cpu().double().numpy()
    diagonal = predicted_class_alignment(gamma, W0.double(), eta, cross_terms=False)
    return measured, diagonal.cpu().numpy(), gamma


def dimension_table(
    counts: TokenCounts,
    labels: torch.Tensor,
    alpha: torch.Tensor,
    dims: tuple[int, ...],
    *,
    init_scale: float,
    eta: float,
    device: torch.device | str | None = None,
) -> pd.DataFrame:
    """One float32 step at every dimension of ``dims`` (the initialization seeded with
    the dimension): the measured Pearson r of ``E^1 . v`` with ``(eta/2) alpha
    ||v||^2`` beside the noise-only prediction; one row per ``d``."""
    rows = []
    for d in dims:
        gen = torch.Generator().manual_seed(d)
        init = dict(generator=gen, dtype=torch.float32, device=device)
        params = init_one_step(counts.vocab_size, d, init_scale=init_scale, **init)
        v = params["v"]
        value1 = (one_gradient_step(params, counts, labels, eta) @ v).double().cpu()
        pred = 0.5 * float(eta) * alpha.to(v.dtype).to(v.device) * (v @ v)
        pred = pred.double().cpu().numpy()
        measured = pearson(value1.numpy(), pred)
        noise = predicted_pearson(pred, init_scale, float(v @ v), d)
        r = {"r measured": measured, "r predicted (noise only)": noise}
        rows.append({"d": d, "d / V": d / counts.vocab_size, **r})
    return pd.DataFrame(rows).set_index("d")


def subsample_corpus(
    name: str, n_train: int, n_test: int, min_df: int, rng: np.random.Generator
):
    """``n_train`` training and ``n_test`` test reviews of ``name`` drawn at random,
    over the training subset's vocabulary (document frequency >= ``min_df``)."""
    check_generator(rng)
    splits = {s: load_reviews(name, s) for s in ("train", "test")}
    picks = {}
    for split, size in (("train", n_train), ("test", n_test)):
        n = len(splits[split])
        if not 0 < size <= n:
            raise ValueError(f"{split} subset size must be in [1, {n}], got {size}")
        picks[split] = np.sort(rng.choice(n, size=size, replace=False))
    star_col = STAR_COLUMNS[name]

    def column(split: str, col: str) -> list:
        return list(splits[split].select(picks[split])[col])  # the rows, in order

    return build_review_corpus(
        column("train", "text"),
        np.asarray(column("train", "label")),
        column("test", "text"),
        np.asarray(column("test", "label")),
        min_df=min_df,
        name=f"{name}-subset",
        train_stars=np.asarray(column("train", star_col)),
        test_stars=np.asarray(column("test", star_col)),
    )


def short_reviews(
    name: str, max_words: int, min_df: int
) -> tuple[ReviewCorpus, np.ndarray]:
    """Training reviews of at most ``max_words`` distinct words and all test reviews,
    over those training reviews' vocabulary; and the rows of the short test ones."""
    train, test = load_split(name, "train"), load_split(name, "test")
    short = {
        split: np.diff(part.tokens.indptr) <= max_words
        for split, part in (("train", train), ("test", test))
    }
    if not short["train"].any():
        raise ValueError(f"no training review has at most {max_words} distinct words")
    corpus = corpus_from_splits(
        train.select(np.flatnonzero(short["train"])),
        test,
        min_df=min_df,
        name=f"{name} (at most {max_words} distinct words)",
    )
    return corpus, np.flatnonzero(short["test"][corpus.test_kept])


def _real(x: object) -> np.ndarray:
    """``x`` (NumPy or torch) as a float64 array (NaN marks a token left out)."""
    raw = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    if raw.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"expected real numbers, got dtype {raw.dtype}")
    return raw.astype(np.float64)


def bin_monotonicity(
    x: object,
    values: object,
    *,
    n_bins: int = 20,
    lo: float = -1.0,
    hi: float = 1.0,
    min_count: int = 20,
) -> float:
    """Fraction of consecutive bins (``min_count`` tokens or more) whose mean increases:
    1 for an increasing profile, 0.5 for no trend."""
    min_count = check_count(min_count, "min_count")
    stats = bin_statistics(x, values, n_bins, lo, hi)
    means = stats.loc[stats["count"] >= min_count, "mean"].to_numpy()
    if means.size < 2:
        raise ValueError(f"fewer than two bins hold {min_count} tokens or more")
    return float((np.diff(means) > 0).mean())


def trend_statistics(
    importance: object,
    values: object,
    rng: np.random.Generator,
    *,
    shape: str = "monotone",
    n_boot: int = 200,
    min_count: int = 20,
) -> dict[str, float]:
    """Spearman's rho with a 95 % bootstrap interval and the bin monotonicity of
    ``values`` against ``importance`` (``"monotone"``) or ``|importance|`` (``"u"``)."""
    x, v = _real(importance), _real(values)
    if x.shape != v.shape or x.ndim != 1:
        raise ValueError("importance and values must be 1-D arrays of one length")
    keep = np.isfinite(x) & np.isfinite(v)
    x, v = x[keep], v[keep]
    if shape not in ("monotone", "u"):
        raise ValueError(f"shape must be 'monotone' or 'u', got {shape!r}")
    x = np.abs(x) if shape == "u" else x
    bins = dict(n_bins=10, lo=0.0) if shape == "u" else dict(n_bins=20, lo=-1.0)
    rc = bootstrap_rank_correlation(x, v, n_boot, rng)
    return {
        "rho": rc.estimate,
        "low": rc.low,
        "high": rc.high,
        "monotone": bin_monotonicity(x, v, min_count=min_count, hi=1.0, **bins),
        "n_tokens": int(x.size),
    }


def u_comparison(
    importance: object, scores: list, paper: pd.DataFrame, *, min_count: int = 20
) -> pd.DataFrame:
    """The paper's bin means beside the book's over 20 bins of the observed range:
    tokens per bin and the mean, smallest and largest bin mean over the runs."""
    x = _real(importance)
    keep = np.isfinite(x)
    lo, hi = observed_range(x)
    per_run = []
    for score in scores:
        stats = bin_statistics(x[keep], _real(score)[keep], 20, lo, hi)
        per_run.append(stats["mean"].where(stats["count"] >= min_count).to_numpy())
    means = np.array(per_run)
    return pd.DataFrame(
        {
            "paper: centre": paper["centre"].to_numpy(),
            "paper: mean": paper["mean"].to_numpy(),
            "book: centre": stats["center"].to_numpy(),
            "book: tokens": stats["count"].to_numpy(),
            "book: mean": means.mean(0),
            "book: min": means.min(0),
            "book: max": means.max(0),
        }
    )
