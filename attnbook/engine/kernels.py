"""The memory-bound passes of the count engine: compiled C on CPU, torch elsewhere.

The count engine spends its time in passes over memory of four kinds (see
``count_kernels.c``; one gradient makes five: the count product runs forward and, with
the transpose, backward):

- :func:`scores` -- ``E @ P.T`` for a thin ``(J, d)`` ``P``: one read of ``E``;
- :func:`weighted_rows` -- ``G.T @ E`` for a thin ``(V, J)`` ``G``: one read of ``E``;
- :func:`low_rank` -- ``G @ P`` written into a ``(V, d)`` buffer: one write (the
  gradient of ``E``, which has rank ``J``);
- :func:`csr_times` -- a sparse CSR matrix times a thin dense ``(m, J)`` block: one read
  of the counts.

On CPU they run as C compiled on first use with the machine's C compiler (``cc``, or
``$CC``), multithreaded with OpenMP, and cached under ``$ATTNBOOK_CACHE_DIR`` (default
``~/.cache/attnbook``, or a private folder in the temporary directory when that one
cannot be used). When a build fails, one with fewer compiler flags is tried (without
``-march=native``, then without OpenMP). Everywhere else (CUDA, no compiler,
``ATTNBOOK_NATIVE=0``) the same results come from torch operations. :func:`backend` says
which one runs; tests compare both with the dense reference.

Each public pass checks its arguments before any kernel runs (tensor types,
float32/float64 dtypes that agree, one device, shapes that fit together, the sparse
matrix's row pointers and column indices) and raises a ``TypeError`` or ``ValueError``
naming the argument. Each has an unchecked twin (``scores_unchecked``,
``weighted_rows_unchecked``, ``low_rank_unchecked``, ``csr_times_unchecked``) for a
caller that builds the arguments itself and so knows them to fit, as the engine does:
the checks take a few microseconds per pass (the sparse matrix's O(nnz) checks run once
per matrix), about 5% of a gradient over a vocabulary of a few hundred tokens.

The library is built, cached, verified and loaded by :mod:`attnbook.engine.native`."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator

import torch

from attnbook.engine import native

__all__ = [
    "backend",
    "csr_times",
    "csr_times_unchecked",
    "low_rank",
    "low_rank_unchecked",
    "native_library",
    "scores",
    "scores_unchecked",
    "torch_only",
    "weighted_rows",
    "weighted_rows_unchecked",
]

_MAX_COLUMNS = 16  # csr_times keeps one row of the result in registers
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
_INDEX_DTYPES = (torch.int32, torch.int64)
_FLAG_SETS = (  # tried in order: the first that compiles is used
    ["-O3", "-fno-math-errno", "-march=native", "-fopenmp"],
    ["-O3", "-fno-math-errno", "-fopenmp"],
    ["-O3", "-fno-math-errno"],
)


@functools.cache
def _build_library() -> ctypes.CDLL | None:
    """The compiled kernels (:func:`attnbook.engine.native.load_library`), once per
    process; ``None`` when they cannot be had."""
    return native.load_library(_FLAG_SETS)


_TORCH_ONLY = False


def native_library() -> ctypes.CDLL | None:
    """The compiled kernels, built on first use; ``None`` when they cannot be had here,
    when ``ATTNBOOK_NATIVE=0`` is set, or inside :func:`torch_only`."""
    if _TORCH_ONLY or os.environ.get("ATTNBOOK_NATIVE", "1") == "0":
        return None
    return _build_library()


@contextlib.contextmanager
def torch_only() -> Iterator[None]:
    """Within this block the passes use their torch twins (to compare the two
    backends)."""
    global _TORCH_ONLY
    before, _TORCH_ONLY = _TORCH_ONLY, True
    try:
        yield
    finally:
        _TORCH_ONLY = before


def _threads() -> int:
    lib = native_library()
    return torch.get_num_threads() if lib is not None and lib.openmp_enabled() else 1


def backend(device: torch.device | str = "cpu") -> str:
    """``"compiled"`` when the C kernels serve tensors on ``device``, else
    ``"torch"``."""
    native = torch.device(device).type == "cpu" and native_library() is not None
    return "compiled" if native else "torch"


# ------------------------------------------------------------------------------------
# Checks of the arguments (every public pass runs them before any C or torch kernel)


def _dense(fn: str, name: str, t: object, ndim: int = 2) -> torch.Tensor:
    """``t`` when it is a strided float32/float64 tensor of ``ndim`` dimensions."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise TypeError(f"{fn}: {name} must be a dense tensor, got layout {t.layout}")
    if t.dtype not in _SUFFIX:
        raise TypeError(f"{fn}: {name} must be float32 or float64, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(
            f"{fn}: {name} must have {ndim} dimensions, got shape {tuple(t.shape)}"
        )
    return t


