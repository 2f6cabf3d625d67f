"""What the benchmark measures: agreement and speed of the engine against the usual
implementation, the engine's passes, its two backends, and how its time scales."""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np
import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts
from attnbook.models import two_layer as tl
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.parameters import init_parameters
from attnbook.models.training import OPTIMIZERS
from benchmarks.timing import (
    cache_evictor,
    sync,
    time_min,
)
from benchmarks.usual import (
    engine_loss_and_grads,
    relative_difference,
    restrict_vocabulary,
    usual_batches,
    usual_loss_and_grads,
)

__all__ = [
    "init_benchmark_parameters",
    "compare_implementations",
    "engine_step_time",
    "engine_passes",
    "backend_times",
    "scaling_table",
    "fit_linear_time",
    "two_layer_comparison",
]


def init_benchmark_parameters(
    V: int, d: int, seed: int, dtype: torch.dtype, device: torch.device
):
    gen = torch.Generator().manual_seed(seed)
    return init_parameters(V, d, generator=gen, dtype=dtype, device=device)


def compare_implementations(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    dim: int,
    max_positions: int = 16_384,
    usual_repeats: int = 2,
    repeats: int = 5,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
) -> dict[str, object]:
    """Loss, gradients and times of the usual implementation and of the count engine.

    Both evaluate the full-batch loss and its gradient at the same initialization
    (:func:`attnbook.models.parameters.init_parameters`, ``seed``). The first pass of
    the usual implementation gives its gradients and its first time; further passes
    (``usual_repeats`` in all) only time it. Returns the losses, their relative
    difference ``loss_rel``, the relative gradient differences ``grad_rel`` (E, p, v),
    the number of mini-batches and padded positions, and the minimum times ``usual_s``,
    ``engine_s`` (forward+backward) and ``step_s`` (forward+backward+Adam).
    """
    device = counts.device
    y = labels.to(device)
    params = init_benchmark_parameters(counts.vocab_size, dim, seed, dtype, device)
    E, p, v = params["E"], params["p"], params["v"]
    # The engine is timed first, before the usual implementation allocates and frees
    # gigabytes of padded temporaries (timed right after them, it ran up to twice as
    # slow).
    init = {k: t.detach().clone() for k, t in params.items()}
    t_grad, t_step = engine_step_time(params, counts, y, repeats=repeats)
    with torch.no_grad():
        for k, t in params.items():
            t.copy_(init[k])  # the Adam steps moved them: back to the initialization
    del init
    batches = usual_batches(counts, max_positions, device)
    t0 = time.perf_counter()
    l_u, g_u = usual_loss_and_grads(E, p, v, batches, y, progress=progress)
    sync(device)
    t_usual = time.perf_counter() - t0
    l_e, g_e = engine_loss_and_grads(E, p, v, counts, y)
    grad_rel = [relative_difference(a, b) for a, b in zip(g_e, g_u)]
    del g_u, g_e
    if usual_repeats > 1:
        t_usual = min(
            t_usual,
            time_min(
                lambda b=batches: usual_loss_and_grads(
                    E, p, v, b, y, progress=progress
                ),
                usual_repeats - 1,
                device,
                warmup=0,
            ),
        )
    out = dict(
        loss_usual=l_u,
        loss_engine=l_e,
        loss_rel=abs(l_e - l_u) / abs(l_u),
        grad_rel=grad_rel,
        batches=len(batches.ids),
        positions=batches.n_positions,
    )
    del batches
    out.update(usual_s=t_usual, engine_s=t_grad, step_s=t_step)
    return out


