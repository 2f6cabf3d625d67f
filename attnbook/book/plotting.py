"""One figure style for the whole book (seaborn theme, white background, fixed size and
dpi) and the book's recurring figures: measured against predicted, and binned scores
against token importance."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from attnbook.experiments.importance import bin_statistics, finite_array

__all__ = ["setup", "PALETTE", "identity_scatter", "plot_binned", "plot_binned_scores"]

PALETTE = {
    "positive": "#2a9d8f",
    "negative": "#e76f51",
    "neutral": "#8d99ae",
    "theory": "#264653",
}


def setup(context: str = "notebook") -> None:
    """Apply the book's plot style. White figure background keeps figures readable in
    dark mode."""
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette="deep")
    matplotlib.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
            "figure.dpi": 110,
            "savefig.dpi": 110,
            "figure.facecolor": "white",
            "savefig.facecolor": "white",
            "axes.facecolor": "white",
            "figure.autolayout": True,
        }
    )


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


def plot_binned_scores(
    importance: object,
    rows: "dict[str, tuple[object, object]]",
    *,
    n_bins: int = 20,
    lo: float = -1.0,
    hi: float = 1.0,
    xlabel: str = r"$P(1\mid s) - P(0\mid s)$",
    color: str = "#264653",
):
    """The binned figure: for each entry ``label -> (E.v, E.p)`` of ``rows`` one row of
    two panels (bin mean with a +-1 standard-deviation band of ``E_s.v`` and of
    ``E_s.p`` against the importance bins), and a last row with the number of tokens per
    bin. Returns the figure."""
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("rows must hold at least one (E.v, E.p) pair")
    x = finite_array(importance, "importance")
    n = len(rows)
    fig, axes = plt.subplots(
        n + 1,
        2,
        figsize=(9.0, 2.2 * n + 1.4),
        sharex=True,
        gridspec_kw={"height_ratios": [1.0] * n + [0.55]},
    )
    for r, (label, (value, cls)) in enumerate(rows.items()):
        for c, (vals, name) in enumerate(
            ((value, r"$E_s \cdot v$"), (cls, r"$E_s \cdot p$"))
        ):
            ax = axes[r, c]
            plot_binned(
                ax, x, vals, n_bins=n_bins, lo=lo, hi=hi, color=color, band_alpha=0.2
            )
            ax.set_title(f"{label}: {name}", fontsize=10)
    counts = bin_statistics(x, np.zeros_like(x), n_bins, lo, hi)
    for c in range(2):
        ax = axes[n, c]
        ax.bar(
            counts["center"],
            counts["count"],
            width=(hi - lo) / n_bins * 0.9,
            color="0.6",
        )
        ax.set_yscale("log")
        ax.set_ylabel("tokens")
        ax.set_xlabel(xlabel)
    return fig
