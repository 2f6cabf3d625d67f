"""The real-data picture's rank correlations, and the data its controls run on
(class-balanced reviews, shuffled labels)."""

from __future__ import annotations

import dataclasses

import numpy as np

from attnbook.data.corpus import (
    ReviewCorpus,
    corpus_from_splits,
    load_split,
    min_df_for_tokens,
)
from attnbook.experiments.importance import partial_spearman, spearman
from attnbook.validation import check_generator

__all__ = [
    "balanced_indices",
    "reviews_for_vocabulary",
    "with_shuffled_labels",
    "PICTURE_STATISTICS",
    "PICTURE_MATH",
    "picture_correlations",
]


def balanced_indices(labels: object, rng: np.random.Generator) -> np.ndarray:
    """Sorted rows of a class-balanced sample: the smaller class and as many rows of
    the larger drawn from ``rng``."""
    check_generator(rng)
    y = np.asarray(labels)
    classes, sizes = np.unique(y, return_counts=True)
    if classes.size != 2:
        raise ValueError(
            f"labels must hold exactly two classes, got {classes.tolist()}"
        )
    k = int(sizes.min())
    rows = [rng.choice(np.flatnonzero(y == c), size=k, replace=False) for c in classes]
    return np.sort(np.concatenate(rows))


def reviews_for_vocabulary(
    name: str, target_vocab: int, rng: np.random.Generator | None = None
) -> tuple[ReviewCorpus, int]:
    """The review data set ``name`` (with ``rng``: class-balanced splits) over the
    tokens of at least ``min_df`` training documents, the ``min_df`` whose vocabulary
    is nearest ``target_vocab``; returns it and ``min_df``."""
    parts = {}
    for split in ("train", "test"):
        part = load_split(name, split)
        if rng is not None:
            part = part.select(balanced_indices(part.labels01, rng))
        parts[split] = part
    min_df, _ = min_df_for_tokens(parts["train"].tokens, target_vocab)
    corpus = corpus_from_splits(
        parts["train"],
        parts["test"],
        min_df=min_df,
        name=name if rng is None else f"{name} (balanced)",
    )
    return corpus, min_df


def with_shuffled_labels(
    corpus: ReviewCorpus, rng: np.random.Generator
) -> ReviewCorpus:
    """``corpus`` with its training labels permuted by ``rng``."""
    return dataclasses.replace(
        corpus, train_labels=rng.permutation(corpus.train_labels)
    )


#: The statistics of :func:`picture_correlations`, by key, in words.
PICTURE_STATISTICS = {
    "value": "ρ(E·v, I)",
    "cls": "ρ(E·p, |I|)",
    "cls_neg": "ρ(E·p, I), I < 0",
    "cls_pos": "ρ(E·p, I), I > 0",
    "value_given_df": "ρ(E·v, I | log df)",
    "cls_given_df": "ρ(E·p, |I| | log df)",
}
#: The same statistics in the book's notation.
PICTURE_MATH = {
    "value": r"$\rho(\E_s \cdot \bv, I)$",
    "cls": r"$\rho(\E_s \cdot \bp, |I|)$",
    "cls_neg": r"$\rho(\E_s \cdot \bp, I)$ over $I < 0$",
    "cls_pos": r"$\rho(\E_s \cdot \bp, I)$ over $I > 0$",
    "value_given_df": r"$\rho(\E_s \cdot \bv, I \mid \log \mathrm{df})$",
    "cls_given_df": r"$\rho(\E_s \cdot \bp, |I| \mid \log \mathrm{df})$",
}


def picture_correlations(
    importance: object, value: object, cls: object, document_frequency: object
) -> dict[str, float]:
    """The rank correlations of :data:`PICTURE_STATISTICS` over the tokens of finite
    importance."""
    imp = np.asarray(importance, dtype=np.float64)
    value, cls = np.asarray(value, np.float64), np.asarray(cls, np.float64)
    df = np.asarray(document_frequency, dtype=np.float64)
    if not imp.shape == value.shape == cls.shape == df.shape:
        raise ValueError(
            "importance, value, cls and document_frequency differ in shape"
        )
    keep = np.isfinite(imp)
    imp, value, cls, df = imp[keep], value[keep], cls[keep], df[keep]
    neg, pos = imp < 0, imp > 0
    log_df = np.log(np.maximum(df, 1.0))
    return {
        "value": spearman(value, imp),
        "cls": spearman(cls, np.abs(imp)),
        "cls_neg": spearman(cls[neg], imp[neg]),
        "cls_pos": spearman(cls[pos], imp[pos]),
        "value_given_df": partial_spearman(value, imp, log_df),
        "cls_given_df": partial_spearman(cls, np.abs(imp), log_df),
    }
