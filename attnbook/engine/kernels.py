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
``~/.cache/attnbook``, or the temporary directory when the home cannot be written to).
When a build fails, one with fewer compiler flags is tried (without ``-march=native``,
then without OpenMP). Everywhere else (CUDA, no compiler, ``ATTNBOOK_NATIVE=0``) the
same results come from torch operations. :func:`backend` says which one runs; tests
compare both with the dense reference.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = [
    "backend",
    "csr_times",
    "low_rank",
    "native_library",
    "scores",
    "torch_only",
    "weighted_rows",
]

_SOURCE = Path(__file__).with_name("count_kernels.c")
_SOURCES = (
    _SOURCE,
    _SOURCE.with_name("count_kernels_typed.h"),
)  # the .c includes the .h
_MAX_COLUMNS = 16  # csr_times keeps one row of the result in registers
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
_FLAG_SETS = (  # tried in order: the first that compiles is used
    ["-O3", "-march=native", "-fopenmp"],
    ["-O3", "-fopenmp"],
    ["-O3"],
)


def _cache_dirs() -> list[Path]:
    """Where a built library may be kept, in order: ``$ATTNBOOK_CACHE_DIR`` when set,
    else ``~/.cache/attnbook``, then a folder in the temporary directory (a home that
    cannot be written to)."""
    if "ATTNBOOK_CACHE_DIR" in os.environ:
        return [Path(os.environ["ATTNBOOK_CACHE_DIR"])]
    user = getattr(os, "getuid", lambda: "user")()
    return [
        Path.home() / ".cache" / "attnbook",
        Path(tempfile.gettempdir()) / f"attnbook-{user}",
    ]


def _machine_key() -> str:
    """What a ``-march=native`` build depends on: the architecture and the CPU's
    features."""
    text = platform.machine() + platform.system()
    try:
        with open("/proc/cpuinfo") as f:
            text += "".join(
                sorted({line for line in f if line.startswith(("flags", "model name"))})
            )
    except OSError:
        pass
    return text


def _compile(compiler: str, flags: list[str], target: Path) -> bool:
    """Build the shared library at ``target`` (atomically: parallel processes may
    race)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / target.name
            cmd = [compiler, *flags, "-shared", "-fPIC", "-o", str(out), str(_SOURCE)]
            done = subprocess.run(cmd, check=False, capture_output=True, timeout=120)
            if done.returncode != 0 or not out.exists():
                return False
            os.replace(out, target)
    except (
        OSError,
        subprocess.SubprocessError,
    ):  # no writable cache, no working compiler
        return False
    return True


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    P, I64, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    for suffix in _SUFFIX.values():
        getattr(lib, f"scores_{suffix}").argtypes = [P, I64, I64, P, I64, P, I]
        getattr(lib, f"weighted_rows_{suffix}").argtypes = [P, I64, I64, P, I64, P, I]
        getattr(lib, f"weighted_rows_{suffix}").restype = I
        getattr(lib, f"low_rank_{suffix}").argtypes = [P, P, I64, I64, I64, P, I]
        getattr(lib, f"csr_times_{suffix}").argtypes = [P, P, P, I64, P, I64, P, I]
    lib.openmp_enabled.restype = I
    return lib


@functools.cache
def _build_library() -> ctypes.CDLL | None:
    """Compile (once per machine and source) and load the kernels; ``None`` when
    impossible."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not all(path.exists() for path in _SOURCES):
        return None
    source = b"".join(path.read_bytes() for path in _SOURCES)
    for flags in _FLAG_SETS:
        key = hashlib.sha256(
            source
            + repr((compiler, flags, _machine_key(), sys.version_info[:2])).encode()
        ).hexdigest()[:16]
        for folder in _cache_dirs():
            target = folder / f"count_kernels-{key}.so"
            if target.exists() or _compile(compiler, flags, target):
                try:
                    return _declare(ctypes.CDLL(str(target)))
                except OSError:
                    continue
    return None


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


def _uses_native(*tensors: torch.Tensor) -> bool:
    return (
        all(t.device.type == "cpu" and t.is_contiguous() for t in tensors)
        and tensors[0].dtype in _SUFFIX
        and all(t.dtype == tensors[0].dtype for t in tensors)
        and native_library() is not None
    )


def _threads() -> int:
    lib = native_library()
    return torch.get_num_threads() if lib is not None and lib.openmp_enabled() else 1


def backend(device: torch.device | str = "cpu") -> str:
    """``"compiled"`` when the C kernels serve tensors on ``device``, else
    ``"torch"``."""
    native = torch.device(device).type == "cpu" and native_library() is not None
    return "compiled" if native else "torch"


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def scores(E: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """``E @ P.T``: ``(V, J)`` scores of every row of ``E`` against the ``J`` rows of
    ``P``."""
    if not _uses_native(E, P):
        return E @ P.t()
    (V, d), J = E.shape, P.shape[0]
    out = torch.empty(V, J, dtype=E.dtype)
    fn = getattr(native_library(), f"scores_{_SUFFIX[E.dtype]}")
    fn(_ptr(E), V, d, _ptr(P), J, _ptr(out), _threads())
    return out


def csr_times(A: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``A @ X`` for a sparse CSR ``(n, m)`` ``A`` and a dense ``(m, J)`` ``X``."""
    indptr, indices, values = A.crow_indices(), A.col_indices(), A.values()
    if not (
        X.shape[1] <= _MAX_COLUMNS
        and indptr.dtype == indices.dtype == torch.int32
        and _uses_native(values, X)
    ):
        return A @ X
    n, J = A.shape[0], X.shape[1]
    out = torch.empty(n, J, dtype=X.dtype)
    fn = getattr(native_library(), f"csr_times_{_SUFFIX[X.dtype]}")
    fn(_ptr(indptr), _ptr(indices), _ptr(values), n, _ptr(X), J, _ptr(out), _threads())
    return out


def weighted_rows(E: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``G.T @ E``: ``(J, d)`` sums of the rows of ``E`` with the ``J`` weights of ``G``
    (V, J)."""
    if not _uses_native(E, G):
        return G.t() @ E
    (V, d), J = E.shape, G.shape[1]
    out = torch.empty(J, d, dtype=E.dtype)
    fn = getattr(native_library(), f"weighted_rows_{_SUFFIX[E.dtype]}")
    if fn(_ptr(E), V, d, _ptr(G), J, _ptr(out), _threads()) != 0:
        raise MemoryError("weighted_rows: no memory for the per-thread sums")
    return out


def low_rank(G: torch.Tensor, P: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Write ``G @ P`` into ``out`` (``(V, d)``) for a thin ``(V, J)`` ``G`` and returns
    it."""
    if not _uses_native(G, P, out):
        return _torch_low_rank(G, P, out)
    (V, J), d = G.shape, P.shape[1]
    getattr(native_library(), f"low_rank_{_SUFFIX[G.dtype]}")(
        _ptr(G), _ptr(P), V, d, J, _ptr(out), _threads()
    )
    return out


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
    if J > 8:
        return torch.mm(G, P, out=out)
    B = _rows_per_block(out) if out.device.type == "cpu" else out.shape[0]
    for s in range(0, out.shape[0], B):
        o, g = out[s : s + B], G[s : s + B]
        torch.mul(g[:, 0:1], P[0], out=o)
        for j in range(1, J):
            o.addcmul_(g[:, j : j + 1], P[j])
    return out
