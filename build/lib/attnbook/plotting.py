"""One figure style for the whole book (seaborn theme, white background, fixed size and dpi)."""

from __future__ import annotations

import matplotlib

__all__ = ["setup", "PALETTE", "identity_scatter"]

PALETTE = {"positive": "#2a9d8f", "negative": "#e76f51", "neutral": "#8d99ae", "theory": "#264653"}


def setup(context: str = "notebook") -> None:
    """Apply the book's plot style. White figure background keeps figures readable in dark mode."""
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


def identity_scatter(ax, predicted, measured, *, hue=None, palette=None, s: float = 12, **kwargs):
    """Scatter ``measured`` against ``predicted`` on ``ax`` with the identity line ``y = x``."""
    import numpy as np
    import seaborn as sns

    x = np.asarray(predicted, dtype=float).ravel()
    y = np.asarray(measured, dtype=float).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError("predicted and measured must be non-empty arrays of one length")
    sns.scatterplot(x=x, y=y, hue=hue, palette=palette, s=s, ax=ax, linewidth=0, **kwargs)
    lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
    ax.plot([lo, hi], [lo, hi], color=PALETTE["theory"], lw=1, ls="--", label="identity")
    return ax
