"""The real-data picture's synthetic stand-in: sequences of length ``T`` whose every
position is relevant (of the sequence's class) with probability ``1 / T``, as drawn or
conditioned on Assumption 1 (exactly one relevant token), as a corpus of counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnbook.data.synthetic import SyntheticData, SyntheticSpec, sample_sequences
from attnbook.engine.counts import TokenCounts


@dataclass(frozen=True)
class CountsCorpus:
    """Two splits of token counts with +-1 labels, in place of a review corpus."""

    train: TokenCounts
    test: TokenCounts
    train_labels: np.ndarray
    test_labels: np.ndarray

    @property
    def vocab_size(self) -> int:
        return self.train.vocab_size

    def labels(self, split: str, *, dtype=torch.float32, device=None) -> torch.Tensor:
        """The +-1 labels of ``split`` (``"train"`` or ``"test"``) as a tensor."""
        arr = np.asarray(getattr(self, f"{split}_labels"))
        return torch.from_numpy(arr).to(dtype=dtype, device=device)


def one_relevant_spec(n_relevant: int, n_neutral: int, length: int) -> SyntheticSpec:
    """``n_relevant`` completely positive and as many completely negative tokens,
    ``n_neutral`` neutral ones, sequences of ``length`` tokens in which each position is
    relevant (of the sequence's class) with probability ``1 / length``."""
    if length < 2:
        raise ValueError(f"length must be at least 2, got {length}")
    return SyntheticSpec(
        n_positive=n_relevant,
        n_negative=n_relevant,
        n_neutral=n_neutral,
        min_len=length,
        max_len=length,
        relevant_rate=1.0 / length,
        opposite_rate=0.0,
    )


def _draw(spec: SyntheticSpec, n: int, rng: np.random.Generator, exactly_one: bool):
    if not exactly_one:
        return sample_sequences(spec, n, rng)
    seqs, labels = [], []
    while len(seqs) < n:
        batch = sample_sequences(spec, 2 * n, rng)
        keep = np.flatnonzero(relevant_per_sequence(batch) == 1)
        seqs += [batch.sequences[i] for i in keep]
        labels += batch.labels[keep].tolist()
    return SyntheticData(seqs[:n], np.asarray(labels[:n], dtype=np.int64), spec)


def synthetic_corpus(
    spec: SyntheticSpec,
    n_train: int,
    n_test: int,
    rng: np.random.Generator,
    *,
    exactly_one: bool = False,
) -> tuple[CountsCorpus, SyntheticData]:
    """``n_train`` training and ``n_test`` test sequences of ``spec`` drawn from
    ``rng`` (``exactly_one``: only those with one relevant token, drawing until there
    are enough), as a corpus, and the training sample."""
    if n_train < 2 or n_test < 1 or (exactly_one and spec.relevant_rate == 0):
        raise ValueError("need n_train >= 2, n_test >= 1, and relevant tokens")
    train = _draw(spec, n_train, rng, exactly_one)
    test = _draw(spec, n_test, rng, exactly_one)
    corpus = CountsCorpus(train.counts, test.counts, train.labels, test.labels)
    return corpus, train


def relevant_per_sequence(data: SyntheticData) -> np.ndarray:
    """The number of relevant token occurrences in each sequence of ``data``."""
    relevant = data.spec.token_class != 0
    return np.array([int(relevant[s].sum()) for s in data.sequences], dtype=np.int64)
