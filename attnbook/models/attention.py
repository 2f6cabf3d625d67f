"""The one-layer attention model with a ``<cls>`` query and a linear head,

    f(X) = sum_i softmax_i(p . E_{x_i}) (E_{x_i} . v),

twice: :func:`dense_attention_output` (pad, look up, mask, softmax: the tests'
reference) and :func:`count_attention_output` (the count engine: ``f`` depends on a
sequence only through its token counts). :func:`attention_output` is the public entry
point; it checks its arguments once. Softmaxes are shifted by each sequence's maximum.
"""

from __future__ import annotations

import torch

from attnbook.engine.counts import (
    TokenCounts,
    check_counts,
    pad_arrays,
    token_counts_over,
)
from attnbook.models.count_engine import (
    count_heads_output,
    row_terms,
)
from attnbook.validation import (
    check_finite,
    check_finite_scores,
    check_parameters,
    check_sequences,
)

__all__ = [
    "attention_output",
    "attention_weights",
    "token_attention",
    "count_attention_output",
    "count_heads_output",
    "dense_attention_output",
]


def count_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``f(X_i)`` for every row of ``counts`` (over exactly ``V`` tokens) by the count
    engine, its arguments checked."""
    check_parameters(E, p, v)
    counts = check_counts(counts, E.shape[0]).to(E.device)
    return count_heads_output(E, p, v[:, None], counts, check_input=False)[:, 0]


def dense_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, per-position embedding lookup and a masked softmax
    (reference)."""
    check_parameters(E, p, v)
    check_finite(E=E, p=p, v=v)
    ids, mask = pad_arrays(check_sequences(sequences, E.shape[0]), E.device)
    emb = E[ids]  # (n, T, d)
    logits = (emb @ p).masked_fill(~mask, -torch.inf)
    attn = torch.softmax(logits, dim=1)
    return (attn * (emb @ v)).sum(dim=1)


def attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """The model output ``f(X_i)`` of every sequence (non-empty token-id arrays in
    ``[0, V)``, or a :class:`~attnbook.engine.counts.TokenCounts` over ``V`` tokens),
    differentiable in ``E``, ``p`` and ``v``. Raises ``ValueError`` on malformed input.
    """
    check_parameters(E, p, v)
    counts = token_counts_over(sequences, E.shape[0]).to(E.device)
    return count_heads_output(E, p, v[:, None], counts, check_input=False)[:, 0]


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


def token_attention(
    E: torch.Tensor, p: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``n_s(X_i) exp(p.E_s) / sum_t n_t(X_i) exp(p.E_t)``: the attention mass on
    every stored (sequence ``i``, token ``s``) entry of ``counts``."""
    check_parameters(E, p, p)
    counts = token_counts_over(counts, E.shape[0]).to(E.device)
    return row_terms(E, p, torch.zeros_like(p)[:, None], counts, check_input=False).pi
