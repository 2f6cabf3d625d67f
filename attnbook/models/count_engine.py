"""The count engine of the attention models: the outputs of ``K`` heads (columns of
``W``, ``(d, K)``; the binary model has ``W = v``) on token counts ``A`` (``(n, V)``),

    f_ik = sum_s pi_is B_sk,    pi_is = A_is exp(a_s) / sum_t A_it exp(a_t),

with ``a = E p``, ``B = E W``, and their gradients. Forward: one sparse product ``A @
[u, u B]`` with ``u = exp(a - max a)`` (exact by shift invariance) while no row's mass
underflows (``den_i >= T_i sqrt(tiny)``, checked); else every row relative to its top
token (:class:`attnbook.engine.segments.RowTerms`), which the backward also uses when
the products' cancellation would exceed ``CANCELLATION_LIMIT``."""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts, check_counts
from attnbook.engine.kernels import vocabulary_shift_gradient
from attnbook.engine.memory import gradient_buffer
from attnbook.engine.segments import CANCELLATION_LIMIT, RowTerms
from attnbook.validation import (
    check_finite_scores,
    check_head_matrix,
    check_parameters,
)

__all__ = ["check_heads_arguments", "count_heads_output", "row_terms"]


def row_terms(
    E: torch.Tensor,
    p: torch.Tensor,
    W: torch.Tensor,
    counts: TokenCounts,
    *,
    check_input: bool = True,
) -> RowTerms:
    """:class:`RowTerms` of the model ``(E, p, W)`` on ``counts`` (no gradient), after
    the checks of :func:`count_heads_output` (``check_input=False``: skipped)."""
    if check_input:
        counts = check_heads_arguments(E, p, W, counts)
    with torch.no_grad():
        scores = E @ torch.cat((p[:, None], W), dim=1)
        check_finite_scores(scores, E=E, p=p, W=W)
        return RowTerms(scores[:, 0], scores[:, 1:], counts)


class _CountAttention(torch.autograd.Function):
    """``f`` (n, K) with a hand-written backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, E, p, W, counts):  # type: ignore[override]
        PW = torch.cat((p[None, :], W.t())).contiguous()  # (1 + K, d)
        # (V, 1 + K): one pass over E
        scores = kernels.scores(E, PW, check_input=False)
        a, B = scores[:, 0], scores[:, 1:]
        u = torch.exp(a - a.max())
        A, _ = counts.sparse_matrices(E.dtype)
        nd = kernels.csr_times(
            A, torch.cat((u[:, None], u[:, None] * B), dim=1), check_input=False
        )
        den, num = nd[:, 0], nd[:, 1:]
        floor = counts.float_lengths(E.dtype) * torch.finfo(E.dtype).tiny ** 0.5
        # one synchronisation: scores finite (their sum), every row's mass represented,
        # the cancellation ratio
        norms = torch.linalg.vector_norm(PW, dim=1)  # ||p||, ||W_1||, ..., ||W_K||
        b_min, b_max = torch.aminmax(B)
        covered = (den >= floor).all().to(E.dtype)
        probe, covered, b_min, b_max, p_norm, *head = torch.cat(
            (torch.stack((scores.sum(), covered, b_min, b_max)), norms)
        ).tolist()
        rho = p_norm * max(abs(b_min), abs(b_max))
        if not math.isfinite(probe):
            check_finite_scores(scores, E=E, p=p, W=W)
        ctx.counts = counts
        if covered:
            ctx.rows = None
            # the row-shift backward, built when it is needed
            ctx.accurate = not rho <= CANCELLATION_LIMIT * min(head)
            f = num / den[:, None]
            ctx.save_for_backward(E, PW, a, B, u, den, f)
            return f
        ctx.rows = RowTerms(a, B, counts)
        ctx.save_for_backward(E, PW)
        return ctx.rows.f

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, PW = ctx.saved_tensors[:2]
        rows = ctx.rows
        if rows is None and ctx.accurate:
            a, B = ctx.saved_tensors[2:4]
            rows = RowTerms(a, B, ctx.counts)
        if rows is not None:
            G = rows.score_gradient(g, E.shape[0])
        else:
            G = vocabulary_shift_gradient(ctx.counts, *ctx.saved_tensors[3:], g)
        dE = dp = dW = None
        if ctx.needs_input_grad[0]:
            # one write
            dE = kernels.low_rank(G, PW, gradient_buffer(E), check_input=False)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            # (1 + K, d): one pass over E
            GtE = kernels.weighted_rows(E, G, check_input=False)
            dp, dW = GtE[0], GtE[1:].t()
        return dE, dp, dW, None


def check_heads_arguments(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: object
) -> TokenCounts:
    """Check the arguments of :func:`count_heads_output` but their finiteness; return
    ``counts`` on ``E``'s device."""
    check_head_matrix(W, E)
    check_parameters(E, p, W[:, 0])
    return check_counts(counts, E.shape[0]).to(E.device)


def count_heads_output(
    E: torch.Tensor,
    p: torch.Tensor,
    W: torch.Tensor,
    counts: TokenCounts,
    *,
    check_input: bool = True,
) -> torch.Tensor:
    """``(n, K)`` outputs ``f_ik = sum_s pi_is (E_s . W_k)`` of every row of ``counts``,
    differentiable in ``E``, ``p`` and ``W``. Raises ``ValueError`` naming a wrong
    argument and for NaN or infinity in ``E``, ``p`` or ``W`` (``check_input=False``:
    arguments already checked, ``counts`` on ``E``'s device). On CUDA the engine's GPU
    form, unless ``ATTNBOOK_GPU_ENGINE=0``; it leaves non-finite values to the loss."""
    if check_input:
        counts = check_heads_arguments(E, p, W, counts)
    if E.device.type == "cuda":  # the GPU package is imported only where it runs
        from attnbook.engine.gpu.attention import (
            gpu_count_heads_output,
            use_gpu_engine,
        )

        if use_gpu_engine(E):
            return gpu_count_heads_output(E, p, W, counts)
    return _CountAttention.apply(E, p, W, counts)
