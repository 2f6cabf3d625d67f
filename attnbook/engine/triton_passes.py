"""Fused Triton kernels for the two count passes of :mod:`attnbook.engine.gpu_passes`.

Each kernel reads every stored count once (its token or row id and its value) and
gathers the per-token and per-row vectors it needs, which are small enough to stay in
the GPU's L2 cache. One program handles one sequence (:func:`row_sums`) or one chunk of
a token's column (:func:`column_chunk_sums`) and sums in a fixed order, so the results
are the same on every run. Triton ships with the CUDA builds of torch; where it is
missing, or ``ATTNBOOK_TRITON=0`` is set, :func:`usable` is false and the torch forms
of :mod:`attnbook.engine.gpu_passes` run instead. float32, one head.
"""

from __future__ import annotations

import os

import torch

try:  # the CUDA builds of torch bring Triton; CPU builds usually do not
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None
    tl = None

__all__ = ["available", "usable", "row_sums", "column_sums"]

_ROW_BLOCK = 256  # entries of a row loaded at once
_COL_BLOCK = 512  # entries of a column chunk loaded at once


def available() -> bool:
    """Whether Triton is installed and not switched off (``ATTNBOOK_TRITON=0``)."""
    return triton is not None and os.environ.get("ATTNBOOK_TRITON", "1") != "0"


def usable(t: torch.Tensor) -> bool:
    """Whether the kernels can run on ``t``'s device: CUDA (or any device when Triton's
    interpreter is on, ``TRITON_INTERPRET=1``, which the tests use on a CPU)."""
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    return available() and (t.device.type == "cuda" or interpret)


if triton is not None:

    @triton.jit
    def _row_kernel(
        indptr, tokens, values, a, b, m_out, den_out, f_out, BLOCK: tl.constexpr
    ):
        i = tl.program_id(0)
        start = tl.load(indptr + i)
        stop = tl.load(indptr + i + 1)
        lanes = tl.arange(0, BLOCK)
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        for k in range(start, stop, BLOCK):
            offs = k + lanes
            mask = offs < stop
            tok = tl.load(tokens + offs, mask=mask, other=0)
            best = tl.maximum(best, tl.load(a + tok, mask=mask, other=float("-inf")))
        m = tl.max(best, axis=0)
        den = tl.zeros([BLOCK], tl.float32)
        num = tl.zeros([BLOCK], tl.float32)
        for k in range(start, stop, BLOCK):
            offs = k + lanes
            mask = offs < stop
            tok = tl.load(tokens + offs, mask=mask, other=0)
            c = tl.load(values + offs, mask=mask, other=0.0)
            w = c * tl.exp(tl.load(a + tok, mask=mask, other=0.0) - m)
            w = tl.where(mask, w, 0.0)
            den += w
            num += w * tl.load(b + tok, mask=mask, other=0.0)
        total = tl.sum(den, axis=0)
        tl.store(m_out + i, m)
        tl.store(den_out + i, total)
        tl.store(f_out + i, tl.sum(num, axis=0) / total)

    @triton.jit
    def _column_kernel(
        chunk_col,
        chunk_start,
        chunk_stop,
        rows,
        values,
        a,
        b,
        m,
        g,
        den,
        f,
        out,
        BLOCK: tl.constexpr,
    ):
        j = tl.program_id(0)
        s = tl.load(chunk_col + j)
        start = tl.load(chunk_start + j)
        stop = tl.load(chunk_stop + j)
        a_s = tl.load(a + s)
        b_s = tl.load(b + s)
        lanes = tl.arange(0, BLOCK)
        acc_a = tl.zeros([BLOCK], tl.float32)
        acc_b = tl.zeros([BLOCK], tl.float32)
        for k in range(start, stop, BLOCK):
            offs = k + lanes
            mask = offs < stop
            r = tl.load(rows + offs, mask=mask, other=0)
            c = tl.load(values + offs, mask=mask, other=0.0)
            w = c * tl.exp(a_s - tl.load(m + r, mask=mask, other=0.0))
            w = tl.where(mask, w, 0.0)
            coef = tl.load(g + r, mask=mask, other=0.0) / tl.load(
                den + r, mask=mask, other=1.0
            )  # R_i = g_i / den_i
            acc_b += w * coef
            acc_a += w * coef * (b_s - tl.load(f + r, mask=mask, other=0.0))
        tl.store(out + 2 * j, tl.sum(acc_a, axis=0))
        tl.store(out + 2 * j + 1, tl.sum(acc_b, axis=0))

    @triton.jit
    def _combine_kernel(first_chunk, chunks_per_col, partial, out):
        s = tl.program_id(0)
        first = tl.load(first_chunk + s)
        count = tl.load(chunks_per_col + s)
        acc_a = tl.load(partial + 2 * first)
        acc_b = tl.load(partial + 2 * first + 1)
        for c in range(first + 1, first + count):
            acc_a += tl.load(partial + 2 * c)
            acc_b += tl.load(partial + 2 * c + 1)
        tl.store(out + 2 * s, acc_a)
        tl.store(out + 2 * s + 1, acc_b)


def row_sums(
    indptr: torch.Tensor,
    tokens: torch.Tensor,
    values: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    n: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(m, den, f)``: ``(n,)``, ``(n,)``, ``(n, 1)`` (see
    :func:`attnbook.engine.gpu_passes.row_sums`), one program per sequence."""
    m = torch.empty(n, dtype=a.dtype, device=a.device)
    den, f = torch.empty_like(m), torch.empty(n, 1, dtype=a.dtype, device=a.device)
    _row_kernel[(n,)](
        indptr,
        tokens,
        values,
        a.contiguous(),
        b.contiguous(),
        m,
        den,
        f,
        BLOCK=_ROW_BLOCK,
    )
    return m, den, f


def column_sums(
    chunks: tuple[torch.Tensor, ...],
    rows: torch.Tensor,
    values: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    m: torch.Tensor,
    g: torch.Tensor,
    den: torch.Tensor,
    f: torch.Tensor,
) -> torch.Tensor:
    """``(V, 2)`` ``[G_a, G_B]`` (see :func:`attnbook.engine.gpu_passes.column_sums`):
    one program per chunk of a token's column, then one per token adds its chunks.

    ``chunks`` is ``(chunk_col, chunk_start, chunk_stop, first_chunk,
    chunks_per_col)`` of :class:`attnbook.engine.gpu_passes.CountLayout`.
    """
    chunk_col, chunk_start, chunk_stop, first_chunk, per_col = chunks
    n_chunks, V = chunk_col.numel(), first_chunk.numel()
    partial = torch.empty(n_chunks, 2, dtype=a.dtype, device=a.device)
    _column_kernel[(n_chunks,)](
        chunk_col,
        chunk_start,
        chunk_stop,
        rows,
        values,
        a.contiguous(),
        b.contiguous(),
        m,
        g.contiguous(),
        den,
        f.contiguous(),
        partial,
        BLOCK=_COL_BLOCK,
    )
    out = torch.empty(V, 2, dtype=a.dtype, device=a.device)
    _combine_kernel[(V,)](first_chunk, per_col, partial, out)
    return out
