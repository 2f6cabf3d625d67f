"""Tests of the one-step update and its closed-form predictions."""

import numpy as np
import pytest
import torch

from attnbook.data.synthetic import (
    MulticlassSpec,
    SyntheticSpec,
    sample_multiclass_sequences,
    sample_sequences,
)
from attnbook.engine.counts import TokenCounts
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.one_step import (
    class_signed_frequency,
    init_one_step,
    one_gradient_step,
    one_gradient_step_multiclass,
    one_step_coefficients,
    pearson,
    predicted_class_alignment,
)

from conftest import random_problem


def _params(seed=0, dtype=torch.float64):
    E, p, v, seqs, y = random_problem(seed, dtype=dtype)
    return {"E": E, "p": p, "v": v}, seqs, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_equals_autograd(seed):
    params, seqs, y = _params(seed)
    a = one_gradient_step(params, seqs, y, 0.7, method="closed_form")
    b = one_gradient_step(params, seqs, y, 0.7, method="autograd")
    assert torch.allclose(a, b, atol=1e-12, rtol=0)


def test_float32_and_counts_input():
    params, seqs, y = _params(3, dtype=torch.float32)
    counts = TokenCounts.from_sequences(seqs, params["E"].shape[0])
    a = one_gradient_step(params, counts, y, 0.5)
    b = one_gradient_step(params, seqs, y, 0.5, method="autograd")
    assert a.dtype == torch.float32 and a.shape == params["E"].shape
    assert torch.allclose(a, b, atol=1e-5)


def test_step_does_not_modify_params():
    params, seqs, y = _params()
    E0 = params["E"].clone()
    one_gradient_step(params, seqs, y, 1.0)
    assert torch.equal(params["E"], E0)


def test_update_is_rank_two_combination():
    params, seqs, y = _params()
    E1 = one_gradient_step(params, seqs, y, 2.0)
    c_v, c_p = one_step_coefficients(params["E"], params["p"], params["v"], seqs, y)
    delta = E1 - params["E"]
    assert torch.allclose(
        delta, 2.0 * (c_v[:, None] * params["v"] + c_p[:, None] * params["p"])
    )


def test_p_zero_gives_exact_half_alpha_at_zero_outputs():
    # with p = 0 and E . v = 0 for every token, f = 0 and c_v = alpha / 2 exactly
    params, seqs, y = _params()
    V, d = params["E"].shape
    params["p"] = torch.zeros(d, dtype=torch.float64)
    v = params["v"]
    E = params["E"] - (params["E"] @ v)[:, None] * v[None, :] / (v @ v)
    c_v, c_p = one_step_coefficients(E, params["p"], v, seqs, y)
    alpha = average_signed_frequency(seqs, y, V)
    assert torch.allclose(c_v, alpha / 2, atol=1e-14)
    assert torch.allclose(c_p, torch.zeros_like(c_p), atol=1e-14)


def _synthetic(n=600, seed=0):
    spec = SyntheticSpec(
        n_positive=5,
        n_negative=5,
        n_neutral=30,
        min_len=5,
        max_len=15,
        relevant_rate=0.2,
        opposite_rate=0.05,
    )
    data = sample_sequences(spec, n, np.random.default_rng(seed))
    return data.counts, data.labels


def test_small_init_matches_predictions():
    # the step's increments are (eta/2) alpha ||v||^2 along v and (eta/2) alpha v.p
    # along p, up to a relative O(sigma / sqrt(d))
    counts, y = _synthetic()
    gen = torch.Generator().manual_seed(1)
    params = init_one_step(counts.vocab_size, 256, init_scale=1e-4, generator=gen)
    E0, p, v = params["E"], params["p"], params["v"]
    delta = one_gradient_step(params, counts, y, 1.0) - E0
    alpha = average_signed_frequency(counts, y, counts.vocab_size)
    pred_v = 0.5 * alpha * (v @ v)
    assert pearson(delta @ v, pred_v) > 0.999
    assert pearson(delta @ p, 0.5 * alpha * (v @ p)) > 0.999
    assert float((delta @ v - pred_v).norm() / pred_v.norm()) < 1e-3


def test_multiclass_two_classes_equals_binary():
    params, seqs, y = _params(5)
    v = params["v"]
    W = torch.stack((-v / 2, v / 2), dim=1)
    mc = {"E": params["E"], "p": params["p"], "W": W}
    a = one_gradient_step_multiclass(mc, seqs, (y + 1) // 2, 0.9)
    b = one_gradient_step(params, seqs, y, 0.9)
    assert torch.allclose(a, b, atol=1e-12)


def test_multiclass_prediction_small_init():
    data = sample_multiclass_sequences(MulticlassSpec(), 800, np.random.default_rng(0))
    counts, y = data.counts, data.labels
    gamma = class_signed_frequency(counts, y, 4, counts.vocab_size)
    assert torch.allclose(
        gamma.sum(dim=1),
        torch.zeros(counts.vocab_size, dtype=torch.float64),
        atol=1e-15,
    )
    params = init_one_step(
        counts.vocab_size,
        128,
        init_scale=1e-5,
        n_classes=4,
        generator=torch.Generator().manual_seed(0),
    )
    E1 = one_gradient_step_multiclass(params, counts, y, 1.0)
    delta = (E1 - params["E"]) @ params["W"]
    pred = predicted_class_alignment(gamma, params["W"], 1.0)
    assert torch.allclose(delta, pred, rtol=0, atol=1e-4 * float(pred.abs().max()))
    diag = predicted_class_alignment(gamma, params["W"], 1.0, cross_terms=False)
    assert diag.shape == pred.shape


def test_init_one_step_scales():
    params = init_one_step(
        200,
        4000,
        init_scale=0.1,
        cls_scale=0.0,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.equal(params["p"], torch.zeros(4000, dtype=torch.float64))
    assert abs(float(params["v"].norm()) - 1) < 0.05
    assert abs(float(params["E"].norm(dim=1).mean()) - 0.1) < 0.005


def test_statistics():
    assert pearson([1, 2, 3], [2, 4, 7]) > 0.98
    with pytest.raises(ValueError):
        pearson([1.0, 1.0], [1.0, 2.0])


def test_bad_inputs():
    params, seqs, y = _params()
    for eta in (0.0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError):
            one_gradient_step(params, seqs, y, eta)
    with pytest.raises(ValueError):
        one_gradient_step({"E": params["E"], "p": params["p"]}, seqs, y, 1.0)
    with pytest.raises(ValueError):
        one_gradient_step(params, seqs, y, 1.0, method="newton")
    with pytest.raises(ValueError):
        one_gradient_step(params, seqs, (y + 1) // 2, 1.0)  # {0, 1} labels
    with pytest.raises(ValueError):
        class_signed_frequency(
            seqs, np.zeros(len(seqs), dtype=int), 1, params["E"].shape[0]
        )
    with pytest.raises(ValueError):
        init_one_step(10, 4, init_scale=0.0)
    with pytest.raises(ValueError):
        predicted_class_alignment(torch.zeros(3, 2), torch.zeros(4, 3), 1.0)


def test_multiclass_synthetic_spec():
    spec = MulticlassSpec(
        n_classes=3, n_per_class=4, n_neutral=5, relevant_rate=0.5, opposite_rate=0.0
    )
    data = sample_multiclass_sequences(spec, 200, np.random.default_rng(1))
    cls = spec.token_class
    for seq, lab in zip(data.sequences, data.labels):
        toks = cls[seq]
        assert set(toks[toks >= 0].tolist()) <= {int(lab)}
    with pytest.raises(ValueError):
        MulticlassSpec(n_classes=1)
