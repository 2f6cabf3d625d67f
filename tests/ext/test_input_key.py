"""The input key of a chapter (_ext.input_key): what its numbers depend on, so that a
record made from other inputs is told apart from the current tree, part by part."""

from __future__ import annotations

import json

import nbformat

from _ext.input_key import (
    cell_imports,
    code_digest,
    import_closure,
    input_keys,
    what_changed,
)


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.from_dict(c) for c in cells]
    return json.loads(nbformat.writes(nb))


def test_code_digest_follows_the_code_not_the_prose():
    code = nbformat.v4.new_code_cell("x = 1")
    base = code_digest(_nb(nbformat.v4.new_markdown_cell("# A"), code))
    prose = code_digest(_nb(nbformat.v4.new_markdown_cell("# B, typo fixed"), code))
    edited = code_digest(_nb(nbformat.v4.new_markdown_cell("# A"), {**code}))
    assert base == prose == edited
    assert base != code_digest(
        _nb(nbformat.v4.new_markdown_cell("# A"), nbformat.v4.new_code_cell("x = 2"))
    )


def test_cell_imports_and_what_cannot_be_known():
    nb = _nb(
        nbformat.v4.new_code_cell("%matplotlib inline\nimport attnbook.theory.flow"),
        nbformat.v4.new_code_cell("def f():\n    from attnbook.data import reviews"),
    )
    names, unknown = cell_imports(nb)
    assert unknown is None
    assert {"attnbook.theory.flow", "attnbook.data", "attnbook.data.reviews"} <= names
    dynamic = _nb(
        nbformat.v4.new_code_cell("import importlib\nimportlib.import_module(n)")
    )
    assert "named at run time" in cell_imports(dynamic)[1]
    broken = _nb(nbformat.v4.new_code_cell("def ("))
    assert "does not parse" in cell_imports(broken)[1]


def _package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in root.rglob("*.py")
    }


