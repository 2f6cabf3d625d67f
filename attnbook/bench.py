"""Benchmark of the count engine against the usual padded implementation.

Run ``python -m attnbook.bench`` (full IMDB train split, ``d = 2048``; ``--help`` for options).
In one run it

1. prepares the training split with the vocabulary and encoding rules of :mod:`attnbook.data`
   (those :func:`attnbook.reviews.prepare_reviews` applies for the real-data chapter; done here
   step by step so that building the vocabulary and encoding are timed separately);
2. computes the full-batch loss and its gradient with respect to ``E``, ``p`` and ``v`` by the
   *usual implementation* (:func:`usual_loss_and_grads`: padded sequences, one embedding lookup
   per position, masked softmax over positions, length-bucketed mini-batches whose gradients
   are summed) and by the count engine (:func:`engine_loss_and_grads`), checks that they agree,
   and times both;
3. times a full training step of the engine (forward, backward and an Adam step);
4. measures the memory bandwidth of the machine (a large array copy, :func:`copy_bandwidth`)
   and compares the engine with the time it takes to move the bytes a gradient evaluation must
   move at the very least (:func:`minimum_bytes`: the counts once, ``E`` once, its gradient once);
   times each pass of the engine on its own (:func:`engine_passes`) and the gradient with the
   compiled kernels of :mod:`attnbook.kernels` and with their torch twins
   (:func:`backend_times`);
5. times the two-layer model (:mod:`attnbook.two_layer`) against its padded reference on a
   subset;
6. shows how the engine's time grows with the number of documents, ``d`` and the vocabulary
   size (:func:`scaling_table`).

The last line printed is ``speedup=<ratio> bound_fraction=<fraction>``. Every time is the
minimum over several repetitions: other programs on the machine only ever add time.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from . import kernels
from .counts import TokenCounts
from .losses import logistic_loss
from .model import count_attention_output
from .train import _OPTIMIZERS

__all__ = [
    "Prepared",
    "prepare",
    "restrict_vocabulary",
    "UsualBatches",
    "usual_batches",
    "padded_positions",
    "usual_loss_and_grads",
    "engine_loss_and_grads",
    "compare_implementations",
    "two_layer_comparison",
    "relative_difference",
    "time_min",
    "copy_bandwidth",
    "minimum_bytes",
    "engine_step_time",
    "engine_passes",
    "backend_times",
    "scaling_table",
    "fit_linear_time",
    "main",
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

    The vocabulary rule and the encoding are those of :mod:`attnbook.data`; the times of the
    three parts (reading, building the vocabulary, encoding) are measured separately.
    """
    from .data import Vocabulary, load_reviews

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
    """Keep only tokens with id below ``vocab_size`` (the most frequent ones when ids are
    assigned by decreasing document frequency, as in :class:`attnbook.data.Vocabulary`);
    documents left empty are dropped with their labels."""
    if not 1 <= vocab_size <= counts.vocab_size:
        raise ValueError(f"vocab_size must lie in [1, {counts.vocab_size}], got {vocab_size}")
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
        np.repeat(new_row[rows], reps), np.repeat(toks, reps), int(kept.size), vocab_size
    )
    return out.to(counts.device), labels[torch.from_numpy(kept).to(labels.device)]


# --------------------------------------------------------------------------- the usual implementation
@dataclass(frozen=True)
class UsualBatches:
    """Padded mini-batches of token ids: ``ids[k]`` (b, T), ``mask[k]`` (b, T), ``rows[k]`` (b,)."""

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
        while stop < order.size and (stop + 1 - start) * lengths[order[stop]] <= max_positions:
            stop += 1
        blocks.append(order[start:stop])
        start = stop
    return blocks


def padded_positions(counts: TokenCounts, max_positions: int = 16_384) -> int:
    """Padded positions :func:`usual_batches` would create, without building the batches."""
    lengths = counts.lengths.cpu().numpy()
    return int(sum(b.size * lengths[b].max() for b in _buckets(lengths, max_positions)))


