"""The one-layer attention model with an MLP head after the softmax.

    z(X) = sum_s pi_s(X) E_s,          pi_s(X) = n_s(X) exp(p . E_s) / sum_t n_t(X)
    exp(p . E_t), f(X) = v . relu(A z(X) + c),       A in R^{d x d}, c in R^d  (hidden
    width d).

The attention part is exactly the one-layer model's; only the linear head ``z -> z . v``
is replaced by a one-hidden-layer ReLU network whose last layer is ``v``. ``f`` is still
a function of the bag of tokens: ``z`` is computed for a whole corpus as one sparse
``(n, V) x (V, d)`` product with the attention weights as the sparse entries (a
:class:`PooledIndex` holds the corpus' sparsity structure). :func:`token_value_scores`
gives ``g_s = v . relu(A E_s + c)``, the output on a sequence made of token ``s``
alone, which is what ``E_s . v`` is in the linear model.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from attnbook.engine.counts import TokenCounts, pad_arrays, token_counts_over
from attnbook.engine.segments import csr_rows_times, entry_dots, row_shift
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
    "mlp_head_layout",
    "check_mlp_parameters",
    "PooledIndex",
    "mlp_attention_output",
    "dense_mlp_attention_output",
    "token_value_scores",
]


def check_mlp_parameters(params: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` unless ``params`` holds ``E`` (V, d), ``p``, ``v``, ``c``
    (d,) and ``A`` (d, d), float32 or float64 of one dtype, on one device."""
    check_parameter_dict(
        params, lambda d: {"p": (d,), "v": (d,), "A": (d, d), "c": (d,)}, "MLP-head"
    )


def mlp_head_layout(
    vocab_size: int, dim: int, scale: float
) -> dict[str, tuple[tuple[int, ...], float]]:
    """``E``, ``p``, ``v`` as in :func:`attnbook.models.parameters.one_layer_layout`,
    ``A`` (d, d) with std ``sqrt(2/d)`` (He initialization, so ``relu(A x)`` keeps about
    the norm of ``x``) and ``c`` (d,) zero."""
    return {
        **one_layer_layout(vocab_size, dim, scale),
        "A": ((dim, dim), math.sqrt(2.0 / dim)),
        "c": ((dim,), 0.0),
    }


def init_mlp_head(vocab_size: int, dim: int, **options) -> dict[str, torch.Tensor]:
    """:func:`attnbook.models.parameters.init_parameters` with :func:`mlp_head_layout`
    (same ``options``)."""
    return init_parameters(vocab_size, dim, layout=mlp_head_layout, **options)


@dataclass(frozen=True)
class PooledIndex:
    """The sparsity structure of a corpus, prepared once for
    :func:`mlp_attention_output`.

    ``crow``/``col`` is the CSR structure of the ``(n, V)`` attention-weight matrix
    (rows = sequences, columns = their distinct tokens), ``t_crow``/``t_col`` that of
    its transpose and ``perm`` the order of the stored entries in the transpose.
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
        return PooledIndex(
            self.counts.to(device),
            self.rows.to(device),
            self.t_crow.to(device),
            self.t_col.to(device),
            self.perm.to(device),
        )


def _csr(
    crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape
) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


class _WeightedRowSum(torch.autograd.Function):
    """``z_i = sum_k w_k E[tok_k]`` over the stored entries ``k`` of row ``i``: ``z = S
    E``.

    Autograd through a sparse product forms the dense ``(n, V)`` matrix ``grad_z E^T``
    to get the gradient of the sparse entries; here it is sampled only at the stored
    entries (``torch.sparse.sampled_addmm``), and ``grad_E = S^T grad_z`` uses the
    prepared transpose. Off the CPU both products sum every row in a fixed order
    (:func:`attnbook.engine.segments.csr_rows_times`) and the sampled entries are dot
    products of their own: the same bits on every run.
    """

    @staticmethod
    def forward(ctx, w, E, index):  # type: ignore[override]
        c = index.counts
        ctx.save_for_backward(w, E)
        ctx.index = index
        if E.device.type != "cpu":  # every row summed in a fixed order
            return csr_rows_times(c.indptr, c.token_ids, w, E)
        S = _csr(c.indptr, c.token_ids, w, (c.n_sequences, E.shape[0]))
        return S @ E

    @staticmethod
    def backward(ctx, grad_z):  # type: ignore[override]
        w, E = ctx.saved_tensors
        index = ctx.index
        c = index.counts
        grad_w = grad_E = None
        if ctx.needs_input_grad[0] and E.device.type != "cpu":
            grad_w = entry_dots(grad_z, E, index.rows, c.token_ids)
        elif ctx.needs_input_grad[0]:
            pattern = _csr(
                c.indptr, c.token_ids, torch.zeros_like(w), (c.n_sequences, E.shape[0])
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
                grad_w = torch.sparse.sampled_addmm(
                    pattern, grad_z.contiguous(), E.T.contiguous(), beta=0.0
                ).values()
        if ctx.needs_input_grad[1] and E.device.type != "cpu":
            grad_E = csr_rows_times(index.t_crow, index.t_col, w[index.perm], grad_z)
        elif ctx.needs_input_grad[1]:
            St = _csr(
                index.t_crow, index.t_col, w[index.perm], (E.shape[0], c.n_sequences)
            )
            grad_E = St @ grad_z
        return grad_w, grad_E, None


def _pooled_embedding(
    E: torch.Tensor, p: torch.Tensor, index: PooledIndex
) -> torch.Tensor:
    """``(n, d)`` attention outputs ``z(X_i) = sum_s pi_s(X_i) E_s`` (differentiable in
    E, p) of checked arguments (the scores checked for finiteness as they are
    computed)."""
    index = index.to(E.device)
    c = index.counts
    scores = E @ p
    check_finite_scores(scores, E=E, p=p)
    a_tok = scores[c.token_ids]
    rows = index.rows
    n = c.n_sequences
    w = c.counts.to(E.dtype) * row_shift(a_tok, rows, n)[1]
    den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add(0, rows, w)
    return _WeightedRowSum.apply(w / den[rows], E, index)


def _head(params: dict[str, torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    return torch.relu(z @ params["A"].T + params["c"]) @ params["v"]


def mlp_attention_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` for every sequence (a :class:`PooledIndex`, a :class:`TokenCounts` or
    a list of token-id sequences)."""
    check_mlp_parameters(params)
    V = params["E"].shape[0]
    if isinstance(sequences, PooledIndex):
        check_vocabulary(sequences.counts.vocab_size, V, "PooledIndex")
        index = sequences
    else:
        index = PooledIndex.build(token_counts_over(sequences, V))
    z = _pooled_embedding(params["E"], params["p"], index)
    check_finite(A=params["A"], c=params["c"], v=params["v"])
    return _head(params, z)


def dense_mlp_attention_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, one embedding per position and a masked softmax (the
    reference)."""
    check_mlp_parameters(params)
    check_finite(**params)
    E = params["E"]
    ids, mask = pad_arrays(check_sequences(sequences, E.shape[0]), E.device)
    x = E[ids]
    attn = torch.softmax((x @ params["p"]).masked_fill(~mask, -torch.inf), dim=1)
    z = (attn[..., None] * x).sum(dim=1)
    return _head(params, z)


def token_value_scores(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(V,)`` ``g_s = v . relu(A E_s + c)``: the output on a sequence of token ``s``
    alone."""
    check_mlp_parameters(params)
    check_finite(**params)
    return _head(params, params["E"])
