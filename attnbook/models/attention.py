"""The one-layer attention model with a ``<cls>`` query and a linear head.

    f(X) = sum_i softmax_i(p . E_{x_i}) (E_{x_i} . v)

Two implementations that agree to rounding error:

- :func:`dense_attention_output` -- the textbook computation: pad the sequences, look up
  one embedding per position, mask, softmax over positions. It is the reference for the
  tests.
- :func:`count_attention_output` -- the count engine. Because ``f`` depends on a
  sequence only through its token counts (:class:`attnbook.engine.counts.TokenCounts`),
  it computes the two scores ``E @ [p, v]`` once per *vocabulary* entry and then works
  on the ``nnz`` stored counts. Its gradient with respect to ``E`` has rank two, ``G_p
  p^T
  + G_v v^T``.

:func:`attention_output` is the public entry point; it validates its inputs and uses the
count engine. Softmaxes are shifted by the per-sequence maximum score, so ``||p|| =
1e4`` gives finite values and gradients.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine import kernels
from attnbook.engine.counts import (
    TokenCounts,
    as_token_counts,
    padded_token_ids,
    validate_sequences,
)
from attnbook.engine.memory import gradient_buffer
from attnbook.engine.segments import segment_max
from attnbook.models.parameters import check_parameters

__all__ = [
    "attention_output",
    "attention_weights",
    "token_attention",
    "count_attention_output",
    "count_heads_output",
    "dense_attention_output",
    "count_softmax_terms",
]


def count_softmax_terms(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shared core of the count engine.

    Returns ``(w, b_tok, den, rows)``: the unnormalised attention mass ``n_s exp(a_s -
    max)`` of every stored entry, its value score ``E_s . v``, the per-row normaliser
    and the row ids.
    """
    scores = E @ torch.stack((p, v), dim=1)  # (V, 2): one fused pass over E
    a_tok = scores[:, 0][counts.token_ids]
    b_tok = scores[:, 1][counts.token_ids]
    rows = counts.row_ids
    n = counts.n_sequences
    shift = segment_max(a_tok, rows, n)
    w = counts.float_counts(E.dtype) * torch.exp(a_tok - shift[rows])
    den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add(0, rows, w)
    return w, b_tok, den, rows


class _RowShiftNeeded(Exception):
    """The global-shift fast path would lose precision on some row (huge ``||p||``)."""


class _CountAttention(torch.autograd.Function):
    """``f`` for every row of a count matrix and every head, with a hand-written
    backward.

    Heads are the columns of ``W`` (``(d, K)``; the binary model has ``K = 1``, ``W =
    v``). Forward, with ``a = E p``, ``B = E W`` (one fused pass ``E @ [p, W]``) and the
    shift ``M = max_s a_s`` taken over the *vocabulary*: ``u = exp(a - M)``, then one
    sparse product ``A @ [u, u * B]`` with the ``(n, V)`` count matrix ``A`` gives the
    normaliser ``den`` and the numerators ``num`` of every row, and ``f = num / den``.
    Softmax is shift invariant, so this is exact; it is *accurate* as long as no row's
    mass underflows, which is checked (``den_i >= T_i * sqrt(tiny)`` implies ``max_{s in
    X_i} a_s - M >= log(sqrt(tiny))``, so any term that underflows is below
    ``sqrt(tiny)`` relative to the row's largest term). When a row fails the check,
    :class:`_RowShiftNeeded` is raised and the caller uses the per-row shift.

    Backward: with ``R = G / den`` (``G`` the output gradient, ``(n, K)``) and ``r_D =
    -sum_k R_k f_k``, one product ``A^T @ [r_D, R]`` gives ``(z_D, Z_N)`` per token;
    ``G_B = u * Z_N``, ``G_a = u * (z_D + sum_k B_k Z_N,k)``; ``dE = G_a p^T + G_B W^T``
    (rank ``1 + K``, written directly), ``dp = E^T G_a``, ``dW = E^T G_B``.

    The five passes over memory (the scores, the two count products, the write of ``dE``
    and ``E^T [G_a, G_B]``) are those of :mod:`attnbook.engine.kernels`.
    """

    @staticmethod
    def forward(ctx, E, p, W, A, At, lengths):  # type: ignore[override]
        PW = torch.cat((p[None, :], W.t())).contiguous()  # (1 + K, d)
        scores = kernels.scores(E, PW)  # (V, 1 + K): one pass over E
        a, B = scores[:, 0], scores[:, 1:]
        u = torch.exp(a - a.max())
        nd = kernels.csr_times(
            A, torch.cat((u[:, None], u[:, None] * B), dim=1)
        )  # (n, 1 + K)
        den, num = nd[:, 0], nd[:, 1:]
        tiny = torch.finfo(E.dtype).tiny
        if not bool((den >= lengths * tiny**0.5).all()):
            raise _RowShiftNeeded
        f = num / den[:, None]
        ctx.save_for_backward(E, PW, u, B, den, f)
        ctx.At = At
        return f

    @staticmethod
    # second derivatives: use the per-row path (count_softmax_terms)
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, PW, u, B, den, f = ctx.saved_tensors
        R = g / den[:, None]
        rD = -(R * f).sum(dim=1)
        z = kernels.csr_times(ctx.At, torch.cat((rD[:, None], R), dim=1))  # (V, 1 + K)
        K = B.shape[1]
        G = torch.empty_like(z)
        torch.mul(u[:, None], z[:, 1:], out=G[:, 1:])  # G_B
        if K == 1:
            torch.addcmul(z[:, 0], B[:, 0], z[:, 1], out=G[:, 0])
        else:
            torch.add(z[:, 0], (B * z[:, 1:]).sum(dim=1), out=G[:, 0])
        G[:, 0].mul_(u)  # G_a
        dE = dp = dW = None
        if ctx.needs_input_grad[0]:
            dE = kernels.low_rank(
                G, PW, gradient_buffer(E)
            )  # one write of the gradient
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            GtE = kernels.weighted_rows(E, G)  # (1 + K, d): one pass over E
            dp, dW = GtE[0], GtE[1:].t()
        return dE, dp, dW, None, None, None


