"""The book's figure style (the column's width, text of at least :data:`MIN_FONT_PT`
points), checked by :func:`audit` as :func:`show` displays a figure."""

from __future__ import annotations

import math
import warnings

import matplotlib
import numpy as np
import pandas as pd

from attnbook.experiments.importance import bin_statistics

PALETTE = {
    "positive": "#2a9d8f",
    "negative": "#e76f51",
    "neutral": "#8d99ae",
    "theory": "#264653",
}

SCREEN_DPI = 96  # CSS pixels per inch of a displayed figure
ROW_HEIGHT_IN = 2.9  # height of one row of panels
#: The text column of the book's pages at desktop width, less a margin, in inches.
COLUMN_WIDTH_IN = 7.2
MIN_FONT_PT = 9.0  # the smallest font of any text in a figure, as displayed

_STYLE = {
    "figure.figsize": (COLUMN_WIDTH_IN, 3.6),
    "figure.dpi": SCREEN_DPI,
    "savefig.dpi": 2 * SCREEN_DPI,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.facecolor": "white",
    "figure.autolayout": True,
    "font.size": 10.0,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10.0,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "legend.fontsize": 9.5,
    "legend.title_fontsize": 9.5,
    "figure.titlesize": 11.0,
    "lines.markersize": 4.5,
}


def setup(context: str = "notebook") -> None:
    """The book's figure style; inside IPython, retina PNGs fitted to the column."""
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette="deep")
    matplotlib.rcParams.update(_STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # pragma: no cover - IPython ships with every Jupyter kernel
        return
    shell = get_ipython()
    if shell is not None:
        set_matplotlib_formats("retina")
        _fit_on_display(shell)


def _fit_on_display(shell) -> None:
    from matplotlib.figure import Figure

    png = shell.display_formatter.formatters["image/png"]
    inner = png.lookup_by_type(Figure)
    if getattr(inner, "attnbook_fitted", False):
        return

    def fitted(fig):
        fit_to_column(fig)
        return inner(fig)

    fitted.attnbook_fitted = True
    png.for_type(Figure, fitted)


def panel_grid(
    n_panels: int,
    *,
    row_height: float = ROW_HEIGHT_IN,
    one_column: bool = False,
    **subplots,
):
    """``(fig, axes)`` at the column width: ``n_panels`` axes in reading order, in two
    columns (never three: too narrow) or one; other keywords go to ``plt.subplots``."""
    import matplotlib.pyplot as plt

    if not isinstance(n_panels, (int, np.integer)) or n_panels < 1:
        raise ValueError(f"n_panels must be a positive integer, got {n_panels!r}")
    ncols = 1 if one_column or n_panels == 1 else 2
    nrows = math.ceil(n_panels / ncols)
    size = (COLUMN_WIDTH_IN, row_height * nrows)
    fig, grid = plt.subplots(nrows, ncols, figsize=size, squeeze=False, **subplots)
    axes = list(grid.ravel())
    for ax in axes[n_panels:]:
        ax.remove()
    return fig, axes[:n_panels]


def show(fig=None, *, strict: bool = True) -> None:
    """Display ``fig`` (default: the current one) fitted to the column; a problem
    :func:`audit` finds raises ``ValueError`` (warns unless ``strict``)."""
    import matplotlib.pyplot as plt

    fig = plt.gcf() if fig is None else fig
    fit_to_column(fig)
    problems = audit(fig)
    if problems:
        message = "figure does not read well: " + "; ".join(problems)
        if strict:
            plt.close(fig)
            raise ValueError(message)
        warnings.warn(message, stacklevel=2)
    plt.show()


def identity_scatter(ax, predicted, measured, *, s: float = 12, **kwargs):
    """Scatter ``measured`` against ``predicted`` on ``ax`` with the line ``y = x``."""
    import seaborn as sns

    x = np.asarray(predicted, dtype=float).ravel()
    y = np.asarray(measured, dtype=float).ravel()
    sns.scatterplot(x=x, y=y, s=s, ax=ax, linewidth=0, **kwargs)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    ax.plot(
        [lo, hi], [lo, hi], color=PALETTE["theory"], lw=1, ls="--", label="identity"
    )
    return ax


def plot_binned(
    ax,
    importance: object,
    values: object,
    *,
    n_bins: int = 20,
    lo: float = -1.0,
    hi: float = 1.0,
    label: str | None = None,
    color: str | None = None,
    min_count: int = 1,
    band: bool = True,
) -> pd.DataFrame:
    """Draw on ``ax`` the bin means of ``values`` against ``importance`` (bins under
    ``min_count`` tokens left out) with a band of one sd; returns the bins drawn."""
    x = np.asarray(importance, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if x.shape != v.shape or x.ndim != 1:
        raise ValueError(
            f"importance and values must be 1-D arrays of one length, got {x.shape}, "
            f"{v.shape}"
        )
    keep = np.isfinite(x) & np.isfinite(v)
    stats = bin_statistics(x[keep], v[keep], n_bins, lo, hi)
    stats = stats[stats["count"] >= max(min_count, 1)]
    (line,) = ax.plot(
        stats["center"], stats["mean"], "o-", markersize=3.5, label=label, color=color
    )
    if band:
        mean, sd, colour = stats["mean"], stats["std"], line.get_color()
        band = dict(color=colour, alpha=0.15, linewidth=0)
        ax.fill_between(stats["center"], mean - sd, mean + sd, **band)
    ax.set_xlim(lo, hi)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    return stats


def _texts(fig):
    from matplotlib.text import Text

    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.figure is fig
    ]


def fit_to_column(fig) -> None:
    """Bring ``fig`` to the column width and every text to :data:`MIN_FONT_PT`."""
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
    """Data series on ``ax``: lines in data coordinates, scatters, groups of bars."""
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


def _tick_overlaps(ax, axis, renderer, horizontal: bool) -> list[str]:
    """Pairs of shown tick labels of ``axis`` (centred inside ``ax``) that overlap."""
    lo, hi = (ax.bbox.x0, ax.bbox.x1) if horizontal else (ax.bbox.y0, ax.bbox.y1)
    spans = []
    for label in axis.get_ticklabels(which="both"):
        if not (label.get_visible() and label.get_text().strip()):
            continue
        box = label.get_window_extent(renderer)
        a, b = (box.x0, box.x1) if horizontal else (box.y0, box.y1)
        if lo - 1 <= (a + b) / 2 <= hi + 1:
            spans.append((a, b, label.get_text()))
    spans.sort()
    # half a pixel: glyph rounding, not an overlap
    return [
        f"{p[2]!r} and {q[2]!r}" for p, q in zip(spans, spans[1:]) if q[0] < p[1] - 0.5
    ]


def _labels(fig) -> list:
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel]
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title]
        texts += [ax.xaxis.label, ax.yaxis.label]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text()]


def _overlapping_labels(fig, renderer) -> list[str]:
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
    """What keeps ``fig`` from reading well (too wide, small text, several series
    without a legend, overlapping labels); empty when it reads well."""
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
            for pair in _tick_overlaps(ax, axis, renderer, horizontal):
                problems.append(f"{name!r}: overlapping tick labels {pair}")
    problems += _overlapping_labels(fig, renderer)
    return problems
