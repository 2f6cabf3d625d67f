"""The compiled passes (attnbook.engine.kernels) against hostile input and a damaged or
foreign cache.

- every public pass rejects malformed arguments with a ``TypeError``/``ValueError`` that
  names the argument, before any C or torch kernel runs (a list of bad inputs, then a
  property-based fuzz that mixes valid and invalid shapes, dtypes and sparse structures:
  a valid input gives the torch twin's result, an invalid one a clear error);
- a damaged cached library (truncated, empty, wrong or missing checksum, a kernel
  missing, not a library at all) is rebuilt, and a library is loaded only from a folder
  and a file that belong to the current user and that no one else can write to;
- the kernel tests run once more against a build with AddressSanitizer, in a child
  process."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attnbook.engine import kernels, native

F32, F64, I32, I64 = torch.float32, torch.float64, torch.int32, torch.int64
COMPILER = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
needs_compiler = pytest.mark.skipif(
    COMPILER is None, reason="no C compiler on this machine"
)
# The fuzz runs this many examples per entry point (fewer in the AddressSanitizer
# child).
FUZZ_EXAMPLES = int(os.environ.get("ATTNBOOK_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _randn(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def _csr(indptr, indices, values, size, index_dtype=I32):
    """A CSR tensor built without torch's own checks (as the engine builds its counts);
    a list of values is float64 unless all are ints."""
    if not isinstance(values, torch.Tensor):
        ints = values and all(isinstance(x, int) for x in values)
        values = torch.tensor(values, dtype=I64 if ints else F64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.as_tensor(indptr, dtype=index_dtype),
            torch.as_tensor(indices, dtype=index_dtype),
            torch.as_tensor(values),
            size=size,
            check_invariants=False,
        )


# ------------------------------------------------------------------------------------
# Bad inputs: one clear error each


E, P, G = _randn(6, 5), _randn(2, 5, seed=1), _randn(6, 2, seed=2)
A_OK = _csr([0, 2, 3], [0, 4, 1], [1.0, 2.0, 3.0], (2, 5))
X_OK = _randn(5, 2, seed=3)


def _out(V=6, d=5, dtype=F64):
    return torch.empty(V, d, dtype=dtype)


BAD_INPUTS = {
    # scores(E (V, d), P (J, d))
    "scores E not a tensor": (
        lambda: kernels.scores(E.numpy(), P),
        TypeError,
        "E must be a torch",
    ),
    "scores E 1-D": (
        lambda: kernels.scores(E[0], P),
        ValueError,
        "E must have 2 dimensions",
    ),
    "scores E int": (
        lambda: kernels.scores(E.long(), P),
        TypeError,
        "E must be float32",
    ),
    "scores E half": (
        lambda: kernels.scores(E.half(), P.half()),
        TypeError,
        "E must be float32",
    ),
    "scores P wrong width": (
        lambda: kernels.scores(E, _randn(2, 6)),
        ValueError,
        r"P must have shape \(J, 5\)",
    ),
    "scores P narrower": (
        lambda: kernels.scores(E, _randn(2, 1)),
        ValueError,
        "P must have shape",
    ),
    "scores mixed dtypes": (
        lambda: kernels.scores(E, P.float()),
        TypeError,
        "P has dtype",
    ),
    "scores other device": (
        lambda: kernels.scores(E, P.to("meta")),
        ValueError,
        "P is on meta",
    ),
    "scores sparse E": (
        lambda: kernels.scores(E.to_sparse(), P),
        TypeError,
        "E must be a dense",
    ),
    # weighted_rows(E (V, d), G (V, J))
    "weighted_rows G short": (
        lambda: kernels.weighted_rows(E, _randn(5, 2)),
        ValueError,
        r"G must have shape \(6, J\)",
    ),
    "weighted_rows G long": (
        lambda: kernels.weighted_rows(E, _randn(600, 2)),
        ValueError,
        "G must have shape",
    ),
    "weighted_rows G 3-D": (
        lambda: kernels.weighted_rows(E, _randn(6, 2, 1)),
        ValueError,
        "G must have 2 dimensions",
    ),
    "weighted_rows G list": (
        lambda: kernels.weighted_rows(E, [[1.0]] * 6),
        TypeError,
        "G must be a torch",
    ),
    "weighted_rows mixed dtypes": (
        lambda: kernels.weighted_rows(E.float(), G),
        TypeError,
        "G has dtype",
    ),
    # low_rank(G (V, J), P (J, d), out (V, d))
    "low_rank out short": (
        lambda: kernels.low_rank(G, P, _out(V=3)),
        ValueError,
        r"out must have shape \(6, d\)",
    ),
    "low_rank P rows": (
        lambda: kernels.low_rank(G, _randn(3, 5), _out()),
        ValueError,
        r"P must have shape \(2, 5\)",
    ),
    "low_rank P width": (
        lambda: kernels.low_rank(G, P, _out(d=9)),
        ValueError,
        r"P must have shape \(2, 9\)",
    ),
    "low_rank out dtype": (
        lambda: kernels.low_rank(G, P, _out(dtype=F32)),
        TypeError,
        "out has dtype",
    ),
    "low_rank out None": (
        lambda: kernels.low_rank(G, P, None),
        TypeError,
        "out must be a torch",
    ),
    # csr_times(A (n, m) CSR, X (m, J))
    "csr A dense": (
        lambda: kernels.csr_times(A_OK.to_dense(), X_OK),
        TypeError,
        "A must be a sparse CSR",
    ),
    "csr A COO": (
        lambda: kernels.csr_times(A_OK.to_dense().to_sparse(), X_OK),
        TypeError,
        "A must be a sparse CSR",
    ),
    "csr X rows": (
        lambda: kernels.csr_times(A_OK, _randn(4, 2)),
        ValueError,
        r"X must have shape \(5, J\)",
    ),
    "csr X 1-D": (
        lambda: kernels.csr_times(A_OK, _randn(5)),
        ValueError,
        "X must have 2 dimensions",
    ),
    "csr X dtype": (
        lambda: kernels.csr_times(A_OK, X_OK.float()),
        TypeError,
        "X has dtype",
    ),
    "csr index too large": (
        lambda: kernels.csr_times(
            _csr([0, 2, 3], [0, 5, 1], [1.0, 2.0, 3.0], (2, 5)), X_OK
        ),
        ValueError,
        r"column indices must lie in \[0, 5\)",
    ),
    "csr index huge": (
        lambda: kernels.csr_times(_csr([0, 1, 1], [2**31 - 1], [1.0], (2, 5)), X_OK),
        ValueError,
        "column indices",
    ),
    "csr index negative": (
        lambda: kernels.csr_times(
            _csr([0, 2, 3], [0, -1, 1], [1.0, 2.0, 3.0], (2, 5)), X_OK
        ),
        ValueError,
        "column indices",
    ),
    "csr indptr decreasing": (
        lambda: kernels.csr_times(
            _csr([0, 3, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0], (3, 5)), X_OK
        ),
        ValueError,
        "must not decrease",
    ),
    "csr indptr past nnz": (
        lambda: kernels.csr_times(
            _csr([0, 2, 9], [0, 1, 2], [1.0, 2.0, 3.0], (2, 5)), X_OK
        ),
        ValueError,
        "from 0 to nnz = 3",
    ),
    "csr indptr not from 0": (
        lambda: kernels.csr_times(
            _csr([1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0], (2, 5)), X_OK
        ),
        ValueError,
        "from 0 to nnz",
    ),
    "csr indptr short": (
        lambda: kernels.csr_times(
            _csr([0, 3], [0, 1, 2], [1.0, 2.0, 3.0], (2, 5)), X_OK
        ),
        ValueError,
        "3 entries for 2 rows|2 entries for 2 rows",
    ),
    "csr fewer indices than values": (
        lambda: kernels.csr_times(_csr([0, 1, 2], [0], [1.0, 2.0], (2, 5)), X_OK),
        ValueError,
        "1 column indices but 2 values",
    ),
    "csr int16 indices": (
        lambda: kernels.csr_times(
            _csr([0, 1, 2], [0, 1], [1.0, 2.0], (2, 5), torch.int16), X_OK
        ),
        TypeError,
        "int32 or int64",
    ),
    "csr int values": (
        lambda: kernels.csr_times(_csr([0, 1, 2], [0, 1], [1, 2], (2, 5)), X_OK.long()),
        TypeError,
        "float32 or float64 values",
    ),
    "csr X list": (
        lambda: kernels.csr_times(A_OK, X_OK.tolist()),
        TypeError,
        "X must be a torch",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_a_clear_error(case):
    call, error, match = BAD_INPUTS[case]
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_the_same_error_with_the_torch_twins(case):
    call, error, match = BAD_INPUTS[case]
    with kernels.torch_only(), pytest.raises(error, match=match):
        call()


def test_low_rank_refuses_aliased_out():
    # writing G @ P over G or P while reading them would give neither product
    buf = _randn(45)
    G_view, out_view = buf[:12].view(6, 2), buf[10:40].view(6, 5)  # out starts inside G
    with pytest.raises(ValueError, match="out shares memory with G"):
        kernels.low_rank(G_view, P, out_view)
    P_view, out_view = buf[35:45].view(2, 5), buf[6:36].view(6, 5)  # out ends inside P
    with pytest.raises(ValueError, match="out shares memory with P"):
        kernels.low_rank(G, P_view, out_view)
    out_ok = buf[:30].view(6, 5)  # next to P, not over it
    assert torch.allclose(
        kernels.low_rank(G, buf[30:40].view(2, 5), out_ok), G @ buf[30:40].view(2, 5)
    )


def test_a_checked_matrix_is_checked_again_after_a_change():
    # the O(nnz) checks run on every call: a change of the indices is caught
    A = _csr([0, 2, 3], [0, 4, 1], [1.0, 2.0, 3.0], (2, 5))
    assert torch.allclose(kernels.csr_times(A, X_OK), A.to_dense() @ X_OK)
    A.col_indices()[1] = 5
    with pytest.raises(ValueError, match="column indices"):
        kernels.csr_times(A, X_OK)
    A.col_indices()[1] = 4
    A.crow_indices()[1] = 4
    with pytest.raises(ValueError, match="must not decrease"):
        kernels.csr_times(A, X_OK)


def test_empty_sizes_give_empty_results():
    for V, d, J in [(0, 3, 2), (4, 0, 2), (4, 3, 0), (0, 0, 0)]:
        E0, P0, G0 = _randn(V, d), _randn(J, d), _randn(V, J)
        assert torch.equal(kernels.scores(E0, P0), E0 @ P0.t())
        assert torch.equal(kernels.weighted_rows(E0, G0), G0.t() @ E0)
        assert torch.equal(
            kernels.low_rank(G0, P0, torch.empty(V, d, dtype=F64)), G0 @ P0
        )
    A0 = _csr([0, 0, 0], [], torch.zeros(0, dtype=F64), (2, 5))
    assert torch.equal(kernels.csr_times(A0, X_OK), torch.zeros(2, 2, dtype=F64))


def test_unchecked_passes_give_the_same_results():
    out1, out2 = _out(), _out()
    assert torch.equal(kernels.scores(E, P, check_input=False), kernels.scores(E, P))
    assert torch.equal(
        kernels.weighted_rows(E, G, check_input=False), kernels.weighted_rows(E, G)
    )
    assert torch.equal(
        kernels.low_rank(G, P, out1, check_input=False), kernels.low_rank(G, P, out2)
    )
    assert torch.equal(
        kernels.csr_times(A_OK, X_OK, check_input=False), kernels.csr_times(A_OK, X_OK)
    )


def test_the_c_kernels_refuse_impossible_sizes():
    lib = kernels.native_library()
    if lib is None:
        pytest.skip("no compiled kernels on this machine")
    buf = torch.zeros(64, dtype=F64)
    ptr = buf.data_ptr()
    assert lib.scores_f64(ptr, -1, 2, ptr, 2, ptr, 1) != 0
    assert lib.weighted_rows_f64(ptr, 2, 2, None, 2, ptr, 1) != 0
    assert lib.low_rank_f64(ptr, ptr, 2, -3, 2, ptr, 1) != 0
    indptr = torch.zeros(3, dtype=I32)
    assert lib.csr_times_f64(indptr.data_ptr(), None, None, 2, ptr, 17, ptr, 1) != 0


# ------------------------------------------------------------------------------------
# Fuzz: random valid and invalid arguments


def _close(
    got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, dtype, size: int
) -> bool:
    # compiled and torch twin sum in different orders: each may be off by one rounding
    # per term of a length-`size` sum, relative to the sum of |terms| (`scale`)
    tol = torch.finfo(dtype).eps * max(size, 1) * 4
    return bool(((got.double() - want.double()).abs() <= tol * scale + 1e-300).all())


def _twin(fn, *args):
    with kernels.torch_only():
        return fn(*args)


dtypes = st.sampled_from([F32, F64])
sizes = st.integers(0, 11)


@st.composite
def dense_pair(draw, rows_match: bool):
    """Two dense arguments whose shared size agrees or, with some chance, does not; with
    some chance of another dtype, device, rank, or a transposed (non-contiguous) layout.
    """
    V, d, J = draw(sizes), draw(sizes), draw(sizes)
    dtype = draw(dtypes)
    first = _randn(V, d, dtype=dtype, seed=draw(st.integers(0, 99)))
    other = draw(st.one_of(st.just(V if rows_match else d), sizes))
    second_shape = (other, J) if rows_match else (J, other)
    second = _randn(*second_shape, dtype=dtype, seed=draw(st.integers(0, 99)))
    fault = draw(
        st.sampled_from(["none"] * 6 + ["dtype", "device", "rank", "int", "transposed"])
    )
    if fault == "dtype":
        second = second.to(F32 if dtype == F64 else F64)
    elif fault == "device":
        second = second.to("meta")
    elif fault == "rank":
        second = second.reshape(-1)
    elif fault == "int":
        first = first.long()
    elif fault == "transposed":
        first = first.t().contiguous().t()  # same values and shape, column-major
    valid = fault in ("none", "transposed") and other == (V if rows_match else d)
    return first, second, valid


@FUZZ
@given(dense_pair(rows_match=False))
def test_fuzz_scores(case):
    E_, P_, valid = case
    event("valid" if valid else "invalid")
    if not valid:
        with pytest.raises((TypeError, ValueError)):
            kernels.scores(E_, P_)
        return
    got = kernels.scores(E_, P_)
    assert got.shape == (E_.shape[0], P_.shape[0]) and got.dtype == E_.dtype
    assert _close(
        got,
        _twin(kernels.scores, E_, P_),
        E_.double().abs() @ P_.double().abs().t(),
        E_.dtype,
        E_.shape[1],
    )


@FUZZ
@given(dense_pair(rows_match=True))
def test_fuzz_weighted_rows(case):
    E_, G_, valid = case
    event("valid" if valid else "invalid")
    if not valid:
        with pytest.raises((TypeError, ValueError)):
            kernels.weighted_rows(E_, G_)
        return
    got = kernels.weighted_rows(E_, G_)
    assert got.shape == (G_.shape[1], E_.shape[1])
    assert _close(
        got,
        _twin(kernels.weighted_rows, E_, G_),
        G_.double().abs().t() @ E_.double().abs(),
        E_.dtype,
        E_.shape[0],
    )


@FUZZ
@given(
    dense_pair(rows_match=True),
    sizes,
    st.sampled_from(
        ["none"] * 5 + ["out rows", "out dtype", "P rows", "P dtype", "P device"]
    ),
)
def test_fuzz_low_rank(case, d, fault):
    G_, _, _ = case  # the first of the pair in the role of G (V, J): any layout
    G_ = G_.to(F64) if G_.dtype not in (F32, F64) else G_
    V, J = G_.shape
    other = F32 if G_.dtype == F64 else F64
    P_ = _randn(
        J + (fault == "P rows"),
        d,
        dtype=other if fault == "P dtype" else G_.dtype,
        seed=V + d,
    )
    P_ = P_.to("meta") if fault == "P device" else P_
    out = torch.full(
        (V + (fault == "out rows"), d),
        torch.nan,
        dtype=other if fault == "out dtype" else G_.dtype,
    )
    event("valid" if fault == "none" else "invalid")
    if fault != "none":
        with pytest.raises((TypeError, ValueError)):
            kernels.low_rank(G_, P_, out)
        return
    assert kernels.low_rank(G_, P_, out) is out
    want = _twin(kernels.low_rank, G_, P_, torch.empty_like(out))
    assert _close(out, want, G_.double().abs() @ P_.double().abs(), G_.dtype, J)


@st.composite
def csr_case(draw):
    """A random sparse CSR matrix and a dense block, with, by chance, one fault in
    either."""
    n, m, J = draw(st.integers(0, 9)), draw(st.integers(1, 9)), draw(st.integers(0, 18))
    dtype = draw(dtypes)
    lengths = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    indptr = [0]
    for k in lengths:
        indptr.append(indptr[-1] + k)
    nnz = indptr[-1]
    indices = draw(st.lists(st.integers(0, m - 1), min_size=nnz, max_size=nnz))
    values = _randn(nnz, dtype=dtype, seed=draw(st.integers(0, 99)))
    X = _randn(m, J, dtype=dtype, seed=draw(st.integers(0, 99)))
    index_dtype = draw(st.sampled_from([I32, I32, I64]))
    faults = ["none"] * 8 + [
        "index high",
        "index negative",
        "indptr down",
        "indptr end",
        "indptr start",
        "indptr long",
        "values short",
        "X rows",
        "X dtype",
        "index dtype",
    ]
    fault = draw(st.sampled_from(faults))
    if fault == "index high" and nnz:
        indices[draw(st.integers(0, nnz - 1))] = m + draw(st.integers(0, 2**20))
    elif fault == "index negative" and nnz:
        indices[draw(st.integers(0, nnz - 1))] = -draw(st.integers(1, 2**20))
    elif fault == "indptr down" and n >= 2 and nnz:
        k = draw(st.integers(1, n - 1))
        indptr[k] = nnz + 1 if indptr[k + 1] < nnz + 1 else indptr[k + 1] + 1
    elif fault == "indptr end":
        indptr[-1] += draw(st.sampled_from([-1, 1, 1000]))
    elif fault == "indptr start" and nnz:
        indptr[0] = 1
    elif fault == "indptr long":
        indptr.append(nnz)
    elif fault == "values short" and nnz:
        values = values[:-1]
    elif fault == "X rows":
        X = _randn(m + 1, J, dtype=dtype)
    elif fault == "X dtype":
        X = X.to(F32 if dtype == F64 else F64)
    elif fault == "index dtype":
        index_dtype = torch.int16
    else:
        fault = "none"  # a fault that cannot be made at this size
    A = _csr(indptr, indices, values, (n, m), index_dtype)
    return A, X, fault == "none"


@FUZZ
@given(csr_case())
def test_fuzz_csr_times(case):
    A, X, valid = case
    event("valid" if valid else "invalid")
    if not valid:
        with pytest.raises((TypeError, ValueError)):
            kernels.csr_times(A, X)
        return
    got = kernels.csr_times(A, X)
    dense = A.to_dense().double()
    assert got.shape == (A.shape[0], X.shape[1])
    assert _close(
        got,
        _twin(kernels.csr_times, A, X),
        dense.abs() @ X.double().abs(),
        X.dtype,
        A.shape[1],
    )
    assert _close(
        got, dense @ X.double(), dense.abs() @ X.double().abs(), X.dtype, A.shape[1]
    )


# ------------------------------------------------------------------------------------
# The cache: damaged files heal, foreign files and folders are refused


@pytest.fixture(scope="module")
def quick_build(tmp_path_factory) -> Path | None:
    """The kernels compiled once with -O1 (None without a compiler)."""
    if COMPILER is None:
        return None
    target = tmp_path_factory.mktemp("quick") / "count_kernels.so"
    return target if native.compile_library(COMPILER, ["-O1"], target) else None


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch, quick_build):
    """An empty cache folder, a private temporary directory, and a quick build (-O1);
    the library of the rest of the test run is loaded again afterwards. The compiler's
    run on the kernels' source with -O1 gives the library compiled once for the module
    (``quick_build``): every build the cache makes goes through
    :func:`attnbook.engine.native.compile_library` (a temporary name, the rename, the
    checksum) without compiling the same source again; any other command runs."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNBOOK_CACHE_DIR", str(cache))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(kernels, "_FLAG_SETS", (["-O1"],))
    run = subprocess.run

    def compiled_once(cmd, *args, **kwargs):
        quick = [COMPILER, "-O1", "-shared", "-fPIC", "-o"]
        if (
            quick_build is not None
            and len(cmd) == 7
            and (cmd[:5] == quick and cmd[6] == str(native._SOURCE))
        ):
            shutil.copyfile(quick_build, cmd[5])
            return subprocess.CompletedProcess(cmd, 0, b"", b"")
        return run(cmd, *args, **kwargs)

    monkeypatch.setattr(native.subprocess, "run", compiled_once)
    kernels._build_library.cache_clear()
    yield cache
    kernels._build_library.cache_clear()


