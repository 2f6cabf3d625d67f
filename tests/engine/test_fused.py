"""The fused training step: the one-sweep update of E against torch.optim.Adam and SGD
over the engine's gradient, the dense reference, and its refusal of non-finite values.

Tolerances: the fused step computes the same quantities as torch in another order (the
row's gradient G[s] @ P in registers, the moments' update written as torch's fused CPU
kernel writes it, the sums G^T E per thread). Each step thus differs by a few units in
the last place of each entry; over a few Adam steps, where an entry moves by about
lr per step, differences stay within ~1e3 eps relative to the parameters' scale
(float64: 1e-12; float32: 1e-4 for the loss path, whose scores near 0 amplify rounding
through the softmax)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts
from attnbook.engine.fused import (
    AdamMoments,
    FusedOneLayerStep,
    fused_one_layer_step,
    fused_step,
    torch_optimizer,
)
from attnbook.models.attention import attention_output, dense_attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.parameters import init_parameters
from attnbook.models.training import binary_loss_closure, fit, training_step

BACKENDS = ["compiled", "torch"]


def _backend(name: str):
    if name == "compiled" and kernels.native_library() is None:
        pytest.skip("no compiled kernels here")
    return kernels.torch_only() if name == "torch" else _nothing()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("J", [1, 2, 3, 5])
def test_sweep_matches_torch_adam(backend, dtype, J):
    gen = torch.Generator().manual_seed(J)
    V, d = 203, 70  # neither a multiple of the kernel's blocks nor of its lanes
    E = torch.randn(V, d, generator=gen, dtype=dtype)
    ref = E.clone().requires_grad_()
    opt = torch.optim.Adam([ref], lr=0.01)
    moments = AdamMoments.zeros_like(E)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    with _backend(backend):
        for _ in range(4):
            G = torch.randn(V, J, generator=gen, dtype=dtype)
            P = torch.randn(J, d, generator=gen, dtype=dtype)
            before = E.clone()
            Q, S = fused_step(E, G, P, lr=0.01, moments=moments, scores=True)
            ref.grad = G @ P
            opt.step()
            assert _rel(Q, G.t() @ before) < tol
            assert _rel(E, ref.detach()) < tol
            assert _rel(S, ref.detach() @ P.t()) < tol
    state = opt.state[ref]
    assert moments.step == int(state["step"]) == 4
    assert _rel(moments.exp_avg, state["exp_avg"]) < tol
    assert _rel(moments.exp_avg_sq, state["exp_avg_sq"]) < tol


@pytest.mark.parametrize("backend", BACKENDS)
def test_sweep_matches_plain_gradient_descent(backend):
    gen = torch.Generator().manual_seed(0)
    E = torch.randn(50, 33, generator=gen, dtype=torch.float64)
    ref = E.clone().requires_grad_()
    opt = torch.optim.SGD([ref], lr=0.3)
    with _backend(backend):
        for _ in range(3):
            G = torch.randn(50, 2, generator=gen, dtype=torch.float64)
            P = torch.randn(2, 33, generator=gen, dtype=torch.float64)
            Q, S = fused_step(E, G, P, lr=0.3, row_sums=False)
            ref.grad = G @ P
            opt.step()
            assert Q is None and S is None
    assert _rel(E, ref.detach()) < 1e-14


def _corpus(dtype=torch.float64, seed=0):
    rng = np.random.default_rng(seed)
    V, n = 60, 40
    seqs = [rng.integers(0, V, rng.integers(2, 15)) for _ in range(n)]
    y = torch.tensor(rng.choice([-1.0, 1.0], n), dtype=dtype)
    return seqs, TokenCounts.from_sequences(seqs, V), y


def _current_step(params, counts, y, kind, lr):
    ps = [params[k] for k in ("E", "p", "v")]
    opt = kind(ps, lr=lr)

    def loss():
        E, p, v = ps
        return logistic_loss(attention_output(E, p, v, counts), y)

    return lambda step: training_step(opt, loss, step)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["adam", "gd"])
def test_fused_step_matches_the_current_step(backend, optimizer):
    _, counts, y = _corpus()
    init = init_parameters(60, 24, generator=torch.Generator().manual_seed(3))
    init = {k: t.detach().double() for k, t in init.items()}
    a = {k: t.clone().requires_grad_() for k, t in init.items()}
    b = {k: t.clone().requires_grad_() for k, t in init.items()}
    kind = torch.optim.Adam if optimizer == "adam" else torch.optim.SGD
    lr = 0.05 if optimizer == "adam" else 2.0
    with _backend(backend):
        fused = FusedOneLayerStep(a, counts, y, optimizer=optimizer, lr=lr)
        current = _current_step(b, counts, y, kind, lr)
        for step in range(1, 8):
            assert abs(float(fused(step)) - float(current(step))) < 1e-13
    for k in "Epv":
        assert _rel(a[k].detach(), b[k].detach()) < 1e-12


def test_fused_step_matches_the_dense_reference():
    seqs, counts, y = _corpus()
    init = init_parameters(60, 16, generator=torch.Generator().manual_seed(5))
    a = {k: t.detach().double().clone().requires_grad_() for k, t in init.items()}
    b = {k: t.detach().double().clone().requires_grad_() for k, t in init.items()}
    fused = FusedOneLayerStep(a, counts, y, lr=0.02)
    opt = torch.optim.Adam([b["E"], b["p"], b["v"]], lr=0.02)
    for step in range(1, 4):
        fused(step)
        opt.zero_grad()
        logistic_loss(
            dense_attention_output(b["E"], b["p"], b["v"], seqs), y
        ).backward()
        opt.step()
    for k in "Epv":
        assert _rel(a[k].detach(), b[k].detach()) < 1e-12


def test_the_fused_step_trains_as_fit_does():
    _, counts, y = _corpus(torch.float32)
    init = init_parameters(60, 32, generator=torch.Generator().manual_seed(1))
    a = {k: t.detach().clone() for k, t in init.items()}
    b = {k: t.detach().clone() for k, t in init.items()}
    assert (
        fused_one_layer_step(a, counts, y, optimizer="adam", lr=0.1, trainable=("p",))
        is None
    )
    for k, t in a.items():
        t.requires_grad_(k in ("E", "p"))
    fused = fused_one_layer_step(
        a, counts, y, optimizer="adam", lr=0.05, trainable=("E", "p")
    )
    losses = [float(fused(step)) for step in range(1, 11)]
    plain = binary_loss_closure(b, counts, y)
    g = fit(b, plain, steps=10, lr=0.05, trainable=("E", "p"))  # torch's optimizer
    assert not torch.equal(a["E"], b["E"])  # two ways, equal up to rounding
    assert np.allclose(losses, g.loss, rtol=1e-5, atol=0)
    for k in "Epv":
        assert _rel(a[k].detach(), b[k].detach()) < 1e-4
    assert torch.equal(a["v"], init["v"])  # not trained


def test_outside_changes_between_steps_are_seen():
    _, counts, y = _corpus()
    init = init_parameters(60, 8, generator=torch.Generator().manual_seed(2))
    a = {k: t.detach().double().clone() for k, t in init.items()}
    b = {k: t.detach().double().clone().requires_grad_() for k, t in init.items()}
    fused = FusedOneLayerStep(a, counts, y, lr=0.01)
    current = _current_step(b, counts, y, torch.optim.Adam, 0.01)
    fused(1), current(1)
    with torch.no_grad():
        a["E"][3] += 1.0
        b["E"][3] += 1.0
    assert abs(float(fused(2)) - float(current(2))) < 1e-13


def test_fused_step_refuses_non_finite_parameters():
    _, counts, y = _corpus()
    params = {k: t.detach().double() for k, t in init_parameters(60, 4).items()}
    with torch.no_grad():
        params["E"][7, 0] = float("nan")
    step = FusedOneLayerStep(params, counts, y, lr=0.1)
    with pytest.raises(ValueError, match="E"):
        step(1)


def test_non_finite_loss_names_the_step():
    _, counts, y = _corpus()
    params = {k: t.detach().double() for k, t in init_parameters(60, 4).items()}
    with torch.no_grad():
        params["v"].mul_(1e308).mul_(1e10)  # inf in v
    step = FusedOneLayerStep(params, counts, y, lr=0.1)
    with pytest.raises((ValueError, FloatingPointError)):
        step(3)


@pytest.mark.parametrize("kind", ["adam", "gd"])
def test_step_sizes_per_group_as_train_curve_uses_them(kind):
    _, counts, y = _corpus()
    init = init_parameters(60, 12, generator=torch.Generator().manual_seed(4))
    a = {k: t.detach().double().clone() for k, t in init.items()}
    b = {k: t.detach().double().clone().requires_grad_() for k, t in init.items()}
    lr = {"E": 0.01, "p": 0.3, "v": 0.2}
    fused = fused_one_layer_step(
        a, counts, y, optimizer=kind, lr=lr, trainable=("E", "p", "v")
    )
    opt = torch_optimizer(kind, [{"params": [b[g]], "lr": lr[g]} for g in "Epv"])
    loss = binary_loss_closure(b, counts, y)
    for step in range(1, 6):
        assert abs(float(fused(step)) - float(training_step(opt, loss, step))) < 1e-13
    for k in "Epv":
        assert _rel(a[k], b[k]) < 1e-12


def test_step_table_reports_the_three_steps():
    from benchmarks.step import minimum_step_bytes, step_lines, step_table

    _, counts, y = _corpus(torch.float32)
    table = step_table(counts, y, dim=16, bandwidth=1e10, repeats=2)
    assert [r["step"] for r in table["rows"]] == ["fused", "current", "torch Adam"]
    assert table["bytes"] == minimum_step_bytes(counts, 16)
    assert table["bytes"] == 4 * 41 + 8 * counts.nnz + 6 * 60 * 16 * 4
    last = step_lines(table, 1e10)[-1]
    assert last.startswith("step_bound_fraction=") and "step_speedup=" in last


@pytest.mark.parametrize("scale", [1e3, 1e6])
def test_fused_step_keeps_the_row_shift_paths(scale):
    """A large p makes the cancellation ratio exceed its limit (1e3) and, further, some
    row's mass underflow the vocabulary shift (1e6): the fused step then takes the
    engine's row-shift formulas, as the current step does."""
    _, counts, y = _corpus()
    init = init_parameters(60, 8, generator=torch.Generator().manual_seed(6))
    init = {k: t.detach().double() for k, t in init.items()}
    init["p"] = init["p"] * scale
    a = {k: t.clone() for k, t in init.items()}
    b = {k: t.clone().requires_grad_() for k, t in init.items()}
    fused = FusedOneLayerStep(a, counts, y, lr=0.01)
    current = _current_step(b, counts, y, torch.optim.Adam, 0.01)
    for step in range(1, 4):
        assert abs(float(fused(step)) - float(current(step))) < 1e-13
    for k in "Epv":
        assert _rel(a[k], b[k]) < 1e-12
