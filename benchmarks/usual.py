"""The data of the benchmark and the usual padded implementation of the model's
gradient."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from attnbook.data.reviews import Vocabulary, load_reviews
from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss

__all__ = [
    "Prepared",
    "prepare",
    "restrict_vocabulary",
    "UsualBatches",
    "usual_batches",
    "padded_positions",
    "usual_loss_and_grads",
    "engine_loss_and_grads",
    "relative_difference",
]


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Prepared:
    """Training counts and +-1 labels of a review corpus, with the preparation times."""

    counts: TokenCounts
    labels: torch.Tensor
    seconds_load: float
    seconds_vocabulary: float
    seconds_encode: float
    min_df: int


def prepare(name: str = "imdb", min_df: int = 40) -> Prepared:
    """Load the training split of ``name`` and encode it as the real-data chapter does.

    The vocabulary rule and the encoding are those of :mod:`attnbook.data`; the times of
    the three parts (reading, building the vocabulary, encoding) are measured
    separately.
    """
    t0 = time.perf_counter()
    ds = load_reviews(name, "train")
    texts, labels01 = ds["text"], np.asarray(ds["label"])
    t1 = time.perf_counter()
    vocab = Vocabulary.build(texts, min_df)
    t2 = time.perf_counter()
    enc = vocab.encode(texts, drop_empty=True)
    t3 = time.perf_counter()
    y = torch.from_numpy(2.0 * labels01[enc.kept] - 1.0)
    return Prepared(enc.counts, y, t1 - t0, t2 - t1, t3 - t2, int(min_df))


def restrict_vocabulary(
    counts: TokenCounts, labels: torch.Tensor, vocab_size: int
) -> tuple[TokenCounts, torch.Tensor]:
    """Keep only tokens with id below ``vocab_size`` (the most frequent ones when ids
    are assigned by decreasing document frequency, as in
    :class:`attnbook.data.reviews.Vocabulary`); documents left empty are dropped with
    their labels."""
    if not 1 <= vocab_size <= counts.vocab_size:
        raise ValueError(
            f"vocab_size must lie in [1, {counts.vocab_size}], got {vocab_size}"
        )
    keep = (counts.token_ids < vocab_size).cpu().numpy()
    rows = counts.row_ids.cpu().numpy()[keep]
    present = np.zeros(counts.n_sequences, dtype=bool)
    present[rows] = True
    kept = np.flatnonzero(present)
    new_row = np.full(counts.n_sequences, -1, dtype=np.int64)
    new_row[kept] = np.arange(kept.size)
    toks = counts.token_ids.cpu().numpy()[keep]
    reps = counts.counts.cpu().numpy()[keep]
    out = TokenCounts.from_pairs(
        np.repeat(new_row[rows], reps),
        np.repeat(toks, reps),
        int(kept.size),
        vocab_size,
    )
    return out.to(counts.device), labels[torch.from_numpy(kept).to(labels.device)]


# ------------------------------------------------------------- the usual implementation
@dataclass(frozen=True)
class UsualBatches:
    """Padded mini-batches of token ids: ``ids[k]`` (b, T), ``mask[k]`` (b, T),
    ``rows[k]`` (b,)."""

    ids: tuple[torch.Tensor, ...]
    mask: tuple[torch.Tensor, ...]
    rows: tuple[torch.Tensor, ...]
    n_sequences: int

    @property
    def n_positions(self) -> int:
        """Padded positions in all batches (what the usual implementation looks up)."""
        return int(sum(i.numel() for i in self.ids))


def _buckets(lengths: np.ndarray, max_positions: int) -> list[np.ndarray]:
    """Row numbers sorted by length, cut into blocks of at most ``max_positions`` padded
    positions (a longer sequence gets a block of its own)."""
    order = np.argsort(lengths, kind="stable")
    blocks, start = [], 0
    while start < order.size:
        stop = start + 1
        while (
            stop < order.size
            and (stop + 1 - start) * lengths[order[stop]] <= max_positions
        ):
            stop += 1
        blocks.append(order[start:stop])
        start = stop
    return blocks


def padded_positions(counts: TokenCounts, max_positions: int = 16_384) -> int:
    """Padded positions :func:`usual_batches` would create, without building the
    batches."""
    lengths = counts.lengths.cpu().numpy()
    return int(sum(b.size * lengths[b].max() for b in _buckets(lengths, max_positions)))


def usual_batches(
    counts: TokenCounts,
    max_positions: int = 16_384,
    device: torch.device | str | None = None,
) -> UsualBatches:
    """Sequences of ``counts`` (each token repeated by its count) in padded
    mini-batches.

    Sequences are sorted by length (bucketing keeps the padding small, which favours the
    usual implementation) and cut into batches of at most ``max_positions`` padded
    positions.
    """
    if max_positions < 1:
        raise ValueError(f"max_positions must be positive, got {max_positions}")
    device = counts.device if device is None else torch.device(device)
    seqs = counts.to_sequences()
    lengths = np.array([s.size for s in seqs])
    ids, mask, rows = [], [], []
    for block in _buckets(lengths, max_positions):
        width = int(lengths[block].max())
        b_ids = np.zeros((block.size, width), dtype=np.int64)
        for j, r in enumerate(block):
            b_ids[j, : lengths[r]] = seqs[r]
        b_mask = np.arange(width)[None, :] < lengths[block][:, None]
        ids.append(torch.from_numpy(b_ids).to(device))
        mask.append(torch.from_numpy(b_mask).to(device))
        rows.append(torch.from_numpy(block.astype(np.int64)).to(device))
    return UsualBatches(tuple(ids), tuple(mask), tuple(rows), counts.n_sequences)


def usual_loss_and_grads(
    E: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    batches: UsualBatches,
    labels: torch.Tensor,
    *,
    progress: bool = False,
) -> tuple[float, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Full-batch logistic loss and its gradients by the usual padded implementation.

    Each mini-batch looks up one embedding per position, takes a masked softmax over
    positions and backpropagates its share ``sum_batch softplus(-y f) / n`` of the mean
    loss; the gradients of the batches add up to the full-batch gradient.
    """
    leaves = [t.detach().requires_grad_(True) for t in (E, p, v)]
    E_, p_, v_ = leaves
    y = labels.to(E.dtype).to(E.device)
    n = batches.n_sequences
    total = 0.0
    it = zip(batches.ids, batches.mask, batches.rows)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, total=len(batches.ids), desc="usual implementation", leave=False)
    for ids, mask, rows in it:
        emb = torch.nn.functional.embedding(ids, E_)  # (b, T, d)
        logits = (emb @ p_).masked_fill(~mask, -torch.inf)
        attn = torch.softmax(logits, dim=1)
        f = (attn * (emb @ v_)).sum(dim=1)
        loss = torch.nn.functional.softplus(-y[rows] * f).sum() / n
        loss.backward()
        total += float(loss.detach())
    return total, (E_.grad, p_.grad, v_.grad)


def engine_loss_and_grads(
    E: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    counts: TokenCounts,
    labels: torch.Tensor,
) -> tuple[float, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Full-batch logistic loss and its gradients by the count engine."""
    leaves = [t.detach().requires_grad_(True) for t in (E, p, v)]
    E_, p_, v_ = leaves
    loss = logistic_loss(attention_output(E_, p_, v_, counts), labels.to(E.dtype))
    loss.backward()
    return float(loss.detach()), (E_.grad, p_.grad, v_.grad)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` (Frobenius norms, computed in float64)."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))
