"""Review corpora ready for the model: splits read once, the training vocabulary, and
counts, +-1 labels and stars of the documents kept (with an in-vocabulary token)."""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Hashable, Mapping, Sequence

import numpy as np
import torch

from attnbook.data.reviews import (
    DATA_DIR_ENV,
    TokenizedTexts,
    Vocabulary,
    load_reviews,
)
from attnbook.engine.counts import TokenCounts

__all__ = [
    "STAR_COLUMNS",
    "ReviewSplit",
    "load_split",
    "clear_split_cache",
    "signed_from_binary",
    "ReviewCorpus",
    "build_review_corpus",
    "corpus_from_splits",
    "prepare_reviews",
    "min_df_for_tokens",
]

#: The column holding the star rating in each data set of ``load_reviews``.
STAR_COLUMNS = {"imdb": "rating", "yelp": "stars"}
_cache: OrderedDict[Hashable, "ReviewSplit"] = OrderedDict()


def signed_from_binary(labels01: object, what: str = "labels") -> np.ndarray:
    """0/1 labels (negative/positive) as int64 -1/+1."""
    arr = np.asarray(labels01)
    if arr.ndim != 1 or arr.dtype.kind not in "iub":
        raise ValueError(f"{what} must be a 1-D integer array of 0/1 labels")
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][0]
        raise ValueError(f"{what} must be 0 (negative) or 1 (positive); found {bad!r}")
    return (2 * arr.astype(np.int64) - 1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class ReviewSplit:
    """The texts of one split, 0/1 labels and stars (or ``None``); :attr:`tokens` is
    computed on first use."""

    texts: tuple[str, ...]
    labels01: object
    stars: object | None = None
    _tokens: TokenizedTexts | None = field(default=None, repr=False)

    @property
    def tokens(self) -> TokenizedTexts:
        if self._tokens is None:
            object.__setattr__(self, "_tokens", TokenizedTexts.of(self.texts))
        return self._tokens

    def select(self, rows: object) -> "ReviewSplit":
        """The documents ``rows`` (row numbers, in that order), tokens included."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        labels = np.asarray(self.labels01)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self.texts)):
            raise ValueError(f"rows must lie in [0, {len(self.texts)})")
        return ReviewSplit(
            texts=tuple(self.texts[i] for i in rows.tolist()),
            labels01=labels[rows],
            stars=None if self.stars is None else np.asarray(self.stars)[rows],
            _tokens=None if self._tokens is None else self._tokens.select(rows),
        )


def _source_key(name: str, split: str) -> Hashable | None:
    """The hub, or the mirror file and a digest of its bytes (``None``: unreadable)."""
    raw = os.environ.get(DATA_DIR_ENV)
    if raw is None:
        return (name, split, "hub")
    try:
        data = (Path(raw).expanduser() / name / f"{split}.parquet").read_bytes()
    except OSError:
        return None
    return (name, split, raw, hashlib.blake2b(data, digest_size=16).hexdigest())


def load_split(name: str, split: str) -> ReviewSplit:
    """``load_reviews(name, split)`` as a :class:`ReviewSplit`; the last two kept."""
    key = _source_key(name, split)
    if key is not None and key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    table = load_reviews(name, split).with_format("arrow")[:]
    star_column = STAR_COLUMNS.get(name)
    stars = None
    if star_column is not None and star_column in table.column_names:
        stars = table.column(star_column).to_numpy()
    got = ReviewSplit(
        texts=tuple(table.column("text").to_pylist()),
        labels01=table.column("label").to_numpy(),
        stars=stars,
    )
    if key is not None:
        _cache[key] = got
        while len(_cache) > 2:
            _cache.popitem(last=False)
    return got


def clear_split_cache() -> None:
    """Forget the splits :func:`load_split` kept."""
    _cache.clear()


@dataclass(frozen=True)
class ReviewCorpus:
    """A binary review data set over its training vocabulary. Labels (+-1), stars and
    ``*_kept`` (rows in the split) follow the kept documents; ``n_*`` count splits."""

    name: str
    vocabulary: Vocabulary
    train: TokenCounts
    test: TokenCounts
    train_labels: np.ndarray
    test_labels: np.ndarray
    train_stars: np.ndarray | None
    test_stars: np.ndarray | None
    train_kept: np.ndarray
    test_kept: np.ndarray
    n_documents: Mapping[str, int]
    n_tokens: Mapping[str, int]
    n_dropped_tokens: Mapping[str, int]

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def labels(
        self,
        split: str,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """The +-1 labels of ``split`` (``"train"`` or ``"test"``) as a tensor."""
        arrays = {"train": self.train_labels, "test": self.test_labels}
        if split not in arrays:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return torch.from_numpy(arrays[split]).to(dtype=dtype, device=device)

    def summary(self) -> dict[str, float]:
        """The numbers a chapter reports about the corpus."""
        kept = {"train": self.train_kept, "test": self.test_kept}
        labels = {"train": self.train_labels, "test": self.test_labels}
        splits = ("train", "test")
        return {
            "vocab_size": self.vocab_size,
            "min_df": self.vocabulary.min_df,
            "n_train": self.train.n_sequences,
            "n_test": self.test.n_sequences,
            **{
                f"dropped_{s}_documents": self.n_documents[s] - int(kept[s].size)
                for s in splits
            },
            **{
                f"dropped_{s}_token_fraction": self.n_dropped_tokens[s]
                / max(self.n_tokens[s], 1)
                for s in splits
            },
            **{
                f"positive_fraction_{s}": float((labels[s] == 1).mean()) for s in splits
            },
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
    """:func:`corpus_from_splits` from texts with 0/1 labels (and stars) in memory."""
    return corpus_from_splits(
        ReviewSplit(tuple(train_texts), train_labels01, train_stars),
        ReviewSplit(tuple(test_texts), test_labels01, test_stars),
        min_df=min_df,
        name=name,
    )


def corpus_from_splits(
    train: ReviewSplit, test: ReviewSplit, *, min_df: int, name: str = "reviews"
) -> ReviewCorpus:
    """The :class:`ReviewCorpus` of two splits: the training tokens in at least
    ``min_df`` documents; documents left without a token dropped."""
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
    enc_test = vocab.encode(test.tokens, drop_empty=True)
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
    """``imdb`` or ``yelp`` (:func:`load_split`) as a :class:`ReviewCorpus`."""
    return corpus_from_splits(
        load_split(name, "train"), load_split(name, "test"), min_df=min_df, name=name
    )


def min_df_for_tokens(
    texts: TokenizedTexts,
    target: int,
    candidates: Sequence[int] = tuple(range(1, 201)),
) -> tuple[int, dict[int, int]]:
    """The ``min_df`` among ``candidates`` whose vocabulary size on ``texts`` is closest
    to ``target`` (ties: the larger), and the size for every candidate."""
    if target < 1 or not candidates:
        raise ValueError("target must be positive and candidates non-empty")
    df = Vocabulary.build(texts, 1).document_frequency
    sizes = {int(k): int((df >= k).sum()) for k in candidates}
    best = min(sizes, key=lambda k: (abs(sizes[k] - target), -k))
    return best, sizes
