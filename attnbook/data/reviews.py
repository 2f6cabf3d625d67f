"""IMDB and Yelp reviews: the loader (the parquet mirror named by ``ATTNBOOK_DATA_DIR``,
else the Hugging Face hub by the README's recipe), the tokenizer and the vocabulary."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.validation import (
    DatasetUnavailableError,
    check_column,
    check_imdb_columns,
    known_shape,
    verify_split,
)

DATA_DIR_ENV = "ATTNBOOK_DATA_DIR"
RECIPE = "attnbook-reviews-1"  # the recipe's name and version, in every run's record
HUB_IDS = {"imdb": "stanfordnlp/imdb", "yelp": "Yelp/yelp_review_full"}
YELP_SAMPLE_SEED = 20250601
_SPLITS = ("train", "test")


def load_reviews(name: str, split: str = "train"):
    """``imdb`` or ``yelp`` as a ``datasets.Dataset``: ``text``, ``label`` (0/1) and
    ``rating`` (IMDB 1-10, mirror only) or ``stars`` (Yelp 1, 2, 4, 5; no 3-star
    reviews); :class:`DatasetUnavailableError`, saying how to get it, if not found."""
    if name not in HUB_IDS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {tuple(HUB_IDS)}")
    if split not in _SPLITS:
        raise ValueError(
            f"unknown split {split!r} for {name!r}; choose one of {_SPLITS}"
        )
    import datasets

    datasets.disable_progress_bars()  # keep notebook outputs stable
    raw = os.environ.get(DATA_DIR_ENV)
    cols = _from_hub(name, split) if raw is None else _from_mirror(name, split, raw)
    if "stars" in cols:  # Yelp: the label is derived from the stars
        cols["label"] = (cols["stars"] >= 4).astype(np.int64)
    kinds = {k: datasets.Value("string" if k == "text" else "int64") for k in cols}
    return datasets.Dataset.from_dict(cols, features=datasets.Features(kinds))


def _unavailable(name: str, problem: str) -> DatasetUnavailableError:
    return DatasetUnavailableError(
        f"{problem} To get '{name}': either (1) download the parquet files once and "
        f"point the environment variable {DATA_DIR_ENV} at their folder, laid out as "
        f"<folder>/{name}/train.parquet and <folder>/{name}/test.parquet; or (2) unset "
        f"{DATA_DIR_ENV} on a machine that can reach the Hugging Face hub "
        f"('{HUB_IDS[name]}')."
    )


def _from_mirror(name: str, split: str, raw: str) -> dict[str, Any]:
    """The verified columns of ``<raw>/<name>/<split>.parquet``."""
    path = Path(raw).expanduser() / name / f"{split}.parquet"
    if not raw.strip():
        raise _unavailable(
            name,
            f"{DATA_DIR_ENV} is set but empty: set it to the mirror folder, or unset "
            f"it (unset {DATA_DIR_ENV}) to read the hub.",
        )
    if not path.parents[1].is_dir():
        raise _unavailable(name, f"{DATA_DIR_ENV}={raw} is not a folder.")
    if not path.is_file():
        folder = path.parents[1]
        raise _unavailable(
            name, f"{DATA_DIR_ENV}={folder} has no file {name}/{path.name}."
        )
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise _unavailable(
            name,
            f"could not read {path} as parquet ({type(err).__name__}: {err}); the file "
            "is damaged or not parquet. Replace it with a fresh copy.",
        ) from err
    where = str(path)
    if name == "imdb":
        cols = check_imdb_columns(table, where)
        verify_split(name, split, cols["label"], where, cols.get("rating"))
        return cols
    stars = check_column(table, "stars", where, range(1, 6), "Yelp stars 1 to 5")
    keep = np.flatnonzero(stars != 3)
    verify_split(name, split, stars[keep], where)
    return {"text": check_column(table, "text", where).take(keep), "stars": stars[keep]}


def _from_hub(name: str, split: str) -> dict[str, Any]:
    """The recipe's columns of the hub's data set: IMDB whole, Yelp's seeded sample."""
    import datasets

    try:
        table = datasets.load_dataset(HUB_IDS[name], split=split).with_format("arrow")[
            :
        ]
    except Exception as err:
        raise _unavailable(
            name,
            f"could not load '{HUB_IDS[name]}' from the Hugging Face hub "
            f"({type(err).__name__}: {err}) and {DATA_DIR_ENV} is not set.",
        ) from err
    where = f"the hub's '{HUB_IDS[name]}' ({split} split)"
    if name == "imdb":
        cols = check_imdb_columns(table, where)
    else:
        stars = 1 + check_column(
            table, "label", where, range(5), "classes 0-4 (stars - 1)"
        )
    try:
        if name == "imdb":
            verify_split(name, split, cols["label"], where)
            return cols
        rows = sample_by_stars(stars, known_shape(name, split), split)
    except ValueError as err:
        changed = f"{where}: {err}; the hub's data changed (recipe {RECIPE})."
        raise _unavailable(name, changed) from err
    texts = check_column(table, "text", where).take(rows).to_pylist()
    return {"text": [re.sub(r"\\+n", "\n", t) for t in texts], "stars": stars[rows]}


