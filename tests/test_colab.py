"""The Colab mechanism: a chapter runs top to bottom where only Colab's packages are
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
``ATTNBOOK_SKIP_COLAB_TEST=1`` to skip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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

pytestmark = pytest.mark.skipif(
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
    """A new environment (with pip) that also sees the base's packages, read-only."""
    venv = where / "colab"
    _run([_base_python(), "-m", "venv", str(venv)], env=_clean_env())
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

    # Colab has the packages but not attnbook.
    probe = _run(
        [
            python,
            "-c",
            "import importlib.util as u, torch, seaborn, datasets, "
            "ipykernel; print(u.find_spec('attnbook'))",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert probe.stdout.strip() == "None", (
        "attnbook must not be importable before the chapter"
    )

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
    print(f"Colab mechanism: {CHAPTER} ran in {time.perf_counter() - start:.0f} s")