def usual_batches(
    counts: TokenCounts, max_positions: int = 16_384, device: torch.device | str | None = None
) -> UsualBatches:
    """Sequences of ``counts`` (each token repeated by its count) in padded mini-batches.

    Sequences are sorted by length (bucketing keeps the padding small, which favours the usual
    implementation) and cut into batches of at most ``max_positions`` padded positions.
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

    Each mini-batch looks up one embedding per position, takes a masked softmax over positions
    and backpropagates its share ``sum_batch softplus(-y f) / n`` of the mean loss; the
    gradients of the batches add up to the full-batch gradient.
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
    loss = logistic_loss(count_attention_output(E_, p_, v_, counts), labels.to(E.dtype))
    loss.backward()
    return float(loss.detach()), (E_.grad, p_.grad, v_.grad)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` (Frobenius norms, computed in float64)."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


# --------------------------------------------------------------------------- timing and the bound
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_min(fn: Callable[[], object], repeats: int = 5, device: torch.device | None = None,
             warmup: int = 1, before: Callable[[], object] | None = None) -> float:
    """The minimum wall time of ``fn()`` in seconds over ``repeats`` calls (after ``warmup``);
    ``before()``, when given, runs untimed before every call."""
    if repeats < 1:
        raise ValueError(f"repeats must be positive, got {repeats}")
    device = torch.device("cpu") if device is None else device
    for _ in range(warmup):
        fn()
    _sync(device)
    best = math.inf
    for _ in range(repeats):
        if before is not None:
            before()
            _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def copy_bandwidth(device: torch.device | str | None = None, nbytes: int = 2**28,
                   repeats: int = 10) -> float:
    """Memory bandwidth in bytes per second: copying ``nbytes`` reads and writes ``2 nbytes``.

    The buffers are allocated and touched first, so the copy measures memory traffic only.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)
    seconds = time_min(lambda: dst.copy_(src), repeats, device)
    return 2 * src.numel() * 4 / seconds


