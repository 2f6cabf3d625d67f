import numpy as np
import pytest

from attnbook.data.xor import NOT_A, NOT_B, A, B, XorSpec, sample_xor
from attnbook.theory.frequency import average_signed_frequency


def test_alpha_is_exactly_zero():
    data = sample_xor(XorSpec(n_neutral=20, length=7), 300, np.random.default_rng(0))
    alpha = average_signed_frequency(data.counts, data.labels, data.spec.vocab_size)
    assert float(alpha.abs().max()) < 1e-15


def test_labels_are_xor_and_balanced():
    data = sample_xor(XorSpec(n_neutral=5, length=4), 50, np.random.default_rng(1))
    for s, y in zip(data.sequences, data.labels):
        assert y == (1 if ((A in s) != (B in s)) else -1)
        assert (A in s) != (NOT_A in s) and (B in s) != (NOT_B in s)
        assert len(s) == 4
    assert data.labels.sum() == 0
    assert np.bincount(data.quadruple).tolist() == [4] * 50


def test_deterministic_and_errors():
    a = sample_xor(XorSpec(), 10, np.random.default_rng(3))
    b = sample_xor(XorSpec(), 10, np.random.default_rng(3))
    assert all(np.array_equal(x, y) for x, y in zip(a.sequences, b.sequences))
    with pytest.raises(ValueError):
        XorSpec(length=2)
    with pytest.raises(ValueError):
        XorSpec(n_neutral=0)
    with pytest.raises(ValueError):
        sample_xor(XorSpec(), 0, np.random.default_rng(0))
