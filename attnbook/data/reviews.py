"""Real review data: loading, tokenization and vocabulary.

Loading (implemented in :mod:`attnbook.data.sources`, re-exported here)
    :func:`load_reviews` reads ``imdb`` or ``yelp`` from a local parquet mirror when the
    environment variable ``ATTNBOOK_DATA_DIR`` names one (files
    ``<name>/<split>.parquet``), and from the Hugging Face hub when it is unset; set but
    empty, it is an error. Both paths give the same kind of corpus, by the recipe of
    :mod:`attnbook.data.recipe` (the hub's Yelp is a seeded sample of the mirror's size
    and star histogram). Either way it returns a ``datasets.Dataset`` with a ``text``
    column and an integer ``label`` column (0 = negative, 1 = positive), plus the star
    ``rating`` (IMDB, 1-10, mirror only) or ``stars`` (Yelp, 1, 2, 4 or 5).

    IMDB's ``label`` must hold 0 and 1 only and its ``rating``, when present, 1-10;
    with ratings, every row's label must be the one its rating fixes (7-10 positive,
    1-4 negative: :func:`attnbook.data.recipe.verify_imdb_labels`), so that labels
    inverted or shuffled among the rows, which keep the class counts, are refused too.
    Yelp's label is derived from the stars (4-5 positive, 1-2 negative, 3-star reviews
    dropped), so a Yelp mirror needs ``text`` and ``stars`` (1-5) only; a ``label``
    column there is ignored. Any other value, a missing value or a non-integer column
    is refused with a ``ValueError`` that names the file and the column.

Tokenization rule (:func:`tokenize`)
    lower-case the text, replace the HTML line breaks ``<br />`` of IMDB by spaces, and
    take as tokens the maximal runs of letters ``a-z``, optionally followed by one
    apostrophe and more letters (``don't``, ``film's``). Digits, punctuation and other
    characters separate tokens.

Tokenized texts (:class:`TokenizedTexts`)
    each text is tokenized once into counts of its distinct tokens; the vocabulary of
    any ``min_df`` and the encoding over a vocabulary are computed from them.

Vocabulary rule (:class:`Vocabulary`)
    the tokens of the *training* split whose document frequency (number of training
    documents that contain them) is at least ``min_df``; ids are assigned by decreasing
    document frequency, ties broken alphabetically. Encoding drops tokens outside the
    vocabulary and reports how many it dropped; documents left with no token are
    reported and removed only when asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from attnbook.data.sources import (
    DATA_DIR_ENV,
    DatasetUnavailableError,
    data_source,
    load_reviews,
)
from attnbook.engine.counts import TokenCounts

__all__ = [
    "DATA_DIR_ENV",
    "DatasetUnavailableError",
    "load_reviews",
    "data_source",
    "tokenize",
    "TokenizedTexts",
    "Vocabulary",
    "EncodedCorpus",
]

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")


# ------------------------------------------------------------------------- tokenization
def tokenize(text: str) -> list[str]:
    """Split one text into tokens by the rule in the module docstring."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    return _TOKEN.findall(text.lower().replace("<br />", " "))


# every byte that cannot be part of a token (all but a-z and the apostrophe) -> space
_SEPARATE = bytes(c if 97 <= c <= 122 or c == 39 else 32 for c in range(256))


def _clean(text: str) -> str:
    """``text`` lower-cased, without IMDB line breaks, and with every character that
    cannot be part of a token replaced by a space: its tokens by the rule of
    :func:`tokenize` are those of ``text``, and each run of non-spaces is one token
    unless it holds an apostrophe."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    lower = text.lower().replace("<br />", " ")
    return lower.encode("ascii", "replace").translate(_SEPARATE).decode("ascii")


def _gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0, ..., starts[i] + lengths[i] - 1``, for all
    ``i``."""
    within = np.arange(int(lengths.sum())) - np.repeat(
        np.cumsum(lengths) - lengths, lengths
    )
    return np.repeat(starts, lengths) + within


