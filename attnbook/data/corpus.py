"""Review corpora ready for the model: vocabulary, token counts, +-1 labels and star
ratings.

:func:`prepare_reviews` loads a dataset through
:func:`attnbook.data.splits.load_split`, builds the vocabulary on the *training*
split (tokens with document frequency at least ``min_df``, see
:mod:`attnbook.data.reviews`), encodes both splits, drops the documents left without an
in-vocabulary token, and returns a :class:`ReviewCorpus` whose labels, star ratings and
(test) texts are aligned with the kept documents. :func:`build_review_corpus` does the
same from texts and labels already in memory (used by the tests and by anyone with their
own data), :func:`corpus_from_splits` from :class:`~attnbook.data.splits.ReviewSplit`
objects. Each split is tokenized once: the vocabulary, its ``min_df``
(:func:`min_df_for_tokens`) and both encodings come from the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from attnbook.data.labels import signed_from_binary
from attnbook.data.reviews import TokenizedTexts, Vocabulary
from attnbook.data.splits import STAR_COLUMNS, ReviewSplit, load_split
from attnbook.engine.counts import TokenCounts

__all__ = [
    "STAR_COLUMNS",
    "ReviewCorpus",
    "build_review_corpus",
    "corpus_from_splits",
    "prepare_reviews",
    "min_df_for_tokens",
]


@dataclass(frozen=True)
class ReviewCorpus:
    """A binary review data set encoded over one vocabulary.

    Attributes
    ----------
    name:
        ``"imdb"``, ``"yelp"`` or any name given to :func:`build_review_corpus`.
    vocabulary:
        the :class:`~attnbook.data.reviews.Vocabulary` built on the training texts.
    train, test:
        the :class:`~attnbook.engine.counts.TokenCounts` of the kept documents.
    train_labels, test_labels:
        ``(n,)`` int64 NumPy arrays of labels in ``{-1, +1}``, aligned with ``train`` /
        ``test``.
    train_stars, test_stars:
        ``(n,)`` int64 star ratings aligned with the kept documents (IMDB 1-10, Yelp
        1-5), or ``None`` when the data has none.
    test_texts:
        the raw texts of the kept test documents.
    train_kept, test_kept:
        row numbers of the kept documents in the original splits.
    n_documents, n_tokens, n_dropped_tokens:
        per split (``{"train": ..., "test": ...}``): documents before dropping, token
        occurrences, and occurrences dropped because they are outside the vocabulary (of
        the whole training split, also when part of it is held out for validation).
    validation, validation_labels, validation_kept:
        ``None`` (no function of the package sets them), or a held-out part of the
        training split: its counts, +-1 labels and row numbers in the original training
        split; ``train``, ``train_labels``, ``train_stars`` and ``train_kept`` then hold
        the remaining rows.
    """

    name: str
    vocabulary: Vocabulary
    train: TokenCounts
    test: TokenCounts
    train_labels: np.ndarray
    test_labels: np.ndarray
    train_stars: np.ndarray | None
    test_stars: np.ndarray | None
    test_texts: tuple[str, ...]
    train_kept: np.ndarray
    test_kept: np.ndarray
    n_documents: Mapping[str, int]
    n_tokens: Mapping[str, int]
    n_dropped_tokens: Mapping[str, int]
    validation: TokenCounts | None = None
    validation_labels: np.ndarray | None = None
    validation_kept: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    @property
    def n_dropped_documents(self) -> dict[str, int]:
        """Documents left without any in-vocabulary token, per split."""
        n_val = 0 if self.validation_kept is None else int(self.validation_kept.size)
        return {
            "train": self.n_documents["train"] - int(self.train_kept.size) - n_val,
            "test": self.n_documents["test"] - int(self.test_kept.size),
        }

    @property
    def dropped_token_fraction(self) -> dict[str, float]:
        """Fraction of token occurrences outside the vocabulary, per split."""
        return {
            s: self.n_dropped_tokens[s] / max(self.n_tokens[s], 1)
            for s in ("train", "test")
        }

    @property
    def positive_fraction(self) -> dict[str, float]:
        """Fraction of positive (+1) documents among the kept ones, per split (the
        imbalance)."""
        return {
            "train": float((self.train_labels == 1).mean()),
            "test": float((self.test_labels == 1).mean()),
        }

    def labels(
        self,
        split: str,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """The +-1 labels of ``split`` (``"train"``, ``"validation"`` or ``"test"``) as
        a float tensor."""
        arrays = {
            "train": self.train_labels,
            "validation": self.validation_labels,
            "test": self.test_labels,
        }
        if split not in arrays:
            raise ValueError(
                f"split must be 'train', 'validation' or 'test', got {split!r}"
            )
        arr = arrays[split]
        if arr is None:
            raise ValueError("this corpus has no validation split")
        return torch.from_numpy(arr).to(dtype=dtype, device=device)

    def summary(self) -> dict[str, float]:
        """The numbers a chapter reports about the corpus, as a flat dictionary."""
        return {
            "vocab_size": self.vocab_size,
            "min_df": self.vocabulary.min_df,
            "n_train": self.train.n_sequences,
            "n_validation": 0
            if self.validation is None
            else self.validation.n_sequences,
            "n_test": self.test.n_sequences,
            "dropped_train_documents": self.n_dropped_documents["train"],
            "dropped_test_documents": self.n_dropped_documents["test"],
            "dropped_train_token_fraction": self.dropped_token_fraction["train"],
            "dropped_test_token_fraction": self.dropped_token_fraction["test"],
            "positive_fraction_train": self.positive_fraction["train"],
            "positive_fraction_test": self.positive_fraction["test"],
            "mean_train_length": float(self.train.lengths.double().mean()),
        }


def _optional(values: object | None, n: int, what: str) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.int64)
    if arr.shape != (n,):
        raise ValueError(f"{what} has shape {arr.shape}, expected ({n},)")
    return arr


def build_review_corpus(
    train_texts: Sequence[str],
    train_labels01: object,
    test_texts: Sequence[str],
    test_labels01: object,
    *,
    min_df: int,
    name: str = "reviews",
    train_stars: object | None = None,
    test_stars: object | None = None,
) -> ReviewCorpus:
    """Encode texts with 0/1 labels into a :class:`ReviewCorpus` (vocabulary from the
    train texts).

    Labels are mapped to +-1 (``2 * label - 1``). Documents with no in-vocabulary token
    are dropped from either split and counted; labels, stars and test texts follow the
    kept rows.
    """
    return corpus_from_splits(
        ReviewSplit(tuple(train_texts), train_labels01, train_stars),
        ReviewSplit(tuple(test_texts), test_labels01, test_stars),
        min_df=min_df,
        name=name,
    )


def corpus_from_splits(
    train: ReviewSplit, test: ReviewSplit, *, min_df: int, name: str = "reviews"
) -> ReviewCorpus:
    """:func:`build_review_corpus` from two :class:`~attnbook.data.splits.ReviewSplit`:
    each split is tokenized once (or not at all when it already is); the vocabulary
    and both encodings come from those tokens."""
    y_train = signed_from_binary(train.labels01, "train_labels01")
    y_test = signed_from_binary(test.labels01, "test_labels01")
    if y_train.size != len(train.texts) or y_test.size != len(test.texts):
        raise ValueError(
            f"labels and texts differ in length: train {y_train.size} vs "
            f"{len(train.texts)}, "
            f"test {y_test.size} vs {len(test.texts)}"
        )
    stars_train = _optional(train.stars, len(train.texts), "train_stars")
    stars_test = _optional(test.stars, len(test.texts), "test_stars")
    vocab, enc_train = Vocabulary.build_and_encode(
        train.tokens, min_df, drop_empty=True
    )
    enc_test = vocab.encode_tokenized(test.tokens, drop_empty=True)
    kt, ks = enc_train.kept, enc_test.kept
    if np.unique(y_train[kt]).size < 2:
        raise ValueError("the kept training documents hold a single class")
    return ReviewCorpus(
        name=name,
        vocabulary=vocab,
        train=enc_train.counts,
        test=enc_test.counts,
        train_labels=y_train[kt],
        test_labels=y_test[ks],
        train_stars=None if stars_train is None else stars_train[kt],
        test_stars=None if stars_test is None else stars_test[ks],
        test_texts=tuple(test.texts[i] for i in ks),
        train_kept=kt,
        test_kept=ks,
        n_documents={"train": enc_train.n_documents, "test": enc_test.n_documents},
        n_tokens={"train": enc_train.n_tokens, "test": enc_test.n_tokens},
        n_dropped_tokens={
            "train": enc_train.n_dropped_tokens,
            "test": enc_test.n_dropped_tokens,
        },
    )


def prepare_reviews(name: str, min_df: int) -> ReviewCorpus:
    """Load ``imdb`` or ``yelp`` (see :func:`attnbook.data.reviews.load_reviews`,
    through :func:`attnbook.data.splits.load_split`) and encode both splits.

    The star rating (``rating`` for IMDB, ``stars`` for Yelp) is kept when the data has
    it. Yelp's 3-star reviews are already dropped by the loader; its classes stay
    imbalanced (about 77 % positive), which :attr:`ReviewCorpus.positive_fraction`
    reports.
    """
    return corpus_from_splits(
        load_split(name, "train"), load_split(name, "test"), min_df=min_df, name=name
    )


def min_df_for_tokens(
    texts: TokenizedTexts,
    target: int,
    candidates: Sequence[int] = tuple(range(1, 201)),
) -> tuple[int, dict[int, int]]:
    """The ``min_df`` among ``candidates`` whose vocabulary size on ``texts`` is closest
    to ``target`` (ties: the larger ``min_df``), and the size for every candidate."""
    _check_target(target, candidates)
    df = Vocabulary.from_tokenized(texts, 1).document_frequency
    sizes = {int(k): int((df >= k).sum()) for k in candidates}
    best = min(sizes, key=lambda k: (abs(sizes[k] - target), -k))
    return best, sizes


def _check_target(target: int, candidates: Sequence[int]) -> None:
    if target < 1 or not candidates:
        raise ValueError("target must be positive and candidates non-empty")
