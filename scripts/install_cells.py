"""Write the install cell of every chapter from the book's address in _config.yml.

The repository address is one setting, ``repository.url`` (with ``repository.branch``)
in ``_config.yml``: Jupyter Book builds each page's Colab launch button from it, and
this script writes the first code cell of every ``chapters/*.ipynb`` from it, so that a
notebook opened in Colab installs attnbook from the same repository and branch. Run it
after changing the address; ``--check`` changes nothing and exits with status 1 when a
notebook's install cell differs from what the address gives (the tests run it so).

A chapter that imports a module kept beside the chapters (``chapters/<name>.py``) gets
two more steps in its install cell: where the file is not beside the notebook (Colab
opens a notebook alone), it is downloaded from the raw files of the same repository and
branch, or from ``ATTNBOOK_CHAPTERS_URL`` (any URL urllib opens, ``file://`` too).

    python scripts/install_cells.py            # rewrite the install cells
    python scripts/install_cells.py --check    # only compare

Only the first code cell's source is written; every other cell, the cell's id and its
``remove-cell`` tag are left as they are. Needs PyYAML and ruff (both in the book's
environment: run it with ``.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from string import Template
from typing import Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
GITHUB = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

TEMPLATE = Template(
    """\
# Installs attnbook where it is missing (Colab); scripts/install_cells.py writes it
import importlib.util, os, subprocess, sys$more  # noqa: E401, I001

source = os.getenv("ATTNBOOK_SOURCE", "git+$url@$branch")
pip = [sys.executable, "-m", "pip", "install", "--quiet", source]
if importlib.util.find_spec("attnbook") is None and subprocess.run(pip).returncode:
    print("What to do: %pip install git+https://github.com/OWNER/REPOSITORY@BRANCH")
    raise RuntimeError(f"pip could not install attnbook from {source}: see above")
$fetch"""
)
#: The install cell's steps for a chapter's modules kept beside the chapters.
FETCH = Template(
    """\
chapters = os.getenv("ATTNBOOK_CHAPTERS_URL", "$raw/chapters")
for name in $names:
    if not os.path.exists(name):
        try:
            urllib.request.urlretrieve(f"{chapters}/{name}", name)
        except OSError as err:
            print(f"What to do: put {name} beside this notebook ({chapters}/{name})")
            raise RuntimeError(f"could not fetch {chapters}/{name}: {err}") from None
"""
)


def book_address(root: Path = ROOT) -> tuple[str, str]:
    """``(url, branch)`` of the book's repository from ``root/_config.yml``.

    Raises ``ValueError`` when the URL is not ``https://github.com/OWNER/REPOSITORY``
    (the form the Colab launch buttons need) or the branch is not a branch name.
    """
    config = yaml.safe_load((root / "_config.yml").read_text())
    repo = config.get("repository") or {}
    url, branch = str(repo.get("url", "")).rstrip("/"), str(repo.get("branch", ""))
    if not GITHUB.match(url):
        raise ValueError(
            f"_config.yml repository.url must be https://github.com/OWNER/REPOSITORY "
            f"(Colab opens notebooks from GitHub), got {url!r}"
        )
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", branch):
        raise ValueError(
            f"_config.yml repository.branch must be a branch name, got {branch!r}"
        )
    return url, branch


def install_cell(
    url: str, branch: str, root: Path = ROOT, beside: Sequence[str] = ()
) -> str:
    """The source of the install cell for the repository ``url`` at ``branch`` (and
    the files ``beside`` the chapters that it fetches), laid out by ``ruff format``
    with the book's settings (as the chapters are checked)."""
    fetch = ""
    if beside:
        raw = url.replace("https://github.com/", "https://raw.githubusercontent.com/")
        fetch = FETCH.substitute(raw=f"{raw}/{branch}", names=list(beside))
    more = ", urllib.request" if beside else ""
    text = TEMPLATE.substitute(url=url, branch=branch, more=more, fetch=fetch)
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "cell.py", "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=root,
    )
    if formatted.returncode != 0:
        raise RuntimeError(
            f"ruff format failed on the install cell: {formatted.stderr}"
        )
    return formatted.stdout.rstrip("\n")


def _first_code_cell(notebook: dict, path: Path) -> dict | None:
    cells = [c for c in notebook.get("cells", []) if c.get("cell_type") == "code"]
    if not cells:
        return None
    first = cells[0]
    if 'find_spec("attnbook")' not in "".join(first.get("source", [])):
        raise ValueError(f"{path}: the first code cell is not the install cell")
    return first


def beside_modules(notebook: dict, root: Path = ROOT) -> list[str]:
    """The files of the modules kept beside the chapters (``root/chapters/*.py``) that
    the notebook's code cells import, as ``name.py``."""
    modules = {p.stem for p in (root / "chapters").glob("*.py")}
    found = set()
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        lines = "".join(cell.get("source", [])).splitlines()
        code = "\n".join(line for line in lines if line.lstrip()[:1] not in "%!")
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return [f"{m}.py" for m in sorted(found & modules)]


def sync(root: Path = ROOT, check: bool = False) -> list[Path]:
    """Notebooks under ``root/chapters`` whose install cell differs from the address
    (rewritten unless ``check``); notebooks without code cells are skipped."""
    address = book_address(root)
    changed = []
    for path in sorted((root / "chapters").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        cell = _first_code_cell(notebook, path)
        if cell is None:
            continue
        beside = beside_modules(notebook, root)
        source = install_cell(*address, root=root, beside=beside)
        if "".join(cell["source"]) == source:
            continue
        changed.append(path)
        if not check:
            cell["source"] = source.splitlines(keepends=True)
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare; exit 1 on a difference"
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the book's folder (default: this one)"
    )
    args = parser.parse_args(argv)
    url, branch = book_address(args.root)
    changed = sync(args.root, check=args.check)
    names = ", ".join(p.name for p in changed) or "none"
    if args.check:
        if changed:
            print(
                f"install cells that do not follow {url}@{branch}: {names}; "
                "run python scripts/install_cells.py"
            )
            return 1
        print(f"every install cell installs from {url}@{branch}")
        return 0
    print(f"install cells rewritten for {url}@{branch}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
