"""Shared fixtures: small random problems in float64; the repository root on
``sys.path``, where the book's build machinery (the package ``_ext``) lives; the build
of a mini book, and one mini book executed and built once for the tests that only read
it; the browser checker of ``scripts/``; a check as a chapter records it."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnbook.book.record_paths import RECORD_DIR_ENV
from attnbook.data.selection import assumption_one_data

#: The repository root: ``_ext`` is imported from here, as Jupyter Book loads it; and
#: ``chapters/``, where the modules that one chapter imports from beside it live.
ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT / "chapters", ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

#: The ``sphinx:`` lines of a mini book's ``_config.yml`` that load ``sphinx_proof``
#: and the book's extension ``_ext`` from this repository.
SPHINX_CONFIG = (
    "sphinx:\n  extra_extensions:\n    - sphinx_proof\n"
    f"  local_extensions:\n    _ext: {ROOT}\n"
)


def load_check_browser():
    """``scripts/check_browser.py`` (the browser and PDF checks of the built book),
    loaded once as the module ``check_browser``."""
    if "check_browser" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "check_browser", ROOT / "scripts" / "check_browser.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules["check_browser"] = module
        spec.loader.exec_module(module)
    return sys.modules["check_browser"]


def check_record(name: str, **fields) -> dict:
    """A check as a chapter records it (:mod:`attnbook.book.checks`): by default value 1
    against the threshold 0.5, passed; ``fields`` set the rest (claim, role, ...)."""
    return {
        "name": name,
        "value": 1.0,
        "threshold": 0.5,
        "relation": ">=",
        "passed": True,
        **fields,
    }


def build_mini_book(folder: Path, *options: str) -> subprocess.CompletedProcess:
    """``jupyter-book build folder -W -n`` (and ``options``) with this environment's
    Jupyter Book, without a record folder of the caller's run (the mini book's chapters
    record nothing into it)."""
    exe = (
        shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
        or "jupyter-book"
    )
    env = {k: v for k, v in os.environ.items() if k != RECORD_DIR_ENV}
    return subprocess.run(
        [exe, "build", str(folder), "-W", "-n", *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


#: The mini book's chapter, in three parts: a definition, a lemma that uses it and its
#: proof (by the definition and the proposition below); an auxiliary proposition; a
#: theorem by the lemma, its proof by the proposition, and prose that cites statements
#: (which adds no arrow to the paper map).
MINI_LEMMA = """# Chapter

```{prf:definition} A definition
:label: def-mini

D.
```

```{prf:lemma} A lemma
:label: lem-mini

Under {prf:ref}`def-mini`, L.
```

```{prf:proof}
By {prf:ref}`def-mini` and {prf:ref}`prop-aux`.
```
"""
MINI_PROPOSITION = """
```{prf:proposition} An auxiliary result
:label: prop-aux

P.
```
"""
MINI_THEOREM = """## More

```{prf:theorem} The theorem
:label: thm-mini

By {prf:ref}`lem-mini`, T.
```

```{prf:proof}
From {prf:ref}`prop-aux`.
```

Prose that cites {prf:ref}`thm-mini` and {prf:ref}`def-mini` adds no arrow.
"""
#: The chapter's first code cell imports; its second, before any statement, starts
#: the chapter (seed 5; the checks count their cells from here), counts its
#: executions, and records a statement of the book's reading that does not hold
#: (linked to no result).
MINI_IMPORT_CODE = (
    "from attnbook.book.checks import check, compare_with_paper\n"
    "from attnbook.book.chapter import start_chapter"
)
MINI_START_CODE = (
    "rng, device = start_chapter('ch1', seed=5)\n"
    "compare_with_paper('bk', 0.1, 0.5, claim='C1', reading='book')\n"
    "open('executions.txt', 'a').write('x');"
)
#: The code cell after the lemma: checks of claim C1, one linked to the lemma by its
#: place, one by name and in words with math, and a control.
MINI_LEMMA_CODE = (
    "check('mini_stat', 0.5, 0.25, '>=', claim='C1')\n"
    "check('stat', 0.5, 0.25, claim='C1', what='the statistic $r$', "
    "result='lem-mini')\n"
    "check('ctl', 1.0, 1.0, claim='C1', role='control')\n"
)
#: The code cell after the theorem: a check of claim C3 and a statement of the paper
#: (claim C2) that does not hold, both naming the theorem.
MINI_THEOREM_CODE = (
    "check('thm', 0.5, 0.25, claim='C3', result='thm-mini')\n"
    "compare_with_paper('paper', 0.1, 0.5, claim='C2', result='thm-mini')\n"
)


def write_mini_book(folder: Path, cells: list, *, mode: str, pages: dict) -> Path:
    """A mini book in ``folder``: ``pages`` (name: markdown, the first one the root)
    and the notebook ``ch1`` of ``cells`` (nbformat cells), MyST-NB's execution
    ``mode``, this repository's extension."""
    import nbformat

    folder.mkdir()
    (folder / "_config.yml").write_text(
        f"title: mini\nexecute:\n  execute_notebooks: {mode}\n" + SPHINX_CONFIG
    )
    root, *rest = pages
    (folder / "_toc.yml").write_text(
        f"format: jb-book\nroot: {root}\nchapters:\n  - file: ch1\n"
        + "".join(f"  - file: {name}\n" for name in rest)
    )
    for name, text in pages.items():
        (folder / f"{name}.md").write_text(text)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, folder / "ch1.ipynb")
    return folder


