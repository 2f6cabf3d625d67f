"""The compiled kernels' library: built, cached, verified and loaded.

:func:`load_library` compiles ``count_kernels.c`` with the machine's C compiler (``cc``,
or ``$CC``) and caches the library under ``$ATTNBOOK_CACHE_DIR`` (default
``~/.cache/attnbook``, then ``attnbook-<uid>`` in the temporary directory, then a
private folder of the process).

A cached library is loaded only when it can be trusted and is whole: its folder and the
file belong to the current user and no one else can write to them, and the file's sha256
is the one written beside it (``<library>.sha256``, written after the library was
renamed into place), and it is a whole shared library of this machine: an ELF header of
this machine's class and byte order, and a size that holds its program headers, every
segment the loader maps and its section headers (:func:`_elf_problem`; a file cut short
whose checksum was rewritten to match would otherwise crash the process with SIGBUS
inside the loader). A missing, damaged or incomplete library is rebuilt; an untrusted
folder or file is refused with a warning. The file checked is the file loaded (through
its open descriptor)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["cache_dirs", "compile_library", "declare", "load_library"]

_SOURCE = Path(__file__).with_name("count_kernels.c")
_SOURCES = (
    _SOURCE,
    _SOURCE.with_name("count_kernels_typed.h"),
    _SOURCE.with_name("fused_step_typed.h"),
)  # the .c includes the .h files
_CHECKSUM_SUFFIX = ".sha256"  # count_kernels-<key>.so.sha256: the hex sha256 of the .so
_UNSAFE_MODE = stat.S_IWGRP | stat.S_IWOTH  # others may write: not trusted


def cache_dirs() -> list[Path]:
    """Where a built library may be kept, in order: ``$ATTNBOOK_CACHE_DIR`` when set,
    else ``~/.cache/attnbook``; then ``attnbook-<uid>`` in the temporary directory (a
    home that cannot be written to). A folder is used only when :func:`_folder_refusal`
    accepts it; when none is, a fresh private folder (:func:`_process_folder`) is made
    for this process."""
    first = (
        Path(os.environ["ATTNBOOK_CACHE_DIR"])
        if os.environ.get("ATTNBOOK_CACHE_DIR")
        else Path.home() / ".cache" / "attnbook"
    )
    return [first, Path(tempfile.gettempdir()) / f"attnbook-{os.getuid()}"]


def _refusal(st: os.stat_result, what: str) -> str | None:
    """Why a folder or file with status ``st`` may not be trusted (``None`` when it
    may): it must belong to the current user and not be writable by the group or by
    others."""
    if st.st_uid != os.getuid():
        return (
            f"{what} belongs to user id {st.st_uid}, "
            f"not to the current user {os.getuid()}"
        )
    if st.st_mode & _UNSAFE_MODE:
        return (
            f"{what} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
        )
    return None


def _folder_refusal(folder: Path) -> tuple[str, bool] | None:
    """Make ``folder`` (mode 0700) when it is missing; ``None`` when it is a folder the
    current user owns and no one else can write to, else ``(reason, distrusted)``:
    ``distrusted`` when the folder exists but belongs to someone else or others may
    write to it."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        st = os.stat(folder)
    except OSError as err:  # e.g. a home that cannot be written to
        return f"{folder} cannot be made ({err.strerror})", False
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder", False
    reason = _refusal(st, f"the folder {folder}")
    return None if reason is None else (reason, True)


