"""HTML display of texts: every in-vocabulary word shaded by a per-token weight."""

from __future__ import annotations

import html
import re
from typing import Mapping

import numpy as np

from attnbook.data.reviews import Vocabulary

__all__ = ["highlight_html"]


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.IGNORECASE)


def highlight_html(
    text: str,
    vocabulary: Vocabulary,
    weight: Mapping[int, float] | np.ndarray,
    *,
    color: tuple[int, int, int] = (42, 157, 143),
    max_chars: int | None = 600,
) -> str:
    """HTML of ``text`` with each in-vocabulary word shaded in proportion to
    ``weight[id]``.

    ``weight`` maps a token id to a non-negative number (an array indexed by id works);
    the shading is relative to the largest weight among the words shown. Words are found
    with the tokenization rule of :mod:`attnbook.data` (matching case-insensitively on
    the original text, so the reader sees the review as written); ``<br />`` tags become
    line breaks. Text beyond ``max_chars`` characters is cut at a word boundary and
    marked with an ellipsis.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    text = text.replace("<br />", "\n")
    if max_chars is not None and len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars)
        text = text[: cut if cut > 0 else max_chars] + " …"
    pieces: list[tuple[str, float | None]] = []
    pos = 0
    for m in _WORD.finditer(text):
        pieces.append((text[pos : m.start()], None))
        word = m.group(0)
        try:
            tid = vocabulary.id(word.lower())
        except KeyError:
            pieces.append((word, None))
        else:
            w = float(weight[tid])
            if not np.isfinite(w) or w < 0:
                raise ValueError(
                    f"weight of token {word.lower()!r} is {w}; need finite, >= 0"
                )
            pieces.append((word, w))
        pos = m.end()
    pieces.append((text[pos:], None))
    top = max((w for _, w in pieces if w is not None), default=0.0) or 1.0
    r, g, b = color
    out = []
    for chunk, w in pieces:
        esc = html.escape(chunk).replace("\n", "<br>")
        if w is None:
            out.append(esc)
        else:
            out.append(
                f'<span style="background-color: rgba({r},{g},{b},{w / top:.3f}); '
                f'border-radius: 3px" title="{w:.3g}">{esc}</span>'
            )
    return (
        '<div style="line-height: 1.6; font-family: sans-serif">'
        + "".join(out)
        + "</div>"
    )
