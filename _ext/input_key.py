"""What a chapter's numbers depend on, as one key: the *input key* of its execution.

A chapter's glued numbers and checks are a function of

- its **code cells** (source and metadata, with the notebook's kernel; not its
  markdown, which changes no number);
- the **source of attnbook** it runs: the modules its code cells import, followed
  through every ``import`` of those modules (inside functions too), with the packages
  above each one and the other files of their folders (the compiled kernels' C
  source). A chapter, or a module it reaches, that imports by name at run time
  (``importlib.import_module``, ``__import__``) or whose code does not parse makes the
  chapter depend on all of attnbook, since what it imports cannot be known from the
  source;
- the **process that runs the chapter's kernel**, :mod:`_ext.chapter_run` (and what
  of ``_ext`` it imports): how the kernel is started, in which folder, with which
  timeout. The rest of ``_ext`` (the scheduling of the chapters, the records read
  back, the pages, the dashboard, the paper map) changes no number: the pages are
  rebuilt from the records at every build;
- the **lock** ``requirements.txt`` and the Python version;
- the **review data**, for a chapter that reaches the module that reads it
  (:data:`DATA_MODULE`): the SHA-256 of every file of the mirror
  (``ATTNBOOK_DATA_DIR``), or the hub recipe when no mirror is set;
- the **files beside the chapter**: the Python modules kept there that its cells
  import (followed, like attnbook's, through their imports), and the files that its
  cells or the modules it imports name (:func:`files_beside`: measurements kept there,
  such as ``gpu_measurements.json``);
- the **settings that change numbers**: the thread counts, the device and engine
  switches (every ``ATTNBOOK_*`` variable but those of :data:`NOT_SETTINGS`), the
  processor and the accelerator.

:func:`input_keys` gives, per chapter, ``{"key": <SHA-256>, "parts": {...}}``: the
parts are small digests (and the settings in plain text), so that a record made from
other inputs can be told apart from the current tree part by part
(:func:`what_changed`). The execution (:mod:`_ext.execution`) and the build
(:mod:`_ext.sphinxext`) compute the same keys and give them to the chapters' kernels
(``ATTNBOOK_INPUT_KEYS``), which write them into their records
(:mod:`attnbook.book.records`); a record and an executed notebook are reused only
while their key is the current one.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_MODULE",
    "NOT_SETTINGS",
    "code_digest",
    "cell_imports",
    "import_closure",
    "input_keys",
    "what_changed",
]

#: The module that reads the review data: a chapter that reaches it depends on the data.
DATA_MODULE = "attnbook.data.reviews"
#: ``ATTNBOOK_*`` variables that change no number (where things are written, how many
#: chapters run at a time, which chapters are compared, the PDFs, the install source).
NOT_SETTINGS = frozenset(
    f"ATTNBOOK_{name}"
    for name in (
        "CACHE_DIR CHECK_CHAPTERS CHROMIUM COMPARE_RECORDS DATA_DIR HTML_DIR JOBS PDF "
        "RECORD_DIR RUN_ID SCREENSHOT_DIR SOURCE TORCH_CPU_INDEX SKIP_COLAB_TEST "
        "INPUT_KEYS CORPUS_CACHE CHAPTERS_URL"
    ).split()
)
#: Other variables that change numbers: threads and GPU determinism.
SETTINGS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_VISIBLE_DEVICES",
    "TRITON_INTERPRET",
)
#: Calls that import a module named at run time.
_DYNAMIC = frozenset({"import_module", "__import__"})
_ROOT = Path(__file__).resolve().parents[1]


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- the code
def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def code_digest(nb: dict) -> str:
    """The digest of a notebook's code cells (source and metadata, in order) and its
    kernel: what the execution runs. Markdown cells do not enter it."""
    cells = [
        {
            "source": _source(c),
            "metadata": {k: v for k, v in c.get("metadata", {}).items() if k != "id"},
        }
        for c in _code_cells(nb)
    ]
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    return _sha(_canonical({"kernel": kernel, "cells": cells}))


# ----------------------------------------------------------------------- the imports
def _imports_of_tree(tree: ast.AST, package: str | None) -> tuple[set[str], bool]:
    """Module names a syntax tree imports (every ``import`` in it, at any depth; a
    ``from X import y`` gives X and X.y, which may be a module) and whether it imports
    by name at run time. ``package``: the package relative imports start from."""
    names: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if package is None:
                    continue
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, "attr", None) or getattr(func, "id", None)
            dynamic |= name in _DYNAMIC
    return names, dynamic


def cell_imports(nb: dict) -> tuple[set[str], str | None]:
    """The modules a notebook's code cells import, and why they cannot be known (None
    when they can): a cell that does not parse, or an import by name at run time.
    Lines of IPython magics and shell escapes (``%``, ``!``) are left out."""
    names: set[str] = set()
    for i, cell in enumerate(_code_cells(nb)):
        lines = [
            "" if line.lstrip().startswith(("%", "!")) else line
            for line in _source(cell).splitlines()
        ]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            return names, f"code cell {i} does not parse"
        found, dynamic = _imports_of_tree(tree, None)
        if dynamic:
            return names, f"code cell {i} imports a module named at run time"
        names |= found
    return names, None


def _modules(root: Path, package: str) -> dict[str, Path]:
    """``{module name: file}`` of every Python module of ``root/package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _module_imports(mod: str, path: Path) -> tuple[set[str], str | None]:
    """The modules a module imports and, when that cannot be known, why."""
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    try:
        tree = ast.parse(path.read_text())
    except SyntaxError:
        return set(), f"{path.name} does not parse"
    found, dynamic = _imports_of_tree(tree, package)
    return found, (f"{mod} imports a module named at run time" if dynamic else None)


