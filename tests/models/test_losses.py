import numpy as np
import pytest
import torch

from attnbook.data.synthetic import SyntheticSpec, sample_sequences
from attnbook.engine.counts import TokenCounts
from attnbook.models.losses import accuracy, logistic_loss
from attnbook.runtime import seed_everything
from attnbook.theory.frequency import average_signed_frequency
from attnbook.validation import as_signed_labels


def test_counts_roundtrip():
    seqs = [np.array([3, 1, 3, 0]), np.array([2]), np.array([1, 1])]
    c = TokenCounts.from_sequences(seqs, 4)
    assert c.indptr.tolist() == [0, 3, 4, 5]
    assert c.token_ids.tolist() == [0, 1, 3, 2, 1]
    assert c.counts.tolist() == [1, 1, 2, 1, 2]
    assert c.lengths.tolist() == [4, 1, 2]
    assert [s.tolist() for s in c.to_sequences()] == [[0, 1, 3, 3], [2], [1, 1]]
    sub = c.select([2, 0])
    assert [s.tolist() for s in sub.to_sequences()] == [[1, 1], [0, 1, 3, 3]]
    assert c.to_dense().tolist() == [[1, 1, 0, 2], [0, 0, 1, 0], [0, 2, 0, 0]]


def test_counts_reject_empty_rows():
    with pytest.raises(ValueError, match="empty"):
        TokenCounts(
            torch.tensor([0, 0]),
            torch.tensor([], dtype=torch.int64),
            torch.tensor([], dtype=torch.int64),
            3,
        )


def test_alpha_by_hand():
    # X1 = (0, 0, 1), y = +1 ; X2 = (1, 2), y = -1
    alpha = average_signed_frequency([[0, 0, 1], [1, 2]], [1, -1], 4)
    expect = torch.tensor([2 / 3, 1 / 3 - 1 / 2, -1 / 2, 0.0], dtype=torch.float64) / 2
    assert torch.allclose(alpha, expect, atol=1e-15)


def test_alpha_matches_dense_formula():
    data = sample_sequences(SyntheticSpec(), 200, np.random.default_rng(0))
    counts = data.counts
    dense = counts.to_dense()
    T = dense.sum(1, keepdim=True)
    y = torch.as_tensor(data.labels, dtype=torch.float64)
    expect = (y[:, None] * dense / T).mean(0)
    assert torch.allclose(
        average_signed_frequency(counts, data.labels, counts.vocab_size),
        expect,
        atol=1e-15,
    )


def test_synthetic_classes():
    spec = SyntheticSpec(
        n_positive=3, n_negative=4, n_neutral=5, min_len=5, max_len=9, relevant_rate=0.3
    )
    data = sample_sequences(spec, 500, np.random.default_rng(1))
    cls = spec.token_class
    for s, y in zip(data.sequences, data.labels):
        assert 5 <= s.size <= 9
        assert set(cls[s].tolist()) <= {
            0,
            int(y),
        }  # completely positive / negative tokens
    alpha = average_signed_frequency(
        data.sequences, data.labels, spec.vocab_size
    ).numpy()
    assert (alpha[cls == 1] > 0).all() and (alpha[cls == -1] < 0).all()


@pytest.mark.parametrize(
    "bad, message",
    [
        ([0, 1], "-1 or \\+1"),
        ([1, 2], "-1 or \\+1"),
        ([[1, -1]], "1-D"),
        ([], "empty"),
        (["a", "b"], "numbers"),
    ],
)
def test_bad_labels(bad, message):
    with pytest.raises(ValueError, match=message):
        as_signed_labels(bad)


def test_label_length_mismatch():
    with pytest.raises(ValueError, match="lengths must match"):
        average_signed_frequency([[0], [1]], [1, -1, 1], 2)


def test_loss_and_accuracy():
    f = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64)
    y = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    expect = np.mean(np.log1p(np.exp(-np.array([2.0, -1.0, -0.5]))))
    assert abs(float(logistic_loss(f, y)) - expect) < 1e-15
    assert accuracy(f, y) == pytest.approx(1 / 3)
    big = logistic_loss(
        torch.tensor([-1e4], dtype=torch.float64),
        torch.tensor([1.0], dtype=torch.float64),
    )
    assert float(big) == pytest.approx(1e4)


def test_seeding_reproducible():
    a = seed_everything(7)
    x1, t1 = a.normal(size=3), torch.randn(3)
    b = seed_everything(7)
    x2, t2 = b.normal(size=3), torch.randn(3)
    assert np.array_equal(x1, x2) and torch.equal(t1, t2)
    with pytest.raises(ValueError):
        seed_everything(-1)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(min_len=0),
        dict(min_len=5, max_len=4),
        dict(relevant_rate=0.8, opposite_rate=0.3),
        dict(positive_fraction=1.0),
        dict(n_positive=0, n_negative=0, n_neutral=0),
    ],
)
def test_bad_synthetic_spec(kwargs):
    with pytest.raises(ValueError):
        SyntheticSpec(**kwargs)
