"""The one-layer model ``f(X) = sum_i softmax_i(p . E_{x_i}) (E_{x_i} . v)`` and its
count engine for ``K`` heads (columns of ``W``, (d, K); ``W = v`` for the binary model)
on token counts ``A`` (n, V): ``f_ik = sum_s pi_is B_sk``, ``pi_is = A_is exp(a_s) /
sum_t A_it exp(a_t)``, ``a = E p``, ``B = E W``. Forward: one sparse product ``A @ [u, u
B]``, ``u = exp(a - max a)``, while no row's mass underflows; else every row relative to
its top token (:class:`RowTerms`), which the backward also uses past
``CANCELLATION_LIMIT``."""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine import kernels
from attnbook.engine.counts import (
    TokenCounts,
    check_counts,
    pad_arrays,
    token_counts_over,
)
from attnbook.engine.kernels import vocabulary_shift_gradient
from attnbook.engine.memory import gradient_buffer
from attnbook.engine.segments import CANCELLATION_LIMIT, RowTerms
from attnbook.validation import (
    check_finite,
    check_finite_scores,
    check_head_matrix,
    check_parameters,
    check_sequences,
)

__all__ = [
    "attention_output",
    "attention_weights",
    "count_heads_output",
    "dense_attention_output",
]


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


def count_heads_output(
    E: torch.Tensor,
    p: torch.Tensor,
    W: torch.Tensor,
    counts: TokenCounts,
    *,
    check_input: bool = True,
) -> torch.Tensor:
    """``(n, K)`` outputs ``f_ik = sum_s pi_is (E_s . W_k)``, differentiable in ``E``,
    ``p``, ``W``; ``ValueError`` for a wrong argument or NaN/inf in them
    (``check_input=False``: checked, ``counts`` on ``E``'s device). On CUDA the GPU
    form unless ``ATTNBOOK_GPU_ENGINE=0``; it leaves non-finite values to the loss."""
    if check_input:
        check_head_matrix(W, E)
        check_parameters(E, p, W[:, 0])
        counts = check_counts(counts, E.shape[0]).to(E.device)
    if E.device.type == "cuda":  # the GPU package is imported only where it runs
        from attnbook.engine.gpu.attention import (
            gpu_count_heads_output,
            use_gpu_engine,
        )

        if use_gpu_engine(E):
            return gpu_count_heads_output(E, p, W, counts)
    return _CountAttention.apply(E, p, W, counts)


def attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``f(X_i)`` of every sequence (token-id arrays or a ``TokenCounts`` over ``V``
    tokens) by the count engine, differentiable in ``E``, ``p``, ``v``."""
    check_parameters(E, p, v)
    counts = token_counts_over(sequences, E.shape[0]).to(E.device)
    return count_heads_output(E, p, v[:, None], counts, check_input=False)[:, 0]


def dense_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, per-position lookup and a masked softmax (reference)."""
    check_parameters(E, p, v)
    check_finite(E=E, p=p, v=v)
    ids, mask = pad_arrays(check_sequences(sequences, E.shape[0]), E.device)
    emb = E[ids]  # (n, T, d)
    logits = (emb @ p).masked_fill(~mask, -torch.inf)
    attn = torch.softmax(logits, dim=1)
    return (attn * (emb @ v)).sum(dim=1)


def attention_weights(
    E: torch.Tensor, p: torch.Tensor, sequence: object
) -> torch.Tensor:
    """Softmax weight of every *position* of one sequence (sums to one)."""
    check_parameters(E, p, p)
    (arr,) = check_sequences([sequence], E.shape[0])
    ids = torch.from_numpy(arr).to(E.device)
    check_finite(E=E, p=p)
    logits = E[ids] @ p
    check_finite_scores(logits, E=E, p=p)
    return torch.softmax(logits, dim=0)
