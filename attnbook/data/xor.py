"""A synthetic task whose label is the XOR of two tokens: tokens ``a``, ``not_a``,
``b``, ``not_b``, then neutral ones; each filler makes four sequences, one per pair of
signal tokens, ``y = +1`` iff exactly one of ``a``, ``b`` is present. Every average
signed frequency is exactly zero."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnbook.engine.counts import TokenCounts
from attnbook.validation import check_generator

A, NOT_A, B, NOT_B = 0, 1, 2, 3


@dataclass(frozen=True)
class XorSpec:
    """``n_neutral`` neutral tokens and sequences of ``length`` tokens (2 signal +
    filler)."""

    n_neutral: int = 50
    length: int = 12

    def __post_init__(self) -> None:
        if self.n_neutral < 1:
            raise ValueError(f"n_neutral must be positive, got {self.n_neutral}")
        if self.length < 3:
            raise ValueError(
                "length must be at least 3 (two signal tokens and a filler), got "
                f"{self.length}"
            )

    @property
    def vocab_size(self) -> int:
        return 4 + self.n_neutral


@dataclass(frozen=True)
class XorData:
    """Sequences, +-1 labels, the quadruple each sequence belongs to, and the spec."""

    sequences: list[np.ndarray]
    labels: np.ndarray
    quadruple: np.ndarray
    spec: XorSpec

    @property
    def counts(self) -> TokenCounts:
        return TokenCounts.from_sequences(self.sequences, self.spec.vocab_size)


def sample_xor(spec: XorSpec, n_quadruples: int, rng: np.random.Generator) -> XorData:
    """The ``4 n_quadruples`` labelled sequences of ``n_quadruples`` random fillers."""
    if n_quadruples < 1:
        raise ValueError(f"n_quadruples must be positive, got {n_quadruples}")
    check_generator(rng)
    fillers = 4 + rng.integers(0, spec.n_neutral, size=(n_quadruples, spec.length - 2))
    sequences, labels, quad = [], [], []
    for q, filler in enumerate(fillers):
        for first in (A, NOT_A):
            for second in (B, NOT_B):
                sequences.append(
                    np.concatenate(([first, second], filler)).astype(np.int64)
                )
                labels.append(1 if (first == A) != (second == B) else -1)
                quad.append(q)
    return XorData(
        sequences, np.asarray(labels, dtype=np.int64), np.asarray(quad), spec
    )
