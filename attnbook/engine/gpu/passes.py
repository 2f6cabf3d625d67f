"""The count passes without a host synchronisation: the GPU form.

Each softmax is shifted by its own row's maximum (nothing to check on the host).
:func:`row_sums` gives per sequence the maximum, normaliser and outputs (one pass over
the counts in row order); :func:`column_sums` the gradients in the scores (one pass in
column order). Both are torch operations, or, for float32 and one head on CUDA, fused
Triton kernels (:mod:`attnbook.engine.gpu.triton_passes`; a failed build warns and
falls back). Every sum runs in a fixed order, so results repeat bit for bit.
"""

from __future__ import annotations

import contextlib
import os
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu import triton_passes
from attnbook.engine.memory import gradient_buffer
from attnbook.engine.segments import row_shift
from attnbook.engine.segments import segment_sums as _segment_sum

__all__ = [
    "CountLayout",
    "count_layout",
    "row_sums",
    "column_sums",
    "fused_backend",
    "TRITON_FAILURES",
    "DENSE_ENV",
    "dense_backend",
    "dense_passes",
    "scores",
    "embedding_gradients",
]

_CHUNK = 2048  # entries of one column that one Triton program sums (long columns split)


@dataclass(frozen=True)
class CountLayout:
    """A corpus's stored counts in row and in column order, as the GPU passes read them.

    Row order (sequence by sequence, as :class:`TokenCounts` stores them): ``indptr``,
    ``tokens``, ``values`` (the counts as floats), ``rows`` (the row of every entry) and
    ``row_lengths``. Column order (token by token): ``col_ptr``, ``col_rows``,
    ``col_tokens``, ``col_values``, ``col_lengths``. Chunks of at most ``_CHUNK``
    entries of one column (``chunk_col``, ``chunk_start``, ``chunk_stop``; column
    ``s`` has ``chunks_per_col[s]`` of them from ``first_chunk[s]`` on) let long
    columns be summed by several programs.
    """

    n: int
    vocab_size: int
    indptr: torch.Tensor
    tokens: torch.Tensor
    values: torch.Tensor
    rows: torch.Tensor
    row_lengths: torch.Tensor
    col_ptr: torch.Tensor
    col_rows: torch.Tensor
    col_tokens: torch.Tensor
    col_values: torch.Tensor
    col_lengths: torch.Tensor
    chunk_col: torch.Tensor
    chunk_start: torch.Tensor
    chunk_stop: torch.Tensor
    first_chunk: torch.Tensor
    chunks_per_col: torch.Tensor

    @property
    def chunks(self) -> tuple[torch.Tensor, ...]:
        return (
            self.chunk_col,
            self.chunk_start,
            self.chunk_stop,
            self.first_chunk,
            self.chunks_per_col,
        )


_LAYOUTS: dict[tuple[int, torch.dtype], CountLayout] = {}


