"""Texts tokenized once (attnbook.data.reviews.TokenizedTexts) give what tokenizing
them again at every step gave: the vocabulary, min_df, the encodings and the corpus;
the corpus's alignment of labels, stars and texts with the kept documents."""

import os
import random
from collections import Counter
from itertools import chain

import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.data.corpus import (
    ReviewSplit,
    build_review_corpus,
    clear_split_cache,
    corpus_from_splits,
    load_split,
    min_df_for_tokens,
    prepare_reviews,
)
from attnbook.data.reviews import DATA_DIR_ENV, TokenizedTexts, Vocabulary, tokenize
from attnbook.engine.counts import TokenCounts
from attnbook.experiments.robustness import balanced_indices, reviews_for_vocabulary

TRAIN = [
    "Don't LIKE it!<br />2 stars... the film's end",
    "A good film, a GOOD cast; don't miss it",
    "rock'n'roll isn't 'dead' -- it's ''alive'' ",
    "İstanbul, Kelvin's café: naïve ﬁlm ß",
    "12345 ... !!!",
    "",
    "good good good bad film",
    "bad, bad acting<br /><br />and a bad film",
    "dogs' tails 'n' cats'",
    "the the the end",
]
TRAIN_Y = [0, 1, 1, 0, 1, 0, 1, 0, 1, 0]
TEST = ["a good end", "zzz qqq", "BAD film's cast", "don't don't", "café", "film"]
TEST_Y = [1, 0, 0, 1, 1, 0]


# ---------------------------------------------------- the reference: tokenize each time
def reference_vocabulary(texts, min_df):
    docs = [tokenize(t) for t in texts]
    counter = Counter(chain.from_iterable(map(set, docs)))
    kept = [(w, c) for w, c in counter.items() if c >= min_df]
    words = np.array([w for w, _ in kept], dtype=object)
    df = np.array([c for _, c in kept], dtype=np.int64)
    order = np.lexsort((words.astype(str), -df))
    return tuple(words[order].tolist()), df[order]


def reference_encoding(tokens, texts):
    """(counts, kept, n_tokens, n_dropped_tokens) as the vocabulary encoded before."""
    docs = [tokenize(t) for t in texts]
    flat = pd.Series(list(chain.from_iterable(docs)), dtype=object)
    ids = pd.Index(tokens).get_indexer(flat)
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    inside = ids >= 0
    rows, ids = rows[inside], ids[inside]
    kept = np.unique(rows)
    new_row = np.full(len(docs), -1)
    new_row[kept] = np.arange(kept.size)
    counts = TokenCounts.from_pairs(new_row[rows], ids, kept.size, len(tokens))
    return counts, kept, int(flat.size), int((~inside).sum())


def reference_min_df(texts, target, candidates):
    _, df = reference_vocabulary(texts, 1)
    sizes = {k: int((df >= k).sum()) for k in candidates}
    return min(sizes, key=lambda k: (abs(sizes[k] - target), -k)), sizes


def same_counts(a: TokenCounts, b: TokenCounts) -> bool:
    return a.vocab_size == b.vocab_size and all(
        np.array_equal(getattr(a, f).numpy(), getattr(b, f).numpy())
        for f in ("indptr", "token_ids", "counts")
    )


def bags(tok: TokenizedTexts) -> list[Counter]:
    ptr = tok.indptr
    return [
        Counter(
            {
                tok.words[j]: int(c)
                for j, c in zip(
                    tok.token_ids[ptr[i] : ptr[i + 1]], tok.counts[ptr[i] : ptr[i + 1]]
                )
            }
        )
        for i in range(tok.n_documents)
    ]


def same_vocabulary(a: Vocabulary, b: Vocabulary) -> bool:
    return (
        a.tokens == b.tokens
        and a.min_df == b.min_df
        and np.array_equal(a.document_frequency, b.document_frequency)
    )


# ------------------------------------------------------------------------------- tests
def test_tokenized_texts_count_the_tokens_of_the_rule():
    tok = TokenizedTexts.of(TRAIN)
    assert bags(tok) == [Counter(tokenize(t)) for t in TRAIN]
    assert tok.n_documents == len(TRAIN)
    assert tok.counts.sum() == sum(len(tokenize(t)) for t in TRAIN)
    words, df = reference_vocabulary(TRAIN, 1)
    assert tok.words == words and np.array_equal(tok.document_frequency, df)
    for i in range(tok.n_documents):  # ids increase within a document
        assert np.all(np.diff(tok.token_ids[tok.indptr[i] : tok.indptr[i + 1]]) > 0)


