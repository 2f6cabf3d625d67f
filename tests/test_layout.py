"""The package's architecture: layers that import only downward, no private names across
modules, no imports hidden in functions, small modules; the book's build machinery
(``_ext/``) and the benchmark (``benchmarks/``) outside the package, which never imports
them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnbook"
EXTENSION = PACKAGE.parent / "_ext"  # the book's build machinery, not installed
# lowest first: a module may import its own layer and the layers before it
LAYERS = [
    "validation",
    "runtime",
    "engine",
    "data",
    "models",
    "theory",
    "experiments",
    "book",
]
# the GPU form: imported only where a computation runs on CUDA, inside that branch
GPU_MODULES = ("attnbook.engine.gpu", "benchmarks.gpu")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__")
        out[name] = path
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[ast.AST, str, list[str], bool]]:
    """``(node, module, names, at_top_level)`` for every import of attnbook in
    ``path``."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: relative import of {node.module}")
            if node.module.startswith("attnbook"):
                names = [a.name for a in node.names]
                found.append((node, node.module, names, id(node) in top))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("attnbook"):
                    found.append((node, a.name, [], id(node) in top))
    return found


def test_every_module_is_in_a_layer():
    for name in _modules():
        if name == "attnbook":
            continue
        assert _layer(name) in LAYERS, f"{name} is in no layer of {LAYERS}"


def test_imports_go_only_downward():
    # downward over a total order of layers: the layer graph cannot have a cycle
    for name, path in _modules().items():
        src = _layer(name)
        for _, module, names, _ in _imports(path):
            targets = (
                [module] if module != "attnbook" else [f"attnbook.{n}" for n in names]
            )
            for target in targets:
                dst = _layer(target)
                if dst is None or dst == src:
                    continue
                assert LAYERS.index(dst) < LAYERS.index(src), (
                    f"{name} (layer {src}) imports {target} (layer {dst}): upward"
                )


def test_no_private_name_crosses_modules_and_no_import_hides_in_a_function():
    for name, path in _modules().items():
        for node, module, names, at_top in _imports(path):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{name} imports private {private} from {module}"
            if not at_top and not module.startswith(GPU_MODULES):
                in_type_checking = (
                    False  # only top-level TYPE_CHECKING blocks are allowed
                )
                assert in_type_checking, (
                    f"{name}:{node.lineno} imports {module} inside a function or block"
                )


def test_the_cpu_path_imports_no_gpu_form():
    code = (
        "import sys, attnbook, attnbook.models, attnbook.engine, attnbook.theory, "
        "attnbook.experiments, benchmarks, benchmarks.cli\n"
        "print(sorted(m for m in sys.modules if m.startswith(%r)))" % (GPU_MODULES,)
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_no_private_torch_api():
    for name, path in _modules().items():
        assert "torch._C" not in path.read_text(), f"{name} uses torch's private API"


def _imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_a_module_beside_the_chapters_serves_a_chapter_and_only_the_chapters():
    # code that serves one chapter lives beside it, in chapters/: a notebook imports
    # it by its name (its install cell fetches it on Colab); the package never does
    chapters = PACKAGE.parent / "chapters"
    notebooks = "\n".join(p.read_text() for p in chapters.glob("*.ipynb"))
    beside = {p.stem: p for p in chapters.glob("*.py")}
    for name, path in beside.items():
        assert re.search(rf"\b(import|from) {name}\b", notebooks), f"{path}: unused"
        for _, module, names, _ in _imports(path):
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path} imports private {private} from {module}"
    for name, path in _modules().items():
        found = sorted(m for m in _imported_modules(path) if m.split(".")[0] in beside)
        assert not found, f"{name} imports {found}: a module beside the chapters"


def test_the_package_never_imports_the_build_machinery_or_the_benchmark():
    outside = {"_ext", "benchmarks"}  # beside the package in the repository
    for name, path in _modules().items():
        found = sorted(m for m in _imported_modules(path) if m.split(".")[0] in outside)
        assert not found, f"{name} imports {found}: not part of the installed package"
