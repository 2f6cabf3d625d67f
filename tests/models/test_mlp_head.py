import numpy as np
import pytest
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.losses import logistic_loss
from attnbook.models.mlp_head import (
    dense_mlp_attention_output,
    init_mlp_head,
    mlp_attention_output,
    token_value_scores,
)

from conftest import random_problem


def _params(seed, V=30, d=8):
    gen = torch.Generator().manual_seed(seed)
    ps = init_mlp_head(V, d, scale=2.0, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        ps["c"].copy_(torch.randn(d, generator=gen, dtype=torch.float64))
    return ps


def _grads(fn, params, seqs, y):
    ps = {k: t.detach().clone().requires_grad_(True) for k, t in params.items()}
    logistic_loss(fn(ps, seqs), torch.as_tensor(y, dtype=torch.float64)).backward()
    return {k: t.grad for k, t in ps.items()}


@pytest.mark.parametrize("seed", range(5))
def test_count_engine_matches_dense_float64(seed):
    _, _, _, seqs, y = random_problem(seed)
    params = _params(seed)
    assert torch.allclose(
        mlp_attention_output(params, seqs),
        dense_mlp_attention_output(params, seqs),
        atol=1e-12,
        rtol=0,
    )
    g1 = _grads(mlp_attention_output, params, seqs, y)
    g2 = _grads(dense_mlp_attention_output, params, seqs, y)
    for k in g1:
        assert torch.allclose(g1[k], g2[k], atol=1e-12, rtol=0), k


def test_token_value_scores_are_single_token_outputs():
    params = _params(3)
    g = token_value_scores(params)
    f = mlp_attention_output(params, [np.array([s, s]) for s in range(30)])
    assert torch.allclose(g, f, atol=1e-12)


def test_errors():
    params = _params(0)
    with pytest.raises(ValueError, match="lack"):
        mlp_attention_output({"E": params["E"]}, [[1]])
    with pytest.raises(ValueError, match="A must"):
        mlp_attention_output(
            dict(params, A=torch.zeros(2, 2, dtype=torch.float64)), [[1]]
        )
    with pytest.raises(ValueError, match="outside"):
        mlp_attention_output(params, [[1, 99]])
    with pytest.raises(ValueError, match="scale"):
        init_mlp_head(3, 2, scale=0)


def test_prepared_index_gives_same_outputs_and_gradients():
    from attnbook.models.mlp_head import PooledIndex

    _, _, _, seqs, y = random_problem(7)
    params = _params(7)
    index = PooledIndex.build(TokenCounts.from_sequences(seqs, 30))
    g1 = _grads(mlp_attention_output, params, seqs, y)
    g2 = _grads(lambda ps, s: mlp_attention_output(ps, index), params, seqs, y)
    for k in g1:
        assert torch.allclose(g1[k], g2[k], atol=1e-13, rtol=0), k
    with pytest.raises(ValueError, match="vocabulary"):
        mlp_attention_output(
            params, PooledIndex.build(TokenCounts.from_sequences(seqs, 40))
        )


@pytest.mark.parametrize("frozen", ["E", "p"])
def test_gradient_with_embeddings_or_cls_frozen_matches_dense(frozen):
    """The score gradient alone (``E`` frozen) and the embedding gradient alone (``p``
    frozen) against autograd through the padded reference, float64."""
    _, _, _, seqs, y = random_problem(11)
    params = _params(11)
    grads = []
    for fn in (mlp_attention_output, dense_mlp_attention_output):
        ps = {
            k: t.detach().clone().requires_grad_(k != frozen) for k, t in params.items()
        }
        logistic_loss(fn(ps, seqs), torch.as_tensor(y, dtype=torch.float64)).backward()
        grads.append(ps)
    assert grads[0][frozen].grad is None
    for k in params.keys() - {frozen}:
        assert torch.allclose(grads[0][k].grad, grads[1][k].grad, atol=1e-12, rtol=0), k


def test_transpose_product_in_column_blocks_has_the_bits_of_one_product():
    from attnbook.models.mlp_head import PooledIndex, _csr, _transpose_times

    _, _, _, seqs, _ = random_problem(5)
    index = PooledIndex.build(TokenCounts.from_sequences(seqs, 30))
    c = index.counts
    gen = torch.Generator().manual_seed(5)
    w = torch.rand(c.token_ids.numel(), generator=gen)
    X = torch.randn(c.n_sequences, 37, generator=gen)  # 16 + 16 + 5 columns
    St = _csr(index.t_crow, index.t_col, w[index.perm], (30, c.n_sequences))
    assert torch.equal(_transpose_times(index, w, X), St @ X)


def test_second_derivatives_are_refused():
    _, _, _, seqs, y = random_problem(2)
    ps = {k: t.detach().clone().requires_grad_(True) for k, t in _params(2).items()}
    loss = logistic_loss(
        mlp_attention_output(ps, seqs), torch.as_tensor(y, dtype=torch.float64)
    )
    (grad_p,) = torch.autograd.grad(loss, ps["p"], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|twice"):
        grad_p.sum().backward()