def test_tokenized_texts_match_the_rule_on_random_texts():
    pieces = list("abzAZ' .,!-09\t\n") + [
        "<br />", "İ", "K", "ß", "ﬁ", "é", "Σ", "\u00a0", "\u2028", "’", "\x00",
        "''", "'a", "a'", "don't", "rock'n'roll",
    ]  # fmt: skip
    rng = random.Random(0)
    for _ in range(300):
        texts = [
            "".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
            for _ in range(rng.randint(1, 5))
        ]
        assert bags(TokenizedTexts.of(texts)) == [Counter(tokenize(t)) for t in texts]


@pytest.mark.parametrize("min_df", [1, 2, 3])
def test_vocabulary_and_encoding_equal_the_reference(min_df):
    tokens, df = reference_vocabulary(TRAIN, min_df)
    vocab = Vocabulary.build(TRAIN, min_df)
    assert vocab.tokens == tokens and np.array_equal(vocab.document_frequency, df)
    assert vocab.document_frequency.dtype == np.int64 and vocab.min_df == min_df
    assert same_vocabulary(vocab, Vocabulary.build(TokenizedTexts.of(TRAIN), min_df))
    for texts in (TRAIN, TEST):
        counts, kept, n_tokens, n_dropped = reference_encoding(tokens, texts)
        for enc in (
            vocab.encode(texts, drop_empty=True),
            vocab.encode(TokenizedTexts.of(texts), drop_empty=True),
        ):
            assert same_counts(enc.counts, counts)
            assert np.array_equal(enc.kept, kept)
            assert (enc.n_documents, enc.n_tokens) == (len(texts), n_tokens)
            assert enc.n_dropped_tokens == n_dropped
    counts, kept, n_tokens, _ = reference_encoding(tokens, TRAIN)
    for texts in (TRAIN, TokenizedTexts.of(TRAIN)):
        both, enc = Vocabulary.build_and_encode(texts, min_df, drop_empty=True)
        assert same_vocabulary(both, vocab) and same_counts(enc.counts, counts)
        assert np.array_equal(enc.kept, kept) and enc.n_tokens == n_tokens


def test_min_df_equals_the_reference():
    tok = TokenizedTexts.of(TRAIN)
    for target in (1, 3, 8, 40):
        want = reference_min_df(TRAIN, target, range(1, 6))
        assert min_df_for_tokens(tok, target, range(1, 6)) == want
    with pytest.raises(ValueError, match="target must be positive"):
        min_df_for_tokens(tok, 0)


def test_build_review_corpus_equals_the_reference():
    stars = list(range(1, 11))
    c = build_review_corpus(
        TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=2, name="toy", train_stars=stars
    )
    tokens, _ = reference_vocabulary(TRAIN, 2)
    assert c.vocabulary.tokens == tokens
    counts, kept, n_tokens, n_dropped = reference_encoding(tokens, TRAIN)
    assert same_counts(c.train, counts) and np.array_equal(c.train_kept, kept)
    assert c.train_labels.tolist() == [2 * TRAIN_Y[i] - 1 for i in kept]
    assert c.train_stars.tolist() == [stars[i] for i in kept] and c.test_stars is None
    assert (c.n_tokens["train"], c.n_dropped_tokens["train"]) == (n_tokens, n_dropped)
    counts, kept, n_tokens, n_dropped = reference_encoding(tokens, TEST)
    assert same_counts(c.test, counts) and np.array_equal(c.test_kept, kept)
    assert (c.n_tokens["test"], c.n_dropped_tokens["test"]) == (n_tokens, n_dropped)


def test_a_selection_outside_the_split_is_refused():
    with pytest.raises(ValueError, match="rows must lie"):
        ReviewSplit(tuple(TRAIN), [0] * len(TRAIN)).select([len(TRAIN)])


def test_a_split_selection_gives_the_same_corpus_tokenized_or_not():
    rows = balanced_indices(np.array(TRAIN_Y), np.random.default_rng(0))
    fresh = ReviewSplit(tuple(TRAIN), np.array(TRAIN_Y))
    tokenized = ReviewSplit(tuple(TRAIN), np.array(TRAIN_Y))
    tokenized.tokens  # noqa: B018 -- tokenize before selecting
    test = ReviewSplit(tuple(TEST), np.array(TEST_Y))
    a = corpus_from_splits(fresh.select(rows), test, min_df=1)
    b = corpus_from_splits(tokenized.select(rows), test, min_df=1)
    c = build_review_corpus(
        [TRAIN[i] for i in rows], [TRAIN_Y[i] for i in rows], TEST, TEST_Y, min_df=1
    )
    for x in (b, c):
        assert same_vocabulary(x.vocabulary, a.vocabulary)
        assert same_counts(x.train, a.train) and same_counts(x.test, a.test)
        assert x.summary() == a.summary()


