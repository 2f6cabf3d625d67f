"""The engine's GPU form and the device policy.

The torch form of the GPU passes runs on any device, so it is checked here on the CPU
against the CPU engine and the dense reference. Tests marked ``gpu`` need a CUDA device
and are skipped without one; ``python -m pytest -m gpu tests/engine/test_gpu.py`` runs
only those.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from attnbook.book.chapter import start_chapter
from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu import triton_passes
from attnbook.engine.gpu.attention import (
    GPU_ENGINE_ENV,
    gpu_count_attention_output,
    gpu_count_heads_output,
    use_gpu_engine,
)
from attnbook.engine.gpu.passes import count_layout, fused_backend
from attnbook.models.attention import (
    attention_output,
    count_heads_output,
    dense_attention_output,
)
from attnbook.models.losses import logistic_loss
from attnbook.runtime import DEVICE_ENV, device_for

from conftest import random_problem

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA, reason="needs a CUDA device; torch sees none here"
)


def _problem(seed=0, V=40, d=8, n=15, max_len=30, dtype=torch.float64):
    E, p, v, seqs, y = random_problem(seed, V, d, n, max_len, dtype)
    return E, p, v, seqs, torch.from_numpy(y.astype(np.float64)).to(dtype)


def _loss_and_grads(fn, E, p, v, counts, y):
    leaves = [t.detach().clone().requires_grad_(True) for t in (E, p, v)]
    loss = logistic_loss(fn(*leaves, counts), y.to(E.dtype))
    loss.backward()
    return float(loss.detach()), [t.grad for t in leaves]


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


# ------------------------------------------------------------------ CPU: torch form
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_gpu_form_matches_cpu_engine_and_dense(dtype, tol):
    E, p, v, seqs, y = _problem(seed=1, dtype=dtype)
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    l_gpu, g_gpu = _loss_and_grads(gpu_count_attention_output, E, p, v, counts, y)
    l_cpu, g_cpu = _loss_and_grads(attention_output, E, p, v, counts, y)
    l_ref, g_ref = _loss_and_grads(dense_attention_output, E, p, v, seqs, y)
    assert abs(l_gpu - l_cpu) <= tol * abs(l_cpu)
    assert abs(l_gpu - l_ref) <= tol * abs(l_ref)
    for a, b, c in zip(g_gpu, g_cpu, g_ref):
        assert _rel(a, b) <= 10 * tol and _rel(a, c) <= 10 * tol


def test_gpu_form_heads_match_cpu_engine():
    E, p, _, seqs, _ = _problem(seed=2)
    W = torch.randn(
        E.shape[1], 3, dtype=E.dtype, generator=torch.Generator().manual_seed(0)
    )
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    G = torch.randn(counts.n_sequences, 3, dtype=E.dtype)
    grads = []
    for fn in (gpu_count_heads_output, count_heads_output):
        leaves = [t.detach().clone().requires_grad_(True) for t in (E, p, W)]
        (fn(*leaves, counts) * G).sum().backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        assert _rel(a, b) <= 1e-12


def test_gpu_form_is_exact_for_huge_p():
    """Each row is shifted by its own maximum: nothing underflows even where the CPU
    engine must fall back to its per-row path."""
    E, p, v, seqs, y = _problem(seed=5)
    p = p / p.norm() * 3e3
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    l_gpu, g_gpu = _loss_and_grads(gpu_count_attention_output, E, p, v, counts, y)
    l_ref, g_ref = _loss_and_grads(dense_attention_output, E, p, v, seqs, y)
    assert np.isfinite(l_gpu) and abs(l_gpu - l_ref) <= 1e-10 * abs(l_ref)
    for a, b in zip(g_gpu, g_ref):
        assert torch.isfinite(a).all() and _rel(a, b) <= 1e-9


def test_long_columns_are_cut_into_chunks():
    seqs = [np.zeros(3, dtype=np.int64)] * 5000 + [np.array([1, 2])]
    counts = TokenCounts.from_sequences(seqs, 4)
    layout = count_layout(counts, torch.float32)
    assert count_layout(counts, torch.float32) is layout  # built once
    per_col = layout.chunks_per_col.tolist()
    assert per_col[0] == 3 and per_col[1:] == [1, 1, 1]  # 5000 entries: 3 chunks
    assert int(layout.chunk_stop[-1]) == counts.nnz
    assert torch.equal(layout.col_lengths, torch.tensor([5000, 1, 1, 0]))


def test_backend_choice_without_cuda():
    a = torch.zeros(3)
    assert fused_backend(a, a[:, None]) == (
        "triton" if triton_passes.usable(a) else "torch"
    )
    assert fused_backend(a.double(), a[:, None].double()) == "torch"
    assert not use_gpu_engine(a)


_NO_LOADED_BOUNDS = 77  # the exit status of the test's script when the probe fails


@pytest.mark.skipif(not triton_passes.available(), reason="Triton is not installed")
def test_triton_kernels_in_the_interpreter(tmp_path):
    """The fused kernels, run by Triton's interpreter on the CPU, give the torch
    form's numbers (float32: rounding of the sums in another order).

    The kernels loop over bounds loaded from memory (a row's or a column's range of
    entries). Some versions of Triton's interpreter cannot run such a loop (3.6.0: a
    loaded scalar is a one-element array there, which ``range`` refuses to convert),
    while the compiled kernels run it on CUDA and Triton 3.9.0's interpreter runs it
    on a CPU. A probe kernel with only that loop runs first: where it fails, the test is
    skipped and says why, since nothing of the book's kernels can be tested there."""
    code = textwrap.dedent(
        f"""
        import sys
        import numpy as np, torch, triton
        import triton.language as tl

        @triton.jit
        def probe(bounds, out):
            acc = tl.zeros([1], tl.int32)
            for k in range(tl.load(bounds), tl.load(bounds + 1)):
                acc += 1
            tl.store(out + tl.arange(0, 1), acc)

        out = torch.zeros(1, dtype=torch.int32)
        try:
            probe[(1,)](torch.tensor([2, 5], dtype=torch.int32), out)
        except Exception as err:
            version = triton.__version__
            print(f"Triton {{version}}'s interpreter: {{err!r}}", file=sys.stderr)
            sys.exit({_NO_LOADED_BOUNDS})
        assert int(out[0]) == 3

        from attnbook.engine.counts import TokenCounts
        from attnbook.engine.gpu import passes as gp
        dense_backend, dense_passes = gp.dense_backend, gp.dense_passes
        fused_backend = gp.fused_backend
        from attnbook.models.attention import attention_output
        from attnbook.engine.gpu.attention import gpu_count_attention_output
        rng = np.random.default_rng(0)
        V, d, n = 200, 300, 30  # d: one full tile of columns and a partial one
        seqs = [rng.integers(0, V, size=rng.integers(1, 300)) for _ in range(n)]
        seqs += [np.zeros(4500, dtype=np.int64)]  # a column cut into chunks
        c = TokenCounts.from_sequences(seqs, V)
        g = torch.Generator().manual_seed(0)
        E, p, v = (torch.randn(*s, generator=g) / 4 for s in ((V, d), (d,), (d,)))
        assert fused_backend(E[:, 0], E[:, :1]) == "triton"
        for kind in ("library", "triton"):
            with dense_passes(kind):
                assert dense_backend(E, 1) == kind
                out = []
                for fn in (gpu_count_attention_output, attention_output):
                    leaves = [t.clone().requires_grad_(True) for t in (E, p, v)]
                    f = fn(*leaves, c)
                    (f * torch.linspace(-1, 1, f.numel())).sum().backward()
                    out.append([f.detach()] + [t.grad for t in leaves])
            rel = [float((a - b).norm() / b.norm()) for a, b in zip(*out)]
            assert max(rel) <= 1e-5, (kind, rel)
        """
    )
    script = tmp_path / "interpreted.py"  # Triton reads a kernel's source from its file
    script.write_text(code)
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True
    )
    if done.returncode == _NO_LOADED_BOUNDS:
        pytest.skip(
            "this Triton's interpreter cannot loop over bounds loaded from memory, "
            f"which the kernels do ({done.stderr.strip()[-300:]})"
        )
    assert done.returncode == 0, done.stderr[-2000:]


