"""Reductions over the rows of a count matrix: per-row sums, the shift of every softmax
by its row's maximum (and the attention terms relative to it, :class:`RowTerms`), and a
CSR product summed row by row in a fixed order."""

from __future__ import annotations

import torch

from attnbook.engine.counts import TokenCounts

__all__ = [
    "CANCELLATION_LIMIT",
    "RowTerms",
    "csr_rows_times",
    "row_shift",
    "segment_sum",
    "segment_sums",
]

_COLUMNS_AT_ONCE = 16  # columns of X that csr_rows_times gathers at a time


def segment_sum(values: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Per-row sum of ``values`` (``rows`` gives the row of every entry; ``n`` rows)."""
    return torch.zeros(n, dtype=values.dtype, device=values.device).index_add_(
        0, rows, values
    )


def row_shift(
    scores: torch.Tensor, rows: torch.Tensor | None = None, n: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m, exp(scores - m))``, ``m`` the largest score of every row (no gradient):
    rows given by ``rows`` (the row of every entry, ``n`` rows, ``m`` (n,)), else the
    last dimension of ``scores`` (kept, size 1)."""
    if rows is None:
        m = scores.detach().amax(dim=-1, keepdim=True)
        return m, torch.exp(scores - m)
    with torch.no_grad():
        m = torch.full((n,), -torch.inf, dtype=scores.dtype, device=scores.device)
        m = m.scatter_reduce_(
            0, rows, scores.detach(), reduce="amax", include_self=True
        )
    return m, torch.exp(scores - m.index_select(0, rows))


def segment_sums(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Sums of consecutive segments of ``values`` along its first dimension
    (``lengths[i]`` entries each, empty: 0), each reduced by itself in a fixed order (no
    atomics): the same bits on every run. No host synchronisation."""
    return torch.segment_reduce(
        values, "sum", lengths=lengths, axis=0, unsafe=True, initial=0.0
    )


def csr_rows_times(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    values: torch.Tensor,
    X: torch.Tensor,
) -> torch.Tensor:
    """``A @ X`` for the CSR matrix ``(indptr, indices, values)`` and a dense ``(m, J)``
    ``X``, every row summed term by term in stored order on any device (the transpose
    product is this on the CSR arrays of ``A^T``); ``X`` taken 16 columns at a time."""
    lengths = indptr.diff().to(torch.int64)
    n, J = lengths.numel(), X.shape[1]
    out = torch.empty(n, J, dtype=X.dtype, device=X.device)
    for j in range(0, J, _COLUMNS_AT_ONCE):
        block = X[:, j : j + _COLUMNS_AT_ONCE]
        out[:, j : j + block.shape[1]] = segment_sums(
            values[:, None] * block[indices], lengths
        )
    return out


#: Largest ``||p|| max|B| / min_k ||W_k||`` for which the vocabulary-shift backward
#: is used: its error relative to the gradient's scale stays below about 1000 ``eps``.
CANCELLATION_LIMIT = 512.0


class RowTerms:
    """Attention relative to each row's top-scoring token ``r_i`` (scores ``a`` (V,),
    ``B`` (V, K)): ``pi`` and ``db = B_s - B_{r_i}`` per stored entry, ``gap = f_i -
    B_{r_i}`` and ``f`` per row; exact where attention is one-hot."""

    def __init__(self, a: torch.Tensor, B: torch.Tensor, counts: TokenCounts):
        tok, rows, n = counts.token_ids, counts.row_ids, counts.n_sequences
        a_tok = a[tok]
        shift, e = row_shift(a_tok, rows, n)
        top = a_tok == shift[rows]
        # the largest id among tied top tokens: deterministic
        self.ref = torch.zeros(n, dtype=torch.int64, device=a.device).scatter_reduce(
            0, rows[top], tok[top], reduce="amax", include_self=False
        )
        w = counts.float_counts(a.dtype) * e
        den = torch.zeros(n, dtype=a.dtype, device=a.device).index_add_(0, rows, w)
        self.pi = w / den[rows]
        self.db = B[tok] - B[self.ref][rows]
        self.gap = torch.zeros(
            n, B.shape[1], dtype=a.dtype, device=a.device
        ).index_add_(0, rows, self.pi[:, None] * self.db)
        self.rows, self.tokens, self.B = rows, tok, B
        self.f = B[self.ref] + self.gap

    def score_gradient(self, g: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """``(V, 1 + K)``: the gradient of ``sum_ik g_ik f_ik`` in ``a`` (column 0) and
        ``B``, from ``g`` (n, K)."""
        c_B = self.pi[:, None] * g[self.rows]
        c_a = (c_B * (self.db - self.gap[self.rows])).sum(dim=1)
        out = torch.zeros(vocab_size, 1 + g.shape[1], dtype=g.dtype, device=g.device)
        return out.index_add_(0, self.tokens, torch.cat((c_a[:, None], c_B), dim=1))