def _build_layout(counts: TokenCounts, dtype: torch.dtype) -> CountLayout:
    V, n = counts.vocab_size, counts.n_sequences
    tokens, rows = counts.token_ids, counts.row_ids
    values = counts.counts.to(dtype)
    order = torch.argsort(tokens, stable=True)  # rows stay sorted within a column
    col_lengths = torch.bincount(tokens, minlength=V)
    col_ptr = torch.zeros(V + 1, dtype=torch.int64, device=tokens.device)
    torch.cumsum(col_lengths, 0, out=col_ptr[1:])
    # chunks: column s is cut into ceil(len_s / _CHUNK) pieces (at least one)
    per_col = torch.clamp((col_lengths + _CHUNK - 1) // _CHUNK, min=1)
    chunk_col = torch.repeat_interleave(torch.arange(V, device=tokens.device), per_col)
    first = torch.zeros(V, dtype=torch.int64, device=tokens.device)
    torch.cumsum(per_col[:-1], 0, out=first[1:])
    piece = torch.arange(chunk_col.numel(), device=tokens.device) - first[chunk_col]
    chunk_start = col_ptr[chunk_col] + piece * _CHUNK
    chunk_stop = torch.minimum(chunk_start + _CHUNK, col_ptr[chunk_col + 1])
    i32 = torch.int32 if max(counts.nnz, n, V) < 2**31 - 1 else torch.int64
    return CountLayout(
        n=n,
        vocab_size=V,
        indptr=counts.indptr.to(i32),
        tokens=tokens.to(i32),
        values=values,
        rows=rows,
        row_lengths=counts.indptr.diff(),
        col_ptr=col_ptr.to(i32),
        col_rows=rows[order].to(i32),
        col_tokens=tokens[order],
        col_values=values[order],
        col_lengths=col_lengths,
        chunk_col=chunk_col.to(i32),
        chunk_start=chunk_start.to(i32),
        chunk_stop=chunk_stop.to(i32),
        first_chunk=first.to(i32),
        chunks_per_col=per_col.to(i32),
    )


def count_layout(counts: TokenCounts, dtype: torch.dtype) -> CountLayout:
    """The :class:`CountLayout` of ``counts`` with float values of ``dtype`` (built once
    per corpus object and dtype, on the corpus's device; dropped with the corpus)."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    key = (id(counts), dtype)
    if key not in _LAYOUTS:
        _LAYOUTS[key] = _build_layout(counts, dtype)
        weakref.finalize(counts, _LAYOUTS.pop, key, None)
    return _LAYOUTS[key]


#: Why the fused kernels failed in this process (empty while they work); once they have
#: failed, the torch form runs.
TRITON_FAILURES: list[str] = []


def fused_backend(a: torch.Tensor, B: torch.Tensor) -> str:
    """``"triton"`` when the fused kernels serve scores ``a`` (V,) and ``B`` (V, K)
    (float32, one head, CUDA, Triton installed and working), else ``"torch"``."""
    ok = a.dtype == torch.float32 and B.shape[1] == 1 and triton_passes.usable(a)
    return "triton" if ok and not TRITON_FAILURES else "torch"


def _triton_failed(err: Exception) -> None:
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise err  # a graph being captured cannot switch its kernels
    TRITON_FAILURES.append(repr(err))
    warnings.warn(
        f"the fused Triton kernels failed ({err!r}); the count passes use their torch "
        "form from now on",
        RuntimeWarning,
        stacklevel=3,
    )


def row_sums(
    layout: CountLayout, a: torch.Tensor, B: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(m, den, f)`` of every sequence: ``(n,)``, ``(n,)``, ``(n, K)`` (see the
    module docstring) from the attention scores ``a`` ``(V,)`` and the value scores
    ``B`` ``(V, K)`` of every token."""
    if fused_backend(a, B) == "triton":
        try:
            return triton_passes.row_sums(
                layout.indptr, layout.tokens, layout.values, a, B[:, 0], layout.n
            )
        except Exception as err:  # any failure to build or launch
            _triton_failed(err)
    m, e = row_shift(a[layout.tokens], layout.rows, layout.n)
    w = layout.values * e
    den = _segment_sum(w, layout.row_lengths)
    B_e = B[layout.tokens]
    num = torch.stack(
        [_segment_sum(w * B_e[:, k], layout.row_lengths) for k in range(B.shape[1])],
        dim=1,
    )
    return m, den, num / den[:, None]


def column_sums(
    layout: CountLayout,
    a: torch.Tensor,
    B: torch.Tensor,
    m: torch.Tensor,
    g: torch.Tensor,
    den: torch.Tensor,
    f: torch.Tensor,
) -> torch.Tensor:
    """``(V, 1 + K)`` ``[G_a, G_B]`` for every token (see the module docstring), from
    the scores ``a`` ``(V,)``, ``B`` ``(V, K)``, what :func:`row_sums` gave (``m``,
    ``den``, ``f``) and the gradient ``g`` ``(n, K)`` with respect to ``f``."""
    if fused_backend(a, B) == "triton":
        try:
            return triton_passes.column_sums(
                layout.chunks,
                layout.col_rows,
                layout.col_values,
                a,
                B[:, 0],
                m,
                g[:, 0],
                den,
                f[:, 0],
            )
        except Exception as err:  # any failure to build or launch
            _triton_failed(err)
    rows, toks = layout.col_rows, layout.col_tokens
    R = g / den[:, None]
    w = layout.col_values * torch.exp(a[toks] - m[rows])
    R_e = R[rows]
    G = torch.empty(layout.vocab_size, 1 + B.shape[1], dtype=a.dtype, device=a.device)
    G[:, 0] = _segment_sum(
        w * (R_e * (B[toks] - f[rows])).sum(dim=1), layout.col_lengths
    )
    for k in range(B.shape[1]):
        G[:, 1 + k] = _segment_sum(w * R_e[:, k], layout.col_lengths)
    return G


#: ``library`` (default: cuBLAS, or the compiled kernels on a CPU) or ``triton``: who
#: runs the dense passes over ``E``.
DENSE_ENV = "ATTNBOOK_DENSE_PASSES"
_DENSE_CHOICE: list[str] = []  # set by dense_passes(), else the environment decides


def dense_backend(E: torch.Tensor, heads: int) -> str:
    """``"triton"`` when the Triton dense passes are asked for (``dense_passes`` or
    ``ATTNBOOK_DENSE_PASSES=triton``) and serve ``E`` (float32, one head, CUDA),
    else ``"library"``."""
    asked = _DENSE_CHOICE[-1] if _DENSE_CHOICE else os.environ.get(DENSE_ENV, "")
    if asked not in ("", "library", "triton"):
        raise ValueError(f"{DENSE_ENV} must be 'library' or 'triton', got {asked!r}")
    ok = E.dtype == torch.float32 and heads == 1 and triton_passes.usable(E)
    return "triton" if asked == "triton" and ok and not TRITON_FAILURES else "library"


@contextlib.contextmanager
def dense_passes(kind: str) -> Iterator[None]:
    """Within this block the dense passes are run by ``kind`` (``"library"`` or
    ``"triton"``), whatever the environment says (to time both)."""
    if kind not in ("library", "triton"):
        raise ValueError(f"kind must be 'library' or 'triton', got {kind!r}")
    _DENSE_CHOICE.append(kind)
    try:
        yield
    finally:
        _DENSE_CHOICE.pop()


def scores(E: torch.Tensor, PW: torch.Tensor) -> torch.Tensor:
    """``(J, V)`` scores ``PW E^T`` of every token against the ``J`` rows of ``PW``
    (one read of ``E``; rows contiguous on a GPU)."""
    if dense_backend(E, PW.shape[0] - 1) == "triton":
        try:
            return triton_passes.scores(E, PW)
        except Exception as err:  # any failure to build or launch
            _triton_failed(err)
    if E.device.type == "cpu":
        return kernels.scores(E, PW, check_input=False).t()
    return torch.mm(PW, E.t())


def embedding_gradients(
    E: torch.Tensor, G: torch.Tensor, PW: torch.Tensor, need_dE: bool, need_PW: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(dE, dPW)``: ``dE = G PW`` (``(V, d)``, rank ``J``: one write) and ``dPW =
    G^T E`` (``(J, d)``: one read of ``E``), each only when asked for."""
    if need_dE and need_PW and dense_backend(E, PW.shape[0] - 1) == "triton":
        try:
            return triton_passes.dense_backward(E, G, PW, gradient_buffer(E))
        except Exception as err:  # any failure to build or launch
            _triton_failed(err)
    dE = dPW = None
    if need_dE:
        out = gradient_buffer(E)
        if E.device.type == "cpu":
            dE = kernels.low_rank(G, PW, out, check_input=False)
        else:  # one matrix product writes the (V, d) block once
            dE = torch.mm(G, PW, out=out)
    if need_PW:
        dPW = kernels.weighted_rows(E, G, check_input=False)
    return dE, dPW
