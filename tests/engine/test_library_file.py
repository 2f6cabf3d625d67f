"""A cached compiled-kernel library cut short, with its checksum rewritten to match:
never handed to the loader (which would crash the process with SIGBUS when it maps the
missing part), but rebuilt (attnbook.engine.native._elf_problem)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnbook.engine import native

from conftest import ROOT

COMPILER = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C compiler")

#: Loads the kernels from the cache named by ATTNBOOK_CACHE_DIR (a quick -O1 build)
#: and runs one of them.
_LOAD = textwrap.dedent(
    """
    import ctypes, torch
    from attnbook.engine import kernels
    kernels._FLAG_SETS = (["-O1"],)
    lib = kernels._build_library()
    E = torch.arange(6.0, dtype=torch.float64).reshape(3, 2)
    P = torch.ones(1, 2, dtype=torch.float64)
    out = torch.empty(3, 1, dtype=torch.float64)
    lib.scores_f64(E.data_ptr(), 3, 2, P.data_ptr(), 1, out.data_ptr(), 1)
    assert out.flatten().tolist() == [1.0, 5.0, 9.0], out
    print("kernels ok")
    """
)


def _load(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTNBOOK_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", _LOAD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@needs_compiler
def test_a_library_cut_short_with_a_matching_checksum_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    first = _load(cache)
    assert first.returncode == 0, first.stderr
    (library,) = cache.glob("count_kernels-*.so")
    whole = library.read_bytes()
    cut = whole[: len(whole) // 2]
    _replace(library, cut)
    _replace(
        Path(f"{library}.sha256"), (hashlib.sha256(cut).hexdigest() + "\n").encode()
    )
    assert native._elf_problem(cut) is not None
    again = _load(cache)
    assert again.returncode == 0, (again.returncode, again.stderr)
    assert "kernels ok" in again.stdout
    assert native._elf_problem(library.read_bytes()) is None  # rebuilt whole
    assert library.stat().st_size == len(whole)


def test_elf_problems_are_named(tmp_path):
    assert native._elf_problem(b"") == "not an ELF file"
    assert native._elf_problem(b"MZ" + b"\0" * 100) == "not an ELF file"
    assert "another class" in native._elf_problem(b"\x7fELF" + b"\0" * 999)
    own = Path(sys.executable).resolve().read_bytes()[:64]  # an executable, not a .so
    assert native._elf_problem(own) in (
        "not a shared library",  # a static or non-PIE interpreter
        "cut short (64 bytes, within its program headers)",  # a PIE one (ET_DYN)
    )
