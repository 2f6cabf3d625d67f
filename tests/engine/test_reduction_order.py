"""The engine's sums in a fixed order: the same bits on every run, on every device.

On a GPU, a reduction by atomic additions (the vendor's sparse products, a scatter of
entries into their rows) adds in the order the threads happen to run, which changes from
run to run. The engine's CUDA path sums every row of a count product by itself, in the
order its entries are stored. These tests pin that order down on the CPU, where the same
code runs: each row's sum is the sequential sum of its stored entries, bit for bit; it
does not depend on the other rows, on the order the corpus was given in, or on how many
threads run. A control shows that the test data is sensitive to the order of a sum, so
that an implementation summing in another order would fail. The ``gpu`` tests run the
same computation twice on CUDA and ask for identical bits.
"""

import numpy as np
import pytest
import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu.attention import gpu_count_heads_output
from attnbook.engine.segments import csr_rows_times

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA, reason="needs a CUDA device; torch sees none here"
)


def _corpus(seed=0, V=60, n=40, max_len=400):
    """Long rows with many repeated tokens: float32 sums of hundreds of terms of mixed
    signs and magnitudes, whose rounding depends on the order."""
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, V, size=rng.integers(1, max_len)) for _ in range(n)]
    return TokenCounts.from_sequences(seqs, V), rng


def _block(rng, rows, cols, dtype=torch.float32):
    x = rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-6, 6, (rows, cols)))
    return torch.from_numpy(x).to(dtype)


def _sequential(indptr, indices, values, X, reverse=False):
    """Every row summed term by term in float32, in the stored order (or reversed)."""
    indptr, indices = indptr.tolist(), indices.tolist()
    vals, Xn = values.numpy(), X.numpy()
    out = np.zeros((len(indptr) - 1, X.shape[1]), dtype=np.float32)
    for i in range(len(indptr) - 1):
        entries = range(indptr[i], indptr[i + 1])
        for k in reversed(entries) if reverse else entries:
            out[i] = out[i] + vals[k] * Xn[indices[k]]
    return torch.from_numpy(out)


def test_rows_are_summed_in_their_stored_order():
    counts, rng = _corpus()
    A, At = counts.sparse_matrices(torch.float32)
    for M, rows in ((A, counts.vocab_size), (At, counts.n_sequences)):
        X = _block(rng, rows, 3)
        parts = (M.crow_indices(), M.col_indices(), M.values())
        got = csr_rows_times(*parts, X)
        assert torch.equal(got, _sequential(*parts, X))
        # control: the same sums in the reverse order differ in their last bits
        assert not torch.equal(got, _sequential(*parts, X, reverse=True))
        dense = M.to_dense().double() @ X.double()
        scale = 1e-4 * dense.abs().max()
        assert torch.allclose(got.double(), dense, rtol=1e-4, atol=scale)


def test_transpose_product_is_the_product_of_the_stored_transpose():
    """``A^T Y`` is a product of the CSR transpose (each token's entries in row order),
    not a scatter of ``A``'s entries: the same bits as the per-token sequential sum."""
    counts, rng = _corpus(seed=1)
    _, At = counts.sparse_matrices(torch.float32)
    Y = _block(rng, counts.n_sequences, 2)
    parts = (At.crow_indices(), At.col_indices(), At.values())
    assert torch.equal(csr_rows_times(*parts, Y), _sequential(*parts, Y))


def test_a_row_does_not_depend_on_the_other_rows():
    counts, rng = _corpus(seed=2)
    A, _ = counts.sparse_matrices(torch.float32)
    X = _block(rng, counts.vocab_size, 2)
    full = csr_rows_times(A.crow_indices(), A.col_indices(), A.values(), X)
    order = rng.permutation(counts.n_sequences)
    B, _ = counts.select(order).sparse_matrices(torch.float32)
    permuted = csr_rows_times(B.crow_indices(), B.col_indices(), B.values(), X)
    assert torch.equal(permuted, full[torch.from_numpy(order)])


def test_wide_blocks_are_gathered_in_pieces_with_the_same_bits():
    counts, rng = _corpus(seed=3)
    A, _ = counts.sparse_matrices(torch.float32)
    X = _block(rng, counts.vocab_size, 37)  # 16 + 16 + 5 columns
    parts = (A.crow_indices(), A.col_indices(), A.values())
    wide = csr_rows_times(*parts, X)
    for j in range(X.shape[1]):
        assert torch.equal(wide[:, j], csr_rows_times(*parts, X[:, j : j + 1])[:, 0])


def _engine_outputs(counts, E, p, W, G):
    leaves = [t.clone().requires_grad_(True) for t in (E, p, W)]
    f = gpu_count_heads_output(*leaves, counts)
    (f * G).sum().backward()
    return [f.detach()] + [t.grad for t in leaves]


def _parameters(rng, V, d=16, K=2):
    E, p, W = (_block(rng, *s) / 4 for s in ((V, d), (d, 1), (d, K)))
    return E, p[:, 0] * 8, W


