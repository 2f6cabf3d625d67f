import contextlib

import numpy as np
import pytest
import torch

from attnbook.engine import kernels, memory
from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import (
    attention_output,
    attention_weights,
    dense_attention_output,
)
from attnbook.models.losses import logistic_loss

from conftest import random_problem


def _grads(fn, E, p, v, seqs, y):
    E, p, v = (t.clone().requires_grad_(True) for t in (E, p, v))
    loss = logistic_loss(fn(E, p, v, seqs), torch.as_tensor(y, dtype=E.dtype))
    loss.backward()
    return loss.detach(), E.grad, p.grad, v.grad


@pytest.mark.parametrize("seed", range(5))
def test_dense_and_count_agree_float64(seed):
    E, p, v, seqs, y = random_problem(seed)
    f_dense = dense_attention_output(E, p, v, seqs)
    f_count = attention_output(E, p, v, seqs)
    assert torch.allclose(f_dense, f_count, atol=1e-12, rtol=0)
    for g_dense, g_count in zip(
        _grads(dense_attention_output, E, p, v, seqs, y),
        _grads(attention_output, E, p, v, seqs, y),
    ):
        assert torch.allclose(g_dense, g_count, atol=1e-12, rtol=0)


def test_float32_agrees_with_float64():
    E, p, v, seqs, _ = random_problem(1)
    f64 = attention_output(E, p, v, seqs)
    f32 = attention_output(E.float(), p.float(), v.float(), seqs)
    assert f32.dtype == torch.float32
    assert torch.allclose(f32.double(), f64, atol=1e-5)


def test_hand_example():
    # two tokens, E_0 = (1, 0), E_1 = (0, 1); p = (log 3, 0), v = (1, -1).
    E = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    p = torch.tensor([np.log(3.0), 0.0], dtype=torch.float64)
    v = torch.tensor([1.0, -1.0], dtype=torch.float64)
    # X = (0, 1): weights 3/4, 1/4 -> f = 3/4 - 1/4 = 1/2.  X = (1, 1, 0): 3/5, 2/5 ->
    # 1/5.
    f = attention_output(E, p, v, [[0, 1], [1, 1, 0]])
    assert torch.allclose(f, torch.tensor([0.5, 0.2], dtype=torch.float64), atol=1e-15)


def test_gradcheck_against_finite_differences():
    E, p, v, seqs, y = random_problem(2, V=6, d=3, n=4, max_len=5)
    counts = TokenCounts.from_sequences(seqs, 6)
    yt = torch.as_tensor(y, dtype=torch.float64)

    def loss(E, p, v):
        return logistic_loss(attention_output(E, p, v, counts), yt)

    assert torch.autograd.gradcheck(
        loss,
        tuple(t.clone().requires_grad_(True) for t in (E, p, v)),
        eps=1e-6,
        atol=1e-8,
    )


def test_permutation_invariance():
    E, p, v, seqs, _ = random_problem(3)
    gen = np.random.default_rng(0)
    shuffled = [gen.permutation(s) for s in seqs]
    assert torch.allclose(
        dense_attention_output(E, p, v, seqs),
        dense_attention_output(E, p, v, shuffled),
        atol=1e-13,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_at_huge_p(dtype):
    E, p, v, seqs, y = random_problem(4, dtype=dtype)
    p = (p / p.norm() * 1e4).requires_grad_(True)
    E = E.clone().requires_grad_(True)
    v = v.clone().requires_grad_(True)
    f = attention_output(E, p, v, seqs)
    assert torch.isfinite(f).all()
    logistic_loss(f, torch.as_tensor(y, dtype=dtype)).backward()
    for g in (E.grad, p.grad, v.grad):
        assert torch.isfinite(g).all()
    # at huge ||p|| the softmax is the arg-max token: f = E_argmax . v
    with torch.no_grad():
        expect = torch.stack([E[s[np.argmax((E[s] @ p).numpy())]] @ v for s in seqs])
    assert torch.allclose(
        f.detach(), expect, atol=1e-5 if dtype == torch.float32 else 1e-10
    )


def test_attention_weights_sum_to_one():
    E, p, _, seqs, _ = random_problem(5)
    w = attention_weights(E, p, seqs[0])
    assert w.shape == (len(seqs[0]),)
    assert torch.isclose(w.sum(), torch.tensor(1.0, dtype=w.dtype))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda E, p, v, s: (E[0], p, v, s), "shape"),
        (lambda E, p, v, s: (E, p[:-1], v, s), "shape"),
        (lambda E, p, v, s: (E, p, v[:, None], s), "shape"),
        (lambda E, p, v, s: (E.int(), p, v, s), "dtype"),
        (lambda E, p, v, s: (E.float(), p, v, s), "dtype"),
        (lambda E, p, v, s: (E.numpy(), p, v, s), "torch tensor"),
        (lambda E, p, v, s: (E, p, v, []), "empty"),
        (lambda E, p, v, s: (E, p, v, [np.array([], dtype=int)] + s), "empty"),
        (lambda E, p, v, s: (E, p, v, s + [[0, E.shape[0]]]), "outside the vocabulary"),
        (lambda E, p, v, s: (E, p, v, s + [[-1]]), "outside the vocabulary"),
        (lambda E, p, v, s: (E, p, v, [np.array([0.5, 1.0])]), "integers"),
        (lambda E, p, v, s: (E, p, v, [np.zeros((2, 2), dtype=int)]), "1-D"),
        (lambda E, p, v, s: (E, p, v, np.array([[0, 1]])), "list"),
        (
            lambda E, p, v, s: (E, p, v, TokenCounts.from_sequences(s, E.shape[0] + 1)),
            "vocabulary",
        ),
    ],
)
def test_bad_input_raises(problem, mutate, message):
    E, p, v, seqs, _ = problem
    with pytest.raises(ValueError, match=message):
        attention_output(*mutate(E, p, v, seqs))


