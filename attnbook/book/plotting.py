"""One figure style for the whole book, the layouts that keep every panel legible, an
audit of a finished figure, and the book's recurring figures.

A figure of the book is drawn at the width of the text column
(:data:`COLUMN_WIDTH_IN`, shown at its natural size on a desktop screen, as a PNG of
twice the resolution for high-resolution screens), with every text at least
:data:`MIN_FONT_PT` points. Panels are laid out by :func:`panel_grid` (one or two
columns; three or four panels as a 2 x 2 grid). :func:`show` brings a figure to the
column width and the minimum font size, checks it with :func:`audit` (a legend for
every axes with several series, no overlapping tick labels) and displays it.
"""

from __future__ import annotations

import math
import warnings

import matplotlib
import numpy as np
import pandas as pd

from attnbook.book.figure_check import (
    COLUMN_WIDTH_IN,
    MIN_FONT_PT,
    audit,
    fit_to_column,
)
from attnbook.experiments.importance import bin_statistics

__all__ = [
    "setup",
    "PALETTE",
    "COLUMN_WIDTH_IN",
    "MIN_FONT_PT",
    "panel_grid",
    "fit_to_column",
    "audit",
    "show",
    "identity_scatter",
    "plot_binned",
]

PALETTE = {
    "positive": "#2a9d8f",
    "negative": "#e76f51",
    "neutral": "#8d99ae",
    "theory": "#264653",
}

#: CSS pixels per inch of a displayed figure (the browser's reference resolution).
SCREEN_DPI = 96
#: Height of one row of panels, in inches.
ROW_HEIGHT_IN = 2.9

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
    """Apply the book's figure style: the seaborn theme ``context`` with a white
    background (readable in dark mode), the column width, fonts of at least
    :data:`MIN_FONT_PT` points and, inside IPython, PNG figures at twice the screen
    resolution (sharp on high-resolution screens, shown at their natural size), every
    figure brought to the column width and the minimum font size
    (:func:`fit_to_column`) as it is displayed."""
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
    """Wrap IPython's PNG formatter of figures so that every displayed figure is first
    fitted to the column."""
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


# ------------------------------------------------------------------------------ layouts
def panel_grid(
    n_panels: int,
    *,
    row_height: float = ROW_HEIGHT_IN,
    sharex: bool = False,
    sharey: bool = False,
    one_column: bool = False,
    **subplots,
):
    """A figure at the column width with ``n_panels`` axes: one row for one or two
    panels, a 2 x 2 grid for three or four (the fourth cell left empty for three),
    two columns beyond; ``one_column=True`` stacks the panels in one column.

    Returns ``(fig, axes)`` with ``axes`` a list of the ``n_panels`` axes in reading
    order. Never three panels in a row: at the column width each would be a third of
    it, too narrow for its tick labels and legend. Other keywords go to
    ``plt.subplots`` (``layout="constrained"`` for a legend outside the axes).
    """
    import matplotlib.pyplot as plt

    if not isinstance(n_panels, (int, np.integer)) or n_panels < 1:
        raise ValueError(f"n_panels must be a positive integer, got {n_panels!r}")
    if row_height <= 0:
        raise ValueError(f"row_height must be positive, got {row_height!r}")
    ncols = 1 if one_column or n_panels == 1 else 2
    nrows = math.ceil(n_panels / ncols)
    fig, grid = plt.subplots(
        nrows,
        ncols,
        figsize=(COLUMN_WIDTH_IN, row_height * nrows),
        sharex=sharex,
        sharey=sharey,
        squeeze=False,
        **subplots,
    )
    axes = list(grid.ravel())
    for ax in axes[n_panels:]:
        ax.remove()
    return fig, axes[:n_panels]


def show(fig=None, *, strict: bool = True) -> None:
    """Display ``fig`` (default: the current figure) in the book's style: fitted to the
    column (:func:`fit_to_column`) and checked (:func:`audit`). With ``strict`` a
    problem the fitting cannot fix raises ``ValueError`` naming it; otherwise it is
    a warning."""
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


# -------------------------------------------------------------- the recurring figures
def identity_scatter(
    ax, predicted, measured, *, hue=None, palette=None, s: float = 12, **kwargs
):
    """Scatter ``measured`` against ``predicted`` on ``ax`` with the identity line ``y =
    x``."""
    import seaborn as sns

    x = np.asarray(predicted, dtype=float).ravel()
    y = np.asarray(measured, dtype=float).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError(
            "predicted and measured must be non-empty arrays of one length"
        )
    sns.scatterplot(
        x=x, y=y, hue=hue, palette=palette, s=s, ax=ax, linewidth=0, **kwargs
    )
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
    band_alpha: float = 0.15,
) -> pd.DataFrame:
    """Draw on ``ax`` the bin means of ``values`` against ``importance`` (``n_bins``
    equal bins of ``[lo, hi]``, :func:`bin_statistics`), with a band of one within-bin
    standard deviation (``band=False``: the line only) and a grey zero line. Tokens
    whose importance or value is NaN are left out; bins with fewer than ``min_count``
    tokens are not drawn. Returns the statistics of the drawn bins."""
    x = np.asarray(importance, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if x.shape != v.shape or x.ndim != 1:
        raise ValueError(
            f"importance and values must be 1-D arrays of one length, got {x.shape}, "
            f"{v.shape}"
        )
    keep = np.isfinite(x) & np.isfinite(v)
    if not keep.any():
        raise ValueError("no token has a finite importance and value")
    stats = bin_statistics(x[keep], v[keep], n_bins, lo, hi)
    stats = stats[stats["count"] >= max(min_count, 1)]
    (line,) = ax.plot(
        stats["center"], stats["mean"], "o-", markersize=3.5, label=label, color=color
    )
    if band:
        ax.fill_between(
            stats["center"],
            stats["mean"] - stats["std"],
            stats["mean"] + stats["std"],
            color=line.get_color(),
            alpha=band_alpha,
            linewidth=0,
        )
    ax.set_xlim(lo, hi)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    return stats
