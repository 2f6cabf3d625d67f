"""Bounded output: a cell that prints without end does not reach the book whole.

A chapter's cell that prints 100 MB would make a 100 MB page (and cached notebook) that
the reader's browser and the PDF step choke on. :func:`cap_stream_outputs` keeps, of
each cell whose stream output (``stdout`` and ``stderr`` together) exceeds
``limit`` bytes, the head and the tail of each stream, with a line in between that says
how much was cut; the other outputs of the cell (figures, tables, errors) are kept as
they are. :mod:`_ext.execution` applies it to every executed chapter before it is
cached, and prints one line per cell it cut.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CELL_OUTPUT_ENV",
    "DEFAULT_CELL_OUTPUT_BYTES",
    "CutCell",
    "cell_output_limit",
    "cap_stream_outputs",
]

#: The environment variable that sets the limit (bytes of stream output per cell).
CELL_OUTPUT_ENV = "ATTNBOOK_CELL_OUTPUT_BYTES"
#: Default limit: 1 MiB of printed text per cell (the book's cells print a few kB).
DEFAULT_CELL_OUTPUT_BYTES = 2**20


@dataclass(frozen=True)
class CutCell:
    """A cell whose stream output was cut: its index, the bytes it printed and the
    bytes kept."""

    index: int
    printed: int
    kept: int

    def describe(self) -> str:
        return (
            f"cell {self.index} printed {_mb(self.printed)}; the book keeps its first "
            f"and last lines ({_mb(self.kept)}), {_mb(self.printed - self.kept)} cut"
        )


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def cell_output_limit() -> int:
    """The limit of :data:`CELL_OUTPUT_ENV`, or :data:`DEFAULT_CELL_OUTPUT_BYTES`;
    ``ValueError`` for anything but a positive integer."""
    raw = os.environ.get(CELL_OUTPUT_ENV, "").strip()
    if not raw:
        return DEFAULT_CELL_OUTPUT_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{CELL_OUTPUT_ENV} must be a positive integer, got {raw!r}")
    return value


#: Room kept for the line that says what was cut (bytes).
_MARK_BYTES = 64


def _text(output: Any) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)


def _cut(text: str, budget: int) -> str:
    """``text`` (longer than ``budget`` bytes in UTF-8) as its head and tail, whole
    lines where a line break is near, with a line between them that says how much was
    cut; all of it within ``budget`` bytes (where ``budget`` leaves room for that
    line)."""
    data = text.encode("utf-8")
    room = _MARK_BYTES if budget > 4 * _MARK_BYTES else 0
    half = max(1, (budget - room) // 2)
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    if "\n" in head[len(head) // 2 :]:
        head = head[: head.rindex("\n") + 1]
    if "\n" in tail[: len(tail) // 2]:
        tail = tail[tail.index("\n") + 1 :]
    cut = len(data) - len(head.encode()) - len(tail.encode())
    if not head.endswith("\n"):
        head += "\n"
    return f"{head}… {_mb(cut)} cut ({_mb(len(data))} printed) …\n{tail}"


def cap_stream_outputs(nb: Any, limit: int) -> list[CutCell]:
    """Cut, in place, the stream output of every code cell of ``nb`` that printed more
    than ``limit`` bytes: its streams are merged by name (``stdout``, ``stderr``; each
    at the place of its first output), and those longer than their share of ``limit``
    (what the shorter ones leave, in equal parts) are kept as their head and tail.
    Returns the cells cut."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1 byte, got {limit}")
    cut: list[CutCell] = []
    for index, cell in enumerate(nb.cells):
        outputs = cell.get("outputs") or []
        streams = [o for o in outputs if o.get("output_type") == "stream"]
        printed = sum(len(_text(o).encode("utf-8")) for o in streams)
        if printed <= limit:
            continue
        merged: dict[str, Any] = {}
        texts: dict[str, list[str]] = {}
        kept_outputs = []
        for output in outputs:
            if output.get("output_type") != "stream":
                kept_outputs.append(output)
                continue
            name = output.get("name", "stdout")
            if name not in merged:
                merged[name] = output
                texts[name] = []
                kept_outputs.append(output)
            texts[name].append(_text(output))
        whole = {name: "".join(parts) for name, parts in texts.items()}
        sizes = {name: len(text.encode("utf-8")) for name, text in whole.items()}
        left = limit
        for i, name in enumerate(sorted(whole, key=sizes.__getitem__)):
            share = left // (len(whole) - i)  # the smaller streams first, kept whole
            text = whole[name] if sizes[name] <= share else _cut(whole[name], share)
            left -= len(text.encode("utf-8"))
            merged[name]["text"] = text
        cell["outputs"] = kept_outputs
        kept = sum(len(_text(o).encode("utf-8")) for o in merged.values())
        cut.append(CutCell(index, printed, kept))
    return cut
