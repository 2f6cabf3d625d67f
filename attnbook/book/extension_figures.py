"""The figures of the small-dimension and XOR sections."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from attnbook.book.controls import Run, binned_panels, scores_of
from attnbook.book.plotting import PALETTE, panel_grid


def small_dim_figure(
    one_step: pd.DataFrame,
    heldout: np.ndarray,
    trained: Mapping[int, Sequence[Run]],
):
    """The one-step correlation against ``d`` and its prediction, and the scaled bin
    means of ``E_s . v``, ``E_s . p`` against the held-out importance per ``d``."""
    import seaborn as sns

    fig, axes = panel_grid(3, row_height=3.0)
    ax = axes[0]
    predicted, measured = one_step["r predicted (noise only)"], one_step["r measured"]
    ax.plot(one_step.index, predicted, color=PALETTE["theory"], label="predicted")
    dots = dict(color=PALETTE["negative"], zorder=3, label="measured")
    ax.scatter(one_step.index, measured, **dots)
    ax.set(xscale="log", xlabel="embedding dimension $d$", ylabel="correlation")
    ax.set(title="one step", ylim=(0, 1))
    ax.legend(loc="lower right")
    colors = sns.color_palette("viridis", len(trained))
    panels = []
    for score, title in (("E.v", r"$E_s\cdot v$"), ("E.p", r"$E_s\cdot p$")):
        series = {
            f"d = {d}": (heldout, scores_of(runs, "labels", score)[0], color)
            for (d, runs), color in zip(trained.items(), colors)
        }
        panels.append((f"trained: {title}", "score / std", series))
    binned_panels(panels, axes=axes[1:], scaled=True, min_count=1, legends=())
    handles, labels = axes[1].get_legend_handles_labels()
    where = dict(loc="center", bbox_to_anchor=(0.75, 0.25), ncols=2)
    fig.legend(handles, labels, title="embedding dimension", **where)
    return fig


def xor_figure(curves: pd.DataFrame, shown: Sequence[str], scores: pd.DataFrame):
    """Test accuracy of the ``shown`` models in training; attention scores after it."""
    import seaborn as sns

    fig, axes = panel_grid(2, one_column=True, row_height=2.7)
    curves = curves[curves["model"].isin(shown)]
    sns.lineplot(data=curves, x="step", y="test accuracy", hue="model", ax=axes[0])
    axes[0].axhline(0.75, ls=":", color="0.3")
    axes[0].set(ylim=(0.4, 1.02), title="test accuracy during training")
    sns.barplot(data=scores, x="token", y="attention score", hue="model", ax=axes[1])
    axes[1].set(title="<cls> score after training", xlabel="")
    for ax in axes:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
