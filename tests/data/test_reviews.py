import numpy as np
import pandas as pd
import pytest

from attnbook.data.reviews import (
    DATA_DIR_ENV,
    DatasetUnavailableError,
    Vocabulary,
    load_reviews,
    tokenize,
)


def test_tokenize_rule():
    assert tokenize("Don't LIKE it!<br />2 stars... film's end") == [
        "don't",
        "like",
        "it",
        "stars",
        "film's",
        "end",
    ]
    with pytest.raises(ValueError):
        tokenize(3)


def test_vocabulary_and_encoding():
    texts = ["good film good", "bad film", "good bad", "odd"]
    voc = Vocabulary.build(texts, min_df=2)
    assert voc.tokens == ("bad", "film", "good")  # df 2, 2, 2 -> alphabetical
    assert voc.document_frequency.tolist() == [2, 2, 2]
    enc = voc.encode(texts, drop_empty=True)
    assert enc.kept.tolist() == [0, 1, 2]
    assert enc.n_documents - enc.kept.size == 1 and enc.n_dropped_tokens == 1
    assert [s.tolist() for s in enc.counts.to_sequences()] == [
        [1, 2, 2],
        [0, 1],
        [0, 2],
    ]
    with pytest.raises(ValueError, match="no in-vocabulary token"):
        voc.encode(texts)
    with pytest.raises(ValueError):
        Vocabulary.build(texts, min_df=0)


def test_unknown_name_or_split():
    with pytest.raises(ValueError, match="unknown dataset"):
        load_reviews("mnist", "train")
    with pytest.raises(ValueError, match="unknown split"):
        load_reviews("imdb", "validation")


def test_mirror_errors(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DatasetUnavailableError, match="is not a folder"):
        load_reviews("imdb", "train")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DatasetUnavailableError, match="imdb/train.parquet"):
        load_reviews("imdb", "train")
    (tmp_path / "imdb").mkdir()
    (tmp_path / "imdb" / "train.parquet").write_bytes(b"not a parquet file")
    with pytest.raises(DatasetUnavailableError, match="damaged"):
        load_reviews("imdb", "train")


def test_no_hub_no_mirror(offline_without_mirror):
    with pytest.raises(DatasetUnavailableError, match=DATA_DIR_ENV):
        load_reviews("imdb", "test")


def test_real_imdb_and_yelp():
    """Reads the mirror when ATTNBOOK_DATA_DIR is set, the hub otherwise; fails without
    data."""
    imdb = load_reviews("imdb", "test")
    assert imdb.num_rows == 25_000 and set(imdb.unique("label")) == {0, 1}
    yelp = load_reviews("yelp", "train")
    assert 3 not in set(yelp.unique("stars"))
    stars, label = np.array(yelp["stars"]), np.array(yelp["label"])
    assert np.array_equal(label, (stars >= 4).astype(int))


# ----------------------------------------------- the loader refuses undocumented values
def _mirror(tmp_path, monkeypatch, name: str, split: str, **columns) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / name).mkdir(exist_ok=True)
    pd.DataFrame(columns).to_parquet(tmp_path / name / f"{split}.parquet")


@pytest.mark.parametrize(
    "labels, message",
    [
        ([1, 2, 1], r"must hold 0 \(negative\) or 1 \(positive\); found \[2\]"),
        ([0, 1, -1], r"found \[-1\]"),
        (["neg", "pos", "pos"], "must hold integers"),
        ([0.0, 1.0, 1.0], "must hold integers"),
        ([True, False, True], "must hold integers"),
        ([0, None, 1], "must hold integers|missing values"),
    ],
)
def test_imdb_labels_outside_zero_one_are_refused(
    tmp_path, monkeypatch, labels, message
):
    _mirror(tmp_path, monkeypatch, "imdb", "train", text=["a", "b", "c"], label=labels)
    with pytest.raises(ValueError, match=message) as info:
        load_reviews("imdb", "train")
    assert "imdb/train.parquet" in str(info.value) and "'label'" in str(info.value)


def test_imdb_missing_label_values_are_refused(tmp_path, monkeypatch):
    labels = pd.array([0, None, 1], dtype="Int64")  # an integer column with a gap
    _mirror(tmp_path, monkeypatch, "imdb", "test", text=["a", "b", "c"], label=labels)
    with pytest.raises(ValueError, match="1 missing values"):
        load_reviews("imdb", "test")


def test_imdb_rating_outside_one_to_ten_is_refused(tmp_path, monkeypatch):
    _mirror(
        tmp_path,
        monkeypatch,
        "imdb",
        "train",
        text=["a", "b"],
        label=[0, 1],
        rating=[0, 11],
    )
    with pytest.raises(ValueError, match=r"'rating' must hold IMDB ratings 1 to 10"):
        load_reviews("imdb", "train")


def test_texts_must_be_strings(tmp_path, monkeypatch):
    _mirror(tmp_path, monkeypatch, "imdb", "train", text=["a", None], label=[0, 1])
    with pytest.raises(ValueError, match="'text' has 1 missing values"):
        load_reviews("imdb", "train")
    _mirror(tmp_path, monkeypatch, "imdb", "train", text=[1, 2], label=[0, 1])
    with pytest.raises(ValueError, match="'text' must hold strings"):
        load_reviews("imdb", "train")


@pytest.mark.parametrize("bad", [0, 7, 99, -4])
def test_yelp_stars_outside_one_to_five_are_refused(tmp_path, monkeypatch, bad):
    _mirror(
        tmp_path,
        monkeypatch,
        "yelp",
        "test",
        text=["a", "b", "c"],
        stars=[1, bad, 5],
    )
    with pytest.raises(ValueError, match=rf"Yelp stars 1 to 5; found \[{bad}\]") as e:
        load_reviews("yelp", "test")
    assert "yelp/test.parquet" in str(e.value) and "row 1" in str(e.value)


def test_yelp_stars_as_strings_are_refused(tmp_path, monkeypatch):
    _mirror(tmp_path, monkeypatch, "yelp", "test", text=["a", "b"], stars=["4", "5"])
    with pytest.raises(ValueError, match="'stars' must hold integers"):
        load_reviews("yelp", "test")


def test_a_yelp_mirror_needs_no_label_column(tmp_path, monkeypatch, small_splits):
    """The label is derived from the stars; a label column, if any, is ignored."""
    _mirror(
        tmp_path,
        monkeypatch,
        "yelp",
        "train",
        text=list("abcde"),
        stars=[5, 3, 1, 2, 4],
    )
    ds = load_reviews("yelp", "train")
    assert ds["text"][:] == ["a", "c", "d", "e"]
    assert ds["stars"][:] == [5, 1, 2, 4] and ds["label"][:] == [1, 0, 0, 1]
    _mirror(tmp_path, monkeypatch, "yelp", "train", text=["a"], label=[1])
    with pytest.raises(DatasetUnavailableError, match=r"lacks the columns \['stars'\]"):
        load_reviews("yelp", "train")


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_data_dir_is_reported_as_set_but_empty(monkeypatch, value):
    monkeypatch.setenv(DATA_DIR_ENV, value)
    with pytest.raises(DatasetUnavailableError, match="is set but empty") as info:
        load_reviews("yelp", "train")
    assert "is not set" not in str(info.value)
