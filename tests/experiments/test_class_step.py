"""The K-class section's data and one step (attnbook.experiments.extensions)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from attnbook.data.synthetic import SyntheticSpec, sample_sequences
from attnbook.experiments import extensions
from attnbook.theory.one_step import pearson


def test_class_one_step_matches_its_prediction():
    spec = SyntheticSpec(n_positive=4, n_negative=4, n_neutral=12, relevant_rate=0.3)
    data = sample_sequences(spec, 300, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    y = torch.as_tensor(np.where(data.labels > 0, rng.integers(2, 4, 300), 0))
    corpus = SimpleNamespace(train=data.counts, vocab_size=data.counts.vocab_size)
    measured, diagonal, gamma = extensions.class_one_step(corpus, y, 4, 512, seed=3)
    assert measured.shape == diagonal.shape == (corpus.vocab_size, 4)
    assert gamma.shape == (corpus.vocab_size, 4)
    assert pearson(measured, diagonal) > 0.9
    again, _, _ = extensions.class_one_step(corpus, y, 4, 512, seed=3)
    np.testing.assert_array_equal(measured, again)


def test_class_reviews_reads_the_classes_of_the_stars(monkeypatch):
    from attnbook.data.synthetic import SyntheticSpec, sample_sequences

    data = sample_sequences(
        SyntheticSpec(n_positive=2, n_negative=2, n_neutral=6),
        40,
        np.random.default_rng(0),
    )
    stars = np.arange(40) % 5 + 1
    corpus = SimpleNamespace(
        train=data.counts, train_stars=stars, test_stars=stars[:10]
    )
    monkeypatch.setattr(extensions, "prepare_reviews", lambda name, min_df: corpus)
    item = extensions.class_reviews("x", 1, lambda s: np.asarray(s) % 4, 4)
    assert (
        item["corpus"] is corpus
        and item["y_test"].tolist() == (stars[:10] % 4).tolist()
    )
    assert item["importance"].shape == (data.counts.vocab_size, 4)
