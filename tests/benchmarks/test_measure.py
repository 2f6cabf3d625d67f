"""The benchmark's building blocks, the count engine's cached CSR matrices, volatile
records."""

import numpy as np
import pytest
import torch

from _ext.record_files import compare_records
from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import (
    attention_output,
    dense_attention_output,
)
from attnbook.models.losses import logistic_loss
from benchmarks import measure, timing, usual

from conftest import random_problem


def _counts(seed=0, V=30, n=12):
    E, p, v, seqs, y = random_problem(seed=seed, V=V, n=n)
    return (
        E,
        p,
        v,
        seqs,
        torch.from_numpy(y.astype(np.float64)),
        TokenCounts.from_sequences(seqs, V),
    )


def test_sparse_matrices_match_dense_counts():
    *_, counts = _counts()
    A, At = counts.sparse_matrices(torch.float64)
    dense = counts.to_dense()
    assert torch.equal(A.to_dense(), dense)
    assert torch.equal(At.to_dense(), dense.t())
    assert counts.sparse_matrices(torch.float64)[0] is A  # cached
    assert counts.row_ids is counts.row_ids
    assert counts.to(counts.device) is counts


def test_usual_implementation_matches_engine_float64():
    E, p, v, seqs, y, counts = _counts(seed=3)
    batches = usual.usual_batches(counts, max_positions=20)
    assert sorted(torch.cat(batches.rows).tolist()) == list(range(counts.n_sequences))
    assert all(i.numel() <= 20 or i.shape[0] == 1 for i in batches.ids)
    l_u, g_u = usual.usual_loss_and_grads(E, p, v, batches, y)
    l_e, g_e = usual.engine_loss_and_grads(E, p, v, counts, y)
    assert abs(l_u - l_e) <= 1e-12 * abs(l_u)
    for a, b in zip(g_u, g_e):
        assert usual.relative_difference(a, b) <= 1e-11


def test_engine_fallback_for_huge_p_keeps_gradients():
    E, p, v, seqs, y, counts = _counts(seed=5)
    p = (p / p.norm() * 3e3).requires_grad_(
        True
    )  # rows underflow under the vocabulary shift
    E = E.clone().requires_grad_(True)
    f = attention_output(E, p, v, counts)
    g = torch.autograd.grad(logistic_loss(f, y), (E, p))
    Ed, pd = (
        E.detach().clone().requires_grad_(True),
        p.detach().clone().requires_grad_(True),
    )
    fd = dense_attention_output(Ed, pd, v, seqs)
    gd = torch.autograd.grad(logistic_loss(fd, y), (Ed, pd))
    assert torch.allclose(f, fd, atol=1e-9)
    for a, b in zip(g, gd):
        assert torch.allclose(a, b, atol=1e-9)


def test_restrict_vocabulary():
    E, p, v, seqs, y, counts = _counts(seed=1, V=30, n=40)
    sub, y_sub = usual.restrict_vocabulary(counts, y, 10)
    dense = counts.to_dense()[:, :10]
    keep = dense.sum(1) > 0
    assert torch.equal(sub.to_dense(), dense[keep])
    assert torch.equal(y_sub, y[keep])
    with pytest.raises(ValueError):
        usual.restrict_vocabulary(counts, y, 0)


def test_minimum_bytes_and_linear_fit():
    *_, counts = _counts()
    item = 4
    expect = 4 * (counts.n_sequences + 1) + 8 * counts.nnz + 2 * 30 * 16 * item
    assert timing.minimum_bytes(counts, 16, torch.float32) == expect
    rows = [
        dict(nnz=n, vd=vd, ms=1.0 + 2e-3 * n + 5e-4 * vd)
        for n, vd in [(100, 10), (200, 10), (100, 40), (400, 80), (50, 5)]
    ]
    c0, c1, c2, worst = measure.fit_linear_time(rows)
    assert np.allclose([c0, c1, c2], [1.0, 2e-3, 5e-4]) and worst < 1e-9


def test_time_min_and_bandwidth_positive():
    assert timing.time_min(lambda: None, repeats=2) >= 0
    assert timing.copy_bandwidth(nbytes=2**20, repeats=2) > 0
    with pytest.raises(ValueError):
        timing.time_min(lambda: None, repeats=0)


def test_compare_records_ignores_volatile_values():
    base = {
        "glued": {"t": 1.0, "x": 2.0},
        "checks": [{"name": "t", "value": 1.0, "passed": True}],
        "volatile": ["t"],
    }
    other = {
        "glued": {"t": 3.0, "x": 2.0},
        "checks": [{"name": "t", "value": 3.0, "passed": True}],
        "volatile": ["t"],
    }
    assert compare_records({"c": base}, {"c": other}) == []
    other["glued"]["x"] = 2.5
    assert len(compare_records({"c": base}, {"c": other})) == 1


def test_padded_positions_matches_batches():
    *_, counts = _counts(seed=2, n=30)
    for cap in (1, 10, 25, 1000):
        assert (
            usual.padded_positions(counts, cap)
            == usual.usual_batches(counts, cap).n_positions
        )


@pytest.mark.parametrize("K", [2, 3, 10])
def test_multihead_engine_matches_dense_heads(K):
    from attnbook.models.multiclass import cross_entropy_loss, multiclass_output

    E, p, v, seqs, y, counts = _counts(seed=7, V=25, n=15)
    W = torch.from_numpy(np.random.default_rng(K).normal(size=(E.shape[1], K)))
    labels = torch.from_numpy(
        np.random.default_rng(0).integers(0, K, size=counts.n_sequences)
    )

    def dense_heads(E, p, W, counts):
        seqs = counts.to_sequences()
        cols = [dense_attention_output(E, p, W[:, k], seqs) for k in range(K)]
        return torch.stack(cols, dim=1)

    grads = []
    for fn in (multiclass_output, dense_heads):
        leaves = [t.clone().requires_grad_(True) for t in (E, p, W)]
        out = fn(*leaves, counts)
        grads.append(
            (out.detach(), torch.autograd.grad(cross_entropy_loss(out, labels), leaves))
        )
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-12)
    for a, b in zip(grads[0][1], grads[1][1]):
        assert torch.allclose(a, b, atol=1e-12)


def test_engine_passes_and_backend_times_cover_the_gradient():
    E, p, v, seqs, y, counts = _counts(seed=6, V=40, n=30)
    params = {
        k: t.float().clone().requires_grad_(True) for k, t in zip("Epv", (E, p, v))
    }
    rows = measure.engine_passes(params, counts, repeats=2)
    assert [r["pass"] for r in rows] == [
        "scores E [p, v]",
        "counts A [u, u b]",
        "counts A^T [r_D, r]",
        "write dE = G [p, v]^T",
        "E^T G",
    ]
    V, d = E.shape
    item = 4  # float32
    assert rows[0]["MB"] * 1e6 == pytest.approx(V * d * item)
    assert rows[1]["MB"] * 1e6 == pytest.approx(
        (4 + item) * counts.nnz + 4 * (counts.n_sequences + 1)
    )
    assert all(r["ms"] > 0 and r["GB/s"] > 0 for r in rows)
    times = measure.backend_times(params, counts, y, repeats=2)
    assert set(times) == {"compiled", "torch"} and min(times.values()) > 0
