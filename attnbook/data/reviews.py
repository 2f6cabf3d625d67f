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

    IMDB's ``label`` must hold 0 and 1 only and its ``rating``, when present, 1-10.
    Yelp's label is derived from the stars (4-5 positive, 1-2 negative, 3-star reviews
    dropped), so a Yelp mirror needs ``text`` and ``stars`` (1-5) only; a ``label``
    column there is ignored. Any other value, a missing value or a non-integer column
    is refused with a ``ValueError`` that names the file and the column.

Tokenization rule (:func:`tokenize`)
    lower-case the text, replace the HTML line breaks ``<br />`` of IMDB by spaces, and
    take as tokens the maximal runs of letters ``a-z``, optionally followed by one
    apostrophe and more letters (``don't``, ``film's``). Digits, punctuation and other
    characters separate tokens.

Vocabulary rule (:class:`Vocabulary`)
    the tokens of the *training* split whose document frequency (number of training
    documents that contain them) is at least ``min_df``; ids are assigned by decreasing
    document frequency, ties broken alphabetically. Encoding drops tokens outside the
    vocabulary and reports how many it dropped; documents left with no token are
    reported and removed only when asked.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

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


def _tokenize_all(texts: Iterable[str]) -> list[list[str]]:
    return [tokenize(t) for t in texts]


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
        docs = _tokenize_all(texts)
        if not docs:
            raise ValueError("cannot build a vocabulary from no texts")
        # document frequency: count each document's distinct tokens once
        counter = Counter(chain.from_iterable(map(set, docs)))
        kept = [(w, c) for w, c in counter.items() if c >= min_df]
        if not kept:
            raise ValueError(f"no token occurs in {min_df} or more documents")
        words = np.array([w for w, _ in kept], dtype=object)
        df = np.array([c for _, c in kept], dtype=np.int64)
        order = np.lexsort((words.astype(str), -df))
        return cls(tuple(words[order].tolist()), df[order], int(min_df))

    def encode(
        self, texts: Sequence[str], *, drop_empty: bool = False
    ) -> EncodedCorpus:
        """Token counts of ``texts`` over this vocabulary (vectorised).

        Out-of-vocabulary tokens are dropped and counted in ``n_dropped_tokens``. A
        document left without tokens raises ``ValueError`` unless ``drop_empty`` is
        true, in which case it is left out and reported through ``kept`` /
        ``n_dropped_documents``.
        """
        docs = _tokenize_all(texts)
        if not docs:
            raise ValueError("no texts to encode")
        flat = pd.Series(list(chain.from_iterable(docs)), dtype=object)
        ids = pd.Index(self.tokens).get_indexer(flat)
        rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
        inside = ids >= 0
        rows, ids = rows[inside], ids[inside]
        present = np.zeros(len(docs), dtype=bool)
        present[rows] = True
        kept = np.flatnonzero(present)
        if kept.size < len(docs) and not drop_empty:
            first = int(np.flatnonzero(~present)[0])
            raise ValueError(
                f"{len(docs) - kept.size} document(s) have no in-vocabulary token "
                f"(first: #{first}); pass drop_empty=True to leave them out"
            )
        if kept.size == 0:
            raise ValueError("no document has an in-vocabulary token")
        new_row = np.full(len(docs), -1, dtype=np.int64)
        new_row[kept] = np.arange(kept.size)
        counts = TokenCounts.from_pairs(new_row[rows], ids, int(kept.size), len(self))
        return EncodedCorpus(
            counts=counts,
            kept=kept,
            n_documents=len(docs),
            n_tokens=int(flat.size),
            n_dropped_tokens=int((~inside).sum()),
        )
