"""The one-layer attention model with a ``<cls>`` query and a linear head.

    f(X) = sum_i softmax_i(p . E_{x_i}) (E_{x_i} . v)

Two implementations that agree to rounding error:

- :func:`dense_attention_output` -- the textbook computation: pad the sequences, look up one
  embedding per position, mask, softmax over positions. It is the reference for the tests.
- :func:`count_attention_output` -- the count engine. Because ``f`` depends on a sequence only
  through its token counts (:class:`attnbook.counts.TokenCounts`), it computes the two scores
  ``E @ [p, v]`` once per *vocabulary* entry and then works on the ``nnz`` stored counts. Its
  gradient with respect to ``E`` has rank two, ``G_p p^T + G_v v^T``.

:func:`attention_output` is the public entry point; it validates its inputs and uses the count
engine. Softmaxes are shifted by the per-sequence maximum score, so ``||p|| = 1e4`` gives finite
values and gradients.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.autograd.function import once_differentiable

from . import kernels
from .counts import TokenCounts, as_token_counts, padded_token_ids, validate_sequences

__all__ = [
    "attention_output",
    "attention_weights",
    "token_attention",
    "count_attention_output",
    "count_heads_output",
    "dense_attention_output",
    "check_parameters",
    "check_parameter_dict",
]

_FLOAT_DTYPES = (torch.float32, torch.float64)


def check_parameters(E: torch.Tensor, p: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``E`` is (V, d) and ``p``, ``v`` are (d,) float tensors
    of one dtype (float32 or float64) on one device."""
    for name, t in (("E", E), ("p", p), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(t).__name__}")
        if t.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"{name} has dtype {t.dtype}; use torch.float32 or torch.float64")
    if E.ndim != 2 or E.shape[0] == 0 or E.shape[1] == 0:
        raise ValueError(f"E must have shape (V, d) with V, d > 0, got {tuple(E.shape)}")
    d = E.shape[1]
    for name, t in (("p", p), ("v", v)):
        if t.shape != (d,):
            raise ValueError(f"{name} must have shape ({d},) to match E, got {tuple(t.shape)}")
    if not (E.dtype == p.dtype == v.dtype):
        raise ValueError(f"E, p, v must share one dtype, got {E.dtype}, {p.dtype}, {v.dtype}")
    if not (E.device == p.device == v.device):
        raise ValueError(f"E, p, v must be on one device, got {E.device}, {p.device}, {v.device}")


