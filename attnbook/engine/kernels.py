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

On CUDA (any device but the CPU) :func:`csr_times` sums every row of the product in a
fixed order (:func:`attnbook.engine.segments.csr_rows_times`), never by the vendor's
sparse product, which adds in an order that changes from run to run; the other passes
are matrix products (cuBLAS, deterministic). On CPU they run as C compiled on first use
with the machine's C compiler (``cc``, or ``$CC``), multithreaded with OpenMP, and
cached under ``$ATTNBOOK_CACHE_DIR`` (default ``~/.cache/attnbook``, or a private folder
in the temporary directory when that one cannot be used). When a build fails, one with
fewer compiler flags is tried (without ``-march=native``, then without OpenMP).
Everywhere else (CUDA, no compiler, ``ATTNBOOK_NATIVE=0``) the same results come from
torch operations. :func:`backend` says which one runs; tests compare both with the
dense reference.

Each public pass checks its arguments before any kernel runs (tensor types,
float32/float64 dtypes that agree, one device, shapes that fit together, the sparse
matrix's row pointers and column indices) and raises a ``TypeError`` or ``ValueError``
naming the argument. Each takes ``check_input=False`` from a caller that builds the
arguments itself and so knows them to fit, as the engine does: the checks
(:mod:`attnbook.engine.pass_checks`) take a few microseconds per pass, and the sparse
matrix's O(nnz) more.

The library is built, cached, verified and loaded by :mod:`attnbook.engine.native`."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator

import torch

from attnbook.engine import native
from attnbook.engine.counts import TokenCounts
from attnbook.engine.pass_checks import (
    FLOAT_SUFFIX,
    csr_parts,
    dense_tensor,
    overlap,
    same_kind,
    shape_error,
)
from attnbook.engine.segments import csr_rows_times

__all__ = [
    "backend",
    "csr_times",
    "low_rank",
    "native_library",
    "scores",
    "torch_only",
    "MAX_COLUMNS",
    "omp_threads",
    "raise_on_status",
    "uses_native",
    "vocabulary_shift_gradient",
    "weighted_rows",
]

MAX_COLUMNS = 16  # csr_times keeps one row of the result in registers
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


def omp_threads() -> int:
    lib = native_library()
    return torch.get_num_threads() if lib is not None and lib.openmp_enabled() else 1


def backend(device: torch.device | str = "cpu") -> str:
    """``"compiled"`` when the C kernels serve tensors on ``device``, else
    ``"torch"``."""
    native = torch.device(device).type == "cpu" and native_library() is not None
    return "compiled" if native else "torch"


def uses_native(*tensors: torch.Tensor) -> bool:
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


# ------------------------------------------------------------------------------------
# The passes. Each checks its arguments unless told that its caller has.


def scores(
    E: torch.Tensor, P: torch.Tensor, *, check_input: bool = True
) -> torch.Tensor:
    """``E @ P.T``: ``(V, J)`` scores of every row of ``E`` against the ``J`` rows of
    ``P``.

    ``E`` ``(V, d)`` and ``P`` ``(J, d)`` are float32 or float64 tensors of one dtype
    and device; ``TypeError``/``ValueError`` name the argument that is not.
    ``check_input=False`` skips the checks, for a caller that built the arguments
    itself."""
    if check_input:
        dense_tensor("scores", "E", E), dense_tensor("scores", "P", P)
        same_kind("scores", ("E", E), ("P", P))
        if P.shape[1] != E.shape[1]:
            raise shape_error(
                "scores", "P", P, f"(J, {E.shape[1]}) to match E {tuple(E.shape)}"
            )
    if not uses_native(E, P):
        return E @ P.t()
    (V, d), J = E.shape, P.shape[0]
    out = torch.empty(V, J, dtype=E.dtype)
    fn = getattr(native_library(), f"scores_{FLOAT_SUFFIX[E.dtype]}")
    raise_on_status(
        "scores", fn(E.data_ptr(), V, d, P.data_ptr(), J, out.data_ptr(), omp_threads())
    )
    return out


def csr_times(
    A: torch.Tensor, X: torch.Tensor, *, check_input: bool = True
) -> torch.Tensor:
    """``A @ X`` for a sparse CSR ``(n, m)`` ``A`` and a dense ``(m, J)`` ``X``.

    ``A``'s structure is checked as :func:`~attnbook.engine.pass_checks.csr_parts`
    says; ``X`` must have ``A``'s value dtype and device and ``m`` rows.
    ``check_input=False`` skips the checks, for a caller that built the arguments
    itself."""
    parts = None  # A's index and value arrays, once checked
    if check_input:
        parts = csr_parts("csr_times", A)
        dense_tensor("csr_times", "X", X)
        same_kind("csr_times", ("A", parts[2]), ("X", X))
        if X.shape[0] != A.shape[1]:
            raise shape_error(
                "csr_times", "X", X, f"({A.shape[1]}, J) to match A {tuple(A.shape)}"
            )
    indptr, indices, values = parts or (A.crow_indices(), A.col_indices(), A.values())
    if X.device.type != "cpu":  # the library's sparse product sums in no fixed order
        return csr_rows_times(indptr, indices, values, X)
    if not (
        X.shape[1] <= MAX_COLUMNS
        and indptr.dtype == indices.dtype == torch.int32
        and uses_native(values, X, indptr, indices)
    ):
        return A @ X
    n, J = A.shape[0], X.shape[1]
    out = torch.empty(n, J, dtype=X.dtype)
    fn = getattr(native_library(), f"csr_times_{FLOAT_SUFFIX[X.dtype]}")
    raise_on_status(
        "csr_times",
        fn(
            indptr.data_ptr(),
            indices.data_ptr(),
            values.data_ptr(),
            n,
            X.data_ptr(),
            J,
            out.data_ptr(),
            omp_threads(),
        ),
    )
    return out


def weighted_rows(
    E: torch.Tensor, G: torch.Tensor, *, check_input: bool = True
) -> torch.Tensor:
    """``G.T @ E``: ``(J, d)`` sums of the rows of ``E`` with the ``J`` weights of ``G``
    (V, J).

    ``E`` and ``G`` are float32 or float64 tensors of one dtype and device, with as many
    rows. ``check_input=False`` skips the checks, for a caller that built the
    arguments itself."""
    if check_input:
        dense_tensor("weighted_rows", "E", E), dense_tensor("weighted_rows", "G", G)
        same_kind("weighted_rows", ("E", E), ("G", G))
        if G.shape[0] != E.shape[0]:
            raise shape_error(
                "weighted_rows",
                "G",
                G,
                f"({E.shape[0]}, J) to match E {tuple(E.shape)}",
            )
    if not uses_native(E, G):
        return G.t() @ E
    (V, d), J = E.shape, G.shape[1]
    out = torch.empty(J, d, dtype=E.dtype)
    fn = getattr(native_library(), f"weighted_rows_{FLOAT_SUFFIX[E.dtype]}")
    code = fn(E.data_ptr(), V, d, G.data_ptr(), J, out.data_ptr(), omp_threads())
    if code == 2:
        raise MemoryError("weighted_rows: no memory for the per-thread sums")
    raise_on_status("weighted_rows", code)
    return out


def low_rank(
    G: torch.Tensor, P: torch.Tensor, out: torch.Tensor, *, check_input: bool = True
) -> torch.Tensor:
    """Write ``G @ P`` into ``out`` (``(V, d)``) for a thin ``(V, J)`` ``G`` and return
    it.

    ``G``, ``P`` ``(J, d)`` and ``out`` are float32 or float64 tensors of one dtype and
    device; ``out`` shares no memory with ``G`` or ``P``. ``check_input=False`` skips
    the checks, for a caller that built the arguments itself."""
    if check_input:
        for name, t in (("G", G), ("P", P), ("out", out)):
            dense_tensor("low_rank", name, t)
        same_kind("low_rank", ("G", G), ("P", P), ("out", out))
        (V, J), d = G.shape, out.shape[1]
        if P.shape != (J, d):
            raise shape_error(
                "low_rank",
                "P",
                P,
                f"({J}, {d}) to match G {tuple(G.shape)} and out {tuple(out.shape)}",
            )
        if out.shape[0] != V:
            raise shape_error(
                "low_rank", "out", out, f"({V}, d) to match G {tuple(G.shape)}"
            )
        for name, t in (("G", G), ("P", P)):
            if overlap(out, t):
                raise ValueError(f"low_rank: out shares memory with {name}")
    if not uses_native(G, P, out):
        return _torch_low_rank(G, P, out)
    (V, J), d = G.shape, P.shape[1]
    fn = getattr(native_library(), f"low_rank_{FLOAT_SUFFIX[G.dtype]}")
    raise_on_status(
        "low_rank",
        fn(G.data_ptr(), P.data_ptr(), V, d, J, out.data_ptr(), omp_threads()),
    )
    return out


def raise_on_status(fn: str, code: int) -> None:
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


def vocabulary_shift_gradient(
    counts: TokenCounts,
    B: torch.Tensor,
    u: torch.Tensor,
    den: torch.Tensor,
    f: torch.Tensor,
    g: torch.Tensor,
) -> torch.Tensor:
    """``(V, 1 + K)`` ``[G_a, G_B]``, the gradient of ``sum_ik g_ik f_ik`` in the scores
    from two sparse products: with ``R = g / den`` and ``r_D = -sum_k R_k f_k``,
    ``A^T [r_D, R]`` gives ``(z_D, Z_N)``; ``G_B = u Z_N``, ``G_a = u (z_D + sum_k B_k
    Z_N,k)`` (``u = exp(a - max a)``, ``den`` the rows' sums of ``u``)."""
    _, At = counts.sparse_matrices(u.dtype)
    R = g / den[:, None]
    rD = -(R * f).sum(dim=1)
    z = csr_times(At, torch.cat((rD[:, None], R), dim=1), check_input=False)
    G = torch.empty_like(z)
    torch.mul(u[:, None], z[:, 1:], out=G[:, 1:])  # G_B
    if B.shape[1] == 1:
        torch.addcmul(z[:, 0], B[:, 0], z[:, 1], out=G[:, 0])
    else:
        torch.add(z[:, 0], (B * z[:, 1:]).sum(dim=1), out=G[:, 0])
    G[:, 0].mul_(u)  # G_a
    return G
