"""Fused Triton kernels for the two count passes of :mod:`attnbook.engine.gpu.passes`.

Each kernel reads every stored count once (its token or row id and its value) and
gathers the per-token and per-row vectors it needs, which are small enough to stay in
the GPU's L2 cache. One program handles one sequence (:func:`row_sums`) or one chunk of
a token's column (:func:`column_chunk_sums`) and sums in a fixed order, so the results
are the same on every run. Triton ships with the CUDA builds of torch; where it is
missing, or ``ATTNBOOK_TRITON=0`` is set, :func:`usable` is false and the torch forms
of :mod:`attnbook.engine.gpu.passes` run instead. float32, one head.
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

__all__ = [
    "available",
    "usable",
    "row_sums",
    "column_sums",
    "scores",
    "dense_backward",
]

_ROW_BLOCK = 256  # entries of a row loaded at once
_COL_BLOCK = 512  # entries of a column chunk loaded at once
_TILE_ROWS, _TILE_COLS = 16, 256  # a tile of E that a dense pass loads at once
_ROWS_PER_PROGRAM = 64  # rows of E one program of the backward dense pass covers


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

    @triton.jit
    def _scores_kernel(E, P, out, V, d, ROWS: tl.constexpr, COLS: tl.constexpr):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        rmask = rows < V
        acc0 = tl.zeros([ROWS], tl.float32)
        acc1 = tl.zeros([ROWS], tl.float32)
        for k in range(0, d, COLS):
            cols = k + tl.arange(0, COLS)
            cmask = cols < d
            e = tl.load(
                E + rows[:, None].to(tl.int64) * d + cols[None, :],
                mask=rmask[:, None] & cmask[None, :],
                other=0.0,
            )
            p0 = tl.load(P + cols, mask=cmask, other=0.0)
            p1 = tl.load(P + d + cols, mask=cmask, other=0.0)
            acc0 += tl.sum(e * p0[None, :], axis=1)
            acc1 += tl.sum(e * p1[None, :], axis=1)
        tl.store(out + rows, acc0, mask=rmask)
        tl.store(out + V + rows, acc1, mask=rmask)

    @triton.jit
    def _dense_backward_kernel(
        E,
        G,
        P,
        dE,
        partial,
        V,
        d,
        PER_PROGRAM: tl.constexpr,
        ROWS: tl.constexpr,
        COLS: tl.constexpr,
    ):
        pv = tl.program_id(0)
        cols = tl.program_id(1) * COLS + tl.arange(0, COLS)
        cmask = cols < d
        p0 = tl.load(P + cols, mask=cmask, other=0.0)
        p1 = tl.load(P + d + cols, mask=cmask, other=0.0)
        acc0 = tl.zeros([COLS], tl.float32)
        acc1 = tl.zeros([COLS], tl.float32)
        for k in range(0, PER_PROGRAM, ROWS):
            rows = pv * PER_PROGRAM + k + tl.arange(0, ROWS)
            rmask = rows < V
            g0 = tl.load(G + 2 * rows, mask=rmask, other=0.0)
            g1 = tl.load(G + 2 * rows + 1, mask=rmask, other=0.0)
            offs = rows[:, None].to(tl.int64) * d + cols[None, :]
            mask = rmask[:, None] & cmask[None, :]
            e = tl.load(E + offs, mask=mask, other=0.0)
            grad = g0[:, None] * p0[None, :] + g1[:, None] * p1[None, :]
            tl.store(dE + offs, grad, mask=mask)
            acc0 += tl.sum(g0[:, None] * e, axis=0)
            acc1 += tl.sum(g1[:, None] * e, axis=0)
        tl.store(partial + (2 * pv) * d + cols, acc0, mask=cmask)
        tl.store(partial + (2 * pv + 1) * d + cols, acc1, mask=cmask)


def row_sums(
    indptr: torch.Tensor,
    tokens: torch.Tensor,
    values: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    n: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(m, den, f)``: ``(n,)``, ``(n,)``, ``(n, 1)`` (see
    :func:`attnbook.engine.gpu.passes.row_sums`), one program per sequence."""
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
    """``(V, 2)`` ``[G_a, G_B]`` (see :func:`attnbook.engine.gpu.passes.column_sums`):
    one program per chunk of a token's column, then one per token adds its chunks.

    ``chunks`` is ``(chunk_col, chunk_start, chunk_stop, first_chunk,
    chunks_per_col)`` of :class:`attnbook.engine.gpu.passes.CountLayout`.
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


def scores(E: torch.Tensor, PW: torch.Tensor) -> torch.Tensor:
    """``(2, V)`` ``PW E^T`` for a contiguous float32 ``(V, d)`` ``E`` and ``(2, d)``
    ``PW``: one read of ``E`` in tiles of ``16 x 256``."""
    V, d = E.shape
    out = torch.empty(2, V, dtype=E.dtype, device=E.device)
    grid = (triton.cdiv(V, _TILE_ROWS),)
    _scores_kernel[grid](
        E, PW.contiguous(), out, V, d, ROWS=_TILE_ROWS, COLS=_TILE_COLS
    )
    return out


def dense_backward(
    E: torch.Tensor, G: torch.Tensor, PW: torch.Tensor, out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dE, G^T E)``: ``dE = G PW`` written into ``out`` (``(V, d)``) and the ``(2,
    d)`` ``G^T E``, in one pass over ``E`` and ``dE`` together (contiguous float32;
    ``G`` is ``(V, 2)``). Each program sums its rows; the partial sums are added in a
    fixed order."""
    V, d = E.shape
    n_blocks = triton.cdiv(V, _ROWS_PER_PROGRAM)
    partial = torch.empty(n_blocks, 2, d, dtype=E.dtype, device=E.device)
    grid = (n_blocks, triton.cdiv(d, _TILE_COLS))
    _dense_backward_kernel[grid](
        E,
        G.contiguous(),
        PW.contiguous(),
        out,
        partial,
        V,
        d,
        PER_PROGRAM=_ROWS_PER_PROGRAM,
        ROWS=_TILE_ROWS,
        COLS=_TILE_COLS,
    )
    return out, partial.sum(dim=0)
