import os

import numpy as np
import pytest
import torch

from attnbook.data import DATA_DIR_ENV
from attnbook.reviews import build_review_corpus, highlight_html, prepare_reviews

TRAIN = ["Good film, good cast.", "A bad film.", "good but bad", "zzz", "Great fun!", "bad bad"]
TRAIN_Y = [1, 0, 1, 0, 1, 0]
TEST = ["qqq", "bad ending", "good good film"]
TEST_Y = [1, 0, 1]


def test_build_review_corpus_alignment():
    c = build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=2, name="toy",
                            train_stars=[9, 2, 7, 1, 8, 1], test_stars=[10, 3, 8])
    assert c.vocabulary.tokens == ("bad", "film", "good")  # document frequency 3, 2, 2
    assert c.vocab_size == 3
    # "zzz" and "Great fun!" have no in-vocabulary token in train, "qqq" in test
    assert c.train_kept.tolist() == [0, 1, 2, 5] and c.test_kept.tolist() == [1, 2]
    assert c.n_dropped_documents == {"train": 2, "test": 1}
    assert c.train_labels.tolist() == [1, -1, 1, -1]
    assert c.test_labels.tolist() == [-1, 1]
    assert c.train_stars.tolist() == [9, 2, 7, 1] and c.test_stars.tolist() == [3, 8]
    assert c.test_texts == ("bad ending", "good good film")
    assert c.train.n_sequences == 4 and c.test.n_sequences == 2
    assert c.n_tokens == {"train": 15, "test": 6}
    assert c.n_dropped_tokens == {"train": 6, "test": 2}
    assert c.positive_fraction["train"] == 0.5
    y = c.labels("test", dtype=torch.float64)
    assert y.dtype == torch.float64 and y.tolist() == [-1.0, 1.0]
    s = c.summary()
    assert s["vocab_size"] == 3 and s["dropped_train_documents"] == 2


def test_build_review_corpus_errors():
    with pytest.raises(ValueError, match="0 \\(negative\\) or 1"):
        build_review_corpus(TRAIN, [1, -1, 1, 0, 1, 0], TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="differ in length"):
        build_review_corpus(TRAIN, TRAIN_Y[:3], TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="train_stars"):
        build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=1, train_stars=[1, 2])
    with pytest.raises(ValueError, match="single class"):
        build_review_corpus(TRAIN, [1] * 6, TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="split"):
        build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=1).labels("dev")


def test_highlight_html():
    c = build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=2)
    w = np.zeros(c.vocab_size)
    w[c.vocabulary.id("good")] = 0.5
    w[c.vocabulary.id("bad")] = 0.25
    out = highlight_html("Good <b>& bad</b><br />odd", c.vocabulary, w)
    assert "rgba(42,157,143,1.000)" in out and "rgba(42,157,143,0.500)" in out
    assert ">Good</span>" in out and "&lt;b&gt;&amp;" in out and "<br>" in out
    assert "odd" in out and out.count("<span") == 2
    short = highlight_html("good " * 50, c.vocabulary, w, max_chars=20)
    assert short.count("<span") <= 4 and "…" in short
    with pytest.raises(ValueError, match="finite"):
        highlight_html("good", c.vocabulary, -w)


@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
def test_prepare_yelp_from_mirror():
    c = prepare_reviews("yelp", min_df=10)
    assert c.n_documents == {"train": 13_983, "test": 3_495}
    assert 5_000 < c.vocab_size < 8_000
    assert 0.7 < c.positive_fraction["train"] < 0.8
    assert set(np.unique(c.train_stars)) <= {1, 2, 4, 5}
    assert np.all((c.train_stars >= 4) == (c.train_labels == 1))
    assert len(c.test_texts) == c.test.n_sequences