# ------------------------------------------------------------------ device policy
def test_device_for_workloads(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert device_for("synthetic") == torch.device("cpu")
    assert device_for("real").type == ("cuda" if HAS_CUDA else "cpu")
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert device_for("real") == torch.device("cpu")
    with pytest.raises(ValueError, match="workload"):
        device_for("big")
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match=DEVICE_ENV):
        device_for("synthetic")
    if not HAS_CUDA:
        monkeypatch.setenv(DEVICE_ENV, "cuda")
        with pytest.raises(ValueError, match="no CUDA device"):
            device_for("real")


def test_start_chapter_workload(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    _, device = start_chapter("test_chapter", seed=0, workload="synthetic")
    assert device == torch.device("cpu")
    with pytest.raises(ValueError, match="workload"):
        start_chapter("test_chapter", seed=0, workload="gpu")


# ------------------------------------------------------------------ GPU
def _cuda_problem(dtype=torch.float32, V=300, d=64, n=200):
    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, V, size=rng.integers(1, 200)) for _ in range(n)]
    counts = TokenCounts.from_sequences(seqs, V)
    g = torch.Generator().manual_seed(1)
    E, p, v = (
        torch.randn(*s, generator=g, dtype=dtype) / 4 for s in ((V, d), (d,), (d,))
    )
    y = torch.from_numpy(np.where(rng.random(n) < 0.5, -1.0, 1.0)).to(dtype)
    return E, p, v, counts, y


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_cuda_engine_matches_cpu_engine(dtype, tol):
    E, p, v, counts, y = _cuda_problem(dtype)
    l_cpu, g_cpu = _loss_and_grads(attention_output, E, p, v, counts, y)
    cuda = [t.cuda() for t in (E, p, v)]
    assert use_gpu_engine(cuda[0]) == (os.environ.get(GPU_ENGINE_ENV, "1") != "0")
    l_gpu, g_gpu = _loss_and_grads(
        gpu_count_attention_output, *cuda, counts.to("cuda"), y.cuda()
    )
    assert abs(l_gpu - l_cpu) <= tol * abs(l_cpu)
    for a, b in zip(g_gpu, g_cpu):
        assert _rel(a.cpu(), b) <= 10 * tol