@pytest.mark.parametrize("native", [True, False])
def test_both_kernel_backends_agree_with_dense(native):
    # V * d large enough that the torch twins write the gradient in several row blocks.
    with contextlib.nullcontext() if native else kernels.torch_only():
        _backends_agree_with_dense(native)


def _backends_agree_with_dense(native):
    E, p, v, seqs, y = random_problem(7, V=700, d=256, n=25, max_len=40)
    E, p, v = E / 16, p / 4, v / 4
    assert kernels.backend("cpu") == ("compiled" if native else "torch")
    assert kernels._rows_per_block(E) < E.shape[0]
    for g_dense, g_count in zip(
        _grads(dense_attention_output, E, p, v, seqs, y),
        _grads(attention_output, E, p, v, seqs, y),
    ):
        assert torch.allclose(g_dense, g_count, atol=1e-12, rtol=0)


def test_gradient_memory_is_reused_only_when_free():
    E, p, v, seqs, y = random_problem(8, V=40, d=16)
    counts = TokenCounts.from_sequences(seqs, 40)
    yt = torch.as_tensor(y, dtype=torch.float64)
    E = E.clone().requires_grad_(True)

    def backward(scale):
        logistic_loss(attention_output(E, scale * p, v, counts), yt).backward()

    def expected(scale):
        return _grads(dense_attention_output, E.detach(), scale * p, v, seqs, y)[1]

    backward(1.0)
    g1 = E.grad  # kept by the caller: must not be overwritten by the next evaluation
    g1_copy = g1.clone()
    E.grad = None
    backward(2.0)
    assert torch.equal(g1, g1_copy)
    assert torch.allclose(g1, expected(1.0), atol=1e-12, rtol=0)
    assert torch.allclose(E.grad, expected(2.0), atol=1e-12, rtol=0)
    backward(2.0)  # no zeroing: gradients accumulate
    assert torch.allclose(E.grad, 2 * expected(2.0), atol=1e-12, rtol=0)
    h1 = torch.autograd.grad(logistic_loss(attention_output(E, p, v, counts), yt), E)[0]
    h2 = torch.autograd.grad(
        logistic_loss(attention_output(E, 3 * p, v, counts), yt), E
    )[0]
    assert torch.allclose(h1, expected(1.0), atol=1e-12, rtol=0)
    assert torch.allclose(h2, expected(3.0), atol=1e-12, rtol=0)
    # dropped gradients hand their memory to the next step
    del g1, h1, h2
    E.grad = None
    backward(1.0)
    ptr = E.grad.data_ptr()
    E.grad = None
    backward(1.0)
    assert E.grad.data_ptr() == ptr


def test_gradient_memory_is_reused_only_when_nothing_holds_it():
    E = torch.zeros(600, 1024)  # large enough for huge pages
    for hold in (
        lambda g: g[:3],
        lambda g: g.detach(),
        lambda g: g.numpy(),
        lambda g: g.untyped_storage(),
        lambda g: g,
    ):
        g = memory.gradient_buffer(E)
        ptr, held = g.data_ptr(), hold(g)
        del g
        assert memory.gradient_buffer(E).data_ptr() != ptr  # still held
        del held
    g = memory.gradient_buffer(E)
    ptr = g.data_ptr()
    assert ptr % 64 == 0 and g.shape == E.shape and g.dtype == E.dtype
    del g
    assert memory.gradient_buffer(E).data_ptr() == ptr  # free: handed out again
