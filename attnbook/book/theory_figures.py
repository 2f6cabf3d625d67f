"""The figures of the chapters on the model, the one gradient step and the selection by
the class token, each drawn by one function from the numbers the chapter computed.

Every function returns the figure (and what the chapter reads off it); the chapter
displays it.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnbook.book.plotting import PALETTE, panel_grid
from attnbook.models.attention import attention_weights

__all__ = ["attention_panels"]

CLASS_NAMES = {1: "positive", -1: "negative", 0: "neutral"}


def attention_panels(
    E: torch.Tensor,
    sequence: Sequence[int],
    token_class: np.ndarray,
    star: int,
    scales: Sequence[float],
):
    """One panel per scale ``c``: the attention weight of every position of
    ``sequence`` for ``p = c E[star]``, bars coloured by the class (+1, -1, 0) of the
    token the position holds. Returns the figure and the weights at every scale."""
    names = np.array([CLASS_NAMES[int(c)] for c in token_class])[sequence]
    fig, axes = panel_grid(
        len(scales), one_column=True, row_height=1.5, sharex=True, layout="constrained"
    )
    weights = []
    for ax, scale in zip(axes, scales):
        weights.append(attention_weights(E, scale * E[star], sequence).numpy())
        for name in ("positive", "negative", "neutral"):
            at = np.flatnonzero(names == name)
            if at.size:
                ax.bar(at, weights[-1][at], color=PALETTE[name], label=f"{name} token")
        ax.set(ylim=(0, 1), ylabel="weight", title=f"$c = {scale:g}$")
    axes[-1].set(xlabel="position in the sequence", xticks=range(len(sequence)))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    return fig, weights
