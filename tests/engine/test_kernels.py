"""The count engine's passes (attnbook.kernels): compiled C and torch give the plain
products."""

import ctypes
import shutil
import sys
from pathlib import Path

import pytest
import torch

from attnbook.engine import kernels, native
from attnbook.engine.counts import TokenCounts

BACKENDS = ["compiled", "torch"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Run a test once with the compiled kernels and once with their torch twins."""
    if request.param == "torch":
        with kernels.torch_only():
            assert kernels.backend("cpu") == "torch"
            yield request.param
    else:
        assert kernels.backend("cpu") == "compiled"
        yield request.param


def test_compiled_kernels_are_built_where_a_compiler_exists():
    # The engine's speed on CPU rests on them: on Linux with a C compiler they must
    # load.
    if not (
        sys.platform.startswith("linux") and (shutil.which("cc") or shutil.which("gcc"))
    ):
        pytest.fail("this test expects Linux with a C compiler, as on CI and Colab")
    assert kernels.native_library() is not None
    assert kernels.backend("cpu") == "compiled"
    assert kernels.backend("meta") == "torch"
    with kernels.torch_only():
        assert kernels.native_library() is None
        assert kernels.backend("cpu") == "torch"
    assert kernels.backend("cpu") == "compiled"


# d = 37 and 2048 + 5 are not multiples of the 64-wide inner loops; J = 5 and 17 take
# the general paths (17 is over the compiled CSR kernel's limit and falls back to
# torch).
SHAPES = [
    (1, 1, 1),
    (13, 37, 2),
    (50, 2053, 2),
    (31, 64, 1),
    (9, 130, 3),
    (20, 70, 5),
    (15, 66, 6),  # the K = 5 classes of the multiclass model: J = 6, written out
    (7, 33, 7),  # the general path
    (11, 40, 17),
]


def _random(shape, dtype, seed):
    return torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    ).to(dtype)


def _tolerance(dtype, size):
    # one rounding per term of a length-`size` sum, relative to the sum of |terms|
    return (torch.finfo(dtype).eps * size * 4) if dtype == torch.float32 else 1e-13


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("V, d, J", SHAPES)
def test_dense_passes_match_plain_products(backend, dtype, V, d, J):
    E, P, G = (
        _random((V, d), dtype, 1),
        _random((J, d), dtype, 2),
        _random((V, J), dtype, 3),
    )

    def exact(a, b):
        return a.double() @ b.double()

    scale_s = E.double().abs() @ P.double().abs().t()
    err = (kernels.scores(E, P).double() - exact(E, P.t())).abs()
    assert bool((err <= _tolerance(dtype, d) * scale_s + 1e-300).all())
    scale_q = G.double().abs().t() @ E.double().abs()
    err = (kernels.weighted_rows(E, G).double() - exact(G.t(), E)).abs()
    assert bool((err <= _tolerance(dtype, V) * scale_q + 1e-300).all())
    out = torch.full((V, d), torch.nan, dtype=dtype)
    assert kernels.low_rank(G, P, out) is out
    scale_d = G.double().abs() @ P.double().abs()
    err = (out.double() - exact(G, P)).abs()
    assert bool((err <= _tolerance(dtype, J) * scale_d + 1e-300).all())


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_low_rank_writes_unaligned_rows(backend, offset):
    # streaming stores need aligned addresses: rows that start anywhere must still be
    # right
    V, d, J = 7, 45, 2
    G, P = _random((V, J), torch.float32, 4), _random((J, d), torch.float32, 5)
    flat = torch.full((V * d + offset,), -7.0)
    out = flat[offset:].view(V, d)
    kernels.low_rank(G, P, out)
    assert torch.allclose(out, G @ P, rtol=1e-6, atol=1e-6)
    assert bool((flat[:offset] == -7.0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("J", [1, 2, 3, 5, 17])
def test_csr_times_matches_dense_product(backend, dtype, J):
    gen = torch.Generator().manual_seed(J)
    seqs = [
        torch.randint(0, 60, (int(n),), generator=gen)
        for n in torch.randint(1, 90, (40,), generator=gen)
    ]
    counts = TokenCounts.from_sequences(seqs, 60)
    A, At = counts.sparse_matrices(dtype)
    dense = counts.to_dense().to(torch.float64)
    X, Y = _random((60, J), dtype, 6), _random((40, J), dtype, 7)
    assert torch.allclose(
        kernels.csr_times(A, X).double(),
        dense @ X.double(),
        rtol=_tolerance(dtype, 90),
        atol=_tolerance(dtype, 90),
    )
    assert torch.allclose(
        kernels.csr_times(At, Y).double(),
        dense.t() @ Y.double(),
        rtol=_tolerance(dtype, 40),
        atol=_tolerance(dtype, 40),
    )


def test_results_do_not_depend_on_timing():
    # per-thread sums are added in a fixed order: repeated calls give identical bits
    E, G = _random((3001, 96), torch.float32, 8), _random((3001, 2), torch.float32, 9)
    first = kernels.weighted_rows(E, G)
    for _ in range(5):
        assert torch.equal(kernels.weighted_rows(E, G), first)


def test_non_contiguous_inputs_take_the_torch_path():
    E = _random((40, 30), torch.float64, 10).t()  # (30, 40), not contiguous
    P = _random((2, 40), torch.float64, 11)
    assert torch.allclose(kernels.scores(E, P), E @ P.t(), atol=1e-13, rtol=0)


@pytest.mark.parametrize("flags", kernels._FLAG_SETS, ids=" ".join)
def test_every_fallback_build_gives_the_same_results(tmp_path, monkeypatch, flags):
    # each set of compiler flags the loader may fall back to (no -march=native, no
    # OpenMP)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.fail("this test expects a C compiler, as on CI and Colab")
    target = tmp_path / "count_kernels.so"
    assert native.compile_library(compiler, list(flags), target)
    lib = native.declare(ctypes.CDLL(str(target)))
    assert lib.openmp_enabled() == ("-fopenmp" in flags)
    monkeypatch.setattr(kernels, "_build_library", lambda: lib)
    E, P, G = (
        _random(s, torch.float64, 20 + i)
        for i, s in enumerate([(37, 70), (2, 70), (37, 2)])
    )
    assert torch.allclose(kernels.scores(E, P), E @ P.t(), atol=1e-12, rtol=0)
    assert torch.allclose(kernels.weighted_rows(E, G), G.t() @ E, atol=1e-12, rtol=0)
    out = torch.empty_like(E)
    assert torch.allclose(kernels.low_rank(G, P, out), G @ P, atol=1e-12, rtol=0)


def test_cache_folders_and_an_unwritable_cache(tmp_path, monkeypatch):
    # the chosen folder first, then a per-user folder in the temporary directory
    monkeypatch.setenv("ATTNBOOK_CACHE_DIR", str(tmp_path / "here"))
    folders = native.cache_dirs()
    assert folders[0] == tmp_path / "here" and len(folders) == 2
    monkeypatch.delenv("ATTNBOOK_CACHE_DIR")
    folders = native.cache_dirs()
    assert folders[0] == Path.home() / ".cache" / "attnbook" and len(folders) == 2
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    compiler = shutil.which("cc") or shutil.which("gcc") or "cc"
    assert (
        native.compile_library(compiler, ["-O3"], blocker / "count_kernels.so") is False
    )