def import_closure(
    start: Iterable[str],
    modules: dict[str, Path],
    parsed: dict[str, tuple[set[str], str | None]] | None = None,
) -> tuple[set[str], str | None]:
    """The modules of ``modules`` that importing ``start`` runs: each named module,
    the packages above it, and whatever they import, to the end. Returns the set and,
    when it cannot be known from the source, why (None otherwise). ``parsed`` keeps
    each module's imports between calls."""
    parsed = {} if parsed is None else parsed
    seen: set[str] = set()
    todo = [name for name in start if name]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a module runs its packages first
            mod = ".".join(parts[:i])
            if mod not in modules or mod in seen:
                continue
            seen.add(mod)
            if mod not in parsed:
                parsed[mod] = _module_imports(mod, modules[mod])
            found, unknown = parsed[mod]
            if unknown:
                return seen, unknown
            todo.extend(found)
    return seen, None


def _file_digests(
    root: Path, files: Iterable[Path], digests: dict[Path, str]
) -> dict[str, str]:
    """``{path: digest}`` of the given files (paths relative to ``root``) and of every
    other non-Python file of their folders (the C source that a module compiles);
    ``digests`` keeps each file's digest between calls."""
    files = set(files)
    for folder in {p.parent for p in files}:
        files |= {
            p
            for p in folder.iterdir()
            if p.is_file() and p.suffix not in (".py", ".pyc")
        }
    for p in files - set(digests):
        digests[p] = _sha(p.read_bytes())[:12]
    return {p.relative_to(root).as_posix(): digests[p] for p in sorted(files)}