def _process_folder() -> Path | None:
    """A new private folder (mode 0700, unpredictable name) in the temporary directory,
    removed when the process ends: the last place a library may be built when no cache
    folder is safe."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="attnbook-kernels-"))
    except OSError:
        return None
    atexit.register(shutil.rmtree, folder, True)
    return None if _refusal(os.stat(folder), str(folder)) else folder


def _trusted_folders() -> Iterator[Path]:
    """The cache folders that pass :func:`_folder_refusal` (a warning for each one
    refused as untrusted), then a private folder for this process when none did."""
    found = False
    for folder in cache_dirs():
        refused = _folder_refusal(folder)
        if refused is None:
            found = True
            yield folder
        elif refused[1]:
            warnings.warn(
                f"compiled kernels: not using the cache folder: {refused[0]}",
                RuntimeWarning,
                stacklevel=4,
            )
    if not found and (folder := _process_folder()) is not None:
        yield folder


def _read_trusted(path: Path) -> tuple[int, bytes] | None:
    """Open ``path`` (not through a symbolic link) and read it when it is a regular file
    that the current user owns and no one else can write to; ``(descriptor, contents)``
    or ``None`` (missing, refused with a warning, or unreadable). The caller closes the
    descriptor."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        reason = (
            "not a regular file"
            if not stat.S_ISREG(st.st_mode)
            else _refusal(st, str(path))
        )
        if reason is not None:
            warnings.warn(
                f"compiled kernels: not loading {path}: {reason}",
                RuntimeWarning,
                stacklevel=5,
            )
            os.close(fd)
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return fd, b"".join(chunks)
    except OSError:
        os.close(fd)
        return None


_PT_LOAD = 1


