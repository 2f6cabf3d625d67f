"""Data for the implicit-bias theorem: Assumption 1 exactly, and controlled violations.

Token ids in blocks: ``n_positive`` completely positive, ``n_negative`` completely
negative, ``n_irrelevant`` irrelevant, then ``n_partial`` partially relevant. Sequences
come in pairs (+1, -1) sharing their irrelevant tokens and length, so every irrelevant
token has average signed frequency exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnbook.engine.counts import TokenCounts


@dataclass(frozen=True)
class SelectionData:
    """Sequences with +-1 ``labels`` (alternating over the pairs), each one's sorted
    ``relevant`` tokens of its class, and ``token_class`` per id (+1, -1, 0 irrelevant,
    2 partially relevant)."""

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
        """The relevant token of each sequence (when there is exactly one)."""
        if any(r.size != 1 for r in self.relevant):
            raise ValueError(
                "some sequences hold several relevant tokens: use .relevant"
            )
        return np.array([int(r[0]) for r in self.relevant], dtype=np.int64)


def _check_sizes(
    n_pairs: int,
    n_positive: int,
    n_negative: int,
    n_irrelevant: int,
    length: int,
    n_relevant: int,
) -> None:
    if n_pairs < 1 or n_irrelevant < 1:
        raise ValueError("n_pairs and n_irrelevant must be positive")
    if min(n_positive, n_negative) < n_relevant:
        raise ValueError(
            f"each class needs at least {n_relevant} relevant token(s), got "
            f"n_positive={n_positive}, n_negative={n_negative}"
        )
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
    """Paired bodies plus ``n_relevant`` distinct own-class tokens per sequence, drawn
    by popularity ``1 / rank^zipf``; ``balanced``: pair ``k`` uses token ``k mod
    n_class`` of a random order of each block (equal frequencies, up to one)."""
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
    """The sequences as counts, with the class of every token (1, -1, 0 and 2)."""
    blocks = (n_positive, n_negative, n_irrelevant, n_partial)
    token_class = np.repeat([1, -1, 0, 2], blocks).astype(np.int64)
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
    """``2 n_pairs`` sequences of ``length`` tokens satisfying Assumption 1 exactly:
    ``length - 1`` uniform irrelevant tokens shared with the pair partner and one
    relevant token of its class (in turn with ``balanced``, else by popularity)."""
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
    """:func:`assumption_one_data` with two distinct relevant tokens per sequence,
    drawn by popularity ``1 / rank^zipf`` (popular ones get a larger frequency)."""
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
    """Assumption 1 data where the last body position of each member becomes a
    partially relevant token (uniform in its block) with probability ``q_positive``
    (positive member) or ``q_negative`` (negative), independently."""
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
