"""Data generators for the implicit-bias chapter."""

import numpy as np
import pytest

from attnbook.data.selection import (
    assumption_one_data,
    partially_relevant_data,
    two_relevant_data,
)
from attnbook.theory.frequency import average_signed_frequency


@pytest.mark.parametrize("balanced", [True, False])
def test_assumption_one_exact(balanced):
    data = assumption_one_data(
        40,
        n_positive=4,
        n_negative=3,
        n_irrelevant=20,
        length=6,
        balanced=balanced,
        rng=np.random.default_rng(0),
    )
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size).numpy()
    cls = data.token_class
    assert np.abs(alpha[cls == 0]).max() == 0.0  # exactly zero, not only in expectation
    seqs = data.counts.to_sequences()
    for seq, y, imp in zip(seqs, data.labels, data.important):
        relevant = seq[cls[seq] != 0]
        assert relevant.tolist() == [imp]  # exactly one relevant token
        assert cls[imp] == y  # of the sequence's own class
        assert seq.size == 6
    # completely positive tokens occur only in positive sequences and vice versa
    assert (alpha[cls == 1] >= 0).all() and (alpha[cls == -1] <= 0).all()
    if balanced:
        occ = np.bincount(data.important, minlength=data.vocab_size)
        assert occ[:4].max() - occ[:4].min() <= 1


def test_two_relevant():
    data = two_relevant_data(60, n_irrelevant=30, rng=np.random.default_rng(1))
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size).numpy()
    assert np.abs(alpha[data.token_class == 0]).max() == 0.0
    for seq, y, rel in zip(data.counts.to_sequences(), data.labels, data.relevant):
        assert rel.size == 2 and len(set(rel.tolist())) == 2
        assert (data.token_class[rel] == y).all()
        assert sorted(seq[data.token_class[seq] != 0].tolist()) == rel.tolist()
    with pytest.raises(ValueError, match="several"):
        _ = data.important
    # zipf popularity: the first positive token is the most frequent
    assert alpha[0] == alpha[data.token_class == 1].max()


def test_partially_relevant():
    data = partially_relevant_data(200, n_partial=2, rng=np.random.default_rng(2))
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size).numpy()
    part = data.token_class == 2
    assert part.sum() == 2 and (alpha[part] > 0).all()
    seqs = data.counts.to_sequences()
    has = np.array([(data.token_class[s] == 2).any() for s in seqs])
    assert has[data.labels == 1].mean() > has[data.labels == -1].mean() > 0
    assert all(len(s) == 8 for s in seqs)


def test_errors_and_determinism():
    with pytest.raises(ValueError):
        assumption_one_data(0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError):
        two_relevant_data(5, n_positive=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError):
        assumption_one_data(5, length=1, rng=np.random.default_rng(0))
    a = assumption_one_data(10, rng=np.random.default_rng(3))
    b = assumption_one_data(10, rng=np.random.default_rng(3))
    assert all(
        (x == y).all() for x, y in zip(a.counts.to_sequences(), b.counts.to_sequences())
    )
