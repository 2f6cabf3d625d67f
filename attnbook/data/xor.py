"""A synthetic task whose label is the XOR of two tokens, so every average signed
frequency is zero.

Vocabulary (ids in this order): ``a``, ``not_a``, ``b``, ``not_b``, then ``n_neutral``
neutral tokens. Data come in *quadruples*: one filler of ``length - 2`` neutral tokens
(i.i.d. uniform) is drawn, and four sequences are made from it by adding one token of
the pair ``{a, not_a}`` and one of ``{b, not_b}`` in all four ways. The label is

    y = +1  if exactly one of a, b is present  (a XOR b),     y = -1 otherwise.

Within a quadruple, ``a`` occurs once in a positive sequence (with ``not_b``) and once
in a negative one (with ``b``), both of the same length; the same holds for ``not_a``,
``b``, ``not_b``, and every neutral token occurs equally often in two positive and two
negative sequences of the same length. Hence every average signed frequency ``alpha_s``
is *exactly* zero (:func:`attnbook.theory.frequency.average_signed_frequency` returns
zeros up to rounding), and so is every first-order statistic of the form ``sum_i y_i
phi(n_s(X_i), T_i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnbook.engine.counts import TokenCounts
from attnbook.validation import check_generator

__all__ = ["XorSpec", "XorData", "sample_xor", "A", "NOT_A", "B", "NOT_B"]

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

    @property
    def token_names(self) -> list[str]:
        return ["a", "not a", "b", "not b"] + [
            f"neutral {i}" for i in range(self.n_neutral)
        ]


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
    """Draw ``n_quadruples`` fillers and return the ``4 n_quadruples`` labelled
    sequences."""
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
