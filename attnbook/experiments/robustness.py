"""The real-data picture's rank correlations, and the data its controls run on
(class-balanced reviews)."""

from __future__ import annotations

import numpy as np

from attnbook.data.corpus import (
    ReviewCorpus,
    corpus_from_splits,
    load_split,
    min_df_for_tokens,
)
from attnbook.experiments.importance import partial_spearman, spearman
from attnbook.validation import check_generator


def balanced_indices(labels: object, rng: np.random.Generator) -> np.ndarray:
    """Sorted rows of a class-balanced sample: the smaller class and as many rows of
    the larger drawn from ``rng``."""
    check_generator(rng)
    classes, sizes = np.unique(labels, return_counts=True)
    if classes.size != 2:
        raise ValueError(f"labels must hold two classes, got {classes.tolist()}")
    y, k = np.asarray(labels), int(sizes.min())
    rows = [rng.choice(np.flatnonzero(y == c), size=k, replace=False) for c in classes]
    return np.sort(np.concatenate(rows))


def reviews_for_vocabulary(
    name: str, target_vocab: int, rng: np.random.Generator | None = None
) -> tuple[ReviewCorpus, int]:
    """The review data set ``name`` (with ``rng``: class-balanced splits) over the
    tokens of at least ``min_df`` training documents, the ``min_df`` whose vocabulary
    is nearest ``target_vocab``; returns it and ``min_df``."""
    parts = [load_split(name, split) for split in ("train", "test")]
    if rng is not None:
        parts = [part.select(balanced_indices(part.labels01, rng)) for part in parts]
    min_df, _ = min_df_for_tokens(parts[0].tokens, target_vocab)
    label = name if rng is None else f"{name} (balanced)"
    return corpus_from_splits(*parts, min_df=min_df, name=label), min_df


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


def rho_u(cls: object, importance: object) -> float:
    """The U as one number: ``rho_U = rho(E_s.p, |I(s)|)``, Spearman's rank
    correlation of the attention score with the size of the importance."""
    return spearman(cls, np.abs(importance))


def picture_correlations(
    importance: object, value: object, cls: object, document_frequency: object
) -> dict[str, float]:
    """The rank correlations of :data:`PICTURE_STATISTICS` over the tokens of finite
    importance."""
    arrays = [np.asarray(a, np.float64) for a in (importance, value, cls)]
    arrays.append(np.asarray(document_frequency, np.float64))
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(
            "importance, value, cls and document_frequency differ in shape"
        )
    keep = np.isfinite(arrays[0])
    imp, value, cls, df = (a[keep] for a in arrays)
    neg, pos = imp < 0, imp > 0
    log_df = np.log(np.maximum(df, 1.0))
    return {
        "value": spearman(value, imp),
        "cls": rho_u(cls, imp),
        "cls_neg": spearman(cls[neg], imp[neg]),
        "cls_pos": spearman(cls[pos], imp[pos]),
        "value_given_df": partial_spearman(value, imp, log_df),
        "cls_given_df": partial_spearman(cls, np.abs(imp), log_df),
    }