@pytest.fixture(scope="session")
def built_mini_book(tmp_path_factory) -> SimpleNamespace:
    """One mini book executed beforehand (``_ext.execution``, as
    ``scripts/build-book.sh`` does) and then built (``jupyter-book build -W -n``), for
    the tests that only read what the build made: a landing page with the paper map
    and the claims dashboard, the chapter (``MINI_*``), and a page with the run report.
    ``folder``, the execution's ``report`` and the build's process ``proc``."""
    import nbformat

    from _ext.execution import execute_book

    new = nbformat.v4
    book = write_mini_book(
        tmp_path_factory.mktemp("mini") / "book",
        [
            new.new_code_cell(MINI_IMPORT_CODE),
            new.new_code_cell(MINI_START_CODE),
            new.new_markdown_cell(MINI_LEMMA),
            new.new_code_cell(MINI_LEMMA_CODE),
            new.new_markdown_cell(MINI_PROPOSITION + MINI_THEOREM),
            new.new_code_cell(MINI_THEOREM_CODE),
        ],
        mode="cache",
        pages={
            "intro": "# Mini\n\n```{paper-map}\n```\n\n```{claims-dashboard}\n```\n",
            "repro": "# Repro\n\n```{run-report}\n```\n",
        },
    )
    report = execute_book(book, book / "_build", jobs=1, timeout=120)
    proc = build_mini_book(book) if not report.failed else None
    return SimpleNamespace(folder=book, report=report, proc=proc)


def random_problem(
    seed: int = 0,
    V: int = 30,
    d: int = 8,
    n: int = 12,
    max_len: int = 9,
    dtype: torch.dtype = torch.float64,
):
    gen = np.random.default_rng(seed)
    E = torch.from_numpy(gen.normal(size=(V, d))).to(dtype)
    p = torch.from_numpy(gen.normal(size=d)).to(dtype)
    v = torch.from_numpy(gen.normal(size=d)).to(dtype)
    seqs = [gen.integers(0, V, size=gen.integers(1, max_len + 1)) for _ in range(n)]
    y = np.where(gen.random(n) < 0.5, -1, 1)
    return E, p, v, seqs, y


def assumption_instance(seed: int, n_pairs: int = 10, length: int = 5):
    """A small Assumption-1 data set (2 positive, 2 negative, 16 irrelevant tokens)."""
    return assumption_one_data(
        n_pairs,
        n_positive=2,
        n_negative=2,
        n_irrelevant=16,
        length=length,
        rng=np.random.default_rng(seed),
    )


@pytest.fixture
def problem():
    return random_problem()


@pytest.fixture(autouse=True)
def _no_chapter_records(monkeypatch):
    """Unit tests never write chapter records into a run's record folder."""
    monkeypatch.delenv("ATTNBOOK_RECORD_DIR", raising=False)


@pytest.fixture
def offline_without_mirror(monkeypatch, tmp_path):
    """No mirror folder and no hub: the offline switches are set in the environment and
    in the settings that `datasets` and `huggingface_hub` read once, when first imported
    (an earlier test may have imported them already), so nothing waits on the
    network."""
    from attnbook.data.reviews import DATA_DIR_ENV

    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-hf-cache"))
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setattr(datasets.config, name, True, raising=False)


@pytest.fixture
def small_splits(monkeypatch):
    """Tests of other behaviour that read or build a mirror of a few reviews: the
    whole-split verification (attnbook.validation.verify_split) accepts any shape.
    tests/data/test_sources.py tests the verification itself."""
    import attnbook.data.mirror
    import attnbook.data.reviews

    def accept(name, split, values, where, ratings=None):
        return None

    for module in (attnbook.data.mirror, attnbook.data.reviews):
        monkeypatch.setattr(module, "verify_split", accept)


@pytest.fixture
def make_trend():
    """``make_trend(seed, n, signal, noise)``: three real-label runs ``signal * held +
    noise * N(0, 1)`` over ``n`` tokens, five shuffled-label runs and one initial run of
    pure noise, a monotone trend in the held-out statistic. (Imported here, not with
    the conftest: a pytest process that loads the conftest without this fixture, as
    the AddressSanitizer child of tests/engine does, spares the import of pandas,
    scipy.stats and matplotlib.)"""
    from attnbook.book.controls import controlled_trend

    def make(seed: int = 3, n: int = 400, signal: float = 1.0, noise: float = 0.2):
        rng = np.random.default_rng(seed)
        held = rng.uniform(-1, 1, n)
        return controlled_trend(
            [signal * held + noise * rng.normal(size=n) for _ in range(3)],
            [rng.normal(size=n) for _ in range(5)],
            [rng.normal(size=n)],
            heldout=held,
            train=held,
            log_df=rng.normal(size=n),
            shape="monotone",
        )

    return make
