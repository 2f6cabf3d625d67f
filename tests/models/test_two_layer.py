import numpy as np
import pytest
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.two_layer import (
    dense_two_layer_output,
    effective_query,
    init_two_layer,
    pair_blocks,
    two_layer_output,
)

from conftest import random_problem


def _params(seed, V=30, d=8, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return init_two_layer(V, d, scale=2.0, generator=gen, dtype=dtype)


def _grads(fn, params, seqs, y):
    ps = {k: t.detach().clone().requires_grad_(True) for k, t in params.items()}
    loss = logistic_loss(fn(ps, seqs), torch.as_tensor(y, dtype=torch.float64))
    loss.backward()
    return {k: t.grad for k, t in ps.items()}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_slots", [1, 50, 10**6])
def test_count_engine_matches_dense_float64(seed, max_slots):
    _, _, _, seqs, y = random_problem(seed, max_len=12, n=15)
    params = _params(seed)
    blocks = pair_blocks(TokenCounts.from_sequences(seqs, 30), max_slots=max_slots)
    f_dense = dense_two_layer_output(params, seqs)
    f_count = two_layer_output(params, blocks)
    assert torch.allclose(f_dense, f_count, atol=1e-12, rtol=0)
    g_dense = _grads(dense_two_layer_output, params, seqs, y)
    g_count = _grads(lambda ps, s: two_layer_output(ps, blocks), params, seqs, y)
    for k in g_dense:
        assert torch.allclose(g_dense[k], g_count[k], atol=1e-12, rtol=0), k


def test_accepts_lists_and_counts():
    _, _, _, seqs, _ = random_problem(3)
    params = _params(3)
    a = two_layer_output(params, seqs)
    b = two_layer_output(params, TokenCounts.from_sequences(seqs, 30))
    assert torch.equal(a, b)


def test_permutation_invariant():
    params = _params(5)
    seq = np.array([1, 4, 4, 7, 2, 9, 4])
    a = dense_two_layer_output(params, [seq])
    b = dense_two_layer_output(params, [seq[::-1].copy()])
    assert torch.allclose(a, b, atol=1e-13)


def test_reduces_to_one_layer_when_first_layer_is_uniform_on_one_token():
    # a sequence of one repeated token: h_s = 2 E_s, f = 2 E_s . v
    params = _params(1)
    f = two_layer_output(params, [np.array([3, 3, 3])])
    expected = 2 * params["E"][3] @ params["v"]
    assert torch.allclose(f, expected.reshape(1), atol=1e-13)


def test_effective_query_is_W2_p():
    params = _params(2)
    assert torch.allclose(effective_query(params), params["W2"] @ params["p"])


def test_zero_first_layer_value_gives_one_layer_with_query_W2p():
    # with W1 = 0 layer 1 averages uniformly over positions: h_s = E_s + mean(E_X), and
    # f = one-layer(E, W2 p, v) + mean(E_X).v, the shift being the same for every token.
    _, _, _, seqs, _ = random_problem(4)
    params = {k: t.detach() for k, t in _params(4).items()}
    params["W1"] = torch.zeros_like(params["W1"])
    f2 = two_layer_output(params, seqs)
    mean_emb = torch.stack([params["E"][torch.as_tensor(s)].mean(0) for s in seqs])
    q = params["W2"] @ params["p"]
    f1 = attention_output(params["E"], q, params["v"], seqs) + mean_emb @ params["v"]
    assert torch.allclose(f2, f1, atol=1e-12)


def test_float32_close_to_float64():
    _, _, _, seqs, _ = random_problem(6)
    params = _params(6)
    f64 = two_layer_output(params, seqs)
    f32 = two_layer_output({k: t.detach().float() for k, t in params.items()}, seqs)
    assert f32.dtype == torch.float32
    assert torch.allclose(f32.double(), f64, atol=1e-4)


def test_errors():
    params = _params(0)
    with pytest.raises(ValueError, match="lack"):
        two_layer_output({"E": params["E"]}, [[1, 2]])
    bad = dict(params, W1=torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="W1"):
        two_layer_output(bad, [[1, 2]])
    with pytest.raises(ValueError, match="outside"):
        two_layer_output(params, [[1, 99]])
    blocks = pair_blocks(TokenCounts.from_sequences([[1, 2]], 50))
    with pytest.raises(ValueError, match="PairBlocks was built"):
        two_layer_output(params, blocks)
    with pytest.raises(ValueError, match="max_slots"):
        pair_blocks(TokenCounts.from_sequences([[1, 2]], 30), max_slots=0)