def _gradient_and_step(
    params: dict[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> tuple[Callable[[], None], Callable[[], None]]:
    """Closures for one full-batch forward+backward and for one training step (that and
    an Adam update, with the optimizer of :func:`attnbook.models.training.fit`)."""
    E, p, v = params["E"], params["p"], params["v"]
    y = labels.to(E.dtype).to(E.device)
    opt = OPTIMIZERS["adam"]([E, p, v], 1e-3)

    def grad() -> None:
        opt.zero_grad(set_to_none=True)
        logistic_loss(attention_output(E, p, v, counts), y).backward()

    def step() -> None:
        grad()
        opt.step()

    return grad, step


def engine_step_time(
    params: dict[str, torch.Tensor],
    counts: TokenCounts,
    labels: torch.Tensor,
    repeats: int = 5,
) -> tuple[float, float]:
    """(forward+backward, forward+backward+Adam step) minimum times in seconds, full
    batch. The steps update ``params`` in place."""
    grad, step = _gradient_and_step(params, counts, labels)
    device = params["E"].device
    return time_min(grad, repeats, device), time_min(step, repeats, device)


def engine_passes(
    params: dict[str, torch.Tensor], counts: TokenCounts, repeats: int = 7
) -> list[dict[str, float | str]]:
    """Time and bytes of each memory-bound pass of one engine gradient (binary model).

    The passes are those of :mod:`attnbook.engine.kernels`, on operands of the shapes
    one gradient evaluation gives them: the scores ``E [p, v]``, the two count products,
    the gradient write ``dE = [G_a, G_b] [p, v]^T`` and ``E^T [G_a, G_b]``. Their values
    do not change the time of a memory-bound pass, so random operands are used. Each is
    timed from memory (caches emptied before every repetition). Returns one dict per
    pass with ``pass``, ``MB`` (bytes it must move), ``ms`` and ``GB/s``.
    """
    E, p, v = (params[k].detach() for k in ("E", "p", "v"))
    device, dtype = E.device, E.dtype
    item = E.element_size()
    V, d = E.shape
    n = counts.n_sequences
    A, At = counts.sparse_matrices(dtype)
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, dtype=dtype).to(device)

    PW, X, Y, G = torch.stack((p, v)), rand(V, 2), rand(n, 2), rand(V, 2)
    out = torch.empty_like(E)
    e_bytes = V * d * item
    csr_bytes = (4 + item) * counts.nnz
    # each pass checked once, then timed as the engine calls it (unchecked)
    kernels.scores(E, PW), kernels.csr_times(A, X), kernels.csr_times(At, Y)
    kernels.low_rank(G, PW, out), kernels.weighted_rows(E, G)
    passes = [
        ("scores E [p, v]", e_bytes, lambda: kernels.scores(E, PW, check_input=False)),
        (
            "counts A [u, u b]",
            csr_bytes + 4 * (n + 1),
            lambda: kernels.csr_times(A, X, check_input=False),
        ),
        (
            "counts A^T [r_D, r]",
            csr_bytes + 4 * (V + 1),
            lambda: kernels.csr_times(At, Y, check_input=False),
        ),
        (
            "write dE = G [p, v]^T",
            e_bytes,
            lambda: kernels.low_rank(G, PW, out, check_input=False),
        ),
        ("E^T G", e_bytes, lambda: kernels.weighted_rows(E, G, check_input=False)),
    ]
    evict = cache_evictor(device)
    rows = []
    for name, nbytes, fn in passes:
        t = time_min(fn, repeats, device, before=evict)
        rows.append(
            {"pass": name, "MB": nbytes / 1e6, "ms": 1e3 * t, "GB/s": nbytes / t / 1e9}
        )
    return rows


def backend_times(
    params: dict[str, torch.Tensor],
    counts: TokenCounts,
    labels: torch.Tensor,
    repeats: int = 7,
) -> dict[str, float]:
    """Full-batch forward+backward time (s) with the compiled kernels and with their
    torch twins (:func:`attnbook.engine.kernels.torch_only`); only the available
    backends are timed."""
    grad, _ = _gradient_and_step(params, counts, labels)
    device = params["E"].device
    out = {}
    if kernels.backend(device) == "compiled":
        out["compiled"] = time_min(grad, repeats, device)
    with kernels.torch_only():
        out["torch"] = time_min(grad, repeats, device)
    return out


def scaling_table(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    doc_fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0),
    dims: Sequence[int] = (256, 512, 1024, 2048),
    vocab_sizes: Sequence[int] = (1000, 2000, 4000),
    base_dim: int = 2048,
    repeats: int = 5,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
) -> list[dict[str, float]]:
    """Engine forward+backward time when one of documents, ``d``, vocabulary size
    varies.

    Returns one dict per setting with ``varied``, ``documents``, ``vocab``, ``dim``,
    ``nnz`` (stored counts), ``vd`` (``V d``) and ``ms`` (minimum time in milliseconds).
    """
    device = counts.device
    settings: list[tuple[str, TokenCounts, torch.Tensor, int]] = []
    n = counts.n_sequences
    for frac in doc_fractions:
        k = max(1, int(round(frac * n)))
        idx = np.arange(k)
        settings.append(("documents", counts.select(idx), labels[:k], base_dim))
    for d in dims:
        settings.append(("d", counts, labels, d))
    for V in vocab_sizes:
        if V < counts.vocab_size:
            c, y = restrict_vocabulary(counts, labels, V)
            settings.append(("vocabulary", c, y, base_dim))
    settings.append(("vocabulary", counts, labels, base_dim))
    # Round-robin: every round times each setting once, and each setting keeps its
    # minimum, so a burst of load from other programs hits all settings alike instead of
    # a few rows.
    states = []
    for varied, c, y, d in settings:
        params = init_benchmark_parameters(c.vocab_size, d, seed, dtype, device)
        states.append((varied, c, y.to(dtype).to(device), d, params))
    best = [math.inf] * len(states)
    rounds = range(repeats + 1)  # round 0 warms up
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="scaling", leave=False)
    for r in rounds:
        for i, (_, c, y, _, params) in enumerate(states):
            E, p, v = params["E"], params["p"], params["v"]
            for t in (E, p, v):
                t.grad = None
            sync(device)
            t0 = time.perf_counter()
            logistic_loss(attention_output(E, p, v, c), y).backward()
            sync(device)
            if r > 0:
                best[i] = min(best[i], time.perf_counter() - t0)
            for t in (E, p, v):  # dropped as a training step drops them (zero_grad)
                t.grad = None
    rows = []
    for (varied, c, _, d, _), t in zip(states, best):
        rows.append(
            dict(
                varied=varied,
                documents=c.n_sequences,
                vocab=c.vocab_size,
                dim=d,
                nnz=c.nnz,
                vd=c.vocab_size * d,
                ms=1e3 * t,
            )
        )
    return rows