def _load() -> ctypes.CDLL | None:
    kernels._build_library.cache_clear()
    return kernels._build_library()


def _works(lib: ctypes.CDLL | None) -> bool:
    """``lib`` has the kernels and they compute ``E @ P.T``."""
    if lib is None:
        return False
    out = torch.empty(6, 2, dtype=F64)
    lib.scores_f64(E.data_ptr(), 6, 5, P.data_ptr(), 2, out.data_ptr(), 1)
    return bool(torch.allclose(out, E @ P.t(), rtol=1e-12, atol=1e-12))


def _library(cache: Path) -> Path:
    (found,) = cache.glob("count_kernels-*.so")
    return found


def _whole(target: Path) -> bool:
    """The library and its checksum agree."""
    recorded = Path(str(target) + ".sha256").read_text().strip()
    return recorded == hashlib.sha256(target.read_bytes()).hexdigest()


def _replace(path: Path, data: bytes) -> None:
    # by a rename, as a damaged file would be found; never in place: this process has
    # the old file mapped, and shrinking a mapped library in place would crash it
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _tiny_library(tmp_path: Path) -> bytes:
    """A shared library with only one of the kernels' symbols."""
    src = tmp_path / "tiny.c"
    src.write_text("int openmp_enabled(void) { return 0; }\n")
    out = tmp_path / "tiny.so"
    subprocess.run([COMPILER, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out.read_bytes()


DAMAGE = [
    "truncated",
    "empty",
    "wrong checksum",
    "no checksum",
    "checksum empty",
    "missing symbol",
    "not a library",
    "symlink",
]


@needs_compiler
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cached_library_is_rebuilt(fresh_cache, tmp_path, damage):
    assert _works(_load())
    target = _library(fresh_cache)
    good = target.read_bytes()
    checksum = Path(str(target) + ".sha256")
    if damage == "truncated":
        _replace(target, good[: len(good) // 3])
    elif damage == "empty":
        _replace(target, b"")
    elif damage == "wrong checksum":
        _replace(checksum, b"0" * 64 + b"\n")
    elif damage == "no checksum":
        checksum.unlink()
    elif damage == "checksum empty":
        _replace(checksum, b"")
    elif damage in ("missing symbol", "not a library"):  # with a checksum that matches
        data = (
            _tiny_library(tmp_path)
            if damage == "missing symbol"
            else b"\x7fELF" + b"\0" * 999
        )
        _replace(target, data)
        _replace(checksum, hashlib.sha256(data).hexdigest().encode())
    elif damage == "symlink":  # a link to a good library elsewhere is not followed
        elsewhere = tmp_path / "elsewhere.so"
        elsewhere.write_bytes(good)
        target.unlink()
        target.symlink_to(elsewhere)
    assert _works(_load())
    assert not target.is_symlink() and target.stat().st_size > 0 and _whole(target)


def _writable_by_others(path: Path) -> None:
    path.chmod(path.stat().st_mode | stat.S_IWGRP | stat.S_IWOTH)


@needs_compiler
def test_a_folder_others_can_write_to_is_refused(fresh_cache, tmp_path):
    fresh_cache.mkdir(mode=0o777)
    fresh_cache.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="can be written by other users"):
        lib = _load()
    assert _works(lib)
    assert not list(fresh_cache.iterdir())  # nothing built or loaded there
    fallback = (
        tmp_path / "tmp" / f"attnbook-{os.getuid()}"
    )  # the per-user folder, mode 0700
    assert (
        stat.S_IMODE(fallback.stat().st_mode) == 0o700
        and len(list(fallback.glob("*.so"))) == 1
    )


@needs_compiler
def test_a_planted_temporary_folder_is_refused_for_a_private_one(fresh_cache, tmp_path):
    # the cache folder and the per-user temporary folder are both open to others: the
    # library is built in a fresh private folder of this process
    fresh_cache.mkdir()
    planted = tmp_path / "tmp" / f"attnbook-{os.getuid()}"
    planted.mkdir()
    for folder in (fresh_cache, planted):
        _writable_by_others(folder)
    with pytest.warns(RuntimeWarning, match="can be written by other users"):
        lib = _load()
    assert _works(lib)
    assert not list(planted.iterdir()) and not list(fresh_cache.iterdir())
    (private,) = (tmp_path / "tmp").glob("attnbook-kernels-*")
    st_ = private.stat()
    assert st_.st_uid == os.getuid() and stat.S_IMODE(st_.st_mode) == 0o700


@needs_compiler
def test_a_library_others_can_write_to_is_not_loaded(fresh_cache):
    assert _works(_load())
    target = _library(fresh_cache)
    _writable_by_others(target)
    with pytest.warns(RuntimeWarning, match=f"not loading {target}"):
        assert _works(_load())
    assert not target.stat().st_mode & (
        stat.S_IWGRP | stat.S_IWOTH
    )  # replaced by a new build


def _root_only():
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("making a file or folder of another user needs root")


@needs_compiler
def test_a_library_of_another_user_is_not_loaded(fresh_cache):
    _root_only()
    assert _works(_load())
    target = _library(fresh_cache)
    os.chown(target, 4242, 4242)
    with pytest.warns(RuntimeWarning, match="belongs to user id 4242"):
        assert _works(_load())
    assert target.stat().st_uid == os.getuid() and _whole(target)


@needs_compiler
def test_a_folder_of_another_user_is_refused(fresh_cache, tmp_path):
    _root_only()
    fresh_cache.mkdir(mode=0o755)
    os.chown(fresh_cache, 4242, 4242)
    with pytest.warns(RuntimeWarning, match="belongs to user id 4242"):
        assert _works(_load())
    assert not list(fresh_cache.iterdir())


def test_without_a_working_compiler_the_torch_twins_run(fresh_cache, monkeypatch):
    monkeypatch.setenv("CC", "/bin/false")
    with pytest.warns(RuntimeWarning, match="uses torch operations instead"):
        assert _load() is None
    assert kernels.backend("cpu") == "torch"
    assert torch.allclose(kernels.scores(E, P), E @ P.t())


# ------------------------------------------------------------------------------------
# AddressSanitizer: the kernel tests once more against an instrumented build


ASAN_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address", "-fopenmp"]
# the C-level cases: every pass, shape and backend of the kernel tests, the bad inputs
# and the fuzz of this file (fewer examples); not the cache and build tests
ASAN_SELECTION = [
    "tests/engine/test_kernels.py",
    "-k",
    "not fallback_build and not cache_folders",
    "tests/engine/test_kernels_sanitized.py::test_bad_input_gives_a_clear_error",
    "tests/engine/test_kernels_sanitized.py::test_empty_sizes_give_empty_results",
    "tests/engine/test_kernels_sanitized.py::test_the_c_kernels_refuse_impossible_sizes",
    "tests/engine/test_kernels_sanitized.py::test_a_checked_matrix_is_checked_again_after_a_change",
    "tests/engine/test_kernels_sanitized.py::test_fuzz_scores",
    "tests/engine/test_kernels_sanitized.py::test_fuzz_weighted_rows",
    "tests/engine/test_kernels_sanitized.py::test_fuzz_low_rank",
    "tests/engine/test_kernels_sanitized.py::test_fuzz_csr_times",
]


def _asan_runtime() -> str | None:
    if COMPILER is None:
        return None
    found = subprocess.run(
        [COMPILER, "-print-file-name=libasan.so"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return found if found and os.path.isabs(found) and os.path.exists(found) else None


@pytest.fixture(scope="module")
def asan_build(tmp_path_factory):
    """``(library, runtime)``: the kernels built with AddressSanitizer and its
    runtime."""
    if COMPILER is None:
        pytest.skip("no C compiler: the AddressSanitizer build cannot be made")
    runtime = _asan_runtime()
    if runtime is None:
        pytest.skip(
            f"{COMPILER} has no AddressSanitizer runtime (libasan.so not found)"
        )
    target = tmp_path_factory.mktemp("asan") / "count_kernels_asan.so"
    flags = (
        ASAN_FLAGS
        if native.compile_library(COMPILER, ASAN_FLAGS, target)
        else ASAN_FLAGS[:-1]
    )
    if not target.exists() and not native.compile_library(COMPILER, flags, target):
        pytest.skip(f"{COMPILER} cannot build with -fsanitize=address")
    return target, runtime


def _run_under_asan(asan_build, script: str, *args: str) -> subprocess.CompletedProcess:
    library, runtime = asan_build
    env = dict(
        os.environ,
        LD_PRELOAD=runtime,
        ATTNBOOK_FUZZ_EXAMPLES="25",
        ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0",
    )
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(library), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_sanitizer_catches_an_overflow(asan_build):
    # the harness works: a call with an output buffer one row short is reported
    done = _run_under_asan(
        asan_build,
        """
        import ctypes, sys
        lib = ctypes.CDLL(sys.argv[1])
        V, d, J = 64, 16, 2
        E = ctypes.create_string_buffer(8 * V * d)
        P = ctypes.create_string_buffer(8 * J * d)
        out = ctypes.create_string_buffer(8 * (V - 1) * J)  # one row short
        n = ctypes.c_int64
        lib.scores_f64(E, n(V), n(d), P, n(J), out, 1)
    """,
    )
    assert done.returncode != 0 and "heap-buffer-overflow" in done.stderr, done.stderr[
        -2000:
    ]


def test_the_kernel_tests_pass_under_address_sanitizer(asan_build):
    # two threads, so that the per-thread shares of weighted_rows and csr_times are
    # exercised
    done = _run_under_asan(
        asan_build,
        """
        import ctypes, sys
        import pytest, torch
        from attnbook.engine import kernels, native
        lib = native.declare(ctypes.CDLL(sys.argv[1]))
        kernels._build_library = lambda: lib
        torch.set_num_threads(2)
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[2:]]))
    """,
        *ASAN_SELECTION,
    )
    report = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert "AddressSanitizer" not in done.stderr, report
    assert " passed" in done.stdout and " failed" not in done.stdout, report
