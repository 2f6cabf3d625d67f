import numpy as np
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
    assert enc.n_dropped_documents == 1 and enc.n_dropped_tokens == 1
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