def check_parameter_dict(
    params: dict[str, torch.Tensor], shapes: Callable[[int], dict[str, tuple[int, ...]]], model: str
) -> None:
    """Raise ``ValueError`` unless ``params`` holds a float32/float64 ``E`` of shape (V, d) and,
    for every ``name, shape`` in ``shapes(d)``, a tensor of that shape with ``E``'s dtype and
    device. ``model`` names the model in the messages (``"MLP-head"``, ``"two-layer"``)."""
    missing = [k for k in ("E", *shapes(1)) if k not in params]
    if missing:
        raise ValueError(f"{model} parameters lack {missing}; expected {['E', *shapes(1)]}")
    E = params["E"]
    if not isinstance(E, torch.Tensor) or E.ndim != 2 or min(E.shape) == 0:
        raise ValueError("E must be a (V, d) tensor with V, d > 0")
    if E.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"E has dtype {E.dtype}; use torch.float32 or torch.float64")
    for name, shape in shapes(E.shape[1]).items():
        t = params[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape {shape} to match E, got {got}")
        if t.dtype != E.dtype or t.device != E.device:
            raise ValueError(f"{name} must share E's dtype ({E.dtype}) and device ({E.device})")


def _segment_max(values: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    """Per-row maximum of ``values`` (no gradient: it is only a shift for the softmax)."""
    with torch.no_grad():
        out = torch.full((n,), -torch.inf, dtype=values.dtype, device=values.device)
        return out.scatter_reduce_(0, rows, values.detach(), reduce="amax", include_self=True)


def _count_softmax_terms(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shared core of the count engine.

    Returns ``(w, b_tok, den, rows)``: the unnormalised attention mass ``n_s exp(a_s - max)`` of
    every stored entry, its value score ``E_s . v``, the per-row normaliser and the row ids.
    """
    scores = E @ torch.stack((p, v), dim=1)  # (V, 2): one fused pass over E
    a_tok = scores[:, 0][counts.token_ids]
    b_tok = scores[:, 1][counts.token_ids]
    rows = counts.row_ids
    n = counts.n_sequences
    shift = _segment_max(a_tok, rows, n)
    w = counts.float_counts(E.dtype) * torch.exp(a_tok - shift[rows])
    den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add(0, rows, w)
    return w, b_tok, den, rows


_HUGE_PAGE = 2**21
_MADV_HUGEPAGE = 14  # Linux


def _madvise_hugepages():
    """``madvise`` from the C library (Linux), or ``None`` where it is not available."""
    try:
        import ctypes
        import sys

        if not sys.platform.startswith("linux"):
            return None
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return fn
    except (OSError, AttributeError):
        return None


_MADVISE = _madvise_hugepages()


def _empty_like_large(E: torch.Tensor) -> torch.Tensor:
    """``torch.empty_like(E)``; on Linux CPU asks the kernel for huge pages for a large block.

    A fresh ``(V, d)`` gradient is written once per step; with 4 KiB pages the first touch of
    every page costs more than the write itself. The hint changes no value and is skipped
    silently wherever it does not apply.
    """
    out = torch.empty_like(E, memory_format=torch.contiguous_format)
    nbytes = out.numel() * out.element_size()
    if _MADVISE is not None and out.device.type == "cpu" and nbytes >= 4 * _HUGE_PAGE:
        start = -(-out.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE
        stop = (out.data_ptr() + nbytes) // _HUGE_PAGE * _HUGE_PAGE
        if stop > start:
            _MADVISE(start, stop - start, _MADV_HUGEPAGE)
    return out


def _storage_refs(t: torch.Tensor) -> int | None:
    """References to the memory of ``t`` (``None`` where torch does not say)."""
    try:
        return int(torch._C._storage_Use_Count(t.untyped_storage()._cdata))
    except (AttributeError, RuntimeError, TypeError):
        return None


_FREE_REFS = _storage_refs(torch.empty(1))  # the count of memory that only one tensor holds
_GRAD_BUFFERS: dict[tuple, torch.Tensor] = {}  # insertion order = order of last use
_GRAD_BUFFER_BYTES = 2**28  # kept in all; the most recent block is always kept


def _gradient_buffer(E: torch.Tensor) -> torch.Tensor:
    """Uninitialised contiguous memory for the gradient of ``E``.

    On CPU the memory of the previous call with the same shape and dtype is handed out again
    when no tensor refers to it any more (the gradient of the last step was dropped, e.g. by
    ``zero_grad(set_to_none=True)``). A fresh ``(V, d)`` block is otherwise page-faulted in on
    every step, which costs more than writing it. Memory that something still holds (``E.grad``,
    a tensor kept by the caller, a view of one) is never reused. Blocks of several shapes are
    kept up to ``_GRAD_BUFFER_BYTES`` in all, least recently used dropped first. Elsewhere
    (CUDA has a caching allocator) this is ``torch.empty_like(E)``.
    """
    if E.device.type != "cpu" or _FREE_REFS is None:
        return torch.empty_like(E, memory_format=torch.contiguous_format)
    key = (tuple(E.shape), E.dtype)
    buf = _GRAD_BUFFERS.pop(key, None)
    if buf is None or _storage_refs(buf) != _FREE_REFS:
        buf = _empty_like_large(E)
    _GRAD_BUFFERS[key] = buf
    while len(_GRAD_BUFFERS) > 1 and sum(
        b.numel() * b.element_size() for b in _GRAD_BUFFERS.values()
    ) > _GRAD_BUFFER_BYTES:
        del _GRAD_BUFFERS[next(iter(_GRAD_BUFFERS))]
    return buf.detach()  # a new tensor on the same memory: autograd may take it as E.grad


class _RowShiftNeeded(Exception):
    """The global-shift fast path would lose precision on some row (huge ``||p||``)."""


class _CountAttention(torch.autograd.Function):
    """``f`` for every row of a count matrix and every head, with a hand-written backward.

    Heads are the columns of ``W`` (``(d, K)``; the binary model has ``K = 1``, ``W = v``).
    Forward, with ``a = E p``, ``B = E W`` (one fused pass ``E @ [p, W]``) and the shift
    ``M = max_s a_s`` taken over the *vocabulary*: ``u = exp(a - M)``, then one sparse product
    ``A @ [u, u * B]`` with the ``(n, V)`` count matrix ``A`` gives the normaliser ``den`` and the
    numerators ``num`` of every row, and ``f = num / den``. Softmax is shift invariant, so this is
    exact; it is *accurate* as long as no row's mass underflows, which is checked (``den_i >=
    T_i * sqrt(tiny)`` implies ``max_{s in X_i} a_s - M >= log(sqrt(tiny))``, so any term that
    underflows is below ``sqrt(tiny)`` relative to the row's largest term). When a row fails the
    check, :class:`_RowShiftNeeded` is raised and the caller uses the per-row shift.

    Backward: with ``R = G / den`` (``G`` the output gradient, ``(n, K)``) and
    ``r_D = -sum_k R_k f_k``, one product ``A^T @ [r_D, R]`` gives ``(z_D, Z_N)`` per token;
    ``G_B = u * Z_N``, ``G_a = u * (z_D + sum_k B_k Z_N,k)``; ``dE = G_a p^T + G_B W^T`` (rank
    ``1 + K``, written directly), ``dp = E^T G_a``, ``dW = E^T G_B``.

    The five passes over memory (the scores, the two count products, the write of ``dE`` and
    ``E^T [G_a, G_B]``) are those of :mod:`attnbook.kernels`.
    """

    @staticmethod
    def forward(ctx, E, p, W, A, At, lengths):  # type: ignore[override]
        PW = torch.cat((p[None, :], W.t())).contiguous()  # (1 + K, d)
        scores = kernels.scores(E, PW)  # (V, 1 + K): one pass over E
        a, B = scores[:, 0], scores[:, 1:]
        u = torch.exp(a - a.max())
        nd = kernels.csr_times(A, torch.cat((u[:, None], u[:, None] * B), dim=1))  # (n, 1 + K)
        den, num = nd[:, 0], nd[:, 1:]
        tiny = torch.finfo(E.dtype).tiny
        if not bool((den >= lengths * tiny**0.5).all()):
            raise _RowShiftNeeded
        f = num / den[:, None]
        ctx.save_for_backward(E, PW, u, B, den, f)
        ctx.At = At
        return f

    @staticmethod
    @once_differentiable  # second derivatives: use the per-row path (_count_softmax_terms)
    def backward(ctx, g):  # type: ignore[override]
        E, PW, u, B, den, f = ctx.saved_tensors
        R = g / den[:, None]
        rD = -(R * f).sum(dim=1)
        z = kernels.csr_times(ctx.At, torch.cat((rD[:, None], R), dim=1))  # (V, 1 + K)
        K = B.shape[1]
        G = torch.empty_like(z)
        torch.mul(u[:, None], z[:, 1:], out=G[:, 1:])  # G_B
        if K == 1:
            torch.addcmul(z[:, 0], B[:, 0], z[:, 1], out=G[:, 0])
        else:
            torch.add(z[:, 0], (B * z[:, 1:]).sum(dim=1), out=G[:, 0])
        G[:, 0].mul_(u)  # G_a
        dE = dp = dW = None
        if ctx.needs_input_grad[0]:
            dE = kernels.low_rank(G, PW, _gradient_buffer(E))  # one write of the gradient
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            GtE = kernels.weighted_rows(E, G)  # (1 + K, d): one pass over E
            dp, dW = GtE[0], GtE[1:].t()
        return dE, dp, dW, None, None, None


def count_heads_output(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: TokenCounts
) -> torch.Tensor | None:
    """``(n, K)`` outputs ``sum_s pi_s(X_i) (E_s . W_k)`` by two sparse products per gradient.

    No input validation. Returns ``None`` when some row's attention mass would underflow under
    the vocabulary-wide shift (very large ``||p||``); the caller then uses a per-row shift.
    """
    A, At = counts.sparse_matrices(E.dtype)
    lengths = counts._cached(("lengths", E.dtype), lambda: counts.lengths.to(E.dtype))
    try:
        return _CountAttention.apply(E, p, W, A, At, lengths)
    except _RowShiftNeeded:
        return None


def count_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: TokenCounts
) -> torch.Tensor:
    """``f(X_i)`` for every row of ``counts`` by the count engine (no input validation).

    Uses two sparse products per forward-backward pass (:class:`_CountAttention`); falls back
    to the per-row max shift of :func:`_count_softmax_terms` when a row's attention mass would
    underflow under the vocabulary-wide shift (very large ``||p||``).
    """
    out = count_heads_output(E, p, v[:, None], counts)
    if out is not None:
        return out[:, 0]
    w, b_tok, den, rows = _count_softmax_terms(E, p, v, counts)
    num = torch.zeros_like(den).index_add(0, rows, w * b_tok)
    return num / den


def dense_attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """``f(X_i)`` by padding, per-position embedding lookup and a masked softmax (reference)."""
    check_parameters(E, p, v)
    ids, mask = padded_token_ids(sequences, E.shape[0], E.device)  # (n, T) each
    emb = E[ids]  # (n, T, d)
    logits = (emb @ p).masked_fill(~mask, -torch.inf)
    attn = torch.softmax(logits, dim=1)
    return (attn * (emb @ v)).sum(dim=1)


def attention_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: object
) -> torch.Tensor:
    """The model output ``f(X_i)`` for every sequence, as a 1-D tensor.

    Parameters
    ----------
    E:
        ``(V, d)`` token embeddings, float32 or float64, on any device.
    p, v:
        ``(d,)`` the ``<cls>`` embedding and the linear head, same dtype and device as ``E``.
    sequences:
        a list of 1-D integer arrays or tensors of token ids in ``[0, V)`` (none empty), or a
        :class:`~attnbook.counts.TokenCounts` built for ``V`` tokens.

    Differentiable in ``E``, ``p`` and ``v``. Raises ``ValueError`` on malformed input.
    """
    check_parameters(E, p, v)
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    return count_attention_output(E, p, v, counts)


def attention_weights(
    E: torch.Tensor, p: torch.Tensor, sequence: object
) -> torch.Tensor:
    """Softmax weight of every *position* of one sequence (sums to one)."""
    check_parameters(E, p, p)
    (arr,) = validate_sequences([sequence], E.shape[0])
    ids = torch.from_numpy(arr).to(E.device)
    return torch.softmax(E[ids] @ p, dim=0)


def token_attention(E: torch.Tensor, p: torch.Tensor, counts: TokenCounts) -> torch.Tensor:
    """Attention mass on every stored (sequence, distinct token) entry of ``counts``.

    Entry ``k`` of the result is ``n_s(X_i) exp(p.E_s) / sum_t n_t(X_i) exp(p.E_t)`` for the
    row ``i`` and token ``s`` stored at position ``k``; each row sums to one.
    """
    check_parameters(E, p, p)
    counts = as_token_counts(counts, E.shape[0]).to(E.device)
    w, _, den, rows = _count_softmax_terms(E, p, torch.zeros_like(p), counts)
    return w / den[rows]
