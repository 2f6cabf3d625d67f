"""What keeps a figure from reading well at the column width of the book, and the fix
for what can be fixed: :func:`fit_to_column` (width and font sizes) and :func:`audit`
(legends, overlapping tick labels). :mod:`attnbook.book.plotting` applies both."""

from __future__ import annotations

import numpy as np

__all__ = ["COLUMN_WIDTH_IN", "MIN_FONT_PT", "fit_to_column", "audit"]

#: Width of a figure in inches: the text column of the book's pages at desktop width
#: (768 CSS pixels at 1400 px) less a margin, at 96 CSS pixels per inch.
COLUMN_WIDTH_IN = 7.2
#: The smallest font size of any text in a figure, in points as displayed.
MIN_FONT_PT = 9.0


def _texts(fig):
    from matplotlib.text import Text

    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.figure is fig
    ]


def fit_to_column(fig) -> None:
    """Bring ``fig`` to at most the column width (the height scaled alike) and every
    text to at least :data:`MIN_FONT_PT` points, so that it displays at its natural
    size with legible text."""
    width, height = fig.get_size_inches()
    if width > COLUMN_WIDTH_IN:
        fig.set_size_inches(COLUMN_WIDTH_IN, height * max(COLUMN_WIDTH_IN / width, 0.7))
    for text in _texts(fig):
        if text.get_fontsize() < MIN_FONT_PT:
            text.set_fontsize(MIN_FONT_PT)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                size = axis.get_tick_params(which=which).get("labelsize")
                if isinstance(size, (int, float)) and size < MIN_FONT_PT:
                    axis.set_tick_params(which=which, labelsize=MIN_FONT_PT)


def _series(ax) -> int:
    """The number of data series drawn on ``ax``: lines in data coordinates (not the
    reference lines of ``axhline`` / ``axvline``), scatter plots and groups of bars."""
    from matplotlib.collections import PathCollection

    lines = [
        line
        for line in ax.get_lines()
        if line.get_transform() == ax.transData
        and line.get_visible()
        and len(np.atleast_1d(line.get_xdata())) > 1
        and line.get_gid() != "reference"
    ]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    return len(lines) + len(scatters) + len(ax.containers)


def _overlaps(labels, renderer, horizontal: bool) -> list[str]:
    boxes = []
    for label in labels:
        if not (label.get_visible() and label.get_text().strip()):
            continue
        box = label.get_window_extent(renderer)
        boxes.append(
            (box.x0, box.x1, label.get_text())
            if horizontal
            else (box.y0, box.y1, label.get_text())
        )
    boxes.sort()
    return [
        f"{a[2]!r} and {b[2]!r}"
        for a, b in zip(boxes, boxes[1:])
        if b[0] < a[1] - 0.5  # half a pixel: glyph rounding, not an overlap
    ]


def _labels(fig) -> list:
    """The titles and axis labels of ``fig`` (each axes' and the figure's own), shown
    and not empty."""
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel]
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label]
        texts.append(ax.yaxis.label)
    return [t for t in texts if t is not None and t.get_visible() and t.get_text()]


def overlapping_labels(fig, renderer) -> list[str]:
    """Pairs of titles and axis labels of ``fig`` that overlap (a row's x label over
    the next row's title, after the figure was shrunk to the column)."""
    found = []
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _labels(fig)]
    for k, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[k + 1 :]:
            w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if w > 0.5 and h > 0.5:  # half a pixel: glyph rounding
                found.append(f"overlapping labels {a!r} and {b!r}")
    return found


def audit(fig) -> list[str]:
    """What keeps ``fig`` from reading well at the column width: wider than the
    column, a text smaller than :data:`MIN_FONT_PT`, an axes with several series and
    no legend, overlapping tick labels, titles and axis labels that overlap. Empty
    when the figure reads well."""
    problems = []
    width = fig.get_size_inches()[0]
    if width > COLUMN_WIDTH_IN + 1e-9:
        problems.append(f'{width:.1f}" wide, more than the column ({COLUMN_WIDTH_IN}")')
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    small = sorted(
        {t.get_text()[:30] for t in _texts(fig) if t.get_fontsize() < MIN_FONT_PT}
    )
    if small:
        problems.append(f"text smaller than {MIN_FONT_PT:g} pt: {small[:5]}")
    has_figure_legend = bool(fig.legends)
    for i, ax in enumerate(fig.axes):
        name = ax.get_title() or ax.get_ylabel() or f"axes {i}"
        if _series(ax) > 1 and ax.get_legend() is None and not has_figure_legend:
            problems.append(f"{name!r}: {_series(ax)} series and no legend")
        for axis, horizontal in ((ax.xaxis, True), (ax.yaxis, False)):
            labels = axis.get_ticklabels(which="both")
            lo, hi = (
                (ax.bbox.x0, ax.bbox.x1) if horizontal else (ax.bbox.y0, ax.bbox.y1)
            )
            inside = []
            for label in labels:
                if not label.get_text().strip():
                    continue
                box = label.get_window_extent(renderer)
                centre = (box.x0 + box.x1) / 2 if horizontal else (box.y0 + box.y1) / 2
                if lo - 1 <= centre <= hi + 1:
                    inside.append(label)
            for pair in _overlaps(inside, renderer, horizontal):
                problems.append(f"{name!r}: overlapping tick labels {pair}")
    problems += overlapping_labels(fig, renderer)
    return problems
