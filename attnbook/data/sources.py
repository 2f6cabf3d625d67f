"""Loading the review data sets: from the local mirror or from the hub, values checked.

:func:`load_reviews` (documented with the rest of the review pipeline in
:mod:`attnbook.data.reviews`, which re-exports it) reads ``imdb`` or ``yelp`` from the
parquet mirror named by ``ATTNBOOK_DATA_DIR`` or, when that variable is unset, from the
Hugging Face hub through the recipe of :mod:`attnbook.data.recipe`; it refuses values
outside the documented sets. :func:`data_source` says which path this process takes,
for the run records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from attnbook.data.recipe import (
    HUB_IDS,
    IMDB_CLASS_COUNTS,
    RECIPE,
    YELP_SAMPLE_SEED,
    YELP_STAR_COUNTS,
    sample_by_stars,
    unescape_hub_text,
    verify_imdb_labels,
    verify_split,
)

__all__ = ["DATA_DIR_ENV", "DatasetUnavailableError", "load_reviews", "data_source"]

DATA_DIR_ENV = "ATTNBOOK_DATA_DIR"
_NAMES = ("imdb", "yelp")
_SPLITS = ("train", "test")


class DatasetUnavailableError(RuntimeError):
    """Raised when a dataset is neither in the local mirror nor reachable on the hub."""


def _how_to_get(name: str) -> str:
    return (
        f"To get '{name}': either (1) download the parquet files once and point the "
        f"environment variable {DATA_DIR_ENV} at their folder, laid out as "
        f"<folder>/{name}/train.parquet and <folder>/{name}/test.parquet; or (2) "
        f"unset {DATA_DIR_ENV} on a machine that can reach the Hugging Face hub "
        f"('{HUB_IDS[name]}')."
    )


def _check_name_split(name: str, split: str) -> None:
    if name not in _NAMES:
        raise ValueError(f"unknown dataset {name!r}; choose one of {_NAMES}")
    if split not in _SPLITS:
        raise ValueError(
            f"unknown split {split!r} for {name!r}; choose one of {_SPLITS}"
        )


def _mirror_folder(name: str) -> Path | None:
    """The mirror folder named by the environment, ``None`` when the variable is
    unset."""
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


# ------------------------------------------------------------ columns and their values
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
    """The integer ``column`` as an int64 array; ``ValueError`` for any value outside
    ``allowed``, a missing value or a column of another type."""
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


def _polarity_from_stars(stars: np.ndarray) -> np.ndarray:
    return (np.asarray(stars) >= 4).astype(np.int64)


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


def _yelp_columns(texts: Any, stars: np.ndarray) -> dict[str, Any]:
    return {"text": texts, "stars": stars, "label": _polarity_from_stars(stars)}


def _dataset(cols: dict[str, Any]):
    import datasets

    features = datasets.Features(
        {k: datasets.Value("string" if k == "text" else "int64") for k in cols}
    )
    return datasets.Dataset.from_dict(cols, features=features)


# -------------------------------------------------------------------- the two paths
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
    _require(table, ("text", "stars"), where)  # the label is derived from the stars
    stars = _integers(table, "stars", range(1, 6), "Yelp stars 1 to 5", where)
    keep = np.flatnonzero(stars != 3)
    verify_split(name, split, stars[keep], where)
    return _dataset(_yelp_columns(_texts(table, where).take(keep), stars[keep]))


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
        try:
            verify_split(name, split, cols["label"], where)
        except ValueError as err:
            raise DatasetUnavailableError(
                f"{err} So the hub's data changed (recipe {RECIPE}). "
                + _how_to_get(name)
            ) from err
        return _dataset(cols)
    _require(table, ("text", "label"), where)
    stars = 1 + _integers(table, "label", range(5), "classes 0-4 (stars - 1)", where)
    try:
        rows = sample_by_stars(stars, YELP_STAR_COUNTS[split], split)
    except ValueError as err:
        raise DatasetUnavailableError(
            f"{where}: {err}; the hub's data changed. " + _how_to_get(name)
        ) from err
    texts = _texts(table, where).take(rows).to_pylist()
    return _dataset(_yelp_columns([unescape_hub_text(t) for t in texts], stars[rows]))


def load_reviews(name: str, split: str = "train"):
    """Load ``imdb`` or ``yelp`` reviews as a ``datasets.Dataset`` (see the module
    docstring and :mod:`attnbook.data.recipe`).

    Raises ``ValueError`` for an unknown name or split and for data whose values are
    not the documented ones, and :class:`DatasetUnavailableError`, with instructions,
    when the data can be found neither in the mirror nor on the hub.
    """
    _check_name_split(name, split)
    import datasets

    datasets.disable_progress_bars()  # keep notebook outputs stable
    folder = _mirror_folder(name)
    if folder is not None:
        return _from_mirror(name, split, folder)
    return _from_hub(name, split)


def data_source() -> dict[str, Any]:
    """Where :func:`load_reviews` reads from in this process, for a run's record.

    ``path`` (``"local mirror"``, ``"Hugging Face hub"`` or why neither applies), the
    ``recipe``, and per dataset where it comes from and how many reviews each split
    gives (the mirror's counted from its files without loading the texts; the hub's
    from the recipe, which enforces them).
    """
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
    """Reviews :func:`load_reviews` gives from ``path`` (``None``: file unreadable)."""
    try:
        if name == "imdb":
            return int(pq.read_metadata(path).num_rows)
        stars = pq.read_table(path, columns=["stars"]).column("stars").to_numpy()
        return int((stars != 3).sum())
    except Exception:  # an absent or damaged file: the loader reports it when read
        return None