def _same_kind(
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


def _shape_error(fn: str, name: str, t: torch.Tensor, want: str) -> ValueError:
    return ValueError(f"{fn}: {name} must have shape {want}, got {tuple(t.shape)}")


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The byte addresses ``[start, stop)`` that the elements of ``t`` lie in."""
    start, n = t.data_ptr(), t.numel()
    if n == 0:
        return start, start
    if t.is_contiguous():
        return start, start + n * t.element_size()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def _uses_native(*tensors: torch.Tensor) -> bool:
    """Checked tensors go to C when they are on the CPU, contiguous, not empty and not
    lazily negated or conjugated, and the library is there."""
    return (
        all(
            t.device.type == "cpu"
            and t.is_contiguous()
            and t.numel() > 0
            and not t.is_neg()
            and not t.is_conj()
            for t in tensors
        )
        and native_library() is not None
    )


# attribute of a checked sparse matrix: the state it was checked in
_CHECKED = "_attnbook_checked_csr"


def _csr_parts(fn: str, A: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indptr, indices, values)`` of a sparse CSR matrix ``A`` after checking its
    structure: a 2-D CSR tensor with int32 or int64 indices and float32/float64 values
    on one device, ``indptr`` of length ``n + 1`` from 0 to ``nnz``, never decreasing,
    and column indices in ``[0, m)``. The O(nnz) checks run once per matrix: the result
    is remembered until its index arrays change (their version counters, shared by all
    views of them)."""
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"{fn}: A must be a torch.Tensor, got {type(A).__name__}")
    if A.layout != torch.sparse_csr:
        raise TypeError(f"{fn}: A must be a sparse CSR tensor, got layout {A.layout}")
    if A.dim() != 2:
        raise ValueError(
            f"{fn}: A must be a 2-D sparse CSR matrix, got shape {tuple(A.shape)}"
        )
    seen = getattr(A, _CHECKED, None)
    if seen is not None:
        indptr, indices, versions, shape = seen
        if (indptr._version, indices._version) == versions and A.shape == shape:
            return indptr, indices, A.values()
    indptr, indices, values = A.crow_indices(), A.col_indices(), A.values()
    if values.dtype not in _SUFFIX:
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
    setattr(
        A, _CHECKED, (indptr, indices, (indptr._version, indices._version), A.shape)
    )
    return indptr, indices, values


# ------------------------------------------------------------------------------------
# The passes. Each checked pass checks its arguments, then calls its unchecked
# twin.


