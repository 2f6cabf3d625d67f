"""The hub path yields the mirror's kind of corpus (attnbook.data.reviews), offline.

``datasets.load_dataset`` is replaced by a function that returns small local datasets
shaped like the hub's: ``Yelp/yelp_review_full`` (a ``label`` ClassLabel 0-4 for 1-5
stars, a ``text`` whose line breaks are written as backslash-n, stars balanced and
shuffled) and ``stanfordnlp/imdb`` (a ``label`` ClassLabel neg/pos, 12,500 of each
class). No network is used: the offline switches are set as well. Where the local
mirror is present (``ATTNBOOK_DATA_DIR``), the two paths are compared on it.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from attnbook.book.records import data_table, describe_data
from attnbook.data.corpus import prepare_reviews
from attnbook.data.reviews import (
    DATA_DIR_ENV,
    HUB_IDS,
    RECIPE,
    YELP_SAMPLE_SEED,
    DatasetUnavailableError,
    data_source,
    load_reviews,
    sample_by_stars,
    tokenize,
)
from attnbook.validation import IMDB_CLASS_COUNTS, YELP_STAR_COUNTS

datasets = pytest.importorskip("datasets")

# per star and split, more than the recipe draws (the hub has 130,000 / 10,000)
HUB_PER_STAR = {"train": 6_400, "test": 1_600}
WORDS = {1: "awful", 2: "bad", 3: "fine", 4: "good", 5: "great"}


def _hub_yelp(split: str) -> "datasets.Dataset":
    n = HUB_PER_STAR[split]
    order = np.random.default_rng(7 if split == "train" else 8).permutation(5 * n)
    label = np.repeat(np.arange(5), n)[order]  # 0-4, as the hub stores stars - 1
    text = [
        f"Review {i}: {WORDS[k + 1]} place.\\nThe staff was {WORDS[k + 1]}.\\n\\nBye"
        for i, k in enumerate(label)
    ]
    features = datasets.Features(
        {
            "label": datasets.ClassLabel(
                names=["1 star", "2 star", "3 stars", "4 stars", "5 stars"]
            ),
            "text": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_dict(
        {"label": label.tolist(), "text": text}, features=features
    )


def _hub_imdb(split: str, drop: int = 0) -> "datasets.Dataset":
    n = IMDB_CLASS_COUNTS[split][0]
    label = [0] * (n - drop) + [1] * n
    text = [
        f"{'bad' if y == 0 else 'good'} film<br /><br />number {i}"
        for i, y in enumerate(label)
    ]
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["neg", "pos"]),
        }
    )
    return datasets.Dataset.from_dict({"text": text, "label": label}, features=features)


@pytest.fixture(scope="module")
def hub_data() -> dict:
    return {
        (name, split): make(split)
        for name, make in (("yelp", _hub_yelp), ("imdb", _hub_imdb))
        for split in ("train", "test")
    }


@pytest.fixture
def hub(offline_without_mirror, monkeypatch, hub_data):
    """``datasets.load_dataset`` serving the local hub-shaped data; returns the
    calls."""
    by_id = {hub_id: name for name, hub_id in HUB_IDS.items()}
    calls = []

    def load_dataset(path, *args, split=None, **kwargs):
        assert not args and not kwargs, (args, kwargs)
        calls.append((path, split))
        return hub_data[(by_id[path], split)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def _stars_histogram(ds) -> dict[int, int]:
    stars, counts = np.unique(np.asarray(ds["stars"][:]), return_counts=True)
    return dict(zip(stars.tolist(), counts.tolist()))


# ------------------------------------------------------------------------ Yelp, sampled
@pytest.mark.parametrize("split", ["train", "test"])
def test_hub_yelp_has_the_mirror_size_stars_and_balance(hub, split):
    ds = load_reviews("yelp", split)
    assert hub == [(HUB_IDS["yelp"], split)]
    assert _stars_histogram(ds) == dict(YELP_STAR_COUNTS[split])
    assert ds.num_rows == {"train": 13_983, "test": 3_495}[split]
    labels, stars = np.asarray(ds["label"][:]), np.asarray(ds["stars"][:])
    assert np.array_equal(labels, (stars >= 4).astype(int))
    # the mirror's balance (README of the data: 3,202 / 10,781 and 800 / 2,695)
    assert labels.sum() == {"train": 10_781, "test": 2_695}[split]
    assert set(ds.column_names) == {"text", "stars", "label"}
    assert {k: v.dtype for k, v in ds.features.items()} == {
        "text": "string",
        "stars": "int64",
        "label": "int64",
    }


def test_hub_yelp_is_the_documented_seeded_draw(hub, hub_data):
    """Re-implements the draw from the recipe's words, independently of the code."""
    for s, split in enumerate(("train", "test")):
        raw = hub_data[("yelp", split)]
        stars = np.asarray(raw["label"][:]) + 1
        rng = np.random.default_rng([20250601, s])
        keep = []
        for star in (1, 2, 4, 5):
            rows = np.flatnonzero(stars == star)
            keep.extend(
                rows[rng.permutation(rows.size)[: YELP_STAR_COUNTS[split][star]]]
            )
        keep = sorted(keep)
        got = load_reviews("yelp", split)
        want = [raw[int(i)]["text"].replace("\\n", "\n") for i in keep]
        assert got["text"][:] == want
        assert got["stars"][:] == (stars[keep]).tolist()
    assert YELP_SAMPLE_SEED == 20250601


def test_hub_yelp_is_the_same_on_every_load(hub):
    a, b = load_reviews("yelp", "test"), load_reviews("yelp", "test")
    assert a["text"][:] == b["text"][:] and a["stars"][:] == b["stars"][:]


