"""The argument checks of the engine's passes (:mod:`attnbook.engine.kernels`), run once
per public pass before any kernel; each error names the pass and the argument."""

from __future__ import annotations

import torch

__all__ = [
    "FLOAT_SUFFIX",
    "byte_span",
    "csr_parts",
    "dense_tensor",
    "overlap",
    "same_kind",
    "shape_error",
]

#: the float dtypes the passes take, and the suffix of their compiled kernels
FLOAT_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
_INDEX_DTYPES = (torch.int32, torch.int64)


def dense_tensor(fn: str, name: str, t: object, ndim: int = 2) -> torch.Tensor:
    """``t`` when it is a strided float32/float64 tensor of ``ndim`` dimensions."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise TypeError(f"{fn}: {name} must be a dense tensor, got layout {t.layout}")
    if t.dtype not in FLOAT_SUFFIX:
        raise TypeError(f"{fn}: {name} must be float32 or float64, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(
            f"{fn}: {name} must have {ndim} dimensions, got shape {tuple(t.shape)}"
        )
    return t


def same_kind(
    fn: str, first: tuple[str, torch.Tensor], *others: tuple[str, torch.Tensor]
) -> None:
    """Every tensor of ``others`` has the dtype and device of ``first``."""
    name0, t0 = first
    for name, t in others:
        if t.dtype != t0.dtype:
            raise TypeError(
                f"{fn}: {name} has dtype {t.dtype} but {name0} has {t0.dtype}"
            )
        if t.device != t0.device:
            raise ValueError(
                f"{fn}: {name} is on {t.device} but {name0} is on {t0.device}"
            )


def shape_error(fn: str, name: str, t: torch.Tensor, want: str) -> ValueError:
    return ValueError(f"{fn}: {name} must have shape {want}, got {tuple(t.shape)}")


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """The byte addresses ``[start, stop)`` that the elements of ``t`` lie in."""
    start, n = t.data_ptr(), t.numel()
    if n == 0:
        return start, start
    if t.is_contiguous():
        return start, start + n * t.element_size()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = byte_span(a), byte_span(b)
    return a0 < b1 and b0 < a1


def csr_parts(fn: str, A: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indptr, indices, values)`` of a 2-D sparse CSR matrix ``A`` after checking
    its structure (O(nnz), on every call)."""
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"{fn}: A must be a torch.Tensor, got {type(A).__name__}")
    if A.layout != torch.sparse_csr:
        raise TypeError(f"{fn}: A must be a sparse CSR tensor, got layout {A.layout}")
    if A.dim() != 2:
        raise ValueError(
            f"{fn}: A must be a 2-D sparse CSR matrix, got shape {tuple(A.shape)}"
        )
    indptr, indices, values = A.crow_indices(), A.col_indices(), A.values()
    if values.dtype not in FLOAT_SUFFIX:
        raise TypeError(
            f"{fn}: A must have float32 or float64 values, got {values.dtype}"
        )
    for name, t in (("row pointers", indptr), ("column indices", indices)):
        if t.dtype not in _INDEX_DTYPES:
            raise TypeError(f"{fn}: A's {name} must be int32 or int64, got {t.dtype}")
        if t.device != values.device:
            raise ValueError(
                f"{fn}: A's {name} are on {t.device} but its values on {values.device}"
            )
    n, m = A.shape
    nnz = values.numel()
    if values.dim() != 1 or indptr.dim() != 1 or indices.dim() != 1:
        raise ValueError(
            f"{fn}: A must be a plain CSR matrix (no batch or dense dimensions)"
        )
    if indptr.numel() != n + 1:
        raise ValueError(
            f"{fn}: A's row pointers have {indptr.numel()} entries for {n} rows"
        )
    if indices.numel() != nnz:
        raise ValueError(
            f"{fn}: A has {indices.numel()} column indices but {nnz} values"
        )
    first, last = int(indptr[0]), int(indptr[-1])  # indptr has n + 1 >= 1 entries
    if first != 0 or last != nnz:
        raise ValueError(
            f"{fn}: A's row pointers must run from 0 to nnz = {nnz}, "
            f"got {first} to {last}"
        )
    if n > 1 and bool((indptr[1:] < indptr[:-1]).any()):
        raise ValueError(f"{fn}: A's row pointers must not decrease")
    if nnz > 0:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= m:
            raise ValueError(
                f"{fn}: A's column indices must lie in [0, {m}), got {lo} to {hi}"
            )
    return indptr, indices, values