def test_gpu_form_is_the_same_for_any_order_of_the_input():
    """The corpus given as (row, token) pairs in two orders, computed with one thread
    and with several: the GPU form's torch passes give the same bits."""
    counts, rng = _corpus(seed=4)
    E, p, W = _parameters(rng, counts.vocab_size)
    G = _block(rng, counts.n_sequences, W.shape[1])
    rows = counts.row_ids.repeat_interleave(counts.counts).numpy()
    toks = counts.token_ids.repeat_interleave(counts.counts).numpy()
    shuffle = rng.permutation(rows.size)
    again = TokenCounts.from_pairs(
        rows[shuffle], toks[shuffle], counts.n_sequences, counts.vocab_size
    )
    threads = torch.get_num_threads()
    try:
        with kernels.torch_only():
            first = _engine_outputs(counts, E, p, W, G)
            torch.set_num_threads(1)
            second = _engine_outputs(again, E, p, W, G)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_gpu_form_rows_follow_their_sequences():
    """Permuting the sequences permutes the outputs, bit for bit (each output is its
    own row's sum)."""
    counts, rng = _corpus(seed=5)
    E, p, W = _parameters(rng, counts.vocab_size)
    order = rng.permutation(counts.n_sequences)
    with kernels.torch_only():
        f = gpu_count_heads_output(E, p, W, counts)
        f_perm = gpu_count_heads_output(E, p, W, counts.select(order))
    assert torch.equal(f_perm, f[torch.from_numpy(order)])


# ------------------------------------------------------------------ GPU
def _twice(fn):
    first, second = fn(), fn()
    torch.cuda.synchronize()
    return first, second


def _cuda_corpus():
    rng = np.random.default_rng(7)
    V, n = 3000, 2000
    seqs = [rng.integers(0, V, size=rng.integers(50, 600)) for _ in range(n)]
    return TokenCounts.from_sequences(seqs, V).to("cuda"), rng


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_count_products_are_bit_identical_run_to_run(dtype):
    counts, rng = _cuda_corpus()
    A, At = counts.sparse_matrices(dtype)
    X = _block(rng, counts.vocab_size, 3, dtype).cuda()
    Y = _block(rng, counts.n_sequences, 3, dtype).cuda()
    for M, Z in ((A, X), (At, Y)):
        a, b = _twice(lambda M=M, Z=Z: kernels.csr_times(M, Z))
        assert torch.equal(a, b)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("engine", ["1", "0"])
def test_cuda_gradient_is_bit_identical_run_to_run(dtype, engine, monkeypatch):
    """The model's outputs and gradients on CUDA, by the GPU form (the default) and by
    the CPU engine's form (``ATTNBOOK_GPU_ENGINE=0``): two runs, the same bits."""
    from attnbook.models.attention import count_heads_output

    monkeypatch.setenv("ATTNBOOK_GPU_ENGINE", engine)
    torch.use_deterministic_algorithms(True)
    counts, rng = _cuda_corpus()
    E, p, W = (t.to("cuda", dtype) for t in _parameters(rng, counts.vocab_size, 256))
    G = _block(rng, counts.n_sequences, W.shape[1], dtype).cuda()

    def run():
        leaves = [t.clone().requires_grad_(True) for t in (E, p, W)]
        f = count_heads_output(*leaves, counts)
        (f * G).sum().backward()
        return torch.cat([f.flatten()] + [t.grad.flatten() for t in leaves])

    a, b = _twice(run)
    assert torch.equal(a, b)


@gpu
@needs_cuda
def test_cuda_training_is_bit_identical_run_to_run():
    """A short Adam run of the one-layer model on CUDA (the chapters' training loop),
    twice from the same start: the same losses and parameters, bit for bit."""
    from attnbook.models.training import binary_loss_closure, fit

    torch.use_deterministic_algorithms(True)
    counts, rng = _cuda_corpus()
    E, p, W = _parameters(rng, counts.vocab_size, 256)
    y = torch.from_numpy(np.where(rng.random(counts.n_sequences) < 0.5, -1.0, 1.0))

    def run():
        params = {
            "E": E.cuda().clone(),
            "p": p.cuda().clone(),
            "v": W[:, 0].cuda().clone(),
        }
        loss = binary_loss_closure(params, counts, y.float().cuda())
        history = fit(params, loss, steps=20, lr=1e-2)
        weights = torch.cat([t.detach().flatten() for t in params.values()])
        return torch.tensor(history.loss), weights

    (l1, w1), (l2, w2) = _twice(run)
    assert torch.equal(l1, l2) and torch.equal(w1, w2)


@gpu
@needs_cuda
def test_cuda_routes_the_models_to_the_gpu_form():
    from attnbook.models.attention import count_heads_output

    counts, rng = _cuda_corpus()
    E, p, W = (t.cuda() for t in _parameters(rng, counts.vocab_size))
    assert torch.equal(
        count_heads_output(E, p, W, counts), gpu_count_heads_output(E, p, W, counts)
    )