# ---------------------------------------------------------------- data and settings
def data_digest() -> str:
    """The digest of the review data the chapters read: every file of the mirror
    (``ATTNBOOK_DATA_DIR``; names and SHA-256), or the hub recipe where none is set."""
    from attnbook.data.reviews import DATA_DIR_ENV, RECIPE

    raw = os.environ.get(DATA_DIR_ENV)
    if raw is None:
        return _sha(f"hub:{RECIPE}")
    folder = Path(raw).expanduser()
    if not folder.is_dir():  # the chapter that reads it fails with the reason
        return _sha(f"missing:{folder}")
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with open(path, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def _accelerator() -> str | None:
    """The NVIDIA GPUs the driver lists (without importing torch), or None."""
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        names = sorted(p.name for p in gpus.iterdir())
    except OSError:
        return None
    return ",".join(names) or None


def settings() -> dict[str, Any]:
    """The settings of this process that change a chapter's numbers."""
    from attnbook.runtime import cpu_name

    env = {
        k: v
        for k, v in os.environ.items()
        if (k.startswith("ATTNBOOK_") and k not in NOT_SETTINGS) or k in SETTINGS
    }
    return {
        "env": dict(sorted(env.items())),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "accelerator": _accelerator(),
    }


BESIDE_SUFFIXES = (".json", ".yml", ".yaml", ".csv")
"""Kinds of file kept beside the chapters that a chapter may read (measurements made
elsewhere, such as ``gpu_measurements.json``)."""


def files_beside(notebook: Path, nb: dict, modules: Iterable[Path]) -> dict[str, str]:
    """The files beside ``notebook`` (:data:`BESIDE_SUFFIXES`) whose name its code
    cells or a module it imports spell out, with their digests: what it reads there."""
    candidates = [
        p for p in sorted(notebook.parent.iterdir()) if p.suffix in BESIDE_SUFFIXES
    ]
    if not candidates:
        return {}
    texts = ["".join(c.get("source", "")) for c in nb.get("cells", [])]
    texts += [Path(m).read_text(errors="replace") for m in modules]
    return {
        p.name: _sha(p.read_bytes())[:12]
        for p in candidates
        if any(p.name in t for t in texts)
    }


# ------------------------------------------------------------------------- the keys
def input_keys(notebooks: Iterable[Path], root: Path = _ROOT) -> dict[str, dict]:
    """``{chapter: {"key": ..., "parts": ...}}`` for each notebook (by its stem): the
    digest of everything its numbers depend on (module docstring), from the files as
    they are now and this process's settings."""
    root = Path(root).resolve()
    # the installed package and the benchmark beside it (the Performance page runs it)
    package = {**_modules(root, "attnbook"), **_modules(root, "benchmarks")}
    ext = _modules(root, "_ext")
    parsed: dict[str, tuple[set[str], str | None]] = {}
    digests: dict[Path, str] = {}
    ext_used, _ = import_closure(["_ext.chapter_run"], ext)
    shared = {
        "ext": _sha(
            "".join(_sha(ext[m].read_bytes()) for m in sorted(ext_used) if m in ext)
        )[:16],
        "lock": _sha((root / "requirements.txt").read_bytes())[:16],
        "settings": settings(),
    }
    data: str | None = None
    out = {}
    for path in notebooks:
        nb = json.loads(Path(path).read_text())
        # modules kept beside the chapter: its kernel imports them by their name
        code = {p.stem: p for p in sorted(Path(path).parent.glob("*.py"))}
        modules = {**package, **code}
        wanted, unknown = cell_imports(nb)
        used, unknown_deep = import_closure(wanted, modules, parsed)
        unknown = unknown or unknown_deep
        if unknown:
            used = set(modules)
        ours = [m for m in used if m in package and m not in code]
        parts: dict[str, Any] = {
            "code": code_digest(nb)[:16],
            "attnbook": _file_digests(root, (package[m] for m in ours), digests),
            "attnbook_scope": f"all ({unknown})" if unknown else "imports",
            **shared,
        }
        if DATA_MODULE in used:
            data = data or data_digest()
            parts["data"] = data[:16]
        beside = files_beside(Path(path), nb, (modules[m] for m in used))
        beside |= {
            code[m].name: _sha(code[m].read_bytes())[:12] for m in used & set(code)
        }
        if beside:
            parts["beside"] = beside
        out[Path(path).stem] = {"key": _sha(_canonical(parts)), "parts": parts}
    return out


def what_changed(recorded: dict | None, current: dict) -> str:
    """In words, what differs between the inputs a record was made from and the
    current ones (both as :func:`input_keys` gives them); empty when the keys agree."""
    if not isinstance(recorded, dict) or "parts" not in recorded:
        return "it carries no input key"
    if recorded.get("key") == current["key"]:
        return ""
    old, new = recorded["parts"], current["parts"]
    said = []
    for part in sorted(set(old) | set(new)):
        a, b = old.get(part), new.get(part)
        if a == b:
            continue
        if (
            part in ("attnbook", "beside")
            and isinstance(a, dict)
            and isinstance(b, dict)
        ):
            files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            what = "attnbook" if part == "attnbook" else "the files beside it"
            said.append(f"{what} (" + ", ".join(files) + ")")
        elif part == "settings" and isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            ea, eb = a.get("env", {}), b.get("env", {})
            named = [k for k in keys if k != "env"] + sorted(
                k for k in set(ea) | set(eb) if ea.get(k) != eb.get(k)
            )
            said.append("the settings (" + ", ".join(named) + ")")
        else:
            said.append(
                {
                    "code": "its code cells",
                    "ext": "the process that runs its kernel (_ext/chapter_run.py)",
                    "lock": "the lock (requirements.txt)",
                    "data": "the review data",
                    "attnbook_scope": "the attnbook modules it reaches",
                }.get(part, part)
            )
    return "its inputs changed since its record: " + ", ".join(said)
