"""The engine on a GPU: the gradient without host synchronisation, eager and replayed
from a CUDA graph, checked against the CPU engine.

:func:`gpu_engine_times` measures, on the benchmark's corpus and initialization,

- the eager gradient of :mod:`attnbook.engine.gpu.attention` (fused count passes, no
  host synchronisation, one launch per kernel), with the dense passes over ``E`` by
  cuBLAS and by Triton;
- the same gradient replayed from a CUDA graph (:class:`benchmarks.graphed.
  GraphedGradient`), and a training step (the replay and a fused Adam step);
- the agreement of the graph's loss and gradients with the CPU engine (compiled C
  kernels) at the same parameters.
"""

from __future__ import annotations

import torch

from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu.attention import gpu_count_attention_output
from attnbook.engine.gpu.passes import (
    TRITON_FAILURES,
    count_layout,
    dense_backend,
    dense_passes,
    fused_backend,
)
from attnbook.models.losses import logistic_loss
from attnbook.models.parameters import init_parameters
from attnbook.models.training import OPTIMIZERS
from benchmarks.graphed import GraphedGradient
from benchmarks.timing import time_min
from benchmarks.usual import engine_loss_and_grads, relative_difference

__all__ = ["gpu_engine_times", "LOSS_TOLERANCE", "GRADIENT_TOLERANCE"]

#: The GPU engine must match the CPU engine within these relative differences: the
#: rule the benchmark applies to the engine against the usual implementation, two
#: float32 computations of one gradient whose sums run in different orders (a float32
#: sum of N terms in another order differs by about sqrt(N) * 6e-8 relative, ~1e-5
#: for the ~25,000 documents of a full batch).
LOSS_TOLERANCE = 1e-5
GRADIENT_TOLERANCE = 1e-4


def _variant(
    init: dict[str, torch.Tensor],
    counts: TokenCounts,
    y: torch.Tensor,
    reference: tuple[float, list[torch.Tensor]],
    repeats: int,
) -> dict[str, object]:
    """Agreement and times of the GPU engine from the parameters ``init`` (copied),
    with the dense passes chosen by the caller."""
    params = {k: t.detach().clone().requires_grad_(True) for k, t in init.items()}
    E, p, v = params["E"], params["p"], params["v"]
    graphed = GraphedGradient(params, counts, y)
    l_gpu = float(graphed())
    l_cpu, g_cpu = reference
    grad_rel = [relative_difference(t.grad.cpu(), g) for t, g in zip((E, p, v), g_cpu)]
    loss_rel = abs(l_gpu - l_cpu) / abs(l_cpu)

    def eager() -> None:
        for t in (E, p, v):
            t.grad = None
        logistic_loss(gpu_count_attention_output(E, p, v, counts), y).backward()

    device = counts.device
    t_graph = time_min(graphed, repeats, device)
    grads = [t.grad for t in (E, p, v)]
    t_eager = time_min(eager, repeats, device)
    for t, g in zip((E, p, v), grads):  # the graph writes into these tensors
        t.grad = g
    graphed.optimizer = OPTIMIZERS["adam"]([E, p, v], 1e-3)
    t_step = time_min(graphed.step, repeats, device)
    return dict(
        eager_s=t_eager,
        graph_s=t_graph,
        graph_step_s=t_step,
        loss_rel=loss_rel,
        grad_rel=grad_rel,
        agrees=loss_rel <= LOSS_TOLERANCE and max(grad_rel) <= GRADIENT_TOLERANCE,
    )


def gpu_engine_times(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    dim: int,
    repeats: int = 7,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> dict[str, object]:
    """Times (s) and agreement of the GPU engine on ``counts`` (on a CUDA device).

    The dense passes over ``E`` are timed both ways where Triton is available (matrix
    products by cuBLAS, ``"library"``, and Triton kernels, ``"triton"``); each way
    gives ``eager_s`` (forward+backward launched op by op), ``graph_s`` (the same
    replayed from a CUDA graph), ``graph_step_s`` (replay and a fused Adam step),
    ``loss_rel`` and ``grad_rel`` (E, p, v): relative differences from the CPU engine
    at the initialization, and ``agrees`` (within :data:`LOSS_TOLERANCE` and
    :data:`GRADIENT_TOLERANCE`). Returns those of the fastest way, ``dense`` (which
    way that is), ``variants`` (every way's) and ``backend`` (``"triton"`` or
    ``"torch"``: the count passes). Raises ``ValueError`` when ``counts`` is not on
    CUDA.
    """
    device = counts.device
    if device.type != "cuda":
        raise ValueError(f"counts must be on a CUDA device, got {device}")
    gen = torch.Generator().manual_seed(seed)
    init = init_parameters(
        counts.vocab_size, dim, generator=gen, dtype=dtype, device=device
    )
    y = labels.to(device=device, dtype=dtype)
    count_layout(counts, dtype)
    cpu = [init[k].detach().cpu() for k in ("E", "p", "v")]
    reference = engine_loss_and_grads(*cpu, counts.to("cpu"), y.cpu())
    del cpu
    kinds = ["library"]
    with dense_passes("triton"):
        if dense_backend(init["E"], 1) == "triton":
            kinds.append("triton")
    variants = {}
    for kind in kinds:
        with dense_passes(kind):
            variants[kind] = _variant(init, counts, y, reference, repeats)
    scores = init["E"].detach()[:, :2]
    backend = fused_backend(scores[:, 0], scores[:, 1:])
    if TRITON_FAILURES:  # a kernel failed while warming up: the torch form ran
        backend = f"torch (Triton failed: {TRITON_FAILURES[0]})"
    best = min(variants, key=lambda k: variants[k]["graph_s"])
    return dict(variants[best], dense=best, variants=variants, backend=backend)
