"""Review corpora ready for the model: splits read once, the training vocabulary, and
counts, +-1 labels and stars of the documents kept (with an in-vocabulary token)."""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from attnbook.data.reviews import (
    DATA_DIR_ENV,
    TokenizedTexts,
    Vocabulary,
    load_reviews,
)
from attnbook.engine.counts import TokenCounts

#: The column holding the star rating in each data set of ``load_reviews``.
STAR_COLUMNS = {"imdb": "rating", "yelp": "stars"}
_SPLITS = ("train", "test")


@dataclass(frozen=True, eq=False)
class ReviewSplit:
    """The texts of one split, 0/1 labels and stars (or ``None``); :attr:`tokens` is
    computed on first use."""

    texts: tuple[str, ...]
    labels01: object
    stars: object | None = None

    @functools.cached_property
    def tokens(self) -> TokenizedTexts:
        return TokenizedTexts.of(self.texts)

    def select(self, rows: object) -> ReviewSplit:
        """The documents ``rows`` (row numbers, in that order)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self.texts)):
            raise ValueError(f"rows must lie in [0, {len(self.texts)})")
        stars = None if self.stars is None else np.asarray(self.stars)[rows]
        texts = tuple(self.texts[i] for i in rows.tolist())
        return ReviewSplit(texts, np.asarray(self.labels01)[rows], stars)


def load_split(name: str, split: str) -> ReviewSplit:
    """``load_reviews(name, split)`` as a :class:`ReviewSplit`; the last two kept (a
    mirror file whose bytes changed is read again)."""
    raw, digest = os.environ.get(DATA_DIR_ENV), None
    if raw is not None:
        try:
            data = (Path(raw).expanduser() / name / f"{split}.parquet").read_bytes()
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        except OSError:  # load_reviews says what is wrong
            pass
    return _read_split(name, split, raw, digest)


@functools.lru_cache(maxsize=2)
def _read_split(name: str, split: str, raw: str | None, digest: str | None):
    table = load_reviews(name, split).with_format("arrow")[:]
    stars = STAR_COLUMNS[name]
    return ReviewSplit(
        texts=tuple(table.column("text").to_pylist()),
        labels01=table.column("label").to_numpy(),
        stars=table.column(stars).to_numpy() if stars in table.column_names else None,
    )


def clear_split_cache() -> None:
    """Forget the splits :func:`load_split` kept."""
    _read_split.cache_clear()


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
        if split not in _SPLITS:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        labels = self.train_labels if split == "train" else self.test_labels
        return torch.from_numpy(labels).to(dtype=dtype, device=device)

    def summary(self) -> dict[str, float]:
        """The numbers a chapter reports about the corpus."""
        out = {"vocab_size": self.vocab_size, "min_df": self.vocabulary.min_df}
        out |= {"n_train": self.train.n_sequences, "n_test": self.test.n_sequences}
        for s, kept, labels in (
            ("train", self.train_kept, self.train_labels),
            ("test", self.test_kept, self.test_labels),
        ):
            out[f"dropped_{s}_documents"] = self.n_documents[s] - int(kept.size)
            dropped = self.n_dropped_tokens[s] / max(self.n_tokens[s], 1)
            out[f"dropped_{s}_token_fraction"] = dropped
            out[f"positive_fraction_{s}"] = float((labels == 1).mean())
        return out | {"mean_train_length": float(self.train.lengths.double().mean())}


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
    for split, part in (("train", train), ("test", test)):
        n, stars = len(part.texts), part.stars
        if np.shape(part.labels01) != (n,) or not np.isin(part.labels01, (0, 1)).all():
            raise ValueError(
                f"{split}: one label per text, 0 (negative) or 1 (positive)"
            )
        if stars is not None and np.shape(stars) != (n,):
            raise ValueError(
                f"{split}_stars: one per text, got shape {np.shape(stars)}"
            )
    vocab, train_enc = Vocabulary.build_and_encode(
        train.tokens, min_df, drop_empty=True
    )
    enc = {"train": train_enc, "test": vocab.encode(test.tokens, drop_empty=True)}
    per_split = {}  # labels (+-1) and stars of the kept documents, and their rows
    for s, part in (("train", train), ("test", test)):
        kept = enc[s].kept
        per_split[f"{s}_labels"] = 2 * np.asarray(part.labels01, np.int64)[kept] - 1
        stars = part.stars
        per_split[f"{s}_stars"] = (
            None if stars is None else np.asarray(stars, np.int64)[kept]
        )
        per_split[f"{s}_kept"] = kept
    if np.unique(per_split["train_labels"]).size < 2:
        raise ValueError("the kept training documents hold a single class")
    return ReviewCorpus(
        name=name,
        vocabulary=vocab,
        train=enc["train"].counts,
        test=enc["test"].counts,
        n_documents={s: e.n_documents for s, e in enc.items()},
        n_tokens={s: e.n_tokens for s, e in enc.items()},
        n_dropped_tokens={s: e.n_dropped_tokens for s, e in enc.items()},
        **per_split,
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
    df = texts.document_frequency  # all words, each in at least one document
    sizes = {int(k): int((df >= k).sum()) for k in candidates}
    return min(sizes, key=lambda k: (abs(sizes[k] - target), -k)), sizes
