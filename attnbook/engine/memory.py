"""Memory for the gradient of the embeddings: huge pages and reuse of the last step's
block.

A fresh ``(V, d)`` gradient is written once per training step; page-faulting a new block
in on every step costs more than writing it. :func:`gradient_buffer` hands out the
previous step's memory again when nothing refers to it any more. The values never depend
on this module.
"""

from __future__ import annotations

import ctypes
import sys

import torch

__all__ = ["gradient_buffer", "REUSES_MEMORY"]

_HUGE_PAGE = 2**21
_MADV_HUGEPAGE = 14  # Linux


def _madvise_hugepages():
    """``madvise`` from the C library (Linux), or ``None`` where it is not available."""
    try:
        if not sys.platform.startswith("linux"):
            return None
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return fn
    except (OSError, AttributeError):
        return None


_MADVISE = _madvise_hugepages()


def _empty_like_large(E: torch.Tensor) -> torch.Tensor:
    """``torch.empty_like(E)``; on Linux CPU asks the kernel for huge pages for a large
    block.

    A fresh ``(V, d)`` gradient is written once per step; with 4 KiB pages the first
    touch of every page costs more than the write itself. The hint changes no value and
    is skipped silently wherever it does not apply.
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


_FREE_REFS = _storage_refs(
    torch.empty(1)
)  # the count of memory that only one tensor holds
_GRAD_BUFFERS: dict[tuple, torch.Tensor] = {}  # insertion order = order of last use
_GRAD_BUFFER_BYTES = 2**28  # kept in all; the most recent block is always kept


#: Whether :func:`gradient_buffer` can tell free memory from held memory (and reuse it).
REUSES_MEMORY = _FREE_REFS is not None


def gradient_buffer(E: torch.Tensor) -> torch.Tensor:
    """Uninitialised contiguous memory for the gradient of ``E``.

    On CPU the memory of the previous call with the same shape and dtype is handed out
    again when no tensor refers to it any more (the gradient of the last step was
    dropped, e.g. by ``zero_grad(set_to_none=True)``). A fresh ``(V, d)`` block is
    otherwise page-faulted in on every step, which costs more than writing it. Memory
    that something still holds (``E.grad``, a tensor kept by the caller, a view of one)
    is never reused. Blocks of several shapes are kept up to ``_GRAD_BUFFER_BYTES`` in
    all, least recently used dropped first. Elsewhere (CUDA has a caching allocator)
    this is ``torch.empty_like(E)``.
    """
    if E.device.type != "cpu" or _FREE_REFS is None:
        return torch.empty_like(E, memory_format=torch.contiguous_format)
    key = (tuple(E.shape), E.dtype)
    buf = _GRAD_BUFFERS.pop(key, None)
    if buf is None or _storage_refs(buf) != _FREE_REFS:
        buf = _empty_like_large(E)
    _GRAD_BUFFERS[key] = buf
    while (
        len(_GRAD_BUFFERS) > 1
        and sum(b.numel() * b.element_size() for b in _GRAD_BUFFERS.values())
        > _GRAD_BUFFER_BYTES
    ):
        del _GRAD_BUFFERS[next(iter(_GRAD_BUFFERS))]
    return (
        buf.detach()
    )  # a new tensor on the same memory: autograd may take it as E.grad
