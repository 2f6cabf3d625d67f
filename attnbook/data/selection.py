"""Data for the implicit-bias theorem: Assumption 1 exactly, and controlled violations
of it.

The vocabulary is split into blocks, in this order of ids: ``n_positive`` *completely
positive* tokens (they occur only in positive sequences), ``n_negative`` *completely
negative* tokens, ``n_irrelevant`` irrelevant tokens and, for
:func:`partially_relevant_data`, ``n_partial``
*partially relevant* tokens (they occur in both classes, more often in positive ones).

All generators use a **paired construction**: sequences come in pairs ``(X_{2k},
X_{2k+1})`` with labels ``(+1, -1)`` that share the same irrelevant tokens (the *body*)
and the same length; only their relevant tokens differ. Every irrelevant token then has
the same count and the same share ``n_s / T`` in the positive and the negative member of
each pair, so its average signed frequency is exactly zero, not only in expectation.

- :func:`assumption_one_data`: one relevant token per sequence (Assumption 1 holds
  exactly);
- :func:`two_relevant_data`: two distinct relevant tokens of the sequence's class per
  sequence, drawn with unequal popularity (so their frequencies, and their embeddings
  after one step, differ);
- :func:`partially_relevant_data`: Assumption 1 plus partially relevant tokens that may
  replace one irrelevant position, with probability ``q_positive`` in positive and
  ``q_negative`` in negative sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts

__all__ = [
    "SelectionData",
    "assumption_one_data",
    "two_relevant_data",
    "partially_relevant_data",
]


@dataclass(frozen=True)
class SelectionData:
    """A labelled corpus with the relevant tokens of every sequence recorded.

    Attributes
    ----------
    counts:
        the sequences as :class:`TokenCounts`.
    labels:
        ``(n,)`` int array of +-1 (alternating ``+1, -1`` over the pairs).
    relevant:
        per sequence, the sorted array of its completely relevant tokens (of its own
        class).
    token_class:
        ``(V,)`` +1 completely positive, -1 completely negative, 0 irrelevant, 2
        partially relevant.
    """

    counts: TokenCounts
    labels: np.ndarray
    relevant: list[np.ndarray]
    token_class: np.ndarray

    @property
    def n(self) -> int:
        return self.counts.n_sequences

    @property
    def vocab_size(self) -> int:
        return self.counts.vocab_size

    @property
    def important(self) -> np.ndarray:
        """``(n,)`` the relevant token of each sequence (only when there is exactly
        one)."""
        if any(r.size != 1 for r in self.relevant):
            raise ValueError(
                "some sequences hold several relevant tokens: use .relevant"
            )
        return np.array([int(r[0]) for r in self.relevant], dtype=np.int64)

    def labels_tensor(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.as_tensor(self.labels, dtype=dtype)


def _check_sizes(
    n_pairs: int,
    n_positive: int,
    n_negative: int,
    n_irrelevant: int,
    length: int,
    n_relevant: int,
) -> None:
    if n_pairs < 1:
        raise ValueError(f"n_pairs must be positive, got {n_pairs}")
    if min(n_positive, n_negative) < n_relevant:
        raise ValueError(
            f"each class needs at least {n_relevant} relevant token(s), got "
            f"n_positive={n_positive}, n_negative={n_negative}"
        )
    if n_irrelevant < 1:
        raise ValueError("n_irrelevant must be positive")
    if length < n_relevant + 1:
        raise ValueError(f"length must be at least {n_relevant + 1}, got {length}")


def _popularity(k: int, zipf: float) -> np.ndarray:
    w = 1.0 / np.arange(1, k + 1) ** zipf
    return w / w.sum()


def _paired(
    rng: np.random.Generator,
    n_pairs: int,
    n_positive: int,
    n_negative: int,
    n_irrelevant: int,
    length: int,
    n_relevant: int,
    zipf: float,
    balanced: bool = False,
) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray]]:
    """Shared core: paired bodies plus ``n_relevant`` distinct own-class tokens per
    sequence.

    ``balanced`` (one relevant token only): pair ``k`` uses relevant token ``k mod
    n_class`` of a random order of each block, so every relevant token occurs in the
    same number of sequences (up to one) and all relevant tokens of a class have
    (nearly) equal frequency.
    """
    pos_ids = np.arange(n_positive)
    neg_ids = n_positive + np.arange(n_negative)
    irr0 = n_positive + n_negative
    w_pos, w_neg = _popularity(n_positive, zipf), _popularity(n_negative, zipf)
    seqs, labels, relevant = [], [], []
    order_pos, order_neg = rng.permutation(pos_ids), rng.permutation(neg_ids)
    for k in range(n_pairs):
        body = irr0 + rng.integers(0, n_irrelevant, size=length - n_relevant)
        for ids, w, y, order in (
            (pos_ids, w_pos, 1, order_pos),
            (neg_ids, w_neg, -1, order_neg),
        ):
            if balanced:
                rel = order[[k % order.size]]
            else:
                rel = np.sort(rng.choice(ids, size=n_relevant, replace=False, p=w))
            seqs.append(np.concatenate([body, rel]))
            labels.append(y)
            relevant.append(rel.astype(np.int64))
    return seqs, np.array(labels, dtype=np.int64), relevant


def _selection_data(
    seqs: list[np.ndarray],
    labels: np.ndarray,
    relevant: np.ndarray,
    n_positive: int,
    n_negative: int,
    n_irrelevant: int,
    n_partial: int = 0,
) -> SelectionData:
    """The sequences as counts over the blocks positive, negative, irrelevant, partial
    (in this order of ids), with the class of every token (1, -1, 0 and 2)."""
    token_class = np.concatenate(
        [
            np.full(n_positive, 1),
            np.full(n_negative, -1),
            np.zeros(n_irrelevant, dtype=np.int64),
            np.full(n_partial, 2),
        ]
    ).astype(np.int64)
    counts = TokenCounts.from_sequences(seqs, token_class.size)
    return SelectionData(counts, labels, relevant, token_class)


def assumption_one_data(
    n_pairs: int,
    *,
    n_positive: int = 5,
    n_negative: int = 5,
    n_irrelevant: int = 90,
    length: int = 8,
    zipf: float = 0.0,
    balanced: bool = True,
    rng: np.random.Generator,
) -> SelectionData:
    """``2 n_pairs`` sequences of ``length`` tokens satisfying Assumption 1 exactly.

    Each sequence holds ``length - 1`` irrelevant tokens (uniform, shared with its pair
    partner) and one relevant token of its class. With ``balanced`` (default) the
    relevant tokens are used in turn, so all of a class occur equally often (up to one);
    otherwise they are drawn with probabilities proportional to ``1 / rank^zipf``
    (``zipf = 0``: uniform).
    """
    _check_sizes(n_pairs, n_positive, n_negative, n_irrelevant, length, 1)
    seqs, labels, relevant = _paired(
        rng, n_pairs, n_positive, n_negative, n_irrelevant, length, 1, zipf, balanced
    )
    return _selection_data(seqs, labels, relevant, n_positive, n_negative, n_irrelevant)


def two_relevant_data(
    n_pairs: int,
    *,
    n_positive: int = 6,
    n_negative: int = 6,
    n_irrelevant: int = 90,
    length: int = 8,
    zipf: float = 1.0,
    rng: np.random.Generator,
) -> SelectionData:
    """Like :func:`assumption_one_data` but with two distinct relevant tokens per
    sequence.

    The two are drawn without replacement with probabilities proportional to ``1 /
    rank^zipf``, so popular relevant tokens have a larger average signed frequency than
    rare ones. Irrelevant tokens still have average signed frequency exactly zero.
    """
    _check_sizes(n_pairs, n_positive, n_negative, n_irrelevant, length, 2)
    seqs, labels, relevant = _paired(
        rng, n_pairs, n_positive, n_negative, n_irrelevant, length, 2, zipf
    )
    return _selection_data(seqs, labels, relevant, n_positive, n_negative, n_irrelevant)


def partially_relevant_data(
    n_pairs: int,
    *,
    n_positive: int = 5,
    n_negative: int = 5,
    n_irrelevant: int = 90,
    n_partial: int = 1,
    length: int = 8,
    q_positive: float = 0.8,
    q_negative: float = 0.2,
    rng: np.random.Generator,
) -> SelectionData:
    """Assumption 1 data plus ``n_partial`` partially relevant tokens (ids after the
    irrelevant block).

    In each pair, the last body position holds an irrelevant token shared by both
    members; it is replaced by a partially relevant token (uniform in its block) with
    probability ``q_positive`` in the positive member and ``q_negative`` in the negative
    member, independently. With ``q_positive > q_negative`` these tokens have a positive
    average signed frequency although they occur in both classes. The replaced
    irrelevant tokens lose their exact pairing, so Assumption 1 is violated in two
    controlled ways.
    """
    _check_sizes(n_pairs, n_positive, n_negative, n_irrelevant, length, 1)
    if n_partial < 1:
        raise ValueError("n_partial must be positive")
    if not (0 <= q_negative <= 1 and 0 <= q_positive <= 1):
        raise ValueError("q_positive and q_negative must lie in [0, 1]")
    seqs, labels, relevant = _paired(
        rng, n_pairs, n_positive, n_negative, n_irrelevant, length, 1, 0.0
    )
    part0 = n_positive + n_negative + n_irrelevant
    for k, seq in enumerate(seqs):
        q = q_positive if labels[k] == 1 else q_negative
        if rng.random() < q:
            seq = seq.copy()
            seq[length - 2] = part0 + rng.integers(0, n_partial)
            seqs[k] = seq
    return _selection_data(
        seqs, labels, relevant, n_positive, n_negative, n_irrelevant, n_partial
    )
