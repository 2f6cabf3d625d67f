"""The model computed three ways (attnbook.experiments.implementations)."""

from __future__ import annotations

import numpy as np
import torch

from attnbook.experiments.implementations import (
    hard_max_output,
    outputs_and_gradients,
    unshifted_output,
)
from attnbook.models.attention import attention_output, dense_attention_output


def _problem(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    E = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    p = torch.randn(4, generator=gen, dtype=torch.float64)
    v = torch.randn(4, generator=gen, dtype=torch.float64)
    sequences = [np.array([0, 1, 1, 5]), np.array([2, 3]), np.array([4])]
    return E, p, v, sequences, torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)


def test_dense_and_count_outputs_and_gradients_agree_and_leave_the_inputs_alone():
    E, p, v, sequences, labels = _problem()
    dense = outputs_and_gradients(dense_attention_output, E, p, v, sequences, labels)
    count = outputs_and_gradients(attention_output, E, p, v, sequences, labels)
    assert [t.shape for t in dense] == [(3,), (6, 4), (4,), (4,)]
    for a, b in zip(dense, count):
        assert torch.allclose(a, b, atol=1e-12)
    assert not (E.requires_grad or p.requires_grad or v.requires_grad)


def test_the_unshifted_softmax_agrees_at_small_scores_and_overflows_at_large_ones():
    E, p, v, sequences, _ = _problem(1)
    small = unshifted_output(E, p, v, sequences)
    assert torch.allclose(small, attention_output(E, p, v, sequences), atol=1e-12)
    huge = 1e4 * p / p.norm()
    assert unshifted_output(E, huge, v, sequences).isnan().any()
    assert torch.isfinite(attention_output(E, huge, v, sequences)).all()


def test_the_hard_max_is_the_value_of_the_top_scoring_position():
    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    p = torch.tensor([0.0, 2.0], dtype=torch.float64)
    v = torch.tensor([3.0, 5.0], dtype=torch.float64)
    out = hard_max_output(E, p, v, [np.array([0, 1, 2]), np.array([2, 0])])
    assert out.tolist() == [5.0, -3.0]  # token 1; a tie of 2 and 0: the first, 2
    assert torch.allclose(attention_output(E, 1e3 * p, v, [[0, 1, 2]]), out[:1])
