"""A two-layer attention model: token self-attention (``W1``, identity values, residual)
``h_s = E_s + sum_t pi1_{t|s} E_t``, then the ``<cls>`` query ``q = W2 p`` and the head
``v``: ``f(X) = sum_s pi2_s(X) (h_s . v)``. :func:`two_layer_output` attends over each
sequence's distinct tokens weighted by their counts and needs only ``h_s . q`` and ``h_s
. v``; :func:`dense_two_layer_output` is the per-position reference."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, pad_arrays, token_counts_over
from attnbook.models.parameters import init_parameters, one_layer_layout
from attnbook.validation import (
    check_count,
    check_finite,
    check_finite_scores,
    check_instance,
    check_parameter_dict,
    check_sequences,
    check_vocabulary,
)


def check_two_layer_parameters(params: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` unless ``params`` holds ``E`` (V, d), ``W1``, ``W2`` (d, d)
    and ``p``, ``v`` (d,) of one float dtype on one device."""
    check_parameter_dict(
        params,
        lambda d: {"W1": (d, d), "W2": (d, d), "p": (d,), "v": (d,)},
        "two-layer",
    )


def init_two_layer(vocab_size: int, dim: int, **options) -> dict[str, torch.Tensor]:
    """``init_parameters`` with ``E``, ``p``, ``v`` as in the one-layer model and
    ``W1``, ``W2`` of std ``1/sqrt(d)``."""

    def layout(V: int, d: int, scale: float) -> dict:
        one, w = one_layer_layout(V, d, scale), ((d, d), 1 / math.sqrt(d))
        return {"E": one["E"], "W1": w, "W2": w, "p": one["p"], "v": one["v"]}

    return init_parameters(vocab_size, dim, layout=layout, **options)


def effective_query(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``q = W2 p``, the query of layer 2."""
    return params["W2"] @ params["p"]


@dataclass(frozen=True)
class PairBlocks:
    """A corpus in padded blocks of sequences with similar numbers of distinct tokens:
    per block the sequence ``rows``, the token ``ids`` and ``log_counts`` (padding
    ``-inf``)."""

    rows: tuple[torch.Tensor, ...]
    ids: tuple[torch.Tensor, ...]
    log_counts: tuple[torch.Tensor, ...]
    n_sequences: int
    vocab_size: int

    def to(self, device: torch.device | str) -> "PairBlocks":
        parts = (self.rows, self.ids, self.log_counts)
        moved = (tuple(t.to(device) for t in part) for part in parts)
        return PairBlocks(*moved, self.n_sequences, self.vocab_size)


def pair_blocks(counts: TokenCounts, max_slots: int = 1_000_000) -> PairBlocks:
    """``counts`` sorted by number ``m`` of distinct tokens, in blocks of at most
    ``max_slots`` query-key slots ``b m^2``."""
    check_instance(counts, TokenCounts, "counts")
    max_slots = check_count(max_slots, "max_slots")
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    cnts = counts.counts.cpu().numpy()
    m = np.diff(indptr)
    order = np.argsort(m, kind="stable")
    rows, ids, logc = [], [], []
    start = 0
    n = order.size
    while start < n:
        stop = start + 1
        while stop < n and (stop + 1 - start) * int(m[order[stop]]) ** 2 <= max_slots:
            stop += 1
        block = order[start:stop]
        width = int(m[block].max())
        b_ids = np.zeros((block.size, width), dtype=np.int64)
        b_log = np.full((block.size, width), -np.inf)
        for j, r in enumerate(block):
            a, z = indptr[r], indptr[r + 1]
            b_ids[j, : z - a] = toks[a:z]
            b_log[j, : z - a] = np.log(cnts[a:z])
        rows.append(torch.from_numpy(block.astype(np.int64)))
        ids.append(torch.from_numpy(b_ids))
        logc.append(torch.from_numpy(b_log))
        start = stop
    blocks = PairBlocks(
        tuple(rows), tuple(ids), tuple(logc), counts.n_sequences, counts.vocab_size
    )
    return blocks.to(counts.device)


class _ThinProduct(torch.autograd.Function):
    """``pi @ sc`` for a thin ``sc``, whose backward forms ``(grad^T pi)^T``: the fast
    orientation of a batched product."""

    @staticmethod
    def forward(ctx, pi, sc):  # type: ignore[override]
        ctx.save_for_backward(pi, sc)
        return torch.bmm(pi, sc)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        pi, sc = ctx.saved_tensors
        grad_pi = grad_sc = None
        if ctx.needs_input_grad[0]:
            grad_pi = torch.bmm(grad, sc.transpose(1, 2))
        if ctx.needs_input_grad[1]:
            grad_sc = torch.bmm(grad.transpose(1, 2), pi).transpose(1, 2)
        return grad_pi, grad_sc


def two_layer_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` of every sequence (PairBlocks, TokenCounts or token-id lists)."""
    check_two_layer_parameters(params)
    E, W1 = params["E"], params["W1"]
    if isinstance(sequences, PairBlocks):
        blocks = sequences
        check_vocabulary(blocks.vocab_size, E.shape[0], "PairBlocks")
    else:
        blocks = pair_blocks(token_counts_over(sequences, E.shape[0]))
    blocks = blocks.to(E.device)
    q = effective_query(params)
    scalars = E @ torch.stack(
        (q, params["v"]), dim=1
    )  # (V, 2): u_t = E_t.q, b_t = E_t.v
    check_finite_scores(scalars, E=E, p=params["p"], v=params["v"], W2=params["W2"])
    check_finite(W1=W1)
    keys_all = E @ W1  # row t: E_t^T W1, once for the vocabulary
    outs = []
    for ids, logc in zip(blocks.ids, blocks.log_counts):
        logc = logc.to(E.dtype)
        # [s, t] = E_t . W1 E_s + log n_t
        logits1 = torch.baddbmm(logc[:, None, :], E[ids], keys_all[ids].transpose(1, 2))
        pi1 = torch.softmax(logits1, dim=2)  # over keys t
        sc = scalars[ids]  # (b, m, 2)
        h = sc + _ThinProduct.apply(pi1, sc)  # (b, m, 2): h_s.q, h_s.v
        pi2 = torch.softmax(h[..., 0] + logc, dim=1)  # over distinct tokens s
        outs.append((pi2 * h[..., 1]).sum(dim=1))  # padding has pi2 = 0
    order = torch.cat(blocks.rows)
    out = torch.zeros(blocks.n_sequences, dtype=E.dtype, device=E.device)
    return out.index_put((order,), torch.cat(outs))


def dense_two_layer_output(
    params: dict[str, torch.Tensor], sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, one embedding per position (the reference)."""
    check_two_layer_parameters(params)
    check_finite(**params)
    E = params["E"]
    ids, mask = pad_arrays(check_sequences(sequences, E.shape[0]), E.device)
    x = E[ids]  # (n, T, d)
    # layer 1: query position i, key position j, score x_j . W1 x_i
    logits1 = torch.einsum("njd,de,nie->nij", x, params["W1"], x)
    logits1 = logits1.masked_fill(~mask[:, None, :], -torch.inf)
    h = x + torch.softmax(logits1, dim=2) @ x  # residual + attention output, (n, T, d)
    logits2 = (h @ effective_query(params)).masked_fill(~mask, -torch.inf)
    attn = torch.softmax(logits2, dim=1)
    return (attn * (h @ params["v"])).sum(dim=1)