def test_load_split_is_kept_per_file(tmp_path, monkeypatch, small_splits):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "yelp").mkdir()
    texts = ["good food", "bad food", "good service", "awful bad", "great good"]

    def write(split, stars):
        pd.DataFrame({"text": texts, "stars": stars}).to_parquet(
            tmp_path / "yelp" / f"{split}.parquet"
        )

    write("train", [5, 1, 4, 2, 5])
    write("test", [4, 2, 5, 1, 3])  # the 3-star review is dropped
    clear_split_cache()
    first = load_split("yelp", "train")
    assert load_split("yelp", "train") is first
    assert first.labels01.tolist() == [1, 0, 1, 0, 1]
    corpus = prepare_reviews("yelp", 1)
    assert corpus.n_documents == {"train": 5, "test": 4}
    balanced, _ = reviews_for_vocabulary("yelp", 3, np.random.default_rng(1))
    assert balanced.n_documents == {"train": 4, "test": 4}
    write("train", [1, 1, 4, 2, 5])  # new contents: read again
    again = load_split("yelp", "train")
    assert again is not first and again.labels01.tolist() == [0, 0, 1, 0, 1]
    clear_split_cache()
    assert load_split("yelp", "train") is not again
    clear_split_cache()


# ---------------------------------------- a small corpus: alignment, errors, the mirror
TOY_TRAIN = [
    "Good film, good cast.",
    "A bad film.",
    "good but bad",
    "zzz",
    "Great fun!",
    "bad bad",
]
TOY_TRAIN_Y = [1, 0, 1, 0, 1, 0]
TOY_TEST = ["qqq", "bad ending", "good good film"]
TOY_TEST_Y = [1, 0, 1]


def test_build_review_corpus_alignment():
    c = build_review_corpus(
        TOY_TRAIN,
        TOY_TRAIN_Y,
        TOY_TEST,
        TOY_TEST_Y,
        min_df=2,
        name="toy",
        train_stars=[9, 2, 7, 1, 8, 1],
        test_stars=[10, 3, 8],
    )
    assert c.vocabulary.tokens == ("bad", "film", "good")  # document frequency 3, 2, 2
    assert c.vocab_size == 3
    # "zzz" and "Great fun!" have no in-vocabulary token in train, "qqq" in test
    assert c.train_kept.tolist() == [0, 1, 2, 5] and c.test_kept.tolist() == [1, 2]
    s = c.summary()
    assert (s["dropped_train_documents"], s["dropped_test_documents"]) == (2, 1)
    assert c.train_labels.tolist() == [1, -1, 1, -1]
    assert c.test_labels.tolist() == [-1, 1]
    assert c.train_stars.tolist() == [9, 2, 7, 1] and c.test_stars.tolist() == [3, 8]
    assert c.train.n_sequences == 4 and c.test.n_sequences == 2
    assert c.n_tokens == {"train": 15, "test": 6}
    assert c.n_dropped_tokens == {"train": 6, "test": 2}
    assert c.summary()["positive_fraction_train"] == 0.5
    y = c.labels("test", dtype=torch.float64)
    assert y.dtype == torch.float64 and y.tolist() == [-1.0, 1.0]
    s = c.summary()
    assert s["vocab_size"] == 3 and s["dropped_train_documents"] == 2


def test_build_review_corpus_errors():
    args = (TOY_TRAIN, TOY_TRAIN_Y, TOY_TEST, TOY_TEST_Y)
    with pytest.raises(ValueError, match="0 \\(negative\\) or 1"):
        build_review_corpus(
            TOY_TRAIN, [1, -1, 1, 0, 1, 0], TOY_TEST, TOY_TEST_Y, min_df=1
        )
    with pytest.raises(ValueError, match="one label per text"):
        build_review_corpus(TOY_TRAIN, TOY_TRAIN_Y[:3], TOY_TEST, TOY_TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="train_stars"):
        build_review_corpus(*args, min_df=1, train_stars=[1, 2])
    with pytest.raises(ValueError, match="single class"):
        build_review_corpus(TOY_TRAIN, [1] * 6, TOY_TEST, TOY_TEST_Y, min_df=1)
    corpus = build_review_corpus(*args, min_df=1)
    with pytest.raises(ValueError, match="split"):
        corpus.labels("dev")


@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
def test_prepare_yelp_from_mirror():
    c = prepare_reviews("yelp", min_df=10)
    assert c.n_documents == {"train": 13_983, "test": 3_495}
    assert 5_000 < c.vocab_size < 8_000
    assert 0.7 < c.summary()["positive_fraction_train"] < 0.8
    assert set(np.unique(c.train_stars)) <= {1, 2, 4, 5}
    assert np.all((c.train_stars >= 4) == (c.train_labels == 1))
