"""A selection of tokens per sequence (the sets ``S_i``): its max-margin constraints
and the score gaps of a direction."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts

__all__ = [
    "selection_sets",
    "selection_constraints",
    "selection_gaps",
]


def selection_sets(selected: object, n: int) -> list[frozenset[int]]:
    """``selected`` (one token id or a collection of ids per sequence) as ``n`` sets."""
    if isinstance(selected, torch.Tensor):
        selected = selected.detach().cpu().numpy()
    if isinstance(selected, (str, bytes)) or not isinstance(selected, Iterable):
        raise ValueError(
            "selected must hold one token id or a collection of ids per sequence"
        )
    items = list(selected)
    if len(items) != n:
        raise ValueError(
            f"selected has {len(items)} entries for {n} sequences: lengths must match"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            item = item.detach().cpu().numpy()
        elif isinstance(item, (set, frozenset)):
            item = sorted(item)
        ids = np.atleast_1d(np.asarray(item))
        if ids.size == 0:
            raise ValueError(
                f"selected[{i}] is empty: every sequence must select a token"
            )
        if ids.dtype == object or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(
                f"selected[{i}] must be integer token ids, got dtype {ids.dtype}"
            )
        out.append(frozenset(int(s) for s in ids.ravel()))
    return out


def selection_constraints(
    counts: TokenCounts, selected: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct max-margin constraints ``(winners, losers, rows)``: a selected token
    that must beat a non-selected token of a common sequence, and the first such
    sequence."""
    n = counts.n_sequences
    sets = selection_sets(selected, n)
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    pairs: dict[tuple[int, int], int] = {}
    for i in range(n):
        present = toks[indptr[i] : indptr[i + 1]]
        missing = sets[i] - set(present.tolist())
        if missing:
            raise ValueError(
                f"selected[{i}] holds token(s) {sorted(missing)} that do not occur in "
                f"sequence {i}"
            )
        losers = [int(s) for s in present if int(s) not in sets[i]]
        for a in sorted(sets[i]):
            for s in losers:
                pairs.setdefault((a, s), i)
    if not pairs:
        raise ValueError(
            "no constraint: every sequence selects all of its tokens, so there is "
            "nothing to separate"
        )
    keys = np.array(list(pairs.keys()), dtype=np.int64)
    return (
        keys[:, 0],
        keys[:, 1],
        np.fromiter(pairs.values(), dtype=np.int64, count=len(pairs)),
    )


def selection_gaps(
    scores: np.ndarray,
    counts: TokenCounts,
    sets: list[frozenset[int]],
    signs: np.ndarray | None = None,
) -> np.ndarray:
    """Per sequence ``i``, ``min_{a in S_i} c_i scores_a - max_{s in X_i, s not in S_i}
    c_i scores_s`` with ``c_i = signs[i]`` (1 when ``signs`` is None); ``+inf`` when
    ``X_i`` holds no other token."""
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    out = np.full(counts.n_sequences, np.inf)
    for i in range(counts.n_sequences):
        present = toks[indptr[i] : indptr[i + 1]]
        sel = np.array(sorted(sets[i]), dtype=np.int64)
        rest = np.array([s for s in present if int(s) not in sets[i]], dtype=np.int64)
        if rest.size:
            c = 1.0 if signs is None else signs[i]
            out[i] = (c * scores[sel]).min() - (c * scores[rest]).max()
    return out
