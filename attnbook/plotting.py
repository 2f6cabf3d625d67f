"""One figure style for the whole book (seaborn theme, white background, fixed size and dpi)."""

from __future__ import annotations

import matplotlib

__all__ = ["setup", "PALETTE"]

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
