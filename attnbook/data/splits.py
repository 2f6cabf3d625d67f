"""One split of a review data set in memory: texts, 0/1 labels, star ratings and the
texts tokenized once.

:class:`ReviewSplit` holds the columns a :class:`attnbook.data.corpus.ReviewCorpus` is
built from; its :attr:`~ReviewSplit.tokens` are computed on first use and kept, so a
vocabulary, its ``min_df`` and the encoding all come from one tokenization.
:func:`load_split` reads ``imdb`` or ``yelp`` through
:func:`attnbook.data.reviews.load_reviews` and remembers the last two splits it read
(one data set's train and test), keyed by the data set, the split and what they were
read from (the hub, or the mirror file and a digest of its bytes), so a chapter that
builds two corpora from the same data reads and tokenizes it once.
:func:`clear_split_cache` forgets them.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Hashable

import numpy as np

from attnbook.data.reviews import TokenizedTexts
from attnbook.data.sources import DATA_DIR_ENV, load_reviews

__all__ = ["STAR_COLUMNS", "ReviewSplit", "load_split", "clear_split_cache"]

# : The column holding the star rating in each data set of
# :func:`attnbook.data.reviews.load_reviews`.
STAR_COLUMNS = {"imdb": "rating", "yelp": "stars"}

_CACHE_SIZE = 2
_cache: OrderedDict[Hashable, "ReviewSplit"] = OrderedDict()


@dataclass(frozen=True, eq=False)
class ReviewSplit:
    """The texts of one split with their 0/1 labels and, when known, star ratings
    (labels and stars are checked where a corpus is built from them).

    :attr:`tokens` tokenizes the texts on first use and keeps the result.
    """

    texts: tuple[str, ...]
    labels01: object
    stars: object | None = None
    _tokens: TokenizedTexts | None = field(default=None, repr=False)

    @property
    def tokens(self) -> TokenizedTexts:
        """The texts tokenized (once: the result is kept)."""
        if self._tokens is None:
            object.__setattr__(self, "_tokens", TokenizedTexts.of(self.texts))
        return self._tokens

    def select(self, rows: object) -> "ReviewSplit":
        """The documents ``rows`` (row numbers, in that order). Their tokens come from
        this split's when it is already tokenized, else from their own texts."""
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
    """What ``load_reviews(name, split)`` reads now: the hub, or the mirror file and a
    digest of its bytes; ``None`` when that cannot be told (the split is then read
    without the cache)."""
    raw = os.environ.get(DATA_DIR_ENV)
    if raw is None:
        return (name, split, "hub")
    try:
        data = (Path(raw).expanduser() / name / f"{split}.parquet").read_bytes()
    except OSError:
        return None
    return (name, split, raw, hashlib.blake2b(data, digest_size=16).hexdigest())


def _read(name: str, split: str, star_column: str | None) -> ReviewSplit:
    table = load_reviews(name, split).with_format("arrow")[:]
    stars = None
    if star_column is not None and star_column in table.column_names:
        stars = table.column(star_column).to_numpy()
    return ReviewSplit(
        texts=tuple(table.column("text").to_pylist()),
        labels01=table.column("label").to_numpy(),
        stars=stars,
    )


def load_split(name: str, split: str) -> ReviewSplit:
    """The split ``split`` of ``name`` (see :func:`attnbook.data.reviews.load_reviews`)
    as a :class:`ReviewSplit`, with the star rating of :data:`STAR_COLUMNS` when the
    data has it; the last two splits read are kept (see the module docstring)."""
    key = _source_key(name, split)
    if key is not None and key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    got = _read(name, split, STAR_COLUMNS.get(name))
    if key is not None:
        _cache[key] = got
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return got


def clear_split_cache() -> None:
    """Forget the splits :func:`load_split` kept."""
    _cache.clear()