def _occurrences(
    texts: Iterable[str],
) -> tuple[list[str], np.ndarray, np.ndarray, int]:
    """Every token occurrence of ``texts`` by the rule of :func:`tokenize`, as its
    document (``rows``) and its index in ``words`` (``codes``), in no particular
    order; and the number of texts. The texts are split at spaces after
    :func:`_clean`, in Arrow; only the pieces holding an apostrophe (or empty) go
    through the regular expression, once per distinct piece."""
    cleaned = [_clean(t) for t in texts]
    pieces = pc.ascii_split_whitespace(pa.array(cleaned, type=pa.large_string()))
    rows = pc.list_parent_indices(pieces).to_numpy().astype(np.int64, copy=False)
    encoded = pc.list_flatten(pieces).dictionary_encode()
    words = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    odd = [j for j, w in enumerate(words) if not w or "'" in w]
    if odd:
        n_pieces = len(words)
        index = {w: j for j, w in enumerate(words)}
        split = [
            [index.setdefault(t, len(index)) for t in _TOKEN.findall(words[j])]
            for j in odd
        ]
        words = list(index)  # insertion order: the ids
        lengths = np.zeros(n_pieces, dtype=np.int64)
        lengths[odd] = [len(c) for c in split]
        starts = np.zeros(n_pieces, dtype=np.int64)
        starts[odd] = np.cumsum(lengths[odd]) - lengths[odd]
        table = np.fromiter(chain.from_iterable(split), np.int64)
        is_odd = np.zeros(n_pieces, dtype=bool)
        is_odd[odd] = True
        hit = is_odd[codes]
        hit_codes, hit_rows = codes[hit], rows[hit]
        reps = lengths[hit_codes]
        rows = np.concatenate([rows[~hit], np.repeat(hit_rows, reps)])
        codes = np.concatenate([codes[~hit], table[_gather(starts[hit_codes], reps)]])
    return words, rows, codes, len(cleaned)