def sample_by_stars(
    stars: np.ndarray, counts: Mapping[int, int], split: str
) -> np.ndarray:
    """Row numbers (ascending) of the recipe's seeded draw of ``counts[k]`` rows with
    ``k`` stars (the README's *Data* section)."""
    rng = np.random.default_rng([YELP_SAMPLE_SEED, _SPLITS.index(split)])
    chosen = []
    for star, count in sorted(counts.items()):
        rows = np.flatnonzero(stars == star)
        if rows.size < count:
            raise ValueError(
                f"the {split} split has {rows.size} reviews with {star} stars; the "
                f"recipe {RECIPE} draws {count}"
            )
        chosen.append(rows[rng.permutation(rows.size)[:count]])
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def data_source() -> dict[str, Any]:
    """Where :func:`load_reviews` reads from in this process, for a run's record."""
    raw = os.environ.get(DATA_DIR_ENV)
    if raw is not None and not (raw.strip() and Path(raw).expanduser().is_dir()):
        why = "set but empty" if not raw.strip() else "not a folder"
        return {"path": f"{DATA_DIR_ENV} {why}", "recipe": RECIPE, "datasets": {}}
    found = {}
    for name, hub_id in HUB_IDS.items():
        if raw is None:
            rule = "whole splits, without star ratings"
            if name == "yelp":
                seed = f"seed {YELP_SAMPLE_SEED}"
                rule = f"seeded sample ({seed}) with the mirror's count per star"
            entry = {"source": hub_id, "rule": rule}
            entry |= {s: sum(known_shape(name, s).values()) for s in _SPLITS}
        else:
            rule = "whole files" if name == "imdb" else "3-star reviews dropped"
            entry = {"source": f"local mirror, {name}/<split>.parquet", "rule": rule}
            folder = Path(raw).expanduser() / name
            entry |= {s: _mirror_rows(folder / f"{s}.parquet", name) for s in _SPLITS}
        found[name] = entry
    path = "Hugging Face hub" if raw is None else "local mirror"
    return {"path": path, "recipe": RECIPE, "datasets": found}


def _mirror_rows(path: Path, name: str) -> int | None:
    try:
        if name == "imdb":
            return int(pq.read_metadata(path).num_rows)
        stars = pq.read_table(path, columns=["stars"]).column("stars").to_numpy()
        return int((stars != 3).sum())
    except Exception:  # an absent or damaged file: the loader reports it when read
        return None


# ------------------------------------------------------------- tokens and vocabulary
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_SEPARATE = bytes(c if 97 <= c <= 122 or c == 39 else 32 for c in range(256))


def tokenize(text: str) -> list[str]:
    """The tokens of ``text``: lower-cased, IMDB's ``<br />`` made a space, maximal
    runs of ``a-z`` with at most one inner apostrophe (``don't``)."""
    return _TOKEN.findall(_clean(text))


