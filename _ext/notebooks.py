"""Where a chapter's checks live in its notebook: the chapter a notebook names, the
result (theorem, lemma, ...) stated before each check, and the cell that ran it.

Used by the claims dashboard (:mod:`_ext.dashboard`, which re-exports these
functions) to link every recorded check to its result and its cell.
"""

from __future__ import annotations

import re

__all__ = [
    "required_chapters",
    "chapter_name_in_notebook",
    "result_labels",
    "attach_results",
]

_START = re.compile(r"start_chapter\(\s*[\"']([^\"']+)[\"']\s*[,)]")


def chapter_name_in_notebook(notebook: dict) -> str | None:
    """The name a notebook passes to ``start_chapter`` (``None`` when it does not call
    it).

    Raises ``ValueError`` when it calls it more than once.
    """
    names = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        names += _START.findall(source)
    if len(names) > 1:
        raise ValueError(
            f"start_chapter is called {len(names)} times ({names}); call it once"
        )
    return names[0] if names else None


def required_chapters(notebooks: dict[str, dict]) -> dict[str, str]:
    """``{chapter name: docname}`` for every notebook (by docname) that calls
    start_chapter.

    Raises ``ValueError`` when a notebook's chapter name is not its file's stem (its
    record would be filed under another chapter's name).
    """
    required = {}
    for docname, nb in sorted(notebooks.items()):
        name = chapter_name_in_notebook(nb)
        if name is None:
            continue
        stem = docname.rsplit("/", 1)[-1]
        if name != stem:
            raise ValueError(
                f"{docname}: start_chapter({name!r}) must name the notebook's stem "
                f"{stem!r}"
            )
        required[name] = docname
    return required


_RESULT = re.compile(
    r"\{prf:(theorem|lemma|proposition|corollary|conjecture|property|observation|criterion)\}"
    r"[^\n]*\n(?:[ \t]*:[a-z]+:[^\n]*\n)*?[ \t]*:label:[ \t]*(\S+)"
)
_CHECK = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _code_cell_results(
    notebook: dict,
) -> tuple[list[str | None], list[str], int | None]:
    """Per code cell: the last result label stated before it, its source, and the index
    of the code cell that calls start_chapter."""
    current: str | None = None
    labels: list[str | None] = []
    sources: list[str] = []
    start: int | None = None
    for cell in notebook.get("cells", []):
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            found = [m.group(2) for m in _RESULT.finditer(text)]
            if found:
                current = found[-1]
        elif cell.get("cell_type") == "code":
            if start is None and _START.search(text):
                start = len(labels)
            labels.append(current)
            sources.append(text)
    return labels, sources, start


def result_labels(notebook: dict) -> dict[str, str]:
    """``{check name: label}``: each check of a notebook belongs to the last result
    (theorem, lemma, proposition, corollary, conjecture ...) stated in the markdown
    cells before it.

    Only checks whose name is a string literal are found here; :func:`attach_results`
    also places checks by the cell they ran in.
    """
    labels, sources, _ = _code_cell_results(notebook)
    out: dict[str, str] = {}
    for label, text in zip(labels, sources):
        if label:
            for name in _CHECK.findall(text):
                out.setdefault(name, label)
    return out


def attach_results(records: dict[str, dict], notebooks: dict[str, dict]) -> None:
    """Fill in each recorded check's ``result`` label (in place) where it was not given,
    and its ``nb_cell``: the index among the notebook's cells of the cell it ran in.

    ``notebooks`` maps chapter names to notebook JSON. An explicit ``check(...,
    result=)`` is kept; otherwise the check gets the last result stated before the code
    cell it ran in (the record gives that cell as a count from ``start_chapter``'s
    cell), or, without the cell, before the cell that names it.
    """
    for chapter, record in records.items():
        nb = notebooks.get(chapter, {})
        labels, _, start = _code_cell_results(nb)
        code_cells = [
            i
            for i, cell in enumerate(nb.get("cells", []))
            if cell.get("cell_type") == "code"
        ]
        by_name = result_labels(nb)
        for chk in record["checks"]:
            cell = chk.get("cell")
            here = (
                start + cell
                if cell is not None
                and start is not None
                and 0 <= start + cell < len(labels)
                else None
            )
            if here is not None:
                chk["nb_cell"] = code_cells[here]
            if chk.get("result"):
                continue
            if here is not None:
                chk["result"] = labels[here]
            elif chk["name"] in by_name:
                chk["result"] = by_name[chk["name"]]