def fit_linear_time(
    rows: Sequence[dict[str, float]],
) -> tuple[float, float, float, float]:
    """Least-squares fit ``ms = c0 + c1 nnz + c2 V d`` to :func:`scaling_table` rows
    (relative residuals).

    Returns ``(c0, c1, c2, max_rel_residual)``: milliseconds, per stored count, per
    entry of ``E``, and the largest relative deviation of a measured time from the fit.
    """
    X = np.array([[1.0, r["nnz"], r["vd"]] for r in rows])
    t = np.array([r["ms"] for r in rows])
    # relative least squares: every setting counts equally, whatever its time
    coef, *_ = np.linalg.lstsq(X / t[:, None], np.ones_like(t), rcond=None)
    resid = np.abs(X @ coef - t) / t
    return float(coef[0]), float(coef[1]), float(coef[2]), float(resid.max())


# ---------------------------------------------------------------------- two-layer model
def two_layer_comparison(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    n_docs: int,
    dim: int,
    repeats: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> dict[str, float] | None:
    """Two-layer model on the first ``n_docs`` documents: engine vs padded reference.

    Returns loss agreement, gradient agreement (largest relative difference over the
    five parameters) and forward+backward times.
    """
    sub = counts.select(np.arange(min(n_docs, counts.n_sequences)))
    y = labels[: sub.n_sequences].to(dtype).to(counts.device)
    gen = torch.Generator().manual_seed(seed)
    params = tl.init_two_layer(
        sub.vocab_size, dim, generator=gen, dtype=dtype, device=counts.device
    )
    blocks = tl.pair_blocks(sub)
    seqs = sub.to_sequences()

    def run(fn) -> tuple[float, list[torch.Tensor]]:
        for t in params.values():
            t.grad = None
        loss = logistic_loss(fn(), y)
        loss.backward()
        return float(loss.detach()), [params[k].grad.clone() for k in sorted(params)]

    l_eng, g_eng = run(lambda: tl.two_layer_output(params, blocks))
    l_ref, g_ref = run(lambda: tl.dense_two_layer_output(params, seqs))
    t_eng = time_min(
        lambda: run(lambda: tl.two_layer_output(params, blocks)),
        repeats,
        counts.device,
        warmup=0,
    )
    t_ref = time_min(
        lambda: run(lambda: tl.dense_two_layer_output(params, seqs)),
        max(1, repeats // 2),
        counts.device,
        warmup=0,
    )
    return dict(
        documents=sub.n_sequences,
        dim=dim,
        loss_rel=abs(l_eng - l_ref) / abs(l_ref),
        grad_rel=max(relative_difference(a, b) for a, b in zip(g_eng, g_ref)),
        engine_s=t_eng,
        reference_s=t_ref,
        speedup=t_ref / t_eng,
    )