def _clean(text: str) -> str:
    """``text`` lower-cased, every character that cannot be part of a token a space."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    lower = text.lower().replace("<br />", " ")
    return lower.encode("ascii", "replace").translate(_SEPARATE).decode("ascii")


@dataclass(frozen=True, eq=False)
class TokenizedTexts:
    """Texts tokenized once. ``words``: the distinct tokens by decreasing document
    frequency, ties alphabetical (a vocabulary is a prefix); document ``i`` holds
    entries ``indptr[i]:indptr[i + 1]`` of ``token_ids`` (increasing) and ``counts``."""

    words: tuple[str, ...]
    document_frequency: np.ndarray
    indptr: np.ndarray
    token_ids: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, texts: Iterable[str]) -> TokenizedTexts:
        """Every text tokenized by :func:`tokenize`, in bulk (Arrow's RE2 writes a
        space after each token with an apostrophe and for each other apostrophe)."""
        cleaned = pa.array([_clean(t) for t in texts], pa.large_string())
        spaced = pc.replace_substring_regex(cleaned, r"([a-z]+'[a-z]+)|'", r"\1 ")
        pieces = pc.ascii_split_whitespace(spaced)  # the tokens, and '' at the ends
        flat = pc.list_flatten(pieces)
        is_token = pc.not_equal(flat, "")
        rows = pc.list_parent_indices(pieces).filter(is_token).to_numpy()
        rows = rows.astype(np.int64)
        encoded = flat.filter(is_token).dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        words = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
        size = max(words.size, 1)  # the distinct (row, word) pairs, counted
        keys, counts = np.unique(rows * size + codes, return_counts=True)
        rows, codes = np.divmod(keys, size)
        df = np.bincount(codes, minlength=words.size)
        order = np.lexsort((words.astype(str), -df))  # by df, then alphabetical
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        pairs = np.argsort(rows * size + rank[codes], kind="stable")
        indptr = np.zeros(len(cleaned) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(cleaned)), out=indptr[1:])
        words = tuple(words[order].tolist())
        return cls(words, df[order], indptr, rank[codes][pairs], counts[pairs])

    @property
    def n_documents(self) -> int:
        return self.indptr.size - 1


Texts = Sequence[str] | TokenizedTexts


@dataclass(frozen=True)
class EncodedCorpus:
    """A split over a vocabulary: ``counts`` of the documents left with a token, their
    rows in the split (``kept``), the split's documents and tokens (all, dropped)."""

    counts: TokenCounts
    kept: np.ndarray
    n_documents: int
    n_tokens: int
    n_dropped_tokens: int


@dataclass(frozen=True)
class Vocabulary:
    """The training tokens in at least ``min_df`` documents; ids by decreasing
    document frequency, ties alphabetical."""

    tokens: tuple[str, ...]
    document_frequency: np.ndarray
    min_df: int

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def build(cls, texts: Texts, min_df: int) -> Vocabulary:
        """The vocabulary of ``texts`` with document frequency at least ``min_df``."""
        if min_df < 1:
            raise ValueError(f"min_df must be at least 1, got {min_df}")
        texts = _tokenized(texts)
        size = int((texts.document_frequency >= min_df).sum())  # a prefix of words
        if size == 0:
            raise ValueError(
                f"no texts, or no token occurs in {min_df} or more documents"
            )
        df = texts.document_frequency[:size].copy()
        return cls(texts.words[:size], df, int(min_df))

    @classmethod
    def build_and_encode(
        cls, texts: Texts, min_df: int, *, drop_empty: bool
    ) -> tuple[Vocabulary, EncodedCorpus]:
        """The vocabulary of ``texts`` and the texts encoded over it, tokenized once."""
        vocab = cls.build(texts := _tokenized(texts), min_df)
        return vocab, vocab.encode(texts, drop_empty=drop_empty)

    def encode(self, texts: Texts, *, drop_empty: bool = False) -> EncodedCorpus:
        """Token counts of ``texts`` over this vocabulary, other tokens dropped; a
        document left empty is a ``ValueError`` unless ``drop_empty`` leaves it out."""
        texts = _tokenized(texts)
        index = {t: i for i, t in enumerate(self.tokens)}
        lookup = np.array([index.get(w, -1) for w in texts.words], dtype=np.int64)
        ids = lookup[texts.token_ids]
        inside, n = ids >= 0, texts.n_documents
        rows = np.repeat(np.arange(n), np.diff(texts.indptr))[inside]
        ids, counts = ids[inside], texts.counts[inside]
        per_document = np.bincount(rows, minlength=n)
        kept = np.flatnonzero(per_document)
        if kept.size < n and not drop_empty:
            raise ValueError(
                f"{n - kept.size} document(s) have no in-vocabulary token (first: "
                f"#{np.argmin(per_document)}); pass drop_empty=True to leave them out"
            )
        if kept.size == 0:
            raise ValueError("no texts to encode, or none with an in-vocabulary token")
        known = lookup[lookup >= 0]
        if not (np.diff(known) > 0).all():  # ids out of the order of texts.words
            order = np.argsort(rows * len(self) + ids, kind="stable")
            rows, ids, counts = rows[order], ids[order], counts[order]
        indptr = np.zeros(kept.size + 1, dtype=np.int64)
        np.cumsum(per_document[kept], out=indptr[1:])
        tensors = map(torch.from_numpy, (indptr, ids, counts))
        return EncodedCorpus(
            counts=TokenCounts(*tensors, len(self)),
            kept=kept,
            n_documents=n,
            n_tokens=int(texts.counts.sum()),
            n_dropped_tokens=int(texts.counts[~inside].sum()),
        )


def _tokenized(texts: Texts) -> TokenizedTexts:
    return texts if isinstance(texts, TokenizedTexts) else TokenizedTexts.of(texts)
