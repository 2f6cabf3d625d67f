"""Memory for the gradient of the embeddings: the previous step's ``(V, d)`` block
handed out again once nothing refers to it (a NumPy array whose reference count says
so), on huge pages where Linux has them: page-faulting a fresh block on every step
costs more than writing it. The values never depend on this module."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import torch

__all__ = ["gradient_buffer"]

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
_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
# the reference count of a block that only one local name refers to
_FREE_REFS = (lambda block: sys.getrefcount(block))(np.empty(1))
_GRAD_BUFFERS: dict[tuple, np.ndarray] = {}  # insertion order = order of last use
_GRAD_BUFFER_BYTES = 2**28  # kept in all; the most recent block is always kept


def _new_block(E: torch.Tensor) -> np.ndarray:
    """An uninitialised block of ``E``'s shape and dtype, aligned to 64 bytes; on Linux,
    a large block starts on a huge page and asks the kernel for huge pages."""
    dtype = np.dtype(_DTYPES[E.dtype])
    nbytes = E.numel() * dtype.itemsize
    large = _MADVISE is not None and nbytes >= 4 * _HUGE_PAGE
    align = _HUGE_PAGE if large else 64
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    block = raw[start : start + nbytes].view(dtype).reshape(tuple(E.shape))
    if large:
        _MADVISE(block.ctypes.data, nbytes // _HUGE_PAGE * _HUGE_PAGE, _MADV_HUGEPAGE)
    return block


def gradient_buffer(E: torch.Tensor) -> torch.Tensor:
    """Uninitialised contiguous memory for the gradient of ``E``: on CPU the last
    block of its shape and dtype when nothing holds it any more (blocks of several
    shapes kept up to ``_GRAD_BUFFER_BYTES``), elsewhere ``torch.empty_like(E)``."""
    if E.device.type != "cpu" or E.dtype not in _DTYPES:
        return torch.empty_like(E, memory_format=torch.contiguous_format)
    key = (tuple(E.shape), E.dtype)
    block = _GRAD_BUFFERS.pop(key, None)
    if block is None or sys.getrefcount(block) != _FREE_REFS:
        block = _new_block(E)
    _GRAD_BUFFERS[key] = block
    while (
        len(_GRAD_BUFFERS) > 1
        and sum(b.nbytes for b in _GRAD_BUFFERS.values()) > _GRAD_BUFFER_BYTES
    ):
        del _GRAD_BUFFERS[next(iter(_GRAD_BUFFERS))]
    return torch.from_numpy(block)  # its storage holds the block until it is freed