def _elf_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole ELF shared library of this machine (``None`` when
    it is): the magic number, this machine's class (32 or 64 bits) and byte order, a
    shared object, and a file long enough for its program headers, every segment the
    loader maps (``PT_LOAD``) and its section headers."""
    if len(data) < 16 or data[:4] != b"\x7fELF":
        return "not an ELF file"
    bits = {1: 32, 2: 64}.get(data[4])
    order = {1: "<", 2: ">"}.get(data[5])
    own_order = "<" if sys.byteorder == "little" else ">"
    if bits != struct.calcsize("P") * 8 or order != own_order:
        return "an ELF file of another class or byte order"
    header = order + ("HHIQQQIHHHHHH" if bits == 64 else "HHIIIIIHHHHHH")
    if len(data) < 16 + struct.calcsize(header):
        return f"cut short ({len(data)} bytes, within its ELF header)"
    fields = struct.unpack_from(header, data, 16)  # e_type ... e_shstrndx
    e_type, phoff, shoff = fields[0], fields[4], fields[5]
    phentsize, phnum, shentsize, shnum = fields[8:12]
    if e_type != 3:  # ET_DYN
        return "not a shared library"
    if phoff + phnum * phentsize > len(data):
        return f"cut short ({len(data)} bytes, within its program headers)"
    program = order + ("IIQQQQQQ" if bits == 64 else "IIIIIIII")
    if phentsize < struct.calcsize(program):
        return "program headers of an impossible size"
    at = (2, 5) if bits == 64 else (1, 4)  # p_offset, p_filesz
    for i in range(phnum):
        segment = struct.unpack_from(program, data, phoff + i * phentsize)
        offset, filesz = segment[at[0]], segment[at[1]]
        if segment[0] == _PT_LOAD and offset + filesz > len(data):
            return (
                f"cut short ({len(data)} bytes; a segment it maps ends at byte "
                f"{offset + filesz})"
            )
    if shnum and shoff + shnum * shentsize > len(data):
        return f"cut short ({len(data)} bytes, within its section headers)"
    return None


def _checksum_path(target: Path) -> Path:
    return target.with_name(target.name + _CHECKSUM_SUFFIX)


_next_descriptor = 64  # see _dlopen_descriptor


def _dlopen_descriptor(fd: int, target: Path) -> ctypes.CDLL:
    """Load the library open as ``fd``: through ``/proc/self/fd`` under a name never
    used before in this process (the loader returns an already loaded library when a
    name repeats, even when the file has been replaced since); by ``target``'s name
    where ``/proc/self/fd`` is missing."""
    global _next_descriptor
    if not Path(f"/proc/self/fd/{fd}").exists():
        return ctypes.CDLL(str(target))
    import fcntl

    fresh = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, max(_next_descriptor, fd + 1))
    _next_descriptor = fresh + 1
    try:
        return ctypes.CDLL(f"/proc/self/fd/{fresh}")
    finally:
        os.close(fresh)


def _load_cached(target: Path) -> ctypes.CDLL | None:
    """The library at ``target`` when it can be trusted and is whole: the file and its
    checksum file pass :func:`_read_trusted`, the sha256 of the file is the one
    recorded, and it has every kernel; else ``None`` (the caller rebuilds). The file
    checked is the file loaded (:func:`_dlopen_descriptor`)."""
    opened = _read_trusted(target)
    if opened is None:
        return None
    fd, data = opened
    try:
        recorded = _read_trusted(_checksum_path(target))
        if recorded is None:
            return None
        os.close(recorded[0])
        if (
            recorded[1].decode("ascii", "replace").strip()
            != hashlib.sha256(data).hexdigest()
        ):
            return None
        if _elf_problem(data) is not None:  # never handed to the loader: SIGBUS
            return None
        return declare(_dlopen_descriptor(fd, target))
    except (OSError, AttributeError):  # not a loadable library, or a kernel missing
        return None
    finally:
        os.close(fd)


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


def _write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file in the same folder and a
    rename."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compile_library(compiler: str, flags: list[str], target: Path) -> bool:
    """Build the shared library at ``target``: compiled under a temporary name in the
    same folder, renamed into place (parallel processes may race; each rename is
    atomic), then its sha256 written beside it (``<target>.sha256``), also by a rename.
    ``False`` on failure."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / target.name
            cmd = [compiler, *flags, "-shared", "-fPIC", "-o", str(out), str(_SOURCE)]
            done = subprocess.run(cmd, check=False, capture_output=True, timeout=120)
            if done.returncode != 0 or not out.exists():
                return False
            os.chmod(out, 0o755)
            digest = hashlib.sha256(out.read_bytes()).hexdigest()
            os.replace(out, target)
        _write_atomically(_checksum_path(target), (digest + "\n").encode("ascii"))
    except (
        OSError,
        subprocess.SubprocessError,
    ):  # no writable cache, no working compiler
        return False
    return True


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give the kernels of ``lib`` their argument types (``AttributeError`` when one is
    missing). Every kernel returns 0, or nonzero when its sizes are impossible."""
    P, I64, INT, F64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
    for suffix in ("f32", "f64"):
        for name, args in (
            ("scores", [P, I64, I64, P, I64, P, INT]),
            ("weighted_rows", [P, I64, I64, P, I64, P, INT]),
            ("low_rank", [P, P, I64, I64, I64, P, INT]),
            ("csr_times", [P, P, P, I64, P, I64, P, INT]),
            ("fused_step", [P, P, P, I64, I64, P, P, I64, P, P, *[F64] * 6, INT]),
            ("logistic_counts", [P, P, P, I64, P, I64, P, P, P, P, INT]),
        ):
            fn = getattr(lib, f"{name}_{suffix}")
            fn.argtypes, fn.restype = args, INT
    lib.openmp_enabled.restype = INT
    return lib


def load_library(flag_sets: Sequence[list[str]]) -> ctypes.CDLL | None:
    """Compile (once per machine and source) and load the kernels; ``None`` when
    impossible.

    ``flag_sets`` are tried in order: the first build that compiles and loads is used.

    A cached library is loaded only from a trusted folder and when :func:`_load_cached`
    accepts it; a missing, damaged or incomplete one is rebuilt. When no build can be
    loaded although a compiler exists, a warning says that the torch twins run instead.
    """
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if (
        compiler is None
        or not hasattr(os, "getuid")
        or not all(p.exists() for p in _SOURCES)
    ):
        return None
    source = b"".join(path.read_bytes() for path in _SOURCES)
    folders = list(_trusted_folders())
    for flags in flag_sets:
        key = hashlib.sha256(
            source
            + repr((compiler, flags, _machine_key(), sys.version_info[:2])).encode()
        ).hexdigest()[:16]
        for folder in folders:
            target = folder / f"count_kernels-{key}.so"
            lib = _load_cached(target)
            if lib is None and compile_library(compiler, flags, target):
                lib = _load_cached(target)
            if lib is not None:
                return lib
    warnings.warn(
        "compiled kernels: no build could be made or loaded; the count engine uses "
        "torch operations instead",
        RuntimeWarning,
        stacklevel=3,
    )
    return None