def test_hub_line_break_escapes_become_line_breaks(hub):
    ds = load_reviews("yelp", "test")
    text = ds["text"][0]
    assert "\\" not in text and text.count("\n") == 3
    assert "nthe" not in tokenize(text) and "nbye" not in tokenize(text)


def test_hub_yelp_corpus_has_the_mirror_counts(hub):
    """The whole pipeline (vocabulary, encoding) on the hub path: the document counts
    that tests/data/test_corpus.py asserts on the mirror."""
    corpus = prepare_reviews("yelp", min_df=10)
    assert corpus.n_documents == {"train": 13_983, "test": 3_495}
    assert corpus.summary()["positive_fraction_train"] == pytest.approx(10_781 / 13_983)
    assert set(np.unique(corpus.train_stars)) == {1, 2, 4, 5}


def test_too_few_hub_reviews_for_the_recipe(hub, monkeypatch, hub_data):
    small = hub_data[("yelp", "train")].select(range(5_000))
    monkeypatch.setitem(hub_data, ("yelp", "train"), small)
    with pytest.raises(DatasetUnavailableError, match="the hub's data changed") as e:
        load_reviews("yelp", "train")
    assert "the train split has 980 reviews with 1 stars; the recipe" in str(e.value)


def test_hub_labels_outside_the_five_classes_are_refused(hub, monkeypatch):
    bad = datasets.Dataset.from_dict({"label": [0, 5, 4], "text": ["a", "b", "c"]})
    monkeypatch.setattr(datasets, "load_dataset", lambda path, split=None: bad)
    with pytest.raises(ValueError, match=r"classes 0-4 \(stars - 1\); found \[5\]"):
        load_reviews("yelp", "test")


# ------------------------------------------------------------------------ IMDB, whole
@pytest.mark.parametrize("split", ["train", "test"])
def test_hub_imdb_is_taken_whole(hub, split):
    ds = load_reviews("imdb", split)
    assert hub == [(HUB_IDS["imdb"], split)]
    assert ds.num_rows == 25_000 and sum(ds["label"][:]) == 12_500
    assert ds.column_names == ["text", "label"]  # no rating on the hub


def test_hub_imdb_of_another_size_is_refused(hub, monkeypatch, hub_data):
    monkeypatch.setitem(hub_data, ("imdb", "test"), _hub_imdb("test", drop=3))
    with pytest.raises(DatasetUnavailableError, match="the hub's data changed") as e:
        load_reviews("imdb", "test")
    assert "reviews per class: {0: 12497, 1: 12500}" in str(e.value)


# ------------------------------------------------------------------- the run's record
def test_data_source_names_the_path_recipe_and_sizes(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    hub = data_source()
    assert hub["path"] == "Hugging Face hub" and hub["recipe"] == RECIPE
    assert hub["datasets"]["yelp"]["source"] == "Yelp/yelp_review_full"
    assert (hub["datasets"]["yelp"]["train"], hub["datasets"]["yelp"]["test"]) == (
        13_983,
        3_495,
    )
    line = describe_data(hub)
    assert "stanfordnlp/imdb" in line and "13,983 + 3,495" in line and RECIPE in line
    headers, rows = data_table(hub)
    assert len(headers) == 5 and [r[0] for r in rows] == ["imdb", "yelp"]

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "yelp").mkdir()
    pd.DataFrame({"text": list("abcd"), "stars": [1, 3, 4, 5]}).to_parquet(
        tmp_path / "yelp" / "test.parquet"
    )
    mirror = data_source()
    assert mirror["path"] == "local mirror"
    assert mirror["datasets"]["yelp"]["test"] == 3  # the 3-star review is dropped
    assert mirror["datasets"]["yelp"]["train"] is None  # absent: reported as unknown
    assert "?" in describe_data(mirror)

    monkeypatch.setenv(DATA_DIR_ENV, "")
    assert data_source()["path"] == f"{DATA_DIR_ENV} set but empty"


def test_sample_by_stars_arguments():
    stars = np.array([1, 2, 2, 4, 5, 5, 5])
    assert sample_by_stars(stars, {5: 3, 2: 2}, "test").tolist() == [1, 2, 4, 5, 6]
    with pytest.raises(ValueError, match="has 1 reviews with 4 stars"):
        sample_by_stars(stars, {4: 2}, "train")


# ---------------------------------------------------- against the mirror, where present
@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
def test_the_recipe_counts_are_the_mirror_counts_and_both_paths_agree(
    monkeypatch, hub_data
):
    """The recipe's constants are the mirror's own counts, and the hub path gives a
    corpus with the mirror's sizes, star histogram, balance, columns and types."""
    mirror = {
        (name, split): load_reviews(name, split)
        for name in ("imdb", "yelp")
        for split in ("train", "test")
    }
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.setattr(
        datasets,
        "load_dataset",
        lambda path, split=None: hub_data[
            ({v: k for k, v in HUB_IDS.items()}[path], split)
        ],
    )
    for split in ("train", "test"):
        m, h = mirror[("yelp", split)], load_reviews("yelp", split)
        assert _stars_histogram(m) == dict(YELP_STAR_COUNTS[split])
        assert _stars_histogram(h) == _stars_histogram(m)
        assert m.features == h.features
        m_imdb, h_imdb = mirror[("imdb", split)], load_reviews("imdb", split)
        counts = np.bincount(np.asarray(m_imdb["label"][:]))
        assert dict(enumerate(counts.tolist())) == dict(IMDB_CLASS_COUNTS[split])
        assert m_imdb.num_rows == h_imdb.num_rows
        assert {k: m_imdb.features[k] for k in h_imdb.features} == h_imdb.features