def scores(E: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """``E @ P.T``: ``(V, J)`` scores of every row of ``E`` against the ``J`` rows of
    ``P``.

    ``E`` ``(V, d)`` and ``P`` ``(J, d)`` are float32 or float64 tensors of one dtype
    and device; ``TypeError``/``ValueError`` name the argument that is not."""
    _dense("scores", "E", E), _dense("scores", "P", P)
    _same_kind("scores", ("E", E), ("P", P))
    if P.shape[1] != E.shape[1]:
        raise _shape_error(
            "scores", "P", P, f"(J, {E.shape[1]}) to match E {tuple(E.shape)}"
        )
    return scores_unchecked(E, P)


def scores_unchecked(E: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """:func:`scores` without the checks."""
    if not _uses_native(E, P):
        return E @ P.t()
    (V, d), J = E.shape, P.shape[0]
    out = torch.empty(V, J, dtype=E.dtype)
    fn = getattr(native_library(), f"scores_{_SUFFIX[E.dtype]}")
    _status(
        "scores", fn(E.data_ptr(), V, d, P.data_ptr(), J, out.data_ptr(), _threads())
    )
    return out


def csr_times(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` for a sparse CSR ``(n, m)`` ``A`` and a dense ``(m, J)`` ``X``.

    ``A``'s structure is checked as :func:`_csr_parts` says (once per matrix); ``X``
    must have ``A``'s value dtype and device and ``m`` rows."""
    parts = _csr_parts("csr_times", A)
    _dense("csr_times", "X", X)
    _same_kind("csr_times", ("A", parts[2]), ("X", X))
    if X.shape[0] != A.shape[1]:
        raise _shape_error(
            "csr_times", "X", X, f"({A.shape[1]}, J) to match A {tuple(A.shape)}"
        )
    return csr_times_unchecked(A, X, parts)


def csr_times_unchecked(
    A: torch.Tensor,
    X: torch.Tensor,
    parts: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """:func:`csr_times` without the checks (``parts``: A's index and value arrays, if
    known)."""
    indptr, indices, values = parts or (A.crow_indices(), A.col_indices(), A.values())
    if not (
        X.shape[1] <= _MAX_COLUMNS
        and indptr.dtype == indices.dtype == torch.int32
        and _uses_native(values, X, indptr, indices)
    ):
        return A @ X
    n, J = A.shape[0], X.shape[1]
    out = torch.empty(n, J, dtype=X.dtype)
    fn = getattr(native_library(), f"csr_times_{_SUFFIX[X.dtype]}")
    _status(
        "csr_times",
        fn(
            indptr.data_ptr(),
            indices.data_ptr(),
            values.data_ptr(),
            n,
            X.data_ptr(),
            J,
            out.data_ptr(),
            _threads(),
        ),
    )
    return out


def weighted_rows(E: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``G.T @ E``: ``(J, d)`` sums of the rows of ``E`` with the ``J`` weights of ``G``
    (V, J).

    ``E`` and ``G`` are float32 or float64 tensors of one dtype and device, with as many
    rows."""
    _dense("weighted_rows", "E", E), _dense("weighted_rows", "G", G)
    _same_kind("weighted_rows", ("E", E), ("G", G))
    if G.shape[0] != E.shape[0]:
        raise _shape_error(
            "weighted_rows", "G", G, f"({E.shape[0]}, J) to match E {tuple(E.shape)}"
        )
    return weighted_rows_unchecked(E, G)


def weighted_rows_unchecked(E: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """:func:`weighted_rows` without the checks."""
    if not _uses_native(E, G):
        return G.t() @ E
    (V, d), J = E.shape, G.shape[1]
    out = torch.empty(J, d, dtype=E.dtype)
    fn = getattr(native_library(), f"weighted_rows_{_SUFFIX[E.dtype]}")
    code = fn(E.data_ptr(), V, d, G.data_ptr(), J, out.data_ptr(), _threads())
    if code == 2:
        raise MemoryError("weighted_rows: no memory for the per-thread sums")
    _status("weighted_rows", code)
    return out


def low_rank(G: torch.Tensor, P: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Write ``G @ P`` into ``out`` (``(V, d)``) for a thin ``(V, J)`` ``G`` and return
    it.

    ``G``, ``P`` ``(J, d)`` and ``out`` are float32 or float64 tensors of one dtype and
    device; ``out`` shares no memory with ``G`` or ``P``."""
    for name, t in (("G", G), ("P", P), ("out", out)):
        _dense("low_rank", name, t)
    _same_kind("low_rank", ("G", G), ("P", P), ("out", out))
    (V, J), d = G.shape, out.shape[1]
    if P.shape != (J, d):
        raise _shape_error(
            "low_rank",
            "P",
            P,
            f"({J}, {d}) to match G {tuple(G.shape)} and out {tuple(out.shape)}",
        )
    if out.shape[0] != V:
        raise _shape_error(
            "low_rank", "out", out, f"({V}, d) to match G {tuple(G.shape)}"
        )
    for name, t in (("G", G), ("P", P)):
        if _overlap(out, t):
            raise ValueError(f"low_rank: out shares memory with {name}")
    return low_rank_unchecked(G, P, out)


def low_rank_unchecked(
    G: torch.Tensor, P: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """:func:`low_rank` without the checks."""
    if not _uses_native(G, P, out):
        return _torch_low_rank(G, P, out)
    (V, J), d = G.shape, P.shape[1]
    fn = getattr(native_library(), f"low_rank_{_SUFFIX[G.dtype]}")
    _status(
        "low_rank", fn(G.data_ptr(), P.data_ptr(), V, d, J, out.data_ptr(), _threads())
    )
    return out


def _status(fn: str, code: int) -> None:
    """The C kernels refuse impossible sizes themselves (a second line of defence)."""
    if code != 0:
        raise ValueError(f"{fn}: the compiled kernel refused its sizes (code {code})")


def _rows_per_block(out: torch.Tensor) -> int:
    """Rows of ``out`` in about 512 KiB: a block then stays in a CPU core's L2 cache."""
    return max(1, 2**19 // max(1, out.shape[1] * out.element_size()))


def _torch_low_rank(
    G: torch.Tensor, P: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """:func:`low_rank` by torch operations: for a few columns as scaled rows (a matrix
    product of inner size ``J`` is slow on CPU), on CPU by blocks of rows that stay in
    cache."""
    J = G.shape[1]
    if J == 0:  # an empty sum
        return out.zero_()
    if J > 8:
        return torch.mm(G, P, out=out)
    B = _rows_per_block(out) if out.device.type == "cpu" else out.shape[0]
    for s in range(0, out.shape[0], B):
        o, g = out[s : s + B], G[s : s + B]
        torch.mul(g[:, 0:1], P[0], out=o)
        for j in range(1, J):
            o.addcmul_(g[:, j : j + 1], P[j])
    return out