def test_import_closure_follows_every_import_and_the_packages_above(tmp_path):
    modules = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "def f():\n    from . import b\n",
            "pkg/b.py": "from pkg.sub.c import g\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "import os\n",
            "pkg/lone.py": "",
            "pkg/dyn.py": "import importlib\nimportlib.import_module('pkg.lone')\n",
        },
    )
    used, unknown = import_closure(["pkg.a"], modules)
    assert unknown is None
    assert used == {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"}
    _, unknown = import_closure(["pkg.dyn"], modules)
    assert unknown == "pkg.dyn imports a module named at run time"


def _tree(root):
    """A book tree: a package attnbook whose data module reads the mirror, two
    chapters (one reads the data, one does not), the lock."""
    _package(
        root,
        {
            "attnbook/__init__.py": "",
            "attnbook/theory.py": "X = 1\n",
            "attnbook/data/__init__.py": "",
            "attnbook/data/reviews.py": "Y = 2\n",
            "attnbook/engine/__init__.py": "",
            "attnbook/engine/kernels.py": "",
            "attnbook/engine/count_kernels.c": "int f(void);\n",
        },
    )
    (root / "requirements.txt").write_text("torch==2.13.0\n")
    theory = root / "theory.ipynb"
    data = root / "data.ipynb"
    theory.write_text(
        json.dumps(_nb(nbformat.v4.new_code_cell("from attnbook.theory import X")))
    )
    data.write_text(
        json.dumps(
            _nb(
                nbformat.v4.new_code_cell(
                    "import attnbook.data.reviews\nimport attnbook.engine.kernels"
                )
            )
        )
    )
    return [theory, data]


def test_the_key_changes_with_each_input_and_says_what(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "train.parquet").write_bytes(b"rows")
    monkeypatch.setenv("ATTNBOOK_DATA_DIR", str(mirror))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = tmp_path / "book"
    notebooks = _tree(root)
    before = input_keys(notebooks, root)
    assert set(before) == {"theory", "data"}
    assert "data" in before["data"]["parts"] and "data" not in before["theory"]["parts"]
    assert before == input_keys(notebooks, root)  # the same tree, the same keys

    def changed(**kw):
        now = input_keys(notebooks, root)
        return {c: what_changed(before[c], now[c]) for c in now}

    # an edit of a module: only the chapter that imports it
    (root / "attnbook" / "theory.py").write_text("X = 2\n")
    assert changed() == {
        "theory": "its inputs changed since its record: attnbook (attnbook/theory.py)",
        "data": "",
    }
    (root / "attnbook" / "theory.py").write_text("X = 1\n")
    # the C source compiled by the engine's folder
    (root / "attnbook" / "engine" / "count_kernels.c").write_text("int g(void);\n")
    assert "attnbook/engine/count_kernels.c" in changed()["data"]
    assert changed()["theory"] == ""
    (root / "attnbook" / "engine" / "count_kernels.c").write_text("int f(void);\n")
    # the data, the lock, the settings; a setting that changes no number does not count
    (mirror / "train.parquet").write_bytes(b"other rows")
    assert changed() == {
        "theory": "",
        "data": "its inputs changed since its record: the review data",
    }
    (mirror / "train.parquet").write_bytes(b"rows")
    (root / "requirements.txt").write_text("torch==2.14.0\n")
    assert set(changed().values()) == {
        "its inputs changed since its record: the lock (requirements.txt)"
    }
    (root / "requirements.txt").write_text("torch==2.13.0\n")
    monkeypatch.setenv("ATTNBOOK_JOBS", "7")
    monkeypatch.setenv("ATTNBOOK_PDF", "0")
    assert set(changed().values()) == {""}
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("ATTNBOOK_DEVICE", "cpu")
    assert set(changed().values()) == {
        "its inputs changed since its record: the settings (ATTNBOOK_DEVICE, "
        "OMP_NUM_THREADS)"
    }
    assert what_changed(None, before["data"]) == "it carries no input key"


def test_the_benchmark_beside_the_package_enters_the_key(tmp_path, monkeypatch):
    # the Performance page runs benchmarks/, which is not installed: its modules and
    # the attnbook modules they import are inputs of the page
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = tmp_path / "book"
    _tree(root)
    files = {
        "benchmarks/__init__.py": "",
        "benchmarks/timing.py": "import attnbook.theory",
    }
    _package(root, files)
    page = root / "performance.ipynb"
    cell = nbformat.v4.new_code_cell("from benchmarks import timing")
    page.write_text(json.dumps(_nb(cell)))
    before = input_keys([page], root)["performance"]
    assert {"benchmarks/timing.py", "attnbook/theory.py"} <= set(
        before["parts"]["attnbook"]
    )
    (root / "benchmarks" / "timing.py").write_text("import attnbook.theory  # edited\n")
    now = input_keys([page], root)["performance"]
    assert "benchmarks/timing.py" in what_changed(before, now)


def test_a_file_beside_the_chapter_that_it_reads_enters_the_key(tmp_path, monkeypatch):
    # the Performance page reads gpu_measurements.json through benchmarks.gpu_report:
    # a new measurement there makes the page stale; a file nobody names does not
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = tmp_path / "book"
    _tree(root)
    _package(
        root,
        {
            "benchmarks/__init__.py": "",
            "benchmarks/report.py": 'FILE = "gpu_measurements.json"',
        },
    )
    (root / "gpu_measurements.json").write_text("{}")
    (root / "notes.json").write_text("{}")
    page = root / "performance.ipynb"
    page.write_text(
        json.dumps(_nb(nbformat.v4.new_code_cell("import benchmarks.report")))
    )
    before = input_keys([page], root)["performance"]
    assert set(before["parts"]["beside"]) == {"gpu_measurements.json"}
    (root / "notes.json").write_text('{"edited": 1}')
    assert input_keys([page], root)["performance"]["key"] == before["key"]
    (root / "gpu_measurements.json").write_text('{"run": 2}')
    now = input_keys([page], root)["performance"]
    assert "beside" in what_changed(before, now)


def test_a_module_kept_beside_the_chapters_enters_the_key_of_who_imports_it(
    tmp_path, monkeypatch
):
    # chapters/protocol.py serves one chapter: an edit of it executes that chapter
    # again (and what it imports from attnbook is followed); another chapter, or the
    # prose of the chapter beside it, does not depend on it
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    root = tmp_path / "book"
    _tree(root)
    chapters = root / "chapters"
    _package(root, {"chapters/protocol.py": "from attnbook.theory import X\n"})
    cells = {"own": "import protocol", "other": "from attnbook.theory import X"}
    pages = []
    for name, code in cells.items():
        pages.append(chapters / f"{name}.ipynb")
        pages[-1].write_text(json.dumps(_nb(nbformat.v4.new_code_cell(code))))
    before = input_keys(pages, root)
    assert set(before["own"]["parts"]["beside"]) == {"protocol.py"}
    assert "attnbook/theory.py" in before["own"]["parts"]["attnbook"]
    assert "beside" not in before["other"]["parts"]
    (chapters / "notes.md").write_text("prose beside the chapters\n")
    assert input_keys(pages, root) == before
    (chapters / "protocol.py").write_text("from attnbook.theory import X  # edited\n")
    now = input_keys(pages, root)
    assert what_changed(before["own"], now["own"]) == (
        "its inputs changed since its record: the files beside it (protocol.py)"
    )
    assert what_changed(before["other"], now["other"]) == ""
    (root / "attnbook" / "theory.py").write_text("X = 2\n")
    assert "attnbook/theory.py" in what_changed(
        now["own"], input_keys(pages, root)["own"]
    )
