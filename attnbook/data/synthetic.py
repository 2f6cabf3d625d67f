"""Synthetic sequences with positive, negative and neutral tokens (ids in that order),
and their K-class analogue. A sequence draws its label, its length (uniform in
``[min_len, max_len]``) and at every position, independently, a token of its own class
with probability ``relevant_rate``, of another class with probability
``opposite_rate``, otherwise a neutral token (each uniform in its block)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnbook.engine.counts import TokenCounts


@dataclass(frozen=True)
class SyntheticSpec:
    """Two classes: the token blocks, the lengths, the rates and the share of
    positive (+1) sequences."""

    n_positive: int = 10
    n_negative: int = 10
    n_neutral: int = 80
    min_len: int = 20
    max_len: int = 20
    relevant_rate: float = 0.2
    opposite_rate: float = 0.0
    positive_fraction: float = 0.5

    def __post_init__(self) -> None:
        blocks = (self.n_positive, self.n_negative, self.n_neutral)
        if min(blocks) < 0:
            raise ValueError(
                "n_positive, n_negative and n_neutral must be non-negative"
            )
        if sum(blocks) == 0:
            raise ValueError("the vocabulary is empty")
        _check_positions(self)
        if self.relevant_rate + self.opposite_rate > 0 and min(blocks[:2]) == 0:
            raise ValueError(
                "relevant positions need n_positive > 0 and n_negative > 0"
            )
        if not 0 < self.positive_fraction < 1:
            raise ValueError("positive_fraction must lie strictly between 0 and 1")

    @property
    def vocab_size(self) -> int:
        return self.n_positive + self.n_negative + self.n_neutral

    @property
    def token_class(self) -> np.ndarray:
        """``(V,)`` +1 for positive, -1 for negative and 0 for neutral tokens."""
        blocks = (self.n_positive, self.n_negative, self.n_neutral)
        return np.repeat([1, -1, 0], blocks).astype(np.int64)


@dataclass(frozen=True)
class MulticlassSpec:
    """K classes: ``n_classes`` blocks of ``n_per_class`` tokens, then ``n_neutral``
    neutral ones; classes uniform, an other-class token from a uniform other block."""

    n_classes: int = 4
    n_per_class: int = 10
    n_neutral: int = 60
    min_len: int = 20
    max_len: int = 20
    relevant_rate: float = 0.2
    opposite_rate: float = 0.05

    def __post_init__(self) -> None:
        if self.n_classes < 2:
            raise ValueError("n_classes must be at least 2")
        if self.n_per_class < 1 or self.n_neutral < 0:
            raise ValueError("n_per_class must be positive and n_neutral non-negative")
        _check_positions(self)

    @property
    def vocab_size(self) -> int:
        return self.n_classes * self.n_per_class + self.n_neutral

    @property
    def token_class(self) -> np.ndarray:
        """``(V,)`` the class of every class token, ``-1`` for neutral tokens."""
        classes = np.repeat(np.arange(self.n_classes), self.n_per_class)
        return np.concatenate([classes, np.full(self.n_neutral, -1)]).astype(np.int64)


def _check_positions(spec: "SyntheticSpec | MulticlassSpec") -> None:
    if not 1 <= spec.min_len <= spec.max_len:
        raise ValueError("lengths must satisfy 1 <= min_len <= max_len")
    rates = (spec.relevant_rate, spec.opposite_rate)
    if min(rates) < 0 or sum(rates) > 1:
        raise ValueError(
            "rates must be non-negative with relevant_rate + opposite_rate <= 1"
        )
    if sum(rates) < 1 and spec.n_neutral == 0:
        raise ValueError("neutral positions need n_neutral > 0")


@dataclass(frozen=True)
class SyntheticData:
    """Sampled sequences, their labels (+-1, or class ids) and their spec."""

    sequences: list[np.ndarray]
    labels: np.ndarray
    spec: "SyntheticSpec | MulticlassSpec"

    @property
    def counts(self) -> TokenCounts:
        """The sequences as token counts over the spec's vocabulary."""
        return TokenCounts.from_sequences(self.sequences, self.spec.vocab_size)


def _positions(
    spec: "SyntheticSpec | MulticlassSpec", n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every sequence's length, and per slot whether it holds a token of its own class
    (``own``) or of another class (``other``)."""
    lengths = rng.integers(spec.min_len, spec.max_len + 1, size=n)
    u = rng.random((n, spec.max_len))
    own = u < spec.relevant_rate
    other = (~own) & (u < spec.relevant_rate + spec.opposite_rate)
    return lengths, own, other


def _cut(tokens, lengths, labels, spec) -> SyntheticData:
    """Row ``i`` of ``tokens`` cut to its length, as one sequence each."""
    seqs = [tokens[i, : lengths[i]].copy() for i in range(len(lengths))]
    return SyntheticData(seqs, labels, spec)


def sample_sequences(
    spec: SyntheticSpec, n: int, rng: np.random.Generator
) -> SyntheticData:
    """Draw ``n`` labelled sequences (+-1) from ``spec`` with ``rng``."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    labels = np.where(rng.random(n) < spec.positive_fraction, 1, -1).astype(np.int64)
    lengths, own, other = _positions(spec, n, rng)
    pos_tok = rng.integers(0, max(spec.n_positive, 1), size=own.shape)
    neg_tok = spec.n_positive + rng.integers(0, max(spec.n_negative, 1), size=own.shape)
    neu0 = spec.n_positive + spec.n_negative
    neu_tok = neu0 + rng.integers(0, max(spec.n_neutral, 1), size=own.shape)
    positive_row = (labels == 1)[:, None]
    own_tok = np.where(positive_row, pos_tok, neg_tok)
    other_tok = np.where(positive_row, neg_tok, pos_tok)
    tokens = np.where(own, own_tok, np.where(other, other_tok, neu_tok))
    return _cut(tokens, lengths, labels, spec)


def sample_multiclass_sequences(
    spec: MulticlassSpec, n: int, rng: np.random.Generator
) -> SyntheticData:
    """Draw ``n`` labelled sequences (class ids ``0 .. K-1``) from ``spec``."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    K, m = spec.n_classes, spec.n_per_class
    labels = rng.integers(0, K, size=n).astype(np.int64)
    lengths, own, other = _positions(spec, n, rng)
    shift = rng.integers(1, K, size=own.shape)  # another class, uniform among K - 1
    other_class = (labels[:, None] + shift) % K
    in_block = rng.integers(0, m, size=own.shape)
    neutral = K * m + rng.integers(0, max(spec.n_neutral, 1), size=own.shape)
    own_tok = labels[:, None] * m + in_block
    tokens = np.where(
        own, own_tok, np.where(other, other_class * m + in_block, neutral)
    )
    return _cut(tokens, lengths, labels, spec)
