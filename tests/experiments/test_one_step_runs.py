"""The one step at several dimensions (attnbook.experiments.extensions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.data.synthetic import SyntheticSpec, sample_sequences
from attnbook.experiments.extensions import dimension_table
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.one_step import init_one_step, predicted_pearson


@pytest.fixture(scope="module")
def small():
    spec = SyntheticSpec(n_positive=4, n_negative=4, n_neutral=12, relevant_rate=0.3)
    data = sample_sequences(spec, 200, np.random.default_rng(0))
    alpha = average_signed_frequency(data.counts, data.labels, data.counts.vocab_size)
    return data.counts, data.labels, alpha


def test_dimension_table_one_row_per_dimension(small):
    counts, labels, alpha = small
    y = torch.as_tensor(labels, dtype=torch.float64)
    table = dimension_table(counts, y, alpha, (8, 64), init_scale=1e-3, eta=1.0)
    assert list(table.index) == [8, 64]
    assert table.loc[64, "d / V"] == 64 / counts.vocab_size
    # seeded with the dimension, in float32
    init = dict(generator=torch.Generator().manual_seed(8), dtype=torch.float32)
    v = init_one_step(counts.vocab_size, 8, init_scale=1e-3, **init)["v"]
    pred = (0.5 * alpha.float() * (v @ v)).double().numpy()
    expected = predicted_pearson(pred, 1e-3, float(v @ v), 8)
    assert table.loc[8, "r predicted (noise only)"] == expected
    assert (table["r measured"] <= 1).all()
