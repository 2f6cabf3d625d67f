"""IMDB and Yelp reviews: loading (the parquet mirror named by ``ATTNBOOK_DATA_DIR``,
else the Hugging Face hub by the README's recipe), tokenizing, vocabulary."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from attnbook.engine.counts import TokenCounts

__all__ = [
    "DATA_DIR_ENV",
    "RECIPE",
    "HUB_IDS",
    "IMDB_CLASS_COUNTS",
    "YELP_STAR_COUNTS",
    "YELP_SAMPLE_SEED",
    "DatasetUnavailableError",
    "known_shape",
    "verify_split",
    "verify_imdb_labels",
    "sample_by_stars",
    "unescape_hub_text",
    "load_reviews",
    "data_source",
    "tokenize",
    "TokenizedTexts",
    "Vocabulary",
    "EncodedCorpus",
]

DATA_DIR_ENV = "ATTNBOOK_DATA_DIR"
#: Name and version of the corpus recipe, recorded with every chapter run.
RECIPE = "attnbook-reviews-1"
HUB_IDS = {"imdb": "stanfordnlp/imdb", "yelp": "Yelp/yelp_review_full"}
#: Reviews per class (0 = negative, 1 = positive) in each IMDB split, on both paths.
IMDB_CLASS_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {0: 12_500, 1: 12_500},
    "test": {0: 12_500, 1: 12_500},
}
#: Reviews per kept star in each Yelp split: the mirror's counts, drawn from the hub.
YELP_STAR_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {1: 1_777, 2: 1_425, 4: 4_568, 5: 6_213},
    "test": {1: 444, 2: 356, 4: 1_142, 5: 1_553},
}
YELP_SAMPLE_SEED = 20250601
_NAMES = ("imdb", "yelp")
_SPLITS = ("train", "test")
_REBUILD = (
    "rebuild the mirror (python -m attnbook.data.mirror FOLDER --imdb-archive "
    "aclImdb_v1.tar.gz --yelp-from-hub, from a complete download) or copy its files "
    "again"
)
_IMDB_RATING_RULE = "rating >= 7 positive (1), rating <= 4 negative (0), 5 and 6 absent"


class DatasetUnavailableError(RuntimeError):
    """Raised when a dataset is neither in the local mirror nor reachable on the hub."""


# ------------------------------------------------------------------------ the recipe
def known_shape(name: str, split: str) -> Mapping[int, int]:
    """Reviews per class (IMDB, 0/1) or per kept star (Yelp) a whole split holds."""
    table = IMDB_CLASS_COUNTS if name == "imdb" else YELP_STAR_COUNTS
    return table[split]


def verify_split(name: str, split: str, values: object, where: str) -> None:
    """``ValueError`` unless the labels (IMDB) or kept stars (Yelp) have the counts of
    :func:`known_shape`."""
    want = {int(k): int(v) for k, v in known_shape(name, split).items()}
    keys, counts = np.unique(np.asarray(values), return_counts=True)
    found = {int(k): int(c) for k, c in zip(keys.tolist(), counts.tolist())}
    if found == want:
        return
    n, n_want = sum(found.values()), sum(want.values())
    kind = "class" if name == "imdb" else "star"
    problems = []
    if n < n_want:
        problems.append(f"{n_want - n:,} of its {n_want:,} reviews are missing")
    elif n > n_want:
        problems.append(f"it has {n - n_want:,} reviews too many (duplicated rows?)")
    positive = (lambda k: k == 1) if name == "imdb" else (lambda k: k >= 4)
    classes = {positive(k) for k, c in found.items() if c}
    if len(classes) < 2:
        problems.append("it holds one class only")
    else:
        share = sum(c for k, c in found.items() if positive(k)) / max(n, 1)
        share_want = sum(c for k, c in want.items() if positive(k)) / n_want
        problems.append(f"{share:.1%} positive, against {share_want:.1%}")
    problems.append(f"reviews per {kind}: {found}, against {want}")
    raise ValueError(
        f"{where} is not the whole {name} {split} split: "
        + "; ".join(problems)
        + f". The file is cut short, duplicated or of another corpus: {_REBUILD}."
    )


def verify_imdb_labels(labels: object, ratings: object, where: str) -> None:
    """``ValueError`` for IMDB rows whose label is not the one their rating fixes."""
    labels = np.asarray(labels, dtype=np.int64)
    ratings = np.asarray(ratings, dtype=np.int64)
    expected = np.where(ratings >= 7, 1, np.where(ratings <= 4, 0, -1))
    bad = np.flatnonzero(labels != expected)
    if not bad.size:
        return
    first = int(bad[0])
    raise ValueError(
        f"{where}: {bad.size:,} of its {labels.size:,} rows have a label that "
        f"disagrees with their rating ({_IMDB_RATING_RULE}; first row {first}: label "
        f"{int(labels[first])}, rating {int(ratings[first])}). The labels were "
        f"inverted, shuffled among the rows or taken from another corpus: {_REBUILD}."
    )


def sample_by_stars(
    stars: np.ndarray, counts: Mapping[int, int], split: str
) -> np.ndarray:
    """Row numbers (ascending) of the recipe's seeded draw of ``counts[k]`` rows with
    ``k`` stars (the README's *Data* section)."""
    rng = np.random.default_rng([YELP_SAMPLE_SEED, _SPLITS.index(split)])
    chosen = []
    for star in sorted(counts):
        count = int(counts[star])
        rows = np.flatnonzero(stars == star)
        if rows.size < count:
            raise ValueError(
                f"the {split} split has {rows.size} reviews with {star} stars; the "
                f"recipe {RECIPE} draws {count}"
            )
        chosen.append(rows[rng.permutation(rows.size)[:count]])
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def unescape_hub_text(text: str) -> str:
    """The hub's Yelp text with each escaped line break a line break (as the mirror)."""
    return re.sub(r"\\+n", "\n", text)


# ------------------------------------------------------------------------- loading
def _how_to_get(name: str) -> str:
    return (
        f"To get '{name}': either (1) download the parquet files once and point the "
        f"environment variable {DATA_DIR_ENV} at their folder, laid out as "
        f"<folder>/{name}/train.parquet and <folder>/{name}/test.parquet; or (2) "
        f"unset {DATA_DIR_ENV} on a machine that can reach the Hugging Face hub "
        f"('{HUB_IDS[name]}')."
    )


def _mirror_folder(name: str) -> Path | None:
    raw = os.environ.get(DATA_DIR_ENV)
    if raw is None:
        return None
    if not raw.strip():
        raise DatasetUnavailableError(
            f"{DATA_DIR_ENV} is set but empty: set it to the mirror folder, or unset "
            f"it (unset {DATA_DIR_ENV}) to read the hub. " + _how_to_get(name)
        )
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise DatasetUnavailableError(
            f"{DATA_DIR_ENV}={raw} is not a folder. " + _how_to_get(name)
        )
    return path


def _require(table: pa.Table, columns: Sequence[str], where: str) -> None:
    missing = set(columns) - set(table.column_names)
    if missing:
        raise DatasetUnavailableError(f"{where} lacks the columns {sorted(missing)}")


def _texts(table: pa.Table, where: str) -> pa.ChunkedArray:
    col = table.column("text")
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        raise ValueError(f"{where}: column 'text' must hold strings, got {col.type}")
    if col.null_count:
        raise ValueError(f"{where}: column 'text' has {col.null_count} missing values")
    return col


def _integers(
    table: pa.Table, column: str, allowed: Sequence[int], meaning: str, where: str
) -> np.ndarray:
    col = table.column(column)
    if not pa.types.is_integer(col.type):
        raise ValueError(
            f"{where}: column {column!r} must hold integers ({meaning}), got {col.type}"
        )
    if col.null_count:
        raise ValueError(
            f"{where}: column {column!r} has {col.null_count} missing values"
        )
    values = col.to_numpy().astype(np.int64)
    bad = np.flatnonzero(~np.isin(values, np.asarray(allowed)))
    if bad.size:
        found = sorted(set(values[bad].tolist()))[:5]
        raise ValueError(
            f"{where}: column {column!r} must hold {meaning}; found {found} "
            f"({bad.size} rows, first row {int(bad[0])})"
        )
    return values


def _imdb_columns(table: pa.Table, where: str) -> dict[str, Any]:
    _require(table, ("text", "label"), where)
    cols = {
        "text": _texts(table, where),
        "label": _integers(
            table, "label", (0, 1), "0 (negative) or 1 (positive)", where
        ),
    }
    if "rating" in table.column_names:
        cols["rating"] = _integers(
            table, "rating", range(1, 11), "IMDB ratings 1 to 10", where
        )
    return cols


def _dataset(cols: dict[str, Any]):
    import datasets

    if "stars" in cols:  # Yelp: the label is derived from the stars
        cols["label"] = (np.asarray(cols["stars"]) >= 4).astype(np.int64)
    features = datasets.Features(
        {k: datasets.Value("string" if k == "text" else "int64") for k in cols}
    )
    return datasets.Dataset.from_dict(cols, features=features)


def _from_mirror(name: str, split: str, folder: Path):
    path = folder / name / f"{split}.parquet"
    if not path.is_file():
        raise DatasetUnavailableError(
            f"{DATA_DIR_ENV}={folder} has no file {path.relative_to(folder)}. "
            + _how_to_get(name)
        )
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise DatasetUnavailableError(
            f"could not read {path} as parquet ({type(err).__name__}: {err}); the "
            "file is damaged or not parquet. Replace it with a fresh copy. "
            + _how_to_get(name)
        ) from err
    where = str(path)
    if name == "imdb":
        cols = _imdb_columns(table, where)
        verify_split(name, split, cols["label"], where)
        if "rating" in cols:
            verify_imdb_labels(cols["label"], cols["rating"], where)
        return _dataset(cols)
    _require(table, ("text", "stars"), where)
    stars = _integers(table, "stars", range(1, 6), "Yelp stars 1 to 5", where)
    keep = np.flatnonzero(stars != 3)
    verify_split(name, split, stars[keep], where)
    return _dataset({"text": _texts(table, where).take(keep), "stars": stars[keep]})


def _from_hub(name: str, split: str):
    import datasets

    hub_id = HUB_IDS[name]
    try:
        ds = datasets.load_dataset(hub_id, split=split)
    except Exception as err:
        raise DatasetUnavailableError(
            f"could not load '{hub_id}' from the Hugging Face hub "
            f"({type(err).__name__}: {err}) and {DATA_DIR_ENV} is not set. "
            + _how_to_get(name)
        ) from err
    table = ds.with_format("arrow")[:]
    where = f"the hub's '{hub_id}' ({split} split)"
    if name == "imdb":
        cols = _imdb_columns(table, where)
    else:
        _require(table, ("text", "label"), where)
        stars = 1 + _integers(
            table, "label", range(5), "classes 0-4 (stars - 1)", where
        )
    try:
        if name == "imdb":
            verify_split(name, split, cols["label"], where)
            return _dataset(cols)
        rows = sample_by_stars(stars, YELP_STAR_COUNTS[split], split)
    except ValueError as err:
        raise DatasetUnavailableError(
            f"{where}: {err}; the hub's data changed (recipe {RECIPE}). "
            + _how_to_get(name)
        ) from err
    texts = _texts(table, where).take(rows).to_pylist()
    return _dataset(
        {"text": [unescape_hub_text(t) for t in texts], "stars": stars[rows]}
    )


def load_reviews(name: str, split: str = "train"):
    """``imdb`` or ``yelp`` as a ``datasets.Dataset``: ``text``, ``label`` (0/1) and
    ``rating`` (IMDB 1-10, mirror only) or ``stars`` (Yelp 1, 2, 4, 5; no 3-star
    reviews); :class:`DatasetUnavailableError`, saying how to get it, if not found."""
    if name not in _NAMES:
        raise ValueError(f"unknown dataset {name!r}; choose one of {_NAMES}")
    if split not in _SPLITS:
        raise ValueError(
            f"unknown split {split!r} for {name!r}; choose one of {_SPLITS}"
        )
    import datasets

    datasets.disable_progress_bars()  # keep notebook outputs stable
    folder = _mirror_folder(name)
    if folder is not None:
        return _from_mirror(name, split, folder)
    return _from_hub(name, split)


def data_source() -> dict[str, Any]:
    """Where :func:`load_reviews` reads from in this process, for a run's record."""
    raw = os.environ.get(DATA_DIR_ENV)
    if raw is None:
        return {
            "path": "Hugging Face hub",
            "recipe": RECIPE,
            "datasets": {
                "imdb": {
                    "source": HUB_IDS["imdb"],
                    "rule": "whole splits, without star ratings",
                    **{s: sum(IMDB_CLASS_COUNTS[s].values()) for s in _SPLITS},
                },
                "yelp": {
                    "source": HUB_IDS["yelp"],
                    "rule": f"seeded sample (seed {YELP_SAMPLE_SEED}) with the "
                    "mirror's count per star",
                    **{s: sum(YELP_STAR_COUNTS[s].values()) for s in _SPLITS},
                },
            },
        }
    if not raw.strip() or not Path(raw).expanduser().is_dir():
        why = "set but empty" if not raw.strip() else "not a folder"
        return {"path": f"{DATA_DIR_ENV} {why}", "recipe": RECIPE, "datasets": {}}
    folder = Path(raw).expanduser()
    found = {}
    for name in _NAMES:
        entry: dict[str, Any] = {"source": f"local mirror, {name}/<split>.parquet"}
        entry["rule"] = "whole files" if name == "imdb" else "3-star reviews dropped"
        for split in _SPLITS:
            entry[split] = _mirror_rows(folder / name / f"{split}.parquet", name)
        found[name] = entry
    return {"path": "local mirror", "recipe": RECIPE, "datasets": found}


def _mirror_rows(path: Path, name: str) -> int | None:
    try:
        if name == "imdb":
            return int(pq.read_metadata(path).num_rows)
        stars = pq.read_table(path, columns=["stars"]).column("stars").to_numpy()
        return int((stars != 3).sum())
    except Exception:  # an absent or damaged file: the loader reports it when read
        return None


# ------------------------------------------------------------------------ tokenizing
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


def _gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0, ..., starts[i] + lengths[i] - 1``, for all i."""
    within = np.arange(int(lengths.sum())) - np.repeat(
        np.cumsum(lengths) - lengths, lengths
    )
    return np.repeat(starts, lengths) + within


def _occurrences(
    texts: Iterable[str],
) -> tuple[list[str], np.ndarray, np.ndarray, int]:
    """Every token occurrence of ``texts`` as its document (``rows``) and its index in
    ``words`` (``codes``), and the number of texts; only pieces with an apostrophe go
    through the regex."""
    cleaned = [_clean(t) for t in texts]
    pieces = pc.ascii_split_whitespace(pa.array(cleaned, type=pa.large_string()))
    rows = pc.list_parent_indices(pieces).to_numpy().astype(np.int64, copy=False)
    encoded = pc.list_flatten(pieces).dictionary_encode()
    words = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    odd = [j for j, w in enumerate(words) if not w or "'" in w]
    if odd:  # split by the regex into zero or more tokens each
        index = {w: j for j, w in enumerate(words)}
        split = [
            [index.setdefault(t, len(index)) for t in _TOKEN.findall(words[j])]
            for j in odd
        ]
        is_odd = np.zeros(len(index), dtype=bool)
        is_odd[odd] = True
        lengths = np.zeros(len(index), dtype=np.int64)
        lengths[odd] = [len(c) for c in split]
        starts = np.cumsum(lengths) - lengths  # of each piece's tokens in ``table``
        table = np.fromiter(chain.from_iterable(split), np.int64)
        hit = is_odd[codes]
        reps = lengths[codes[hit]]
        rows = np.concatenate([rows[~hit], np.repeat(rows[hit], reps)])
        codes = np.concatenate([codes[~hit], table[_gather(starts[codes[hit]], reps)]])
        words = list(index)  # insertion order: the ids
    return words, rows, codes, len(cleaned)


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
    def of(cls, texts: Iterable[str]) -> "TokenizedTexts":
        """Tokenize every text once, by the rule of :func:`tokenize` (in bulk)."""
        words, rows, codes, n_documents = _occurrences(texts)
        size = max(len(words), 1)  # the distinct (document, token) pairs, counted
        keys, counts = np.unique(rows * size + codes, return_counts=True)
        rows, codes = np.divmod(keys, size)
        return _ranked(words, rows, codes, counts, n_documents)

    @property
    def n_documents(self) -> int:
        return self.indptr.size - 1

    def select(self, rows: np.ndarray) -> "TokenizedTexts":
        """The documents ``rows`` (in that order), as if only they were tokenized."""
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
) -> TokenizedTexts:
    """:class:`TokenizedTexts` from distinct ``(row, code)`` pairs with their counts."""
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


Texts = Sequence[str] | TokenizedTexts


def _tokenized(texts: Texts) -> TokenizedTexts:
    return texts if isinstance(texts, TokenizedTexts) else TokenizedTexts.of(texts)


@dataclass(frozen=True)
class EncodedCorpus:
    """A split encoded over a vocabulary: ``counts`` of the documents that kept a
    token, ``kept`` their row numbers in the split."""

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
    def build(cls, texts: Texts, min_df: int) -> "Vocabulary":
        """The vocabulary of ``texts`` with document frequency at least ``min_df``."""
        if min_df < 1:
            raise ValueError(f"min_df must be at least 1, got {min_df}")
        texts = _tokenized(texts)
        if texts.n_documents == 0:
            raise ValueError("cannot build a vocabulary from no texts")
        size = int((texts.document_frequency >= min_df).sum())  # a prefix of words
        if size == 0:
            raise ValueError(f"no token occurs in {min_df} or more documents")
        df = texts.document_frequency[:size].copy()
        return cls(texts.words[:size], df, int(min_df))

    @classmethod
    def build_and_encode(
        cls, texts: Texts, min_df: int, *, drop_empty: bool
    ) -> tuple["Vocabulary", EncodedCorpus]:
        """The vocabulary of ``texts`` and the texts encoded over it, tokenized once."""
        texts = _tokenized(texts)
        vocab = cls.build(texts, min_df)
        return vocab, vocab.encode(texts, drop_empty=drop_empty)

    def encode(self, texts: Texts, *, drop_empty: bool = False) -> EncodedCorpus:
        """Token counts of ``texts`` over this vocabulary; out-of-vocabulary tokens
        are dropped and counted. A document left empty is a ``ValueError`` unless
        ``drop_empty``, which leaves it out (see ``kept``)."""
        texts = _tokenized(texts)
        n = texts.n_documents
        if n == 0:
            raise ValueError("no texts to encode")
        index = {t: i for i, t in enumerate(self.tokens)}
        lookup = np.fromiter(
            (index.get(w, -1) for w in texts.words), np.int64, len(texts.words)
        )
        ids = lookup[texts.token_ids]
        inside = ids >= 0
        rows = np.repeat(np.arange(n), np.diff(texts.indptr))[inside]
        ids, counts = ids[inside], texts.counts[inside]
        per_document = np.bincount(rows, minlength=n)
        kept = np.flatnonzero(per_document)
        if kept.size < n and not drop_empty:
            first = int(np.flatnonzero(per_document == 0)[0])
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
        np.cumsum(per_document[kept], out=indptr[1:])
        tensors = (torch.from_numpy(a) for a in (indptr, ids, counts))
        return EncodedCorpus(
            counts=TokenCounts(*tensors, len(self)),
            kept=kept,
            n_documents=n,
            n_tokens=int(texts.counts.sum()),
            n_dropped_tokens=int(texts.counts[~inside].sum()),
        )
