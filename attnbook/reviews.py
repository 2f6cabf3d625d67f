"""Review corpora ready for the model: vocabulary, token counts, +-1 labels and star ratings.

:func:`prepare_reviews` loads a dataset through :func:`attnbook.data.load_reviews`, builds the
vocabulary on the *training* split (tokens with document frequency at least ``min_df``, see
:mod:`attnbook.data`), encodes both splits, drops the documents left without an in-vocabulary
token, and returns a :class:`ReviewCorpus` whose labels, star ratings and (test) texts are
aligned with the kept documents. :func:`build_review_corpus` does the same from texts and labels
already in memory (used by the tests and by anyone with their own data).

:func:`highlight_html` renders a text with every in-vocabulary word shaded by a per-token
weight (for example the attention weight that the ``<cls>`` query gives it).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from .counts import TokenCounts
from .data import Vocabulary, load_reviews

__all__ = ["ReviewCorpus", "build_review_corpus", "prepare_reviews", "highlight_html"]


@dataclass(frozen=True)
class ReviewCorpus:
    """A binary review data set encoded over one vocabulary.

    Attributes
    ----------
    name:
        ``"imdb"``, ``"yelp"`` or any name given to :func:`build_review_corpus`.
    vocabulary:
        the :class:`~attnbook.data.Vocabulary` built on the training texts.
    train, test:
        :class:`~attnbook.counts.TokenCounts` of the kept documents of each split.
    train_labels, test_labels:
        ``(n,)`` int64 NumPy arrays of labels in ``{-1, +1}``, aligned with ``train`` / ``test``.
    train_stars, test_stars:
        ``(n,)`` int64 star ratings aligned with the kept documents (IMDB 1-10, Yelp 1-5), or
        ``None`` when the data has none.
    test_texts:
        the raw texts of the kept test documents (for highlighting).
    train_kept, test_kept:
        row numbers of the kept documents in the original splits.
    n_documents, n_tokens, n_dropped_tokens:
        per split (``{"train": ..., "test": ...}``): documents before dropping, token
        occurrences, and occurrences dropped because they are outside the vocabulary.
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

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    @property
    def n_dropped_documents(self) -> dict[str, int]:
        """Documents left without any in-vocabulary token, per split."""
        return {
            "train": self.n_documents["train"] - int(self.train_kept.size),
            "test": self.n_documents["test"] - int(self.test_kept.size),
        }

    @property
    def dropped_token_fraction(self) -> dict[str, float]:
        """Fraction of token occurrences outside the vocabulary, per split."""
        return {s: self.n_dropped_tokens[s] / max(self.n_tokens[s], 1) for s in ("train", "test")}

    @property
    def positive_fraction(self) -> dict[str, float]:
        """Fraction of positive (+1) documents among the kept ones, per split (the imbalance)."""
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
        """The +-1 labels of ``split`` (``"train"`` or ``"test"``) as a float tensor."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        arr = self.train_labels if split == "train" else self.test_labels
        return torch.from_numpy(arr).to(dtype=dtype, device=device)

    def summary(self) -> dict[str, float]:
        """The numbers a chapter reports about the corpus, as a flat dictionary."""
        return {
            "vocab_size": self.vocab_size,
            "min_df": self.vocabulary.min_df,
            "n_train": self.train.n_sequences,
            "n_test": self.test.n_sequences,
            "dropped_train_documents": self.n_dropped_documents["train"],
            "dropped_test_documents": self.n_dropped_documents["test"],
            "dropped_train_token_fraction": self.dropped_token_fraction["train"],
            "dropped_test_token_fraction": self.dropped_token_fraction["test"],
            "positive_fraction_train": self.positive_fraction["train"],
            "positive_fraction_test": self.positive_fraction["test"],
            "mean_train_length": float(self.train.lengths.double().mean()),
        }


def _signed(labels01: object, what: str) -> np.ndarray:
    arr = np.asarray(labels01)
    if arr.ndim != 1 or arr.dtype.kind not in "iub":
        raise ValueError(f"{what} must be a 1-D integer array of 0/1 labels")
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][0]
        raise ValueError(f"{what} must be 0 (negative) or 1 (positive); found {bad!r}")
    return (2 * arr.astype(np.int64) - 1).astype(np.int64)


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
    """Encode texts with 0/1 labels into a :class:`ReviewCorpus` (vocabulary from the train texts).

    Labels are mapped to +-1 (``2 * label - 1``). Documents with no in-vocabulary token are
    dropped from either split and counted; labels, stars and test texts follow the kept rows.
    """
    train_texts, test_texts = list(train_texts), list(test_texts)
    y_train = _signed(train_labels01, "train_labels01")
    y_test = _signed(test_labels01, "test_labels01")
    if y_train.size != len(train_texts) or y_test.size != len(test_texts):
        raise ValueError(
            f"labels and texts differ in length: train {y_train.size} vs {len(train_texts)}, "
            f"test {y_test.size} vs {len(test_texts)}"
        )
    stars_train = _optional(train_stars, len(train_texts), "train_stars")
    stars_test = _optional(test_stars, len(test_texts), "test_stars")
    vocab = Vocabulary.build(train_texts, min_df)
    enc_train = vocab.encode(train_texts, drop_empty=True)
    enc_test = vocab.encode(test_texts, drop_empty=True)
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
        test_texts=tuple(test_texts[i] for i in ks),
        train_kept=kt,
        test_kept=ks,
        n_documents={"train": enc_train.n_documents, "test": enc_test.n_documents},
        n_tokens={"train": enc_train.n_tokens, "test": enc_test.n_tokens},
        n_dropped_tokens={"train": enc_train.n_dropped_tokens, "test": enc_test.n_dropped_tokens},
    )


def prepare_reviews(name: str, min_df: int) -> ReviewCorpus:
    """Load ``imdb`` or ``yelp`` (see :func:`attnbook.data.load_reviews`) and encode both splits.

    The star rating (``rating`` for IMDB, ``stars`` for Yelp) is kept when the data has it.
    Yelp's 3-star reviews are already dropped by the loader; its classes stay imbalanced
    (about 77 % positive), which :attr:`ReviewCorpus.positive_fraction` reports.
    """
    splits = {s: load_reviews(name, s) for s in ("train", "test")}
    star_col = {"imdb": "rating", "yelp": "stars"}.get(name)

    def stars(ds):
        return ds[star_col] if star_col in ds.column_names else None

    tr, te = splits["train"], splits["test"]
    return build_review_corpus(
        tr["text"], tr["label"], te["text"], te["label"],
        min_df=min_df, name=name, train_stars=stars(tr), test_stars=stars(te),
    )


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.IGNORECASE)


def highlight_html(
    text: str,
    vocabulary: Vocabulary,
    weight: Mapping[int, float] | np.ndarray,
    *,
    color: tuple[int, int, int] = (42, 157, 143),
    max_chars: int | None = 600,
) -> str:
    """HTML of ``text`` with each in-vocabulary word shaded in proportion to ``weight[id]``.

    ``weight`` maps a token id to a non-negative number (an array indexed by id works); the
    shading is relative to the largest weight among the words shown. Words are found with the
    tokenization rule of :mod:`attnbook.data` (matching case-insensitively on the original
    text, so the reader sees the review as written); ``<br />`` tags become line breaks. Text
    beyond ``max_chars`` characters is cut at a word boundary and marked with an ellipsis.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    text = text.replace("<br />", "\n")
    if max_chars is not None and len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars)
        text = text[: cut if cut > 0 else max_chars] + " …"
    pieces: list[tuple[str, float | None]] = []
    pos = 0
    for m in _WORD.finditer(text):
        pieces.append((text[pos : m.start()], None))
        word = m.group(0)
        try:
            tid = vocabulary.id(word.lower())
        except KeyError:
            pieces.append((word, None))
        else:
            w = float(weight[tid])
            if not np.isfinite(w) or w < 0:
                raise ValueError(f"weight of token {word.lower()!r} is {w}; need finite, >= 0")
            pieces.append((word, w))
        pos = m.end()
    pieces.append((text[pos:], None))
    top = max((w for _, w in pieces if w is not None), default=0.0) or 1.0
    r, g, b = color
    out = []
    for chunk, w in pieces:
        esc = html.escape(chunk).replace("\n", "<br>")
        if w is None:
            out.append(esc)
        else:
            out.append(
                f'<span style="background-color: rgba({r},{g},{b},{w / top:.3f}); '
                f'border-radius: 3px" title="{w:.3g}">{esc}</span>'
            )
    return '<div style="line-height: 1.6; font-family: sans-serif">' + "".join(out) + "</div>"