def count_heads_output(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: TokenCounts
) -> torch.Tensor | None:
    """``(n, K)`` outputs ``sum_s pi_s(X_i) (E_s . W_k)`` by two sparse products per
    gradient.

    No input validation. Returns ``None`` when some row's attention mass would underflow
    under the vocabulary-wide shift (very large ``||p||``); the caller then uses a
    per-row shift.
    """
    A, At = counts.sparse_matrices(E.dtype)
    lengths = counts.float_lengths(E.dtype)
    try:
        return _CountAttention.apply(E, p, W, A, At, lengths)
    except _RowShiftNeeded:
        return None


def count_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``f(X_i)`` for every row of ``counts`` by the count engine (no input validation).

    Uses two sparse products per forward-backward pass (:class:`_CountAttention`); falls
    back to the per-row max shift of :func:`count_softmax_terms` when a row's attention
    mass would underflow under the vocabulary-wide shift (very large ``||p||``).
    """
    out = count_heads_output(E, p, v[:, None], counts)
    if out is not None:
        return out[:, 0]
    w, b_tok, den, rows = count_softmax_terms(E, p, v, counts)
    num = torch.zeros_like(den).index_add(0, rows, w * b_tok)
    return num / den


def dense_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, per-position embedding lookup and a masked softmax
    (reference)."""
    check_parameters(E, p, v)
    ids, mask = padded_token_ids(sequences, E.shape[0], E.device)  # (n, T) each
    emb = E[ids]  # (n, T, d)
    logits = (emb @ p).masked_fill(~mask, -torch.inf)
    attn = torch.softmax(logits, dim=1)
    return (attn * (emb @ v)).sum(dim=1)


def attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """The model output ``f(X_i)`` for every sequence, as a 1-D tensor.

    Parameters
    ----------
    E:
        ``(V, d)`` token embeddings, float32 or float64, on any device.
    p, v:
        ``(d,)`` the ``<cls>`` embedding and the linear head, same dtype and device as
        ``E``.
    sequences:
        a list of 1-D integer arrays or tensors of token ids in ``[0, V)`` (none empty),
        or a :class:`~attnbook.engine.counts.TokenCounts` built for ``V`` tokens.

    Differentiable in ``E``, ``p`` and ``v``. Raises ``ValueError`` on malformed input.
    """
    check_parameters(E, p, v)
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    return count_attention_output(E, p, v, counts)


def attention_weights(
    E: torch.Tensor, p: torch.Tensor, sequence: object
) -> torch.Tensor:
    """Softmax weight of every *position* of one sequence (sums to one)."""
    check_parameters(E, p, p)
    (arr,) = validate_sequences([sequence], E.shape[0])
    ids = torch.from_numpy(arr).to(E.device)
    return torch.softmax(E[ids] @ p, dim=0)


def token_attention(
    E: torch.Tensor, p: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """Attention mass on every stored (sequence, distinct token) entry of ``counts``.

    Entry ``k`` of the result is ``n_s(X_i) exp(p.E_s) / sum_t n_t(X_i) exp(p.E_t)`` for
    the row ``i`` and token ``s`` stored at position ``k``; each row sums to one.
    """
    check_parameters(E, p, p)
    counts = as_token_counts(counts, E.shape[0]).to(E.device)
    w, _, den, rows = count_softmax_terms(E, p, torch.zeros_like(p), counts)
    return w / den[rows]