@dataclass(frozen=True, eq=False)
class TokenizedTexts:
    """Texts tokenized once: their distinct tokens and how often each occurs in each
    document, from which any :class:`Vocabulary` of the texts is built and the texts
    encoded without tokenizing them again.

    ``words`` are the distinct tokens in the vocabulary order (decreasing document
    frequency, ties alphabetical), so the vocabulary of any ``min_df`` is a prefix of
    them; ``document_frequency`` their document frequencies. Document ``i`` holds the
    entries ``indptr[i]:indptr[i + 1]`` of ``token_ids`` (indices into ``words``,
    increasing) and ``counts`` (occurrences, all >= 1); a document without tokens holds
    none. The arrays are shared, not copied: do not modify them.
    """

    words: tuple[str, ...]
    document_frequency: np.ndarray
    indptr: np.ndarray
    token_ids: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, texts: Iterable[str]) -> "TokenizedTexts":
        """Tokenize every text once, by the rule of :func:`tokenize` (in bulk)."""
        words, rows, codes, n_documents = _occurrences(texts)
        # the distinct (document, token) pairs and how often each occurs
        size = max(len(words), 1)
        keys = np.sort(rows * size + codes, kind="stable")
        first = np.ones(keys.size, dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        counts = np.diff(starts, append=keys.size)
        rows, codes = np.divmod(keys[starts], size)
        return _ranked(words, rows, codes, counts, n_documents)

    @property
    def n_documents(self) -> int:
        return self.indptr.size - 1

    @property
    def n_tokens(self) -> int:
        """Token occurrences in all documents."""
        return int(self.counts.sum())

    def select(self, rows: object) -> "TokenizedTexts":
        """The documents ``rows`` (row numbers, in that order), as if only their texts
        had been tokenized."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_documents):
            raise ValueError(f"rows must lie in [0, {self.n_documents})")
        lengths = np.diff(self.indptr)[rows]
        take = _gather(self.indptr[rows], lengths)
        new_rows = np.repeat(np.arange(rows.size), lengths)
        return _ranked(
            self.words, new_rows, self.token_ids[take], self.counts[take], rows.size
        )


def _ranked(
    words: Sequence[str],
    rows: np.ndarray,
    codes: np.ndarray,
    counts: np.ndarray,
    n_documents: int,
) -> "TokenizedTexts":
    """:class:`TokenizedTexts` from distinct ``(row, code)`` pairs (any order) with
    their counts: the words that occur are ranked by decreasing document frequency,
    ties alphabetical, and the pairs sorted by row, then by rank."""
    df = np.bincount(codes, minlength=len(words))
    used = np.flatnonzero(df)
    names = np.asarray(words, dtype=object)[used]
    order = np.lexsort((names.astype(str), -df[used])) if used.size else used
    rank = np.full(len(words), -1, dtype=np.int64)
    rank[used[order]] = np.arange(used.size)
    codes = rank[codes]
    pairs = np.argsort(rows * max(used.size, 1) + codes, kind="stable")
    indptr = np.zeros(n_documents + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_documents), out=indptr[1:])
    return TokenizedTexts(
        words=tuple(names[order].tolist()),
        document_frequency=df[used][order].astype(np.int64),
        indptr=indptr,
        token_ids=codes[pairs],
        counts=counts[pairs].astype(np.int64, copy=False),
    )


@dataclass(frozen=True)
class EncodedCorpus:
    """A tokenized, vocabulary-encoded split.

    ``counts`` holds the documents that kept at least one token; ``kept`` gives their
    row numbers in the original split, so labels are ``labels[kept]``.
    """

    counts: TokenCounts
    kept: np.ndarray
    n_documents: int
    n_tokens: int
    n_dropped_tokens: int

    @property
    def n_dropped_documents(self) -> int:
        return self.n_documents - int(self.kept.size)

    @property
    def dropped_token_fraction(self) -> float:
        return self.n_dropped_tokens / max(self.n_tokens, 1)


@dataclass(frozen=True)
class Vocabulary:
    """Token strings with their ids and training document frequencies."""

    tokens: tuple[str, ...]
    document_frequency: np.ndarray
    min_df: int
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The id of ``token``; ``KeyError`` when it is not in the vocabulary."""
        return self._index[token]

    @classmethod
    def build(cls, texts: Sequence[str], min_df: int) -> "Vocabulary":
        """The vocabulary of ``texts`` with document frequency at least ``min_df``."""
        if min_df < 1:
            raise ValueError(f"min_df must be at least 1, got {min_df}")
        return cls.from_tokenized(TokenizedTexts.of(texts), min_df)

    @classmethod
    def from_tokenized(cls, texts: TokenizedTexts, min_df: int) -> "Vocabulary":
        """:meth:`build` from texts already tokenized."""
        if min_df < 1:
            raise ValueError(f"min_df must be at least 1, got {min_df}")
        if texts.n_documents == 0:
            raise ValueError("cannot build a vocabulary from no texts")
        size = int((texts.document_frequency >= min_df).sum())  # a prefix of words
        if size == 0:
            raise ValueError(f"no token occurs in {min_df} or more documents")
        df = texts.document_frequency[:size].copy()
        return cls(texts.words[:size], df, int(min_df))

    @classmethod
    def build_and_encode(
        cls, texts: Sequence[str] | TokenizedTexts, min_df: int, *, drop_empty: bool
    ) -> tuple["Vocabulary", EncodedCorpus]:
        """The vocabulary of ``texts`` (:meth:`build`) and the texts encoded over it
        (:meth:`encode`), tokenizing them once."""
        tokens = (
            texts if isinstance(texts, TokenizedTexts) else TokenizedTexts.of(texts)
        )
        vocab = cls.from_tokenized(tokens, min_df)
        return vocab, vocab.encode_tokenized(tokens, drop_empty=drop_empty)

    def encode(
        self, texts: Sequence[str], *, drop_empty: bool = False
    ) -> EncodedCorpus:
        """Token counts of ``texts`` over this vocabulary (vectorised).

        Out-of-vocabulary tokens are dropped and counted in ``n_dropped_tokens``. A
        document left without tokens raises ``ValueError`` unless ``drop_empty`` is
        true, in which case it is left out and reported through ``kept`` /
        ``n_dropped_documents``.
        """
        return self.encode_tokenized(TokenizedTexts.of(texts), drop_empty=drop_empty)

    def encode_tokenized(
        self, texts: TokenizedTexts, *, drop_empty: bool = False
    ) -> EncodedCorpus:
        """:meth:`encode` for texts already tokenized: their distinct tokens are looked
        up once and the per-document counts relabelled."""
        n = texts.n_documents
        if n == 0:
            raise ValueError("no texts to encode")
        index = self._index
        lookup = np.fromiter(
            (index.get(w, -1) for w in texts.words), np.int64, len(texts.words)
        )
        ids = lookup[texts.token_ids]
        inside = ids >= 0
        rows = np.repeat(np.arange(n), np.diff(texts.indptr))[inside]
        ids, counts = ids[inside], texts.counts[inside]
        present = np.bincount(rows, minlength=n) > 0
        kept = np.flatnonzero(present)
        if kept.size < n and not drop_empty:
            first = int(np.flatnonzero(~present)[0])
            raise ValueError(
                f"{n - kept.size} document(s) have no in-vocabulary token "
                f"(first: #{first}); pass drop_empty=True to leave them out"
            )
        if kept.size == 0:
            raise ValueError("no document has an in-vocabulary token")
        known = lookup[lookup >= 0]
        if known.size > 1 and not (np.diff(known) > 0).all():
            # the ids do not follow the order of ``texts.words``: sort within rows
            order = np.argsort(rows * len(self) + ids, kind="stable")
            rows, ids, counts = rows[order], ids[order], counts[order]
        indptr = np.zeros(kept.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n)[kept], out=indptr[1:])
        counts_ = TokenCounts(
            torch.from_numpy(indptr),
            torch.from_numpy(ids),
            torch.from_numpy(counts),
            len(self),
        )
        return EncodedCorpus(
            counts=counts_,
            kept=kept,
            n_documents=n,
            n_tokens=texts.n_tokens,
            n_dropped_tokens=int(texts.counts[~inside].sum()),
        )
