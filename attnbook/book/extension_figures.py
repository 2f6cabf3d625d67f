"""The figures of the small-dimension and XOR sections."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from attnbook.book.controls import Run, binned_panels, scores_of
from attnbook.book.plotting import PALETTE, panel_grid

__all__ = ["small_dim_figure", "xor_figure"]


def small_dim_figure(
    one_step: pd.DataFrame,
    heldout: np.ndarray,
    trained: Mapping[int, Sequence[Run]],
):
    """The one-step correlation against ``d`` beside its prediction, and the scaled bin
    means of ``E_s . v`` and ``E_s . p`` against the held-out importance per dimension.
    """
    import seaborn as sns

    fig, axes = panel_grid(3, row_height=3.0)
    ax = axes[0]
    ax.plot(
        one_step.index,
        one_step["r predicted (noise only)"],
        color=PALETTE["theory"],
        label="predicted",
    )
    ax.scatter(
        one_step.index,
        one_step["r measured"],
        color=PALETTE["negative"],
        zorder=3,
        label="measured",
    )
    ax.set(
        xscale="log",
        xlabel="embedding dimension $d$",
        ylabel="correlation",
        title="one step",
        ylim=(0, 1),
    )
    ax.legend(loc="lower right")
    colors = sns.color_palette("viridis", len(trained))
    panels = [
        (
            title,
            "score / std",
            {
                f"d = {d}": (heldout, scores_of(runs, "labels", score)[0], color)
                for (d, runs), color in zip(trained.items(), colors)
            },
        )
        for score, title in (
            ("E.v", r"trained: $E_s\cdot v$"),
            ("E.p", r"trained: $E_s\cdot p$"),
        )
    ]
    binned_panels(panels, axes=axes[1:], scaled=True, min_count=1, legends=())
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        title="embedding dimension",
        loc="center",
        bbox_to_anchor=(0.75, 0.25),
        ncols=2,
    )
    return fig


def xor_figure(curves: pd.DataFrame, shown: Sequence[str], scores: pd.DataFrame):
    """The test accuracy of the ``shown`` models along training, and the attention score
    of the signal and neutral tokens after training."""
    import seaborn as sns

    fig, axes = panel_grid(2, one_column=True, row_height=2.7)
    sns.lineplot(
        data=curves[curves["model"].isin(shown)],
        x="step",
        y="test accuracy",
        hue="model",
        ax=axes[0],
    )
    axes[0].axhline(0.75, ls=":", color="0.3")
    axes[0].set(ylim=(0.4, 1.02), title="test accuracy during training")
    sns.barplot(data=scores, x="token", y="attention score", hue="model", ax=axes[1])
    axes[1].set(title="<cls> score after training", xlabel="")
    for ax in axes:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
