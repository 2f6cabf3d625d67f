"""The one-layer attention model with an MLP head after the softmax: ``f(X) = v . relu(A
z(X) + c)`` with ``z(X) = sum_s pi_s(X) E_s`` the one-layer model's attention output,
computed for a corpus as one sparse ``(n, V) x (V, d)`` product."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine.counts import TokenCounts, pad_arrays, token_counts_over
from attnbook.engine.segments import csr_rows_times, row_shift
from attnbook.models.parameters import init_parameters, one_layer_layout
from attnbook.validation import (
    check_finite,
    check_finite_scores,
    check_instance,
    check_parameter_dict,
    check_sequences,
    check_vocabulary,
)

__all__ = [
    "init_mlp_head",
    "check_mlp_parameters",
    "PooledIndex",
    "mlp_attention_output",
    "dense_mlp_attention_output",
    "token_value_scores",
]


def check_mlp_parameters(params: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` unless ``params`` holds ``E`` (V, d), ``p``, ``v``, ``c``
    (d,) and ``A`` (d, d) of one float dtype on one device."""
    check_parameter_dict(
        params, lambda d: {"p": (d,), "v": (d,), "A": (d, d), "c": (d,)}, "MLP-head"
    )


def init_mlp_head(vocab_size: int, dim: int, **options) -> dict[str, torch.Tensor]:
    """``init_parameters`` with the one-layer ``E``, ``p``, ``v``, then ``A`` of std
    ``sqrt(2/d)`` (He) and ``c`` zero."""

    def layout(V: int, d: int, scale: float) -> dict:
        A, c = ((d, d), math.sqrt(2.0 / d)), ((d,), 0.0)
        return {**one_layer_layout(V, d, scale), "A": A, "c": c}

    return init_parameters(vocab_size, dim, layout=layout, **options)


@dataclass(frozen=True)
class PooledIndex:
    """A corpus' sparsity structure for :func:`mlp_attention_output`: the entries' rows,
    the CSR structure of the transpose (``t_crow``, ``t_col``) and its order ``perm``.
    """

    counts: TokenCounts
    rows: torch.Tensor
    t_crow: torch.Tensor
    t_col: torch.Tensor
    perm: torch.Tensor

    @classmethod
    def build(cls, counts: TokenCounts) -> "PooledIndex":
        check_instance(counts, TokenCounts, "counts")
        rows = counts.row_ids
        perm = torch.argsort(
            counts.token_ids, stable=True
        )  # rows stay sorted within a token
        t_crow = torch.zeros(
            counts.vocab_size + 1, dtype=torch.int64, device=counts.device
        )
        t_crow[1:] = torch.cumsum(
            torch.bincount(counts.token_ids, minlength=counts.vocab_size), 0
        )
        return cls(counts, rows, t_crow, rows[perm], perm)

    def to(self, device: torch.device | str) -> "PooledIndex":
        return PooledIndex(*(getattr(self, f.name).to(device) for f in fields(self)))


def _csr(
    crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape
) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


#: Columns of the dense block multiplied at a time by the CPU's transpose product: the
#: block's rows for all sequences then stay in cache (three to four times faster than
#: one product at n = 25,000, d = 128).
_TRANSPOSE_COLUMNS = 16


def _transpose_times(
    index: PooledIndex, w: torch.Tensor, X: torch.Tensor
) -> torch.Tensor:
    """``S^T X`` for the ``(n, V)`` weights ``S`` (entries ``w``) and a dense ``(n, J)``
    ``X``, by the prepared CSR transpose: every token's row summed over its sequences in
    their order (off the CPU by :func:`csr_rows_times`; on it a few columns at a time,
    which gives the same bits as one product)."""
    V, n = index.counts.vocab_size, index.counts.n_sequences
    wt = w.index_select(0, index.perm)
    if X.device.type != "cpu":
        return csr_rows_times(index.t_crow, index.t_col, wt, X)
    St = _csr(index.t_crow, index.t_col, wt, (V, n))
    step = _TRANSPOSE_COLUMNS
    return torch.cat(
        [St @ X[:, j : j + step].contiguous() for j in range(0, X.shape[1], step)], 1
    )


class _PooledEmbedding(torch.autograd.Function):
    """``z_i = sum_t w_it E_t`` with ``w_it = c_it e^{s_t} / sum_u c_iu e^{s_u}``, from
    the embeddings ``E`` and the token scores ``s`` (``s = E p``).

    Since ``w_it`` depends on the token ``t`` only through ``s_t``, the gradient needs
    no product per stored entry: with ``G = dL/dz``, ``M = S^T G`` and ``a_i = G_i .
    z_i``, ``dL/ds_t = sum_i w_it (G_i . E_t - a_i) = E_t . M_t - (S^T a)_t`` and
    ``dL/dE = M`` (besides the path through ``s``), i.e. one product ``S^T [G, a]``.
    Off the CPU every sum runs in a fixed order (the same bits every run)."""

    @staticmethod
    def forward(ctx, E, scores, index):  # type: ignore[override]
        c = index.counts
        rows, n = index.rows, c.n_sequences
        w = (
            c.float_counts(E.dtype)
            * row_shift(scores.index_select(0, c.token_ids), rows, n)[1]
        )
        den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add_(0, rows, w)
        w = w / den.index_select(0, rows)
        if E.device.type != "cpu":  # every row summed in a fixed order
            z = csr_rows_times(c.indptr, c.token_ids, w, E)
        else:
            z = _csr(c.indptr, c.token_ids, w, (n, E.shape[0])) @ E
        ctx.save_for_backward(E, w, z)
        ctx.index = index
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_z):  # type: ignore[override]
        E, w, z = ctx.saved_tensors
        a = (grad_z * z).sum(dim=1, keepdim=True)
        product = _transpose_times(ctx.index, w, torch.cat([grad_z, a], dim=1))
        M, Sa = product[:, :-1], product[:, -1]
        grad_scores = (E * M).sum(dim=1) - Sa if ctx.needs_input_grad[1] else None
        return M if ctx.needs_input_grad[0] else None, grad_scores, None


def _head(params: dict[str, torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    return torch.relu(z @ params["A"].T + params["c"]) @ params["v"]


def mlp_attention_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` for every sequence (a :class:`PooledIndex`, a ``TokenCounts`` or a
    list of token-id sequences)."""
    check_mlp_parameters(params)
    V = params["E"].shape[0]
    if isinstance(sequences, PooledIndex):
        check_vocabulary(sequences.counts.vocab_size, V, "PooledIndex")
        index = sequences
    else:
        index = PooledIndex.build(token_counts_over(sequences, V))
    E, p = params["E"], params["p"]
    scores = E @ p
    check_finite_scores(scores, E=E, p=p)
    z = _PooledEmbedding.apply(E, scores, index.to(E.device))  # (n, d): z(X_i)
    check_finite(A=params["A"], c=params["c"], v=params["v"])
    return _head(params, z)


def dense_mlp_attention_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding and a masked softmax (the reference)."""
    check_mlp_parameters(params)
    check_finite(**params)
    E = params["E"]
    ids, mask = pad_arrays(check_sequences(sequences, E.shape[0]), E.device)
    x = E[ids]
    attn = torch.softmax((x @ params["p"]).masked_fill(~mask, -torch.inf), dim=1)
    z = (attn[..., None] * x).sum(dim=1)
    return _head(params, z)


def token_value_scores(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(V,)`` ``g_s = v . relu(A E_s + c)``, the output on token ``s`` alone."""
    check_mlp_parameters(params)
    check_finite(**params)
    return _head(params, params["E"])
