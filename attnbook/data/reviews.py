"""Real review data: loading (Hugging Face ``datasets``), tokenization and vocabulary.

Loading
    :func:`load_reviews` reads ``imdb`` or ``yelp`` from a local parquet mirror when the
    environment variable ``ATTNBOOK_DATA_DIR`` names one (files
    ``<name>/<split>.parquet``), and from the Hugging Face hub otherwise. Either way it
    returns a ``datasets.Dataset`` with a ``text`` column and an integer ``label``
    column (0 = negative, 1 = positive), plus the star ``rating`` (IMDB, 1-10, mirror
    only) or ``stars`` (Yelp, 1-5). Yelp polarity follows the usual rule: 4-5 stars
    positive, 1-2 stars negative, 3-star reviews dropped.

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

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from attnbook.engine.counts import TokenCounts

__all__ = [
    "DATA_DIR_ENV",
    "DatasetUnavailableError",
    "load_reviews",
    "tokenize",
    "Vocabulary",
    "EncodedCorpus",
]

DATA_DIR_ENV = "ATTNBOOK_DATA_DIR"
_NAMES = ("imdb", "yelp")
_SPLITS = ("train", "test")
_HUB_IDS = {"imdb": "stanfordnlp/imdb", "yelp": "Yelp/yelp_review_full"}
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")


class DatasetUnavailableError(RuntimeError):
    """Raised when a dataset is neither in the local mirror nor reachable on the hub."""


def _how_to_get(name: str) -> str:
    return (
        f"To get '{name}': either (1) download the parquet files once and point the "
        "environment "
        f"variable {DATA_DIR_ENV} at their folder, laid out as "
        f"<folder>/{name}/train.parquet and "
        f"<folder>/{name}/test.parquet; or (2) unset {DATA_DIR_ENV} on a machine that "
        "can reach "
        f"the Hugging Face hub ('{_HUB_IDS[name]}')."
    )


def _check_name_split(name: str, split: str) -> None:
    if name not in _NAMES:
        raise ValueError(f"unknown dataset {name!r}; choose one of {_NAMES}")
    if split not in _SPLITS:
        raise ValueError(
            f"unknown split {split!r} for {name!r}; choose one of {_SPLITS}"
        )


def _polarity_from_stars(stars: np.ndarray) -> np.ndarray:
    return (np.asarray(stars) >= 4).astype(np.int64)


def _from_mirror(name: str, split: str, folder: Path):
    import datasets

    path = folder / name / f"{split}.parquet"
    if not path.is_file():
        raise DatasetUnavailableError(
            f"{DATA_DIR_ENV}={folder} has no file {path.relative_to(folder)}. "
            + _how_to_get(name)
        )
    try:
        ds = datasets.Dataset.from_parquet(str(path), keep_in_memory=True)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise DatasetUnavailableError(
            f"could not read {path} as parquet ({type(err).__name__}: {err}); the "
            "file is "
            f"damaged or not parquet. Replace it with a fresh copy. "
            + _how_to_get(name)
        ) from err
    missing = {"text", "label"} - set(ds.column_names)
    if missing:
        raise DatasetUnavailableError(f"{path} lacks the columns {sorted(missing)}")
    if name == "yelp":
        ds = ds.filter(
            lambda stars: stars != 3, input_columns="stars", keep_in_memory=True
        )
        ds = ds.remove_columns(
            [c for c in ds.column_names if c not in ("text", "stars")]
        )
        ds = ds.add_column("label", _polarity_from_stars(ds["stars"]).tolist())
    else:
        ds = ds.remove_columns(
            [c for c in ds.column_names if c not in ("text", "label", "rating")]
        )
    return ds


def _from_hub(name: str, split: str):
    import datasets

    try:
        ds = datasets.load_dataset(_HUB_IDS[name], split=split)
    except Exception as err:
        raise DatasetUnavailableError(
            f"could not load '{_HUB_IDS[name]}' from the Hugging Face hub "
            f"({type(err).__name__}: {err}) and {DATA_DIR_ENV} is not set. "
            + _how_to_get(name)
        ) from err
    if name == "yelp":  # hub labels are stars - 1 in 0..4
        ds = ds.map(lambda b: {"stars": [x + 1 for x in b["label"]]}, batched=True)
        ds = ds.filter(lambda stars: stars != 3, input_columns="stars")
        ds = ds.remove_columns(["label"])
        ds = ds.add_column("label", _polarity_from_stars(ds["stars"]).tolist())
    return ds


def load_reviews(name: str, split: str = "train"):
    """Load ``imdb`` or ``yelp`` reviews as a ``datasets.Dataset`` (see the module
    docstring).

    Raises ``ValueError`` for an unknown name or split and
    :class:`DatasetUnavailableError`,
    with instructions, when the data can be found neither in the mirror nor on the hub.
    """
    _check_name_split(name, split)
    import datasets

    datasets.disable_progress_bars()  # keep notebook outputs stable
    folder = os.environ.get(DATA_DIR_ENV)
    if folder:
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise DatasetUnavailableError(
                f"{DATA_DIR_ENV}={folder} is not a folder. " + _how_to_get(name)
            )
        return _from_mirror(name, split, path)
    return _from_hub(name, split)


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