@gpu
@needs_cuda
def test_cuda_uses_fused_kernels_when_triton_is_there():
    a = torch.zeros(4, device="cuda")
    expected = "triton" if triton_passes.available() else "torch"
    assert fused_backend(a, a[:, None]) == expected


@gpu
@needs_cuda
def test_graphed_gradient_replays_the_eager_gradient():
    from attnbook.models.training import OPTIMIZERS
    from benchmarks.graphed import GraphedGradient

    E, p, v, counts, y = _cuda_problem()
    params = {k: t.cuda().requires_grad_(True) for k, t in zip("Epv", (E, p, v))}
    counts, y = counts.to("cuda"), y.cuda()
    graphed = GraphedGradient(params, counts, y)
    for _ in range(2):  # the graph reads the parameters as they are now
        loss = float(graphed())
        grads = [params[k].grad.clone() for k in "Epv"]
        l_ref, g_ref = _loss_and_grads(
            gpu_count_attention_output, *(params[k].detach() for k in "Epv"), counts, y
        )
        assert abs(loss - l_ref) <= 1e-6 * abs(l_ref)
        for a, b in zip(grads, g_ref):
            assert _rel(a, b) <= 1e-6
        with torch.no_grad():
            params["E"].mul_(1.5)
    graphed.optimizer = OPTIMIZERS["adam"](list(params.values()), 1e-2)
    before = float(graphed())
    for _ in range(20):
        graphed.step()
    assert float(graphed()) < before  # the steps train


@gpu
@needs_cuda
def test_device_policy_on_a_gpu(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert device_for("real").type == "cuda"
    assert device_for("synthetic").type == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    assert device_for("synthetic").type == "cuda"


@gpu
@needs_cuda
def test_bench_gpu_engine_agrees_with_cpu():
    from benchmarks.gpu import gpu_engine_times

    _, _, _, counts, y = _cuda_problem()
    out = gpu_engine_times(counts.to("cuda"), y.cuda(), dim=64, repeats=2)
    assert out["agrees"], out
    assert out["graph_s"] > 0 and out["eager_s"] > 0 and out["graph_step_s"] > 0


def test_failing_kernels_fall_back_to_the_torch_form(monkeypatch):
    from attnbook.engine.gpu import passes as gpu_passes

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(gpu_passes, "TRITON_FAILURES", [])
    monkeypatch.setattr(triton_passes, "usable", lambda t: True)
    monkeypatch.setattr(triton_passes, "row_sums", broken)
    E, p, v, seqs, y = _problem(seed=4, dtype=torch.float32)
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    assert fused_backend(E[:, 0], E[:, :1]) == "triton"
    with pytest.warns(RuntimeWarning, match="no compiler"):
        l_gpu, _ = _loss_and_grads(gpu_count_attention_output, E, p, v, counts, y)
    assert fused_backend(E[:, 0], E[:, :1]) == "torch"
    l_cpu, _ = _loss_and_grads(attention_output, E, p, v, counts, y)
    assert abs(l_gpu - l_cpu) <= 1e-5 * abs(l_cpu)