def minimum_bytes(counts: TokenCounts, dim: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes a full-batch gradient evaluation must move at the very least.

    The counts are read once in the compact form the engine uses (32-bit row pointers and token
    ids, one float per count), ``E`` is read once and its gradient written once. The real
    engine reads ``E`` twice (scores, then ``E^T`` times the token gradients) and the counts
    twice (forward and backward), so this bound is not reachable by it; it is the floor.
    """
    item = torch.finfo(dtype).bits // 8
    counts_bytes = 4 * (counts.n_sequences + 1) + (4 + item) * counts.nnz
    return counts_bytes + 2 * counts.vocab_size * dim * item


def _init(V: int, d: int, seed: int, dtype: torch.dtype, device: torch.device):
    from .train import init_parameters

    gen = torch.Generator().manual_seed(seed)
    return init_parameters(V, d, generator=gen, dtype=dtype, device=device)


def compare_implementations(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    dim: int,
    max_positions: int = 16_384,
    usual_repeats: int = 2,
    repeats: int = 5,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
) -> dict[str, object]:
    """Loss, gradients and times of the usual implementation and of the count engine.

    Both evaluate the full-batch loss and its gradient at the same initialization
    (:func:`attnbook.train.init_parameters`, ``seed``). The first pass of the usual
    implementation gives its gradients and its first time; further passes (``usual_repeats``
    in all) only time it. Returns the losses, their relative difference ``loss_rel``, the
    relative gradient differences ``grad_rel`` (E, p, v), the number of mini-batches and padded
    positions, and the minimum times ``usual_s``, ``engine_s`` (forward+backward) and
    ``step_s`` (forward+backward+Adam).
    """
    device = counts.device
    y = labels.to(device)
    params = _init(counts.vocab_size, dim, seed, dtype, device)
    E, p, v = params["E"], params["p"], params["v"]
    # The engine is timed first, before the usual implementation allocates and frees gigabytes
    # of padded temporaries (timed right after them, it ran up to twice as slow).
    init = {k: t.detach().clone() for k, t in params.items()}
    t_grad, t_step = engine_step_time(params, counts, y, repeats=repeats)
    with torch.no_grad():
        for k, t in params.items():
            t.copy_(init[k])  # the Adam steps moved them: back to the initialization
    del init
    batches = usual_batches(counts, max_positions, device)
    t0 = time.perf_counter()
    l_u, g_u = usual_loss_and_grads(E, p, v, batches, y, progress=progress)
    _sync(device)
    t_usual = time.perf_counter() - t0
    l_e, g_e = engine_loss_and_grads(E, p, v, counts, y)
    grad_rel = [relative_difference(a, b) for a, b in zip(g_e, g_u)]
    del g_u, g_e
    if usual_repeats > 1:
        t_usual = min(t_usual, time_min(
            lambda b=batches: usual_loss_and_grads(E, p, v, b, y, progress=progress),
            usual_repeats - 1, device, warmup=0))
    out = dict(loss_usual=l_u, loss_engine=l_e, loss_rel=abs(l_e - l_u) / abs(l_u),
               grad_rel=grad_rel, batches=len(batches.ids), positions=batches.n_positions)
    del batches
    out.update(usual_s=t_usual, engine_s=t_grad, step_s=t_step)
    return out


def _gradient_and_step(
    params: dict[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> tuple[Callable[[], None], Callable[[], None]]:
    """Closures for one full-batch forward+backward and for one training step (that and an
    Adam update, with the optimizer of :func:`attnbook.train.fit`)."""
    E, p, v = params["E"], params["p"], params["v"]
    y = labels.to(E.dtype).to(E.device)
    opt = _OPTIMIZERS["adam"]([E, p, v], 1e-3)

    def grad() -> None:
        opt.zero_grad(set_to_none=True)
        logistic_loss(count_attention_output(E, p, v, counts), y).backward()

    def step() -> None:
        grad()
        opt.step()

    return grad, step


def engine_step_time(
    params: dict[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor,
    repeats: int = 5,
) -> tuple[float, float]:
    """(forward+backward, forward+backward+Adam step) minimum times in seconds, full batch.
    The steps update ``params`` in place."""
    grad, step = _gradient_and_step(params, counts, labels)
    device = params["E"].device
    return time_min(grad, repeats, device), time_min(step, repeats, device)


def _cache_evictor(device: torch.device, nbytes: int = 2**28) -> Callable[[], object]:
    """A function that reads ``nbytes`` of other memory, so that the next pass starts with
    nothing of its own in the CPU caches (as in a training step, where the passes in between
    move far more than the caches hold)."""
    junk = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    return lambda: junk.sum()


def engine_passes(
    params: dict[str, torch.Tensor], counts: TokenCounts, repeats: int = 7
) -> list[dict[str, float | str]]:
    """Time and bytes of each memory-bound pass of one engine gradient (binary model).

    The passes are those of :mod:`attnbook.kernels`, on operands of the shapes one gradient
    evaluation gives them: the scores ``E [p, v]``, the two count products, the gradient write
    ``dE = [G_a, G_b] [p, v]^T`` and ``E^T [G_a, G_b]``. Their values do not change the
    time of a memory-bound pass, so random operands are used. Each is timed from memory (caches
    emptied before every repetition). Returns one dict per pass with ``pass``, ``MB`` (bytes
    it must move), ``ms`` and ``GB/s``.
    """
    E, p, v = (params[k].detach() for k in ("E", "p", "v"))
    device, dtype = E.device, E.dtype
    item = E.element_size()
    V, d = E.shape
    n = counts.n_sequences
    A, At = counts.sparse_matrices(dtype)
    gen = torch.Generator().manual_seed(0)
    rand = lambda *shape: torch.rand(*shape, generator=gen, dtype=dtype).to(device)  # noqa: E731
    PW, X, Y, G = torch.stack((p, v)), rand(V, 2), rand(n, 2), rand(V, 2)
    out = torch.empty_like(E)
    e_bytes = V * d * item
    csr_bytes = (4 + item) * counts.nnz
    passes = [
        ("scores E [p, v]", e_bytes, lambda: kernels.scores(E, PW)),
        ("counts A [u, u b]", csr_bytes + 4 * (n + 1), lambda: kernels.csr_times(A, X)),
        ("counts A^T [r_D, r]", csr_bytes + 4 * (V + 1), lambda: kernels.csr_times(At, Y)),
        ("write dE = G [p, v]^T", e_bytes, lambda: kernels.low_rank(G, PW, out)),
        ("E^T G", e_bytes, lambda: kernels.weighted_rows(E, G)),
    ]
    evict = _cache_evictor(device)
    rows = []
    for name, nbytes, fn in passes:
        t = time_min(fn, repeats, device, before=evict)
        rows.append({"pass": name, "MB": nbytes / 1e6, "ms": 1e3 * t, "GB/s": nbytes / t / 1e9})
    return rows


def backend_times(
    params: dict[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor, repeats: int = 7
) -> dict[str, float]:
    """Full-batch forward+backward time (s) with the compiled kernels and with their torch
    twins (:func:`attnbook.kernels.torch_only`); only the available backends are timed."""
    grad, _ = _gradient_and_step(params, counts, labels)
    device = params["E"].device
    out = {}
    if kernels.backend(device) == "compiled":
        out["compiled"] = time_min(grad, repeats, device)
    with kernels.torch_only():
        out["torch"] = time_min(grad, repeats, device)
    return out


def scaling_table(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    doc_fractions: Sequence[float] = (0.125, 0.25, 0.5, 1.0),
    dims: Sequence[int] = (256, 512, 1024, 2048),
    vocab_sizes: Sequence[int] = (1000, 2000, 4000),
    base_dim: int = 2048,
    repeats: int = 5,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    progress: bool = False,
) -> list[dict[str, float]]:
    """Engine forward+backward time when one of documents, ``d``, vocabulary size varies.

    Returns one dict per setting with ``varied``, ``documents``, ``vocab``, ``dim``, ``nnz``
    (stored counts), ``vd`` (``V d``) and ``ms`` (minimum time in milliseconds).
    """
    device = counts.device
    settings: list[tuple[str, TokenCounts, torch.Tensor, int]] = []
    n = counts.n_sequences
    for frac in doc_fractions:
        k = max(1, int(round(frac * n)))
        idx = np.arange(k)
        settings.append(("documents", counts.select(idx), labels[:k], base_dim))
    for d in dims:
        settings.append(("d", counts, labels, d))
    for V in vocab_sizes:
        if V < counts.vocab_size:
            c, y = restrict_vocabulary(counts, labels, V)
            settings.append(("vocabulary", c, y, base_dim))
    settings.append(("vocabulary", counts, labels, base_dim))
    # Round-robin: every round times each setting once, and each setting keeps its minimum,
    # so a burst of load from other programs hits all settings alike instead of a few rows.
    states = []
    for varied, c, y, d in settings:
        params = _init(c.vocab_size, d, seed, dtype, device)
        states.append((varied, c, y.to(dtype).to(device), d, params))
    best = [math.inf] * len(states)
    rounds = range(repeats + 1)  # round 0 warms up
    if progress:
        from tqdm.auto import tqdm

        rounds = tqdm(rounds, desc="scaling", leave=False)
    for r in rounds:
        for i, (_, c, y, _, params) in enumerate(states):
            E, p, v = params["E"], params["p"], params["v"]
            for t in (E, p, v):
                t.grad = None
            _sync(device)
            t0 = time.perf_counter()
            logistic_loss(count_attention_output(E, p, v, c), y).backward()
            _sync(device)
            if r > 0:
                best[i] = min(best[i], time.perf_counter() - t0)
            for t in (E, p, v):  # dropped as a training step drops them (zero_grad)
                t.grad = None
    rows = []
    for (varied, c, _, d, _), t in zip(states, best):
        rows.append(dict(varied=varied, documents=c.n_sequences, vocab=c.vocab_size, dim=d,
                         nnz=c.nnz, vd=c.vocab_size * d, ms=1e3 * t))
    return rows


def fit_linear_time(rows: Sequence[dict[str, float]]) -> tuple[float, float, float, float]:
    """Least-squares fit ``ms = c0 + c1 nnz + c2 V d`` to :func:`scaling_table` rows (relative
    residuals).

    Returns ``(c0, c1, c2, max_rel_residual)``: milliseconds, per stored count, per entry of
    ``E``, and the largest relative deviation of a measured time from the fit.
    """
    X = np.array([[1.0, r["nnz"], r["vd"]] for r in rows])
    t = np.array([r["ms"] for r in rows])
    # relative least squares: every setting counts equally, whatever its time
    coef, *_ = np.linalg.lstsq(X / t[:, None], np.ones_like(t), rcond=None)
    resid = np.abs(X @ coef - t) / t
    return float(coef[0]), float(coef[1]), float(coef[2]), float(resid.max())


# --------------------------------------------------------------------------- two-layer model
def two_layer_comparison(
    counts: TokenCounts, labels: torch.Tensor, *, n_docs: int, dim: int, repeats: int,
    seed: int = 0, dtype: torch.dtype = torch.float32,
) -> dict[str, float] | None:
    """Two-layer model on the first ``n_docs`` documents: engine vs padded reference.

    Returns loss agreement, gradient agreement (largest relative difference over the five
    parameters) and forward+backward times, or ``None`` when :mod:`attnbook.two_layer` is absent.
    """
    try:
        from . import two_layer as tl
    except ImportError:
        return None
    sub = counts.select(np.arange(min(n_docs, counts.n_sequences)))
    y = labels[: sub.n_sequences].to(dtype).to(counts.device)
    gen = torch.Generator().manual_seed(seed)
    params = tl.init_two_layer(sub.vocab_size, dim, generator=gen, dtype=dtype,
                               device=counts.device)
    blocks = tl.pair_blocks(sub)
    seqs = sub.to_sequences()

    def run(fn) -> tuple[float, list[torch.Tensor]]:
        for t in params.values():
            t.grad = None
        loss = logistic_loss(fn(), y)
        loss.backward()
        return float(loss.detach()), [params[k].grad.clone() for k in sorted(params)]

    l_eng, g_eng = run(lambda: tl.two_layer_output(params, blocks))
    l_ref, g_ref = run(lambda: tl.dense_two_layer_output(params, seqs))
    t_eng = time_min(lambda: run(lambda: tl.two_layer_output(params, blocks)), repeats,
                     counts.device, warmup=0)
    t_ref = time_min(lambda: run(lambda: tl.dense_two_layer_output(params, seqs)),
                     max(1, repeats // 2), counts.device, warmup=0)
    return dict(
        documents=sub.n_sequences, dim=dim,
        loss_rel=abs(l_eng - l_ref) / abs(l_ref),
        grad_rel=max(relative_difference(a, b) for a, b in zip(g_eng, g_ref)),
        engine_s=t_eng, reference_s=t_ref, speedup=t_ref / t_eng,
    )


# --------------------------------------------------------------------------- command line
def _passes_table(rows: Sequence[dict[str, float | str]]) -> str:
    lines = [f"{'pass':<24} {'MB':>7} {'ms':>7} {'GB/s':>7}"]
    lines += [f"{r['pass']:<24} {r['MB']:>7.1f} {r['ms']:>7.3f} {r['GB/s']:>7.1f}" for r in rows]
    return "\n".join(lines)


def _table(rows: Sequence[dict[str, float]]) -> str:
    head = f"{'varied':>10} {'docs':>7} {'V':>6} {'d':>6} {'nnz':>10} {'V*d':>11} {'ms':>9} {'ns/count':>9}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['varied']:>10} {r['documents']:>7d} {r['vocab']:>6d} {r['dim']:>6d} "
            f"{r['nnz']:>10d} {r['vd']:>11d} {r['ms']:>9.2f} {1e6 * r['ms'] / r['nnz']:>9.2f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Run the benchmark (see the module docstring); returns the measured numbers."""
    ap = argparse.ArgumentParser(prog="python -m attnbook.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="imdb", choices=("imdb", "yelp"))
    ap.add_argument("--min-df", type=int, default=40)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--docs", type=int, default=None, help="use only the first DOCS documents")
    ap.add_argument("--repeats", type=int, default=7, help="repetitions (minimum is reported)")
    ap.add_argument("--usual-repeats", type=int, default=2,
                    help="passes of the usual implementation (the first also checks agreement)")
    ap.add_argument("--max-positions", type=int, default=16_384,
                    help="padded positions per mini-batch of the usual implementation")
    ap.add_argument("--two-layer-docs", type=int, default=200)
    ap.add_argument("--two-layer-dim", type=int, default=256)
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    args = ap.parse_args(argv)

    from .utils import default_device

    device = torch.device(args.device) if args.device else default_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda was asked for, but torch sees no CUDA device")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    print(f"device: {device} ({name}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU thread(s), engine kernels: {kernels.backend(device)}")

    prep = prepare(args.dataset, args.min_df)
    counts, y = prep.counts, prep.labels
    print(f"data: {args.dataset} train, min_df={prep.min_df}: load {prep.seconds_load:.2f} s, "
          f"vocabulary {prep.seconds_vocabulary:.2f} s, encode {prep.seconds_encode:.2f} s")
    if args.docs is not None:
        k = min(args.docs, counts.n_sequences)
        counts, y = counts.select(np.arange(k)), y[:k]
    counts = counts.to(device)
    y = y.to(device)
    V, d, n = counts.vocab_size, args.dim, counts.n_sequences
    T = int(counts.counts.sum())
    print(f"corpus: n={n} documents, V={V}, tokens={T}, stored counts nnz={counts.nnz}, d={d}")

    cmp = compare_implementations(counts, y, dim=d, max_positions=args.max_positions,
                                  usual_repeats=args.usual_repeats, repeats=args.repeats,
                                  progress=True)
    print(f"usual implementation: {cmp['batches']} mini-batches, {cmp['positions']} padded "
          f"positions ({cmp['positions'] / T:.3f} x tokens)")
    print(f"agreement: loss {cmp['loss_engine']:.7f} vs {cmp['loss_usual']:.7f} (relative "
          f"{cmp['loss_rel']:.1e}); gradients relative difference E {cmp['grad_rel'][0]:.1e}, "
          f"p {cmp['grad_rel'][1]:.1e}, v {cmp['grad_rel'][2]:.1e}")
    if not (cmp["loss_rel"] <= 1e-5 and max(cmp["grad_rel"]) <= 1e-4):
        raise SystemExit("the engine and the usual implementation disagree")
    t_usual, t_grad, t_step = cmp["usual_s"], cmp["engine_s"], cmp["step_s"]
    speedup = t_usual / t_grad
    print(f"full-batch forward+backward: usual {t_usual:.3f} s, engine {1e3 * t_grad:.2f} ms "
          f"-> speed-up {speedup:.0f}x")
    print(f"engine training step (forward+backward+Adam): {1e3 * t_step:.2f} ms")

    # (3) bandwidth bound
    bw = copy_bandwidth(device, repeats=30)
    nbytes = minimum_bytes(counts, d)
    t_bound = nbytes / bw
    fraction = t_bound / t_grad
    print(f"bandwidth (copy): {bw / 1e9:.1f} GB/s; minimum bytes per gradient "
          f"{nbytes / 1e6:.1f} MB -> bound {1e3 * t_bound:.2f} ms; engine reaches "
          f"{fraction:.3f} of the bound ({t_grad / t_bound:.1f}x the bound)")

    # where the time goes, and what the compiled kernels buy
    params = _init(V, d, 0, torch.float32, device)
    passes = engine_passes(params, counts, repeats=args.repeats)
    print("the engine's passes, each timed from memory:")
    print(_passes_table(passes))
    t_passes = sum(r["ms"] for r in passes) / 1e3
    print(f"passes on their own {1e3 * t_passes:.2f} ms in all; the gradient (passes, vector "
          f"operations and autograd) {1e3 * t_grad:.2f} ms")
    backends = backend_times(params, counts, y, repeats=args.repeats)
    del params
    if "compiled" in backends:
        print(f"gradient with the compiled kernels {1e3 * backends['compiled']:.2f} ms, with "
              f"their torch twins {1e3 * backends['torch']:.2f} ms -> "
              f"{backends['torch'] / backends['compiled']:.1f}x")

    # (4) two-layer model
    two = two_layer_comparison(counts, y, n_docs=args.two_layer_docs, dim=args.two_layer_dim,
                               repeats=max(2, args.repeats // 3))
    if two is None:
        print("two-layer model: attnbook.two_layer not available")
    else:
        print(f"two-layer model ({two['documents']} documents, d={two['dim']}): loss relative "
              f"{two['loss_rel']:.1e}, gradients {two['grad_rel']:.1e}; forward+backward "
              f"engine {1e3 * two['engine_s']:.1f} ms, padded reference "
              f"{1e3 * two['reference_s']:.1f} ms -> speed-up {two['speedup']:.1f}x")

    # (5) scaling
    rows: list[dict[str, float]] = []
    if not args.no_scaling:
        rows = scaling_table(counts, y, base_dim=d, repeats=args.repeats, progress=True)
        print(_table(rows))
        c0, c1, c2, worst = fit_linear_time(rows)
        print(f"fit: ms = {c0:.2f} + {1e6 * c1:.2f} ns x nnz + {1e6 * c2:.3f} ns x V*d "
              f"(largest relative deviation {worst:.2f})")
    print("times are minima over repetitions; other load on the machine only adds time")
    print(f"speedup={speedup:.1f} bound_fraction={fraction:.3f}")
    return dict(speedup=speedup, bound_fraction=fraction, t_usual=t_usual, t_grad=t_grad,
                t_step=t_step, bandwidth=bw, bytes=nbytes, loss_rel=cmp["loss_rel"],
                grad_rel=cmp["grad_rel"], two_layer=two, scaling=rows, passes=passes,
                backends=backends)


def _cpu_name() -> str:
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


if __name__ == "__main__":
    main()
