"""The count engine's GPU form of the one-layer model: no host synchronisation.

The same ``f(X_i) = sum_s pi_s(X_i) (E_s . W_k)`` and gradients as
:func:`attnbook.models.attention.count_heads_output`, computed as
:mod:`attnbook.engine.gpu.passes` lays it out: every softmax is shifted by its own
row's maximum, so no row can underflow and nothing needs checking on the host; the
count passes are fused Triton kernels for float32 and one head on CUDA, torch
operations otherwise. The dense passes over ``E`` are those of the CPU engine: the
scores ``E [p, W]`` (one read of ``E``), the gradient ``dE = G [p, W]^T`` (one write)
and ``[p, W]``'s gradient ``G^T E`` (one read), by matrix products or Triton kernels
(:func:`attnbook.engine.gpu.passes.scores`).
"""

from __future__ import annotations

import os

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu.passes import (
    CountLayout,
    column_sums,
    count_layout,
    embedding_gradients,
    row_sums,
    scores,
)

__all__ = [
    "GPU_ENGINE_ENV",
    "use_gpu_engine",
    "gpu_count_heads_output",
    "gpu_count_attention_output",
]

#: Set to ``0`` to run the CPU engine's form on a GPU too (to measure the difference).
GPU_ENGINE_ENV = "ATTNBOOK_GPU_ENGINE"


def use_gpu_engine(E: torch.Tensor) -> bool:
    """Whether the model on ``E`` should use this GPU form: ``E`` on CUDA and
    ``ATTNBOOK_GPU_ENGINE`` not ``0``. (On the CPU the compiled kernels of the CPU
    engine are faster.)"""
    return E.device.type == "cuda" and os.environ.get(GPU_ENGINE_ENV, "1") != "0"


class _SyncFreeCountAttention(torch.autograd.Function):
    """``(n, K)`` outputs of every row and head; backward by :func:`column_sums`.

    Forward: ``a = E p``, ``B = E W`` (one pass ``[p, W]^T E^T``); per row ``m``,
    ``den`` and ``f`` (:func:`row_sums`). Backward, from the gradient ``g`` with
    respect to ``f``: ``G = [G_a, G_B]`` per token (:func:`column_sums`), then ``dE = G
    [p, W]^T`` (rank ``1 + K``) and ``[dp, dW] = G^T E``.
    """

    @staticmethod
    def forward(ctx, E, p, W, layout: CountLayout):  # type: ignore[override]
        PW = torch.cat((p[None, :], W.t())).contiguous()  # (1 + K, d)
        S = scores(E, PW)  # (1 + K, V): one pass over E
        a, B = S[0], S[1:].t()
        m, den, f = row_sums(layout, a, B)
        ctx.save_for_backward(E, PW, a, B, m, den, f)
        ctx.layout = layout
        return f

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, PW, a, B, m, den, f = ctx.saved_tensors
        G = column_sums(ctx.layout, a, B, m, g, den, f)  # (V, 1 + K)
        need = ctx.needs_input_grad
        dE, GtE = embedding_gradients(E, G, PW, need[0], need[1] or need[2])
        dp = dW = None
        if GtE is not None:
            dp, dW = GtE[0], GtE[1:].t()
        return dE, dp, dW, None


def gpu_count_heads_output(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``(n, K)`` outputs of the heads ``W`` ``(d, K)`` for every row of ``counts`` (on
    ``E``'s device), with no host synchronisation (no input validation: see
    :func:`attnbook.models.attention.attention_output`)."""
    return _SyncFreeCountAttention.apply(E, p, W, count_layout(counts, E.dtype))


def gpu_count_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``f(X_i)`` for every row of ``counts``: :func:`gpu_count_heads_output` with the
    one head ``v``."""
    return gpu_count_heads_output(E, p, v[:, None], counts)[:, 0]
